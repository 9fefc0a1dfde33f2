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
#include "vramledger/steptime.h"

/* the most a draw's bytes may be: 2^53, exact in any JSON reader's double
 * (estimate's bound, VL_EXACT_MAX in vramledger/render.h) */
#define EXACT_MAX (1ull << 53)

const char *vl_vary_name(enum vl_vary_var v) {
  static const char *const n[] = {"seq", "batch", "hidden", "layers", "precision", "attention"};
  return (unsigned)v < VL_VARY_COUNT ? n[v] : "?";
}

vl_status vl_vary_parse(const char *s, bool normal, struct vl_vary *v, struct vl_err *err) {
  memset(v, 0, sizeof *v);
  const char *eq = strchr(s, '=');
  int k = -1;
  for (int i = 0; i < VL_VARY_COUNT; i++) {
    const char *name = vl_vary_name((enum vl_vary_var)i);
    if (eq && (size_t)(eq - s) == strlen(name) && !strncmp(s, name, strlen(name))) k = i;
  }
  if (k < 0)
    return vl__fail(err, VL_EINVAL, "vary one of seq, batch, hidden, layers, precision, attention");
  v->var = (enum vl_vary_var)k;
  const char *val = eq + 1;
  if (v->var == VL_VARY_PRECISION || v->var == VL_VARY_ATTENTION) {
    v->dist = VL_DIST_DISCRETE;
    struct vl__list l;
    bool gap;
    if (!vl__list_init(&l, val, ',')) /* never cut: a cut value is another value */
      return vl__fail(err, VL_EINVAL, "the values are longer than %zu bytes", sizeof l.buf - 1);
    for (char *t; (t = vl__list_next(&l, &gap));) {
      if (gap) /* the values after it would be dropped */
        return vl__fail(err, VL_EINVAL, "an empty value after '%s'", t);
      bool ok = false;
      if (v->n_values == 8) return vl__fail(err, VL_EINVAL, "at most 8 values");
      if (v->var == VL_VARY_PRECISION) {
        enum vl_precision p;
        ok = vl_precision_parse(t, &p);
        v->values[v->n_values] = (int)p;
      } else {
        enum vl_attention a;
        ok = vl_attention_parse(t, &a);
        v->values[v->n_values] = (int)a;
      }
      if (!ok) return vl__fail(err, VL_EINVAL, "unknown %s '%s'", vl_vary_name(v->var), t);
      v->n_values++;
    }
    if (!v->n_values) return vl__fail(err, VL_EINVAL, "give at least one value");
    return VL_OK;
  }
  if (!strncmp(val, "\xc2\xb1", 2))
    val += 2; /* ± in UTF-8 */
  else if (!strncmp(val, "+-", 2))
    val += 2;
  char *end;
  double p = strtod(val, &end); /* digits and a point only: no 0x10, inf or leading space */
  if (end == val || strspn(val, "0123456789.") != (size_t)(end - val) || strcmp(end, "%") ||
      !(p > 0 && p < 100))
    return vl__fail(err, VL_EINVAL, "expected %s=±P%% with 0 < P < 100", vl_vary_name(v->var));
  v->dist = normal ? VL_DIST_NORMAL : VL_DIST_UNIFORM;
  v->pct = p / 100.0;
  return VL_OK;
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

/* The peak of one configuration: the estimator's total, replay and all,
 * or the fit at the job's batch and seq (the fit's variables are checked
 * to be those). A refusal's message goes to why when why is empty. */
static bool peak(const struct vl_sens_query *q, const struct vl_arch *a, const struct vl_job *j,
                 const struct vl_overheads *ov, struct vl_bill *bill, uint64_t *out, char *why,
                 size_t why_len) {
  if (q->fit) {
    double x[VL_FIT_MAX_VARS] = {0};
    for (size_t k = 0; k < q->fit->vars.nvars; k++)
      x[k] = (double)(!strcmp(q->fit->vars.var[k], "batch") ? j->batch : j->seq);
    double y = vl_fitted_eval(q->fit, x);
    if (!(y > 0 && y <= (double)EXACT_MAX)) {
      if (why && !*why)
        snprintf(why, why_len,
                 y > 0 ? "the fit gives a peak past 2^53 bytes, beyond what can be represented"
                       : "the fit gives no positive peak there");
      return false;
    }
    *out = (uint64_t)llround(y);
    return true;
  }
  struct vl_err e = {""};
  if (vl_bill_compute(a, j, ov, bill, &e) != VL_OK) {
    if (why && !*why) snprintf(why, why_len, "%s", e.msg);
    return false;
  }
  *out = vl_bill_budget_bytes(bill); /* DDP: the larger of its two outcomes */
  if (*out > EXACT_MAX) {            /* as estimate refuses it: no number printed inexact */
    if (why && !*why)
      snprintf(why, why_len,
               "the configuration is beyond what can be represented: %llu bytes, past 2^53",
               (unsigned long long)*out);
    return false;
  }
  return true;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* Draws repeat: a sequence length or a batch is a whole number, so ±20 %
 * of 2048 tokens is some 800 jobs, drawn 10^5 times. Each distinct job is
 * estimated once, replay and all; the memo is keyed by two hashes of the
 * drawn architecture and job (both copied from the same base, so their
 * bytes compare). */
#define MEMO_SLOTS (1u << 16)
struct memo {
  uint64_t h1, h2, total; /* h1 == 0: empty */
  uint8_t ok;
  double step_s; /* the priced step on gpus[0]; 0: none */
};

/* One pass: its memo, the full estimates it made and may make (budget 0:
 * no limit, for a fit), and where the first refusal's message goes. */
struct pass {
  struct memo *memo; /* NULL (out of memory): no memo */
  uint64_t slots;    /* the memo's, a power of two */
  uint64_t estimates, budget;
  char *why;
  size_t why_len;
};

enum got { GOT_PEAK, GOT_REFUSED, GOT_OVER_BUDGET };

/* the draw's step on gpus[0] (seconds; 0 where it cannot be priced: a fit,
 * no card, not training) */
static double step_of(const struct vl_sens_query *q, const struct vl_arch *a,
                      const struct vl_job *j) {
  struct vl_step_time t;
  if (q->fit || !q->n_gpus || j->task != VL_TASK_TRAIN) return 0;
  return vl_step_time(a, j, q->gpus[0], &t, NULL) == VL_OK ? t.step_s : 0;
}

static enum got estimate(const struct vl_sens_query *q, const struct vl_arch *a,
                         const struct vl_job *j, const struct vl_overheads *ov,
                         struct vl_bill *bill, struct pass *ps, uint64_t *out, double *step) {
  if (ps->budget && ps->estimates >= ps->budget) return GOT_OVER_BUDGET;
  ps->estimates++;
  bool ok = peak(q, a, j, ov, bill, out, ps->why, ps->why_len);
  *step = ok ? step_of(q, a, j) : 0;
  return ok ? GOT_PEAK : GOT_REFUSED;
}

/* the memo's key of a drawn job: two hashes of its architecture and job
 * (h1 never 0, which marks an empty slot) */
static void job_key(const struct vl_arch *a, const struct vl_job *j, uint64_t *k1, uint64_t *k2) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  vl__hash2(a, sizeof *a, &h1, &h2);
  vl__hash2(j, sizeof *j, &h1, &h2);
  vl__memo_keys(h1, h2, k1, k2);
}

/* slots for a pass of at most `budget` distinct estimates: at least
 * MEMO_SLOTS, and at most half full, so that every estimated job is kept
 * (a crowded stretch would estimate a job again, at the budget's cost) */
static uint64_t memo_slots(uint64_t budget) {
  uint64_t n = MEMO_SLOTS;
  while (n < 2 * budget && n < (1ull << 26))
    n <<= 1;
  return n;
}

static enum got peak_memo(const struct vl_sens_query *q, const struct vl_arch *a,
                          const struct vl_job *j, const struct vl_overheads *ov,
                          struct vl_bill *bill, struct pass *ps, uint64_t *out, double *step) {
  if (!ps->memo) return estimate(q, a, j, ov, bill, ps, out, step);
  uint64_t h1, h2;
  job_key(a, j, &h1, &h2);
  /* with a budget the memo is at most half full (memo_slots): probe on to
   * the empty slot there is, so that no job is estimated twice; a fit's
   * pass has no budget and gives up after 16 */
  size_t i =
      vl__memo_probe(ps->memo, sizeof *ps->memo, ps->slots, h1, h2, ps->budget ? ps->slots : 16);
  if (i == SIZE_MAX) return estimate(q, a, j, ov, bill, ps, out, step); /* a crowded stretch */
  struct memo *m = &ps->memo[i];
  if (m->h1) {
    *out = m->total;
    *step = m->step_s;
    return m->ok ? GOT_PEAK : GOT_REFUSED;
  }
  enum got g = estimate(q, a, j, ov, bill, ps, &m->total, &m->step_s);
  if (g == GOT_OVER_BUDGET) return g;
  m->ok = g == GOT_PEAK;
  m->h1 = h1;
  m->h2 = h2;
  *out = m->total;
  *step = m->step_s;
  return g;
}

/* Draw one configuration from the base. */
static void draw_one(const struct vl_sens_query *q, gsl_rng *rng, struct vl_arch *a,
                     struct vl_job *j) {
  for (int v = 0; v < q->n_vary; v++) {
    const struct vl_vary *x = &q->vary[v];
    if (x->dist == VL_DIST_DISCRETE) {
      apply(x, 1.0, x->values[gsl_rng_uniform_int(rng, (unsigned long)x->n_values)], a, j);
    } else {
      double f = x->dist == VL_DIST_UNIFORM ? 1.0 + x->pct * (2.0 * gsl_rng_uniform(rng) - 1.0)
                                            : 1.0 + gsl_ran_gaussian(rng, x->pct / 2.0);
      apply(x, fmax(f, 0.01), 0, a, j);
    }
  }
}

/* The input's value in a configuration, for the tornado's ends. */
static double input_at(enum vl_vary_var v, const struct vl_arch *a, const struct vl_job *j) {
  switch (v) {
  case VL_VARY_SEQ: return (double)j->seq;
  case VL_VARY_BATCH: return (double)j->batch;
  case VL_VARY_HIDDEN: return (double)a->hidden;
  case VL_VARY_LAYERS: return (double)a->layers;
  case VL_VARY_PRECISION: return (double)j->precision;
  case VL_VARY_ATTENTION: return (double)j->attention;
  default: return 0;
  }
}

/* What one Monte Carlo pass saw: totals[] holds the estimated draws,
 * sorted; with a struct times, its arrays the priced draws' steps and
 * hours, sorted, and how many were late and over the budget. */
struct times {
  double *steps, *hours;
  uint64_t n, late, over;
};

struct outcome {
  uint64_t drawn, refused, estimated, estimates;
  uint64_t lo, hi;     /* the lowest and highest estimated draw */
  double lo_at, hi_at; /* the first input's value there */
};

/* One Monte Carlo pass over at most n draws from the seed (every pass
 * draws the same configurations in the same order: the fallbacks are
 * compared on the base's draws, common random numbers). It stops at the
 * first draw that would exceed the budget of distinct estimates, so what
 * it estimated is the first `drawn` draws, not the easy ones. */
static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* a priced draw's step into tm: its hours for q->tokens (the draw's tokens
 * a step: its micro-batch x sequence x accumulation x data-parallel ranks),
 * late and over budget */
