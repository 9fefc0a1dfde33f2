/* The training replay of an encoder-decoder (train_replay.h): T5 and
 * BART, their encoder, then the decoder's layers with cross-attention to
 * the encoder's output. */
#include "train_replay.h"

/* the residual add of a branch y to x (taken over), then, post-norm, its
 * norm (BART) */
static uint32_t add_branch(struct run *R, uint32_t x, uint32_t y, bool post, uint64_t *nb) {
  const uint64_t Thr = R->T * R->z->h * R->z->r;
  uint32_t s = join(R, Thr, x, vl__tr_dropout(R, y, R->arch->hidden_dropout), TAPE_ADD);
  *nb = R->z->r;
  if (!post) return s;
  uint32_t n = vl__tr_norm(R, s, R->z->r, nb);
  rel(R, s);
  return n;
}

/* the input of a pre-norm branch (its norm) or of a post-norm one (x) */
static uint32_t branch_in(struct run *R, uint32_t x, bool post, uint64_t *nb) {
  if (post) {
    *nb = R->z->r;
    return tape_ref(&R->tp, x);
  }
  return vl__tr_norm(R, x, R->z->r, nb);
}

/* T5's residual branch y on x (T5LayerSelfAttention, T5LayerCrossAttention,
 * T5LayerFF .forward: hidden_states + self.dropout(y)): the sum is made
 * before dropout's output goes (a temporary), then y (rebound, or a local
 * to the return), the sublayer's normed input n at its return (0: none),
 * then x as the block rebinds hidden_states to the sum (t5-base's meta
 * trace, modeling_t5.py:140, 400, 431). stop: a checkpoint's
 * recomputation, which ends at the dropout's mask, the layer's last saved
 * tensor: the sum is not made (torch/utils/checkpoint.py, non-reentrant
 * early stop) */
static uint32_t t5_add(struct run *R, uint32_t x, uint32_t y, uint32_t n, bool stop) {
  const uint64_t Thr = R->T * R->z->h * R->z->r;
  uint32_t yk = tape_ref(&R->tp, y);
  uint32_t d = vl__tr_dropout(R, y, R->arch->hidden_dropout);
  if (stop) R->tp.no_alloc = true;
  uint32_t s = op(R, (struct tape_op){.out_bytes = Thr, .in = {x, d}, .pass = TAPE_ADD});
  rel(R, d);
  rel(R, yk);
  rel(R, n);
  rel(R, x);
  return s;
}

/* a T5Block (modeling_t5.py T5Block.forward) on x, taken over: its
 * self-attention, in the decoder its cross-attention to enc, its
 * T5LayerFF, each a residual branch (t5_add). Each attention's weights
 * are the block's `_` (the tuple's third item): the self-attention's
 * until the cross-attention's replace them, the last until the block
 * returns. stop: a checkpoint's recomputation (t5_add; without dropout
 * it ends at wo's input, vl__tr_mlp) */
static uint32_t t5_block(struct run *R, uint32_t x, uint32_t enc, uint64_t encb, bool stop) {
  const bool early = stop && R->arch->hidden_dropout <= 0;
  uint32_t held = 0, held2 = 0;
  uint64_t nb;
  R->lin = 0;
  uint32_t n1 = vl__tr_norm(R, x, R->z->r, &nb);
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  uint32_t h = t5_add(R, x, at, n1, false);
  if (R->causal) { /* the decoder's cross-attention */
    uint32_t n2 = vl__tr_norm(R, h, R->z->r, &nb);
    R->kv_src = enc, R->kv_srcb = encb, R->Pk = R->z->P;
    R->lin = 0;
    uint32_t ct = vl__tr_attention(R, n2, nb, &held2);
    R->kv_src = 0, R->Pk = R->z->Pd;
    h = t5_add(R, h, ct, n2, false);
    rel(R, held);
    held = held2;
  }
  uint32_t n3 = vl__tr_norm(R, h, R->z->r, &nb);
  uint32_t mo = vl__tr_mlp(R, n3, nb, R->T, R->z->I, false, early);
  rel(R, n3);
  uint32_t out = t5_add(R, h, mo, 0, stop && !early);
  rel(R, held);
  R->tp.no_alloc = false;
  return out;
}

