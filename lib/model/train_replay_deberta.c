/* The training replay of DeBERTa-v2's self-attention (train_replay.h), as
 * transformers 5.17 runs it (modeling_deberta_v2.py
 * DisentangledSelfAttention.forward and disentangled_attention_bias, with
 * share_att_key: DeBERTa-v3's query_proj and key_proj project the relative
 * embeddings too, LoRA's adapters on them with them), op by op in the
 * order of the dry run on meta tensors (deberta-v3-base's trace). */
#include "policy.h"
#include "train_replay.h"

/* transpose_for_scores(linear(x)): the layer's k-th linear (weight w) on
 * rows of x, then permute(...).contiguous(), a copy; the linear's output
 * goes once copied */
static uint32_t heads(struct run *R, uint32_t w, unsigned k, uint32_t x, uint64_t xb,
                      uint64_t rows) {
  const uint64_t h = R->z->h;
  uint32_t y = vl__tr_linear_k(R, w, k, x, xb, rows, h, h, R->arch->qkv_bias);
  uint32_t c = op(R, (struct tape_op){.out_bytes = R->tp.t[y].bytes, .in = {y}});
  rel(R, y);
  return c;
}

/* a relative-position index of the (1, s, s) relative_pos: int64 blocks
 * made one after another, each but the last let go of (c2p_pos: + span,
 * clamp; p2c_pos: -r_pos, + span, clamp); the last, which the gather
 * saves */
static uint32_t rel_index(struct run *R, int n) {
  const uint64_t b = R->P * R->P * 8;
  uint32_t x = tape_const(&R->tp, b);
  for (int i = 1; i < n; i++) {
    uint32_t y = tape_const(&R->tp, b);
    rel(R, x);
    x = y;
  }
  return x;
}

/* one disentangled term: bmm(x, pos^T) (B*a x s x 2 span, saved by the
 * gather, which also saves its index), gathered to the scores' size and
 * divided by the scale; *g the gather's output, the function's local
 * (c2p_att, p2c_att) until it returns */
static uint32_t term(struct run *R, uint32_t x, uint32_t pos, int nidx, uint32_t *g) {
  const uint64_t e = R->z->e, Ba = R->z->B * R->a, s = R->P;
  const uint64_t sc = Ba * s * s * e, span2 = R->arch->rel_embed_rows;
  uint32_t c =
      op(R, (struct tape_op){.out_bytes = Ba * s * span2 * e, .in = {x, pos}, .saved = {x, pos}});
  uint32_t idx = rel_index(R, nidx);
  *g = op(R, (struct tape_op){.out_bytes = sc, .in = {c}, .saved = {c, idx}});
  rel(R, c);
  rel(R, idx);
  return op(R, (struct tape_op){.out_bytes = sc, .in = {*g}}); /* / scale */
}

/* the relative embeddings' projection by the layer's k-th linear (w),
 * its heads copied, repeated over the batch */
static uint32_t pos_layer(struct run *R, uint32_t w, unsigned k, uint32_t pe, uint64_t rb) {
  uint32_t c = heads(R, tape_again(&R->tp, w), k, pe, rb, R->arch->rel_embed_rows);
  uint32_t p = op(R, (struct tape_op){.out_bytes = R->tp.t[c].bytes * R->z->B, .in = {c}});
  rel(R, c);
  return p;
}

/* disentangled_attention_bias: c2p (q against the positions' keys) and
 * p2c (k against the positions' queries); score = 0 + c2p, a new tensor,
 * then += p2c in place (written as an add whose operand goes at once:
 * the tape has no in-place op). pe: the relative embeddings after
 * pos_dropout */
static uint32_t bias(struct run *R, uint32_t q, uint32_t k, uint32_t wq, uint32_t wk, unsigned k0,
                     uint32_t pe) {
  const struct vl_arch *A = R->arch;
  const uint64_t rb = R->tp.t[pe].bytes / (A->rel_embed_rows * R->z->h);
  const uint64_t sc = R->z->B * R->a * R->P * R->P * R->z->e;
  /* (share_att_key: both made, whichever terms the type has) */
  uint32_t pq = pos_layer(R, wq, k0, pe, rb), pk = pos_layer(R, wk, k0 + 1, pe, rb);
  uint32_t score = 0, g1 = 0, g2 = 0;
  if (A->rel_att & 1) score = term(R, q, pk, 2, &g1); /* (0 + it: its block again) */
  if (A->rel_att & 2) {
    uint32_t d = term(R, k, pq, 3, &g2);
    if (score) {
      uint32_t s2 = op(R, (struct tape_op){.out_bytes = sc, .in = {score, d}, .pass = TAPE_ADD});
      rel(R, score);
      rel(R, d);
      score = s2;
    } else {
      score = d;
    }
  }
  rel(R, g1); /* disentangled_attention_bias returns */
  rel(R, g2);
  rel(R, pq);
  rel(R, pk);
  return score;
}