static void time_draw(const struct vl_sens_query *q, const struct vl_job *j, double step,
                      struct times *tm) {
  if (!tm || !(step > 0)) return;
  double per_step = (double)j->batch * (double)j->seq * (double)j->grad_accum * (double)j->dp;
  double hours = q->tokens ? (double)q->tokens / per_step * step / 3600.0 : 0;
  double gpus = (double)(j->dp * j->tp * j->pp);
  tm->steps[tm->n] = step;
  tm->hours[tm->n++] = hours;
  if (q->deadline_hours > 0 && hours > q->deadline_hours) tm->late++;
  if (q->budget_usd > 0 && hours * gpus * q->gpus[0]->usd_per_hour > q->budget_usd) tm->over++;
}

static struct outcome draw(const struct vl_sens_query *q, const struct vl_job *base,
                           const struct vl_overheads *ov, uint64_t n, uint64_t budget,
                           uint64_t *totals, struct vl_bill *bill, char *why, size_t why_len,
                           struct times *tm) {
  struct outcome o = {.lo = UINT64_MAX};
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) return o;
  gsl_rng_set(rng, (unsigned long)q->seed);
  uint64_t slots = memo_slots(q->fit ? 0 : budget);
  struct pass ps = {.memo = vl_calloc(slots, sizeof(struct memo)),
                    .slots = slots,
                    .budget = q->fit ? 0 : budget,
                    .why = why,
                    .why_len = why_len};
  for (; o.drawn < n; o.drawn++) {
    struct vl_arch a = *q->arch;
    struct vl_job j = *base;
    draw_one(q, rng, &a, &j);
    double step = 0;
    enum got g = peak_memo(q, &a, &j, ov, bill, &ps, &totals[o.estimated], &step);
    if (g == GOT_OVER_BUDGET) break;
    if (g == GOT_REFUSED) {
      o.refused++;
      continue;
    }
    time_draw(q, &j, step, tm);
    uint64_t y = totals[o.estimated++];
    if (y < o.lo) o.lo = y, o.lo_at = input_at(q->vary[0].var, &a, &j);
    if (y > o.hi) o.hi = y, o.hi_at = input_at(q->vary[0].var, &a, &j);
  }
  o.estimates = ps.estimates;
  vl_free(ps.memo);
  gsl_rng_free(rng);
  qsort(totals, o.estimated, sizeof *totals, cmp_u64);
  if (tm) {
    qsort(tm->steps, tm->n, sizeof *tm->steps, cmp_double);
    qsort(tm->hours, tm->n, sizeof *tm->hours, cmp_double);
  }
  return o;
}

