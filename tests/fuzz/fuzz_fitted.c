/* libFuzzer harness: a fit read back (`fit --format json`, as `estimate
 * --fit` and `sweep` read it), and a prediction from it. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/regress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_fitted f;
  struct vl_err err;
  if (vl_fitted_parse((const char *)data, size, &f, &err) != VL_OK) return 0;
  double x[VL_FIT_MAX_VARS] = {1, 1024, 1, 1, 1, 1, 1, 1};
  (void)vl_fitted_eval(&f, x);
  return 0;
}
