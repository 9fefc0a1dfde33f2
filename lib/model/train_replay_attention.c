/* The training replay's attention (train_replay.h): q, k and v (a fused
 * projection, DeepSeek-V2's latent attention, separate linears, cross-
 * attention to an encoder's output), q/k norms, rotary, the KV cache's
 * copies, DeBERTa's disentangled scores, and the kernels: eager, SDPA's
 * math backend (fp32 grouped heads; Falcon's multi-query), flash or
 * memory-efficient SDPA; then o_proj. q, k and v (but MLA's), rotary, the
 * q/k norms and eager attention's scores to weights are layer programs
 * (lp_attention.c, lp_norm.c) run by vl__tr_lp; the rest is written here. */
#include "lp.h"
#include "train_replay.h"

/* q/k norms (Qwen3, Gemma 3 per head; OLMo 2, OLMoE over all heads) on
 * the projection x of `heads` heads, which it replaces */
static uint32_t qk_norm(struct run *R, uint32_t x, uint64_t heads) {
  if (!R->arch->qk_norm) return x;
  const uint64_t n = R->T * heads * R->d, xb = R->tp.t[x].bytes / n;
  uint64_t ob;
  uint32_t y = R->arch->qk_norm == 1 ? vl__tr_norm_w(R, x, xb, R->T * heads, R->d, &ob)
                                     : vl__tr_norm_w(R, x, xb, R->T, heads * R->d, &ob);
  rel(R, x);
  return y;
}

/* rotary on all n elements of x (its dtype's; not let go of; a partial
 * rotary's part: rope_parts): its program (lp_attention.c vl__lp_rope),
 * the products in the wider of x's dtype and the residual stream's, which
 * cos and sin have */
static uint32_t rotary(struct run *R, uint32_t x, uint64_t n) {
  const uint64_t e = R->tp.t[x].bytes / n, w = vl__max(R->z->r, e);
  struct lp p;
  /* (under autocast the program of the other types: the CPU dry run of
   * modernbert-base amp-bf16 2 x 1,024 reserved 3.9 % less than the
   * upcast program, the measured tu-modernbert-amp-adamw-b4s2048 0.3 %) */
  if (R->arch->rope_upcast && !R->z->autocast)
    vl__lp_rope_upcast(&p, (unsigned)e);
  else
    vl__lp_rope(&p, (unsigned)e, (unsigned)w, false);
  return vl__tr_lp(R, &p, x, e, &(struct lp_dims){.rows = 1, .I = n, .h = n}, false, NULL);
}

/* autocast's cast of an attention input to the activations' dtype (a new
 * tensor) where it is wider, else another reference to x */
static uint32_t to_act(struct run *R, uint32_t x, uint64_t elems) {
  if (!R->z->autocast || R->tp.t[x].bytes == elems * R->z->e) return tape_ref(&R->tp, x);
  return op(R, (struct tape_op){.out_bytes = elems * R->z->e, .in = {x}});
}

/* a new reference to x, or for a view a contiguous copy of it: what an op
 * that must reshape x makes and saves */
static uint32_t contiguous(struct run *R, uint32_t x) {
  if (!R->tp.t[x].base) return tape_ref(&R->tp, x);
  return op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
}

/* *x replaced by contiguous(*x) */
static void make_contiguous(struct run *R, uint32_t *x) {
  uint32_t c = contiguous(R, *x);
  rel(R, *x);
  *x = c;
}

/* DeepSeek-V2's multi-head latent attention, q, k and v: q_proj (or its
 * low rank q_a, norm, q_b), the compressed kv_a_proj_with_mqa, its norm,
 * kv_b_proj to every head's k_nope and v; rotary on q's and the shared
 * k's rope parts; q and k concatenated from their parts (k_rot expanded
 * to every head) (modeling_deepseek_v2.py DeepseekV2Attention.forward) */
