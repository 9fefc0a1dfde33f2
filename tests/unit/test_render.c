/* lib/render: units and the estimate report's JSON contract. */
#include <jansson.h>

#include "testutil.h"
#include "render/internal.h"
#include "vramledger/commitment.h"
#include "vramledger/render.h"

static void units(void **state) {
  (void)state;
  char buf[64];
  assert_string_equal(vl_fmt_int(buf, sizeof buf, 0), "0");
  assert_string_equal(vl_fmt_int(buf, sizeof buf, 999), "999");
  assert_string_equal(vl_fmt_int(buf, sizeof buf, 1000), "1,000");
  assert_string_equal(vl_fmt_int(buf, sizeof buf, 6738415616ull), "6,738,415,616");
  assert_string_equal(vl_fmt_gib(buf, sizeof buf, 3ull << 29), "1.50 GiB");
}

/* estimate's JSON of the view, parsed */
static json_t *view_json(const struct vl_estimate_view *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(vl_render_estimate(f, VL_FMT_JSON, v), 0);
  fclose(f);
  json_error_t jerr;
  json_t *r = json_loads(buf, 0, &jerr);
  free(buf);
  assert_non_null(r);
  return r;
}

/* estimate's JSON of the job, parsed */
static json_t *estimate_json(const struct vl_arch *a, const struct vl_job *j,
                             const struct vl_bill *b) {
  struct vl_estimate_view v = {
      .model_name = "gpt2", .arch = a, .job = j, .bill = b, .version = "test"};
  return view_json(&v);
}

static void json_contract(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 512;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  json_t *r = estimate_json(&a, &j, &b);
  const char *keys[] = {"params",
                        "trainable_params",
                        "bill",
                        "peak_phase",
                        "peak_allocated_bytes",
                        "peak_reserved_bytes",
                        "cuda_context_bytes",
                        "total_bytes"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    assert_non_null(json_object_get(r, keys[i]));
  const char *lines[] = {"parameters",  "master_weights", "gradients", "optimizer_states",
                         "activations", "transient",      "kv_cache"};
  json_t *bill = json_object_get(r, "bill");
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
    assert_true(json_is_integer(json_object_get(bill, lines[i])));
  assert_int_equal(json_integer_value(json_object_get(r, "params")), 124439808);
  assert_int_equal(json_integer_value(json_object_get(r, "total_bytes")),
                   (json_int_t)b.total_bytes);
  assert_string_equal(json_string_value(json_object_get(r, "peak_phase")),
                      vl_phase_name(b.peak_phase));
  json_decref(r);
}

/* estimate's "settings" (and so a plan's best, which `commit --plan`
 * reads) round-trips every setting a commitment compares: keep_grads,
 * drop_outputs, ddp_static_graph and pp_schedule were missing. */
static void settings_round_trip(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 512;
  j.grads_persist = true;
  j.drop_outputs = true;
  j.ddp_static_graph = true;
  j.pp = 2;
  j.pp_gpipe = true;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  json_t *r = estimate_json(&a, &j, &b);
  char *st = json_dumps(json_object_get(r, "settings"), 0);
  assert_non_null(st);
  struct vl_job back;
  vl_job_init(&back);
  char targets[256];
  struct vl_err err = {""};
  assert_int_equal(vl_job_from_settings(st, strlen(st), &back, targets, sizeof targets, &err),
                   VL_OK);
  assert_true(back.grads_persist);
  assert_true(back.drop_outputs);
  assert_true(back.ddp_static_graph);
  assert_true(back.pp_gpipe);
  assert_int_equal(back.pp, 2);
  free(st);
  json_decref(r);
}

/* estimate's JSON of the job on a card: the fit, the context's range on
 * the card (none where it was measured) and whether the fit is within it */
static json_t *estimate_gpu_json(const struct vl_arch *a, const struct vl_job *j,
                                 const struct vl_gpu *g, uint64_t total) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  vl_overheads_for_gpu(&ov, g);
  static struct vl_bill b;
  struct vl_err err = {""};
  assert_int_equal(vl_bill_compute(a, j, &ov, &b, &err), VL_OK);
  b.total_bytes = total; /* the fit checked at a chosen total */
  struct vl_fit fit;
  vl_fit_check(total, g, 0.1, &fit);
  struct vl_context_carry c;
  vl_context_carry(g, &ov, j, &c);
  struct vl_estimate_view v = {.model_name = "gpt2",
                               .arch = a,
                               .job = j,
                               .bill = &b,
                               .gpu = g,
                               .fit = &fit,
                               .version = "test",
                               .carry = &c,
                               .context_edge = vl_fit_near_edge(&fit, c.range_bytes)};
  return view_json(&v);
}

