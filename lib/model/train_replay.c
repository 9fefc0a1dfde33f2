/* What the caching allocator reserves for a training loop: the allocations
 * of three steps of one GPU's loop (forward under autocast, backward,
 * optimizer step, zero_grad(set_to_none=True), the model output dropped),
 * as python/vramledger/measure.py runs it, replayed through the model of
 * PyTorch's caching allocator (caching.c).
 *
 * Why a replay and not a factor: the loss's large fp32 blocks of the first
 * step (the logits' upcast, log_softmax's output, their gradients: 4 x 8000
 * MiB on Gemma-2B at 8,192 tokens) are freed during the first backward and
 * carved up by the gradients and by the optimizer states that the first
 * step creates lazily, so the second step makes them anew; on the H200
 * reserved exceeded allocated by up to 17 GiB this way (bench/results/
 * nccl-run/train-histories: the allocator's own
 * histories, which the allocator model replays to the byte). Where those
 * states land depends on every free block of the right size, so each
 * layer is written op by op as transformers runs it (modeling_llama.py and
 * its copies, modeling_gpt2.py, modeling_gpt_neox.py, modeling_opt.py,
 * sdpa_attention.py), its tensors kept by the nodes that save them and its
 * backward made by the autograd model of tape.c: the histories of
 * bench/results/nccl-run/raw.jsonl:gemma2b-miss-histories show a
 * checkpointed layer's forward is the same sequence as prefill's (no
 * cache), its recomputation stops after the last tensor the backward
 * needs (non-reentrant checkpoint's early stop), and its backward
 * allocates its gradients in PyTorch's order (tape.h). Under DDP and
 * ZeRO-1 the loop is one rank's: its buckets, rebuilt in the second step,
 * and (ZeRO-1) the states of its share. Blocks of 1 MiB or less go through
 * the small pool (prog.h): most of a convolutional network's tensors and of
 * LoRA's adapters, gradients and states are that small (ResNet-50 at 64
 * pixels: -18 % of the dry run's peak allocated without them, -0.1 % with
 * them, bench/results/shapes-vision-seq2seq/; Qwen2.5-7B with rank-64
 * adapters on every linear: -2.7 % and 0.0 % of an H100's,
 * bench/results/reserved/). This file is the step; the modules and the layers
 * of each family are in the files train_replay.h lists. */
#include "train_replay.h"
#include "lp.h"
#include "pytorch_constants.h"
#include "vramledger/alloc.h"

/* the first step creates the optimizer's states, the second makes anew
 * what they carved up, the third is the one measure.py measures (after two
 * warm-up steps; reserved memory keeps the peak of all three). Three
 * rather than two: the fifth set outside the calibration unchanged, nine
 * runs of the others move by 0.4 to 5 points, the two worst of them
 * -7.0 -> -1.9 % and -7.1 -> -3.5 % (
 * bench/results/replay-histories/raw.jsonl:validate-steps.txt) */
#define STEPS 3

/* a parameter's gradient becomes .grad; with fp32 main gradients
 * (mixed-*) a hook copies autograd's half one to fp32 and drops it */
static void grad(struct run *R, uint32_t h, uint64_t bytes) {
  const struct vl__train_sizes *z = R->z;
  if (R->accumulating) { /* AccumulateGrad: .grad += the new one, in place; it goes */
    F(&R->p, &h);
    return;
  }
  if (z->mb && z->gb > z->wb) { /* fp32 main gradients of half weights */
    uint32_t m = A(&R->p, bytes / z->wb * z->gb);
    F(&R->p, &h);
    vl__tr_push(&R->p, &R->grads, m);
  } else {
    vl__tr_push(&R->p, &R->grads, h);
  }
}

/* a leaf's gradient arrives; a tied head's waits in its AccumulateGrad
 * node's input buffer for the embedding's */
