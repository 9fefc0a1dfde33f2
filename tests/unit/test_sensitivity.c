/* lib/decide/sensitivity.c: seeded, consistent, every draw the estimator's
 * own estimate, refusals counted, and the fallbacks help. */
#include <math.h>

#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/sensitivity.h"

/* What each test runs: an architecture, a query over it, the default
 * overheads, and where an error goes. */
struct fixture {
  struct vl_arch arch;
  struct vl_sens_query q;
  struct vl_overheads ov;
  struct vl_err err;
};

/* *f for the model of CONFIG with vl_job_init's job, SAMPLES draws of the
 * generator started at RNG_START, and no spread yet; with GPU, the one
 * card judged, 10 % of it kept free. A test sets the job and what varies
 * in f->q. */
static void fixture_init(struct fixture *f, const char *config, uint64_t samples,
                         uint64_t rng_start, const struct vl_gpu *gpu) {
  tu_arch(config, &f->arch);
  memset(&f->q, 0, sizeof f->q);
  f->q.arch = &f->arch;
  vl_job_init(&f->q.job);
  f->q.samples = samples;
  f->q.seed = rng_start;
  if (gpu) {
    f->q.gpus[0] = gpu;
    f->q.n_gpus = 1;
    f->q.margin = 0.1;
  }
  vl_overheads_default(&f->ov);
  f->err = (struct vl_err){""};
}

static void seeded_and_consistent(void **state) {
  (void)state;
  struct vl_gpu g = {.name = "test", .memory_bytes = 80ull << 30};
  struct fixture f;
  fixture_init(&f, "data/models/llama-2-7b.json", 3000, 42, &g);
  f.q.job.lora_rank = 16;
  f.q.job.batch = 4;
  f.q.job.attention = VL_ATTN_EAGER;
  f.q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  f.q.vary[1] = (struct vl_vary){.var = VL_VARY_HIDDEN, .dist = VL_DIST_NORMAL, .pct = 0.15};
  f.q.n_vary = 2;
  f.q.max_estimates = 50; /* a LoRA replay is some 3 ms (30 under ASan): the first draws only */
  struct vl_sens_result r1, r2;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r1, &f.err), VL_OK);
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r2, &f.err), VL_OK);
  assert_memory_equal(&r1, &r2, sizeof r1); /* same seed, same answer */
  assert_int_equal(r1.estimates, 50);
  assert_true(r1.drawn >= 50 && r1.drawn < f.q.samples); /* the limit stopped it */
  assert_true(r1.min <= r1.p50 && r1.p50 <= r1.p95 && r1.p95 <= r1.p99 && r1.p99 <= r1.max);
  /* the base job sits inside the spread */
  struct vl_bill b;
  tu_bill(&f.arch, &f.q.job, &b);
  assert_true(r1.min <= b.total_bytes && b.total_bytes <= r1.max);
  assert_int_equal(r1.n_tornado, 2);
  assert_true(r1.tornado[0].high - r1.tornado[0].low >= r1.tornado[1].high - r1.tornado[1].low);
  f.q.seed = 43;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r2, &f.err), VL_OK);
  assert_true(r1.p50 != r2.p50 || r1.p95 != r2.p95); /* another seed, other draws */
  /* at risk on the card: checkpointing is offered and lowers the p95 */
  if (r1.p_exceed[0] > 0.05) {
    assert_true(r1.n_fallbacks >= 1);
    assert_string_equal(r1.fallback[0].name, "activation checkpointing");
    assert_true(r1.fallback[0].p95 < r1.p95);
  }
}

/* A replayed job (full fine-tune on one GPU): a spread that draws only
 * the job as given gives the estimate itself. */
static void replayed_job_is_its_estimate(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/qwen2-0.5b.json", 100, 1, NULL);
  f.q.job.precision = VL_PREC_BF16;
  f.q.job.batch = 4;
  f.q.job.seq = 1024;
  f.q.vary[0] = (struct vl_vary){
      .var = VL_VARY_PRECISION, .dist = VL_DIST_DISCRETE, .n_values = 1, .values = {VL_PREC_BF16}};
  f.q.n_vary = 1;
  struct vl_sens_result r;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r, &f.err), VL_OK);
  struct vl_bill b;
  tu_bill(&f.arch, &f.q.job, &b);
  assert_int_equal(r.p50, b.total_bytes);
  assert_int_equal(r.min, r.max);
  assert_int_equal(r.estimates, 1); /* one distinct job, estimated once */
  /* an input without effect: its tornado ends are equal, and only then */
  assert_int_equal(r.n_tornado, 1);
  assert_int_equal(r.tornado[0].low, r.tornado[0].high);
  /* under DDP the card must hold the larger of the rebuild's two outcomes */
  f.q.job.dp = 2;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r, &f.err), VL_OK);
  tu_bill(&f.arch, &f.q.job, &b);
  assert_true(b.other.total_bytes > b.total_bytes);
  assert_int_equal(r.p50, b.other.total_bytes);
}

