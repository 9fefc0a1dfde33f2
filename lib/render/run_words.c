/* What a run record says about itself, in words, for every format of the
 * run report (report.c: text, Markdown, JSON; html_run.c: the page): how
 * it was sampled, how long it ran, the processes it left. Both renderers
 * call down into this file and never into each other. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/record.h"

double vl__since_s(const struct vl_record *r, uint64_t t) {
  return t > r->start_ns ? (double)(t - r->start_ns) * 1e-9 : 0;
}

/* Append to buf[0..n) at *w, never past its end. */
static void put(char *buf, size_t n, size_t *w, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *w, const char *fmt, ...) {
  if (*w >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *w, n - *w, fmt, ap);
  va_end(ap);
  *w = k < 0 ? n : vl__min(*w + (size_t)k, n);
}

bool vl__run_nvml_sampled(const struct vl_record *r) { return r->n_samples > 0; }

void vl__run_sampling_words(const struct vl_record *r, const struct vl_run_summary *s, char *buf,
                            size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  if (r->n_samples)
    put(buf, n, &w, "%zu samples every %llu ms", r->n_samples, (unsigned long long)r->interval_ms);
  else if (strncmp(r->nvml, "not sampled", 11) == 0) /* attach(): the probe wrote it */
    put(buf, n, &w, "%s", r->nvml);
  else if (strncmp(r->nvml, "ok", 2) != 0)
    put(buf, n, &w, "not sampled: NVML was not available (%s)", r->nvml);
  else
    put(buf, n, &w, "not sampled: the record has no sample lines");
  double d = (double)s->duration_ns * 1e-9;
  if (d > 0 && d < 0.05) /* a CPU test's record: not "0.0 s" */
    put(buf, n, &w, ", %.1f ms", d * 1e3);
  else
    put(buf, n, &w, ", %.1f s", d);
}

void vl__run_descendants_words(const struct vl_record *r, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  if (!r->desc_events) return;
  unsigned k = r->desc_procs;
  put(buf, n, &w, "%u process%s outlived the job's own at %.1f s", k, k == 1 ? "" : "es",
      vl__since_s(r, r->desc_t_ns));
  char pids[160]; /* as run says them */
  vl__pid_list(pids, sizeof pids, r->desc_pids, r->n_desc_pids,
               k > vl__min(r->n_desc_pids, VL__PIDS_SHOWN));
  if (*pids) put(buf, n, &w, " (%s)", pids);
  if (!r->desc_waited)
    put(buf, n, &w, "; run did not wait for %s (--no-wait-descendants)", k == 1 ? "it" : "them");
  else if (r->exited)
    put(buf, n, &w, "; run waited for %s until %.1f s", k == 1 ? "it" : "them",
        vl__since_s(r, r->end_ns));
  else
    put(buf, n, &w, "; run was waiting for %s where the record ends", k == 1 ? "it" : "them");
}

void vl__run_left_words(const struct vl_record *r, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  if (r->desc_left)
    put(buf, n, &w,
        "%u %s still running when the record closed: their memory after that is not in "
        "this record",
        r->desc_left, r->desc_left == 1 ? "was" : "were");
}

void vl__run_end_words(const struct vl_record *r, char *buf, size_t n) {
  if (r->exited)
    snprintf(buf, n, "exit status %d", r->exit_status);
  else
    snprintf(buf, n, "no exit line (%s)",
             r->disk_full ? "the record ends early: the disk was full" : "the run was killed");
}