static void on_leaf(void *ctx, uint32_t leaf, uint32_t h, uint64_t bytes) {
  struct run *R = ctx;
  if (leaf && leaf == R->tied_leaf) {
    R->tied_grad = h;
    return;
  }
  if (leaf && leaf == R->dec_leaf) {
    /* an encoder-decoder's decoder lookup of the shared embedding: it
     * waits in the input buffer (with a tied head's already there, their
     * sum, out of place) for the encoder's */
    if (R->tied_grad != NONE) {
      uint32_t s = A(&R->p, bytes);
      F(&R->p, &h);
      F(&R->p, &R->tied_grad);
      h = s;
    }
    R->tied_grad = h;
    return;
  }
  grad(R, h, bytes);
}

/* the model output goes: its logits and the KV cache it holds */
static void drop_output(struct run *R, uint32_t logits) {
  if (R->out32 != NONE)
    F(&R->p, &R->out32); /* accelerate: the output holds an fp32 copy instead */
  else
    rel(R, logits);
  for (size_t i = 0; i < R->kv.n; i++)
    rel(R, R->kv.h[i]);
  R->kv.n = 0;
}

/* the loop lets go of the loss, and the graph goes: the input embeddings'
 * leaf and its .grad with it (vl__tr_inputs_leaf; measure.py: del out,
 * loss), then every tensor of the step */
static void drop_graph(struct run *R) {
  rel(R, R->in_leaf);
  rel(R, R->in_grad);
  R->in_leaf = R->in_grad = 0;
  tape_reset(&R->tp);
}

/* the loop's state beside the replay's: what lives through its steps */
struct loop {
  struct run R;
  const struct vl_inventory *inv;
  bool vision;                    /* ViT, ResNet: pixels in, one row of logits a sample */
  bool tied;                      /* the head is the embedding matrix */
  uint64_t rows_out;              /* the logits' rows */
  uint64_t TV;                    /* the logits' elements */
  struct list model, states, tmp; /* the weights; the optimizer's states, its temporaries */
  uint32_t *kept;                 /* checkpoints' inputs */
  uint32_t pixels;                /* a vision model's pixel_values, held by the loop */
  /* DDP and ZeRO-1: every parameter's elements, in the model's order;
   * rank 0's share of them (indices); the buckets, the first step's once
   * rebuilt */
  uint64_t *esz;
  size_t np, *mine, nmine;
  struct list buckets, old;
};

/* one step's forward, what its backward takes up */
struct pass {
  uint32_t x0, x0d;   /* the embeddings' outputs (x0d: an encoder-decoder's decoder's) */
  uint32_t x;         /* the last layer's output */
  uint32_t mask;      /* the 4-D causal mask (NONE: none) */
  uint32_t head_from; /* the head's first node */
  uint32_t logits;
  struct lp head;      /* the head and its loss (lp_head.c) */
  uint32_t ht[LP_MAX]; /* their tensors */
  uint32_t pos, proj;  /* OPT: the positions' and project_in's outputs, Python's until the
                          decoder returns (0: none) */
  uint32_t rope[4];    /* the rotary tables: cos and sin, a pair a layer type (NONE: none) */
};

/* the token embeddings' width: OPT's word_embed_proj_dim (project_in
 * widens them to the hidden size, project_out narrows the last layer's
 * output for the head), else the hidden size */
static uint64_t embed_width(const struct vl_arch *arch, const struct vl__train_sizes *z) {
  return arch->embed_proj_dim ? arch->embed_proj_dim : z->h;
}

/* the model, tensor by tensor, then the fp32 master copy (mixed-*). A
 * tied head is built as a matrix of its own and dropped when transformers
 * ties it to the embedding (a model built on the GPU, as measure.py
 * does: its block stays cached; Qwen2's and Gemma's histories) */
