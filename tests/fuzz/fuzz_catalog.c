/* libFuzzer harness: the GPU catalog reader. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_catalog c;
  struct vl_err err;
  if (vl_catalog_parse((const char *)data, size, &c, &err) != VL_OK) return 0;
  (void)vl_catalog_find(&c, "h100");
  vl_catalog_release(&c);
  return 0;
}
