/* libFuzzer harness: the run record reader and its summary. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_record r;
  struct vl_err err;
  if (vl_record_parse((const char *)data, size, &r, &err) != VL_OK) return 0;
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int n;
  vl_record_summarize(&r, &s, f, &n);
  vl_record_release(&r);
  return 0;
}