/* How many distinct jobs the first n draws hold: the estimates a pass
 * over all of them makes. The draws alone, nothing estimated (the cost of
 * the memo's hashing). 0 when it cannot be told (more than 2^22 draws, out
 * of memory). */
static uint64_t count_distinct(const struct vl_sens_query *q, uint64_t n) {
  if (n > (1u << 22)) return 0;
  uint64_t slots = 1;
  while (slots < 2 * n)
    slots <<= 1;
  struct key {
    uint64_t h1, h2;
  } *set = vl_calloc(slots, sizeof *set);
  gsl_rng *rng = set ? gsl_rng_alloc(gsl_rng_mt19937) : NULL;
  if (!rng) {
    vl_free(set);
    return 0;
  }
  gsl_rng_set(rng, (unsigned long)q->seed);
  uint64_t distinct = 0;
  for (uint64_t d = 0; d < n; d++) {
    struct vl_arch a = *q->arch;
    struct vl_job j = q->job;
    draw_one(q, rng, &a, &j);
    uint64_t h1, h2, i;
    job_key(&a, &j, &h1, &h2);
    for (i = h1 & (slots - 1); set[i].h1 && (set[i].h1 != h1 || set[i].h2 != h2);
         i = (i + 1) & (slots - 1))
      ;
    if (!set[i].h1) {
      set[i] = (struct key){h1, h2};
      distinct++;
    }
  }
  gsl_rng_free(rng);
  vl_free(set);
  return distinct;
}

