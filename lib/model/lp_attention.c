/* Attention's parts as layer programs (lp.h): q, k and v (a fused
 * projection's views or three linears, cross-attention's k and v of the
 * encoder's output), eager attention's scores made probabilities (Gemma
 * 2's soft cap, the mask, gpt-oss's sink logits, softmax in fp32 or the
 * scores' dtype, the cast back, dropout) and rotary (q * cos +
 * rotate_half(q) * sin, on all of each head or GPT-NeoX's part of it).
 * The replay (train_replay_attention.c) runs them through vl__tr_lp, the
 * time model (steptime.c) prices them; DeepSeek-V2's latent attention,
 * the KV cache's copies, repeat_kv, the matmuls and SDPA's kernels are
 * still written in each. */
#include "internal.h"
#include "lp.h"
#include "tape.h"

#define OP(...) vl__lp_emit(p, (struct lp_op){__VA_ARGS__})

/* q, k and v of LP_IN (rows x h; e bytes an element). A fused
 * projection (GPT-2's c_attn, GPT-NeoX, Phi-3): one linear, q, k and v
 * its views, its output a local until the attention returns (p->held).
 * Else three linears (cross: k and v of the encoder's output, the keys'
 * rows, its tokens B x Pk: --seq, the queries the decoder's), q scaled
 * once made where the model scales it (OPTAttention.forward:
 * q_proj(hidden_states) * scaling, a new tensor); split: x.view(B, s, heads, d).transpose(1, 2) as
 * eager attention's matmul sees it, with more than one sequence a view that contiguous() will copy
 * (aten LinearAlgebra.cpp _matmul_impl: reshape); one sequence folds as a view, and SDPA's kernels
 * take the strides as they are: the linear's output itself (OPT's eager q, k and v:
 * s-opt350-bf16-adamw-eager-ckpt-b16s2048's meta trace, modeling_opt.py:84
 * and :91). The time model counts autocast's casts of the input from the
 * linears reading LP_IN (vl__lp_input_linears) */
