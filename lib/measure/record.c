/* Reader of run records (schema vramledger.run/1) and their summary. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/record.h"
#include "probe_events.h"

#define MAX_SAMPLES (1u << 24) /* 46 hours at 100 Hz */
#define MAX_PIDS 256

struct alloc_state {
  unsigned pid[MAX_PIDS];
  uint64_t live[MAX_PIDS];
  uint64_t lib_live[MAX_PIDS][VL_REC_MAX_LIBS]; /* per process, per library */
  unsigned n;
};

/* An alloc event's "libs": each library's live bytes in process k; the
 * record keeps the most each library held at once over all processes. */
static void alloc_libs(json_t *libs, struct alloc_state *as, unsigned k, struct vl_record *r) {
  const char *name;
  json_t *v;
  json_object_foreach(libs, name, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) continue;
    unsigned i = 0;
    while (i < r->n_alloc_libs && strcmp(r->alloc_libs[i].name, name) != 0)
      i++;
    if (i == r->n_alloc_libs) {
      if (i == VL_REC_MAX_LIBS) continue;
      snprintf(r->alloc_libs[i].name, sizeof r->alloc_libs[i].name, "%s", name);
      r->n_alloc_libs++;
    }
    as->lib_live[k][i] = (uint64_t)json_integer_value(v);
    uint64_t sum = 0;
    for (unsigned p = 0; p < as->n; p++)
      sum += as->lib_live[p][i];
    if (sum > r->alloc_libs[i].peak) r->alloc_libs[i].peak = sum;
  }
}

static vl_status meta(json_t *o, struct vl_record *r, size_t line, struct vl_err *err) {
  vl__rec_str(r->schema, sizeof r->schema, o, "schema");
  if (strncmp(r->schema, "vramledger.run/", 15) != 0)
    return vl__fail(err, VL_EKEY, "line %zu: not a vramledger run record (schema '%s')", line,
                    r->schema);
  if (strcmp(r->schema, VL_RECORD_SCHEMA) != 0)
    return vl__fail(err, VL_EKEY, "line %zu: record schema '%s'; this vramledger reads '%s'", line,
                    r->schema, VL_RECORD_SCHEMA);
  vl__rec_str(r->host, sizeof r->host, o, "host");
  vl__rec_str(r->driver, sizeof r->driver, o, "driver");
  vl__rec_str(r->nvml, sizeof r->nvml, o, "nvml");
  r->start_ns = vl__rec_u(o, "t_ns");
  r->start_unix_ms = vl__rec_u(o, "start_unix_ms");
  r->interval_ms = vl__rec_u(o, "interval_ms");
  json_t *cmd = json_object_get(o, "command");
  size_t i, used = 0;
  json_t *a;
  json_array_foreach(cmd, i, a) {
    if (!json_is_string(a)) continue;
    int w = snprintf(r->command + used, sizeof r->command - used, "%s%s", i ? " " : "",
                     json_string_value(a));
    if (w < 0 || (size_t)w >= sizeof r->command - used) break;
    used += (size_t)w;
  }
  json_t *gpus = json_object_get(o, "gpus");
  json_array_foreach(gpus, i, a) {
    if (i >= VL_RECORD_MAX_GPUS) break;
    struct vl_rec_gpu *g = &r->gpus[i];
    g->index = (unsigned)vl__rec_u(a, "index");
    vl__rec_str(g->name, sizeof g->name, a, "name");
    vl__rec_str(g->uuid, sizeof g->uuid, a, "uuid");
    g->total_bytes = vl__rec_u(a, "total_bytes");
    r->n_gpus = (unsigned)i + 1;
  }
  return VL_OK;
}

