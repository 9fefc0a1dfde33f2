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
 * self_attn, encoder_attn, fc1/fc2, each followed by its LayerNorm).
 * stop: a checkpoint's recomputation, which ends at the last tensor the
 * backward needs (torch/utils/checkpoint.py, non-reentrant early stop):
 * T5's is the MLP's dropout mask (or, without dropout, its wo's input),
 * the residual add after it not made; BART's the final LayerNorm's
 * statistics, the whole layer made again */
static uint32_t xdec_layer(struct run *R, uint32_t x, uint32_t enc, uint64_t encb, bool stop) {
  const bool post = R->arch->family == VL_FAM_BART;
  const double pd = R->arch->hidden_dropout;
  uint32_t held = 0, held2 = 0;
  uint64_t nb;
  /* LoRA's targets: the inventory counts the decoder's linears with the
   * encoder's, q, k, v, o naming both attentions' (params.c
   * seq2seq_stack) */
  R->lin = 0;
  uint32_t n1 = branch_in(R, x, post, &nb);
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  rel(R, n1);
  uint32_t h1 = add_branch(R, x, at, post, &nb);
  uint32_t n2 = branch_in(R, h1, post, &nb);
  R->kv_src = enc, R->kv_srcb = encb, R->Pk = R->z->P;
  R->lin = 0;
  uint32_t ct = vl__tr_attention(R, n2, nb, &held2);
  R->kv_src = 0, R->Pk = R->z->Pd;
  rel(R, n2);
  uint32_t h2 = add_branch(R, h1, ct, post, &nb);
  uint32_t n3 = branch_in(R, h2, post, &nb);
  const bool early = stop && !post;
  uint32_t mo = vl__tr_mlp(R, n3, nb, R->T, R->z->I, false, early && pd == 0);
  rel(R, n3);
  if (early && pd > 0) mo = vl__tr_dropout(R, mo, pd), R->tp.no_alloc = true;
  uint32_t out = add_branch(R, h2, mo, post && !early, &nb);
  rel(R, held);
  rel(R, held2);
  R->tp.no_alloc = false;
  return out;
}

/* an encoder layer: BART's post-norm one, T5's pre-norm T5Block (stop: as
 * xdec_layer's) */
static uint32_t enc_layer(struct run *R, uint32_t x, bool stop) {
  if (R->arch->family == VL_FAM_BART) return vl__tr_post_ln_layer(R, x, false);
  if (!stop) return vl__tr_layer(R, x, false);
  /* T5's recomputation: the MLP's dropout is its last saved tensor */
  const double pd = R->arch->hidden_dropout;
  uint32_t held = 0;
  uint64_t nb;
  R->lin = 0;
  uint32_t n1 = vl__tr_norm(R, x, R->z->r, &nb);
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  rel(R, n1);
  uint32_t h1 = add_branch(R, x, at, false, &nb);
  uint32_t n2 = vl__tr_norm(R, h1, R->z->r, &nb);
  uint32_t mo = vl__tr_mlp(R, n2, nb, R->T, R->z->I, false, pd == 0);
  rel(R, n2);
  if (pd > 0) mo = vl__tr_dropout(R, mo, pd), R->tp.no_alloc = true;
  uint32_t out = add_branch(R, h1, mo, false, &nb);
  rel(R, held);
  R->tp.no_alloc = false;
  return out;
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
    enc = vl__tr_dropout(R, n, arch->hidden_dropout);
  }
  stack(R, true);
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
    *x0d = vl__tr_inputs_grad(R) ? tape_new(&R->tp, Tdhr) : tape_const(&R->tp, Tdhr);
  }
  uint32_t y =
      vl__tr_dropout(R, vl__tr_encoder_embeddings(R, tape_ref(&R->tp, *x0d)), arch->embed_dropout);
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
    R->tp.t[y].grad = R->tp.t[next].grad;
    R->tp.t[next].grad = 0;
    tape_backward(&R->tp, from);
    tape_truncate(&R->tp, from);
    rel(R, y);
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

/* T5Attention.compute_bias's buckets (_relative_position_bucket) for P x
 * Pk positions: int64 tensors of P x Pk, the log-spaced half in fp32, as
 * the meta trace of t5-base's step makes and frees them; what they leave
 * is freed once the bias is looked up (the caller's) */