static void mla_qkv(struct run *R, uint32_t n1, uint64_t nb, uint32_t *q, uint32_t *k,
                    uint32_t *v) {
  const struct vl_arch *A = R->arch;
  const uint64_t T = R->T, a = R->a, h = R->z->h, e = R->z->e, d = R->d, dv = R->dv;
  const uint64_t rope_d = A->qk_rope_dim, nope = A->qk_nope_dim, c = A->kv_lora_rank;
  uint64_t ob;
  uint32_t qf;
  if (A->q_lora_rank) {
    uint32_t qa = vl__tr_linear(R, n1, nb, T, h, A->q_lora_rank, A->qkv_bias);
    uint32_t qn = vl__tr_norm_w(R, qa, e, T, A->q_lora_rank, &ob);
    rel(R, qa);
    qf = vl__tr_linear(R, qn, ob, T, A->q_lora_rank, a * d, false);
    rel(R, qn);
  } else {
    qf = vl__tr_linear(R, n1, nb, T, h, a * d, false);
  }
  uint32_t kva = vl__tr_linear(R, n1, nb, T, h, c + rope_d, A->qkv_bias);
  uint32_t kvc = tape_piece(&R->tp, kva, T * c * e), kr = tape_piece(&R->tp, kva, T * rope_d * e);
  uint32_t kvn = vl__tr_norm_w(R, kvc, e, T, c, &ob);
  rel(R, kvc);
  uint32_t kvb = vl__tr_linear(R, kvn, ob, T, c, a * (nope + dv), false);
  rel(R, kvn);
  uint32_t kp = tape_piece(&R->tp, kvb, T * a * nope * e);
  *v = tape_piece(&R->tp, kvb, T * a * dv * e);
  rel(R, kvb);
  uint32_t qp = tape_piece(&R->tp, qf, T * a * nope * e),
           qr = tape_piece(&R->tp, qf, T * a * rope_d * e);
  rel(R, qf);
  uint32_t qr2 = rotary(R, qr, T * a * rope_d), kr2 = rotary(R, kr, T * rope_d);
  rel(R, qr);
  rel(R, kr);
  rel(R, kva);
  uint32_t krx = op(R, (struct tape_op){.out_bytes = R->tp.t[kr2].bytes * a, .in = {kr2}});
  rel(R, kr2);
  *q = join(R, T * a * d * vl__max(e, R->tp.t[qr2].bytes / (T * a * rope_d)), qp, qr2, TAPE_SLICES);
  *k = join(R, T * a * d * vl__max(e, R->tp.t[krx].bytes / (T * a * rope_d)), kp, krx, TAPE_SLICES);
}

/* DeBERTa-v2's disentangled attention adds to the scores s (taken over)
 * its content-to-position and position-to-content terms: each a bmm of q
 * with the relative embeddings' projection (B*a x s x 2*span, kept by the
 * gather that follows, which saves its input), gathered to s x s and
 * scaled; then the attention mask's masked_fill, a new tensor
 * (modeling_deberta_v2.py DisentangledSelfAttention; deberta3-amp-adamw-
 * eager's peak, bench/results/model-types/raw.jsonl:model-types-unseen/type-peaks-more.json) */
static uint32_t disentangled(struct run *R, uint32_t s, uint32_t q) {
  const struct vl_arch *A = R->arch;
  if (!A->rel_att) return s;
  const uint64_t e = R->z->e, sc = R->tp.t[s].bytes;
  const uint64_t rb = R->z->B * R->a * R->z->P * A->rel_embed_rows * e;
  for (unsigned bit = 1; bit <= 2; bit <<= 1) {
    if (!(A->rel_att & bit)) continue;
    /* the relative embeddings' projection repeated over the batch */
    uint32_t pos = tape_new(&R->tp, R->z->B * R->a * A->rel_embed_rows * R->d * e);
    uint32_t c = op(R, (struct tape_op){.out_bytes = rb, .in = {q, pos}, .saved = {q, pos}});
    rel(R, pos);
    uint32_t idx = tape_new(&R->tp, R->z->P * R->z->P * 8); /* the int64 gather index */
    uint32_t gth = op(R, (struct tape_op){.out_bytes = sc, .in = {c}, .saved = {c, idx}});
    rel(R, c);
    rel(R, idx);
    uint32_t dv = op(R, (struct tape_op){.out_bytes = sc, .in = {gth}});
    rel(R, gth);
    s = join(R, sc, s, dv, TAPE_ADD);
  }
  uint32_t mask = tape_new(&R->tp, R->z->B * R->z->P * R->z->P); /* attention_mask.bool() */
  uint32_t m = op(R, (struct tape_op){.out_bytes = sc, .in = {s}, .saved = {mask}});
  rel(R, mask);
  rel(R, s);
  return m;
}

/* an attention's tensors as it runs: Python's references to q, k and v;
 * q32, k32 rotary's (wider) outputs; qkv the fused projection, a local
 * until the attention returns (0: none of each) */
struct qkv {
  uint32_t q, k, v, q32, k32, qkv;
};

