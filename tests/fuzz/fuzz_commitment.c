/* libFuzzer harness: the commitment reader (commitment.json, its baseline
 * settings), the reader `check`, `audit` and `run --commitment` trust. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/commitment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_commitment c;
  struct vl_err err;
  int n = vl_commitment_parse((const char *)data, size, &c, &err) == VL_OK;
  struct vl_job j;
  char targets[256];
  n += vl_job_from_settings((const char *)data, size, &j, targets, sizeof targets, &err) == VL_OK;
  return n < 0; /* 0: libFuzzer's "keep going" */
}