void vl__lp_qkv(struct lp *p, const struct vl_arch *arch, unsigned e, bool cross, bool split,
                bool transposed) {
  vl__lp_begin(p, e, false, LP_COLS_H);
  const uint8_t eb = (uint8_t)e;
  const struct lp_op lin = {
      .kind = LP_LINEAR, .in = {LP_IN}, .in_cols = LP_COLS_H, .ob = eb, .bias = arch->qkv_bias};
  if (arch->fused_qkv) {
    struct lp_op f = lin;
    f.cols = LP_COLS_IJJ;
    uint8_t qkv = vl__lp_emit(p, f); /* (rows, (a + 2g) d) */
    /* NeoX's .view(B, s, heads, 3 d).transpose(1, 2) before the chunk: the
     * pieces' joined gradient, heads first, copied back to rows */
    const uint8_t whole = qkv;
    if (arch->qkv_heads_first)
      qkv = OP(.kind = LP_VIEW, .in = {qkv}, .cols = LP_COLS_IJJ, .ob = eb, .slice = true);
    /* GPT-2's split, NeoX's chunk, ModernBERT's unbind: pieces; Phi-3's
     * slices, q's and k's then transposed for rotary */
    const bool sl = arch->qkv_sliced, pc = !sl;
    p->out[0] =
        OP(.kind = LP_VIEW, .in = {qkv}, .cols = LP_COLS_I, .ob = eb, .slice = sl, .piece = pc);
    p->out[1] =
        OP(.kind = LP_VIEW, .in = {qkv}, .cols = LP_COLS_J, .ob = eb, .slice = sl, .piece = pc);
    p->out[2] =
        OP(.kind = LP_VIEW, .in = {qkv}, .cols = LP_COLS_J, .ob = eb, .slice = sl, .piece = pc);
    for (int i = 0; i < 2 && transposed && sl; i++)
      p->out[i] = OP(.kind = LP_VIEW, .in = {p->out[i]}, .cols = i ? LP_COLS_J : LP_COLS_I,
                     .ob = eb, .slice = true, .drop = {p->out[i]});
    if (qkv != whole) vl__lp_then_drop(p, qkv);
    p->held = whole;
    return;
  }
  const uint8_t src = cross ? OP(.kind = LP_INPUT) : LP_IN;
  struct lp_op lq = lin, lk = lin;
  lq.cols = LP_COLS_I;
  lk.in[0] = src, lk.cols = LP_COLS_J, lk.krows = true;
  uint8_t q = vl__lp_emit(p, lq); /* q_proj  (rows, a d) */
  if (arch->q_scaled)
    q = OP(.kind = LP_EW, .in = {q}, .cols = LP_COLS_I, .ob = eb, .drop = {q}); /* * scaling */
  /* q_proj(x).view(hidden_shape).transpose(1, 2) (modeling_llama.py):
   * the copy of its gradient comes right before q_proj's backward */
  if (transposed)
    q = OP(.kind = LP_VIEW, .in = {q}, .cols = LP_COLS_I, .ob = eb, .slice = true, .drop = {q});
  uint8_t k = vl__lp_emit(p, lk); /* k_proj  (rows_k, g d) */
  if (transposed)
    k = OP(.kind = LP_VIEW, .in = {k}, .cols = LP_COLS_J, .ob = eb, .krows = true, .slice = true,
           .drop = {k});
  uint8_t v = vl__lp_emit(p, lk); /* v_proj  (rows_k, g d) */
  if (split) {
    q = OP(.kind = LP_VIEW, .in = {q}, .cols = LP_COLS_I, .ob = eb, .drop = {q});
    k = OP(.kind = LP_VIEW, .in = {k}, .cols = LP_COLS_J, .ob = eb, .krows = true, .drop = {k});
    v = OP(.kind = LP_VIEW, .in = {v}, .cols = LP_COLS_J, .ob = eb, .krows = true, .drop = {v});
  }
  p->out[0] = q, p->out[1] = k, p->out[2] = v;
}

/* gpt-oss: the softmax runs on the scores joined with each head's sink
 * logit (rows x (keys + 1)), less their row maximum (its indices saved
 * for the backward, a row's xb + 8 bytes); the joined logits stay
 * referenced until the attention returns (p->held), the scores until the
 * probabilities' cast (modeling_gpt_oss.py eager_attention_forward) */
static uint8_t sinks(struct lp *p, uint8_t s2, uint8_t xb) {
  uint8_t cat = OP(.kind = LP_EW, .in = {s2}, .cols = LP_COLS_H1, .ob = xb);
  uint8_t mx = OP(.kind = LP_EW, .in = {cat}, .cols = LP_COLS_ROW, .ob = (uint8_t)(xb + 8),
                  .save_out = true);
  uint8_t j = OP(.kind = LP_EW, .in = {cat, mx}, .cols = LP_COLS_H1, .ob = xb, .drop = {cat, mx});
  p->held = j;
  return j;
}

/* Eager attention from its scaled scores (LP_IN: rows = batch x heads x
 * queries, h = keys, e bytes an element; taken over) to the weights it
 * returns with its output (the program's last tensor, which the decoder
 * layer holds until it returns). masked: the causal mask or T5's position
 * bias (the part's second input) is added (the 4-D mask in the model's
 * dtype: the sum in me bytes, fp32 under autocast: x-qwen05-amp-adamw-
 * eager-ckpt-b8s2048's history); masked2: T5's decoder's causal mask added
 * after its bias;
 * sm: softmax's dtype (vl__softmax_bytes); tb: the dtype the weights are
 * cast to (.to(query.dtype), GPT-2's .type(value.dtype)).
 *
 * The time model prices the mask add, the soft cap's three kernels (after
 * the mask add: late), softmax as one kernel reading e bytes (the replay
 * converts half scores to fp32 first: unpriced), the cast back wherever sm
 * is not e (the replay casts only where tb is narrower than sm, else the
 * weights are the probabilities: the line prices what the time model
 * does), and dropout, all on rows x keys (gpt-oss's sink column apart). */
