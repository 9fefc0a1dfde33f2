/* What the caching allocator reserves for transformers' generate(): the
 * allocations of one generate() call, in the order transformers makes them,
 * replayed through the model of PyTorch's caching allocator (caching.c).
 *
 * Why a replay and not a factor: in prefill each layer's key and value
 * (kept in the cache) are carved out of the blocks the previous layer's
 * MLP freed, so each layer's MLP intermediate needs a new segment; in decode
 * each torch.cat of a layer's cache needs a block a little larger than any
 * freed one. On the H200 (bench/results/generate-reserve/) Llama-2-7B
 * at batch 8 x 512 tokens reserved 2.6 GiB over its 15.1 GiB allocated this
 * way: one 86 MiB segment a layer in prefill, then 27 segments of 34 MiB as
 * the caches grew. The sequence below is transformers 5 (modeling_llama.py
 * and its copies, modeling_gpt2.py, cache_utils.py DynamicLayer.update,
 * generation/utils.py _sample) as the allocator history shows it; blocks of
 * 1 MiB or less (the small pool, its own 2 MiB segments) are left out. */
#include "internal.h"
#include "vramledger/alloc.h"
#include "lp.h"
#include "prog.h"

/* rotary on rows x width (its program, lp_attention.c vl__lp_rope: q *
 * cos + rotate_half(q) * sin), the products in the activations' dtype;
 * GPT-NeoX's and Phi-2's partial rotary rotate every element here, as
 * this replay has written it (the program's part is a change of the
 * figures of its own) */
static uint32_t rotary(struct prog *p, uint64_t rows, uint64_t width, uint64_t e) {
  struct lp l;
  uint32_t x = NONE;
  vl__lp_rope(&l, (unsigned)e, (unsigned)e, false);
  return vl__inf_lp(p, &l, &x, &(struct lp_dims){.rows = rows, .I = width}, NULL);
}

struct layer_cache {
  uint32_t k, v;
};

/* One generate() call's shape on one GPU (heads, intermediate and vocab
 * split under tensor parallelism), the bytes of its elements, each
 * layer's cache blocks, and the two fp32 B x V tensors a step keeps into
 * the next one's forward (generation/utils.py _sample's
 * next_token_logits and next_token_scores). */
struct gen {
  struct prog p;
  const struct vl_arch *arch;
  const struct vl_job *job;
  struct vl_arch la; /* arch as its programs are written here (replayed) */
  uint64_t B, P, a, g, d, h, I, V, T;
  uint64_t e, r, kvb, sm; /* activation, residual, cache and softmax element bytes */
  uint64_t workspace;     /* cuBLAS's, made at the prompt's first matmul */
  struct layer_cache *lc;
  uint32_t next_logits, scores;
  /* eager attention's weights, which the decoder layer holds until it
   * returns (its self_attn_weights) */
  uint32_t weights;
};

/* apply_rotary_pos_emb of heads heads of d: rotary on all of each, or
 * where the model joins the rotated part to the rest with torch.cat (Phi,
 * Phi-3, NeoX, StableLM, GLM; rope_cat), on each head's first dr of d and
 * then the cat, a new tensor even when nothing is left to join (phi-3-mini's
 * meta trace of generate(): a q-sized copy after q's rotary,
 * modeling_phi3.py:195) */
static uint32_t rope_heads(struct gen *s, uint64_t heads) {
  const struct vl_arch *arch = s->arch;
  if (!arch->rope_cat) return rotary(&s->p, s->T, heads * s->d, s->e);
  const uint64_t dr = (uint64_t)((double)s->d * arch->rotary_pct) / 2 * 2;
  struct lp l;
  uint32_t x = NONE;
  vl__lp_rope(&l, (unsigned)s->e, (unsigned)s->e, true);
  return vl__inf_lp(&s->p, &l, &x,
                    &(struct lp_dims){.rows = s->T, .I = heads * dr, .h = heads * s->d}, NULL);
}

/* a norm of rows x width (its program, lp_norm.c), the input and the
 * weight in the activations' dtype, outside autocast; its output */