static void load_model(struct loop *lp) {
  struct run *R = &lp->R;
  const struct vl_arch *arch = R->arch;
  const struct vl__train_sizes *z = R->z;
  vl__tr_model_wide(&R->p, arch, lp->inv, z->wb, 1, &lp->model);
  if (arch->buffer_bytes) vl__tr_block(&R->p, arch->buffer_bytes, &lp->model); /* its buffers */
  /* a vision model's pixel_values, held by the loop (in the weights'
   * dtype, as measure.py makes them) */
  lp->pixels = lp->vision ? A(&R->p, z->B * arch->channels * z->side * z->side * z->wb) : NONE;
  /* an encoder-decoder's stacks make their own embed_tokens too (T5Stack,
   * BartEncoder, BartDecoder), which tying replaces by the shared matrix:
   * BartModel's freed before the head is made, T5's with the head's, after
   * it (the meta traces of bart-base's and t5-base's loads) */
  uint32_t stacks[2] = {NONE, NONE};
  for (int i = 0; i < 2 && arch->enc_layers && lp->tied; i++)
    stacks[i] = A(&R->p, z->V * z->h * z->wb);
  if (arch->family == VL_FAM_BART) F(&R->p, &stacks[1]), F(&R->p, &stacks[0]);
  if (lp->tied) {
    uint32_t untied = A(&R->p, z->V * embed_width(arch, z) * z->wb);
    F(&R->p, &untied);
  }
  F(&R->p, &stacks[0]);
  F(&R->p, &stacks[1]);
  if (z->mb) vl__tr_model_wide(&R->p, arch, lp->inv, z->mb, 1, &lp->model);
  if (z->lora_rank) vl__tr_adapters(&R->p, arch, z, z->ab, 1, &lp->model); /* get_peft_model */
}

/* DDP and ZeRO-1: every parameter's elements, in the model's order; DDP's
 * construction; rank 0's share */
static void wrap_ddp(struct loop *lp) {
  struct run *R = &lp->R;
  const struct vl__train_sizes *z = R->z;
  if (z->ddp) {
    lp->np = vl__tr_param_elems(R->arch, lp->inv, &lp->esz);
    if (!lp->esz) R->p.failed = true;
    if (!R->p.failed) vl__tr_ddp_init(&R->p, lp->esz, lp->np, z, &lp->buckets);
  }
  if (z->zero1_ranks && !R->p.failed) {
    lp->mine = vl_calloc(lp->np + 1, sizeof *lp->mine);
    lp->nmine = lp->mine ? vl__tr_zero1_share(lp->esz, lp->np, z->zero1_ranks, lp->mine) : SIZE_MAX;
    if (lp->nmine == SIZE_MAX) {
      R->p.failed = true;
      lp->nmine = 0;
    }
  }
}

/* _rebuild_buckets in the second forward: buckets of 25 MiB in the
 * order the gradients arrived (the parameters' reverse). The first
 * ones are freed there, or (kept) at the second step's first
 * all-reduce, in its backward (docs/model.md, DDP's two outcomes) */
static void rebuild_buckets(struct loop *lp) {
  struct run *R = &lp->R;
  lp->old = lp->buckets;
  lp->buckets = (struct list){0};
  if (!R->z->ddp_kept) vl__tr_drop(&R->p, &lp->old);
  vl__tr_flat_groups(&R->p, lp->esz, lp->np, R->z->gb, true, VL_PT_DDP_BUCKET_CAP, &lp->buckets);
}

/* ---- forward (under autocast) ---- */

/* OPTDecoder after its causal mask: the learned positions' output,
 * project_in of the token embeddings x (taken over; where the widths
 * differ), their sum, the first layer's input. The positions and the
 * projection stay Python's locals until the decoder returns, the
 * projection's input saved for its weight's gradient (modeling_opt.py
 * OPTDecoder.forward: no dropout on the sum; s-opt350-bf16-adamw-eager-
 * ckpt-b16s2048's meta trace) */
static uint32_t opt_positions(struct run *R, uint32_t x, struct pass *f) {
  const struct vl__train_sizes *z = R->z;
  const uint64_t Th = z->T * z->h, p = embed_width(R->arch, z);
  f->pos = tape_new(&R->tp, Th * z->r);
  if (p != z->h) {
    f->proj = vl__tr_linear_w(R, base_param(R, z->h * p * z->wb), x, z->r, z->T, p, z->h, false);
    rel(R, x);
  } else {
    f->proj = x;
  }
  return op(R, (struct tape_op){.out_bytes = Th * z->r, .in = {f->proj, f->pos}, .pass = TAPE_ADD});
}