void vl__lp_scores(struct lp *p, const struct vl_arch *arch, bool masked, bool masked2, unsigned e,
                   unsigned me, unsigned sm, unsigned tb) {
  vl__lp_begin(p, e, false, LP_COLS_H);
  const uint8_t eb = (uint8_t)e;
  uint8_t s = LP_IN;
  if (arch->attn_softcap > 0) {
    /* Gemma 2: scores / cap, tanh (saves its output), * cap
     * (modeling_gemma2.py eager_attention_forward) */
    const bool late = masked;
    uint8_t c0 = OP(.kind = LP_EW, .in = {s}, .cols = LP_COLS_H, .ob = eb, .drop = {s},
                    .price = LP_PRICE_EW, .pcols = LP_COLS_H, .late = late, .bytes = 6.0 * e);
    uint8_t c1 =
        OP(.kind = LP_EW, .in = {c0}, .cols = LP_COLS_H, .ob = eb, .save_out = true, .drop = {c0},
           .price = LP_PRICE_EW, .pcols = LP_COLS_H, .late = late, .bytes = 6.0 * e);
    s = OP(.kind = LP_EW, .in = {c1}, .cols = LP_COLS_H, .ob = eb, .drop = {c1},
           .price = LP_PRICE_EW, .pcols = LP_COLS_H, .late = late, .bytes = 6.0 * e);
  }
  if (masked) { /* + the causal mask; T5's position bias (the part's second input) */
    const uint8_t bias = arch->rel_bias ? OP(.kind = LP_INPUT) : 0;
    s = OP(.kind = LP_EW, .in = {s, bias}, .cols = LP_COLS_H, .ob = (uint8_t)me, .pass = TAPE_ADD,
           .drop = {s}, .price = LP_PRICE_EW, .pcols = LP_COLS_H, .bytes = 3.0 * e);
  }
  if (masked2) /* T5's decoder adds its causal mask after the bias, a second sum
                * (modeling_t5.py eager_attention_forward; the time model prices one) */
    s = OP(.kind = LP_EW, .in = {s}, .cols = LP_COLS_H, .ob = (uint8_t)me, .pass = TAPE_ADD,
           .drop = {s});
  const uint8_t s2 = s, xb = p->op[s2].ob ? p->op[s2].ob : eb;
  const uint8_t x = arch->attn_sinks ? sinks(p, s2, xb) : s2;
  const uint8_t xc = arch->attn_sinks ? LP_COLS_H1 : LP_COLS_H;
  /* softmax(x, dtype=float32) on half scores converts them first (aten
   * SoftMax.cpp softmax: input.toType(dtype)), a copy freed when it
   * returns (opt13-bf16-adam-eager's allocator history: 128 MiB a layer,
   * bench/results/reserved/history) */
  const uint8_t up = xb < sm ? OP(.kind = LP_CAST, .in = {x}, .cols = xc, .ob = (uint8_t)sm) : 0;
  /* `attn_weights = softmax(attn_weights, dtype=float32).to(dtype)`: the
   * scores stay referenced until the cast is made (one statement); GPT-2
   * casts in a statement of its own, so its scores go first */
  const bool first = arch->softmax_native && !arch->attn_sinks;
  /* its backward on CUDA makes the input's gradient, then `tmp = grad *
   * output` of the same size, freed as it returns (aten/src/ATen/native/
   * cuda/SoftMax.cu softmax_backward_cuda_out; OPT-1.3B bf16 eager's
   * history: a third fp32 block of the scores' size a layer, unseen by a
   * dry run on meta) */
  uint8_t s32 = OP(.kind = LP_EW, .in = {up ? up : x}, .cols = xc, .ob = (uint8_t)sm,
                   .save_out = true, .tmpb = (uint8_t)sm, .price = LP_PRICE_SOFTMAX,
                   .pcols = LP_COLS_H, .bytes = (double)e + sm);
  if (up) vl__lp_then_drop(p, up);
  if (first) vl__lp_then_drop(p, s2);
  /* .to(query.dtype): a no-op where that is the probabilities' dtype
   * (rotary's fp32 query under autocast; GPT-2's half softmax without
   * autocast) */
  const bool cast = tb < sm;
  uint8_t sh = OP(.kind = cast ? LP_CAST : LP_REF, .in = {s32}, .cols = cast ? LP_COLS_H : xc,
                  .ob = (uint8_t)(cast ? tb : sm), .price = sm != e ? LP_PRICE_CAST : LP_UNPRICED,
                  .pcols = LP_COLS_H, .bytes = sm != e ? (double)sm + e : 0);
  if (!first) vl__lp_then_drop(p, s2);
  vl__lp_then_drop(p, s32);
  if (arch->attn_dropout > 0) /* its mask a byte a score */
    OP(.kind = LP_DROPOUT, .in = {sh}, .cols = p->op[sh].cols, .ob = p->op[sh].ob, .maskb = 1,
       .price = LP_PRICE_EW, .pcols = LP_COLS_H, .bytes = 2.0 * e + 1);
}