static uint32_t norm(struct gen *s, uint64_t rows, uint64_t width) {
  struct lp l;
  uint32_t x = NONE;
  vl__lp_norm(&l, &s->la, false, (unsigned)s->e, (unsigned)s->e);
  return vl__inf_lp(&s->p, &l, &x, &(struct lp_dims){.rows = rows, .h = width}, NULL);
}

/* arch as this replay writes its parts' programs, where it has not taken
 * up the program's own lines yet (each a change of the figures of its
 * own): OPT's fc1 not letting go of the norm's output and its q unscaled */
static struct vl_arch replayed(const struct vl_arch *arch) {
  struct vl_arch a = *arch;
  a.layer_inline = a.q_scaled = 0;
  return a;
}

/* A token's logits and their processing in _sample: the last position's
 * logits (logits_to_keep=1; then `input`, the head's input, goes), the
 * fp32 copy next_token_logits (the previous step's goes once it is made),
 * the two length processors that make every sequence generate all the new
 * tokens (min_new_tokens: MinLengthLogitsProcessor and
 * MinNewTokensLengthLogitsProcessor, each scores.clone() then
 * torch.where, logits_process.py), the previous step's scores let go, then
 * the logits. Measured as the meta trace of generate(max_new_tokens=N,
 * min_new_tokens=N) lists them (transformers 5.17). */
static void logits(struct gen *s, uint64_t rows_vocab, uint32_t *input) {
  struct prog *p = &s->p;
  uint32_t lg = A(p, rows_vocab * s->e);
  F(p, input);
  uint32_t nl = A(p, rows_vocab * 4);
  F(p, &s->next_logits);
  s->next_logits = nl;
  if (!s->arch->eos) { /* no processor: the scores are the logits themselves
                        * (qwen2-0.5b's config has no eos_token_id: its meta trace) */
    F(p, &lg);
    return;
  }
  uint32_t c1 = A(p, rows_vocab * 4), w1 = A(p, rows_vocab * 4);
  F(p, &c1);
  uint32_t c2 = A(p, rows_vocab * 4), w2 = A(p, rows_vocab * 4);
  F(p, &c2);
  F(p, &w1);
  F(p, &s->scores);
  s->scores = w2;
  F(p, &lg);
}

/* gpt-oss's eager attention from its masked scores s2: the scores joined
 * with each head's sink logit (torch.cat), less their row maximum (the
 * joined logits live to the return), the softmax in their dtype, its
 * slice (a view) @ v; the scores go when attn_weights is reassigned
 * (modeling_gpt_oss.py eager_attention_forward) */
static uint32_t sink_scores(struct gen *s, uint32_t s2, uint32_t rk, uint32_t rv) {
  struct prog *p = &s->p;
  const uint64_t T = s->T, a = s->a, d = s->d, e = s->e;
  const uint64_t rows = s->B * a * s->P, sc1 = rows * (s->P + 1);
  uint32_t cat = A(p, sc1 * e), mx = A(p, rows * (e + 8));
  uint32_t joined = A(p, sc1 * e);
  F(p, &cat);
  F(p, &mx);
  uint32_t probs = A(p, sc1 * s->sm);
  uint32_t sh = e < s->sm ? A(p, (sc1 - rows) * e) : NONE; /* .to(dtype) of the slice */
  F(p, &s2);
  uint32_t o = A(p, T * a * d * e);
  F(p, &sh);
  F(p, &probs);
  F(p, &joined);
  F(p, &rk);
  F(p, &rv);
  return o;
}

/* eager attention: repeat_kv for grouped heads, q @ k^T, + mask, softmax,
 * its cast back, @ v; returns the output */