/* a decoder layer of an encoder-decoder: self-attention, cross-attention
 * to the encoder's output enc, the MLP, each a residual branch (T5's
 * T5Block: t5_block; BART's self_attn, encoder_attn, fc1/fc2, each
 * followed by its LayerNorm). stop: a checkpoint's recomputation, which
 * ends at the last tensor the backward needs (torch/utils/checkpoint.py,
 * non-reentrant early stop): BART's the final LayerNorm's statistics, the
 * whole layer made again */
static uint32_t xdec_layer(struct run *R, uint32_t x, uint32_t enc, uint64_t encb, bool stop) {
  if (R->arch->family == VL_FAM_T5) return t5_block(R, x, enc, encb, stop);
  uint32_t held = 0, held2 = 0;
  uint64_t nb;
  /* LoRA's targets: the inventory counts the decoder's linears with the
   * encoder's, q, k, v, o naming both attentions' (params.c
   * seq2seq_stack) */
  R->lin = 0;
  uint32_t n1 = branch_in(R, x, true, &nb);
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  rel(R, n1);
  uint32_t h1 = add_branch(R, x, at, true, &nb);
  uint32_t n2 = branch_in(R, h1, true, &nb);
  R->kv_src = enc, R->kv_srcb = encb, R->Pk = R->z->P;
  R->lin = 0;
  uint32_t ct = vl__tr_attention(R, n2, nb, &held2);
  R->kv_src = 0, R->Pk = R->z->Pd;
  rel(R, n2);
  uint32_t h2 = add_branch(R, h1, ct, true, &nb);
  uint32_t n3 = branch_in(R, h2, true, &nb);
  uint32_t mo = vl__tr_mlp(R, n3, nb, R->T, R->z->I, false, false);
  rel(R, n3);
  uint32_t out = add_branch(R, h2, mo, true, &nb);
  rel(R, held);
  rel(R, held2);
  R->tp.no_alloc = false;
  return out;
}

/* an encoder layer: BART's post-norm one, T5's T5Block (stop: as
 * xdec_layer's) */
static uint32_t enc_layer(struct run *R, uint32_t x, bool stop) {
  if (R->arch->family == VL_FAM_BART) return vl__tr_post_ln_layer(R, x, false);
  return t5_block(R, x, 0, 0, stop);
}

/* the stack's shapes: the encoder's tokens, or the decoder's own
 * (--target-seq) with its cross-attention's keys the encoder's (--seq) */
static void stack(struct run *R, bool decoder) {
  R->causal = decoder;
  R->T = R->z->B * (decoder ? R->z->Pd : R->z->P);
  R->P = R->Pk = decoder ? R->z->Pd : R->z->P;
}

/* an encoder-decoder's encoder on x (its embeddings, taken over), then its
 * decoder's embeddings and layers: the decoder's output; *x0d: the
 * decoder's embedding output (its gradient is dropped as the encoder's).
 * Under checkpointing (modeling_layers.py GradientCheckpointingLayer: each
 * T5Block, BartEncoderLayer, BartDecoderLayer a checkpoint) the layers
 * record nothing for autograd, each keeps its input (kept); what runs
 * between them (T5's final_layer_norm and dropout, the decoder's
 * embeddings) records as usual */
