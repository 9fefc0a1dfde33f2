/* Precision policies and the names of every enum the CLI spells.
 * Bytes per element (Rajbhandari et al. 2019) (8 B/param for weight + gradient under both
 * FP32 and mixed precision; 2 + 2 + 4 master), ZeRO paper (fp16 params and
 * grads, K = 12 for Adam with fp32 master), PyTorch autocast (fp32 weights,
 * half activations; layer_norm/softmax run in fp32). */
#include <string.h>

#include "internal.h"

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

uint64_t vl_context_bytes(const struct vl_overheads *o, const struct vl_job *job) {
  /* generate() alone loads fewer kernels; with expandable segments its
   * process holds as much as a training one (0.756 GiB on both generate()
   * runs of bench/results/calibration/expandable-segments.json) */
  bool gen = job->task == VL_TASK_INFER && job->allocator != VL_ALLOC_EXPANDABLE;
  return gen ? o->cuda_context_infer_bytes : o->cuda_context_bytes;
}

void vl_overheads_default(struct vl_overheads *o) {
  /* NVML process memory - max_memory_reserved during real training steps:
   * 0.725-0.758 GiB over 36 runs (CUDA 13, PyTorch 2.11; kernels load
   * lazily, so it grows past the 586 MiB seen after one matmul in
   * bench/results/calibration/basics.json); the median of the
   * calibration set: bench/results/calibration/calibration.json */
  o->cuda_context_bytes = 805306368ull; /* 0.75 GiB */
  /* a process that only runs generate() loads fewer kernels (no backward,
   * no optimizer; CUDA loads modules lazily): 678-734 MiB over 14
   * generate() runs, the median 698 MiB (bench/results/calibration/
   * calibration.json, model-types/types-measured.json,
   * known-misses/, estimate-dry-run/raw/) */
  o->cuda_context_infer_bytes = 731906048ull; /* 698 MiB; not with expandable segments */
  o->cublas_workspace_bytes = 32ull << 20;
  /* the H100 SXM's and H200's (cudaDeviceProp multiProcessorCount and
   * maxThreadsPerMultiProcessor, read on the H200:
   * bench/results/cuda-reduce/): they size the partials of ATen's CUDA
   * reductions (Reduce.cuh), a linear's bias gradient among them */
  o->sm_count = 132;
  o->threads_per_sm = 2048;
  /* a rank's memory beyond one GPU's context when ranks talk: NCCL's own
   * buffers (libnccl.so.2's driver allocations: 484 MiB a rank) and the
   * larger context NCCL's kernels and peers bring. NVML's per-GPU peak
   * minus the rank's max_memory_reserved() is 1,681,915,904 B on every
   * rank of four GPT-2 DDP runs and 1,679,818,752 B under FSDP full shard
   * and shard-grad-op (2 H200s, NVLink multicast off, under `vramledger
   * run`: bench/results/ddp-rebuild/per-gpu-overhead.txt),
   * against 805,306,368 B alone; pipeline stages' point-to-point adds
   * 161 MB more (not counted). Was 256 MiB (4 MiB NCCL_BUFFSIZE x 2
   * directions x 16 channels x 2 ring peers), -0.56 GiB a rank. */
  o->nccl_bytes = 876609536ull; /* 836 MiB */
  /* cached free blocks among the churning tensors. Default allocator: the
   * value that fits most of the calibration runs (bench/accuracy/compare.py over
   * bench/results/calibration/calibration.json); it cannot cover the
   * runs where freed large blocks are split and re-requested (up to 28 %).
   * Expandable segments: 0.2-3 % measured on the runs that fragment most
   * (bench/results/calibration/expandable-segments.json) */
  o->allocator_churn = 0.05;
  o->allocator_churn_expandable = 0.02;
}

struct vl_term *vl__term(struct vl_bill *b, enum vl_line line, const char *name,
                         const char *formula, const char *source, uint64_t bytes) {
  /* the table is sized for every term the model records; should it ever
   * fill, the last slot is reused rather than writing past the end */
  struct vl_term *t = &b->terms[b->n_terms < VL_MAX_TERMS ? b->n_terms++ : VL_MAX_TERMS - 1];
  memset(t, 0, sizeof *t);
  t->line = line;
  t->name = name;
  t->formula = formula;
  t->source = source;
  t->bytes = bytes;
  return t;
}

void vl__term_in(struct vl_term *t, const char *name, double value, const char *unit) {
  if (t->n_in >= VL_TERM_INPUTS) return;
  t->in[t->n_in++] = (struct vl_input){name, value, unit};
}
