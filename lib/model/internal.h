/* Internal interfaces between the files of lib/model. The precision policy
 * lib/decide uses too is in policy.h. */
#ifndef VRAMLEDGER_MODEL_INTERNAL_H
#define VRAMLEDGER_MODEL_INTERNAL_H
#include "../util/internal.h"
#include "policy.h"
#include "vramledger/model.h"

/* RMSNorms that multiply by their weight in fp32 and cast after: Gemma's
 * (1 + weight) (GemmaRMSNorm, Gemma2RMSNorm, Gemma3RMSNorm) and OLMo 2's
 * (Olmo2RMSNorm: (weight * x.float()).to(dtype)), transformers 5.17 */
static inline bool vl__norm_weight_fp32(const struct vl_arch *a) { return a->norm_fp32_weight; }

/* PEFT's default LoRA targets of a type's row (config.c; NULL-ended, or
 * NULL: the row has none) */
const char *const *vl__peft_targets(enum vl_family f);

/* Is layer l one of the n of L spread over the stack (the layers where
 * l * n / L steps: every other of L for n = L / 2)? Where the layers of a
 * kind are changes when, not how much, the replays hold. */
static inline bool vl__spread_layer(uint64_t l, uint64_t n, uint64_t L) {
  return L && (l + 1) * n / L != l * n / L;
}

/* Does layer l rotate q and k? Not without rotary, nor in the layers a
 * config leaves without (NoPE): SmolLM3's no_rope_layers, EXAONE-4's global
 * (not sliding) layers. */
static inline bool vl__rope_layer(const struct vl_arch *a, uint64_t l) {
  if (a->rotary_pct <= 0) return false;
  if (a->nope_global) return vl__spread_layer(l, a->sliding_layers, a->layers);
  return !a->nope_layers || !vl__spread_layer(l, a->nope_layers, a->layers);
}

/* A layer's routed experts as transformers 5 holds them (params.c): how
 * many of inventory tensor t's matrices one of its two 3-D parameters holds
 * an expert (w1: gate and up, 2, gate_up_proj; w2: 1, down_proj; gpt-oss's
 * expert biases 1), UINT64_MAX for w3 (inside w1's), 0 for a tensor of its
 * own */
uint64_t vl__expert_part(const struct vl_arch *arch, const struct vl_tensor *t);
/* how many tensors of inventory entry t belong to layer w, or, outside
 * the layers, to VL_BEFORE_LAYERS (the embeddings) or VL_AFTER_LAYERS
 * (final norm, head): the order the model's modules are made in, which
 * both replays allocate the weights in */
enum { VL_BEFORE_LAYERS = -1, VL_AFTER_LAYERS = -2 };
uint64_t vl__count_in(const struct vl_arch *arch, const struct vl_tensor *t, int w);

/* The terms of the bill (their formulas, compiled from terms.def) are in
 * terms.h. */

/* Activation model of one micro-batch on this GPU. All bytes. */
struct vl__act {
  uint64_t layer;           /* saved for backward by one layer, no recomputation */
  uint64_t norm, attn, mlp; /* its parts: one of its two norms, attention, MLP (hf) */
  uint64_t layer_kept;      /* kept per layer under the chosen recomputation */
  uint64_t layer_fwd_tmp;   /* extra live inside one layer's forward */
  uint64_t layer_bwd_tmp;   /* extra live while back-propagating one layer */
  uint64_t embed;           /* embedding stage (ids, dropout mask) */
  uint64_t head;            /* final norm, LM head input, logits, loss */
  uint64_t logits;          /* the logits tensor alone (held by the model output) */
  uint64_t head_fwd_tmp;    /* inside the loss forward */
  uint64_t loss_bwd_tmp;    /* gradient of the logits */
  double misc_fraction;     /* Megatron's 5 % temporaries (0 otherwise) */
};

struct vl__shape {
  uint64_t b, s, h, a, g, d, I, V, tp;
  bool sp;
  uint64_t lora_rank; /* 0 without LoRA */
  uint64_t lora_in;   /* LoRA: the adapted linears' input widths, summed (one layer) */
  bool attn_in_saved; /* q/k/v weights (or their adapters) need their input */
  bool o_in_saved;
  bool mlp_in_saved;
  bool down_in_saved;
};

/* Hugging Face modules, from first principles; records its terms. */
void vl__act_hf(const struct vl_arch *arch, const struct vl_job *job, const struct vl__policy *pol,
                const struct vl__shape *sh, struct vl_bill *bill, struct vl__ck *ck,
                struct vl__act *act);
/* Megatron-LM / Korthikanti et al. 2022, Table 2; records its terms. */
/* A convolutional network's feature maps (ResNet); records its terms. */
void vl__act_conv(const struct vl_arch *arch, const struct vl_job *job,
                  const struct vl__policy *pol, struct vl_bill *bill, struct vl__ck *ck,
                  struct vl__act *act);
