/* lib/measure/record.c: the run record reader and its summary. */
#include "testutil.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <jansson.h>
#include <unistd.h>

#include "measure/record_read.h"
#include "vramledger/record.h"
#include "vramledger/sampler.h"

static vl_status parse_file(const char *rel, struct vl_record *r, struct vl_err *err) {
  size_t len = 0;
  char *text = tu_read(rel, &len);
  vl_status s = vl_record_parse(text, len, r, err);
  free(text);
  return s;
}

static void sample_record(void **state) {
  (void)state;
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(parse_file("tests/data/records/sample.jsonl", &r, &err), VL_OK);
  assert_int_equal(r.n_samples, 60);
  assert_int_equal(r.n_marks, 3);
  assert_int_equal(r.n_gpus, 2);
  assert_true(r.exited);
  assert_int_equal(r.exit_status, 0);
  assert_false(r.truncated);
  assert_string_equal(r.command, "python train.py --batch 8");
  /* three "forward" stamps 2 s apart: 0.5 per second; none of a name: 0 */
  double med = -1;
  assert_int_equal(vl_record_mark_median_s(&r, "forward", &med), VL_OK);
  assert_true(fabs(1.0 / med - 0.5) < 1e-12);
  assert_true(fabs(med - 2.0) < 1e-12);
  assert_int_equal(vl_record_mark_median_s(&r, "no-such-mark", &med), VL_OK);
  assert_true(med == 0);
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&r, &s, f, &nf);
  double G = 1073741824.0;
  assert_true(fabs((double)s.peak_process_bytes - (20 + 2.95 + 17 + 2.95) * G) < 4);
  assert_true(fabs((double)s.context_bytes - 1.5 * G) < 4);
  assert_true(fabs(s.leak_bytes_per_s - G) < 0.03 * G); /* 0.05 GiB per 100 ms on two GPUs */
  vl_record_release(&r);
  /* a 2 GiB spike for 50 ms and the context coming up: no leak (H200) */
  assert_int_equal(parse_file("tests/data/records/h200-spike.jsonl", &r, &err), VL_OK);
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(nf, 0);
  assert_int_equal(s.peak_cuda_alloc_bytes, 2149580800ull);
  assert_true(s.peak_process_bytes > s.peak_cuda_alloc_bytes);
  vl_record_release(&r);
  assert_int_equal(parse_file("tests/data/records/sample.jsonl", &r, &err), VL_OK);
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(s.gpus_used, 2);
  assert_true(s.imbalance > 0.13 && s.imbalance < 0.14);
  /* the fullest GPU's peak, what one card holds (the tree's peak sums both):
   * 20 GiB + its process's 2.95 GiB context */
  assert_true(fabs((double)s.peak_gpu_bytes - (20 + 2.95) * G) < 0.01 * G);
  assert_true(s.peak_gpu_bytes < s.peak_process_bytes);
  const char *want[] = {"leak", "imbalance", "extra-contexts", "other-processes"};
  assert_int_equal(nf, 4);
  for (int i = 0; i < 4; i++)
    assert_string_equal(f[i].code, want[i]);
  vl_record_release(&r);
}

