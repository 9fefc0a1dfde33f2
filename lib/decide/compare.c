/* Estimate vs measured: per-run errors and their summary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/validate.h"

static double rel(uint64_t est, uint64_t meas) {
  if (!meas) return NAN;
  return 100.0 * ((double)est - (double)meas) / (double)meas;
}

void vl_compare_fill(struct vl_compare_row *row, const struct vl_bill *bill) {
  const struct vl_measured_run *r = row->run;
  row->estimated = true;
  row->est_allocated = bill->peak_allocated_bytes;
  row->est_reserved = bill->peak_reserved_bytes;
  row->est_total = bill->total_bytes;
  /* where timing decides between two outcomes (bill->other), the run is
   * judged against the one its peak allocated lies nearer */
  const struct vl_bill_other *o = &bill->other;
  row->other_outcome = o->total_bytes && r->peak_allocated &&
                       fabs((double)o->peak_allocated_bytes - (double)r->peak_allocated) <
                           fabs((double)bill->peak_allocated_bytes - (double)r->peak_allocated);
  if (row->other_outcome) {
    row->est_allocated = o->peak_allocated_bytes;
    row->est_reserved = o->peak_reserved_bytes;
    row->est_total = o->total_bytes;
  }
  row->err_allocated = rel(row->est_allocated, r->peak_allocated);
  row->err_reserved = rel(row->est_reserved, r->peak_reserved);
  row->err_total = rel(row->est_total, r->nvml_process);
  if (r->shared_process) row->err_reserved = row->err_total = NAN;
  row->err_step = NAN;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median and maximum of |v|; sorts v in place. */
static void stats(double *v, int n, double *median, double *max) {
  for (int i = 0; i < n; i++)
    v[i] = fabs(v[i]);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  *median = n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : NAN;
  *max = n ? v[n - 1] : NAN;
}

vl_status vl_compare_summarize(const struct vl_compare_row *rows, size_t n, bool holdout,
                               double tol_allocated, double tol_total,
                               struct vl_compare_summary *s) {
  memset(s, 0, sizeof *s);
  double *a = vl_calloc(n + 1, sizeof *a), *t = vl_calloc(n + 1, sizeof *t);
  if (!a || !t) {
    vl_free(a);
    vl_free(t);
    return VL_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    const struct vl_compare_row *r = &rows[i];
    if (!r->estimated || r->run->holdout != holdout) continue;
    a[s->n++] = r->err_allocated;
    s->other_outcome += r->other_outcome;
    if (fabs(r->err_allocated) <= tol_allocated) s->within_allocated++;
    if (!isnan(r->err_total)) {
      t[s->n_total++] = r->err_total;
      if (fabs(r->err_total) <= tol_total) s->within_total++;
    }
  }
  stats(a, s->n, &s->median_allocated, &s->max_allocated);
  stats(t, s->n_total, &s->median_total, &s->max_total);
  vl_free(a);
  vl_free(t);
  return VL_OK;
}

vl_status vl_compare_time_summarize(const struct vl_compare_row *rows, size_t n, double tol,
                                    struct vl_time_summary *s) {
  memset(s, 0, sizeof *s);
  double *e = vl_calloc(n + 1, sizeof *e);
  if (!e) return VL_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (!rows[i].estimated || isnan(rows[i].err_step)) continue;
    e[s->n++] = rows[i].err_step;
    if (fabs(rows[i].err_step) <= tol) s->within++;
  }
  stats(e, s->n, &s->median, &s->max);
  vl_free(e);
  return VL_OK;
}

void vl_compare_tally(const struct vl_compare_row *rows, size_t n, double tol_allocated,
                      double tol_total, double tol_time, bool time_gate,
                      struct vl_compare_tally *t) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < n; i++) {
    const struct vl_compare_row *r = &rows[i];
    if (!r->estimated) continue;
    t->beyond += fabs(r->err_allocated) > tol_allocated ||
                 (!isnan(r->err_total) && fabs(r->err_total) > tol_total) ||
                 (time_gate && !isnan(r->err_step) && fabs(r->err_step) > tol_time);
    t->shared_process += r->run->shared_process;
    t->host_shared += r->run->host_shared && r->run->step_s > 0;
  }
}