static uint64_t pct(const uint64_t *t, uint64_t n, double p) {
  uint64_t i = (uint64_t)ceil(p * (double)n);
  return t[i ? i - 1 : 0];
}

static double pct_d(const double *t, uint64_t n, double p) {
  uint64_t i = (uint64_t)ceil(p * (double)n);
  return t[i ? i - 1 : 0];
}

/* the priced draws' step and hours percentiles, P(late), P(over budget) */
static void time_summary(const struct times *tm, struct vl_sens_result *r) {
  r->timed = tm->n > 0;
  r->n_timed = tm->n;
  if (!tm->n) return;
  r->step_p50 = pct_d(tm->steps, tm->n, 0.50);
  r->step_p95 = pct_d(tm->steps, tm->n, 0.95);
  r->hours_p50 = pct_d(tm->hours, tm->n, 0.50);
  r->hours_p95 = pct_d(tm->hours, tm->n, 0.95);
  r->p_late = (double)tm->late / (double)tm->n;
  r->p_over_budget = (double)tm->over / (double)tm->n;
}

/* What card g's own cuBLAS workspaces add to a draw billed with ov's (the
 * first card's): the workspace line is a sum, threads x workspaces, so a
 * card's shifts every draw by the difference (the replayed reserve is
 * taken as the first card's). A fit's draws are measurements: none. */