static void damaged_records(void **state) {
  (void)state;
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(parse_file("tests/data/records/truncated.jsonl", &r, &err), VL_OK);
  assert_true(r.truncated);
  assert_false(r.exited);
  assert_true(r.n_samples > 50);
  vl_record_release(&r);
  /* a line of no JSON mid-record: skipped, the rest read */
  assert_int_equal(parse_file("tests/data/records/garbage.jsonl", &r, &err), VL_OK);
  assert_int_equal(r.damaged, 1);
  assert_int_equal(r.damaged_line, 6);
  assert_true(r.n_samples > 5);
  vl_record_release(&r);
  assert_int_equal(parse_file("tests/data/records/schema3.jsonl", &r, &err), VL_EKEY);
  assert_int_equal(parse_file("tests/data/records/nometa.jsonl", &r, &err), VL_EKEY);
  assert_int_equal(vl_record_parse("", 0, &r, &err), VL_EKEY);
  /* a steady job: no finding */
  const char *steady =
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0,\"nvml\":\"ok\"}\n"
      "{\"type\":\"sample\",\"t_ns\":1,\"tree_bytes\":100,\"tree_procs\":1,\"cuda_alloc_bytes\":60}"
      "\n"
      "{\"type\":\"exit\",\"t_ns\":2,\"status\":0}\n";
  assert_int_equal(vl_record_parse(steady, strlen(steady), &r, &err), VL_OK);
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 9;
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(nf, 0);
  assert_int_equal(s.context_bytes, 40);
  vl_record_release(&r);
  /* two ranks, one a GPU (torchrun): not extra contexts; a third is */
  const char *ranks =
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0,\"nvml\":\"ok\"}\n"
      "{\"type\":\"sample\",\"t_ns\":1,\"gpus\":[{\"i\":0,\"used\":60,\"tree\":50},"
      "{\"i\":1,\"used\":60,\"tree\":50}],\"tree_bytes\":100,\"tree_procs\":2}\n"
      "{\"type\":\"exit\",\"t_ns\":2,\"status\":0}\n";
  assert_int_equal(vl_record_parse(ranks, strlen(ranks), &r, &err), VL_OK);
  nf = 0;
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(s.gpus_used, 2);
  assert_int_equal(nf, 0);
  vl_record_release(&r);
}

/* A write cut by the file size limit (EFBIG, as ENOSPC): the cut line is
 * not fused with the next, a gap line says what was lost, the record
 * reads whole. */
static void short_writes(void **state) {
  (void)state;
  char path[] = "/tmp/vl-test-record-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  struct vl_record_writer w = {.fd = open(path, O_WRONLY | O_APPEND)};
  struct vl_err err = {""};
  void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
  struct rlimit keep, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &keep), 0);
  const char *meta = "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}";
  assert_int_equal(vl_record_writer_put(&w, meta, &err), VL_OK);
  lim = keep;
  lim.rlim_cur = strlen(meta) + 1 + 10; /* 10 bytes of the next line go out */
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  const char *mark = "{\"type\":\"mark\",\"t_ns\":1,\"pid\":1,\"name\":\"a\"}";
  assert_int_equal(vl_record_writer_put(&w, mark, &err), VL_EIO);
  assert_int_equal(vl_record_writer_put(&w, mark, &err), VL_EIO);
  assert_int_equal(w.lost_bytes, 2 * (strlen(mark) + 1));
  assert_int_equal(w.err, EFBIG);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &keep), 0);
  assert_int_equal(vl_record_writer_put(&w, "{\"type\":\"exit\",\"t_ns\":2,\"status\":0}", &err),
                   VL_OK);
  signal(SIGXFSZ, old);
  close(w.fd);
  static char text[4096];
  FILE *in = fopen(path, "rb");
  assert_non_null(in);
  size_t len = fread(text, 1, sizeof text, in);
  fclose(in);
  unlink(path);
  struct vl_record r;
  assert_int_equal(vl_record_parse(text, len, &r, &err), VL_OK);
  assert_int_equal(r.gaps, 1);
  assert_int_equal(r.gap_bytes, 2 * (strlen(mark) + 1));
  assert_true(r.exited);
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&r, &s, f, &nf);
  bool said = false;
  for (int i = 0; i < nf; i++)
    said |= strcmp(f[i].code, "gap") == 0;
  assert_true(said);
  vl_record_release(&r);
}

/* Has finding code? */
static bool has_finding(const struct vl_record *r, const char *code) {
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(r, &s, f, &nf);
  for (int i = 0; i < nf; i++)
    if (strcmp(f[i].code, code) == 0) return true;
  return false;
}

/* A record past 64 MiB (8 GPUs at 100 ms pass that after 2.1 hours),
 * written here at run time: read whole, streamed, every sample in it;
 * its last line cut as a kill leaves it; the interposer's "lost" event
 * made findings. */