/* a vision model's input: no lookup (x0: a tensor of no bytes; the
 * pixels, which the loop holds, instead), its patches or convolutions
 * (train_replay_vision.c), dropout */
static uint32_t vision_input(struct run *R, uint32_t *x0) {
  *x0 = base_trained(R) || vl__tr_inputs_grad(R) ? tape_new(&R->tp, 0) : tape_const(&R->tp, 0);
  uint32_t x = vl__tr_vision_embeddings(R, tape_ref(&R->tp, *x0));
  x = vl__tr_dropout(R, x, R->arch->embed_dropout);
  rel(R, *x0);
  return x;
}

/* the rotary embedding's cos and sin (1 x s x rotary dims: position_ids
 * is the model's cache_position.unsqueeze(0)), made once a forward before
 * the layers with autocast off (modeling_llama.py LlamaRotaryEmbedding.
 * forward): position_ids as fp32, freqs = inv_freq @ it (fp32; the step's
 * first matmul, which gives cuBLAS its workspace), cat(freqs, freqs),
 * cos() and sin() each times attention_scaling (a new tensor each), cast
 * to the hidden states' dtype (no copy where they are fp32, as under
 * autocast). Gemma-3 and ModernBERT make a pair for each layer type
 * (sliding, full). The checkpoints (or the rotary's muls, which save them)
 * hold them to the backward's end. The H100's allocator history of Gemma-2B
 * LoRA checkpointed (bench/results/reserved/raw.jsonl:histories-addr-h100/)
 * has them at these places: 2 MiB blocks of the large pool, between the
 * first layer's tensors. */
static void rope_tables(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl_arch *arch = R->arch;
  const struct vl__train_sizes *z = R->z;
  for (int k = 0; k < 4; k++)
    f->rope[k] = NONE;
  if (arch->rotary_pct <= 0 && !arch->qk_rope_dim) return;
  const uint64_t dr =
      arch->qk_rope_dim ? arch->qk_rope_dim : (uint64_t)((double)R->d * arch->rotary_pct);
  const uint64_t n = z->P * dr, r = z->r;
  const bool two = (arch->family == VL_FAM_GEMMA3 || arch->family == VL_FAM_MODERNBERT) &&
                   arch->sliding_layers && arch->sliding_layers < arch->layers;
  for (int k = 0; k < (two ? 2 : 1); k++) {
    uint32_t pos = A(&R->p, z->P * 4), freqs = A(&R->p, n / 2 * 4);
    tape_forward_workspace(&R->tp);
    uint32_t emb = A(&R->p, n * 4), c0 = A(&R->p, n * 4), c = A(&R->p, n * 4);
    F(&R->p, &c0);
    uint32_t s0 = A(&R->p, n * 4), s = A(&R->p, n * 4);
    F(&R->p, &s0);
    f->rope[2 * k] = r < 4 ? A(&R->p, n * r) : c;
    f->rope[2 * k + 1] = r < 4 ? A(&R->p, n * r) : s;
    F(&R->p, &pos);
    F(&R->p, &freqs);
    F(&R->p, &emb);
    if (r < 4) {
      F(&R->p, &c);
      F(&R->p, &s);
    }
  }
}

