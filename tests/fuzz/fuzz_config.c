/* libFuzzer harness: the config reader, then the bill of a default job on
 * whatever it accepted; the same bytes as a DeepSpeed configuration, and
 * the bill of what that leaves. Must never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vramledger/arch.h"
#include "vramledger/commitment.h"
#include "vramledger/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_arch a;
  struct vl_err err;
  struct vl_job j;
  vl_job_init(&j);
  char autos[128];
  static const char tiny[] = "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, "
                             "\"n_head\": 4, \"n_positions\": 64, \"vocab_size\": 100}";
  if (vl_job_apply_deepspeed((const char *)data, size, &j, autos, sizeof autos, &err) == VL_OK &&
      vl_arch_from_json(tiny, strlen(tiny), &a, &err) == VL_OK) {
    struct vl_overheads ov0;
    vl_overheads_default(&ov0);
    static struct vl_bill b0;
    if (vl_bill_compute(&a, &j, &ov0, &b0, &err) != VL_OK) return 0;
  }
  if (vl_arch_from_json((const char *)data, size, &a, &err) != VL_OK) return 0;
  vl_job_init(&j);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  static struct vl_bill b;
  if (vl_bill_compute(&a, &j, &ov, &b, &err) != VL_OK) return 0;
  /* the training replay's other paths: LoRA (frozen base, adapters),
   * fp32 (SDPA's math backend where key/value heads are grouped) and
   * ZeRO-1 over three ranks; a
   * refusal (an architecture without the default targets) is fine */
  struct vl_job jl = j;
  jl.lora_rank = 8;
  vl_status lora = vl_bill_compute(&a, &jl, &ov, &b, &err);
  jl = j;
  jl.precision = VL_PREC_FP32;
  vl_status fp32 = vl_bill_compute(&a, &jl, &ov, &b, &err);
  /* DDP's and ZeRO-1's buckets and share, both outcomes of the rebuild */
  jl = j;
  jl.dp = 3;
  jl.zero = 1;
  vl_status zero1 = vl_bill_compute(&a, &jl, &ov, &b, &err);
  (void)lora;
  (void)fp32;
  (void)zero1;
  j.task = VL_TASK_INFER;
  j.new_tokens = 7;
  if (vl_bill_compute(&a, &j, &ov, &b, &err) != VL_OK) return 0;
  return 0;
}