/* q, k and v of n1 (T x h, nb bytes an element): MLA's, or their
 * program's (lp_attention.c vl__lp_qkv: the fused projection's views, or
 * three linears; cross-attention: k and v of the encoder's output) */
static void project(struct run *R, uint32_t n1, uint64_t nb, struct qkv *s) {
  const struct vl_arch *arch = R->arch;
  if (arch->mla) {
    *s = (struct qkv){0};
    mla_qkv(R, n1, nb, &s->q, &s->k, &s->v);
    return;
  }
  struct lp p;
  const bool cross = R->kv_src != 0, split = R->z->eager && R->z->B != 1;
  vl__lp_qkv(&p, arch, (unsigned)R->z->e, cross, split,
             !cross && !split && (!arch->fused_qkv || arch->qkv_sliced) &&
                 vl__rope_layer(arch, R->l));
  const struct lp_dims d = {.rows = R->T,
                            .rows_k = R->z->B * R->Pk,
                            .I = R->a * R->d,
                            .J = R->g * R->d,
                            .h = R->z->h,
                            .in2 = R->kv_src,
                            .in2b = R->kv_srcb};
  uint32_t t[LP_MAX];
  vl__tr_lp(R, &p, n1, nb, &d, false, t);
  *s = (struct qkv){.q = t[p.out[0]], .k = t[p.out[1]], .v = t[p.out[2]], .qkv = t[p.held]};
}

/* rotary on q and k (GPT-NeoX's on a part of each head): s->q32 and
 * s->k32 in the wider dtype, s->q and s->k their casts for the attention */
/* partial rotary (GPT-NeoX's rotary_pct, Phi's and StableLM's
 * partial_rotary_factor): q's and k's first parts rotated, q's then k's,
 * and only then each joined to its rest by torch.cat, q's first
 * (apply_rotary_pos_emb of modeling_gpt_neox.py, modeling_phi.py); the
 * joined tensors in the wider of the parts' dtypes */
static void rope_parts(struct run *R, uint32_t q, uint32_t k, uint32_t *q32, uint32_t *k32) {
  const uint64_t T = R->T, d = R->d, e = R->tp.t[q].bytes / (T * R->a * d);
  const uint64_t dr = (uint64_t)((double)d * R->arch->rotary_pct) / 2 * 2;
  const uint64_t nq = T * R->a, nk = T * R->g;
  uint32_t qr = tape_slice(&R->tp, q, nq * dr * e), qp = tape_slice(&R->tp, q, nq * (d - dr) * e);
  uint32_t kr = tape_slice(&R->tp, k, nk * dr * e), kp = tape_slice(&R->tp, k, nk * (d - dr) * e);
  uint32_t qe = rotary(R, qr, nq * dr), ke = rotary(R, kr, nk * dr);
  rel(R, qr);
  rel(R, kr);
  const uint64_t w = R->tp.t[qe].bytes / (nq * dr);
  *q32 = join(R, nq * d * w, qe, qp, TAPE_SLICES);
  *k32 = join(R, nk * d * w, ke, kp, TAPE_SLICES);
}

/* use_cache's DynamicCache takes the layer's keys and values (a causal
 * stack's, without checkpointing; BartForConditionalGeneration turns the
 * cache off when given labels: modeling_bart.py, "use_cache ... changed
 * to False") */
static bool kv_cached(const struct run *R) {
  return !R->z->ckpt && R->causal && R->arch->family != VL_FAM_BART;
}