/* the embeddings, then the layers (an encoder-decoder's two stacks) */
static void forward(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl_arch *arch = R->arch;
  const struct vl__train_sizes *z = R->z;
  const uint64_t L = arch->layers, e = z->e;
  /* OPT's and an encoder-decoder's embeddings run outside every
   * checkpoint, with autograd; so does what follows a frozen lookup made a
   * leaf (vl__tr_inputs_leaf), but Gemma's scaling, the module's own */
  R->tp.grad = !z->ckpt || arch->pos_local || arch->enc_layers ||
               (vl__tr_inputs_leaf(R) && !arch->embed_scale_own);
  R->T = z->T, R->P = R->Pk = z->P; /* (the decoder of an encoder-decoder sets its own) */
  /* the embeddings (lp_embed.c; the words' lookup frozen under LoRA: it
   * needs no gradient) or a vision model's input */
  /* T5Stack.forward's inputs_embeds is a local to its return (the
   * encoder's, after final_layer_norm and dropout: train_replay_seq2seq.c) */
  const bool t5 = arch->family == VL_FAM_T5;
  uint32_t x =
      lp->vision ? vision_input(R, &f->x0) : vl__tr_embed(R, 0, t5, embed_width(arch, z), &f->x0);
  if (t5) R->enc_in = f->x0;
  rope_tables(lp, f);
  /* the 4-D causal mask, in the model's dtype (an encoder-decoder's: its
   * decoder's, target x target) */
  const uint64_t Pm = arch->enc_layers ? z->Pd : z->P;
  f->mask = z->eager && arch->causal ? A(&R->p, z->B * Pm * Pm * vl__max(z->wb, e)) : NONE;
  if (arch->pos_local) x = opt_positions(R, x, f);
  R->tp.grad = !z->ckpt;
  f->x0d = 0; /* an encoder-decoder's decoder embeddings */
  if (arch->enc_layers) x = vl__tr_seq2seq(R, x, &f->x0d, lp->kept);
  for (uint64_t l = 0; l < L && !arch->enc_layers && !arch->stages && !R->p.failed; l++) {
    if (z->ckpt) lp->kept[l] = tape_ref(&R->tp, x); /* the checkpoint keeps its input */
    R->l = l;
    x = vl_arch_post_ln(arch) ? vl__tr_post_ln_layer(R, x, false) : vl__tr_layer(R, x, false);
  }
  rel(R, R->enc_in); /* BertModel.forward returns: its embedding_output goes */
  R->enc_in = 0;
  f->x = x;
}

/* the head: the final norm, the head's program (lp_head.c: its linear, a
 * tied one the embedding matrix; the logits, held by the output; the
 * loss); then autocast exits */
static void head_forward(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl_arch *arch = R->arch;
  const struct vl__train_sizes *z = R->z;
  const uint64_t TV = lp->TV, e = z->e, rows_out = lp->rows_out;
  R->tp.grad = true;
  f->head_from = R->tp.nn;
  uint64_t nb = z->r;
  uint32_t fn = f->x;
  if (arch->final_norm) {
    fn = vl__tr_norm(R, f->x, z->r, &nb);
    rel(R, f->x);
  }
  fn = vl__tr_mlm_transform(R, fn, &nb);
  const uint64_t hw = embed_width(arch, z); /* the head's input width */
  if (hw != z->h) {                         /* OPT's project_out, the decoder's last op */
    uint32_t po =
        vl__tr_linear_w(R, base_param(R, hw * z->h * z->wb), fn, nb, z->T, z->h, hw, false);
    rel(R, fn);
    fn = po;
  }
  rel(R, f->proj); /* the decoder returns: its locals go */
  rel(R, f->pos);
  uint32_t head = base_param(R, z->V * hw * z->wb);
  R->tied_leaf = lp->tied && base_trained(R) ? head : 0;
  R->tied_grad = NONE;
  vl__lp_head(&f->head, arch, z->autocast, (unsigned)e, (unsigned)nb);
  const struct lp_dims d = {.rows = rows_out, .h = hw, .V = z->V, .w = head};
  vl__tr_lp(R, &f->head, fn, nb, &d, false, f->ht);
  f->logits = f->ht[f->head.out[0]];
  rel(R, R->seq_out); /* a masked LM's forward returns: its sequence_output goes */
  R->seq_out = 0;
  if (z->outputs_fp32 && e < 4) {
    /* accelerate's convert_outputs_to_fp32 (mixed precision): the model's
     * output carries an fp32 copy of the logits; the half ones, saved by
     * nothing, go (bench/results/loops/) */
    R->out32 = A(&R->p, TV * 4);
    rel(R, f->logits);
  }
  vl__tr_uncache(R); /* autocast exits: its cache goes (saved copies stay) */
  /* the decoder's local mask goes as it returns; but a checkpoint keeps
   * its layer's arguments, the mask among them, to its recomputation: the
   * first layer's, at the end of the backward (the meta traces of
   * s-opt350-bf16-adamw-eager-ckpt-b16s2048 and y-mistral7b-bf16-sgd-
   * eager-ckpt-b1s2048: masking_utils.py:604's block) */
  if (!z->ckpt) F(&R->p, &f->mask);
  if (z->drop_outputs) drop_output(R, f->logits); /* the loop keeps only the loss */
}