static double workspace_shift(const struct vl_sens_query *q, const struct vl_overheads *ov,
                              const struct vl_gpu *g) {
  if (q->fit) return 0.0;
  struct vl_overheads og = *ov;
  vl_overheads_for_gpu(&og, g);
  double threads = vl_workspace_threads(&q->job);
  return threads * ((double)vl_workspace_thread_bytes(&og) - (double)vl_workspace_thread_bytes(ov));
}

static uint64_t count_over(const uint64_t *t, uint64_t n, const struct vl_gpu *g, double margin,
                           double shift) {
  double usable = (double)g->memory_bytes * (1.0 - margin);
  uint64_t c = 0;
  for (uint64_t i = 0; i < n; i++)
    c += (double)t[i] + shift > usable;
  return c;
}

/* One end of a spread, the others at the base: the estimate at factor
 * `end`, or, where the estimator refuses it, at the furthest factor toward
 * it that it takes (bisection between the base, 1.0, and end: the inputs
 * are whole numbers, so 20 halvings of a ±100 % spread reach one unit of
 * any of them). */
static bool tornado_end(const struct vl_sens_query *q, const struct vl_vary *x, double end,
                        const struct vl_overheads *ov, struct vl_bill *bill, uint64_t *y,
                        double *at, bool *cut) {
  struct vl_arch a = *q->arch;
  struct vl_job j = q->job;
  apply(x, end, 0, &a, &j);
  *cut = false;
  if (peak(q, &a, &j, ov, bill, y, NULL, 0)) {
    *at = input_at(x->var, &a, &j);
    return true;
  }
  double ok = 1.0, bad = end;
  if (!peak(q, q->arch, &q->job, ov, bill, y, NULL, 0)) return false;
  *at = input_at(x->var, q->arch, &q->job);
  for (int i = 0; i < 20; i++) {
    double mid = 0.5 * (ok + bad);
    struct vl_arch am = *q->arch;
    struct vl_job jm = q->job;
    apply(x, mid, 0, &am, &jm);
    uint64_t ym;
    if (peak(q, &am, &jm, ov, bill, &ym, NULL, 0)) {
      ok = mid;
      *y = ym;
      *at = input_at(x->var, &am, &jm);
    } else {
      bad = mid;
    }
  }
  *cut = true;
  return true;
}

/* The tornado: each input at its ends (a discrete one at each of its
 * values), the others at the base; largest swing first. */