static uint32_t eager_scores(struct gen *s) {
  struct prog *p = &s->p;
  const uint64_t T = s->T, a = s->a, d = s->d, e = s->e;
  uint32_t rk = NONE, rv = NONE;
  if (s->g < a) { /* repeat_kv */
    rk = A(p, T * a * d * e);
    rv = A(p, T * a * d * e);
  }
  uint64_t sc = s->B * a * s->P * s->P;
  /* matmul(q, k^T) * scaling, + mask: a new tensor each, the one before
   * gone (eager_attention_forward; phi-3-mini's meta trace of generate():
   * three score-sized blocks made, two freed, modeling_phi3.py:158) */
  uint32_t s0 = A(p, sc * e), s1 = A(p, sc * e);
  F(p, &s0);
  uint32_t s2 = A(p, sc * e);
  F(p, &s1);
  if (s->arch->attn_sinks) return sink_scores(s, s2, rk, rv);
  /* softmax (fp32 unless GPT-2's in half): softmax(x, dtype=float32) on
   * half scores converts them first, a copy gone when it returns (aten
   * SoftMax.cpp); `softmax(...).to(dtype)` is one statement, so the scores
   * stay referenced until the cast exists (GPT-2 casts in a statement of
   * its own: no cast there), as the training replay has it */
  uint32_t up = e < s->sm ? A(p, sc * s->sm) : NONE;
  uint32_t s32 = A(p, sc * s->sm);
  F(p, &up);
  uint32_t sh = e < s->sm ? A(p, sc * e) : NONE; /* .to(dtype) */
  /* the statement's fp32 temporary goes, then the scores it rebinds; the
   * weights are the layer's (phi-3-mini's meta trace of generate(): the
   * 256 MiB weights go as the layer returns) */
  if (sh != NONE) {
    F(p, &s32);
    F(p, &s2);
    s->weights = sh;
  } else {
    F(p, &s2);
    s->weights = s32;
  }
  uint32_t o = A(p, T * a * d * e);
  F(p, &rk);
  F(p, &rv);
  return o;
}

/* MLA's keys and values from the cached latent of S tokens: kv_b_proj on
 * it, and the keys joined with the shared rotary key into a new tensor
 * (the values are a view of the projection); both live to the attention's
 * return (modeling_deepseek_v3.py expand_kv) */
static void mla_expand(struct gen *s, uint64_t rows, uint32_t *kvp, uint32_t *key) {
  const struct vl_arch *m = s->arch;
  *kvp = A(&s->p, rows * s->a * (m->qk_nope_dim + m->v_head_dim) * s->e);
  *key = A(&s->p, rows * s->a * (m->qk_nope_dim + m->qk_rope_dim) * s->e);
}

/* MLA in prefill (modeling_deepseek_v3.py DeepseekV3Attention): q through
 * its low rank and norm, the compressed latent and its norm, rotary on q's
 * and the shared key's rotary parts, the latent and the rotary key copied
 * into the cache, q joined from its parts, the keys and values expanded
 * from the cache, SDPA, its transposed copy, o_proj */
static uint32_t mla_prefill_attention(struct gen *s, struct layer_cache *lc, uint32_t n1) {
  struct prog *p = &s->p;
  const struct vl_arch *arch = s->arch;
  const uint64_t T = s->T, a = s->a, e = s->e;
  const uint64_t c = arch->kv_lora_rank, rd = arch->qk_rope_dim, qd = arch->qk_nope_dim + rd;
  uint32_t q;
  if (arch->q_lora_rank) {
    uint32_t qa = A(p, T * arch->q_lora_rank * e);
    uint32_t qn = norm(s, T, arch->q_lora_rank);
    F(p, &qa);
    q = A(p, T * a * qd * e);
    F(p, &qn);
  } else {
    q = A(p, T * a * qd * e);
  }
  uint32_t kva = A(p, T * (c + rd) * e);
  uint32_t kvn = norm(s, T, c);
  uint32_t qr = rotary(p, T, a * rd, e), kr = rotary(p, T, rd, e);
  lc->k = A(p, T * c * s->kvb);
  lc->v = A(p, T * rd * s->kvb);
  F(p, &kvn);
  F(p, &kr);
  uint32_t qs = A(p, T * a * qd * e); /* torch.cat((q_pass, q_rot)) */
  F(p, &qr);
  uint32_t kvp, key;
  mla_expand(s, T, &kvp, &key);
  uint32_t o = A(p, T * a * arch->v_head_dim * e);
  uint32_t o2 = A(p, T * a * arch->v_head_dim * e); /* transpose(1, 2).contiguous() */
  F(p, &o);
  uint32_t op = A(p, T * s->h * e);
  F(p, &o2);
  F(p, &key);
  F(p, &kvp);
  F(p, &qs);
  F(p, &q);
  F(p, &kva);
  F(p, &n1);
  return op;
}

