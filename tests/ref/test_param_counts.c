/* Parameter counts equal PyTorch's sum(p.numel()) for every bundled and test
 * config, and for a config that names only its model_type (transformers'
 * defaults for every key). Evidence: data/reference/transformers-5.17/
 * param-counts.json, made by bench/gpu/jobs/model_facts.py with transformers 5.17
 * (exact match required: tolerance 0). */
#include <jansson.h>

#include "testutil.h"

static void every_config_matches_pytorch(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("data/reference/transformers-5.17/param-counts.json", &len);
  assert_non_null(text);
  json_error_t jerr;
  json_t *root = json_loadb(text, len, 0, &jerr);
  assert_non_null(root);
  json_t *counts = json_object_get(root, "counts");
  const char *path;
  json_t *v;
  int checked = 0;
  json_object_foreach(counts, path, v) {
    json_t *n = json_object_get(v, "params");
    if (!n) {
      printf("  %-48s skipped: %s\n", path, json_string_value(json_object_get(v, "error")));
      continue;
    }
    struct vl_arch a;
    tu_arch(path, &a);
    struct vl_inventory inv;
    struct vl_err err = {""};
    assert_int_equal(vl_inventory_build(&a, &inv, &err), VL_OK);
    uint64_t want = (uint64_t)json_integer_value(n);
    printf("  %-48s %15llu  pytorch %15llu  %s\n", path, (unsigned long long)inv.total,
           (unsigned long long)want, inv.total == want ? "ok" : "MISMATCH");
    assert_int_equal(inv.total, want);
    checked++;
  }
  assert_true(checked >= 68);
  json_decref(root);
  free(text);
}

/* A config of only {"model_type": T} is read with transformers' defaults;
 * a type whose defaults leave a needed key null is refused, naming it. */
static void defaults_match_pytorch(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("data/reference/transformers-5.17/param-counts.json", &len);
  assert_non_null(text);
  json_t *root = json_loadb(text, len, 0, NULL);
  assert_non_null(root);
  const char *type;
  json_t *v;
  int checked = 0, refused = 0;
  json_object_foreach(json_object_get(root, "defaults"), type, v) {
    char cfg[128];
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"%s\"}", type);
    struct vl_arch a;
    struct vl_err err = {""};
    vl_status s = vl_arch_from_json(cfg, strlen(cfg), &a, &err);
    if (s != VL_OK) { /* DeepSeek-V2: num_experts_per_tok defaults to None */
      printf("  %-14s refused: %s\n", type, err.msg);
      assert_non_null(strstr(err.msg, "num_experts_per_tok"));
      refused++;
      continue;
    }
    struct vl_inventory inv;
    assert_int_equal(vl_inventory_build(&a, &inv, &err), VL_OK);
    uint64_t want = (uint64_t)json_integer_value(json_object_get(v, "params"));
    printf("  %-14s %15llu  pytorch %15llu  %s\n", type, (unsigned long long)inv.total,
           (unsigned long long)want, inv.total == want ? "ok" : "MISMATCH");
    assert_int_equal(inv.total, want);
    checked++;
  }
  assert_int_equal(checked + refused, VL_FAM_GENERIC); /* every row of VL_MODEL_TYPES */
  assert_true(refused <= 1);
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(every_config_matches_pytorch),
                                     cmocka_unit_test(defaults_match_pytorch)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