/* q * cos + rotate_half(q) * sin (rotate_half: cat(-x2, x1)) on the I
 * elements of x (e bytes an element); cos and sin have the residual
 * stream's dtype (the rotary embedding's output is cast to its input's,
 * the hidden states: fp32 under autocast), so the products and the sum
 * are in the wider of the two, w bytes (the AMP histories:
 * qwen05-amp-adamw-sdpa, pythia160-ampfp16-adamw). The time model prices
 * each line at 3 e bytes an element (the products by cos and sin as
 * broadcasts, the sum as a plain elementwise kernel) and -x2 and cat at
 * 2 e on the strided halves, in the activations' dtype */
static uint8_t rotary(struct lp *p, uint8_t x, unsigned e, unsigned w) {
  const uint8_t eb = (uint8_t)e, wb = (uint8_t)w;
  /* the products by cos and sin broadcast them over the heads (ATen's
   * unvectorised kernel); rotate_half's neg and cat read strided halves */
  uint8_t t1 = OP(.kind = LP_EW, .in = {x}, .cols = LP_COLS_I, .ob = wb, .price = LP_PRICE_BCAST,
                  .pcols = LP_COLS_I, .bytes = 3.0 * e); /* x * cos  (I) */
  /* x[..., : d / 2] and x[..., d / 2 :]: each slice's backward a zero
   * tensor of x's size, summed in place with x's other gradients (the
   * meta dry run of llama-3-8b bf16 checkpointed: 1,028 blocks of 64 MiB
   * in a backward, as its H100 history) */
  uint8_t x1 = OP(.kind = LP_VIEW, .in = {x}, .cols = LP_COLS_I2, .ob = eb, .slice = true);
  uint8_t x2 = OP(.kind = LP_VIEW, .in = {x}, .cols = LP_COLS_I2, .ob = eb, .slice = true);
  uint8_t neg =
      OP(.kind = LP_EW, .in = {x2}, .cols = LP_COLS_I2, .ob = eb, .drop = {x2},
         .price = LP_PRICE_STRIDED, .pcols = LP_COLS_I2, .bytes = 2.0 * e); /* -x2  (I / 2) */
  uint8_t cat = OP(.kind = LP_EW, .in = {neg, x1}, .cols = LP_COLS_I, .ob = eb, .pass = TAPE_SLICES,
                   .drop = {neg, x1}, .price = LP_PRICE_STRIDED, .pcols = LP_COLS_I,
                   .bytes = 2.0 * e); /* cat(-x2, x1)  (I) */
  uint8_t t3 = OP(.kind = LP_EW, .in = {cat}, .cols = LP_COLS_I, .ob = wb, .drop = {cat},
                  .price = LP_PRICE_BCAST, .pcols = LP_COLS_I,
                  .bytes = 3.0 * e); /* rotate_half(x) * sin  (I) */
  return OP(.kind = LP_EW, .in = {t1, t3}, .cols = LP_COLS_I, .ob = wb, .pass = TAPE_ADD,
            .drop = {t1, t3}, .price = LP_PRICE_EW, .pcols = LP_COLS_I,
            .bytes = 3.0 * e); /* + (I) */
}