static void large_record(void **state) {
  (void)state;
  char path[] = "/tmp/vl-test-record-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "w");
  assert_non_null(out);
  fprintf(out, "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":1000,"
               "\"interval_ms\":100,\"nvml\":\"ok\",\"command\":[\"python\",\"train.py\"]}\n");
  const uint64_t G = 1ull << 30;
  static char filler[48u << 10];
  memset(filler, 'x', sizeof filler - 1);
  size_t n = 0, other = 0;
  uint64_t peak = 0;
  while (ftell(out) < (long)(65u << 20)) {
    uint64_t t = 1000 + (uint64_t)n * 100000000ull, tree = 0;
    fprintf(out, "{\"type\":\"sample\",\"t_ns\":%llu,\"gpus\":[", (unsigned long long)t);
    for (int g = 0; g < 8; g++) {
      uint64_t b = 20 * G + (uint64_t)((n * 7919 + (size_t)g * 104729) % 1000) * (1u << 20);
      tree += b;
      fprintf(out, "%s{\"i\":%d,\"used\":%llu,\"tree\":%llu,\"util\":97}", g ? "," : "", g,
              (unsigned long long)b, (unsigned long long)b);
    }
    fputs("],\"procs\":[", out);
    for (int g = 0; g < 8; g++)
      fprintf(out, "%s{\"pid\":%d,\"gpu\":%d,\"bytes\":%llu}", g ? "," : "", 40000 + g, g,
              (unsigned long long)(20 * G));
    fprintf(out,
            "],\"tree_bytes\":%llu,\"tree_procs\":8,\"other_bytes\":0,"
            "\"cuda_alloc_bytes\":%llu}\n",
            (unsigned long long)tree, (unsigned long long)(tree - 8 * G));
    if (tree > peak) peak = tree;
    n++;
    /* and a long line of a kind this reader does not know (a newer
     * writer's: skipped), which is cheaper to parse than samples */
    if (n % 10 == 0 && ++other) fprintf(out, "{\"type\":\"x-later\",\"text\":\"%s\"}\n", filler);
  }
  fputs("{\"type\":\"lost\",\"t_ns\":5,\"no_slot_procs\":44,\"uncounted_allocs\":7,"
        "\"slots\":256}\n",
        out);
  fputs("{\"type\":\"sample\",\"t_ns\":9", out); /* killed mid-write */
  assert_int_equal(fclose(out), 0);
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(vl_record_read(path, &r, &err), VL_OK);
  assert_int_equal(r.n_samples, n);
  assert_true(n > 10000);
  assert_true(r.truncated);
  assert_int_equal(r.lines, n + other + 3);
  assert_int_equal(r.lost_no_slot_procs, 44);
  assert_int_equal(r.lost_uncounted, 7);
  assert_true(has_finding(&r, "no-slot"));
  assert_true(has_finding(&r, "uncounted"));
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(s.peak_process_bytes, peak);
  assert_int_equal(s.gpus_used, 8);
  /* every line whole across the pieces the file is read in */
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(r.samples[i].t_ns, 1000 + (uint64_t)i * 100000000ull);
    assert_int_equal(r.samples[i].tree_procs, 8);
  }
  unlink(path);
  vl_record_release(&r);
  /* no such file: why, for the caller to say */
  assert_int_equal(vl_record_read(path, &r, &err), VL_EIO);
  assert_string_equal(err.msg, strerror(ENOENT));
}

/* The streamed reader reads what the reader of memory reads, whatever
 * the pieces the file comes in (lines cut anywhere, a buffer that grows
 * for a long line): the records of tests/data and damaged texts, in pieces
 * of 1, 2, 7, 64 and 4096 bytes. */
