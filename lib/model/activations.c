/* Activation memory: what one micro-batch leaves saved for backward.
 *
 * Two accounting conventions:
 *  - vl__act_hf: Hugging Face modules from first principles, tensor by
 *    tensor (what each autograd node saves; storages shared by several
 *    nodes counted once). Sources: transformers modeling_<family>.py,
 *    torch/csrc/autograd/FunctionsManual.cpp (what backward formulas need),
 *    PyTorch autocast op lists (layer_norm, softmax and cross_entropy run in
 *    fp32). Calibrated against the H200 measurements of
 *    data/reference/h200-torch-2.11/calibration.json.
 *  - vl__act_megatron: Korthikanti et al. 2022 (arXiv 2205.05198) Table 2 and
 *    Megatron-LM megatron/training/theoretical_memory_usage.py.
 * Shapes: b micro-batch, s sequence, h hidden, a heads, g kv heads, d head
 * dim, I MLP width, V vocabulary, t tensor-parallel size. */
#include "internal.h"
#include "terms.h"

/* Tokens whose h-sized tensors live on this GPU: all of them, or 1/t with
 * sequence parallelism. */
static uint64_t tokens_rep(const struct vl__shape *sh) {
  uint64_t T = sh->b * sh->s;
  return sh->sp ? vl__div_ceil(T, sh->tp) : T;
}

/* What the parts of one layer and the head share: the micro-batch on this
 * GPU and the precision's bytes. */
struct hf {
  const struct vl_arch *arch;
  const struct vl_job *job;
  const struct vl__policy *pol;
  const struct vl__shape *sh;
  struct vl_bill *bill;
  struct vl__ck *ck;
  uint64_t T;                   /* tokens of the micro-batch */
  uint64_t Tr;                  /* tokens of replicated h-tensors */
  uint64_t t;                   /* tensor-parallel ranks */
  uint64_t e, r;                /* activation and residual bytes */
  uint64_t a_loc, g_loc, I_loc; /* heads, key/value heads, MLP width on this GPU */
  uint64_t sm;                  /* the probabilities' bytes */
  uint64_t k;                   /* experts a token goes through (1: a dense MLP) */
  uint64_t width;               /* the MLP's width a token sees */
  bool math;                    /* the s x s scores are kept */
  bool own_casts;               /* each projection keeps its own half copy of its input */
};

/* one of the two norms of a layer */
static uint64_t hf_norm(const struct hf *x) {
  const struct vl_arch *arch = x->arch;
  const struct vl__policy *pol = x->pol;
  const struct vl__shape *sh = x->sh;
  struct vl_bill *bill = x->bill;
  struct vl__ck *ck = x->ck;
  const uint64_t Tr = x->Tr, r = x->r;
  /* Norms. LayerNorm saves its input, mean and rstd (fp32 under autocast:
   * layer_norm is on autocast's fp32 list). HF RMSNorm upcasts to fp32 and
   * saves the fp32 input, rstd, and the normalised tensor in the residual
   * dtype for the weight multiply. */
  /* the normalised tensor is saved for the weight's gradient: not where
   * the weight is frozen (LoRA; y-qwen05-bf16-lora16-adamw-b8s2048's
   * history, bench/results/replay-histories/raw.jsonl:unseen5-worst-histories) */
  /* (Gemma's norm multiplies in fp32 and casts after: its saved
   * normalised tensor is fp32; modeling_gemma.py GemmaRMSNorm) */
  return vl__note_norm(bill, ck,
                       !arch->rms_norm ? VL__T_NORM_LAYER_NORM
                       : sh->lora_rank ? VL__T_NORM_RMS_FROZEN
                                       : VL__T_NORM_RMS,
                       &(struct vl__in_norm){
                           .T = Tr,
                           .h = sh->h,
                           .n = pol->autocast ? 4 : r,
                           .r = vl__norm_weight_fp32(arch) ? 4 : r,
                       });
}

