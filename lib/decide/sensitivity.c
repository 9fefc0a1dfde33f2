/* Monte Carlo over the inputs of the estimate. GSL's
 * mt19937 with the caller's seed: the same seed gives the same draws. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/sensitivity.h"

const char *vl_vary_name(enum vl_vary_var v) {
  static const char *const n[] = {"seq", "batch", "hidden", "layers", "precision", "attention"};
  return (unsigned)v < VL_VARY_COUNT ? n[v] : "?";
}

/* Apply factor f (or discrete value) of one variable to a configuration. */
static void apply(const struct vl_vary *v, double f, int value, struct vl_arch *a,
                  struct vl_job *j) {
  switch (v->var) {
  case VL_VARY_SEQ: j->seq = (uint64_t)fmax(1.0, llround((double)j->seq * f)); break;
  case VL_VARY_BATCH: j->batch = (uint64_t)fmax(1.0, llround((double)j->batch * f)); break;
  case VL_VARY_LAYERS: a->layers = (uint64_t)fmax(1.0, llround((double)a->layers * f)); break;
  case VL_VARY_HIDDEN: {
    /* hidden stays a multiple of the heads; the MLP width scales with it */
    bool derived = a->head_dim * a->heads == a->hidden;
    uint64_t h = (uint64_t)fmax(
        (double)a->heads, llround((double)a->hidden * f / (double)a->heads) * (double)a->heads);
    a->intermediate =
        (uint64_t)fmax(1.0, llround((double)a->intermediate * (double)h / (double)a->hidden));
    a->hidden = h;
    if (a->embed_proj_dim) a->embed_proj_dim = h;
    if (derived) a->head_dim = h / a->heads;
    break;
  }
  case VL_VARY_PRECISION: j->precision = (enum vl_precision)value; break;
  case VL_VARY_ATTENTION: j->attention = (enum vl_attention)value; break;
  default: break;
  }
}

/* The peak of one configuration: the estimator's total, or the fit at the
 * job's batch and seq (the fit's variables are checked to be those). */