static void rope_qk(struct run *R, struct qkv *s) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, a = R->a, g = R->g, d = R->d;
  uint32_t q = s->q, k = s->k, q32, k32;
  if (arch->rotary_pct < 1) {
    rope_parts(R, q, k, &q32, &k32);
  } else {
    q32 = rotary(R, q, T * a * d);
    k32 = rotary(R, k, T * g * d);
  }
  if (arch->rope_cast_back && !(arch->rope_upcast && R->z->autocast)) {
    /* OLMo 2's apply_rotary_pos_emb casts back to q's and k's dtype
     * (modeling_olmo2.py: q_embed.to(q_type)): the cache copies and the
     * attention get them in that dtype (olmo2-1b-amp-adamw's peak,
     * bench/results/model-types/raw.jsonl:model-types-unseen/type-peaks-more.json) */
    /* (.to() of q's own dtype is q32 itself) */
    const bool same = R->tp.t[q32].bytes == R->tp.t[q].bytes;
    uint32_t qc = same ? tape_ref(&R->tp, q32)
                       : op(R, (struct tape_op){.out_bytes = R->tp.t[q].bytes, .in = {q32}});
    uint32_t kc = same ? tape_ref(&R->tp, k32)
                       : op(R, (struct tape_op){.out_bytes = R->tp.t[k].bytes, .in = {k32}});
    rel(R, q32);
    rel(R, k32);
    q32 = qc;
    k32 = kc;
  }
  rel(R, q);
  rel(R, k);
  if (kv_cached(R)) { /* cast at the kernel's call, after the cache (cache_kv) */
    s->q = q32, s->k = k32, s->q32 = s->k32 = 0;
    return;
  }
  /* (autocast casts an op's arguments as C++ evaluates the wrapped call's
   * arguments, the last first: k's before q's, Gemma-2B AMP's history) */
  k = to_act(R, k32, T * g * d);
  q = to_act(R, q32, T * a * d);
  s->q = q, s->k = k, s->q32 = q32, s->k32 = k32;
}

/* the KV cache's copies of k and v, which the attention then uses */
static void cache_kv(struct run *R, struct qkv *s) {
  const uint64_t T = R->z->B * R->Pk, g = R->g, d = R->d; /* the keys' tokens */
  uint32_t k = s->k, v = s->v, k32 = s->k32;
  /* use_cache (the config's default; measure.py, like transformers'
   * gradient_checkpointing_enable, turns it off only with
   * checkpointing): DynamicLayer.update copies the key and the value
   * into the cache (torch.cat onto an empty tensor), the attention uses
   * the cache's, which the model's output holds until it is dropped
   * (pythia160-fp32-sgd-forloop-eager's history: cache_utils.py:146-147) */
  uint64_t kb = R->tp.t[k32 ? k32 : k].bytes; /* the key's; the cache is made in its dtype, */
  uint32_t kc = op(R, (struct tape_op){.out_bytes = kb, .in = {k32 ? k32 : k}});
  /* so the value is promoted to it (fp32 under autocast: cat onto an
   * empty fp32 tensor; pythia14-amp-adamw-sdpa's history) */
  uint32_t vc = op(R, (struct tape_op){.out_bytes = kb / d * R->dv, .in = {v}});
  vl__tr_push(&R->p, &R->kv, tape_ref(&R->tp, kc));
  vl__tr_push(&R->p, &R->kv, tape_ref(&R->tp, vc));
  rel(R, k);
  rel(R, k32);
  rel(R, v);
  /* autocast casts the kernel's arguments at its call, the last first:
   * v, k, then q (rotated q and k wait in their own dtype: rope_qk;
   * pythia14-amp-adamw-sdpa's history, the cache's copies a32 a32 before
   * the casts) */
  v = to_act(R, vc, T * g * R->dv);
  k = to_act(R, kc, T * g * d);
  uint32_t q32 = s->q, q = to_act(R, q32, R->T * R->a * d);
  if (q == q32) rel(R, q32), q32 = 0; /* no cast: one reference */
  rel(R, kc);
  rel(R, vc);
  s->q = q, s->q32 = q32, s->k = k, s->v = v, s->k32 = 0;
}

/* DeBERTa's copies of q, k and v */
static void deberta_copies(struct run *R, struct qkv *s) {
  uint32_t q = s->q, k = s->k, v = s->v;
  /* DeBERTa's transpose_for_scores: contiguous copies of q, k and v; the
   * key divided by the scale (modeling_deberta_v2.py) */
  uint32_t *qkv3[3] = {&q, &k, &v};
  for (int i = 0; i < 3; i++) {
    uint32_t c = op(R, (struct tape_op){.out_bytes = R->tp.t[*qkv3[i]].bytes, .in = {*qkv3[i]}});
    rel(R, *qkv3[i]);
    *qkv3[i] = c;
  }
  uint32_t ks = op(R, (struct tape_op){.out_bytes = R->tp.t[k].bytes, .in = {k}});
  rel(R, k);
  k = ks;
  s->q = q, s->k = k, s->v = v;
}

/* eager attention: the scores materialised, softmax, the product with v;
 * its output, *held: the weights the layer keeps until it returns */