/* attention: projections' inputs, q/k/v, scores, o's input, masks */
static uint64_t hf_attention(const struct hf *x) {
  const struct vl_arch *arch = x->arch;
  const struct vl_job *job = x->job;
  const struct vl__shape *sh = x->sh;
  struct vl_bill *bill = x->bill;
  struct vl__ck *ck = x->ck;
  const uint64_t T = x->T, Tr = x->Tr, e = x->e, a_loc = x->a_loc, g_loc = x->g_loc, sm = x->sm;
  const bool math = x->math;
  const bool own_casts = x->own_casts;
  const bool fused_qkv = arch->fused_qkv;
  const uint64_t attn_copies = own_casts && !fused_qkv ? 3 : 1;
  /* Under sequence parallelism the projections see the input gathered over
   * the sequence (PyTorch's PrepareModuleInput before attention and MLP, the
   * head's ColwiseParallel) and save that: T tokens, not T/t (measured on 2
   * H200s: TinyLlama TP 2 + SP -5.4 % with T/t, bench/results/
   * nccl-run/tp-sp/sp.jsonl) */
  uint64_t attn = 0;
  if (sh->attn_in_saved) attn = vl__add(ck, attn, vl__mul4(ck, T, sh->h, e, attn_copies));
  /* q, k, v as the attention kernel keeps them. Eager attention repeats k
   * and v to all heads (repeat_kv) before the matmuls. */
  uint64_t kv_heads_saved = g_loc;
  if (math && job->checkpointing != VL_CKPT_SELECTIVE) kv_heads_saved = a_loc;
  attn = vl__add(ck, attn, vl__mul4(ck, T, a_loc + 2 * kv_heads_saved, sh->d, e));
  /* q/k norms (Qwen3, OLMo 2, OLMoE, Gemma 3): RMSNorm keeps its fp32 copy
   * of q and of k (in half precision; in fp32 the input itself, saved
   * above), and their normalised outputs where the norm's weight trains
   * (measured in dry runs of OLMoE and Qwen3-MoE under LoRA: 32 + 32 MiB
   * and 8 + 1 MiB a layer, dry-run/traces.tar.xz in bench/ARCHIVE.md) */
  if (arch->qk_norm) {
    uint64_t qk = vl__mul3(ck, T, a_loc + g_loc, sh->d);
    if (e < 4) attn = vl__add(ck, attn, vl__mul(ck, qk, 4));
    if (!sh->lora_rank) attn = vl__add(ck, attn, vl__mul(ck, qk, e));
  }
  uint64_t scores = 0;
  if (job->checkpointing != VL_CKPT_SELECTIVE) {
    if (math) {
      /* softmax saves its output (sm bytes: fp32 unless GPT-2's half
       * softmax without autocast); with dropout
       * the probabilities are cast, dropout keeps a bool mask, and the PV
       * matmul saves dropout's output (the cast copy itself is freed);
       * without dropout the PV matmul saves the cast copy */
      const bool eager = job->attention == VL_ATTN_EAGER;
      scores = vl__note_scores(
          bill, ck,
          arch->attn_dropout > 0 ? (eager ? VL__T_SCORES_EAGER_DROPOUT : VL__T_SCORES_MATH_DROPOUT)
          : e != sm              ? (eager ? VL__T_SCORES_EAGER_CAST : VL__T_SCORES_MATH_CAST)
                                 : (eager ? VL__T_SCORES_EAGER : VL__T_SCORES_MATH),
          &(struct vl__in_scores){.b = sh->b, .a = a_loc, .s = sh->s, .sm = sm, .e = e});
    } else {
      /* SDPA flash / memory-efficient: output and log-sum-exp (fp32) */
      scores = vl__add(ck, vl__mul4(ck, T, a_loc, sh->d, e),
                       vl__mul3(ck, sh->b, a_loc, vl__mul(ck, sh->s, 4)));
    }
  }
  attn = vl__add(ck, attn, scores);
  if (sh->o_in_saved) attn = vl__add(ck, attn, vl__mul4(ck, T, a_loc, sh->d, e));
  if (arch->hidden_dropout > 0) attn = vl__add(ck, attn, vl__mul(ck, Tr, sh->h));

  return attn;
}