void vl__act_megatron(const struct vl_arch *arch, const struct vl_job *job,
                      const struct vl__shape *sh, uint64_t in_flight, bool last_stage,
                      struct vl_bill *bill, struct vl__ck *ck, struct vl__act *act);

/* Tensor-parallel split of an inventory tensor's elements (params.c): matmul
 * weights and vocabulary-parallel embeddings/heads are split, norms, biases
 * and learned positions are not. */
uint64_t vl__tp_split(const struct vl_tensor *t, uint64_t tp, uint64_t elems);
/* generate()'s allocations replayed through the caching-allocator model
 * (infer_replay.c): its peaks, blocks over 1 MiB. */
struct vl_cache_stats;
vl_status vl__infer_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl_job *job, uint64_t wb, uint64_t e, uint64_t r,
                           uint64_t kvb, uint64_t workspace, bool expandable,
                           struct vl_cache_stats *out, struct vl_err *err);
/* A training step's allocations replayed through the caching-allocator
 * model (train_replay.c): three steps of one GPU's loop as measure.py runs
 * it, blocks over 1 MiB. */
#define VL__MAX_LAYER_LINEARS 16
struct vl__train_sizes {
  uint64_t B, P, T, h, I, V; /* batch, sequence, tokens, hidden, MLP width, vocabulary */
  uint64_t Pd;               /* an encoder-decoder's decoder tokens a sequence (else P) */
  uint64_t side;             /* a vision model's image side in pixels */
  uint64_t wb, gb, mb, sb;   /* bytes per element: weights, grads, master (0: none), state */
  unsigned states;           /* full-size optimizer states per trainable element */
  enum vl_opt_impl impl;     /* foreach: a state-sized list; forloop: one tensor's */
  bool step_temp;            /* the optimizer's step makes temporaries */
  bool autocast, ckpt;       /* half copies of matmul weights; full recomputation */
  bool eager;                /* eager attention (scores materialised), else SDPA */
  uint64_t e, r;             /* activation and residual bytes */
  uint64_t workspace; /* a thread's BLAS workspaces (vl_workspace_thread_bytes), as one block */
  unsigned sms, tps;  /* the card's SMs and threads per SM (reductions' scratch) */
  bool expandable;
  /* LoRA (lora_rank 0: none): the base frozen, adapters of lora_rank in
   * ab bytes an element (fp32: PEFT's autocast_adapter_dtype); a layer's
   * linears in the inventory's order, which is the order they run in */
  uint64_t lora_rank, ab;
  /* DDP (gradient_as_bucket_view=False): its buckets; kept: the first
   * step's buckets live into the second step's backward (the other
   * outcome of the rebuild); drop_outputs: the loop keeps only the loss */
  bool ddp, ddp_kept, drop_outputs;
  bool grads_late; /* Lightning: the last step's .grad set to None just before the backward */
  uint64_t accum;  /* micro-batches a step (gradient accumulation; 0 or 1: one) */
  bool every_micro_batch; /* replay each, none counted as a repeat (tests: skip_repeats) */
  bool outputs_fp32;      /* accelerate: the output's logits converted to fp32 */
  /* ZeRO-1 over zero1_ranks (0: none; set with ddp): a ZeroRedundancyOptimizer holds the
   * states of rank 0's share of the parameters */
  uint64_t zero1_ranks;
  struct {
    const char *name; /* the inventory's (params.c) */
    uint64_t out, in;
    uint64_t count; /* its copies in the model (an encoder-decoder's q: one a layer of the
                       encoder, two of the decoder) */
    bool adapted;
  } lin[VL__MAX_LAYER_LINEARS];
  unsigned n_lin;
};
vl_status vl__train_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl__train_sizes *z, struct vl_cache_stats *out,
                           struct vl_err *err);
/* Inference bill. */
vl_status vl__infer_check(const struct vl_arch *arch, const struct vl_job *job, struct vl_err *err);
vl_status vl__bill_infer(const struct vl_arch *arch, const struct vl_inventory *inv,
                         const struct vl_job *job, const struct vl_overheads *ov,
                         struct vl_bill *bill, struct vl_err *err);

/* PyTorch caching allocator: bytes a tensor of n bytes occupies (512 B
 * rounding) and the segment bytes reserved for it when it is alone. */
uint64_t vl__alloc_block_bytes(uint64_t n);
uint64_t vl__alloc_segment_bytes(uint64_t n);
/* ATen's CUDA column sum of rows x cols (elem_bytes an element, summed in
 * acc_bytes): the block of partial results its launch takes from the
 * caching allocator and frees when it returns, on a card of `sms` SMs of
 * threads_per_sm threads (0: none; cuda_reduce.c) */
uint64_t vl__column_sum_scratch(uint64_t rows, uint64_t cols, uint64_t elem_bytes,
                                uint64_t acc_bytes, unsigned sms, unsigned threads_per_sm);

#endif