/* DisentangledSelfAttention.forward on x (T x h, xb bytes): q, k, v each
 * projected and copied; k / scale (a new tensor the bmm saves); the
 * scores; the bias added (rel_att a local to the return); the mask's
 * bool() and its negation, masked_fill (saving the negation); softmax
 * (saving its output), dropout, the product with v and its contiguous
 * copy: the context, the function's output. R->lin: attention.output's
 * dense next */
uint32_t vl__tr_deberta_self(struct run *R, uint32_t x, uint64_t xb) {
  const struct vl_arch *A = R->arch;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e, s = R->P;
  const uint64_t sc = R->z->B * R->a * s * s * e, Th = T * h * e;
  const unsigned k0 = R->lin;
  uint32_t wq = base_param(R, h * h * R->z->wb), wk = base_param(R, h * h * R->z->wb);
  uint32_t q = heads(R, wq, k0, x, xb, T), k = heads(R, wk, k0 + 1, x, xb, T);
  uint32_t v = heads(R, base_param(R, h * h * R->z->wb), k0 + 2, x, xb, T);
  R->lin = k0 + 3;
  uint32_t ks = op(R, (struct tape_op){.out_bytes = Th, .in = {k}}); /* k^T / scale */
  uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc, .in = {q, ks}, .saved = {q, ks}});
  rel(R, ks);
  /* pos_dropout on the encoder's relative embeddings (its LayerNorm's
   * output, the residual stream's dtype; not traced to its parameter) */
  uint32_t pe = tape_const(&R->tp, A->rel_embed_rows * h * R->z->r);
  pe = vl__tr_dropout_of(R, pe, A->hidden_dropout, R->z->r);
  uint32_t ra = bias(R, q, k, wq, wk, k0, pe);
  rel(R, pe);
  uint32_t s1 = op(R, (struct tape_op){.out_bytes = sc, .in = {s0, ra}, .pass = TAPE_ADD});
  rel(R, s0);
  uint32_t mb = tape_const(&R->tp, R->z->B * s * s);  /* attention_mask.bool() */
  uint32_t inv = tape_const(&R->tp, R->z->B * s * s); /* ~attention_mask */
  uint32_t m = op(R, (struct tape_op){.out_bytes = sc, .in = {s1}, .saved = {inv}});
  rel(R, inv);
  rel(R, s1);
  /* softmax in the scores' dtype, or fp32 under autocast (its fp32
   * list), whose bmm then takes a copy cast back (saved by it), the
   * probabilities Python's to the return */
  const uint64_t n = sc / e, sm = vl__softmax_bytes(A, R->z->autocast, e);
  uint32_t p = op(R, (struct tape_op){.out_bytes = n * sm, .in = {m}, .save_out = true});
  if (A->attn_dropout > 0) { /* native_dropout: a byte mask, saved */
    uint32_t mask = tape_new(&R->tp, n);
    uint32_t pd = op(R, (struct tape_op){.out_bytes = n * sm, .in = {p}, .saved = {mask}});
    rel(R, mask);
    rel(R, p);
    p = pd;
  }
  uint32_t pc = sm != e ? op(R, (struct tape_op){.out_bytes = sc, .in = {p}}) : tape_ref(&R->tp, p);
  uint32_t c = op(R, (struct tape_op){.out_bytes = Th, .in = {pc, v}, .saved = {pc, v}});
  rel(R, pc);
  uint32_t o = op(R, (struct tape_op){.out_bytes = Th, .in = {c}}); /* permute().contiguous() */
  rel(R, c);
  rel(R, mb); /* the function returns */
  rel(R, p);
  rel(R, m);
  rel(R, ra);
  rel(R, q);
  rel(R, k);
  rel(R, v);
  return o;
}