/* the MLP (or MoE block) */
static uint64_t hf_mlp(const struct hf *x) {
  const struct vl_arch *arch = x->arch;
  const struct vl__policy *pol = x->pol;
  const struct vl__shape *sh = x->sh;
  struct vl__ck *ck = x->ck;
  const uint64_t T = x->T, Tr = x->Tr, e = x->e, width = x->width, k = x->k;
  const bool own_casts = x->own_casts;
  const uint64_t mlp_copies =
      own_casts && arch->gated_mlp && !arch->experts && !arch->fused_gate_up ? 2 : 1;
  uint64_t mlp = 0;
  if (sh->mlp_in_saved) mlp = vl__add(ck, mlp, vl__mul4(ck, T, sh->h, e, mlp_copies));
  if (arch->gated_mlp) {
    /* act(gate) saves gate; act out and up saved by the multiply; the
     * product saved by down_proj when trainable */
    uint64_t n = 3 + (sh->down_in_saved ? 1 : 0);
    mlp = vl__add(ck, mlp, vl__mul4(ck, T, width, e, n));
  } else if (arch->relu_act) {
    /* ReLU saves its output, which is also fc2's input */
    mlp = vl__add(ck, mlp, vl__mul3(ck, T, width, e));
  } else {
    /* GELU saves its input; fc2 saves GELU's output. transformers'
     * NewGELUActivation, 0.5*x*(1 + tanh(c*(x + 0.044715*x^3))), is Python
     * ops: pow keeps x, tanh its output, the last multiply both 0.5*x and
     * (1 + tanh) -> 4 tensors of T x I */
    uint64_t per = (arch->gelu_python ? 4 : 1) * e + (sh->down_in_saved ? e : 0);
    /* under autocast pow is on the fp32 list: pow's input copy, tanh's
     * output and (1 + tanh) are fp32, 0.5*x stays half (measured on GPT-2,
     * data/reference/h200-torch-2.11/calibration.json) */
    if (arch->gelu_python && pol->autocast) per = 4 + 4 + 2 + 4 + (sh->down_in_saved ? e : 0);
    mlp = vl__add(ck, mlp, vl__mul3(ck, T, width, per));
  }
  if (arch->experts) {
    /* router logits (fp32 softmax); each routed token's expert output,
     * saved by the product with its routing weight (the weight's
     * gradient); and its gathered input, saved for the experts' weight
     * gradient only where they train: not under LoRA (transformers 5's
     * experts, integrations/moe.py; dry runs of OLMoE, Qwen3-MoE and
     * Qwen1.5-MoE under LoRA keep no gathered input) */
    mlp = vl__add(ck, mlp, vl__mul3(ck, T, arch->experts, 4));
    mlp = vl__add(ck, mlp, vl__mul4(ck, T, k, sh->h, (sh->mlp_in_saved ? 2 : 1) * e));
  }
  if (arch->hidden_dropout > 0) mlp = vl__add(ck, mlp, vl__mul(ck, Tr, sh->h));

  return mlp;
}