/* q, k and v of n1 (the program, lp_attention.c vl__lp_qkv: three
 * linears, or the fused projection's views, NONE here, with *qkv the
 * projection, which the attention holds to its return) */
static void qkv_program(struct gen *s, uint32_t n1, uint32_t *q, uint32_t *k, uint32_t *v,
                        uint32_t *qkv) {
  struct lp l;
  uint32_t t[LP_MAX];
  vl__lp_qkv(&l, &s->la, (unsigned)s->e, false, false, false);
  const struct lp_dims d = {
      .rows = s->T, .rows_k = s->T, .I = s->a * s->d, .J = s->g * s->d, .h = s->h};
  vl__inf_lp(&s->p, &l, &n1, &d, t);
  *q = t[l.out[0]], *k = t[l.out[1]], *v = t[l.out[2]];
  *qkv = l.held ? t[l.held] : NONE;
}

/* a layer's attention in prefill, from its norm's output n1 (freed here) to
 * the output projection's, which it returns; the key and the value go into
 * the layer's cache */
static uint32_t prefill_attention(struct gen *s, struct layer_cache *lc, uint32_t n1) {
  struct prog *p = &s->p;
  const struct vl_arch *arch = s->arch;
  const uint64_t T = s->T, a = s->a, g = s->g, d = s->d, e = s->e;
  if (arch->mla) return mla_prefill_attention(s, lc, n1);
  const bool rope = vl__rope_layer(arch, (uint64_t)(lc - s->lc));
  uint32_t q, k, v, qkv = NONE;
  if (arch->qk_norm) {
    /* Qwen3: q_norm(q_proj(x)), then k's, then v_proj; each projection
     * goes once its norm exists (modeling_qwen3.py Qwen3Attention) */
    uint32_t qp = A(p, T * a * d * e);
    q = norm(s, T * a, d);
    F(p, &qp);
    uint32_t kp = A(p, T * g * d * e);
    k = norm(s, T * g, d);
    F(p, &kp);
    v = A(p, T * g * d * e);
  } else {
    qkv_program(s, n1, &q, &k, &v, &qkv);
  }
  if (rope) { /* apply_rotary_pos_emb returns both, then
                                                          the old ones go */
    uint32_t qe = rope_heads(s, a), ke = rope_heads(s, g);
    F(p, &q);
    F(p, &k);
    q = qe;
    k = ke;
  }
  /* DynamicLayer.update: torch.cat onto an empty tensor copies the key
   * and the value into the cache; the projections' go when key_states
   * and value_states are reassigned to the cache's */
  lc->k = A(p, T * g * d * s->kvb);
  lc->v = A(p, T * g * d * s->kvb);
  F(p, &k);
  F(p, &v);
  const bool eager = s->job->attention == VL_ATTN_EAGER;
  uint32_t o = eager ? eager_scores(s) : A(p, T * a * d * e);
  /* transpose(1, 2).contiguous(): a copy, except where SDPA's kernel wrote
   * its output in q's layout and q is a rotated view of the projection
   * (the rotary's elementwise ops keep its (B, s, heads, d) strides; the
   * meta trace of Llama's generate() has no copy); q joined by torch.cat
   * is contiguous as (B, heads, s, d) */
  if (eager || !rope || arch->rope_cat) {
    uint32_t o2 = A(p, T * a * d * e);
    F(p, &o);
    o = o2;
  }
  uint32_t op = A(p, T * s->h * e);
  F(p, &o);
  F(p, &qkv); /* the attention's locals, at its return; the layer's norm output
               * (its hidden_states) with them (phi-3-mini's meta trace) */
  F(p, &q);
  F(p, &n1);
  return op;
}

/* a dense MLP of width I on `rows` rows of the norm's output n2 (the
 * caller's), a MoE block's shared experts and gpt-oss's experts too: its
 * program (lp_mlp.c) outside autocast; returns the down projection's
 * output */