/* ---- backward ---- */

/* the loss's gradients down to the logits', then the head's backward */
static void loss_backward(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl__train_sizes *z = R->z;
  if (z->grads_late) vl__tr_drop(&R->p, &R->grads); /* Lightning's closure: zero_grad() */
  const uint32_t gl = vl__tr_lp_loss_backward(R, &f->head, f->ht); /* (tape_new moves tp.t) */
  R->tp.t[f->logits].grad = gl;
  tape_backward(&R->tp, f->head_from);
  tape_truncate(&R->tp, f->head_from);
}

/* the layers' backward: all at once, or (checkpointing) each layer's
 * forward again, with autograd, then its backward */
static void layers_backward(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl_arch *arch = R->arch;
  const struct vl__train_sizes *z = R->z;
  const uint64_t L = arch->layers;
  uint32_t *kept = lp->kept;
  if (z->ckpt && arch->enc_layers) vl__tr_seq2seq_backward(R, kept, f->x);
  for (uint64_t l = L; z->ckpt && !arch->enc_layers && l-- > 0 && !R->p.failed;) {
    /* the layer's forward again, with autograd, then its backward; the
     * gradient of its output is the next layer's input's */
    uint32_t next = l + 1 < L ? kept[l + 1] : f->x;
    uint32_t from = R->tp.nn;
    R->l = l;
    uint32_t y = vl_arch_post_ln(arch) ? vl__tr_post_ln_layer(R, tape_ref(&R->tp, kept[l]), true)
                                       : vl__tr_layer(R, tape_ref(&R->tp, kept[l]), true);
    vl__tr_uncache(R);
    vl__tr_layer_backward(R, y, next, from);
    if (l + 1 < L) rel(R, kept[l + 1]);
  }
  if (z->ckpt && R->tp.nn) {
    /* nodes left: OPT's embeddings, recorded outside the checkpoints; the
     * first layer's input gradient flows into them */
    rel(R, kept[0]);
    F(&R->p, &f->mask);
    tape_backward(&R->tp, 0);
    tape_truncate(&R->tp, 0);
  } else if (z->ckpt) { /* the first checkpoint's input holds the last gradient */
    uint32_t gk = R->tp.t[kept[0]].grad;
    R->tp.t[kept[0]].grad = 0;
    if (kept[0] == R->in_leaf) R->in_grad = gk, gk = 0; /* AccumulateGrad: its .grad */
    rel(R, kept[0]);
    F(&R->p, &f->mask);
    rel(R, gk);
  } else {
    tape_backward(&R->tp, 0);
  }
  for (int k = 0; k < 4; k++) /* the rotary tables */
    F(&R->p, &f->rope[k]);
}