/* GPT-2 at 1024 tokens, seq ±20 %: the draws above its 1024 learned
 * positions are refused and counted (P(over) with and without them), every
 * percentile is the estimate of a sequence length in the spread, and they
 * lie inside the tornado, whose high end stops at the last length taken. */
static void draws_are_estimates_refusals_counted(void **state) {
  (void)state;
  struct vl_gpu big = {.name = "big", .memory_bytes = 1ull << 40};
  struct fixture f;
  fixture_init(&f, "data/models/gpt2.json", 20000, 3, &big);
  f.q.job.batch = 8;
  f.q.job.seq = 1024;
  f.q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  f.q.n_vary = 1;
  struct vl_sens_result r;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_int_equal(r.drawn, f.q.samples);
  /* uniform over 819..1229 tokens, 1025..1229 refused: about half */
  assert_true(r.failed > f.q.samples * 4 / 10 && r.failed < f.q.samples * 6 / 10);
  assert_non_null(strstr(r.refused_why, "1024"));
  assert_true(r.p_exceed[0] == 0.0);
  assert_true(fabs(r.p_exceed_refused[0] - (double)r.failed / (double)r.drawn) < 1e-12);
  /* each percentile is the estimator's total at some length in the spread */
  const uint64_t want[] = {r.min, r.p50, r.p95, r.p99, r.max};
  bool found[5] = {false};
  for (uint64_t s = 819; s <= 1024; s++) {
    struct vl_job j = f.q.job;
    j.seq = s;
    struct vl_bill b;
    tu_bill(&f.arch, &j, &b);
    for (int k = 0; k < 5; k++)
      found[k] |= vl_bill_budget_bytes(&b) == want[k];
  }
  for (int k = 0; k < 5; k++)
    assert_true(found[k]);
  assert_int_equal(r.n_tornado, 1);
  assert_true(r.tornado[0].low < r.tornado[0].high); /* the refused end is not the base */
  assert_true(r.tornado[0].low <= r.min && r.max <= r.tornado[0].high);
  assert_true(r.tornado[0].high_cut && !r.tornado[0].low_cut);
  assert_true(r.tornado[0].high_at == 1024.0 && r.tornado[0].low_at == 819.0);
  /* at 512 tokens nothing is refused, and the peak is not quite monotone
   * in the length (the allocator's rounding: 613 tokens hold more than
   * 614): the bar still holds every draw */
  f.q.job.seq = 512;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_int_equal(r.failed, 0);
  assert_true(r.tornado[0].low <= r.min && r.max <= r.tornado[0].high);
  assert_true(!r.tornado[0].low_cut && !r.tornado[0].high_cut);
  f.q.job.seq = 1024;
  /* the same draws refused and over a card that holds none of them */
  struct vl_gpu tiny = {.name = "tiny", .memory_bytes = 1ull << 30};
  f.q.gpus[0] = &tiny;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.p_exceed[0] == 1.0 && r.p_exceed_refused[0] == 1.0);
}

/* Draws that hold more distinct jobs than --estimates are all evaluated,
 * on a surface, and say how many distinct jobs they hold; that many
 * estimates take every draw exactly; where not even the smallest surface
 * and its check fit, a pass stops at the limit. */
static void limit_counts_distinct_jobs(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  q.arch = &a;
  vl_job_init(&q.job);
  q.job.batch = 2;
  q.job.seq = 512;
  q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  q.vary[1] = (struct vl_vary){.var = VL_VARY_HIDDEN, .dist = VL_DIST_UNIFORM, .pct = 0.15};
  q.n_vary = 2;
  q.samples = 400; /* each distinct job an estimate: a few hundred show the count */
  q.max_estimates = 100;
  q.seed = 5;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_sens_result r;
  struct vl_err err = {""};
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  assert_true(r.surface.used);
  assert_int_equal(r.drawn, q.samples);
  assert_true(r.estimates <= q.max_estimates);
  uint64_t d = r.distinct;
  assert_true(d > 100 && d <= q.samples);
  q.max_estimates = d;
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  assert_false(r.surface.used);
  assert_int_equal(r.drawn, q.samples);
  assert_int_equal(r.estimates, d);
  assert_int_equal(r.distinct, d);
  q.max_estimates = d - 1; /* one fewer: the surface */
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  assert_true(r.surface.used);
  assert_int_equal(r.drawn, q.samples);
  assert_int_equal(r.distinct, d);
  q.max_estimates = 50; /* a 2 x 2 lattice and its check do not fit: the first draws */
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  assert_false(r.surface.used);
  assert_true(r.drawn < q.samples);
  assert_int_equal(r.estimates, 50);
}

/* The surface against every draw estimated exactly (GPT-2, sequence
 * ±20 % at 1000 tokens, past its 1024 positions some of the time, and
 * hidden ±15 %): the same draws refused, with the same first reason (the
 * refusals are the estimator's own, for each draw); the lattice ends at
 * the positions (1024, the refusals' edge, a point of it), so no draw has
 * a refused corner and none is estimated for that; each percentile of
 * the interpolated totals within twice the largest error the check
 * measured of the exact ones (every draw within e moves no order
 * statistic by more than e); the same for the step time. */