static void t5_buckets(struct run *R, bool bidirectional, uint32_t *keep) {
  const uint64_t n = R->P * R->Pk, L8 = n * 8;
  uint32_t rp = tape_const(&R->tp, L8); /* memory_position - context_position */
  uint32_t rb = 0, ra;
  if (bidirectional) { /* (rp > 0).to(long) * num_buckets, then abs(rp) */
    uint32_t b = tape_const(&R->tp, n), l = tape_const(&R->tp, L8);
    rel(R, b);
    uint32_t m = tape_const(&R->tp, L8);
    rel(R, l);
    rb = tape_const(&R->tp, L8); /* relative_buckets = 0 + that */
    rel(R, m);
    ra = tape_const(&R->tp, L8);
  } else { /* -min(rp, zeros_like(rp)) */
    uint32_t z = tape_const(&R->tp, L8), m = tape_const(&R->tp, L8);
    ra = tape_const(&R->tp, L8);
    rel(R, z);
    rel(R, m);
  }
  uint32_t small = tape_const(&R->tp, n); /* is_small */
  uint32_t f = tape_const(&R->tp, n * 4); /* .float(), / max_exact, log, / log(..), * (..) */
  for (int i = 0; i < 4; i++) {
    uint32_t g = tape_const(&R->tp, n * 4);
    rel(R, f);
    f = g;
  }
  uint32_t il = tape_const(&R->tp, L8); /* .to(long) */
  rel(R, f);
  uint32_t il2 = tape_const(&R->tp, L8); /* max_exact + */
  rel(R, il);
  uint32_t full = tape_const(&R->tp, L8), mn = tape_const(&R->tp, L8); /* min(.., full_like) */
  rel(R, full);
  rel(R, il2);
  /* torch.where, added to the buckets: in place, or (no buckets yet) 0 +
   * it, a new tensor */
  uint32_t w = tape_const(&R->tp, L8);
  if (!bidirectional) rb = tape_const(&R->tp, L8);
  rel(R, w);
  rel(R, ra);
  rel(R, small);
  rel(R, mn);
  keep[0] = rp, keep[1] = rb;
}

/* T5's position bias of the attention being run, made in each stack's
 * first layer (modeling_t5.py T5Attention.forward): self-attention's
 * compute_bias, its buckets (t5_buckets) looked up in relative_attention_
 * bias (1 x heads x P x Pk in the weights' dtype; the lookup's gradient
 * is the bias's summed over the layers, all of which add it to their
 * scores); cross-attention's torch.zeros in the activations' dtype, which
 * requires grad under gradient checkpointing in training. The stack holds
 * it to its end (the checkpoints of the later layers, to their
 * recomputation); a checkpoint's recomputation of the first layer makes
 * it again (bias_re), the original bias keeping the gradients */
void vl__tr_t5_bias(struct run *R) {
  const unsigned i = R->kv_src ? 2 : R->causal;
  const bool again = R->bias[i] != 0;
  const bool rg = R->kv_src ? R->z->ckpt : base_trained(R);
  uint64_t bytes = R->a * R->P * R->Pk * (R->kv_src ? R->z->e : R->z->wb);
  uint32_t keep[2] = {0, 0}, src = 0, pb;
  if (!R->kv_src) t5_buckets(R, !R->causal, keep);
  if (again) {
    R->bias_re[i] = tape_const(&R->tp, bytes);
  } else if (rg && !R->kv_src) { /* the lookup: its backward ends the bias's gradient */
    src = tape_new(&R->tp, 0);
    pb = op(R, (struct tape_op){.out_bytes = bytes, .in = {src}});
    rel(R, src);
    R->bias[i] = pb;
  } else {
    R->bias[i] = rg ? tape_new(&R->tp, bytes) : tape_const(&R->tp, bytes);
  }
  rel(R, keep[0]);
  rel(R, keep[1]);
}

/* a copy of x (a transposed view) where bmm cannot fold it as a view: with
 * more than one sequence (aten LinearAlgebra.cpp _matmul_impl: reshape),
 * as sdpa_math_mqa's (train_replay_attention.c); else x itself */