static vl_status event(json_t *o, const char *type, struct vl_record *r, size_t *cap_s,
                       size_t *cap_m, struct alloc_state *as, struct vl__probe_caps *pc,
                       size_t line, struct vl_err *err) {
  bool probe_event = false;
  vl_status pst = vl__probe_event(o, type, r, pc, line, err, &probe_event);
  if (probe_event) return pst;
  if (strcmp(type, "sample") == 0) {
    if (vl__rec_grow((void **)&r->samples, cap_s, r->n_samples, sizeof *r->samples, MAX_SAMPLES))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many samples", line);
    struct vl_rec_sample *s = &r->samples[r->n_samples++];
    memset(s, 0, sizeof *s);
    s->t_ns = vl__rec_u(o, "t_ns");
    s->tree_bytes = vl__rec_u(o, "tree_bytes");
    s->other_bytes = vl__rec_u(o, "other_bytes");
    s->cuda_alloc_bytes = vl__rec_u(o, "cuda_alloc_bytes");
    s->tree_procs = (unsigned)vl__rec_u(o, "tree_procs");
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(o, "gpus"), i, g) {
      unsigned k = (unsigned)vl__rec_u(g, "i");
      if (k >= VL_RECORD_MAX_GPUS) continue;
      s->gpu_used[k] = vl__rec_u(g, "used");
      s->gpu_tree[k] = vl__rec_u(g, "tree");
    }
  } else if (strcmp(type, "mark") == 0) {
    if (vl__rec_grow((void **)&r->marks, cap_m, r->n_marks, sizeof *r->marks, 1u << 22))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many marks", line);
    struct vl_rec_mark *m = &r->marks[r->n_marks++];
    m->t_ns = vl__rec_u(o, "t_ns");
    m->pid = (unsigned)vl__rec_u(o, "pid");
    vl__rec_str(m->name, sizeof m->name, o, "name");
  } else if (strcmp(type, "alloc") == 0) {
    unsigned pid = (unsigned)vl__rec_u(o, "pid");
    unsigned k = 0;
    while (k < as->n && as->pid[k] != pid)
      k++;
    if (k == as->n && as->n < MAX_PIDS) as->pid[as->n++] = pid;
    if (k < MAX_PIDS) as->live[k] = vl__rec_u(o, "live");
    json_t *libs = json_object_get(o, "libs");
    if (k < MAX_PIDS && json_is_object(libs)) alloc_libs(libs, as, k, r);
    uint64_t sum = 0;
    for (unsigned i = 0; i < as->n; i++)
      sum += as->live[i];
    uint64_t peak = vl__rec_u(o, "peak");
    if (sum > r->alloc_peak_bytes) r->alloc_peak_bytes = sum;
    if (peak > r->alloc_peak_bytes && as->n == 1) r->alloc_peak_bytes = peak;
    r->alloc_pids = as->n;
  } else if (strcmp(type, "gap") == 0) {
    r->gaps++;
    r->gap_bytes += vl__rec_u(o, "lost_bytes");
  } else if (strcmp(type, "exit") == 0) {
    r->exited = true;
    json_t *st = json_object_get(o, "status");
    r->exit_status = json_is_integer(st) ? (int)json_integer_value(st) : -1;
    r->end_ns = vl__rec_u(o, "t_ns");
  }
  return VL_OK; /* unknown types are skipped: newer writers may add some */
}

vl_status vl_record_parse(const char *text, size_t len, struct vl_record *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  size_t cap_s = 0, cap_m = 0, line = 0, pos = 0;
  struct vl__probe_caps pc = {0};
  struct alloc_state as;
  memset(&as, 0, sizeof as);
  vl_status st = VL_OK;
  bool have_meta = false;
  while (pos < len) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    pos += n + (nl ? 1 : 0);
    line++;
    if (n == 0) continue;
    json_error_t jerr;
    json_t *o = json_loadb(start, n, 0, &jerr);
    if (!o || !json_is_object(o)) {
      json_decref(o);
      if (!nl) { /* the last line, cut by a crash: everything before it stands */
        r->truncated = true;
        break;
      }
      /* a line cut by a failed write: the writer's gap line follows it */
      static const char gap[] = "{\"type\":\"gap\"";
      if (len - pos >= sizeof gap - 1 && memcmp(text + pos, gap, sizeof gap - 1) == 0) continue;
      st = vl__fail(err, VL_EPARSE, "line %zu: %s", line, o ? "expected a JSON object" : jerr.text);
      break;
    }
    json_t *t = json_object_get(o, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : "";
    if (!have_meta) {
      if (strcmp(type, "meta") != 0) {
        st = vl__fail(err, VL_EKEY, "line %zu: a record starts with its 'meta' line", line);
      } else {
        st = meta(o, r, line, err);
        have_meta = true;
      }
    } else {
      st = event(o, type, r, &cap_s, &cap_m, &as, &pc, line, err);
    }
    json_decref(o);
    if (st != VL_OK) break;
  }
  r->lines = line;
  if (st == VL_OK && !have_meta)
    st = vl__fail(err, VL_EKEY, "the record is empty (no 'meta' line)");
  if (st != VL_OK) vl_record_release(r);
  return st;
}

