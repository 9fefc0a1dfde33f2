/* Precision policies and the names of every enum the CLI spells.
 * Bytes per element (Rajbhandari et al. 2019) (8 B/param for weight + gradient under both
 * FP32 and mixed precision; 2 + 2 + 4 master), ZeRO paper (fp16 params and
 * grads, K = 12 for Adam with fp32 master), PyTorch autocast (fp32 weights,
 * half activations; layer_norm/softmax run in fp32). */
#include <string.h>

#include "calibration.h"
#include "internal.h"
#include "pytorch_constants.h"

void vl__policy_get(enum vl_precision p, struct vl__policy *pol) {
  memset(pol, 0, sizeof *pol);
  switch (p) {
  case VL_PREC_FP32: *pol = (struct vl__policy){4, 0, 4, 4, 4, 4, false}; break;
  case VL_PREC_AMP_BF16:
  case VL_PREC_AMP_FP16: *pol = (struct vl__policy){4, 0, 4, 2, 4, 4, true}; break;
  case VL_PREC_BF16:
  case VL_PREC_FP16: *pol = (struct vl__policy){2, 0, 2, 2, 2, 2, false}; break;
  case VL_PREC_MIXED_BF16:
  case VL_PREC_MIXED_FP16: *pol = (struct vl__policy){2, 4, 2, 2, 2, 4, false}; break;
  default: *pol = (struct vl__policy){4, 0, 4, 4, 4, 4, false}; break;
  }
}

uint64_t vl__grad_elem_bytes(const struct vl_job *job, const struct vl__policy *pol) {
  if (job->lora_rank) return VL__ADAPTER_BYTES;
  /* fp32 main_grad buffers beside half weights: Megatron-LM's (its 18 B/param) or
   * --master-grads fp32; they are what is reduced (grad_reduce_in_fp32 sets the buffer's
   * dtype, megatron/core/distributed/distributed_data_parallel.py) */
  bool main_grad = job->framework == VL_FW_MEGATRON || job->master_grads_fp32;
  if (pol->master && main_grad) return 4;
  return pol->grad;
}

#define NAME_FN(fn, type, count, ...)                                                              \
  const char *fn(type v) {                                                                         \
    static const char *const names[] = {__VA_ARGS__};                                              \
    return (unsigned)v < (unsigned)(count) ? names[v] : NULL;                                      \
  }

NAME_FN(vl_precision_name, enum vl_precision, VL_PREC_COUNT, "fp32", "amp-bf16", "amp-fp16", "bf16",
        "fp16", "mixed-bf16", "mixed-fp16")
NAME_FN(vl_optimizer_name, enum vl_optimizer, VL_OPT_COUNT, "sgd", "sgd-momentum", "adam", "adamw",
        "lion", "adafactor", "adam8bit")
NAME_FN(vl_opt_impl_name, enum vl_opt_impl, VL_IMPL_COUNT, "foreach", "fused", "forloop")
NAME_FN(vl_attention_name, enum vl_attention, VL_ATTN_COUNT, "eager", "sdpa")
NAME_FN(vl_ckpt_name, enum vl_ckpt, VL_CKPT_COUNT, "none", "selective", "full")
NAME_FN(vl_loop_name, enum vl_loop, VL_LOOP_COUNT, "plain", "trainer", "lightning", "accelerate")
NAME_FN(vl_framework_name, enum vl_framework, VL_FW_COUNT, "hf", "megatron", "deepspeed")
NAME_FN(vl_offload_name, enum vl_offload, VL_OFFLOAD_COUNT, "none", "optimizer", "full")
NAME_FN(vl_kv_layout_name, enum vl_kv_layout, VL_KV_COUNT, "contiguous", "paged")
NAME_FN(vl_allocator_name, enum vl_allocator, VL_ALLOC_COUNT, "default", "expandable")
NAME_FN(vl_phase_name, enum vl_phase, VL_PH_COUNT, "forward", "backward", "optimizer step",
        "prefill", "decode")
NAME_FN(vl_line_key, enum vl_line, VL_LINE_COUNT, "parameters", "master_weights", "gradients",
        "optimizer_states", "activations", "autocast_cache", "transient", "kv_cache",
        "comm_buffers", "workspace", "allocator_reserve", "cuda_context")
NAME_FN(vl_line_label, enum vl_line, VL_LINE_COUNT, "parameters", "master weights (fp32)",
        "gradients", "optimizer states", "activations", "autocast weight copies",
        "transient buffers", "KV cache", "communication buffers", "cuBLAS workspace",
        "allocator reserve", "CUDA context + libraries")