/* the embeddings' gradients, then their output's gradient goes */
static void embedding_grads(struct loop *lp, struct pass *f) {
  struct run *R = &lp->R;
  const struct vl_inventory *inv = lp->inv;
  const struct vl__train_sizes *z = R->z;
  /* the embeddings' output's gradient (without checkpointing), once they
   * have used it */
  uint32_t g0 = R->tp.t[f->x0].grad, g0d = f->x0d ? R->tp.t[f->x0d].grad : 0;
  R->tp.t[f->x0].grad = 0;
  if (g0 && f->x0 == R->in_leaf) R->in_grad = g0, g0 = 0; /* AccumulateGrad: its .grad */
  if (f->pos) { /* OPT's positions: their embedding's backward needs only the indices */
    rel(R, R->tp.t[f->pos].grad);
    R->tp.t[f->pos].grad = 0;
  }
  if (f->x0d) R->tp.t[f->x0d].grad = 0;
  /* the embeddings' gradients. A tied matrix's two meet at its
   * AccumulateGrad node: the head's waited in its input buffer, the sum
   * becomes .grad (torch/csrc/autograd/input_buffer.cpp accumulate): out
   * of place where the head's gradient is the matmul's; in place where it
   * is autocast's cast's backward (ToCopyBackward0: a fresh tensor nothing
   * else holds, can_accumulate_inplace). The traces of Llama-3.2-3B's
   * shapes at two layers, checkpointed: three fp32 tables at once in bf16
   * and fp32 on meta, two under amp-bf16 on the CPU */
  const bool inplace = z->autocast && z->wb > z->e;
  for (int i = 0; i < inv->n && !R->p.failed && base_trained(R); i++) {
    const struct vl_tensor *t = &inv->t[i];
    if (t->kind != VL_T_EMBED) continue;
    if ((lp->tied || R->tied_grad != NONE) && t->rows == z->V) { /* (or a decoder's, waiting) */
      uint64_t b = t->rows * t->cols * z->wb;
      uint32_t g = A(&R->p, b), s = inplace && R->tied_grad != NONE ? R->tied_grad : A(&R->p, b);
      F(&R->p, &g);
      if (s != R->tied_grad) F(&R->p, &R->tied_grad);
      grad(R, s, b);
    } else {
      for (uint64_t k = 0; k < t->count; k++)
        grad(R, A(&R->p, t->rows * t->cols * z->wb), t->rows * t->cols * z->wb);
    }
  }

  rel(R, g0);
  rel(R, g0d);
  rel(R, f->x0d);
}

/* ---- optimizer step ---- */

/* the states (made by the first step) and the step's temporaries */
static void optimizer_step(struct loop *lp, int step) {
  struct run *R = &lp->R;
  const struct vl__train_sizes *z = R->z;
  if (z->zero1_ranks) { /* the states and the step of rank 0's share only */
    for (size_t k = 0; step == 0 && k < lp->nmine; k++)
      for (unsigned j = 0; j < z->states; j++)
        vl__tr_block(&R->p, lp->esz[lp->mine[k]] * z->sb, &lp->states);
    for (size_t k = 0; z->step_temp && k < lp->nmine; k++)
      vl__tr_block(&R->p, lp->esz[lp->mine[k]] * z->sb,
                   z->impl == VL_IMPL_FOREACH ? &lp->tmp : NULL);
    vl__tr_drop(&R->p, &lp->tmp);
  } else {
    if (step == 0 && z->states)
      vl__tr_trained(&R->p, R->arch, lp->inv, z, z->sb, z->states, &lp->states);
    if (z->step_temp) { /* foreach: a state-sized list; for-loop: one at a time */
      vl__tr_trained(&R->p, R->arch, lp->inv, z, z->sb, 1,
                     z->impl == VL_IMPL_FOREACH ? &lp->tmp : NULL);
      vl__tr_drop(&R->p, &lp->tmp);
    }
  }
}

static void loop_free(struct loop *lp) {
  struct run *R = &lp->R;
  vl_free(lp->kept);
  vl_free(lp->esz);
  vl_free(lp->mine);
  vl_free(lp->buckets.h);
  vl_free(lp->old.h);
  vl_free(lp->model.h);
  vl_free(lp->states.h);
  vl_free(lp->tmp.h);
  vl_free(R->grads.h);
  vl_free(R->cached.h);
  vl_free(R->kv.h);
  tape_free(&R->tp);
  vl_cache_destroy(R->p.c);
}

/* Micro-batch k of n starts (the one before dropped): where it starts as
 * micro-batch k - 1 did (the allocator's digest, its live blocks by
 * handle), the calls of every later one but the last are that one's again,
 * the same blocks taken the same way (lib/model/caching.c). Those are
 * counted, not replayed: @return the micro-batch to run next. A 70B model's
 * 1,024 micro-batches a step cost one. */
static uint64_t skip_repeats(struct run *R, uint64_t k, uint64_t n, uint64_t seen[2],
                             struct vl_cache_stats *since) {
  uint64_t d[2];
  vl_cache_digest(R->p.c, d);
  if (k > 1 && d[0] == seen[0] && d[1] == seen[1] && k + 1 < n) {
    vl_cache_repeat(R->p.c, since, n - 1 - k);
    return n - 1;
  }
  seen[0] = d[0];
  seen[1] = d[1];
  vl_cache_stats(R->p.c, since);
  return k;
}