/* ModernBERT's rotary on x (LP_IN: I elements, e bytes an element; not
 * let go of): (q.float() * cos) + (rotate_half(q.float()) * sin), each
 * q.float() a copy of its own in fp32, the first let go of once
 * multiplied, the second once rotate_half's cat returns
 * (modeling_modernbert.py apply_rotary_pos_emb; the dry run on meta of
 * modernbert-base: four fp32 blocks of q's elements and one of half of
 * them a head of q and of k). Its output: I elements in fp32 */
void vl__lp_rope_upcast(struct lp *p, unsigned e) {
  vl__lp_begin(p, e, false, LP_COLS_I);
  const uint8_t f = 4, up = e < 4 ? LP_CAST : LP_REF; /* (fp32's q.float(): q itself) */
  uint8_t xa = OP(.kind = up, .in = {LP_IN}, .cols = LP_COLS_I, .ob = f); /* q.float() */
  uint8_t t1 = OP(.kind = LP_EW, .in = {xa}, .cols = LP_COLS_I, .ob = f, .drop = {xa}); /* * cos */
  uint8_t xb = OP(.kind = up, .in = {LP_IN}, .cols = LP_COLS_I, .ob = f); /* q.float() */
  uint8_t x1 = OP(.kind = LP_VIEW, .in = {xb}, .cols = LP_COLS_I2, .ob = f);
  uint8_t x2 = OP(.kind = LP_VIEW, .in = {xb}, .cols = LP_COLS_I2, .ob = f);
  uint8_t neg = OP(.kind = LP_EW, .in = {x2}, .cols = LP_COLS_I2, .ob = f, .drop = {x2}); /* -x2 */
  uint8_t cat = OP(.kind = LP_EW, .in = {neg, x1}, .cols = LP_COLS_I, .ob = f, .pass = TAPE_SLICES,
                   .drop = {neg, x1, xb}); /* cat(-x2, x1) */
  uint8_t t3 =
      OP(.kind = LP_EW, .in = {cat}, .cols = LP_COLS_I, .ob = f, .drop = {cat}); /* * sin */
  OP(.kind = LP_EW, .in = {t1, t3}, .cols = LP_COLS_I, .ob = f, .pass = TAPE_ADD,
     .drop = {t1, t3}); /* +  (I) */
}

/* rotary on x (LP_IN: h elements, e bytes an element; not let go of): on
 * all of it, or (part: GPT-NeoX's rotary_pct) on its first I elements, the
 * rest concatenated back in the wider dtype (w bytes) (modeling_llama.py
 * apply_rotary_pos_emb; modeling_gpt_neox.py). Its output: h elements */
void vl__lp_rope(struct lp *p, unsigned e, unsigned w, bool part) {
  vl__lp_begin(p, e, false, LP_COLS_H);
  if (!part) {
    rotary(p, LP_IN, e, w);
    return;
  }
  uint8_t xr = OP(.kind = LP_VIEW, .in = {LP_IN}, .cols = LP_COLS_I, .ob = (uint8_t)e);
  uint8_t xp = OP(.kind = LP_VIEW, .in = {LP_IN}, .cols = LP_COLS_HMI, .ob = (uint8_t)e);
  uint8_t r = rotary(p, xr, e, w);
  vl__lp_then_drop(p, xr);
  OP(.kind = LP_EW, .in = {r, xp}, .cols = LP_COLS_H, .ob = (uint8_t)w, .pass = TAPE_SLICES,
     .drop = {r, xp}); /* cat  (h) */
}
