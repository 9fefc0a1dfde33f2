/* lib/render/sensitivity.c: GPT-2's process memory under a drawn sequence
 * (uniform within 20 % of 512 tokens, batch 4; 40 draws, seed 3) on a
 * card of 6 GiB (a peak of 5.0 to 6.5 GiB against 5.4 kept usable), run by vl_sensitivity_run and
 * rendered as JSON (the percentiles and the card's probability the result's, the verdict null
 * without a gate, "fail" with one the draws break) and text and Markdown
 * (the draws counted, the percentiles in GiB). */
#include "render_capture.h"
#include "vramledger/render.h"
#include "vramledger/sensitivity.h"

static struct vl_arch arch;
static struct vl_gpu card = {.name = "card-6g", .memory_bytes = 6ull << 30};
static struct vl_sens_query q;
static struct vl_sens_result r;

static int setup(void **state) {
  (void)state;
  tu_arch("data/models/gpt2.json", &arch);
  q.arch = &arch;
  vl_job_init(&q.job);
  q.job.batch = 4;
  q.job.seq = 512;
  q.samples = 40;
  q.seed = 3;
  q.gpus[0] = &card;
  q.n_gpus = 1;
  q.margin = 0.1;
  q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  q.n_vary = 1;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  vl_status s = vl_sensitivity_run(&q, &ov, &r, &err);
  if (s != VL_OK) fprintf(stderr, "%s\n", err.msg);
  return s == VL_OK ? 0 : -1;
}

static void json_percentiles_and_verdict(void **state) {
  (void)state;
  assert_int_equal(r.drawn, 40);
  assert_true(r.min < r.max); /* the sequence moves the peak */
  printf("  min %.3f p50 %.3f max %.3f GiB, P(over) %.3f\n", (double)r.min / GiB,
         (double)r.p50 / GiB, (double)r.max / GiB, r.p_exceed[0]);
  char *text = NULL;
  RC_CAPTURE(text, vl_render_sensitivity(rc_f, VL_FMT_JSON, &q, &r, NULL));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.sensitivity/1");
  assert_true(json_is_null(json_object_get(root, "verdict")));
  assert_int_equal(rc_num(root, "samples"), 40);
  assert_int_equal(rc_num(root, "seed"), 3);
  assert_int_equal(rc_num(root, "drawn"), r.drawn);
  assert_int_equal(rc_num(root, "failed"), r.failed);
  json_t *pc = json_object_get(root, "percentiles");
  assert_int_equal(rc_num(pc, "p50"), r.p50);
  assert_int_equal(rc_num(pc, "p95"), r.p95);
  assert_int_equal(rc_num(pc, "min"), r.min);
  assert_int_equal(rc_num(pc, "max"), r.max);
  assert_true(fabs(rc_num(json_object_get(root, "p_exceed"), "card-6g") - r.p_exceed[0]) < 1e-6);
  json_t *vary = json_array_get(json_object_get(root, "vary"), 0);
  assert_string_equal(rc_str(vary, "var"), "seq");
  assert_int_equal(json_array_size(json_object_get(root, "tornado")), (size_t)r.n_tornado);
  json_decref(root);
  free(text);
  /* a gate on running out the draws break: the verdict fails */
  assert_true(r.p_exceed[0] > 0.1 && r.p_exceed[0] < 0.9);
  struct vl_sens_verdict v = {0};
  v.given[VL_SENS_GATE_OOM] = true;
  v.limit[VL_SENS_GATE_OOM] = 0.05;
  vl_sens_judge(&q, &r, &v);
  assert_int_equal(v.n_failed, 1);
  RC_CAPTURE(text, vl_render_sensitivity(rc_f, VL_FMT_JSON, &q, &r, &v));
  root = rc_json(text);
  assert_string_equal(rc_str(root, "verdict"), "fail");
  json_decref(root);
  free(text);
}

static void text_and_markdown(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_sensitivity(rc_f, VL_FMT_TEXT, &q, &r, NULL));
  char want[200];
  snprintf(want, sizeof want, "sensitivity: 40 draws (seed 3), each estimated (%llu distinct jobs)",
           (unsigned long long)r.estimates);
  if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
  snprintf(want, sizeof want,
           "  process memory per GPU: p50 %.2f GiB, p95 %.2f GiB, p99 %.2f GiB (min %.2f, max "
           "%.2f)\n",
           (double)r.p50 / GiB, (double)r.p95 / GiB, (double)r.p99 / GiB, (double)r.min / GiB,
           (double)r.max / GiB);
  if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
  snprintf(want, sizeof want, "P(over card-6g with 10 %% kept free) = %.1f %%",
           100 * r.p_exceed[0]);
  if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
  free(text);
  RC_CAPTURE(text, vl_render_sensitivity(rc_f, VL_FMT_MD, &q, &r, NULL));
  assert_int_equal(strncmp(text, "## Sensitivity: 40 draws (seed 3)", 33), 0);
  assert_non_null(strstr(text, "- process memory per GPU: p50 "));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_percentiles_and_verdict),
      cmocka_unit_test(text_and_markdown),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