/* one layer: its parts and LoRA's */
static void hf_layer(const struct hf *x, uint64_t norm, uint64_t attn, uint64_t mlp,
                     struct vl__act *act) {
  const struct vl_job *job = x->job;
  const struct vl__policy *pol = x->pol;
  const struct vl__shape *sh = x->sh;
  struct vl_bill *bill = x->bill;
  struct vl__ck *ck = x->ck;
  const uint64_t T = x->T, e = x->e;
  act->norm = norm;
  act->attn = attn;
  act->mlp = mlp;
  /* LoRA adapters: lora_A's output, saved by lora_B, per target; and each
   * adapter's own copy of its input, which lora_A saves: PEFT casts the
   * input to the adapters' fp32 (a copy of a half input), and under
   * autocast lora_A casts that to half (peft 0.21 Linear.forward; the
   * replay's peak allocated within 1.3 % of eleven LoRA runs with it,
   * bench/results/replay-histories). In fp32 the input itself
   * is saved and shared (the *_in_saved flags above). */
  uint64_t casts = 0;
  if (sh->lora_rank) {
    const struct vl__in_lora_copies copies = {
        .T = T, .widths = sh->lora_in, .cb = vl__lora_input_copy_bytes(pol)};
    casts = vl__value_lora_copies(ck, VL__T_LORA_COPIES, &copies);
    if (casts) vl__note_lora_copies(bill, ck, VL__T_LORA_COPIES, &copies);
    act->attn = vl__add(ck, act->attn, casts); /* in the layer's parts: with the projections */
  }
  act->layer = vl__note_layer(bill, ck, sh->lora_rank ? VL__T_LAYER_LORA : VL__T_LAYER,
                              &(struct vl__in_layer){
                                  .norm = norm,
                                  .attention = attn,
                                  .mlp = mlp,
                                  .T = T,
                                  .R = sh->lora_rank,
                                  .e = e,
                                  .n = job->n_lora_targets ? (uint64_t)job->n_lora_targets : 2,
                                  .copies = casts,
                              });
}

/* what a layer keeps under recomputation, its temporaries, the embeddings */
static void hf_inside(const struct hf *x, struct vl__act *act) {
  const struct vl_arch *arch = x->arch;
  const struct vl_job *job = x->job;
  const struct vl__shape *sh = x->sh;
  struct vl__ck *ck = x->ck;
  const uint64_t T = x->T, Tr = x->Tr, e = x->e, r = x->r, a_loc = x->a_loc, sm = x->sm,
                 width = x->width;
  const bool math = x->math;
  /* Recomputation: HF gradient checkpointing keeps each layer's input. */
  if (job->checkpointing == VL_CKPT_FULL)
    act->layer_kept = vl__mul3(ck, Tr, sh->h, r);
  else
    act->layer_kept = act->layer;

  /* Inside a layer: eager raw scores and masked scores before softmax; the
   * backward of attention holds grad of probabilities (e) and scores (fp32). */
  uint64_t s2 = vl__mul4(ck, sh->b, a_loc, sh->s, sh->s);
  /* F.softmax(x, dtype=float32) converts its half input to an fp32 copy
   * first: the masked scores, that copy and the (saved) output coexist */
  act->layer_fwd_tmp = math ? vl__mul(ck, s2, e + (sm != e ? 4 : 0)) : vl__mul3(ck, T, sh->h, e);
  uint64_t bwd_attn = math ? vl__mul(ck, s2, sm + 2 * e) : vl__mul4(ck, T, a_loc, sh->d, 3 * e);
  uint64_t bwd_mlp = vl__mul4(ck, T, width, e, arch->gated_mlp ? 3 : 2);
  act->layer_bwd_tmp = vl__add(ck, vl__max(bwd_attn, bwd_mlp), vl__mul4(ck, Tr, sh->h, 4, 2));

  /* Embeddings: int64 ids and the dropout mask. */
  act->embed = vl__mul(ck, T, 8);
  if (arch->embed_dropout > 0) act->embed = vl__add(ck, act->embed, vl__mul(ck, Tr, sh->h));
}

