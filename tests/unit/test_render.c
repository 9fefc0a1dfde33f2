/* lib/render: units and the estimate report's JSON contract. */
#include <jansson.h>

#include "testutil.h"
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

/* estimate's JSON of the job, parsed */
static json_t *estimate_json(const struct vl_arch *a, const struct vl_job *j,
                             const struct vl_bill *b) {
  struct vl_estimate_view v = {
      .model_name = "gpt2", .arch = a, .job = j, .bill = b, .version = "test"};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(vl_render_estimate(f, VL_FMT_JSON, &v), 0);
  fclose(f);
  json_error_t jerr;
  json_t *r = json_loads(buf, 0, &jerr);
  free(buf);
  assert_non_null(r);
  return r;
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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(units), cmocka_unit_test(json_contract),
                                     cmocka_unit_test(settings_round_trip)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