static uint32_t dense_mlp(struct gen *s, uint32_t n2, uint64_t rows, uint64_t I) {
  struct lp l;
  vl__lp_mlp(&l, &s->la, false, (unsigned)s->e, false);
  const struct lp_dims d = {.rows = rows, .I = I, .h = s->h};
  return vl__inf_lp(&s->p, &l, &n2, &d, NULL);
}

/* transformers 5's experts as grouped matmuls over the S = T * k rows
 * sorted by expert (integrations/moe.py grouped_mm_experts_forward): the
 * gathered rows, gate_up's output and its masked_fill, act(gate) * up, the
 * down projection and its masked_fill, the product with the routing
 * weights (fp32 where the router keeps them so: Mixtral, DeepSeek), its rows
 * put back in order, their sum over k and its cast back; the meta trace of
 * DeepSeek-V3's generate() in this order */
static uint32_t grouped_experts(struct gen *s, uint64_t I) {
  struct prog *p = &s->p;
  const uint64_t k = s->arch->experts_per_token ? s->arch->experts_per_token : 1;
  const uint64_t S = s->T * k, h = s->h, e = s->e;
  uint32_t rows = A(p, S * h * e);
  uint32_t gu = A(p, S * 2 * I * e), gm = A(p, S * 2 * I * e);
  F(p, &gu);
  uint32_t act = A(p, S * I * e), pr = A(p, S * I * e);
  F(p, &act);
  F(p, &gm);
  uint32_t dn = A(p, S * h * e);
  F(p, &pr);
  uint32_t dm = A(p, S * h * e);
  F(p, &dn);
  const uint64_t wb = s->arch->router_fp32 ? 4 : e; /* the routing weights' dtype */
  uint32_t wo = A(p, S * h * wb), back = A(p, S * h * wb);
  F(p, &wo);
  uint32_t sum = A(p, s->T * h * wb), out = wb != e ? A(p, s->T * h * e) : sum;
  F(p, &rows);
  F(p, &dm);
  F(p, &back);
  if (out != sum) F(p, &sum);
  return out;
}

/* a decoding step's routed experts: generate() swaps grouped_mm for
 * batched_mm while it decodes (generation/utils.py
 * _optimize_model_for_decode), which gathers each (token, expert) pair's
 * own copy of its expert's weights (integrations/moe.py
 * batched_mm_experts_forward: gate_up_proj[expert_ids], S x 2I x h, then
 * down_proj[expert_ids] made before the first goes) and multiplies them in
 * one bmm each; the meta trace of DeepSeek-V3's generate() in this order */
static void batched_experts(struct gen *s, uint64_t I) {
  struct prog *p = &s->p;
  const uint64_t k = s->arch->experts_per_token ? s->arch->experts_per_token : 1;
  const uint64_t S = s->B * k, h = s->h, e = s->e, wb = s->arch->router_fp32 ? 4 : e;
  uint32_t rows = A(p, S * h * e), ids = A(p, S * 8);
  uint32_t wgu = A(p, S * 2 * I * h * e), gu = A(p, S * 2 * I * e);
  uint32_t ag = A(p, S * I * e), act = A(p, S * I * e);
  F(p, &ag);
  F(p, &gu);
  uint32_t wd = A(p, S * h * I * e);
  F(p, &wgu);
  uint32_t dn = A(p, S * h * e);
  F(p, &act);
  uint32_t wo = A(p, S * h * wb), sum = A(p, s->B * h * wb),
           out = wb != e ? A(p, s->B * h * e) : NONE;
  uint32_t done[] = {rows, ids, wd, dn, wo, sum, out};
  for (size_t i = 0; i < sizeof done / sizeof done[0]; i++)
    F(p, &done[i]);
}

/* the sparse MoE block: the shared experts on every token (DeepSeek,
 * Qwen2-MoE), then the routed experts in turn, each a gated MLP of
 * moe_intermediate_size on its tokens; returns final_hidden_states
 * (index_add_ into it; transformers 5's experts loop) */
