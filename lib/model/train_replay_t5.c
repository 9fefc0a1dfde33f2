/* T5's attention parts of the training replay (train_replay.h): its
 * position bias (T5Attention.compute_bias) and its attention under SDPA
 * (PyTorch's math path), which the attention (train_replay_attention.c)
 * and the encoder-decoder's stacks (train_replay_seq2seq.c) both use. */
#include "train_replay.h"

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
 * causal pattern, bias and the dtype's minimum), which no fused kernel
 * takes for the self-attention (vl__tr_t5_math says when): PyTorch's math
 * backend, which upcasts half inputs to fp32
 * (aten/src/ATen/native/transformers/attention.cpp
 * _scaled_dot_product_attention_math): q * scale (a local to its
 * return), k^T * scale (a temporary), each copied where bmm cannot fold
 * it, the scores, plus the mask (out of place, as on meta tensors, which
 * are subclass-like; CUDA's attn.add_(mask) is in place: a transient of
 * the scores' size in forward, where the step's peak is not),
 * _safe_softmax (saved; its isneginf() and all() masks, and in backward
 * softmax_backward_cuda_out's tmp = grad * output of the scores' size),
 * the probabilities cast back (its second output, made first, freed by
 * the caller), v copied likewise, their product, cast back. q, k, v of
 * the decoder's self-attention are the cache's contiguous copies without
 * checkpointing. Read off the meta trace of t5-base's step (bf16, 8 x
 * 512 / 128) and an H100's allocator history of t5-base bf16 SDPA
 * checkpointed at 8 x 1024 / 256 (bench/results/reserved/raw.jsonl:
 * history-t5-sdpa/) */
uint32_t vl__tr_t5_sdpa(struct run *R, uint32_t q, uint32_t k, uint32_t v) {
  const uint64_t T = R->T, Tk = R->z->B * R->Pk, a = R->a, d = R->d, e = R->z->e;
  const uint64_t sc = R->z->B * a * R->P * R->Pk;
  const bool cached = !R->z->ckpt && R->causal; /* (cache_kv's copies) */
  uint32_t mask = t5_bias(R);
  if (R->causal) /* torch.where(causal, bias, min): the bias's size */
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
  uint32_t p =
      op(R, (struct tape_op){.out_bytes = sc * 4, .in = {s1}, .save_out = true, .tmp = sc * 4});
  vl__tr_safe_softmax_masks(R, s1, sc);
  rel(R, s1);
  if (R->arch->attn_dropout > 0) {
    /* training: the math path's at::dropout of the probabilities
     * (transformers passes T5's dropout_rate as dropout_p), CUDA's fused
     * kernel: its mask (a byte a score, saved) and an fp32 output the
     * product with v saves (an H200's history of t5-base bf16 8 x 512:
     * 24 and 96 MiB a layer, bench/results/reserved/lora-seq2seq-h200/) */
    uint32_t keep = tape_new(&R->tp, sc);
    uint32_t pd = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {p}, .saved = {keep}});
    rel(R, keep);
    rel(R, p);
    p = pd;
  }
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
