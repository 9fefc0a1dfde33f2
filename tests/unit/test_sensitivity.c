/* lib/decide/sensitivity.c: seeded, consistent, and the fallbacks help. */
#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/sensitivity.h"

static void seeded_and_consistent(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  struct vl_gpu g = {.name = "test", .memory_bytes = 80ull << 30};
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  q.arch = &a;
  vl_job_init(&q.job);
  q.job.lora_rank = 16;
  q.job.batch = 4;
  q.job.attention = VL_ATTN_EAGER;
  q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  q.vary[1] = (struct vl_vary){.var = VL_VARY_HIDDEN, .dist = VL_DIST_NORMAL, .pct = 0.15};
  q.n_vary = 2;
  q.samples = 3000;
  q.seed = 42;
  q.gpus[0] = &g;
  q.n_gpus = 1;
  q.margin = 0.1;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_sens_result r1, r2;
  struct vl_err err = {""};
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r1, &err), VL_OK);
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r2, &err), VL_OK);
  assert_memory_equal(&r1, &r2, sizeof r1); /* same seed, same answer */
  assert_true(r1.min <= r1.p50 && r1.p50 <= r1.p95 && r1.p95 <= r1.p99 && r1.p99 <= r1.max);
  /* the base job sits inside the spread */
  struct vl_bill b;
  tu_bill(&a, &q.job, &b);
  assert_true(r1.min <= b.total_bytes && b.total_bytes <= r1.max);
  assert_int_equal(r1.n_tornado, 2);
  assert_true(r1.tornado[0].high - r1.tornado[0].low >= r1.tornado[1].high - r1.tornado[1].low);
  q.seed = 43;
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r2, &err), VL_OK);
  assert_true(r1.p50 != r2.p50 || r1.p95 != r2.p95); /* another seed, other draws */
  /* at risk on the card: checkpointing is offered and lowers the p95 */
  if (r1.p_exceed[0] > 0.05) {
    assert_true(r1.n_fallbacks >= 1);
    assert_string_equal(r1.fallback[0].name, "activation checkpointing");
    assert_true(r1.fallback[0].p95 < r1.p95);
  }
}

/* A replayed job (full fine-tune on one GPU): the draws take the analytic
 * lines scaled to the replayed total at the job as given, so a spread that
 * draws only that job gives the estimate itself. */
static void replayed_job_scaled_to_its_estimate(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/qwen2-0.5b.json", &a);
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  q.arch = &a;
  vl_job_init(&q.job);
  q.job.precision = VL_PREC_BF16;
  q.job.batch = 4;
  q.job.seq = 1024;
  q.vary[0] = (struct vl_vary){
      .var = VL_VARY_PRECISION, .dist = VL_DIST_DISCRETE, .n_values = 1, .values = {VL_PREC_BF16}};
  q.n_vary = 1;
  q.samples = 100;
  q.seed = 1;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_sens_result r;
  struct vl_err err = {""};
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  struct vl_bill b;
  tu_bill(&a, &q.job, &b);
  assert_int_equal(r.p50, b.total_bytes);
  assert_int_equal(r.min, r.max);
  /* and the lines alone differ from it: the scaling is not a no-op */
  struct vl_job jl = q.job;
  jl.analytic_only = true;
  struct vl_bill bl;
  tu_bill(&a, &jl, &bl);
  assert_true(bl.total_bytes != b.total_bytes);
  /* under DDP the card must hold the larger of the rebuild's two outcomes */
  q.job.dp = 2;
  assert_int_equal(vl_sensitivity_run(&q, &ov, &r, &err), VL_OK);
  tu_bill(&a, &q.job, &b);
  assert_true(b.other.total_bytes > b.total_bytes);
  assert_int_equal(r.p50, b.other.total_bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(seeded_and_consistent),
                                     cmocka_unit_test(replayed_job_scaled_to_its_estimate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