static uint32_t moe_mlp(struct gen *s, uint32_t n2) {
  struct prog *p = &s->p;
  const struct vl_arch *arch = s->arch;
  const uint64_t h = s->h, e = s->e, t = s->job->tp ? s->job->tp : 1;
  const uint64_t I =
      vl__div_ceil(arch->moe_intermediate ? arch->moe_intermediate : arch->intermediate, t);
  uint64_t Te =
      vl__div_ceil(s->T * (arch->experts_per_token ? arch->experts_per_token : 1), arch->experts);
  uint32_t mo;
  if (arch->gate_clamp) { /* gpt-oss: GptOssExperts' own loop over the experts hit */
    mo = A(p, s->T * h * e);
    for (uint64_t x = 0; x < arch->experts && !p->failed; x++) {
      uint32_t cur = A(p, Te * h * e);
      uint32_t dn = dense_mlp(s, NONE, Te, I);
      uint32_t wt = A(p, Te * h * e); /* * routing weight */
      F(p, &dn);
      F(p, &wt);
      F(p, &cur);
    }
  } else {
    mo = grouped_experts(s, I);
  }
  if (arch->shared_intermediate) { /* + shared_experts(residuals) */
    uint32_t sh = dense_mlp(s, n2, s->T, vl__div_ceil(arch->shared_intermediate, t));
    uint32_t sum = A(p, s->T * h * e);
    F(p, &mo);
    F(p, &sh);
    mo = sum;
  }
  return mo;
}

/* prefill: the embeddings, the rotary tables, eager's 4-D causal mask,
 * every layer, the final norm and the last position's logits */
/* the rotary embedding's cos and sin (B x s x d in the activations'
 * dtype), made in fp32 first: freqs = inv_freq @ position_ids (the
 * prompt's first matmul, which gives cuBLAS its workspace), cat(freqs,
 * freqs), cos() and sin() each times attention_scaling, then cast
 * (modeling_llama.py LlamaRotaryEmbedding.forward; the meta trace of
 * generate() lists them in this order) */
static void rotary_tables(struct gen *s, uint32_t *cos, uint32_t *sin) {
  struct prog *p = &s->p;
  const uint64_t n = s->T * s->d;
  uint32_t freqs = A(p, n / 2 * 4);
  (void)A(p, s->workspace);
  uint32_t emb = A(p, n * 4), c0 = A(p, n * 4), c1 = A(p, n * 4);
  F(p, &c0);
  uint32_t s0 = A(p, n * 4), s1 = A(p, n * 4);
  F(p, &s0);
  *cos = A(p, n * s->e);
  *sin = A(p, n * s->e);
  F(p, &freqs);
  F(p, &emb);
  F(p, &c1);
  F(p, &s1);
}

/* a residual branch's output y before the add (taken over): Gemma 2/3's
 * and OLMo 2's norm after it (gemma-2-2b's meta trace of generate(): its
 * fp32 blocks, the cast, then y goes), Granite's residual_multiplier (a
 * new tensor) */
static uint32_t branch_out(struct gen *s, uint32_t y) {
  const struct vl_arch *arch = s->arch;
  if (!arch->sandwich_norm && !arch->post_norm && !arch->resid_scaled) return y;
  uint32_t n = arch->resid_scaled ? A(&s->p, s->T * s->h * s->e) : norm(s, s->T, s->h);
  F(&s->p, &y);
  return n;
}