static uint32_t folded(struct run *R, uint32_t x, bool contiguous) {
  if (contiguous || R->z->B == 1) return tape_ref(&R->tp, x);
  return op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
}

/* T5 under SDPA: transformers hands its position bias to SDPA as the mask
 * (integrations/sdpa_attention.py create_position_bias_mask: the bias
 * itself, or for the decoder's causal self-attention torch.where of the
 * causal pattern, bias and the dtype's minimum), and with half inputs and
 * a mask that requires grad PyTorch runs the math backend (fp32 inputs
 * take the memory-efficient kernel: the meta traces of t5-base fp32 and
 * bf16), which upcasts half inputs to fp32 (aten/src/ATen/native/transformers/attention.cpp
 * _scaled_dot_product_attention_math): q * scale (a local to its
 * return), k^T * scale (a temporary), each copied where bmm cannot fold
 * it, the scores, plus the mask (out of place), softmax (saved), the
 * probabilities cast back (its second output, made first, freed by the
 * caller), v copied likewise, their product, cast back. q, k, v of the
 * decoder's self-attention are the cache's contiguous copies without
 * checkpointing. The cross-attention's zeros require grad only under
 * checkpointing, the bias only where relative_attention_bias trains (not
 * under LoRA); where neither, a fused kernel takes them (vl__tr_t5_math,
 * the meta traces of t5-base with LoRA). Read off
 * the meta trace of t5-base's step (bf16, 8 x 512 / 128) */
uint32_t vl__tr_t5_sdpa(struct run *R, uint32_t q, uint32_t k, uint32_t v) {
  const uint64_t T = R->T, Tk = R->z->B * R->Pk, a = R->a, d = R->d, e = R->z->e;
  const uint64_t sc = R->z->B * a * R->P * R->Pk;
  const bool cached = !R->z->ckpt && R->causal; /* (cache_kv's copies) */
  uint32_t mask = t5_bias(R);
  if (R->causal && !R->kv_src) /* torch.where(causal, bias, min): the bias's size */
    mask = op(R, (struct tape_op){.out_bytes = R->tp.t[mask].bytes, .in = {mask}});
  else
    mask = tape_ref(&R->tp, mask);
  uint32_t q32 =
      e < 4 ? op(R, (struct tape_op){.out_bytes = T * a * d * 4, .in = {q}}) : tape_ref(&R->tp, q);
  uint32_t k32 =
      e < 4 ? op(R, (struct tape_op){.out_bytes = Tk * a * d * 4, .in = {k}}) : tape_ref(&R->tp, k);
  uint32_t v32 =
      e < 4 ? op(R, (struct tape_op){.out_bytes = Tk * a * d * 4, .in = {v}}) : tape_ref(&R->tp, v);
  uint32_t qs = op(R, (struct tape_op){.out_bytes = T * a * d * 4, .in = {q32}});
  uint32_t ks = op(R, (struct tape_op){.out_bytes = Tk * a * d * 4, .in = {k32}});
  uint32_t qc = folded(R, qs, false), kc = folded(R, ks, cached);
  uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {qc, kc}, .saved = {qc, kc}});
  rel(R, qc);
  rel(R, kc);
  rel(R, ks);
  uint32_t s1 = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {s0, mask}, .pass = TAPE_ADD});
  rel(R, s0);
  uint32_t p = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {s1}, .save_out = true});
  rel(R, s1);
  uint32_t w = e < 4 ? op(R, (struct tape_op){.out_bytes = sc * e, .in = {p}}) : 0;
  uint32_t vc = folded(R, v32, cached);
  uint32_t o32 =
      op(R, (struct tape_op){.out_bytes = T * a * d * 4, .in = {p, vc}, .saved = {p, vc}});
  rel(R, p);
  rel(R, vc);
  uint32_t oh = e < 4 ? op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {o32}})
                      : tape_ref(&R->tp, o32);
  rel(R, o32);
  uint32_t done[] = {qs, v32, k32, q32, w, mask};
  for (size_t i = 0; i < sizeof done / sizeof done[0]; i++)
    rel(R, done[i]);
  /* transformers' attn_output.transpose(1, 2).contiguous() */
  uint32_t o = op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {oh}});
  rel(R, oh);
  return o;
}