static uint32_t eager(struct run *R, const struct qkv *s, uint32_t *held) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, a = R->a, g = R->g, d = R->d, e = R->z->e;
  const uint32_t q = s->q, k = s->k, v = s->v, q32 = s->q32;
  const uint64_t sc = R->z->B * a * R->P * R->Pk;
  uint32_t rk = tape_ref(&R->tp, k), rv = tape_ref(&R->tp, v);
  if (g < a) { /* repeat_kv (the keys' tokens) */
    const uint64_t Tk = R->z->B * R->Pk;
    rel(R, rk);
    rel(R, rv);
    rk = op(R, (struct tape_op){.out_bytes = Tk * a * d * e, .in = {k}});
    rv = op(R, (struct tape_op){.out_bytes = Tk * a * R->dv * e, .in = {v}});
  }
  /* matmul(q, k^T) * scaling + causal mask: three score-sized tensors.
   * matmul reshapes its operands for bmm: a head-transposed view of the
   * fused projection (GPT-2's query; its key and value where no cache
   * copied them) becomes a contiguous copy, which is what it saves, so
   * the fused output is freed when the attention returns
   * (y-gpt2m-bf16-adamw-eager-b8s1024's history: modeling_gpt2.py:58) */
  /* T5: the copies are matmul's temporaries, each made at its matmul and
   * gone as it returns unless bmm saved it (aten LinearAlgebra.cpp
   * _matmul_impl; t5-base's meta trace: modeling_t5.py:159, 170) */
  const bool at_mm = arch->family == VL_FAM_T5;
  /* bmm's backward makes its second operand's gradient first (k's, then
   * q's; v's, then the weights'), as mm makes the weight's first: T5's
   * decoder's cross-attention, checkpointed, on meta and on an H200
   * (bench/results/reserved/lora-seq2seq-h200/: reserved -4.5 -> 0.0 %) */
  uint32_t rq = contiguous(R, q);
  make_contiguous(R, &rk);
  if (!at_mm) make_contiguous(R, &rv);
  uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {rk, rq}, .saved = {rq, rk}});
  if (at_mm) rel(R, rk), rk = 0; /* (the later temporary first) */
  rel(R, rq);
  uint32_t s1 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {s0}});
  s1 = disentangled(R, s1, q);
  rel(R, s0);
  /* .to(query.dtype) (GPT-2: .type(value.dtype)) */
  const uint64_t sm = vl__softmax_bytes(arch, R->z->autocast, e);
  const uint64_t tb = arch->softmax_native ? R->tp.t[v].bytes / (T * g * R->dv)
                      : q32                ? R->tp.t[q32].bytes / (T * a * d)
                                           : e;
  /* the soft cap, the mask (the causal one; T5's position bias: encoders
   * without padding get none), softmax, the cast, dropout: lp_attention.c */
  struct lp p;
  vl__lp_scores(&p, arch, R->causal || arch->rel_bias, arch->rel_bias && R->causal && !R->kv_src,
                (unsigned)e, (unsigned)vl__max(R->z->wb, e), (unsigned)sm, (unsigned)tb);
  const struct lp_dims ds = {.rows = R->z->B * a * R->P, .h = R->Pk, .in2 = t5_bias(R)};
  uint32_t t[LP_MAX];
  uint32_t sh = vl__tr_lp(R, &p, s1, e, &ds, false, t);
  const uint32_t joined = t[p.held];
  /* the weights are returned with the output: the decoder layer holds
   * them until it returns (Qwen2's eager history: the fp32 scores live
   * through the MLP); under autocast the matmul casts them */
  *held = sh;
  uint32_t shc = to_act(R, sh, sc);
  if (at_mm) make_contiguous(R, &rv);
  uint32_t o4 =
      op(R, (struct tape_op){.out_bytes = T * a * R->dv * e, .in = {rv, shc}, .saved = {shc, rv}});
  rel(R, shc);
  rel(R, rk);
  rel(R, rv);
  uint32_t o = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e,
                                      .in = {o4}}); /* transpose().contiguous() */
  rel(R, o4);
  rel(R, joined);
  return o;
}

