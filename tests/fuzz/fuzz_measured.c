/* libFuzzer harness: measured results (`validate --results FILE`, the
 * records measure.py writes). */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_measured m;
  struct vl_err err;
  if (vl_measured_parse((const char *)data, size, &m, &err) == VL_OK) vl_measured_release(&m);
  return 0;
}