static void prefill(struct gen *s) {
  struct prog *p = &s->p;
  const struct vl_arch *arch = s->arch;
  const uint64_t T = s->T, h = s->h, e = s->e, r = s->r;
  /* the embeddings' output: the model's forward keeps it as inputs_embeds
   * until the stack returns, and each layer's input while the layer runs
   * (the loop's hidden_states; modeling_llama.py LlamaModel.forward: the
   * meta trace of generate() frees them there) */
  uint32_t emb = A(p, T * h * r);
  if (arch->embed_scaled) { /* Gemma's * sqrt(h), Granite's multiplier: the
                             * product; the lookup goes (gemma-2-2b's meta
                             * trace of generate()) */
    uint32_t sc = A(p, T * h * r);
    F(p, &emb);
    emb = sc;
  }
  uint32_t hs = emb, cos = NONE, sin = NONE, mask = NONE;
  if (arch->rotary_pct > 0) {
    rotary_tables(s, &cos, &sin);
  } else {
    (void)A(p, s->workspace); /* the first matmul's */
  }
  if (s->job->attention == VL_ATTN_EAGER) {
    /* masking_utils.py builds it as a bool B x s x s first, then
     * torch.where's in the model's dtype; the bool goes after (phi-3-mini's
     * meta trace of generate(): masking_utils.py:57, :604) */
    uint32_t mb = A(p, s->B * s->P * s->P);
    mask = A(p, s->B * s->P * s->P * e);
    F(p, &mb);
  }
  /* OLMo 2 norms after each branch only: the branch reads the layer's
   * input itself (NONE: no block of the branch's own) */
  const bool pre = !arch->post_norm;
  for (uint64_t l = 0; l < arch->layers && !p->failed; l++) {
    uint32_t op = branch_out(s, prefill_attention(s, &s->lc[l], pre ? norm(s, T, h) : NONE));
    uint32_t h1 = A(p, T * h * r); /* residual + attention */
    F(p, &op);
    uint32_t n2 = pre ? norm(s, T, h) : NONE;
    const bool sparse = arch->experts && l >= arch->dense_layers;
    uint32_t mo = branch_out(s, sparse ? moe_mlp(s, n2) : dense_mlp(s, n2, T, s->I));
    F(p, &n2);
    uint32_t out = A(p, T * h * r); /* residual + MLP */
    F(p, &h1);
    F(p, &mo);
    F(p, &s->weights); /* the layer returns */
    if (hs != emb) F(p, &hs);
    hs = out;
  }
  F(p, &mask);
  uint32_t fn = norm(s, T, h);
  F(p, &hs);
  F(p, &emb);
  F(p, &cos); /* the model's forward returns (position_embeddings) before */
  F(p, &sin); /* the head runs (qwen2-0.5b's meta trace of generate()) */
  logits(s, s->B * s->V, &fn);
}

/* decode: each step's cache growth (torch.cat: the new block, then the
 * old one freed) and its logits; the rest of a step is small. Long
 * generations are replayed in steps of several tokens (at most 2^12
 * events). */
static void decode(struct gen *s) {
  struct prog *p = &s->p;
  const uint64_t layers = s->arch->layers;
  uint64_t steps = s->job->new_tokens ? s->job->new_tokens - 1 : 0; /* the last token is not fed */
  uint64_t stride = 1;
  while (steps / stride * (layers ? layers : 1) * 4 > (1ull << 12))
    stride *= 2;
  const struct vl_arch *arch = s->arch;
  for (uint64_t st = stride; st <= steps && !p->failed; st += stride) {
    const uint64_t rows = s->B * (s->P + st);
    /* MLA caches the latent and the rotary key, and expands both into
     * every head's keys and values at every layer of every step */
    uint64_t kb = arch->mla ? rows * arch->kv_lora_rank * s->kvb : rows * s->g * s->d * s->kvb;
    uint64_t vb = arch->mla ? rows * arch->qk_rope_dim * s->kvb : kb;
    for (uint64_t l = 0; l < layers && !p->failed; l++) {
      uint32_t nk = A(p, kb);
      F(p, &s->lc[l].k);
      s->lc[l].k = nk;
      uint32_t nv = A(p, vb);
      F(p, &s->lc[l].v);
      s->lc[l].v = nv;
      if (arch->mla) {
        uint32_t kvp, key;
        mla_expand(s, rows, &kvp, &key);
        F(p, &key);
        F(p, &kvp);
      }
      if (arch->experts && !arch->gate_clamp && l >= arch->dense_layers) /* (gpt-oss: its loop) */
        batched_experts(s, vl__div_ceil(arch->moe_intermediate, s->job->tp ? s->job->tp : 1));
    }
    uint32_t none = NONE;
    logits(s, s->B * s->V, &none);
  }
}

/* n tensors of w (split under tensor parallelism t), wb bytes an element */
static void make_weights(struct gen *s, const struct vl_tensor *w, uint64_t n, uint64_t wb,
                         uint64_t t) {
  const uint64_t one = vl__tp_split(w, t, w->rows * w->cols);
  for (uint64_t k = 0; k < n && !s->p.failed; k++)
    (void)A(&s->p, one * wb);
}

