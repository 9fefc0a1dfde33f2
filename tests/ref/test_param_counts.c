/* Parameter counts equal PyTorch's sum(p.numel()) for every bundled and test
 * config. Evidence: bench/results/2026-11-29-h200-param-counts.json, made on
 * the lent H200 by bench/param_count.py with transformers 5.17 (exact match
 * required: tolerance 0). */
#include <jansson.h>

#include "testutil.h"

static void every_config_matches_pytorch(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("bench/results/2026-11-29-h200-param-counts.json", &len);
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
  assert_true(checked >= 40);
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(every_config_matches_pytorch)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
