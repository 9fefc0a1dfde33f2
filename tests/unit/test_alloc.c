/* lib/util/alloc.c: every allocation can fail, and the library says so
 * instead of crashing or leaking (curl's torture tests). Jansson's
 * allocations go through the same hook here. */
#include <jansson.h>

#include "testutil.h"
#include "vramledger/catalog.h"

static void catalog_survives_every_failed_allocation(void **state) {
  (void)state;
  json_set_alloc_funcs(vl_malloc, vl_free);
  size_t len = 0;
  char *text = tu_read("data/gpus.json", &len);
  int ok = 0, nomem = 0;
  for (unsigned long n = 1; n < 2000; n++) {
    vl_alloc_fail_at(n);
    struct vl_catalog c;
    struct vl_err err = {""};
    vl_status s = vl_catalog_parse(text, len, &c, &err);
    vl_alloc_fail_at(0);
    if (s == VL_OK) {
      assert_true(c.n >= 12);
      vl_catalog_release(&c);
      ok++;
      if (ok > 3) break; /* past the last allocation */
    } else {
      /* jansson reports its own allocation failures as parse errors */
      assert_true(s == VL_ENOMEM || s == VL_EPARSE || s == VL_EKEY);
      nomem++;
    }
  }
  assert_true(nomem > 10);
  assert_true(ok > 0);
  free(text);
}

static void config_survives_every_failed_allocation(void **state) {
  (void)state;
  json_set_alloc_funcs(vl_malloc, vl_free);
  size_t len = 0;
  char *text = tu_read("data/models/mixtral-8x7b.json", &len);
  int failures = 0;
  for (unsigned long n = 1; n < 500; n++) {
    vl_alloc_fail_at(n);
    struct vl_arch a;
    struct vl_err err = {""};
    vl_status s = vl_arch_from_json(text, len, &a, &err);
    vl_alloc_fail_at(0);
    if (s == VL_OK) break;
    failures++;
  }
  assert_true(failures > 5);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(catalog_survives_every_failed_allocation),
      cmocka_unit_test(config_survives_every_failed_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
