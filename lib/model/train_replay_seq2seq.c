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

/* a decoder layer of an encoder-decoder: self-attention, cross-attention
 * to the encoder's output enc, the MLP, each a residual branch (T5:
 * T5LayerSelfAttention, T5LayerCrossAttention, T5LayerFF, pre-norm; BART:
 * self_attn, encoder_attn, fc1/fc2, each followed by its LayerNorm) */
static uint32_t xdec_layer(struct run *R, uint32_t x, uint32_t enc, uint64_t encb) {
  const bool post = R->arch->family == VL_FAM_BART;
  uint32_t held = 0, held2 = 0;
  uint64_t nb;
  R->lin = 0;
  uint32_t n1 = branch_in(R, x, post, &nb);
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  rel(R, n1);
  uint32_t h1 = add_branch(R, x, at, post, &nb);
  uint32_t n2 = branch_in(R, h1, post, &nb);
  R->kv_src = enc, R->kv_srcb = encb, R->Pk = R->z->P;
  uint32_t ct = vl__tr_attention(R, n2, nb, &held2);
  R->kv_src = 0, R->Pk = R->z->Pd;
  rel(R, n2);
  uint32_t h2 = add_branch(R, h1, ct, post, &nb);
  uint32_t n3 = branch_in(R, h2, post, &nb);
  uint32_t mo = vl__tr_mlp(R, n3, nb, R->T, R->z->I, false, false);
  rel(R, n3);
  uint32_t out = add_branch(R, h2, mo, post, &nb);
  rel(R, held);
  rel(R, held2);
  return out;
}

/* an encoder-decoder's encoder on x (its embeddings, taken over), then its
 * decoder's embeddings and layers: the decoder's output; *x0d: the
 * decoder's embedding output (its gradient is dropped as the encoder's) */
uint32_t vl__tr_seq2seq(struct run *R, uint32_t x, uint32_t *x0d) {
  const struct vl_arch *arch = R->arch;
  R->causal = false;
  for (uint64_t l = 0; l < arch->enc_layers && !R->p.failed; l++) {
    R->l = l;
    x = arch->family == VL_FAM_BART ? vl__tr_post_ln_layer(R, x, false) : vl__tr_layer(R, x, false);
  }
  uint64_t encb = R->z->r;
  uint32_t enc = x;
  if (arch->family == VL_FAM_T5) { /* the encoder's final_layer_norm and its dropout */
    uint32_t n = vl__tr_norm(R, x, R->z->r, &encb);
    rel(R, x);
    enc = vl__tr_dropout(R, n, arch->hidden_dropout);
  }
  /* the decoder: its own tokens (--target-seq), its self-attention over
   * them, its cross-attention's keys the encoder's (--seq) */
  R->T = R->z->B * R->z->Pd, R->P = R->Pk = R->z->Pd;
  const uint64_t Tdhr = R->T * R->z->h * R->z->r;
  /* the decoder looks its tokens up in the shared embedding: that lookup's
   * dense gradient (V x h) comes when the decoder's backward is done, and
   * the matrix's AccumulateGrad input buffer holds it (summed with a tied
   * head's) through the encoder's backward (train_replay.c on_leaf;
   * torch/csrc/autograd/input_buffer.cpp) */
  R->dec_leaf = 0;
  if (base_trained(R)) {
    R->dec_leaf = tape_leaf(&R->tp, R->z->V * R->z->h * R->z->wb);
    *x0d = op(R, (struct tape_op){.out_bytes = Tdhr, .in = {R->dec_leaf}});
    rel(R, R->dec_leaf);
  } else {
    *x0d = tape_const(&R->tp, Tdhr);
  }
  uint32_t y =
      vl__tr_dropout(R, vl__tr_encoder_embeddings(R, tape_ref(&R->tp, *x0d)), arch->embed_dropout);
  R->causal = true;
  for (uint64_t l = 0; l < arch->layers && !R->p.failed; l++) {
    R->l = l;
    y = xdec_layer(R, y, enc, encb);
  }
  rel(R, enc);
  return y;
}