static long long gpu_field(json_t *r, const char *ctx, const char *key) {
  json_t *g = json_object_get(r, "gpu");
  json_t *o = ctx ? json_object_get(g, ctx) : g;
  json_t *x = json_object_get(o, key);
  assert_non_null(x);
  return json_is_boolean(x) ? json_is_true(x) : (long long)json_integer_value(x);
}

static void context_range_json(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 512; /* GPT-2 has 1024 positions */
  const struct vl_gpu *a100 = vl_catalog_find(&cat, "a100-80gb");
  const struct vl_gpu *h200 = vl_catalog_find(&cat, "h200");
  uint64_t usable = (uint64_t)((double)a100->memory_bytes * 0.9);
  /* far from the edge: the range stated, not at the edge */
  json_t *r = estimate_gpu_json(&a, &j, a100, 8ull << 30);
  assert_int_equal(gpu_field(r, "context", "range_bytes"), 200ll << 20);
  assert_int_equal(gpu_field(r, "context", "carried_over"), 1);
  assert_int_equal(gpu_field(r, "context", "cublas_workspace_billed_bytes"), 8519680);
  assert_int_equal(gpu_field(r, "context", "workspace_threads"), 2);
  assert_int_equal(gpu_field(r, NULL, "context_edge"), 0);
  json_decref(r);
  /* 100 MiB of headroom, and 100 MiB short: both within the range */
  r = estimate_gpu_json(&a, &j, a100, usable - (100ull << 20));
  assert_int_equal(gpu_field(r, NULL, "fits"), 1);
  assert_int_equal(gpu_field(r, NULL, "context_edge"), 1);
  json_decref(r);
  r = estimate_gpu_json(&a, &j, a100, usable + (100ull << 20));
  assert_int_equal(gpu_field(r, NULL, "fits"), 0);
  assert_int_equal(gpu_field(r, NULL, "context_edge"), 1);
  json_decref(r);
  /* the H200: measured, no range, never at its edge */
  usable = (uint64_t)((double)h200->memory_bytes * 0.9);
  r = estimate_gpu_json(&a, &j, h200, usable - (100ull << 20));
  assert_int_equal(gpu_field(r, "context", "range_bytes"), 0);
  assert_int_equal(gpu_field(r, "context", "carried_over"), 0);
  assert_int_equal(gpu_field(r, NULL, "context_edge"), 0);
  json_decref(r);
  vl_catalog_release(&cat);
}

/* what one escaping function writes for s */
static char *escaped(void (*fn)(FILE *, const char *), const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fn(f, s);
  fclose(f);
  return buf;
}

static void expect_escaped(void (*fn)(FILE *, const char *), const char *s, const char *want) {
  char *got = escaped(fn, s);
  assert_string_equal(got, want);
  free(got);
}

/* One function per format (lib/render/escape.c): what a hostile string
 * from a record, a configuration or the command line becomes. */
static void escaping(void **state) {
  (void)state;
  static const char hostile[] = "<b>a|b\\\"c\nd\x1b[2J\xc2\x9b&e\xff\xc3";
  expect_escaped(vl__html_text, hostile, "&lt;b&gt;a|b\\&quot;c?d?[2J?&amp;e??");
  expect_escaped(vl__md_text, hostile, "&lt;b&gt;a\\|b\\\\\"c?d?\\[2J?&amp;e??");
  expect_escaped(vl__plain_text, hostile, "<b>a|b\\\"c?d?[2J?&e??");
  expect_escaped(vl__prom_label, hostile, "<b>a|b\\\\\\\"c\\nd?[2J?&e??");
  expect_escaped(vl__csv_field, hostile, "\"<b>a|b\\\"\"c?d?[2J?&e??\"");
  expect_escaped(vl__csv_field, "=1+1", "\"'=1+1\"");
  expect_escaped(vl__csv_field, "-x", "\"'-x\"");
  expect_escaped(vl__csv_field, "x=1", "\"x=1\"");
  expect_escaped(vl__json_text, "</script><!--\"\\\n\xc3\xa9",
                 "\"\\u003c/script\\u003e\\u003c!--\\\"\\\\\\u000a\xc3\xa9\"");
  json_t *j = vl__json_str("a\xff"
                           "b\xe2\x82");
  assert_non_null(j); /* jansson's json_string refuses it: the member was lost */
  assert_string_equal(json_string_value(j), "a?b");
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(units), cmocka_unit_test(json_contract),
                                     cmocka_unit_test(settings_round_trip),
                                     cmocka_unit_test(context_range_json),
                                     cmocka_unit_test(escaping)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