/* the head and the loss */
static void hf_head(const struct hf *x, uint64_t norm, struct vl__act *act) {
  const struct vl_arch *arch = x->arch;
  const struct vl__shape *sh = x->sh;
  struct vl_bill *bill = x->bill;
  struct vl__ck *ck = x->ck;
  const uint64_t T = x->T, t = x->t, e = x->e;
  /* Head: final norm, LM head input, logits (held by the model output) and
   * the loss: HF upcasts logits to fp32 and log_softmax saves its output. */
  uint64_t V_loc = vl__div_ceil(sh->V, t);
  uint64_t logits = vl__mul3(ck, T, V_loc, e);
  uint64_t logp = vl__mul3(ck, T, V_loc, 4);
  /* (an encoder's MLM transform: dense + GELU + LayerNorm) */
  act->head =
      vl__note_head(bill, ck, arch->causal ? VL__T_HEAD : VL__T_HEAD_MLM,
                    &(struct vl__in_head){.norm = norm, .T = T, .h = sh->h, .e = e, .V = V_loc});
  act->logits = logits;
  act->head_fwd_tmp = e == 4 ? 0 : logp; /* the fp32 copy of the logits */
  /* nll backward's dense gradient and log_softmax backward's, both fp32,
   * live together; the cast of the latter to the logits' dtype comes after
   * the first is freed (measured: bench/results/calibration/raw.jsonl:train-steps.json,
   * peak through backward - after forward = 2*T*V*4 on Qwen2-0.5B) */
  /* Split over the vocabulary (tensor parallelism), the loss is PyTorch's
   * loss_parallel: its backward holds three fp32 T x V/t tensors beside the
   * saved log-probabilities, not two (torch/distributed/tensor/parallel/
   * loss.py _nll_loss_and_log_softmax_backward; measured on 2 H200s,
   * bench/results/parallel-calibration/raw.jsonl:live-at-peak/tp2-amp.json) */
  act->loss_bwd_tmp = vl__mul(ck, logp, t > 1 ? 3 : 2);
}

void vl__act_hf(const struct vl_arch *arch, const struct vl_job *job, const struct vl__policy *pol,
                const struct vl__shape *sh, struct vl_bill *bill, struct vl__ck *ck,
                struct vl__act *act) {
  struct hf x = {.arch = arch, .job = job, .pol = pol, .sh = sh, .bill = bill, .ck = ck};
  x.T = sh->b * sh->s;
  x.Tr = tokens_rep(sh);
  x.t = sh->tp;
  x.e = pol->act;
  x.r = pol->resid;
  x.a_loc = vl__div_ceil(sh->a, x.t);
  x.g_loc = vl__div_ceil(sh->g, x.t);
  x.I_loc = vl__div_ceil(sh->I, x.t);
  /* Attention. SDPA's math backend keeps the s x s probabilities as eager
   * attention does: PyTorch runs it for fp32 inputs with grouped key/value
   * heads, as transformers passes enable_gqa=True without a mask and
   * neither flash (half only) nor memory-efficient attention (no GQA) takes
   * that (measured: TinyLlama fp32 on 2 H200s, b*a*s^2*4 per layer at the
   * peak, bench/results/parallel-calibration/raw.jsonl:live-at-peak/tp2-fp32.json). */
  x.math = job->attention == VL_ATTN_EAGER || (x.e == 4 && sh->g < sh->a);
  x.sm = vl__softmax_bytes(arch, pol->autocast, x.e); /* probabilities' bytes */
  /* Inputs of trainable projections. Under autocast the normalised input
   * is fp32 and every projection casts it apart, and keeps its own half
   * copy: q, k and v three copies unless fused into one matmul (GPT-2,
   * GPT-NeoX, Phi-3), a gated MLP's gate and up two unless fused (Phi-3)
   * (measured: five T x h half copies a layer on TinyLlama, bench/results/
   * parallel-calibration/live-at-peak/tp2-amp.json; Qwen2-0.5B's AMP
   * runs -2.2 and -1.8 % without it, +0.1 and -0.4 % with). Counted for
   * RMSNorm models only: BERT and OPT's LayerNorm runs agree without it
   * (BERT +3.0 %, +6.8 % with it; not understood; the three variants in
   * bench/results/parallel-calibration/raw.jsonl:input-casts-variants.txt). Without
   * autocast the projections share the input. */
  x.own_casts = pol->autocast && !sh->lora_rank && arch->rms_norm;
  /* MoE: each token through k experts of moe_intermediate and the shared
   * experts (all of them on every token) */
  x.k = arch->experts ? arch->experts_per_token : 1;
  x.width = arch->experts ? vl__add(ck, vl__mul(ck, x.k, vl__div_ceil(arch->moe_intermediate, x.t)),
                                    vl__div_ceil(arch->shared_intermediate, x.t))
                          : x.I_loc;
  const uint64_t norm = hf_norm(&x);
  const uint64_t attn = hf_attention(&x); /* in this order: the terms are shown so */
  const uint64_t mlp = hf_mlp(&x);
  hf_layer(&x, norm, attn, mlp, act);
  hf_inside(&x, act);
  hf_head(&x, norm, act);
  act->misc_fraction = 0.0;
}