/* SDPA's math backend with grouped key/value heads in fp32; its output */
static uint32_t sdpa_math_gqa(struct run *R, const struct qkv *s) {
  const uint64_t T = R->T, a = R->a, d = R->d, e = R->z->e;
  const uint32_t q = s->q, k = s->k, v = s->v;
  /* SDPA's math backend (fp32 with grouped key/value heads: neither
   * flash nor memory-efficient attention takes them, activations.c):
   * q and k scaled by the scale's square root, k and v repeated to every
   * head (enable_gqa), the scores, softmax's output (saved), its product
   * with v; transformers' transpose(1, 2).contiguous() copies it
   * (aten/src/ATen/native/transformers/attention.cpp
   * _scaled_dot_product_attention_math) */
  const uint64_t sc = R->z->B * a * R->P * R->Pk, Tad = T * a * d * e;
  uint32_t qs = op(R, (struct tape_op){.out_bytes = Tad, .in = {q}});
  uint32_t kr = op(R, (struct tape_op){.out_bytes = Tad, .in = {k}});
  uint32_t vr = op(R, (struct tape_op){.out_bytes = Tad, .in = {v}});
  uint32_t ks = op(R, (struct tape_op){.out_bytes = Tad, .in = {kr}});
  rel(R, kr);
  uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {qs, ks}, .saved = {qs, ks}});
  rel(R, qs);
  rel(R, ks);
  uint32_t pr =
      op(R, (struct tape_op){.out_bytes = sc * e, .in = {s0}, .save_out = true, .tmp = sc * e});
  vl__tr_safe_softmax_masks(R, s0, sc);
  rel(R, s0);
  uint32_t o4 = op(R, (struct tape_op){.out_bytes = Tad, .in = {pr, vr}, .saved = {pr, vr}});
  rel(R, pr);
  rel(R, vr);
  uint32_t o = op(R, (struct tape_op){.out_bytes = Tad, .in = {o4}});
  rel(R, o4);
  return o;
}

/* SDPA's math backend for Falcon's multi-query attention; its output */
static uint32_t sdpa_math_mqa(struct run *R, const struct qkv *s) {
  const uint64_t T = R->T, a = R->a, g = R->g, d = R->d, e = R->z->e;
  const uint32_t q = s->q, k = s->k, v = s->v;
  /* Falcon's multi-query SDPA call: one key/value head against every
   * query head without enable_gqa, which neither flash nor memory-
   * efficient attention takes, so the math backend runs; it upcasts half
   * inputs to fp32 (allowFP16BF16ReductionMathSDP is off by default) and
   * broadcasts the single head (aten/src/ATen/native/transformers/
   * attention.cpp _scaled_dot_product_attention_math; modeling_falcon.py
   * FalconAttention.forward) */
  const uint64_t sc = R->z->B * a * R->P * R->Pk, Tad4 = T * a * d * 4, Td4 = T * g * d * 4;
  /* the upcasts and the scaled q live until the op returns (its locals);
   * the scaled k only until the scores (measured lifetimes: an H100's
   * allocator history of Falcon-7B, bench/results/reserved/history) */
  uint32_t qf = e < 4 ? op(R, (struct tape_op){.out_bytes = Tad4, .in = {q}}) : tape_ref(&R->tp, q);
  uint32_t kf = e < 4 ? op(R, (struct tape_op){.out_bytes = Td4, .in = {k}}) : tape_ref(&R->tp, k);
  uint32_t vf = e < 4 ? op(R, (struct tape_op){.out_bytes = Td4, .in = {v}}) : tape_ref(&R->tp, v);
  uint32_t qs = op(R, (struct tape_op){.out_bytes = Tad4, .in = {qf}});
  uint32_t ks = op(R, (struct tape_op){.out_bytes = Td4, .in = {kf}});
  /* matmul broadcasts the single head and folds batch and heads into
   * bmm's batch (aten/src/ATen/native/LinearAlgebra.cpp _matmul_impl:
   * expand, then reshape): with more than one sequence neither q (a
   * transposed view of the fused projection) nor the expanded k folds
   * as a view, so both are copied and bmm saves the copies; with one
   * sequence both fold as views (the head's stride 0), nothing is copied
   * and bmm saves q and k themselves (measured: 70 MiB less a layer at
   * 1 x 2048 than the copies would hold, bench/results/reserved/history) */
  const bool fold = R->z->B == 1;
  uint32_t qx =
      fold ? tape_ref(&R->tp, qs) : op(R, (struct tape_op){.out_bytes = Tad4, .in = {qs}});
  uint32_t kx =
      fold ? tape_ref(&R->tp, ks) : op(R, (struct tape_op){.out_bytes = Tad4, .in = {ks}});
  uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {qx, kx}, .saved = {qx, kx}});
  rel(R, qx);
  rel(R, kx);
  rel(R, ks);
  uint32_t pr =
      op(R, (struct tape_op){.out_bytes = sc * 4, .in = {s0}, .save_out = true, .tmp = sc * 4});
  vl__tr_safe_softmax_masks(R, s0, sc);
  rel(R, s0);
  /* the math op's second output, the weights cast back to the inputs'
   * dtype (attn.to(origin_dtype)), lives until the op returns */
  uint32_t w = e < 4 ? op(R, (struct tape_op){.out_bytes = sc * e, .in = {pr}}) : 0;
  uint32_t vx =
      fold ? tape_ref(&R->tp, vf) : op(R, (struct tape_op){.out_bytes = Tad4, .in = {vf}});
  uint32_t o4 = op(R, (struct tape_op){.out_bytes = Tad4, .in = {pr, vx}, .saved = {pr, vx}});
  rel(R, pr);
  rel(R, vx);
  uint32_t oh = e < 4 ? op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {o4}})
                      : tape_ref(&R->tp, o4);
  rel(R, o4);
  rel(R, qs);
  rel(R, kf);
  rel(R, vf);
  rel(R, qf);
  if (w) rel(R, w);
  uint32_t o =
      op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {oh}}); /* reshape of the permute */
  rel(R, oh);
  return o;
}