static bool peak(const struct vl_sens_query *q, const struct vl_arch *a, const struct vl_job *j,
                 const struct vl_overheads *ov, struct vl_bill *bill, uint64_t *out) {
  if (q->fit) {
    double x[VL_FIT_MAX_VARS] = {0};
    for (size_t k = 0; k < q->fit->vars.nvars; k++)
      x[k] = (double)(!strcmp(q->fit->vars.var[k], "batch") ? j->batch : j->seq);
    double y = vl_fitted_eval(q->fit, x);
    if (!(y > 0 && y < 1e19)) return false;
    *out = (uint64_t)llround(y);
    return true;
  }
  if (vl_bill_compute(a, j, ov, bill, NULL) != VL_OK) return false;
  *out = vl_bill_budget_bytes(bill); /* DDP: the larger of its two outcomes */
  return true;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* Draws repeat: a sequence length or a batch is a whole number, so ±20 %
 * of 2048 tokens is some 800 jobs, drawn 10^5 times. Each distinct job is
 * estimated once; the memo is keyed by two hashes of the drawn architecture
 * and job (both copied from the same base, so their bytes compare), which
 * matters where an estimate replays allocations (generate(): 0.2 ms). */
#define MEMO_SLOTS (1u << 16)
struct memo {
  uint64_t h1, h2, total; /* h1 == 0: empty */
  uint8_t ok;
};

static bool peak_memo(const struct vl_sens_query *q, const struct vl_arch *a,
                      const struct vl_job *j, const struct vl_overheads *ov, struct vl_bill *bill,
                      struct memo *memo, uint64_t *out) {
  if (!memo) return peak(q, a, j, ov, bill, out);
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  vl__hash2(a, sizeof *a, &h1, &h2);
  vl__hash2(j, sizeof *j, &h1, &h2);
  if (!h1) h1 = 1;
  for (uint32_t i = (uint32_t)h1 & (MEMO_SLOTS - 1), n = 0; n < 16;
       i = (i + 1) & (MEMO_SLOTS - 1), n++) {
    struct memo *m = &memo[i];
    if (m->h1 == h1 && m->h2 == h2) {
      *out = m->total;
      return m->ok;
    }
    if (!m->h1) {
      m->ok = peak(q, a, j, ov, bill, &m->total);
      m->h1 = h1;
      m->h2 = h2;
      *out = m->total;
      return m->ok;
    }
  }
  return peak(q, a, j, ov, bill, out); /* a crowded stretch: no memo */
}

/* One Monte Carlo pass; totals[] filled with the draws that could be
 * estimated; returns how many. */
static uint64_t draw(const struct vl_sens_query *q, const struct vl_job *base,
                     const struct vl_overheads *ov, uint64_t n, uint64_t *totals, uint64_t *failed,
                     struct vl_bill *bill) {
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) return 0;
  gsl_rng_set(rng, (unsigned long)q->seed);
  struct memo *memo = vl_calloc(MEMO_SLOTS, sizeof *memo); /* NULL: every draw estimated */
  uint64_t k = 0;
  *failed = 0;
  /* A training step's replay (2-3 ms) is made once, for the job as given:
   * the draws take the analytic lines, scaled by the replayed total over
   * the lines' at that job (drawn architectures would otherwise replay
   * nearly every draw: 10^5 LoRA draws took about four minutes; bench/
   * results/speed/sensitivity.md) */
  double scale = 1.0;
  if (!q->fit) {
    uint64_t full = 0, lines = 0;
    struct vl_job jl = *base;
    jl.analytic_only = true;
    if (peak(q, q->arch, base, ov, bill, &full) && peak(q, q->arch, &jl, ov, bill, &lines) && lines)
      scale = (double)full / (double)lines;
  }
  for (uint64_t i = 0; i < n; i++) {
    struct vl_arch a = *q->arch;
    struct vl_job j = *base;
    j.analytic_only = true; /* (a fit ignores it) */
    for (int v = 0; v < q->n_vary; v++) {
      const struct vl_vary *x = &q->vary[v];
      if (x->dist == VL_DIST_DISCRETE) {
        apply(x, 1.0, x->values[gsl_rng_uniform_int(rng, (unsigned long)x->n_values)], &a, &j);
      } else {
        double f = x->dist == VL_DIST_UNIFORM ? 1.0 + x->pct * (2.0 * gsl_rng_uniform(rng) - 1.0)
                                              : 1.0 + gsl_ran_gaussian(rng, x->pct / 2.0);
        apply(x, fmax(f, 0.01), 0, &a, &j);
      }
    }
    if (!peak_memo(q, &a, &j, ov, bill, memo, &totals[k])) {
      (*failed)++;
      continue;
    }
    totals[k] = (uint64_t)llround((double)totals[k] * scale);
    k++;
  }
  vl_free(memo);
  gsl_rng_free(rng);
  qsort(totals, k, sizeof *totals, cmp_u64);
  return k;
}

static uint64_t pct(const uint64_t *t, uint64_t n, double p) {
  uint64_t i = (uint64_t)ceil(p * (double)n);
  return t[i ? i - 1 : 0];
}

static double exceed(const uint64_t *t, uint64_t n, const struct vl_gpu *g, double margin) {
  double usable = (double)g->memory_bytes * (1.0 - margin);
  uint64_t c = 0;
  for (uint64_t i = 0; i < n; i++)
    c += (double)t[i] > usable;
  return n ? (double)c / (double)n : 0.0;
}

