/* The audit's clauses: a finished run against its commitment, line by
 * line (docs/cmd/audit.md). Decides only; lib/render/audit.c shows it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vramledger/audit.h"

/* |measured - committed| <= tolerance x committed, both known */
static void judge(struct vl_audit_clause *l, double committed, double measured, double tol) {
  l->committed_known = l->measured_known = l->compared = true;
  l->committed = committed;
  l->measured = measured;
  l->off = (measured - committed) / committed;
  l->review = fabs(l->off) > tol;
}

/* The card and count: the record's device names read against the catalog. */
static void gpus_clause(const struct vl_commitment *c, const struct vl_audit_run *r,
                        const struct vl_catalog *cat, struct vl_audit *a) {
  struct vl_audit_clause *l = &a->line[VL_AUDIT_GPUS];
  snprintf(a->want, sizeof a->want, "%llu x %s", (unsigned long long)c->gpus, c->gpu);
  struct vl_drift d[2];
  int n = vl_commitment_hw_diff(c->gpu, c->gpu_memory_bytes, c->gpus, cat, &r->hw, d, 2);
  const struct vl_gpu *g = r->hw.count && cat ? vl_catalog_match_device(cat, r->hw.device) : NULL;
  if (r->hw.count)
    snprintf(a->ran, sizeof a->ran, "%u x %s%s", r->hw.count, g ? g->name : r->hw.device,
             r->hw.mixed ? " and others" : "");
  else
    snprintf(a->ran, sizeof a->ran, "not recorded");
  l->committed_known = true;
  l->measured_known = r->hw.count > 0;
  l->compared = true; /* a record without GPUs is no difference (vl_commitment_hw_diff) */
  l->committed = (double)c->gpus;
  l->measured = (double)r->hw.count;
  l->review = n > 0;
}

/* The model: the parameters' bytes the probe counted against the committed
 * ones (a record holds no config; the probe's bill does). */
static void params_clause(const struct vl_commitment *c, const struct vl_audit_run *r, double tol,
                          struct vl_audit_clause *l) {
  if (!c->est_params_bytes || !r->probe || !r->params_bytes) {
    l->committed_known = c->est_params_bytes != 0;
    l->measured_known = r->probe && r->params_bytes;
    l->committed = (double)c->est_params_bytes;
    l->measured = (double)r->params_bytes;
    return;
  }
  judge(l, (double)c->est_params_bytes, (double)r->params_bytes, tol);
}

/* Where timing decides between two outcomes, the run is held to the one
 * its peak lies nearer (DDP's bucket rebuild). A record without memory
 * samples is marked for review: it measured nothing. */
static void peak_clause(const struct vl_commitment *c, const struct vl_audit_run *r, double tol,
                        struct vl_audit *a) {
  struct vl_audit_clause *l = &a->line[VL_AUDIT_PEAK];
  uint64_t ref = vl_commitment_reference_bytes(c, r->peak_bytes, &a->peak_other);
  l->committed_known = l->compared = true;
  l->measured_known = r->peak_bytes > 0;
  l->committed = (double)ref;
  l->measured = (double)r->peak_bytes;
  l->off = ref ? ((double)r->peak_bytes - (double)ref) / (double)ref : 0;
  l->review = !r->peak_bytes || fabs(l->off) > tol;
}

/* GPU-hours on the GPUs the run had, not those committed. */
static void hours_clause(const struct vl_commitment *c, const struct vl_audit_run *r, double tol,
                         struct vl_audit *a) {
  struct vl_audit_clause *l = &a->line[VL_AUDIT_GPU_HOURS];
  a->hours_gpus = r->hw.count ? r->hw.count : (unsigned)c->gpus;
  a->hours_gpus_committed = !r->hw.count;
  double hours = r->seconds / 3600.0 * (double)a->hours_gpus;
  if (c->gpu_hours <= 0) {
    l->measured_known = true;
    l->measured = hours;
    return;
  }
  judge(l, c->gpu_hours, hours, tol);
}

/* Throughput: the probe's steps (the tokens it saw, times the ranks); else
 * the job's vl_mark("step") stamps with the committed batch. Faster than
 * the SLA is no breach. */
static void tokens_clause(const struct vl_commitment *c, const struct vl_audit_run *r, double tol,
                          struct vl_audit *a) {
  struct vl_audit_clause *l = &a->line[VL_AUDIT_TOKENS_PER_S];
  const struct vl_job *j = &c->job;
  double per_step =
      (double)j->batch * (double)j->seq * (double)j->grad_accum * (double)(j->dp ? j->dp : 1);
  double probe = r->probe_tokens_per_s * (r->probe_ranks ? r->probe_ranks : 1);
  a->tokens_from_probe = probe > 0;
  double tps = probe > 0 ? probe : r->step_s > 0 ? per_step / r->step_s : 0;
  l->committed_known = c->sla_tokens_per_s > 0;
  l->committed = c->sla_tokens_per_s;
  l->measured_known = tps > 0;
  l->measured = tps;
  if (!l->committed_known || !l->measured_known) return;
  l->compared = true;
  l->off = (tps - c->sla_tokens_per_s) / c->sla_tokens_per_s;
  l->review = l->off < -tol;
}

void vl_audit_compute(const struct vl_commitment *c, const struct vl_audit_run *r,
                      const struct vl_catalog *cat, double tolerance, bool tolerance_given,
                      double price, struct vl_audit *a) {
  memset(a, 0, sizeof *a);
  a->tolerance = tolerance;
  a->tolerance_given = tolerance_given;
  a->probe = r->probe;
  gpus_clause(c, r, cat, a);
  params_clause(c, r, tolerance, &a->line[VL_AUDIT_PARAMS]);
  peak_clause(c, r, tolerance, a);
  hours_clause(c, r, tolerance, a);
  tokens_clause(c, r, tolerance, a);
  for (int i = 0; i < VL_AUDIT_LINES; i++)
    a->review += a->line[i].review;
  a->price = price;
  if (price > 0) {
    a->cost_usd = a->line[VL_AUDIT_GPU_HOURS].measured * price;
    a->committed_cost_usd = c->gpu_hours > 0 ? c->gpu_hours * price : 0;
  }
}