uint32_t vl__tr_seq2seq(struct run *R, uint32_t x, uint32_t *x0d, uint32_t *kept) {
  const struct vl_arch *arch = R->arch;
  const bool ck = R->z->ckpt;
  const uint64_t Le = arch->enc_layers;
  stack(R, false);
  R->tp.grad = !ck;
  for (int i = 0; i < 3; i++)
    R->bias[i] = R->bias_re[i] = 0;
  for (uint64_t l = 0; l < Le && !R->p.failed; l++) {
    R->l = l;
    if (ck) kept[l] = tape_ref(&R->tp, x); /* the checkpoint keeps its input */
    x = enc_layer(R, x, false);
  }
  /* the stack returns: its position bias goes (kept by the later layers'
   * checkpoints: at the second layer's recomputation) */
  if (!ck || Le < 2) rel(R, R->bias[0]);
  R->tp.grad = true;
  R->s2s_mid = R->tp.nn;
  R->enc_last = x;
  uint64_t encb = R->z->r;
  uint32_t enc = x;
  if (arch->family == VL_FAM_T5) { /* the encoder's final_layer_norm and its dropout */
    uint32_t n = vl__tr_norm(R, x, R->z->r, &encb);
    rel(R, x);
    enc = vl__tr_dropout_of(R, n, arch->hidden_dropout, encb);
    rel(R, R->enc_in); /* T5Stack.forward returns: its inputs_embeds goes */
    R->enc_in = 0;
  }
  stack(R, true);
  /* the decoder looks its tokens up in the shared embedding: that lookup's
   * dense gradient (V x h) comes when the decoder's backward is done, and
   * the matrix's AccumulateGrad input buffer holds it (summed with a tied
   * head's) through the encoder's backward (train_replay.c on_leaf;
   * torch/csrc/autograd/input_buffer.cpp) */
  R->dec_leaf = base_trained(R) ? tape_leaf(&R->tp, R->z->V * R->z->h * R->z->wb) : 0;
  uint32_t y = vl__tr_embed(R, R->dec_leaf, true, R->z->h, x0d);
  if (arch->family == VL_FAM_T5)
    R->dec_in = *x0d; /* to the stack's return (vl__tr_mlm_transform) */
  rel(R, R->dec_leaf);
  R->tp.grad = !ck;
  for (uint64_t l = 0; l < arch->layers && !R->p.failed; l++) {
    R->l = l;
    if (ck) kept[Le + l] = tape_ref(&R->tp, y);
    y = xdec_layer(R, y, enc, encb, false);
  }
  R->enc = enc, R->encb = encb;
  /* the model's output holds the encoder's (encoder_last_hidden_state) */
  vl__tr_push(&R->p, &R->kv, tape_ref(&R->tp, enc));
  if (!ck) rel(R, enc); /* (else the checkpoints keep it to their recomputation) */
  if (!ck || arch->layers < 2) rel(R, R->bias[1]);
  /* the cross-attention's zeros: a leaf that requires grad under
   * checkpointing, which its AccumulateGrad node holds, with its .grad,
   * as long as the graph the output keeps (measure.py: until del out) */
  if (ck)
    vl__tr_push(&R->p, &R->kv, R->bias[2]);
  else
    rel(R, R->bias[2]);
  return y;
}

/* the layers of one stack backward, the last first: each recomputed, with
 * autograd, then its backward; out: the stack's output, kept: its inputs */
static void stack_backward(struct run *R, bool decoder, uint32_t *kept, uint64_t L, uint32_t out) {
  stack(R, decoder);
  R->tp.grad = true;
  for (uint64_t l = L; l-- > 0 && !R->p.failed;) {
    uint32_t next = l + 1 < L ? kept[l + 1] : out;
    uint32_t from = R->tp.nn;
    R->l = l;
    uint32_t x = tape_ref(&R->tp, kept[l]);
    uint32_t y = decoder ? xdec_layer(R, x, R->enc, R->encb, true) : enc_layer(R, x, true);
    vl__tr_uncache(R);
    for (int i = 0; i < 3; i++) /* the recomputation's position bias goes as it ends */
      rel(R, R->bias_re[i]), R->bias_re[i] = 0;
    vl__tr_layer_backward(R, y, next, from);
    if (l + 1 < L) rel(R, kept[l + 1]);
    if (l == 1) rel(R, R->bias[decoder]); /* the last checkpoint that kept it */
  }
  /* the position biases' gradients, summed over the layers: the lookup's
   * backward takes T5's; the cross-attention's zeros keep theirs as .grad */
  for (int i = decoder; i < (decoder ? 3 : 1); i++) {
    uint32_t b = R->bias[i];
    if (!b) continue;
    if (i == 2)
      vl__tr_push(&R->p, &R->kv, R->tp.t[b].grad);
    else
      rel(R, R->tp.t[b].grad);
    R->tp.t[b].grad = 0;
  }
}

/* under checkpointing: the decoder's layers, the nodes between the stacks
 * (the decoder's embeddings, T5's final norm: the encoder's output's
 * gradient, summed over the decoder's cross-attentions, flows through
 * them), then the encoder's layers */
void vl__tr_seq2seq_backward(struct run *R, uint32_t *kept, uint32_t out) {
  const uint64_t Le = R->arch->enc_layers;
  stack_backward(R, true, kept + Le, R->arch->layers, out);
  rel(R, R->enc);
  tape_backward(&R->tp, R->s2s_mid);
  tape_truncate(&R->tp, R->s2s_mid);
  rel(R, kept[Le]);
  stack_backward(R, false, kept, Le, R->enc_last);
}
