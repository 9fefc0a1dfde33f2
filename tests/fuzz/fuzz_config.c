/* libFuzzer harness: the config reader, then the bill of a default job on
 * whatever it accepted. Must never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/arch.h"
#include "vramledger/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_arch a;
  struct vl_err err;
  if (vl_arch_from_json((const char *)data, size, &a, &err) != VL_OK) return 0;
  struct vl_job j;
  vl_job_init(&j);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  static struct vl_bill b;
  if (vl_bill_compute(&a, &j, &ov, &b, &err) != VL_OK) return 0;
  j.task = VL_TASK_INFER;
  j.new_tokens = 7;
  if (vl_bill_compute(&a, &j, &ov, &b, &err) != VL_OK) return 0;
  return 0;
}
