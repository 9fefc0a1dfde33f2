/* libFuzzer harness: the plan `commit --plan` reads (`plan --format
 * json`): its best configuration, its settings as a job, its margin. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "plan_best.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct plan_best b;
  struct vl_job job;
  char targets[256];
  struct vl_err err = {""};
  enum plan_fault f =
      plan_best_read((const char *)data, size, &b, &job, targets, sizeof targets, &err);
  if (f == PLAN_OK) {
    if (!(b.margin >= 0 && b.margin < 1) || strlen(b.model) >= sizeof b.model ||
        strlen(b.gpu) >= sizeof b.gpu)
      __builtin_trap();
    if (!memchr(targets, '\0', sizeof targets)) __builtin_trap();
  }
  if (!memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
  return 0;
}