static void tornado(const struct vl_sens_query *q, const struct vl_overheads *ov,
                    struct vl_bill *bill, struct vl_sens_result *r) {
  for (int v = 0; v < q->n_vary; v++) {
    const struct vl_vary *x = &q->vary[v];
    __typeof__(r->tornado[0]) t = {.var = x->var, .low = UINT64_MAX};
    bool any = false;
    if (x->dist == VL_DIST_DISCRETE) {
      for (int e = 0; e < x->n_values; e++) {
        struct vl_arch a = *q->arch;
        struct vl_job j = q->job;
        apply(x, 1.0, x->values[e], &a, &j);
        uint64_t y;
        if (!peak(q, &a, &j, ov, bill, &y, NULL, 0)) continue;
        if (y < t.low) t.low = y, t.low_at = x->values[e];
        if (y >= t.high) t.high = y, t.high_at = x->values[e];
        any = true;
      }
    } else {
      uint64_t y[2];
      double at[2];
      bool cut[2], ok[2];
      ok[0] = tornado_end(q, x, fmax(0.01, 1.0 - x->pct), ov, bill, &y[0], &at[0], &cut[0]);
      ok[1] = tornado_end(q, x, 1.0 + x->pct, ov, bill, &y[1], &at[1], &cut[1]);
      for (int e = 0; e < 2; e++) {
        if (!ok[e]) continue;
        if (y[e] < t.low) t.low = y[e], t.low_at = at[e], t.low_cut = cut[e];
        if (y[e] >= t.high) t.high = y[e], t.high_at = at[e], t.high_cut = cut[e];
        any = true;
      }
    }
    if (!any) continue;
    int k = r->n_tornado++;
    r->tornado[k] = t;
    for (; k > 0 &&
           r->tornado[k].high - r->tornado[k].low > r->tornado[k - 1].high - r->tornado[k - 1].low;
         k--) {
      t = r->tornado[k];
      r->tornado[k] = r->tornado[k - 1];
      r->tornado[k - 1] = t;
    }
  }
}

/* Fallbacks when the first card is at risk (> 5 %): each on the base's
 * first draws (at most 20,000), with a quarter of the estimate budget. */