static void compare_streamed(const char *text, size_t len) {
  char path[] = "/tmp/vl-test-record-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, text, len), (ssize_t)len);
  struct vl_record m, r;
  struct vl_err em = {""}, er = {""};
  vl_status sm = vl_record_parse(text, len, &m, &em);
  static const size_t pieces[] = {1, 2, 7, 64, 4096};
  for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    vl_status sr = vl__record_read_fd(fd, pieces[k], &r, &er);
    assert_int_equal(sr, sm);
    assert_string_equal(er.msg, em.msg);
    if (sr != VL_OK) continue;
    assert_int_equal(r.lines, m.lines);
    assert_int_equal(r.truncated, m.truncated);
    assert_int_equal(r.gaps, m.gaps);
    assert_int_equal(r.n_samples, m.n_samples);
    assert_int_equal(r.n_marks, m.n_marks);
    assert_int_equal(r.n_steps, m.n_steps);
    assert_int_equal(r.n_phases, m.n_phases);
    assert_int_equal(r.desc_events, m.desc_events);
    assert_int_equal(r.desc_procs, m.desc_procs);
    assert_int_equal(r.desc_left, m.desc_left);
    assert_memory_equal(r.desc_pids, m.desc_pids, sizeof m.desc_pids);
    if (m.n_samples) assert_memory_equal(r.samples, m.samples, m.n_samples * sizeof *m.samples);
    vl_record_release(&r);
  }
  if (sm == VL_OK) vl_record_release(&m);
  close(fd);
}

/* descendants lines and the exit's descendants_left (docs/record.md);
 * a record without them reads as before */
static void descendants(void **state) {
  (void)state;
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(parse_file("tests/data/records/descendants-waited.jsonl", &r, &err), VL_OK);
  assert_int_equal(r.desc_events, 2); /* the job's workers, then one they started */
  assert_int_equal(r.desc_procs, 3 + 1);
  assert_int_equal(r.desc_t_ns - r.start_ns, 4100000000ull); /* the first line's */
  assert_true(r.desc_waited);
  assert_int_equal(r.n_desc_pids, 4);
  assert_int_equal(r.desc_pids[0], 201);
  assert_int_equal(r.desc_pids[3], 210);
  assert_int_equal(r.desc_left, 0);
  assert_int_equal(r.n_samples, 15); /* the samples after the job's exit count */
  vl_record_release(&r);
  assert_int_equal(parse_file("tests/data/records/descendants-left.jsonl", &r, &err), VL_OK);
  assert_int_equal(r.desc_events, 1);
  assert_false(r.desc_waited);
  assert_int_equal(r.desc_left, 3);
  vl_record_release(&r);
  assert_int_equal(parse_file("tests/data/records/sample.jsonl", &r, &err), VL_OK);
  assert_int_equal(r.desc_events, 0);
  assert_int_equal(r.desc_left, 0);
  assert_int_equal(r.n_desc_pids, 0);
  vl_record_release(&r);
  /* more PIDs than kept: the first VL_REC_MAX_DESC_PIDS; odd values skipped */
  char text[2048];
  size_t k = (size_t)snprintf(text, sizeof text,
                              "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n"
                              "{\"type\":\"descendants\",\"t_ns\":5,\"procs\":40,\"pids\":"
                              "[-1,\"x\",0");
  for (int i = 0; i < 40; i++)
    k += (size_t)snprintf(text + k, sizeof text - k, ",%d", 1000 + i);
  snprintf(text + k, sizeof text - k, "],\"waited\":true}\n");
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_int_equal(r.desc_procs, 40);
  assert_int_equal(r.n_desc_pids, VL_REC_MAX_DESC_PIDS);
  assert_int_equal(r.desc_pids[0], 1000);
  vl_record_release(&r);
}