/* Does this decoder layer's attention take a mask? A sliding-window layer
 * whose window the sequence reaches gets a boolean B x 1 x s x s mask
 * (masking_utils.py, _ignore_causal_mask_sdpa: kv_length >=
 * local_attention_size); the other layers run with is_causal. The sliding
 * layers are spread over the stack (Gemma 2 alternates; where they are
 * changes when, not how much, is held). */
static bool window_masked(const struct run *R) {
  const struct vl_arch *arch = R->arch;
  const uint64_t n = arch->sliding_layers, L = arch->layers;
  if (!R->causal || R->kv_src || !arch->sliding_window || !n || R->z->P < arch->sliding_window)
    return false;
  return vl__spread_layer(R->l, n, L);
}

/* transformers hands SDPA grouped heads (enable_gqa) only where there is
 * no mask (sdpa_attention.py, use_gqa_in_sdpa); with one, repeat_kv
 * copies k and v out to every query head, and the kernel saves the
 * copies; one key/value head is expanded as a view, its reshape needs no
 * copy (Gemma-3-1B's trace) (Mistral-7B at 4,096 tokens, its window: 32 MiB each a layer at
 * batch 1, the dry run's trace; the cache keeps the originals) */
static void expand_kv(struct run *R, struct qkv *s) {
  const uint64_t T = R->T, a = R->a, e = R->z->e;
  uint32_t k = op(R, (struct tape_op){.out_bytes = T * a * R->d * e, .in = {s->k}});
  uint32_t v = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e, .in = {s->v}});
  rel(R, s->k);
  rel(R, s->v);
  s->k = k, s->v = v;
}

/* SDPA (flash / memory-efficient): saves q, k, v, its output */
static uint32_t sdpa(struct run *R, const struct qkv *s) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, a = R->a, d = R->d, e = R->z->e;
  const uint32_t q = s->q, k = s->k, v = s->v;
  /* an encoder's sliding-window layer passes a B x 1 x s x s mask: the
   * memory-efficient kernel takes it (in q's dtype) and saves it
   * (ModernBERT: 14 such blocks live at the peak of modernbert-bf16-
   * adamw, bench/results/model-types/raw.jsonl:model-types-unseen/type-peaks.json) */
  /* So does a decoder's masked sliding-window layer: the kernel's bias,
   * in q's dtype (phi-3-mini at 2,048 tokens, window 2,047: 16 MiB a layer
   * at batch 2 held to the backward, the dry run's trace) */
  uint32_t m = 0;
  if ((!arch->causal && arch->global_every && R->l % arch->global_every) || window_masked(R))
    m = tape_new(&R->tp, R->z->B * R->z->P * R->z->P * e);
  /* its backward's scratch beside the three gradients: dq accumulated in
   * fp32 and the rows' softmax statistics; cuDNN's and flash's kernels
   * (16-bit, no mask: sdp_utils.cpp's choice) keep dq alone in fp32 up to
   * a head size of 128 (OPT-1.3B AMP LoRA's and Pythia-1.4B AMP's
   * histories, heads of 64 and 128: 64 + 1 MiB and 32 + 0.25 MiB a layer,
   * bench/results/reserved/raw.jsonl:history-sdpa-backward/); the
   * memory-efficient kernel's (a mask, fp32) and heads of 256 (Gemma-2B
   * AMP's history: 128 MiB a layer at 4 x 2,048 tokens, 8 heads) and
   * grouped key/value heads not expanded (Llama-3-8B's H100 history: 257
   * MiB a layer at 4 x 2,048 tokens, 32 heads over 8,
   * bench/results/reserved/raw.jsonl:histories-addr-h100/) a second fp32
   * buffer */
  const bool gqa = R->tp.t[k].bytes < T * a * d * e; /* fewer key heads, not expanded */
  const uint64_t acc = e == 2 && !m && d <= 128 && !gqa ? 1 : 2;
  uint32_t o = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e,
                                      .in = {q, k, v},
                                      .saved = {q, k, v, m},
                                      .save_out = true,
                                      .tmp = acc * T * a * d * 4 + T * a * 4});
  /* its second output, the rows' log-sum-exp in fp32 (b x heads x s),
   * saved: 1 MiB a layer at 8 x 1,024 tokens and 32 heads, the small
   * pool's (OPT-1.3B AMP LoRA's history: S2 a1 after the output) */
  uint32_t lse = tape_new(&R->tp, T * a * 4);
  tape_also_saves(&R->tp, o, lse);
  rel(R, lse);
  rel(R, m);
  return o;
}