vl_status vl__train_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl__train_sizes *z, struct vl_cache_stats *out,
                           struct vl_err *err) {
  struct vl_cache_conf conf = {0, 0, 0, z->expandable};
  struct loop lp = {.R = {.p = {NULL, false}, .arch = arch, .z = z, .out32 = NONE}, .inv = inv};
  struct run *R = &lp.R;
  if (vl_cache_new(&conf, &R->p.c) != VL_OK) return vl__fail(err, VL_ENOMEM, "out of memory");
  /* autograd's thread makes its cuBLAS workspace at its first matmul, the
   * head's, after the head's weight gradient (Gemma-2B's and Pythia-1.4B's
   * histories: bench/results/nccl-run/raw.jsonl:gemma2b-miss-histories,
   * train-histories) */
  R->tp = (struct tape){
      .p = &R->p, .ws_bytes = z->workspace, .ws = NONE, .fws = NONE, .on_grad = on_leaf, .ctx = R};
  R->T = z->T;
  R->a = arch->heads;
  R->g = arch->kv_heads ? arch->kv_heads : arch->heads;
  R->d = arch->head_dim ? arch->head_dim : arch->hidden / (arch->heads ? arch->heads : 1);
  R->dv = arch->mla ? arch->v_head_dim : R->d;
  R->causal = arch->causal;
  /* the logits: every token's (an encoder-decoder's: its decoder's), a
   * ViT's [CLS] token's only */
  lp.vision = vl_arch_is_vision(arch);
  lp.rows_out = lp.vision ? z->B : arch->enc_layers ? z->B * z->Pd : z->T;
  lp.TV = lp.rows_out * z->V;
  lp.tied = arch->tie_embeddings && (arch->causal || !lp.vision);
  /* checkpoints' inputs (an encoder-decoder's: both stacks') */
  lp.kept = vl_calloc(arch->layers + arch->enc_layers + 1, sizeof *lp.kept);
  if (!lp.kept) {
    vl_cache_destroy(R->p.c);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }

  load_model(&lp);
  wrap_ddp(&lp);
  for (int step = 0; step < STEPS && !R->p.failed; step++) {
    if (z->ddp && step == 1) rebuild_buckets(&lp);
    struct pass f = {0};
    /* gradient accumulation: a forward and backward a micro-batch, the
     * gradients after the first added into .grad; the loop drops the
     * output before the next forward (measure.py: del out, loss) */
    uint64_t n = vl__max(z->accum, 1), seen[2] = {0, 0};
    struct vl_cache_stats since;
    for (uint64_t k = 0; k < n && !R->p.failed; k++) {
      if (k) {
        if (!z->drop_outputs) drop_output(R, f.logits);
        drop_graph(R);
        f = (struct pass){0};
        if (!z->every_micro_batch) k = skip_repeats(R, k, n, seen, &since);
      }
      R->accumulating = k > 0;
      PROG_LOG("m forward %d\n", step + 1); /* the marks of measure.py's trace */
      forward(&lp, &f);
      head_forward(&lp, &f);
      PROG_LOG("m backward %d\n", step + 1);
      loss_backward(&lp, &f);
      vl__tr_drop(&R->p, &lp.old); /* the first all-reduce: kept first buckets go */
      layers_backward(&lp, &f);
      embedding_grads(&lp, &f);
    }
    R->accumulating = false;
    PROG_LOG("m optimizer %d\n", step + 1);
    optimizer_step(&lp, step);
    if (!z->grads_late) vl__tr_drop(&R->p, &R->grads); /* zero_grad(set_to_none=True) */
    if (!z->drop_outputs) drop_output(R, f.logits);    /* del out */
    drop_graph(R);
  }
  F(&R->p, &lp.pixels);
  vl_cache_stats(R->p.c, out);
  bool failed = R->p.failed;
  loop_free(&lp);
  if (failed)
    return vl__fail(err, VL_ENOMEM, "out of memory replaying a training step's allocations");
  return VL_OK;
}
