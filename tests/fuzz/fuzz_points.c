/* libFuzzer harness: the CSV reader of `fit`, then a fit of what it read. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/regress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_points p;
  struct vl_err err;
  if (vl_points_parse((const char *)data, size, NULL, 0, &p, &err) != VL_OK) return 0;
  struct vl_term_spec t[VL_FIT_MAX_TERMS];
  size_t nt;
  struct vl_fit_result r;
  if (vl_terms_parse("const,b,bs,bs2", &p, t, &nt, &err) == VL_OK &&
      vl_fit_points(&p, t, nt, &r, &err) == VL_OK) {
    double x[VL_FIT_MAX_VARS] = {2, 128}, hw;
    (void)vl_fit_predict(&r, t, nt, x, &hw);
  }
  vl_points_release(&p);
  return 0;
}
