/* The precision policy: the bytes of an element of each kind of tensor
 * under a precision, as the model bills them. lib/model's files and
 * lib/decide's step time (steptime.c) and planner (plan.c, which prices
 * data-parallel traffic by it) share it; the rest of lib/model's
 * interfaces are in internal.h, for lib/model alone. */
#ifndef VRAMLEDGER_MODEL_POLICY_H
#define VRAMLEDGER_MODEL_POLICY_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/model.h"

/* PEFT keeps LoRA adapters in fp32 (get_peft_model's autocast_adapter_dtype) */
#define VL__ADAPTER_BYTES 4

/* Bytes per element under a precision policy. */
struct vl__policy {
  uint64_t weight; /* stored parameters */
  uint64_t master; /* fp32 master copy (mixed-*), else 0 */
  uint64_t grad;   /* gradients as autograd writes them */
  uint64_t act;    /* activations in matmuls (autocast dtype) */
  uint64_t resid;  /* residual stream dtype (fp32 under AMP) */
  uint64_t state;  /* one optimizer state element (fp32 unless pure half) */
  bool autocast;   /* amp-*: autocast keeps half copies of fp32 weights */
};
void vl__policy_get(enum vl_precision p, struct vl__policy *pol);
/* Bytes of one gradient element as the optimizer reads it: PEFT's fp32
 * adapters (VL__ADAPTER_BYTES), mixed-*'s fp32 main_grad buffer under
 * Megatron-LM or --master-grads fp32, else pol->grad. The bill's gradients
 * and the planner's data-parallel traffic (lib/decide/plan.c) use it. */
uint64_t vl__grad_elem_bytes(const struct vl_job *job, const struct vl__policy *pol);
/* Whether the per-layer linear `name` carries a LoRA adapter in job (its
 * --lora-targets, all-linear, or PEFT's default for the family; bill.c) */
bool vl__lora_is_target(const struct vl_arch *arch, const struct vl_job *job, const char *name);

/* Bytes of an element of the copy of its input each LoRA adapter makes
 * and lora_A saves: PEFT casts a half input to the adapters' fp32, and
 * under autocast lora_A casts that to half; 0 where the input is already
 * fp32 and shared (peft 0.21 tuners/lora/layer.py Linear.forward) */
static inline uint64_t vl__lora_input_copy_bytes(const struct vl__policy *pol) {
  return pol->autocast ? pol->act : pol->act < VL__ADAPTER_BYTES ? VL__ADAPTER_BYTES : 0;
}

/* Bytes of an element of eager attention's probabilities as softmax returns
 * them: fp32 where the model asks for it (F.softmax(x, dtype=float32), every
 * family but GPT-2) or autocast runs it (softmax is on its fp32 list), else
 * the scores' own e bytes. */
static inline uint64_t vl__softmax_bytes(const struct vl_arch *a, bool autocast, uint64_t e) {
  return (autocast || !a->softmax_native) ? 4 : e;
}

#endif