static void fallbacks(const struct vl_sens_query *q, const struct vl_overheads *ov, uint64_t budget,
                      uint64_t *t, struct vl_bill *bill, struct vl_sens_result *r) {
  static const char *const names[VL_SENS_FALLBACKS] = {
      "activation checkpointing", "half the micro-batch, twice the accumulation",
      "FlashAttention (sdpa)", "the next ZeRO stage"};
  uint64_t m = r->drawn > 20000 ? 20000 : r->drawn;
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
    struct outcome o = draw(q, &j, ov, m, vl__max(1, budget / 4), t, bill, NULL, 0, NULL);
    if (!o.estimated) continue;
    int i = r->n_fallbacks++;
    r->fallback[i].name = names[f];
    r->fallback[i].p95 = pct(t, o.estimated, 0.95);
    r->fallback[i].p_exceed =
        (double)count_over(t, o.estimated, q->gpus[0], q->margin, 0.0) / (double)o.estimated;
    r->fallback[i].drawn = o.drawn;
    r->fallback[i].failed = o.refused;
  }
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
  uint64_t budget = q->max_estimates ? q->max_estimates : VL_SENS_ESTIMATES;
  uint64_t *t = vl_malloc((q->samples + 1) * sizeof *t);
  struct vl_bill *bill = vl_malloc(sizeof *bill);
  /* step times: the estimator's draws of a training job on a card */
  bool timing = !q->fit && q->n_gpus && q->job.task == VL_TASK_TRAIN;
  struct times tm = {0};
  if (timing) {
    tm.steps = vl_malloc((q->samples + 1) * sizeof(double));
    tm.hours = vl_malloc((q->samples + 1) * sizeof(double));
  }
  if (!t || !bill || (timing && (!tm.steps || !tm.hours))) {
    vl_free(t);
    vl_free(bill);
    vl_free(tm.steps);
    vl_free(tm.hours);
    return vl__fail(err, VL_ENOMEM, "out of memory for %llu samples",
                    (unsigned long long)q->samples);
  }
  struct outcome o = draw(q, &q->job, ov, q->samples, budget, t, bill, r->refused_why,
                          sizeof r->refused_why, timing ? &tm : NULL);
  time_summary(&tm, r);
  vl_free(tm.steps);
  vl_free(tm.hours);
  r->drawn = o.drawn;
  r->failed = o.refused;
  r->estimates = o.estimates;
  /* stopped at the limit: what estimating every draw would take */
  r->distinct = o.drawn < q->samples ? count_distinct(q, q->samples) : o.estimates;
  uint64_t n = o.estimated;
  if (!n) {
    struct vl_err why = {""};
    uint64_t base = 0;
    if (!q->fit && peak(q, q->arch, &q->job, ov, bill, &base, why.msg, sizeof why.msg))
      snprintf(why.msg, sizeof why.msg, "the base job can be, its variations cannot: %s",
               r->refused_why);
    vl_free(t);
    vl_free(bill);
    return vl__fail(err, VL_EINVAL, "none of the %llu draws could be %s: %s",
                    (unsigned long long)o.drawn, q->fit ? "evaluated" : "estimated",
                    q->fit ? "the fit gives no positive peak there" : why.msg);
  }
  r->p50 = pct(t, n, 0.50);
  r->p95 = pct(t, n, 0.95);
  r->p99 = pct(t, n, 0.99);
  r->min = t[0];
  r->max = t[n - 1];
  for (int g = 0; g < q->n_gpus; g++) {
    uint64_t over = count_over(t, n, q->gpus[g], q->margin, workspace_shift(q, ov, q->gpus[g]));
    r->p_exceed[g] = (double)over / (double)n;
    r->p_exceed_refused[g] = (double)(over + o.refused) / (double)o.drawn;
  }
  tornado(q, ov, bill, r);
  /* one spread: its draws are that input alone at other values, so its bar
   * holds them all (the allocator's rounding makes the peak not quite
   * monotone: GPT-2, batch 8, holds 6 MB more at 613 tokens than at 614) */
  if (q->n_vary == 1 && r->n_tornado == 1) {
    if (o.lo < r->tornado[0].low) r->tornado[0].low = o.lo, r->tornado[0].low_at = o.lo_at;
    if (o.hi > r->tornado[0].high) r->tornado[0].high = o.hi, r->tornado[0].high_at = o.hi_at;
  }
  if (q->n_gpus && r->p_exceed[0] > 0.05) fallbacks(q, ov, budget, t, bill, r);
  vl_free(t);
  vl_free(bill);
  return VL_OK;
}

bool vl_sens_gate_ready(const struct vl_sens_query *q, const struct vl_sens_result *r,
                        enum vl_sens_gate g) {
  if (g == VL_SENS_GATE_OOM) return q->n_gpus > 0;
  bool priced = r->timed && r->n_timed > 0 && q->tokens > 0;
  return priced && (g == VL_SENS_GATE_BUDGET ? q->budget_usd > 0 : q->deadline_hours > 0);
}

/* A gate is held to the conservative probability: the OOM gate counts
 * the draws the estimator refused as over the card (a job it cannot
 * estimate is no job shown to fit). */
void vl_sens_judge(const struct vl_sens_query *q, const struct vl_sens_result *r,
                   struct vl_sens_verdict *v) {
  v->n_given = v->n_failed = 0;
  for (int g = 0; g < VL_SENS_GATES; g++) {
    v->p[g] = 0;
    v->fail[g] = false;
    if (!v->given[g] || !vl_sens_gate_ready(q, r, (enum vl_sens_gate)g)) continue;
    v->p[g] = g == VL_SENS_GATE_OOM      ? r->p_exceed_refused[0]
              : g == VL_SENS_GATE_BUDGET ? r->p_over_budget
                                         : r->p_late;
    v->fail[g] = v->p[g] > v->limit[g];
    v->n_given++;
    v->n_failed += v->fail[g];
  }
}