/* the attention on n1 (T x h, nb bytes an element): its o_proj's output;
 * *held: what it returns beside it (eager's weights, 0 for SDPA) */
uint32_t vl__tr_attention(struct run *R, uint32_t n1, uint64_t nb, uint32_t *held) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, a = R->a, g = R->g, e = R->z->e, h = R->z->h;
  if (vl__tr_deberta_replayed(R)) {
    /* DeBERTa-v3 (share_att_key): train_replay_deberta.c. Its context is
     * DebertaV2Attention.forward's until it returns (*held) */
    uint32_t o = vl__tr_deberta_self(R, n1, nb);
    *held = o;
    return vl__tr_linear(R, o, e, T, h, h, arch->o_bias);
  }
  struct qkv s;
  project(R, n1, nb, &s);
  s.q = qk_norm(R, s.q, a);
  s.k = qk_norm(R, s.k, g);
  if (vl__rope_layer(arch, R->l) && !arch->mla && !R->kv_src) rope_qk(R, &s);
  if (kv_cached(R)) cache_kv(R, &s);
  if (arch->rel_bias && R->l == 0) vl__tr_t5_bias(R); /* after the cache's update */
  if (arch->rel_att) deberta_copies(R, &s);
  uint32_t o;
  if (R->z->eager)
    o = eager(R, &s, held);
  else if (vl__tr_t5_math(R))
    o = vl__tr_t5_sdpa(R, s.q, s.k, s.v); /* T5: its bias as a half mask */
  else if (e == 4 && g < a)
    o = sdpa_math_gqa(R, &s);
  else if (arch->family == VL_FAM_FALCON && g < a && g == 1)
    o = sdpa_math_mqa(R, &s);
  else {
    if (g > 1 && g < a && window_masked(R)) expand_kv(R, &s);
    o = sdpa(R, &s);
    if (s.q32) {
      /* autocast's casts of rotated q and k are the kernel's arguments
       * only: what it does not save goes as it returns (a checkpoint's
       * forward, under no_grad: Gemma-2B AMP LoRA's history) */
      rel(R, s.q);
      rel(R, s.k);
      s.q = s.k = 0;
    }
    if (arch->rope_cat && e == 2) {
      /* q joined by torch.cat is contiguous as (B, heads, s, d), and cuDNN
       * attention writes its output in q's layout: transformers'
       * attn_output.transpose(1, 2).contiguous() (sdpa_attention.py) is then
       * a copy, which o_proj saves beside the output the kernel saves
       * (phi-3-mini: 24 MiB a layer at batch 2 x 2,048; where q comes from
       * elementwise ops on a transposed view, the transpose is already
       * contiguous and o_proj saves the kernel's output itself) */
      uint32_t c = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e, .in = {o}});
      rel(R, o);
      o = c;
    }
  }
  uint32_t y = vl__tr_linear(R, o, e, T, a * R->dv, h, arch->o_bias);
  rel(R, o);
  /* the attention returns: its locals go in the order Python made them
   * (the code object's co_varnames): query_states (rotary's output where
   * it was rebound), key_states, value_states (Gemma-2B AMP's history) */
  rel(R, s.q);
  rel(R, s.q32);
  rel(R, s.k);
  rel(R, s.k32);
  rel(R, s.v);
  rel(R, s.qkv);
  return y;
}