void vl_record_release(struct vl_record *r) {
  if (!r) return;
  vl_free(r->samples);
  vl_free(r->marks);
  r->samples = NULL;
  r->marks = NULL;
  vl__probe_release(r);
  r->n_samples = r->n_marks = 0;
}

/* printf-checked: every finding's format matches its arguments (a fuzzer
 * found "%.0s" given a double here) */
static void add_finding(struct vl_finding *f, int *n, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_finding(struct vl_finding *f, int *n, const char *code, const char *fmt, ...) {
  if (*n >= VL_MAX_FINDINGS) return;
  snprintf(f[*n].code, sizeof f[*n].code, "%s", code);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f[*n].text, sizeof f[*n].text, fmt, ap);
  va_end(ap);
  (*n)++;
}

void vl_record_summarize(const struct vl_record *r, struct vl_run_summary *s, struct vl_finding *f,
                         int *nf) {
  memset(s, 0, sizeof *s);
  *nf = 0;
  uint64_t gpu_peak[VL_RECORD_MAX_GPUS] = {0};
  for (size_t i = 0; i < r->n_samples; i++) {
    const struct vl_rec_sample *x = &r->samples[i];
    if (x->tree_bytes > s->peak_process_bytes) {
      s->peak_process_bytes = x->tree_bytes;
      s->peak_process_t_ns = x->t_ns > r->start_ns ? x->t_ns - r->start_ns : 0;
      s->context_bytes = vl__sub0(x->tree_bytes, x->cuda_alloc_bytes);
    }
    if (x->cuda_alloc_bytes > s->peak_cuda_alloc_bytes)
      s->peak_cuda_alloc_bytes = x->cuda_alloc_bytes;
    if (x->other_bytes > s->peak_other_bytes) s->peak_other_bytes = x->other_bytes;
    if (x->tree_procs > s->max_tree_procs) s->max_tree_procs = x->tree_procs;
    for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++)
      if (x->gpu_tree[g] > gpu_peak[g]) gpu_peak[g] = x->gpu_tree[g];
  }
  if (r->alloc_peak_bytes > s->peak_cuda_alloc_bytes)
    s->peak_cuda_alloc_bytes = r->alloc_peak_bytes;
  uint64_t last = r->exited ? r->end_ns : (r->n_samples ? r->samples[r->n_samples - 1].t_ns : 0);
  s->duration_ns = last > r->start_ns ? last - r->start_ns : 0;

  /* leak: the floor of the job's memory rises through the run. Four
   * windows after the job first holds GPU memory (so the CUDA context
   * appearing is not growth); the minimum of each must rise, window after
   * window, by more than 5 % of the peak in all. A spike or a context
   * coming up is not a leak (measured: bench/results/run-interposer) */
  size_t first = 0;
  while (first < r->n_samples && r->samples[first].tree_bytes == 0)
    first++;
  size_t m = r->n_samples - first;
  if (m >= 20) {
    uint64_t floor[4];
    double tmid[4];
    for (int w = 0; w < 4; w++) {
      size_t a = first + m * (size_t)w / 4, b = first + m * (size_t)(w + 1) / 4;
      floor[w] = UINT64_MAX;
      for (size_t i = a; i < b; i++)
        floor[w] = vl__min(floor[w], r->samples[i].tree_bytes);
      tmid[w] = (double)(r->samples[(a + b) / 2].t_ns - r->start_ns) * 1e-9;
    }
    bool rising = floor[0] < floor[1] && floor[1] < floor[2] && floor[2] < floor[3];
    double grown = (double)(floor[3] - floor[0]);
    if (rising && tmid[3] > tmid[0]) s->leak_bytes_per_s = grown / (tmid[3] - tmid[0]);
    if (rising && grown > 0.05 * (double)s->peak_process_bytes)
      add_finding(f, nf, "leak",
                  "memory grows steadily: its floor rises %.1f MiB/s (%.0f MiB in all); look for "
                  "tensors kept across steps (losses without .item(), growing lists, caches)",
                  s->leak_bytes_per_s / 1048576.0, grown / 1048576.0);
  }
  /* imbalance across the GPUs the job uses (> 5 %) */
  uint64_t hi = 0, lo = UINT64_MAX;
  for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++) {
    if (!gpu_peak[g]) continue;
    s->gpus_used++;
    hi = vl__max(hi, gpu_peak[g]);
    lo = vl__min(lo, gpu_peak[g]);
  }
  s->peak_gpu_bytes = s->gpus_used ? hi : 0;
  if (s->gpus_used > 1) {
    s->imbalance = (double)(hi - lo) / (double)hi;
    if (s->imbalance > 0.05)
      add_finding(f, nf, "imbalance",
                  "GPUs differ by %.1f %% in peak memory (%.0f MiB): the largest rank sets the "
                  "card you need",
                  100.0 * s->imbalance, (double)(hi - lo) / 1048576.0);
  }
  /* one process per GPU is a rank (torchrun); more are extra contexts
   * (the TP job on 2 H200s, one rank a GPU, was flagged before this:
   * bench/results/nccl-run/) */
  unsigned gpus = s->gpus_used ? s->gpus_used : 1;
  if (s->max_tree_procs > gpus)
    add_finding(f, nf, "extra-contexts",
                "%u processes of the job held GPU memory at once on %u GPU%s: each CUDA context "
                "costs ~0.5 GiB (DataLoader workers touching CUDA?)",
                s->max_tree_procs, gpus, gpus == 1 ? "" : "s");
  if (s->peak_other_bytes)
    add_finding(f, nf, "other-processes", "other processes held up to %.0f MiB on the job's GPUs",
                (double)s->peak_other_bytes / 1048576.0);
  if (strncmp(r->nvml, "ok", 2) != 0)
    add_finding(f, nf, "no-nvml", "no GPU samples: NVML was not available");
  if (r->gaps)
    add_finding(f, nf, "gap",
                "the record has %u gap%s: %.0f KiB of it could not be written (disk full or a "
                "file size limit); the numbers around them may miss a peak",
                r->gaps, r->gaps == 1 ? "" : "s", (double)r->gap_bytes / 1024.0);
  if (r->truncated)
    add_finding(f, nf, "truncated",
                "the record's last line was cut: the job or vramledger died mid-write");
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

double vl_record_mark_median_s(const struct vl_record *rec, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < rec->n_marks; i++)
    n += !strcmp(rec->marks[i].name, name);
  if (n < 2) return 0;
  uint64_t *t = vl_malloc(n * sizeof *t);
  if (!t) return 0;
  size_t k = 0;
  for (size_t i = 0; i < rec->n_marks; i++)
    if (!strcmp(rec->marks[i].name, name)) t[k++] = rec->marks[i].t_ns;
  qsort(t, n, sizeof *t, cmp_u64);
  for (size_t i = 0; i + 1 < n; i++) /* intervals, in place */
    t[i] = t[i + 1] - t[i];
  qsort(t, n - 1, sizeof *t, cmp_u64);
  size_t m = n - 1;
  double med = m % 2 ? (double)t[m / 2] : ((double)t[m / 2 - 1] + (double)t[m / 2]) / 2;
  vl_free(t);
  return med * 1e-9;
}