static void streamed_pieces(void **state) {
  (void)state;
  static const char *const files[] = {"tests/data/records/sample.jsonl",
                                      "tests/data/records/truncated.jsonl",
                                      "tests/data/records/garbage.jsonl",
                                      "tests/data/records/nometa.jsonl",
                                      "tests/data/records/schema3.jsonl",
                                      "tests/data/records/h200-spike.jsonl",
                                      "tests/data/records/probe-synthetic.jsonl",
                                      "tests/data/records/h200-gpt2-probe.jsonl",
                                      "tests/data/records/descendants-waited.jsonl",
                                      "tests/data/records/descendants-left.jsonl"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    size_t len = 0;
    char *text = tu_read(files[i], &len);
    compare_streamed(text, len);
    free(text);
  }
  static const char *const texts[] = {
      "",
      "\n\n",
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}",
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n{\"type\":\"sa",
      /* a cut line and the writer's gap line; then one with nothing after */
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n{\"type\":\"ma\n"
      "{\"type\":\"gap\",\"t_ns\":1,\"lost_bytes\":9}\n{\"type\":\"exit\",\"t_ns\":2}\n",
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n{\"type\":\"ma\n",
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n{\"type\":\"ma\n\n"
      "{\"type\":\"gap\"}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    compare_streamed(texts[i], strlen(texts[i]));
}

/* A line that is not UTF-8 (a mark's name cut inside a character) or not
 * JSON, with no gap line after it: skipped, counted and named, the lines
 * around it read (it used to make the whole record unreadable). */
static void damaged_line_skipped(void **state) {
  (void)state;
  static const char text[] =
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0,\"nvml\":\"ok\"}\n"
      "{\"type\":\"mark\",\"t_ns\":1,\"pid\":1,\"name\":\"a\"}\n"
      "{\"type\":\"mark\",\"t_ns\":2,\"pid\":1,\"name\":\"\xc3\xa9\xc3\"}\n"
      "{\"type\":\"sample\",\"t_ns\":3,\"tree_bytes\":100,\"tree_procs\":1}\n"
      "{not json\n"
      "{\"type\":\"mark\",\"t_ns\":4,\"pid\":1,\"name\":\"b\"}\n"
      "{\"type\":\"exit\",\"t_ns\":5,\"status\":0}\n"
      "\xff\n";
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_int_equal(r.n_marks, 2);
  assert_int_equal(r.n_samples, 1);
  assert_true(r.exited);
  assert_false(r.truncated);
  assert_int_equal(r.damaged, 3);
  assert_int_equal(r.damaged_line, 3);
  assert_int_equal(r.gaps, 0);
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&r, &s, f, &nf);
  assert_int_equal(nf, 1);
  assert_string_equal(f[0].code, "damaged");
  assert_non_null(strstr(f[0].text, "3 lines"));
  assert_non_null(strstr(f[0].text, "line 3:"));
  vl_record_release(&r);
  compare_streamed(text, strlen(text));
  /* the meta line itself: nothing can be read */
  static const char bad_meta[] = "{\"type\":\"meta\",\"host\":\"\xc3\"}\n{\"type\":\"exit\"}\n";
  assert_int_equal(vl_record_parse(bad_meta, strlen(bad_meta), &r, &err), VL_EPARSE);
  assert_non_null(strstr(err.msg, "line 1:"));
}

/* Strings cut to the reader's fields stay whole characters: a name of 40
 * two-byte characters in a mark's 64 bytes ends on a boundary. */
static void strings_cut_whole(void **state) {
  (void)state;
  char text[1024];
  char name[81];
  for (int i = 0; i < 40; i++)
    memcpy(name + 2 * i, "\xc3\xa9", 2);
  name[80] = '\0';
  snprintf(text, sizeof text,
           "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n"
           "{\"type\":\"mark\",\"t_ns\":1,\"pid\":1,\"name\":\"%s\"}\n",
           name);
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_int_equal(r.n_marks, 1);
  size_t n = strlen(r.marks[0].name);
  assert_true(n < sizeof r.marks[0].name);
  assert_int_equal(n, 62); /* whole characters: 31, not 31 and a half */
  json_t *j = json_string(r.marks[0].name);
  assert_non_null(j); /* valid UTF-8 */
  json_decref(j);
  vl_record_release(&r);
}

/* A gap line that lost nothing counts only where it closed a cut line: in
 * a record of /1, whose writers shared one file, a writer that found
 * another's line in flight and closed it needlessly left an empty line and
 * a gap line over nothing (records of /2 have one writer a file). */
static void closed_in_flight(void **state) {
  (void)state;
  static const char meta[] = "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n";
  static const char closed[] =
      "\n{\"type\":\"gap\",\"t_ns\":1,\"lost_bytes\":0,\"error\":\"a line cut by another "
      "writer\"}\n{\"type\":\"exit\",\"t_ns\":2,\"status\":0}\n";
  char text[512];
  struct vl_record r;
  struct vl_err err = {""};
  snprintf(text, sizeof text, "%s{\"type\":\"mark\",\"t_ns\":1,\"pid\":1,\"name\":\"a\"}\n%s", meta,
           closed);
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_int_equal(r.gaps, 0);
  assert_int_equal(r.n_marks, 1);
  vl_record_release(&r);
  snprintf(text, sizeof text, "%s{\"type\":\"mark\",\"t_ns\":1,\"pi%s", meta, closed);
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_int_equal(r.gaps, 1);
  assert_int_equal(r.n_marks, 0);
  assert_true(r.exited);
  vl_record_release(&r);
}

/* The text of finding code, "" when there is none. */
static void finding_text(const struct vl_record *r, const char *code, char *out, size_t n) {
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(r, &s, f, &nf);
  snprintf(out, n, "%s", "");
  for (int i = 0; i < nf; i++)
    if (strcmp(f[i].code, code) == 0) snprintf(out, n, "%s", f[i].text);
}

/* A full disk (a gap line's ENOSPC): the gap finding says so, with the
 * bytes of the gap lines and of the lost event, and the samples the exit
 * event counts that the record lacks; without an exit line, the record
 * ends early. Another error is not a full disk. */
static void disk_full(void **state) {
  (void)state;
  static const char head[] = "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n"
                             "{\"type\":\"sample\",\"t_ns\":1,\"tree_bytes\":1}\n{\"type\":\"sam\n";
  char text[1024], said[256];
  struct vl_record r;
  struct vl_err err = {""};
  snprintf(text, sizeof text,
           "%s{\"type\":\"gap\",\"t_ns\":2,\"lost_bytes\":1000,\"error\":\"%s\"}\n"
           "{\"type\":\"lost\",\"t_ns\":3,\"record_lost_bytes\":24}\n"
           "{\"type\":\"exit\",\"t_ns\":4,\"status\":5,\"samples\":5}\n",
           head, strerror(ENOSPC));
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_true(r.disk_full);
  assert_int_equal(r.exit_samples, 5);
  finding_text(&r, "gap", said, sizeof said);
  assert_non_null(
      strstr(said, "the disk was full: at least 1 KiB (1024 bytes) and 4 sample lines"));
  assert_null(strstr(said, "ends early"));
  vl_record_release(&r);
  snprintf(text, sizeof text,
           "%s{\"type\":\"gap\",\"t_ns\":2,\"lost_bytes\":1000,\"error\":\"%s\"}\n{\"type", head,
           strerror(ENOSPC));
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_false(r.exited);
  finding_text(&r, "gap", said, sizeof said);
  assert_non_null(strstr(said, "the record ends early, its exit line unwritten"));
  finding_text(&r, "truncated", said, sizeof said);
  assert_string_equal(said, "the record's last line was cut: the disk was full");
  vl_record_release(&r);
  snprintf(text, sizeof text,
           "%s{\"type\":\"gap\",\"t_ns\":2,\"lost_bytes\":1000,\"error\":\"%s\"}\n", head,
           strerror(EFBIG));
  assert_int_equal(vl_record_parse(text, strlen(text), &r, &err), VL_OK);
  assert_false(r.disk_full);
  finding_text(&r, "gap", said, sizeof said);
  assert_non_null(strstr(said, "writes failed (a full disk or a file size limit)"));
  vl_record_release(&r);
}

/* cuda_alloc_max_bytes, the most between two samples (docs/record.md): the
 * peak of driver-allocated bytes is the most of those, where a line has
 * none the bytes at the sample; the sample scanner and jansson read the
 * same */
static void most_between_samples(void **state) {
  (void)state;
  const uint64_t M = 1u << 20;
  char text[1024];
  snprintf(text, sizeof text,
           "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0,\"nvml\":\"ok\"}\n"
           "{\"type\":\"sample\",\"t_ns\":1,\"tree_bytes\":%llu,\"cuda_alloc_bytes\":%llu}\n"
           "{\"type\":\"sample\",\"t_ns\":2,\"tree_bytes\":%llu,\"cuda_alloc_bytes\":%llu,"
           "\"cuda_alloc_max_bytes\":%llu}\n"
           "{\"type\":\"sample\",\"cuda_alloc_max_bytes\":%llu,\"t_ns\":3,\"tree_bytes\":%llu,"
           "\"cuda_alloc_bytes\":%llu}\n"
           "{\"type\":\"exit\",\"t_ns\":4,\"status\":0}\n",
           (unsigned long long)(600 * M), (unsigned long long)(64 * M),
           (unsigned long long)(600 * M), (unsigned long long)(64 * M),
           (unsigned long long)(80 * M), (unsigned long long)(1 * M), (unsigned long long)(600 * M),
           (unsigned long long)(70 * M));
  struct vl_record r[2];
  struct vl_err err = {""};
  for (int k = 0; k < 2; k++) { /* the scanner, then jansson alone */
    vl__record_scan = k == 0;
    assert_int_equal(vl_record_parse(text, strlen(text), &r[k], &err), VL_OK);
    vl__record_scan = true;
    assert_int_equal(r[k].n_samples, 3);
    assert_int_equal(r[k].samples[0].cuda_alloc_max_bytes, 64 * M); /* none: the bytes */
    assert_int_equal(r[k].samples[1].cuda_alloc_max_bytes, 80 * M);
    assert_int_equal(r[k].samples[2].cuda_alloc_max_bytes, 70 * M); /* below: the bytes */
    struct vl_run_summary s;
    struct vl_finding f[VL_MAX_FINDINGS];
    int nf = 0;
    vl_record_summarize(&r[k], &s, f, &nf);
    assert_int_equal(s.peak_cuda_alloc_bytes, 80 * M);
    assert_int_equal(s.context_bytes, 600 * M - 64 * M); /* at the process peak, as before */
  }
  assert_memory_equal(r[0].samples, r[1].samples, 3 * sizeof *r[0].samples);
  vl_record_release(&r[0]);
  vl_record_release(&r[1]);
  compare_streamed(text, strlen(text));
}

/* A line over VL_RECORD_MAX_LINE: refused with its number, not read into
 * memory without end. */
static void overlong_line(void **state) {
  (void)state;
  char path[] = "/tmp/vl-test-record-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *meta = "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":0}\n";
  assert_int_equal(write(fd, meta, strlen(meta)), (ssize_t)strlen(meta));
  char *big = malloc(1u << 20);
  assert_non_null(big);
  memset(big, ' ', 1u << 20);
  for (unsigned i = 0; i < (VL_RECORD_MAX_LINE >> 20) + 1; i++)
    assert_int_equal(write(fd, big, 1u << 20), 1 << 20);
  free(big);
  close(fd);
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(vl_record_read(path, &r, &err), VL_ERANGE);
  unlink(path);
  assert_string_equal(err.msg, "line 2: longer than 64 MiB (not a record?)");
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* A record of schema /2: the record's own file and one stream a writer
 * (docs/record.md, "Streams"), read as one, merged by t_ns. Read one file
 * after another, the processes' live bytes would never add up to 150 and
 * the marks would come a before b. */
static void streams_merged(void **state) {
  (void)state;
  char dir[] = "/tmp/vl-test-streams-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[600], rec[600];
  snprintf(sub, sizeof sub, "%s/record.d", dir);
  snprintf(rec, sizeof rec, "%s/record.jsonl", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  put_file(
      dir, "record.jsonl",
      "{\"type\":\"meta\",\"schema\":\"vramledger.run/2\",\"t_ns\":1,\"nvml\":\"ok\"}\n"
      "{\"type\":\"sample\",\"t_ns\":10,\"tree_bytes\":1,\"tree_procs\":1,\"cuda_alloc_bytes\":0}\n"
      "{\"type\":\"sample\",\"t_ns\":70,\"tree_bytes\":2,\"tree_procs\":1,\"cuda_alloc_bytes\":0}\n"
      "{\"type\":\"exit\",\"t_ns\":200,\"status\":0}\n");
  put_file(sub, "interposer.11.jsonl",
           "{\"type\":\"alloc\",\"t_ns\":15,\"pid\":11,\"live\":100,\"peak\":100}\n"
           "{\"type\":\"mark\",\"t_ns\":35,\"pid\":11,\"name\":\"a\"}\n"
           "{\"type\":\"alloc\",\"t_ns\":55,\"pid\":11,\"live\":0,\"peak\":100}\n");
  put_file(sub, "interposer.12.jsonl",
           "{\"type\":\"mark\",\"t_ns\":25,\"pid\":12,\"name\":\"b\"}\n"
           "{not json\n"
           "{\"type\":\"alloc\",\"t_ns\":45,\"pid\":12,\"live\":50,\"peak\":50}\n"
           "{\"type\":\"alloc\",\"t_ns\":65,\"pid\":12,\"live\":0,\"peak\":50}\n"
           "{\"type\":\"mark\",\"t_ns\":66,\"pid\":12,\"na");
  put_file(sub, ".probe.13.jsonl.tmp",
           "{\"type\":\"mark\",\"t_ns\":5,\"pid\":13,\"name\":\"x\"}\n");
  put_file(sub, "notes.txt", "not a stream\n");
  struct vl_record r;
  struct vl_err err = {""};
  assert_int_equal(vl_record_read(rec, &r, &err), VL_OK);
  assert_int_equal(r.n_marks, 2);
  assert_string_equal(r.marks[0].name, "b");
  assert_string_equal(r.marks[1].name, "a");
  assert_int_equal(r.alloc_peak_bytes, 150);
  assert_int_equal(r.n_samples, 2);
  assert_true(r.exited);
  assert_true(r.truncated); /* a stream's last line, cut */
  assert_int_equal(r.damaged, 1);
  assert_int_equal(r.damaged_line, 2);
  assert_string_equal(r.damaged_file, "record.d/interposer.12.jsonl");
  assert_int_equal(r.lines, 4 + 3 + 5);
  vl_record_release(&r);
  /* the record's own file read alone (vl_record_parse, a copy of it): the
   * streams' events are not there */
  static char text[4096];
  FILE *f = fopen(rec, "rb");
  assert_non_null(f);
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  assert_int_equal(vl_record_parse(text, len, &r, &err), VL_OK);
  assert_int_equal(r.n_marks, 0);
  vl_record_release(&r);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  char sdir[64];
  vl_record_streams_dir("run/record.jsonl", sdir, sizeof sdir);
  assert_string_equal(sdir, "run/record.d");
  vl_record_streams_dir("mine.log", sdir, sizeof sdir);
  assert_string_equal(sdir, "mine.log.d");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(sample_record),
                                     cmocka_unit_test(damaged_records),
                                     cmocka_unit_test(short_writes),
                                     cmocka_unit_test(large_record),
                                     cmocka_unit_test(streamed_pieces),
                                     cmocka_unit_test(overlong_line),
                                     cmocka_unit_test(descendants),
                                     cmocka_unit_test(closed_in_flight),
                                     cmocka_unit_test(disk_full),
                                     cmocka_unit_test(most_between_samples),
                                     cmocka_unit_test(damaged_line_skipped),
                                     cmocka_unit_test(strings_cut_whole),
                                     cmocka_unit_test(streams_merged)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