vl_status vl_sensitivity_run(const struct vl_sens_query *q, const struct vl_overheads *ov,
                             struct vl_sens_result *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  for (size_t k = 0; q->fit && k < q->fit->vars.nvars; k++)
    if (strcmp(q->fit->vars.var[k], "batch") && strcmp(q->fit->vars.var[k], "seq"))
      return vl__fail(err, VL_EINVAL,
                      "the fit's variable '%s' is not one sensitivity can set (batch, seq)",
                      q->fit->vars.var[k]);
  for (int v = 0; q->fit && v < q->n_vary; v++) {
    bool known = false;
    const char *name = vl_vary_name(q->vary[v].var);
    for (size_t k = 0; k < q->fit->vars.nvars; k++)
      known |= !strcmp(q->fit->vars.var[k], name);
    if (!known)
      return vl__fail(err, VL_EINVAL,
                      "the fit does not know '%s' (it was fitted on the swept variables only): "
                      "vary those, or drop --fit to use the estimator",
                      name);
  }
  r->samples = q->samples;
  r->seed = q->seed;
  uint64_t *t = vl_malloc((q->samples + 1) * sizeof *t);
  struct vl_bill *bill = vl_malloc(sizeof *bill);
  if (!t || !bill) {
    vl_free(t);
    vl_free(bill);
    return vl__fail(err, VL_ENOMEM, "out of memory for %llu samples",
                    (unsigned long long)q->samples);
  }
  uint64_t n = draw(q, &q->job, ov, q->samples, t, &r->failed, bill);
  if (!n) {
    struct vl_err why = {""};
    if (!q->fit && vl_bill_compute(q->arch, &q->job, ov, bill, &why) == VL_OK)
      snprintf(why.msg, sizeof why.msg, "the base job can be, its variations cannot");
    vl_free(t);
    vl_free(bill);
    return vl__fail(err, VL_EINVAL, "none of the %llu draws could be %s: %s",
                    (unsigned long long)q->samples, q->fit ? "evaluated" : "estimated",
                    q->fit ? "the fit gives no positive peak there" : why.msg);
  }
  r->p50 = pct(t, n, 0.50);
  r->p95 = pct(t, n, 0.95);
  r->p99 = pct(t, n, 0.99);
  r->min = t[0];
  r->max = t[n - 1];
  for (int g = 0; g < q->n_gpus; g++)
    r->p_exceed[g] = exceed(t, n, q->gpus[g], q->margin);
  /* tornado: each input at its ends, the others at the base */
  for (int v = 0; v < q->n_vary; v++) {
    const struct vl_vary *x = &q->vary[v];
    uint64_t lo = UINT64_MAX, hi = 0;
    int ends = x->dist == VL_DIST_DISCRETE ? x->n_values : 2;
    for (int e = 0; e < ends; e++) {
      struct vl_arch a = *q->arch;
      struct vl_job j = q->job;
      if (x->dist == VL_DIST_DISCRETE)
        apply(x, 1.0, x->values[e], &a, &j);
      else
        apply(x, e ? 1.0 + x->pct : fmax(0.01, 1.0 - x->pct), 0, &a, &j);
      uint64_t y;
      if (!peak(q, &a, &j, ov, bill, &y)) continue;
      lo = vl__min(lo, y);
      hi = vl__max(hi, y);
    }
    if (hi == 0) continue;
    int k = r->n_tornado++;
    r->tornado[k].var = x->var;
    r->tornado[k].low = lo;
    r->tornado[k].high = hi;
    for (; k > 0 &&
           r->tornado[k].high - r->tornado[k].low > r->tornado[k - 1].high - r->tornado[k - 1].low;
         k--) {
      __typeof__(r->tornado[0]) tmp = r->tornado[k];
      r->tornado[k] = r->tornado[k - 1];
      r->tornado[k - 1] = tmp;
    }
  }
  /* fallbacks when the first card is at risk (> 5 %) */
  if (q->n_gpus && r->p_exceed[0] > 0.05) {
    static const char *const names[VL_SENS_FALLBACKS] = {
        "activation checkpointing", "half the micro-batch, twice the accumulation",
        "FlashAttention (sdpa)", "the next ZeRO stage"};
    uint64_t m = q->samples > 20000 ? 20000 : q->samples, failed;
    for (int f = 0; f < VL_SENS_FALLBACKS; f++) {
      struct vl_job j = q->job;
      if (q->fit && f != 1) continue; /* a fit knows only its variables */
      if (f == 0 && j.checkpointing != VL_CKPT_NONE) continue;
      if (f == 1 && j.batch < 2) continue;
      if (f == 2 && j.attention == VL_ATTN_SDPA) continue;
      if (f == 3 && (j.dp < 2 || j.zero >= 3)) continue;
      if (f == 0) j.checkpointing = VL_CKPT_FULL;
      if (f == 1) j.batch /= 2, j.grad_accum *= 2;
      if (f == 2) j.attention = VL_ATTN_SDPA;
      if (f == 3) j.zero++;
      uint64_t k = draw(q, &j, ov, m, t, &failed, bill);
      if (!k) continue;
      int i = r->n_fallbacks++;
      r->fallback[i].name = names[f];
      r->fallback[i].p95 = pct(t, k, 0.95);
      r->fallback[i].p_exceed = exceed(t, k, q->gpus[0], q->margin);
    }
  }
  vl_free(t);
  vl_free(bill);
  return VL_OK;
}