void vl__act_megatron(const struct vl_arch *arch, const struct vl_job *job,
                      const struct vl__shape *sh, uint64_t in_flight, bool last_stage,
                      struct vl_bill *bill, struct vl__ck *ck, struct vl__act *act) {
  (void)arch;
  const uint64_t s = sh->s, b = sh->b, h = sh->h, t = sh->tp;
  const uint64_t sbh = vl__mul3(ck, s, b, h);
  /* Table 2, generalised to an MLP of width I as Megatron does (18 + 4I/h
   * bytes per sbh with I = 4h gives 34): 10 sbh not split by TP (norm
   * inputs 4, attention and MLP inputs 4, dropout masks 2), the rest split. */
  double lin = 18.0 + 4.0 * (double)sh->I / (double)h;
  double per_sbh = sh->sp ? lin / (double)t : 10.0 + (lin - 10.0) / (double)t;
  /* the s^2 term where the scores are kept (5as^2b/t; t divides a) */
  const bool quad = job->attention == VL_ATTN_EAGER && job->checkpointing == VL_CKPT_NONE;
  /* two groups of the same inputs: k's unit says how the case computes it */
  const bool full = job->checkpointing == VL_CKPT_FULL;
  if (sh->sp) {
    const struct vl__in_megatron_sp d = {.s = s, .b = b, .h = h, .k = per_sbh, .a = sh->a, .t = t};
    act->layer = vl__note_megatron_sp(
        bill, ck, quad ? VL__T_MEGATRON_SP_LAYER_SCORES : VL__T_MEGATRON_SP_LAYER, &d);
    act->layer_kept =
        full ? vl__note_megatron_sp(bill, ck, VL__T_MEGATRON_SP_KEPT, &d) : act->layer;
  } else {
    const struct vl__in_megatron d = {.s = s, .b = b, .h = h, .k = per_sbh, .a = sh->a, .t = t};
    act->layer =
        vl__note_megatron(bill, ck, quad ? VL__T_MEGATRON_LAYER_SCORES : VL__T_MEGATRON_LAYER, &d);
    act->layer_kept = full ? vl__note_megatron(bill, ck, VL__T_MEGATRON_KEPT, &d) : act->layer;
  }
  act->layer_fwd_tmp = 0;
  act->layer_bwd_tmp = 0;
  /* Megatron: input ids (8 s b) and embedding dropout mask (s b h), for
   * each micro-batch in flight on the first stage */
  act->embed = vl__mul(ck, vl__add(ck, vl__mul3(ck, 8, s, b), sbh), in_flight);
  /* output layer (last stage): final norm output and logits, 2 bytes each */
  act->head = last_stage ? vl__mul(ck, 2, vl__add(ck, vl__mul3(ck, s, b, sh->V) / t, sbh)) : 0;
  act->logits = 0; /* Megatron's loop keeps only the loss */
  act->head_fwd_tmp = 0;
  act->loss_bwd_tmp = 0;
  act->misc_fraction = 0.05; /* theoretical_memory_usage.py: 5 % temporaries */
}