static void surface_against_exact(void **state) {
  (void)state;
  struct vl_gpu g = {.name = "test", .memory_bytes = 80ull << 30};
  struct fixture f;
  fixture_init(&f, "data/models/gpt2.json", 200, 9, &g);
  f.q.job.batch = 2;
  f.q.job.seq = 1000;
  f.q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  f.q.vary[1] = (struct vl_vary){.var = VL_VARY_HIDDEN, .dist = VL_DIST_UNIFORM, .pct = 0.15};
  f.q.n_vary = 2;
  f.q.max_estimates = 100;
  struct vl_sens_result s, x;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &s, &f.err), VL_OK);
  assert_true(s.surface.used);
  assert_int_equal(s.drawn, f.q.samples);
  assert_true(s.surface.checked > 0 && s.surface.checked <= VL_SENS_CHECKS);
  assert_int_equal(s.surface.exact_draws, 0);
  assert_int_equal(s.surface.nodes[0], 6); /* seq: 5 spaced, and 1024 */
  assert_true(s.estimates <= f.q.max_estimates);
  f.q.max_estimates = s.distinct;
  assert_int_equal(vl_sensitivity_run(&f.q, &f.ov, &x, &f.err), VL_OK);
  assert_false(x.surface.used);
  assert_int_equal(x.drawn, f.q.samples);
  assert_int_equal(s.failed, x.failed);
  assert_true(x.failed > 50 && x.failed < 150); /* 1025 tokens and more */
  assert_string_equal(s.refused_why, x.refused_why);
  double e = 2.0 * (double)s.surface.max_error_bytes;
  const uint64_t ps[][2] = {{s.p50, x.p50}, {s.p95, x.p95}, {s.p99, x.p99}};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    fprintf(stderr, "percentile %zu: surface %llu, exact %llu, 2 x checked error %.0f\n", i,
            (unsigned long long)ps[i][0], (unsigned long long)ps[i][1], e);
    assert_true(fabs((double)ps[i][0] - (double)ps[i][1]) <= e);
  }
  assert_true(s.timed && x.timed);
  double et = 2.0 * s.surface.max_error_time_pct / 100 * x.step_p95;
  assert_true(fabs(s.step_p50 - x.step_p50) <= et && fabs(s.step_p95 - x.step_p95) <= et);
}

/* The gate (vl_sens_judge): a probability at its threshold passes, one
 * past it fails; the OOM gate counts the refused draws as over; a gate
 * whose probability the result does not hold is not judged. */
static void sensitivity_gate(void **state) {
  (void)state;
  struct vl_gpu g;
  memset(&g, 0, sizeof g);
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  struct vl_sens_result r;
  memset(&r, 0, sizeof r);
  struct vl_sens_verdict v;
  memset(&v, 0, sizeof v);
  v.given[VL_SENS_GATE_OOM] = true;
  v.limit[VL_SENS_GATE_OOM] = 0.25;
  assert_false(vl_sens_gate_ready(&q, &r, VL_SENS_GATE_OOM)); /* no card */
  q.gpus[0] = &g;
  q.n_gpus = 1;
  r.p_exceed[0] = 0.10;
  r.p_exceed_refused[0] = 0.25; /* refused draws counted as over: at the limit */
  vl_sens_judge(&q, &r, &v);
  assert_int_equal(v.n_given, 1);
  assert_int_equal(v.n_failed, 0);
  assert_true(v.p[VL_SENS_GATE_OOM] == 0.25);
  r.p_exceed_refused[0] = 0.2501;
  vl_sens_judge(&q, &r, &v);
  assert_true(v.fail[VL_SENS_GATE_OOM]);
  assert_int_equal(v.n_failed, 1);
  /* the time gates need priced draws, tokens and their budget or deadline */
  v.given[VL_SENS_GATE_DEADLINE] = true;
  v.limit[VL_SENS_GATE_DEADLINE] = 0.5;
  r.p_late = 0.9;
  assert_false(vl_sens_gate_ready(&q, &r, VL_SENS_GATE_DEADLINE));
  vl_sens_judge(&q, &r, &v);
  assert_int_equal(v.n_given, 1); /* not judged: the caller refuses it */
  r.timed = true;
  r.n_timed = 10;
  q.tokens = 1000;
  q.deadline_hours = 2;
  assert_true(vl_sens_gate_ready(&q, &r, VL_SENS_GATE_DEADLINE));
  assert_false(vl_sens_gate_ready(&q, &r, VL_SENS_GATE_BUDGET));
  vl_sens_judge(&q, &r, &v);
  assert_int_equal(v.n_given, 2);
  assert_true(v.fail[VL_SENS_GATE_DEADLINE]);
  assert_int_equal(v.n_failed, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(seeded_and_consistent),
                                     cmocka_unit_test(replayed_job_is_its_estimate),
                                     cmocka_unit_test(draws_are_estimates_refusals_counted),
                                     cmocka_unit_test(limit_counts_distinct_jobs),
                                     cmocka_unit_test(surface_against_exact),
                                     cmocka_unit_test(sensitivity_gate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
