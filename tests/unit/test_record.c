/* lib/measure/record.c: the run record reader and its summary. */
#include "testutil.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

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
  assert_true(fabs(1.0 / vl_record_mark_median_s(&r, "forward") - 0.5) < 1e-12);
  assert_true(fabs(vl_record_mark_median_s(&r, "forward") - 2.0) < 1e-12);
  assert_true(vl_record_mark_median_s(&r, "no-such-mark") == 0);
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
  assert_int_equal(parse_file("tests/data/records/garbage.jsonl", &r, &err), VL_EPARSE);
  assert_non_null(strstr(err.msg, "line 6"));
  assert_null(r.samples);
  assert_int_equal(parse_file("tests/data/records/schema2.jsonl", &r, &err), VL_EKEY);
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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(sample_record),
                                     cmocka_unit_test(damaged_records),
                                     cmocka_unit_test(short_writes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