/* A convolutional network's (ResNet's) activations: no tokens, no
 * attention; the feature maps autograd keeps, per image. Each convolution
 * saves its input (the previous op's output, counted there) and its batch
 * norm saves the convolution's output; each ReLU saves its output; the
 * stem's max pool saves its int64 indices; a bottleneck block's 1x1, 3x3
 * (the stage's stride) and 1x1, the shortcut's 1x1 where the width or the
 * stride changes, the ReLU after the residual add; a basic block's two
 * 3x3 (modeling_resnet.py ResNetConvLayer, ResNetEmbeddings,
 * ResNetBottleNeckLayer, ResNetBasicLayer). Sides: ceil(side / stride),
 * what a 7x7 of padding 3, a 3x3 of padding 1 and a 1x1 give. */
void vl__act_conv(const struct vl_arch *arch, const struct vl_job *job,
                  const struct vl__policy *pol, struct vl_bill *bill, struct vl__ck *ck,
                  struct vl__act *act) {
  const uint64_t e = pol->act, B = job->batch;
  uint64_t side = vl__div_ceil(vl_job_image_side(arch, job), 2), maps = 0, largest = 0;
#define MAP(ch, sd)                                                                                \
  do {                                                                                             \
    uint64_t m_ = vl__mul3(ck, (ch), (sd), (sd));                                                  \
    maps = vl__add(ck, maps, m_);                                                                  \
    largest = vl__max(largest, m_);                                                                \
  } while (0)
  MAP(2 * arch->stem_width, side); /* the stem's convolution (its norm's input), its ReLU */
  side = vl__div_ceil(side, 2);
  MAP(arch->stem_width, side); /* the max pool's output */
  const uint64_t idx = vl__mul3(ck, arch->stem_width, side, side);
  uint64_t in = arch->stem_width;
  for (uint64_t s = 0; s < arch->stages; s++) {
    const uint64_t out = arch->stage_width[s], st = s > 0 || arch->stride_first ? 2 : 1;
    for (uint64_t l = 0; l < arch->stage_depth[s]; l++) {
      const uint64_t cin = l ? out : in, so = l ? side : vl__div_ceil(side, st);
      if (!l && (cin != out || so != side)) MAP(out, so); /* the shortcut's norm input */
      if (arch->bottleneck) {
        MAP(2 * (out / 4), side); /* 1x1: norm input, ReLU */
        MAP(2 * (out / 4), so);   /* 3x3: norm input, ReLU */
        MAP(out, so);             /* 1x1: norm input */
      } else {
        MAP(2 * out, so); /* 3x3: norm input, ReLU */
        MAP(out, so);     /* 3x3: norm input */
      }
      MAP(out, so); /* the ReLU after the residual add */
      side = so;
    }
    in = out;
  }
#undef MAP
  act->embed =
      vl__note_conv_maps(bill, ck, VL__T_CONV_MAPS,
                         &(struct vl__in_conv_maps){.B = B, .maps = maps, .e = e, .pool = idx});
  act->head =
      vl__note_conv_head(bill, ck, VL__T_CONV_HEAD,
                         &(struct vl__in_conv_head){.B = B, .C = in, .e = e, .V = arch->labels});
  act->layer = act->layer_kept = act->norm = act->attn = act->mlp = 0;
  /* a batch norm's output before its ReLU; backward: a map's gradient and
   * its input's */
  act->layer_fwd_tmp = vl__mul3(ck, B, largest, e);
  act->layer_bwd_tmp = vl__mul4(ck, B, largest, e, 2);
  act->logits = vl__mul3(ck, B, arch->labels, e);
  act->head_fwd_tmp = 0;
  act->loss_bwd_tmp = vl__mul4(ck, B, arch->labels, 4, 2);
  act->misc_fraction = 0.0;
}