/* a dense model's weights made as its modules are (vl__count_in): the
 * embeddings, each layer's own, then the rest */
static void weights_by_layer(struct gen *s, const struct vl_inventory *inv, uint64_t wb,
                             uint64_t t) {
  const int L = (int)s->arch->layers;
  for (int w = VL_BEFORE_LAYERS; w <= L; w++)
    for (int i = 0; i < inv->n; i++)
      make_weights(s, &inv->t[i], vl__count_in(s->arch, &inv->t[i], w < L ? w : VL_AFTER_LAYERS),
                   wb, t);
}

/* the weights tensor kind by tensor kind (a sparse layer's experts: one
 * 3-D parameter) */
static void weights_by_tensor(struct gen *s, const struct vl_inventory *inv, uint64_t wb,
                              uint64_t t) {
  const struct vl_arch *arch = s->arch;
  for (int i = 0; i < inv->n && !s->p.failed; i++) {
    const struct vl_tensor *w = &inv->t[i];
    uint64_t one = vl__tp_split(w, t, w->rows * w->cols), n = w->count;
    uint64_t fused = vl__expert_part(arch, w), sparse = arch->layers - arch->dense_layers;
    if (fused == UINT64_MAX) continue; /* w3: in w1's gate_up_proj */
    if (fused && sparse) {
      one *= fused * (n / sparse);
      n = sparse;
    }
    for (uint64_t k = 0; k < n && !s->p.failed; k++)
      (void)A(&s->p, one * wb);
  }
}

vl_status vl__infer_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl_job *job, uint64_t wb, uint64_t e, uint64_t r,
                           uint64_t kvb, uint64_t workspace, bool expandable,
                           struct vl_cache_stats *out, struct vl_err *err) {
  struct vl_cache_conf conf = {0, 0, 0, expandable};
  struct vl__policy pol;
  vl__policy_get(job->precision, &pol);
  const uint64_t t = job->tp ? job->tp : 1;
  struct gen s = {.p = {NULL, false},
                  .next_logits = NONE,
                  .scores = NONE,
                  .weights = NONE,
                  .arch = arch,
                  .job = job,
                  .B = job->batch,
                  .P = job->seq,
                  .a = vl__div_ceil(arch->heads, t),
                  .g = vl__div_ceil(arch->kv_heads, t),
                  .d = arch->head_dim,
                  .h = arch->hidden,
                  .I = vl__div_ceil(arch->intermediate, t),
                  .V = vl__div_ceil(arch->vocab, t),
                  .T = job->batch * job->seq,
                  .e = e,
                  .r = r,
                  .kvb = kvb,
                  .sm = vl__softmax_bytes(arch, pol.autocast, e)};
  s.la = replayed(arch);
  if (vl_cache_new(&conf, &s.p.c) != VL_OK) return vl__fail(err, VL_ENOMEM, "out of memory");
  s.lc = vl_calloc(arch->layers ? arch->layers : 1, sizeof *s.lc);
  if (!s.lc) {
    vl_cache_destroy(s.p.c);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }
  /* the weights (cuBLAS's workspace comes with the prompt's first matmul):
   * a dense model's layer by layer, as its modules are made (its blocks of
   * 1 to 10 MiB share the large pool's 20 MiB segments in that order, and
   * the cache's blocks fill what they leave: qwen2-0.5b's meta trace of
   * generate()) */
  if (arch->experts)
    weights_by_tensor(&s, inv, wb, t);
  else
    weights_by_layer(&s, inv, wb, t);
  if (arch->buffer_bytes) (void)A(&s.p, arch->buffer_bytes); /* buffers that go with the model */
  s.workspace = workspace;
  prefill(&s);
  decode(&s);
  vl_cache_stats(s.p.c, out);
  bool failed = s.p.failed;
  vl_free(s.lc);
  vl_cache_destroy(s.p.c);
  if (failed) return vl__fail(err, VL_ENOMEM, "out of memory replaying generate()'s allocations");
  return VL_OK;
}