#define PARSE_FN(fn, type, count, namefn)                                                          \
  bool fn(const char *s, type *out) {                                                              \
    for (int i = 0; i < (int)(count); i++)                                                         \
      if (strcmp(namefn((type)i), s) == 0) {                                                       \
        *out = (type)i;                                                                            \
        return true;                                                                               \
      }                                                                                            \
    return false;                                                                                  \
  }

PARSE_FN(vl_precision_parse, enum vl_precision, VL_PREC_COUNT, vl_precision_name)
PARSE_FN(vl_optimizer_parse, enum vl_optimizer, VL_OPT_COUNT, vl_optimizer_name)
PARSE_FN(vl_opt_impl_parse, enum vl_opt_impl, VL_IMPL_COUNT, vl_opt_impl_name)
PARSE_FN(vl_attention_parse, enum vl_attention, VL_ATTN_COUNT, vl_attention_name)
PARSE_FN(vl_ckpt_parse, enum vl_ckpt, VL_CKPT_COUNT, vl_ckpt_name)
PARSE_FN(vl_loop_parse, enum vl_loop, VL_LOOP_COUNT, vl_loop_name)
PARSE_FN(vl_allocator_parse, enum vl_allocator, VL_ALLOC_COUNT, vl_allocator_name)

bool vl_line_in_allocated(enum vl_line l) {
  return l != VL_LINE_RESERVE && l != VL_LINE_CONTEXT && l < VL_LINE_COUNT;
}

void vl_job_init(struct vl_job *job) {
  memset(job, 0, sizeof *job);
  job->task = VL_TASK_TRAIN;
  job->batch = 1;
  job->seq = 2048;
  job->grad_accum = 1;
  job->precision = VL_PREC_AMP_BF16;
  job->optimizer = VL_OPT_ADAMW;
  job->opt_impl = VL_IMPL_FOREACH;
  job->attention = VL_ATTN_SDPA;
  job->checkpointing = VL_CKPT_NONE;
  job->framework = VL_FW_HF;
  job->dp = job->tp = job->pp = 1;
  job->kv_layout = VL_KV_CONTIGUOUS;
  job->kv_block_tokens = 16;
}

uint64_t vl_job_image_side(const struct vl_arch *arch, const struct vl_job *job) {
  return job->image_size ? job->image_size : arch->image_size;
}

uint64_t vl_job_target_seq(const struct vl_arch *arch, const struct vl_job *job) {
  return vl_arch_is_seq2seq(arch) && job->target_seq ? job->target_seq : job->seq;
}

uint64_t vl_context_bytes(const struct vl_overheads *o, const struct vl_job *job) {
  /* generate() alone loads fewer kernels; with expandable segments its
   * process holds as much as a training one (0.756 GiB on both generate()
   * runs of data/reference/h200-torch-2.11/expandable-segments.json) */
  bool gen = job->task == VL_TASK_INFER && job->allocator != VL_ALLOC_EXPANDABLE;
  return gen ? o->cuda_context_infer_bytes : o->cuda_context_bytes;
}

uint64_t vl_workspace_thread_bytes(const struct vl_overheads *o) {
  return o->cublas_workspace_bytes + o->cublaslt_workspace_bytes;
}

unsigned vl_workspace_threads(const struct vl_job *job) {
  return job->task == VL_TASK_TRAIN ? VL_WORKSPACE_THREADS_TRAIN : VL_WORKSPACE_THREADS_INFER;
}

/* the bytes of a measured constant: whole numbers, exact in a double */
static uint64_t cal_bytes(enum vl__cal id) { return (uint64_t)vl__calibration(id)->value; }

void vl_overheads_default(struct vl_overheads *o) {
  /* every measured number, its dataset and how it was taken: calibration.c */
  o->cuda_context_bytes = cal_bytes(VL_CAL_CUDA_CONTEXT);
  o->cuda_context_infer_bytes = cal_bytes(VL_CAL_CUDA_CONTEXT_INFER);
  o->nccl_bytes = cal_bytes(VL_CAL_NCCL);
  o->sm_count = (unsigned)vl__calibration(VL_CAL_SM_COUNT)->value;
  o->threads_per_sm = (unsigned)vl__calibration(VL_CAL_THREADS_PER_SM)->value;
  o->allocator_churn = vl__calibration(VL_CAL_CHURN)->value;
  o->allocator_churn_expandable = vl__calibration(VL_CAL_CHURN_EXPANDABLE)->value;
  /* PyTorch's default on the H200 (pytorch_constants.h), not measured */
  o->cublas_workspace_bytes = VL_PT_CUBLAS_WORKSPACE_SM90;
  o->cublaslt_workspace_bytes = 0; /* CUDA: cuBLASLt takes the cuBLAS handle's */
}
