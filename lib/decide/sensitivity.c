/* Monte Carlo over the inputs of the estimate. GSL's
 * mt19937 with the caller's seed: the same seed gives the same draws.
 * Each distinct drawn job is estimated once; where the draws hold more
 * than a pass may estimate, they are evaluated on a response surface of
 * exact estimates, checked against exact estimates of some draws ("The
 * response surface" below). */
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
 * to be those). A refusal's message goes to why when why is empty; memory
 * running out is no refusal: false, and *oom set. */
static bool peak(const struct vl_sens_query *q, const struct vl_arch *a, const struct vl_job *j,
                 const struct vl_overheads *ov, struct vl_bill *bill, uint64_t *out, char *why,
                 size_t why_len, bool *oom) {
  if (q->fit) {
    double x[VL_FIT_MAX_VARS] = {0};
    for (size_t k = 0; k < q->fit->vars.nvars; k++)
      x[k] = (double)(!strcmp(q->fit->vars.var[k], "batch") ? j->batch : j->seq);
    double y = vl_fitted_eval(q->fit, x);
    if (!(y > 0 && y <= (double)VL_EXACT_MAX)) {
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
  vl_status st = vl_bill_compute(a, j, ov, bill, &e);
  if (st == VL_ENOMEM) *oom = true;
  if (st != VL_OK) {
    if (why && !*why && st != VL_ENOMEM) snprintf(why, why_len, "%s", e.msg);
    return false;
  }
  *out = vl_bill_budget_bytes(bill); /* DDP: the larger of its two outcomes */
  if (*out > VL_EXACT_MAX) {         /* as estimate refuses it: no number printed inexact */
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
  struct memo *memo; /* NULL: out of memory (the pass refuses to run without) */
  uint64_t slots;    /* the memo's, a power of two */
  uint64_t estimates, budget;
  char *why;
  size_t why_len;
  bool oom; /* memory ran out: the pass stopped (as at its budget), its outcome void */
};

/* GOT_OVER_BUDGET also where memory ran out (ps->oom): the pass stops */
enum got { GOT_PEAK, GOT_REFUSED, GOT_OVER_BUDGET };

/* the draw's step on gpus[0] (seconds; 0 where it cannot be priced: a fit,
 * no card, not training) */
static double step_of(const struct vl_sens_query *q, const struct vl_arch *a,
                      const struct vl_job *j, bool *oom) {
  struct vl_step_time t;
  if (q->fit || !q->n_gpus || j->task != VL_TASK_TRAIN) return 0;
  vl_status st = vl_step_time(a, j, q->gpus[0], &t, NULL);
  if (st == VL_ENOMEM) *oom = true;
  return st == VL_OK ? t.step_s : 0;
}

static enum got estimate(const struct vl_sens_query *q, const struct vl_arch *a,
                         const struct vl_job *j, const struct vl_overheads *ov,
                         struct vl_bill *bill, struct pass *ps, uint64_t *out, double *step) {
  if (ps->budget && ps->estimates >= ps->budget) return GOT_OVER_BUDGET;
  ps->estimates++;
  bool ok = peak(q, a, j, ov, bill, out, ps->why, ps->why_len, &ps->oom);
  *step = ok ? step_of(q, a, j, &ps->oom) : 0;
  if (ps->oom) return GOT_OVER_BUDGET;
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
  bool oom; /* memory ran out: nothing else holds */
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

/* a pass's totals and times sorted, for their percentiles */
static void sort_outcome(uint64_t *totals, uint64_t n, struct times *tm) {
  qsort(totals, n, sizeof *totals, cmp_u64);
  if (tm) {
    qsort(tm->steps, tm->n, sizeof *tm->steps, cmp_double);
    qsort(tm->hours, tm->n, sizeof *tm->hours, cmp_double);
  }
}

static struct outcome draw(const struct vl_sens_query *q, const struct vl_job *base,
                           const struct vl_overheads *ov, uint64_t n, uint64_t budget,
                           uint64_t *totals, struct vl_bill *bill, char *why, size_t why_len,
                           struct times *tm) {
  struct outcome o = {.lo = UINT64_MAX};
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  uint64_t slots = memo_slots(q->fit ? 0 : budget);
  struct pass ps = {.memo = vl_calloc(slots, sizeof(struct memo)),
                    .slots = slots,
                    .budget = q->fit ? 0 : budget,
                    .why = why,
                    .why_len = why_len};
  /* without its memo a pass estimates a job again at the budget's cost:
   * fewer draws, another answer */
  if (!rng || !ps.memo) {
    if (rng) gsl_rng_free(rng);
    vl_free(ps.memo);
    o.oom = true;
    return o;
  }
  gsl_rng_set(rng, (unsigned long)q->seed);
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
  o.oom = ps.oom;
  vl_free(ps.memo);
  gsl_rng_free(rng);
  sort_outcome(totals, o.estimated, tm);
  return o;
}

/* A key of what a draw's job differs from its base in: every field
 * apply() sets. It splits the draws as the memo's job_key does (the rest
 * of the architecture and job is the base's), hashing 72 bytes instead
 * of some 850. */
static void draw_key(const struct vl_arch *a, const struct vl_job *j, uint64_t *k1, uint64_t *k2) {
  const uint64_t f[] = {j->seq,
                        j->batch,
                        a->layers,
                        a->hidden,
                        a->intermediate,
                        a->embed_proj_dim,
                        a->head_dim,
                        (uint64_t)j->precision,
                        (uint64_t)j->attention};
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  vl__hash2(f, sizeof f, &h1, &h2);
  vl__memo_keys(h1, h2, k1, k2);
}

/* ---- The response surface ----
 * Where the draws hold more distinct jobs than a pass may estimate (three
 * spreads over an 8B model: 50,430 in 10^5 draws), each draw's total and
 * step are interpolated between exact estimates on a lattice: along each
 * continuous input drawn (seq, batch, hidden, layers) points from its
 * lowest to its highest drawn value, whole numbers (hidden: multiples of
 * the heads, as apply() keeps it); one lattice for each precision x
 * attention pair drawn. Parameters grow as hidden^2 and activations as
 * hidden x seq, so a piecewise-linear surface on a few points is close;
 * the caching allocator's reserve adds steps (Llama-2-7B, bf16, batch 4:
 * 11.5 GiB over allocated at 2,020 tokens, 5.0 GiB at 2,030; the meta dry
 * run of the real op sequence 11.5 and 5.1). The surface is checked on
 * VL_SENS_CHECKS draws estimated exactly and made finer, along the input
 * whose lattice bends most, until within the tolerance or the estimates
 * run out. */
#define SURF_NODES 33 /* most points along one input */
#define SURF_START 5  /* points along each input at first */
#define SURF_COMBOS 64
#define SURF_CANDIDATES (2 * VL_SENS_CHECKS)

static const enum vl_vary_var surf_vars[VL_SENS_SURFACE_DIMS] = {VL_VARY_SEQ, VL_VARY_BATCH,
                                                                 VL_VARY_HIDDEN, VL_VARY_LAYERS};

/* What the draws span (count_distinct fills it): each continuous input's
 * lowest and highest value, the precision x attention pairs, and the
 * draws that are candidates for the check (their jobs, in draw order). */
struct span {
  uint64_t lo[VL_SENS_SURFACE_DIMS], hi[VL_SENS_SURFACE_DIMS];
  int combos, combo[SURF_COMBOS][2];
  bool combos_over; /* more pairs than SURF_COMBOS */
  int n_cand;
  struct vl_arch cand_a[SURF_CANDIDATES];
  struct vl_job cand_j[SURF_CANDIDATES];
};

/* A lattice point's exact estimate: its total, its step (0: not priced), refused. */
struct corner {
  uint64_t total;
  double step;
  bool ok;
};

struct surface {
  int dims;
  int var[VL_SENS_SURFACE_DIMS]; /* index into surf_vars */
  uint64_t unit[VL_SENS_SURFACE_DIMS], base[VL_SENS_SURFACE_DIMS];
  int n[VL_SENS_SURFACE_DIMS];
  uint64_t node[VL_SENS_SURFACE_DIMS][SURF_NODES];
  const struct span *sp;
  size_t points;     /* a lattice's: the product of n[] */
  struct corner *at; /* combos x points */
};

static void span_add(struct span *sp, const struct vl_arch *a, const struct vl_job *j, bool first) {
  for (int d = 0; d < VL_SENS_SURFACE_DIMS; d++) {
    uint64_t x = (uint64_t)input_at(surf_vars[d], a, j);
    if (first || x < sp->lo[d]) sp->lo[d] = x;
    if (first || x > sp->hi[d]) sp->hi[d] = x;
  }
  int c = 0;
  while (c < sp->combos &&
         (sp->combo[c][0] != (int)j->precision || sp->combo[c][1] != (int)j->attention))
    c++;
  if (c < sp->combos) return;
  if (c == SURF_COMBOS) {
    sp->combos_over = true;
    return;
  }
  sp->combo[c][0] = (int)j->precision;
  sp->combo[c][1] = (int)j->attention;
  sp->combos++;
}

/* the draws to check the surface on: SURF_CANDIDATES indices below n from
 * the generator seeded with seed + 1, sorted (repeats are dropped) */
static int check_candidates(uint64_t seed, uint64_t n, uint64_t *at) {
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) return 0;
  gsl_rng_set(rng, (unsigned long)(seed + 1));
  for (int i = 0; i < SURF_CANDIDATES; i++)
    at[i] = gsl_rng_uniform_int(rng, (unsigned long)vl__min(n, 1ul << 31));
  gsl_rng_free(rng);
  qsort(at, SURF_CANDIDATES, sizeof *at, cmp_u64);
  int k = 0;
  for (int i = 0; i < SURF_CANDIDATES; i++)
    if (!k || at[i] != at[k - 1]) at[k++] = at[i];
  return k;
}

/* How many distinct jobs the first n draws from base hold: the estimates
 * a pass over all of them makes. The draws alone, nothing estimated. With
 * sp, what they span. 0 when it cannot be told (more than 2^22 draws, or
 * out of memory: *oom set). */
static uint64_t count_distinct(const struct vl_sens_query *q, const struct vl_job *base, uint64_t n,
                               struct span *sp, bool *oom) {
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
    *oom = true;
    return 0;
  }
  gsl_rng_set(rng, (unsigned long)q->seed);
  uint64_t cand[SURF_CANDIDATES];
  int n_cand = sp ? check_candidates(q->seed, n, cand) : 0, next = 0;
  if (sp) sp->combos = sp->n_cand = 0, sp->combos_over = false;
  uint64_t distinct = 0;
  for (uint64_t d = 0; d < n; d++) {
    struct vl_arch a = *q->arch;
    struct vl_job j = *base;
    draw_one(q, rng, &a, &j);
    if (sp) span_add(sp, &a, &j, d == 0);
    for (; next < n_cand && cand[next] == d; next++) {
      sp->cand_a[sp->n_cand] = a;
      sp->cand_j[sp->n_cand++] = j;
    }
    uint64_t h1, h2, i;
    draw_key(&a, &j, &h1, &h2);
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

/* up to k points from lo to hi, evenly spaced on multiples of unit from
 * lo (every value where there are no more than k); their number */
static int spaced(uint64_t lo, uint64_t hi, uint64_t unit, int k, uint64_t *node) {
  uint64_t steps = (hi - lo) / unit;
  if (steps + 1 <= (uint64_t)k) k = (int)steps + 1;
  int m = 0;
  for (int i = 0; i < k; i++) {
    uint64_t x = k == 1 ? lo : lo + (uint64_t)llround((double)steps * i / (k - 1)) * unit;
    if (!m || x != node[m - 1]) node[m++] = x;
  }
  return m;
}

/* the lattice's points a precision x attention pair: the product of n[] */
static size_t surf_points(const struct surface *s) {
  size_t p = 1;
  for (int d = 0; d < s->dims; d++)
    p *= (size_t)s->n[d];
  return p;
}

/* the job at lattice point p (a flat index) of pair c, with input od at
 * ox instead where od >= 0 */
static void surf_job_at(const struct vl_sens_query *q, const struct vl_job *base,
                        const struct surface *s, size_t p, int c, int od, uint64_t ox,
                        struct vl_arch *a, struct vl_job *j) {
  *a = *q->arch;
  *j = *base;
  for (int d = 0; d < s->dims; d++) {
    uint64_t x = d == od ? ox : s->node[d][p % (size_t)s->n[d]];
    p /= (size_t)s->n[d];
    struct vl_vary v = {.var = surf_vars[s->var[d]]};
    apply(&v, (double)x / (double)s->base[d], 0, a, j); /* sets x itself */
  }
  j->precision = (enum vl_precision)s->sp->combo[c][0];
  j->attention = (enum vl_attention)s->sp->combo[c][1];
}

static void surf_job(const struct vl_sens_query *q, const struct vl_job *base,
                     const struct surface *s, size_t p, int c, struct vl_arch *a,
                     struct vl_job *j) {
  surf_job_at(q, base, s, p, c, -1, 0, a, j);
}

/* Whether the estimator's checks take the job at lattice point p of pair c
 * with input d at x instead (vl_bill_check: microseconds, no estimate). */
static bool takes(const struct vl_sens_query *q, const struct vl_job *base, const struct surface *s,
                  size_t p, int c, int d, uint64_t x) {
  struct vl_arch a;
  struct vl_job j;
  surf_job_at(q, base, s, p, c, d, x, &a, &j);
  return vl_bill_check(&a, &j, NULL) == VL_OK;
}

/* Where the estimator's checks begin to refuse along input d (a model's
 * learned positions), between two points of a line of the lattice: the
 * value next to it on the accepted side (bisection on the input's unit),
 * so that a cell ends where the refusals begin and no corner of the cells
 * before it is refused. 0: no change of verdict between them. */
static uint64_t edge(const struct vl_sens_query *q, const struct vl_job *base,
                     const struct surface *s, size_t p, int c, int d, int k) {
  uint64_t lo = s->node[d][k], hi = s->node[d][k + 1], u = s->unit[d];
  bool at_lo = takes(q, base, s, p, c, d, lo);
  if (at_lo == takes(q, base, s, p, c, d, hi)) return 0;
  while (hi - lo > u) {
    uint64_t mid = lo + (hi - lo) / u / 2 * u;
    if (takes(q, base, s, p, c, d, mid) == at_lo)
      lo = mid;
    else
      hi = mid;
  }
  return at_lo ? lo : hi;
}

/* Each input's points joined by the edges of the refusals along it, on
 * every line of the lattice (at most SURF_NODES points an input). */
static void surf_edges(const struct vl_sens_query *q, const struct vl_job *base,
                       struct surface *s) {
  for (int d = 0; d < s->dims; d++) {
    size_t stride = 1, points = surf_points(s);
    for (int e = 0; e < d; e++)
      stride *= (size_t)s->n[e];
    uint64_t node[2 * SURF_NODES];
    int m = s->n[d];
    memcpy(node, s->node[d], (size_t)m * sizeof *node);
    for (int c = 0; c < s->sp->combos; c++)
      for (size_t p = 0; p < points; p++) {
        if (p / stride % (size_t)s->n[d]) continue; /* a line starts at its first point */
        for (int k = 0; k + 1 < s->n[d] && m < 2 * SURF_NODES; k++) {
          uint64_t x = edge(q, base, s, p, c, d, k);
          bool known = !x;
          for (int i = 0; i < m && !known; i++)
            known = node[i] == x;
          if (!known) node[m++] = x;
        }
      }
    qsort(node, (size_t)m, sizeof *node, cmp_u64);
    s->n[d] = m < SURF_NODES ? m : SURF_NODES;
    memcpy(s->node[d], node, (size_t)s->n[d] * sizeof *node);
  }
  s->points = surf_points(s);
}

/* The lattice over what sp spans, SURF_START points an input at first,
 * fewer where that many would not leave `room` estimates (at least 2 an
 * input), and the refusals' edges. false: not even that fits. */
static bool surf_init(const struct vl_sens_query *q, const struct vl_job *base,
                      const struct span *sp, uint64_t room, struct surface *s) {
  memset(s, 0, sizeof *s);
  s->sp = sp;
  for (int k = 0; k < VL_SENS_SURFACE_DIMS; k++) {
    bool varied = false;
    for (int v = 0; v < q->n_vary; v++)
      varied |= q->vary[v].var == surf_vars[k];
    if (!varied) continue;
    int d = s->dims++;
    s->var[d] = k;
    s->unit[d] = surf_vars[k] == VL_VARY_HIDDEN && q->arch->heads ? q->arch->heads : 1;
    s->base[d] = (uint64_t)input_at(surf_vars[k], q->arch, base);
  }
  for (int start = SURF_START; start >= 2; start--) {
    for (int d = 0; d < s->dims; d++)
      s->n[d] = spaced(sp->lo[s->var[d]], sp->hi[s->var[d]], s->unit[d], start, s->node[d]);
    s->points = surf_points(s);
    surf_edges(q, base, s);
    if ((uint64_t)sp->combos * s->points <= room) return true;
  }
  return false;
}

/* every lattice point estimated (the pass's memo keeps those of a coarser
 * lattice); false: the estimates ran out */
static bool surf_fill(const struct vl_sens_query *q, const struct vl_job *base,
                      const struct vl_overheads *ov, struct vl_bill *bill, struct pass *ps,
                      struct surface *s) {
  vl_free(s->at);
  s->points = surf_points(s);
  s->at = vl_calloc((size_t)s->sp->combos * s->points, sizeof *s->at);
  if (!s->at) {
    ps->oom = true;
    return false;
  }
  for (int c = 0; c < s->sp->combos; c++)
    for (size_t p = 0; p < s->points; p++) {
      struct vl_arch a;
      struct vl_job j;
      surf_job(q, base, s, p, c, &a, &j);
      struct corner *k = &s->at[(size_t)c * s->points + p];
      enum got g = peak_memo(q, &a, &j, ov, bill, ps, &k->total, &k->step);
      if (g == GOT_OVER_BUDGET) return false;
      k->ok = g == GOT_PEAK;
    }
  return true;
}

/* the pair of a drawn job; -1: not drawn (cannot be: every pair is spanned) */
static int surf_combo(const struct surface *s, const struct vl_job *j) {
  for (int c = 0; c < s->sp->combos; c++)
    if (s->sp->combo[c][0] == (int)j->precision && s->sp->combo[c][1] == (int)j->attention)
      return c;
  return -1;
}

enum interp { INTERP_OK, INTERP_REFUSED_CORNER, INTERP_OUTSIDE };

/* A drawn job's total and step, multilinear between the corners of its
 * cell; *step 0 where a corner is not priced. A corner of weight 0 is not
 * looked at (a draw on a face needs only that face). */
static enum interp surf_eval(const struct surface *s, const struct vl_arch *a,
                             const struct vl_job *j, double *total, double *step) {
  int c = surf_combo(s, j);
  if (c < 0) return INTERP_OUTSIDE;
  size_t lo[VL_SENS_SURFACE_DIMS], stride[VL_SENS_SURFACE_DIMS];
  double t[VL_SENS_SURFACE_DIMS];
  size_t st = 1;
  for (int d = 0; d < s->dims; d++) {
    double x = input_at(surf_vars[s->var[d]], a, j);
    const uint64_t *nd = s->node[d];
    int n = s->n[d], k = 0;
    if (x < (double)nd[0] || x > (double)nd[n - 1]) return INTERP_OUTSIDE;
    while (k + 2 < n && x >= (double)nd[k + 1])
      k++;
    lo[d] = (size_t)k;
    t[d] = n == 1 ? 0 : (x - (double)nd[k]) / (double)(nd[k + 1] - nd[k]);
    stride[d] = st;
    st *= (size_t)n;
  }
  const struct corner *at = &s->at[(size_t)c * s->points];
  double y = 0, z = 0;
  bool priced = true;
  for (unsigned m = 0; m < 1u << s->dims; m++) {
    double w = 1;
    size_t p = 0;
    for (int d = 0; d < s->dims; d++) {
      bool up = m >> d & 1u;
      w *= up ? t[d] : 1 - t[d];
      p += (lo[d] + up) * stride[d];
    }
    if (w == 0) continue;
    if (!at[p].ok) return INTERP_REFUSED_CORNER;
    y += w * (double)at[p].total;
    z += w * at[p].step;
    priced &= at[p].step > 0;
  }
  *total = y;
  *step = priced ? z : 0;
  return INTERP_OK;
}

/* The check: up to VL_SENS_CHECKS of the candidate draws that the
 * estimator takes and the surface covers, each estimated exactly. */
struct checks {
  int n;
  int cand[VL_SENS_CHECKS]; /* index into the span's candidates */
  uint64_t exact[VL_SENS_CHECKS];
  double exact_step[VL_SENS_CHECKS];
};

static bool check_pick(const struct vl_sens_query *q, const struct vl_overheads *ov,
                       struct vl_bill *bill, struct pass *ps, const struct surface *s,
                       struct checks *ck) {
  ck->n = 0;
  const struct span *sp = s->sp;
  for (int i = 0; i < sp->n_cand && ck->n < VL_SENS_CHECKS; i++) {
    double y, z;
    if (vl_bill_check(&sp->cand_a[i], &sp->cand_j[i], NULL) != VL_OK ||
        surf_eval(s, &sp->cand_a[i], &sp->cand_j[i], &y, &z) != INTERP_OK)
      continue;
    int k = ck->n;
    enum got g = peak_memo(q, &sp->cand_a[i], &sp->cand_j[i], ov, bill, ps, &ck->exact[k],
                           &ck->exact_step[k]);
    if (g == GOT_OVER_BUDGET) return false;
    if (g == GOT_PEAK) ck->cand[ck->n++] = i;
  }
  return true;
}

/* the checked draws' largest error on the surface as it is now */
static void check_errors(const struct surface *s, const struct checks *ck,
                         struct vl_sens_surface *out) {
  out->max_error_bytes = 0;
  out->max_error_pct = out->max_error_time_pct = 0;
  for (int i = 0; i < ck->n; i++) {
    const struct span *sp = s->sp;
    double y, z;
    if (surf_eval(s, &sp->cand_a[ck->cand[i]], &sp->cand_j[ck->cand[i]], &y, &z) != INTERP_OK)
      continue; /* a finer lattice put a refused point at its corner */
    double e = fabs(y - (double)ck->exact[i]);
    out->max_error_bytes = vl__max(out->max_error_bytes, (uint64_t)llround(e));
    out->max_error_pct = fmax(out->max_error_pct, 100 * e / (double)ck->exact[i]);
    if (z > 0 && ck->exact_step[i] > 0)
      out->max_error_time_pct =
          fmax(out->max_error_time_pct, 100 * fabs(z - ck->exact_step[i]) / ck->exact_step[i]);
  }
  out->checked = (uint64_t)ck->n;
}

/* How much the lattice bends along input d: the largest second difference
 * of its totals and steps along d, relative to the middle point's (a
 * linear interpolation's error is about an eighth of it). Two points: the
 * change from one to the other, which a finer lattice may show to bend. */
static double surf_bend(const struct surface *s, int d) {
  size_t stride = 1;
  for (int e = 0; e < d; e++)
    stride *= (size_t)s->n[e];
  double worst = 0;
  for (size_t c = 0; c < (size_t)s->sp->combos; c++)
    for (size_t p = 0; p < s->points; p++) {
      size_t k = p / stride % (size_t)s->n[d];
      const struct corner *m = &s->at[c * s->points + p];
      if (s->n[d] == 2 && k == 0) {
        const struct corner *b = m + stride;
        if (m->ok && b->ok && m->total)
          worst = fmax(worst, fabs((double)b->total - (double)m->total) / (double)m->total);
        continue;
      }
      if (k == 0 || k + 1 == (size_t)s->n[d]) continue;
      const struct corner *a = m - stride, *b = m + stride;
      if (!a->ok || !m->ok || !b->ok || !m->total) continue;
      worst = fmax(worst, fabs((double)a->total - 2.0 * (double)m->total + (double)b->total) /
                              (double)m->total);
      if (m->step > 0) worst = fmax(worst, fabs(a->step - 2.0 * m->step + b->step) / m->step);
    }
  return worst;
}

/* The input to make finer: of those not tried and with values between
 * their points left, the one whose lattice bends most; -1: none. */
static int surf_pick(const struct surface *s, unsigned tried) {
  int best = -1;
  double most = -1;
  for (int d = 0; d < s->dims; d++) {
    if (tried >> d & 1u) continue;
    uint64_t values = (s->sp->hi[s->var[d]] - s->sp->lo[s->var[d]]) / s->unit[d] + 1;
    if ((uint64_t)s->n[d] >= values || 2 * s->n[d] - 1 > SURF_NODES) continue;
    double b = surf_bend(s, d);
    if (b > most) most = b, best = d;
  }
  return best;
}

/* input d made finer: a point between each two (on its unit), kept */
static void surf_refine(struct surface *s, int d) {
  uint64_t node[SURF_NODES];
  int m = 0;
  for (int k = 0; k < s->n[d]; k++) {
    node[m++] = s->node[d][k];
    if (k + 1 == s->n[d]) break;
    uint64_t lo = s->node[d][k], hi = s->node[d][k + 1];
    uint64_t mid = lo + (hi - lo) / s->unit[d] / 2 * s->unit[d];
    if (mid > lo) node[m++] = mid;
  }
  memcpy(s->node[d], node, (size_t)m * sizeof *node);
  s->n[d] = m;
}

/* The surface over what sp spans, checked and, with refine, made finer
 * along each input once at most (twice the points), the input whose
 * lattice bends most first, until within the tolerance or the estimates
 * run out. A piecewise-linear surface's error falls as the square of the
 * spacing where the estimate is smooth; what is left after that is mostly
 * the estimator's own steps (the peak allocated is smooth, the reserve of
 * the caching allocator's segments is not: Llama-2-7B full fine-tuning
 * 26.8 GiB at 2000 tokens, 8.0 at 2020), which only a lattice of every
 * value would resolve: --estimates as many as the distinct jobs estimates
 * every draw. false: not even the smallest surface and its check fit. */
static bool surf_build(const struct vl_sens_query *q, const struct vl_job *base,
                       const struct vl_overheads *ov, struct vl_bill *bill, struct pass *ps,
                       bool refine, struct surface *s, struct vl_sens_surface *out) {
  const struct span *sp = s->sp;
  uint64_t room = ps->budget > VL_SENS_CHECKS ? ps->budget - VL_SENS_CHECKS : 0;
  struct checks ck;
  if (sp->combos_over || !surf_init(q, base, sp, room, s) || !surf_fill(q, base, ov, bill, ps, s) ||
      !check_pick(q, ov, bill, ps, s, &ck))
    return false;
  unsigned tried = 0; /* inputs made finer */
  for (;;) {
    check_errors(s, &ck, out);
    double err = fmax(out->max_error_pct, out->max_error_time_pct);
    int d = err <= VL_SENS_TOLERANCE || !refine ? -1 : surf_pick(s, tried);
    if (d < 0) break;
    tried |= 1u << d;
    struct surface finer = *s;
    finer.at = NULL;
    surf_refine(&finer, d);
    uint64_t more = (uint64_t)sp->combos * (surf_points(&finer) - s->points);
    if (ps->estimates + more > ps->budget || !surf_fill(q, base, ov, bill, ps, &finer)) {
      out->short_of_estimates = true;
      vl_free(finer.at);
      break;
    }
    vl_free(s->at);
    *s = finer;
    out->refinements++;
  }
  out->used = true;
  out->n_dims = s->dims;
  for (int d = 0; d < s->dims; d++)
    out->var[d] = surf_vars[s->var[d]], out->nodes[d] = s->n[d];
  out->combos = sp->combos;
  out->lattice = (uint64_t)sp->combos * s->points;
  return true;
}

/* One draw on the surface: refused where the estimator's checks refuse
 * it (vl_bill_check: exactly, for this draw); else interpolated, or
 * estimated exactly where a corner of its cell is refused (a bill past 64
 * bits or 2^53 bytes: the totals grow with every input, so a draw whose
 * cell's corners all pass passes too). */
static enum got surf_draw(const struct vl_sens_query *q, const struct vl_arch *a,
                          const struct vl_job *j, const struct vl_overheads *ov,
                          struct vl_bill *bill, struct pass *ps, const struct surface *s,
                          uint64_t *out, double *step, bool *exact) {
  struct vl_err e = {""};
  *exact = false;
  if (vl_bill_check(a, j, &e) != VL_OK) {
    if (ps->why && !*ps->why) snprintf(ps->why, ps->why_len, "%s", e.msg);
    return GOT_REFUSED;
  }
  double y;
  if (surf_eval(s, a, j, &y, step) == INTERP_OK && y <= (double)VL_EXACT_MAX) {
    *out = (uint64_t)llround(y);
    if (!(*step > 0)) *step = step_of(q, a, j, &ps->oom);
    return ps->oom ? GOT_OVER_BUDGET : GOT_PEAK;
  }
  *exact = true;
  return peak_memo(q, a, j, ov, bill, ps, out, step);
}

/* One pass over the first n draws from base on a surface (draw()'s
 * outcome, totals and times). false: no surface fits the budget, and
 * draw() is the pass; true with o->oom where memory ran out. */
static bool surf_pass(const struct vl_sens_query *q, const struct vl_job *base,
                      const struct vl_overheads *ov, uint64_t n, uint64_t budget,
                      const struct span *sp, uint64_t *totals, struct vl_bill *bill, char *why,
                      size_t why_len, struct times *tm, bool refine, struct outcome *o,
                      struct vl_sens_surface *out) {
  memset(out, 0, sizeof *out);
  *o = (struct outcome){.lo = UINT64_MAX};
  uint64_t slots = memo_slots(budget);
  struct pass ps = {
      .memo = vl_calloc(slots, sizeof(struct memo)), .slots = slots, .budget = budget};
  struct surface s = {.sp = sp};
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  ps.oom = !rng || !ps.memo; /* without its memo, estimates are spent again */
  bool built = !ps.oom && surf_build(q, base, ov, bill, &ps, refine, &s, out);
  if (built) {
    gsl_rng_set(rng, (unsigned long)q->seed);
    ps.why = why;
    ps.why_len = why_len;
    for (; o->drawn < n; o->drawn++) {
      struct vl_arch a = *q->arch;
      struct vl_job j = *base;
      draw_one(q, rng, &a, &j);
      double step = 0;
      bool exact;
      enum got g = surf_draw(q, &a, &j, ov, bill, &ps, &s, &totals[o->estimated], &step, &exact);
      if (g == GOT_OVER_BUDGET) break;
      if (g == GOT_REFUSED) {
        o->refused++;
        continue;
      }
      out->exact_draws += exact;
      time_draw(q, &j, step, tm);
      uint64_t y = totals[o->estimated++];
      if (y < o->lo) o->lo = y, o->lo_at = input_at(q->vary[0].var, &a, &j);
      if (y > o->hi) o->hi = y, o->hi_at = input_at(q->vary[0].var, &a, &j);
    }
    o->estimates = ps.estimates;
    sort_outcome(totals, o->estimated, tm);
  }
  o->oom = ps.oom;
  vl_free(s.at);
  vl_free(ps.memo);
  if (rng) gsl_rng_free(rng);
  return built || o->oom;
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
                        double *at, bool *cut, bool *oom) {
  struct vl_arch a = *q->arch;
  struct vl_job j = q->job;
  apply(x, end, 0, &a, &j);
  *cut = false;
  if (peak(q, &a, &j, ov, bill, y, NULL, 0, oom)) {
    *at = input_at(x->var, &a, &j);
    return true;
  }
  double ok = 1.0, bad = end;
  if (*oom || !peak(q, q->arch, &q->job, ov, bill, y, NULL, 0, oom)) return false;
  *at = input_at(x->var, q->arch, &q->job);
  for (int i = 0; i < 20; i++) {
    double mid = 0.5 * (ok + bad);
    struct vl_arch am = *q->arch;
    struct vl_job jm = q->job;
    apply(x, mid, 0, &am, &jm);
    uint64_t ym;
    if (peak(q, &am, &jm, ov, bill, &ym, NULL, 0, oom)) {
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
                    struct vl_bill *bill, struct vl_sens_result *r, bool *oom) {
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
        if (!peak(q, &a, &j, ov, bill, &y, NULL, 0, oom)) continue;
        if (y < t.low) t.low = y, t.low_at = x->values[e];
        if (y >= t.high) t.high = y, t.high_at = x->values[e];
        any = true;
      }
    } else {
      uint64_t y[2];
      double at[2];
      bool cut[2], ok[2];
      ok[0] = tornado_end(q, x, fmax(0.01, 1.0 - x->pct), ov, bill, &y[0], &at[0], &cut[0], oom);
      ok[1] = tornado_end(q, x, 1.0 + x->pct, ov, bill, &y[1], &at[1], &cut[1], oom);
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
                      uint64_t *t, struct vl_bill *bill, struct span *sp, struct vl_sens_result *r,
                      bool *oom) {
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
    uint64_t quarter = vl__max(1, budget / 4);
    struct outcome o;
    struct vl_sens_surface fs = {0};
    if (!(sp && count_distinct(q, &j, m, sp, oom) > quarter &&
          surf_pass(q, &j, ov, m, quarter, sp, t, bill, NULL, 0, NULL, false, &o, &fs)))
      o = *oom ? (struct outcome){.oom = true}
               : draw(q, &j, ov, m, quarter, t, bill, NULL, 0, NULL);
    if (o.oom) {
      *oom = true;
      return;
    }
    if (!o.estimated) continue;
    int i = r->n_fallbacks++;
    r->fallback[i].surface = fs;
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
  /* more distinct jobs than the budget: the draws on a surface */
  struct span *sp = q->fit ? NULL : vl_malloc(sizeof *sp);
  bool oom = !q->fit && !sp; /* memory ran out anywhere: nothing holds */
  uint64_t distinct = sp ? count_distinct(q, &q->job, q->samples, sp, &oom) : 0;
  struct outcome o = {.oom = true};
  if (!oom && !(distinct > budget &&
                surf_pass(q, &q->job, ov, q->samples, budget, sp, t, bill, r->refused_why,
                          sizeof r->refused_why, timing ? &tm : NULL, true, &o, &r->surface)))
    o = draw(q, &q->job, ov, q->samples, budget, t, bill, r->refused_why, sizeof r->refused_why,
             timing ? &tm : NULL);
  time_summary(&tm, r);
  vl_free(tm.steps);
  vl_free(tm.hours);
  oom |= o.oom;
  if (oom) {
    vl_free(sp);
    vl_free(t);
    vl_free(bill);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }
  r->drawn = o.drawn;
  r->failed = o.refused;
  r->estimates = o.estimates;
  /* stopped at the limit: what estimating every draw would take */
  r->distinct = r->surface.used || o.drawn < q->samples
                    ? (distinct ? distinct : count_distinct(q, &q->job, q->samples, NULL, &oom))
                    : o.estimates;
  uint64_t n = o.estimated;
  if (!n) {
    struct vl_err why = {""};
    uint64_t base = 0;
    if (!q->fit && peak(q, q->arch, &q->job, ov, bill, &base, why.msg, sizeof why.msg, &oom))
      snprintf(why.msg, sizeof why.msg, "the base job can be, its variations cannot: %s",
               r->refused_why);
    vl_free(sp);
    vl_free(t);
    vl_free(bill);
    if (oom) return vl__fail(err, VL_ENOMEM, "out of memory");
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
  tornado(q, ov, bill, r, &oom);
  /* one spread: its draws are that input alone at other values, so its bar
   * holds them all (the allocator's rounding makes the peak not quite
   * monotone: GPT-2, batch 8, holds 6 MB more at 613 tokens than at 614) */
  if (q->n_vary == 1 && r->n_tornado == 1) {
    if (o.lo < r->tornado[0].low) r->tornado[0].low = o.lo, r->tornado[0].low_at = o.lo_at;
    if (o.hi > r->tornado[0].high) r->tornado[0].high = o.hi, r->tornado[0].high_at = o.hi_at;
  }
  if (!oom && q->n_gpus && r->p_exceed[0] > 0.05) fallbacks(q, ov, budget, t, bill, sp, r, &oom);
  vl_free(sp);
  vl_free(t);
  vl_free(bill);
  if (oom) return vl__fail(err, VL_ENOMEM, "out of memory");
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
