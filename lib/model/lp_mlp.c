/* The dense MLP kinds as a layer program (lp.h): plain (GELU, ReLU),
 * GPT-2's GELU written in Python, gated (SwiGLU, GeGLU; gate_up fused or
 * two linears), gpt-oss's experts' clamped GLU; dropout on the
 * activation; T5's cast before wo. The replay (train_replay_decoder.c)
 * issues these ops, the time model (steptime.c) prices them.
 *
 * What the time model prices is the op's `bytes`; where it prices a run of
 * ops as fewer kernels than the tape holds, the lines say so. */
#include "lp.h"
#include "tape.h"

static uint8_t emit(struct lp *p, struct lp_op o) { return vl__lp_emit(p, o); }
static void then_drop(struct lp *p, uint8_t x) { vl__lp_then_drop(p, x); }

#define OP(...) emit(p, (struct lp_op){__VA_ARGS__})

/* 0.5*x*(1+tanh(c*(x+0.044715*x^3))) of fc (activations.py
 * NewGELUActivation, GPT-2's and T5 v1.1's gelu_new): autocast runs pow in
 * fp32, so everything after it is fp32 (w-gpt2-ampfp16-sgd-b32s1024's
 * history). The time model prices the chain as seven kernels of 2.5 bytes
 * an element of its dtype (the tape's eight ops: 18; 0.5*x and pow's cast
 * left out), or (gated: T5 v1.1's gated-gelu) as one act(gate) of 2e. */
static uint8_t gelu_new(struct lp *p, uint8_t fc, bool gated) {
  const uint8_t e = p->e, w = p->autocast ? 4 : e;
  const uint8_t pr = gated ? LP_UNPRICED : LP_PRICE_EW;
  const double wb = gated ? 0 : 2.5 * w;
  uint8_t half = OP(.kind = LP_EW, .in = {fc}, .ob = e);     /* 0.5*x        (rows, I) */
  uint8_t x = p->autocast && e < 4                           /* pow casts its input to */
                  ? OP(.kind = LP_CAST, .in = {fc}, .ob = 4) /* fp32 first, the copy   */
                  : OP(.kind = LP_REF, .in = {fc}, .ob = e); /* saved                  */
  uint8_t cube = OP(.kind = LP_EW, .in = {x}, .ob = w, .saved = {x}, .drop = {x}, /* x^3 */
                    .price = pr, .bytes = wb);
  uint8_t sc = OP(.kind = LP_EW, .in = {cube}, .ob = w, .drop = {cube}, /* 0.044715*x^3 */
                  .price = pr, .bytes = wb);
  uint8_t s = OP(.kind = LP_EW, .in = {fc, sc}, .ob = w, .pass = TAPE_ADD, .drop = {sc}, /* x+ */
                 .price = pr, .bytes = wb);
  uint8_t c = OP(.kind = LP_EW, .in = {s}, .ob = w, .drop = {s}, /* sqrt(2/pi)*( )  */
                 .price = pr, .bytes = wb);
  uint8_t th = OP(.kind = LP_EW, .in = {c}, .ob = w, .save_out = true, .drop = {c}, /* tanh */
                  .price = pr, .bytes = wb);
  uint8_t one = OP(.kind = LP_EW, .in = {th}, .ob = w, .pass = TAPE_ADD, .drop = {th}, /* 1+ */
                   .price = pr, .bytes = wb);
  return OP(.kind = LP_EW, .in = {half, one}, .ob = w, .saved = {half, one}, /* half*( ) */
            .drop = {half, one}, .price = LP_PRICE_EW, .bytes = gated ? 2.0 * e : wb);
}

/* a projection of the MLP (rows, in_c) -> (rows, out_c); gpt-oss's experts
 * add their bias after the matmul (x @ gate_up_proj[i] +
 * gate_up_proj_bias[i]): the product is a tensor of its own, gone once the
 * sum exists (modeling_gpt_oss.py GptOssExperts.forward) */
static uint8_t linear(struct lp *p, const struct vl_arch *arch, uint8_t x, uint8_t in_c,
                      uint8_t out_c, bool moe, struct lp_op extra) {
  extra.kind = LP_LINEAR, extra.in[0] = x, extra.cols = out_c, extra.in_cols = in_c;
  extra.ob = p->e;
  if (!moe || !arch->expert_bias) {
    extra.bias = arch->mlp_bias;
    return emit(p, extra);
  }
  uint8_t y = emit(p, extra);
  return OP(.kind = LP_EW, .in = {y}, .cols = out_c, .ob = p->e, .drop = {y}); /* + bias */
}

/* gpt-oss's experts' GLU (GptOssExperts._apply_gate): gate and up are the
 * even and odd columns of gate_up, each clamped (clamp saves its input, so
 * gate_up lives to the backward), glu = gate * sigmoid(gate * alpha),
 * (up + 1) * glu; each product saves both factors. Priced by moe_ops. */
static uint8_t clamped_glu(struct lp *p, const struct vl_arch *arch) {
  const uint8_t e = p->e;
  uint8_t gu = linear(p, arch, LP_IN, LP_COLS_H, LP_COLS_2I, true, (struct lp_op){0});
  /* gate_up[..., ::2], gate_up[..., 1::2]: slices */
  uint8_t gate = OP(.kind = LP_VIEW, .in = {gu}, .ob = e, .slice = true); /* (rows, I) */
  uint8_t up = OP(.kind = LP_VIEW, .in = {gu}, .ob = e, .slice = true, .drop = {gu});
  uint8_t gc = OP(.kind = LP_EW, .in = {gate}, .ob = e, .saved = {gate}); /* clamp */
  uint8_t uc = OP(.kind = LP_EW, .in = {up}, .ob = e, .saved = {up}, .drop = {gate, up});
  uint8_t ga = OP(.kind = LP_EW, .in = {gc}, .ob = e);                                 /* * alpha */
  uint8_t sg = OP(.kind = LP_EW, .in = {ga}, .ob = e, .save_out = true, .drop = {ga}); /* sig */
  uint8_t glu = OP(.kind = LP_EW, .in = {gc, sg}, .ob = e, .saved = {gc, sg}, .drop = {gc, sg});
  uint8_t u1 = OP(.kind = LP_EW, .in = {uc}, .ob = e, .drop = {uc}); /* up + 1 */
  return OP(.kind = LP_EW, .in = {u1, glu}, .ob = e, .saved = {u1, glu}, .drop = {u1, glu});
}

/* Phi-3, GLM, transformers 5's experts: gate_up_proj, then chunk(2);
 * `up = up * act(gate)` rebinds up, and gate, a local to the return,
 * holds the fused output until after the down projection (*keep: the
 * caller's to let go of then; phi-3-mini's meta trace of generate()) */
static uint8_t gated_fused(struct lp *p, const struct vl_arch *arch, uint8_t keep[2]) {
  const uint8_t e = p->e;
  uint8_t gu = linear(p, arch, LP_IN, LP_COLS_H, LP_COLS_2I, false, (struct lp_op){0});
  uint8_t gate = OP(.kind = LP_VIEW, .in = {gu}, .ob = e, .piece = true); /* (rows, I) */
  uint8_t up = OP(.kind = LP_VIEW, .in = {gu}, .ob = e, .piece = true, .drop = {gu});
  uint8_t ag = OP(.kind = LP_EW, .in = {gate}, .ob = e, .saved = {gate}, /* act(gate) */
                  .price = LP_PRICE_EW, .bytes = 2.0 * e);
  keep[0] = gate;
  return OP(.kind = LP_EW, .in = {up, ag}, .ob = e, .saved = {up, ag}, /* * up */
            .drop = {ag, up}, .price = LP_PRICE_EW, .bytes = 3.0 * e);
}

/* down(act(gate(x)) * up(x)): the gate's output is a temporary gone once
 * act has it (Gemma-2B's history); T5 v1.1's gated-gelu runs gelu_new
 * (T5DenseGatedActDense), fp32 under autocast, and so is the product.
 * T5's hidden_gelu and hidden_linear are locals to the return, after wo
 * (modeling_t5.py T5DenseGatedActDense.forward; flan-t5-base's meta
 * trace): *keep, for the caller to let go of then (0: none) */
static uint8_t gated(struct lp *p, const struct vl_arch *arch, uint8_t keep[2]) {
  const uint8_t e = p->e;
  uint8_t gate = linear(p, arch, LP_IN, LP_COLS_H, LP_COLS_I, false, (struct lp_op){0});
  uint8_t ag = arch->gelu_python ? gelu_new(p, gate, true)
                                 : OP(.kind = LP_EW, .in = {gate}, .ob = e, .saved = {gate},
                                      .price = LP_PRICE_EW, .bytes = 2.0 * e); /* act(gate) */
  then_drop(p, gate);
  uint8_t up = linear(p, arch, LP_IN, LP_COLS_H, LP_COLS_I, false, (struct lp_op){0});
  /* act * up: MulBackward0 makes the second factor's gradient first, so
   * up_proj, the later node, frees the block made first (y-mistral7b-
   * bf16-sgd-eager-ckpt-b1s2048's meta trace; the fused kind lists them in
   * that order too) */
  const bool t5 = arch->family == VL_FAM_T5;
  keep[0] = t5 ? ag : 0, keep[1] = t5 ? up : 0;
  return OP(.kind = LP_EW, .in = {up, ag}, .ob = p->op[ag].ob > e ? p->op[ag].ob : e,
            .saved = {ag, up}, .drop = {t5 ? 0 : ag, t5 ? 0 : up}, .price = LP_PRICE_EW,
            .bytes = 3.0 * e);
}

/* fc, its activation: ReLU (keeps its output), GPT-2's Python GELU, or
 * one GELU kernel (keeps its input) */
static uint8_t plain(struct lp *p, const struct vl_arch *arch) {
  const uint8_t e = p->e;
  uint8_t fc = linear(p, arch, LP_IN, LP_COLS_H, LP_COLS_I, false, (struct lp_op){0});
  /* OPTDecoderLayer: hidden_states = self.fc1(hidden_states) lets go of
   * the norm's output (the caller's reference, taken over) */
  if (arch->layer_inline) then_drop(p, LP_IN);
  uint8_t act;
  if (arch->relu_act)
    act = OP(.kind = LP_EW, .in = {fc}, .ob = e, .save_out = true, /* relu */
             .price = LP_PRICE_EW, .bytes = 2.0 * e);
  else if (arch->gelu_python)
    act = gelu_new(p, fc, false);
  else
    act = OP(.kind = LP_EW, .in = {fc}, .ob = e, .saved = {fc}, /* gelu */
             .price = LP_PRICE_EW, .bytes = 2.0 * e);
  then_drop(p, fc);
  return act;
}

void vl__lp_mlp(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned e, bool moe) {
  /* (each op is written whole: no clearing of the array, built per configuration) */
  vl__lp_begin(p, e, autocast, LP_COLS_H);
  uint8_t keep[2] = {0, 0};
  uint8_t act = moe && arch->gate_clamp                           ? clamped_glu(p, arch)
                : arch->gated_mlp && (arch->fused_gate_up || moe) ? gated_fused(p, arch, keep)
                : arch->gated_mlp                                 ? gated(p, arch, keep)
                                                                  : plain(p, arch);
  const uint8_t ab = p->op[act].ob; /* the activation's bytes an element */
  if (arch->act_dropout > 0)        /* (priced in the activations' dtype; its mask a byte an element
                                     * of that dtype's bytes: an fp32 activation's two under half) */
    act = OP(.kind = LP_DROPOUT, .in = {act}, .ob = ab, .maskb = (uint8_t)(ab / e),
             .price = LP_PRICE_EW, .bytes = 2.0 * e + 1);
  if (arch->family == VL_FAM_T5 && autocast && ab < 4) {
    /* T5DenseActDense casts to wo's dtype, fp32 under autocast, and wo's
     * autocast casts back (its copy saved); not priced */
    act = OP(.kind = LP_CAST, .in = {act}, .ob = 4, .drop = {act});
  }
  /* the down projection (rows, h); a checkpoint's recomputation stops
   * before it: the last tensor its backward needs is its input. GPT-2's
   * chain is fp32 under autocast (pow is on autocast's float32 list:
   * PyTorch's autocast op reference) and the time model prices its cast
   * back to the activations' dtype there; the others' casts it does not */
  struct lp_op down = {.stop = true};
  if (autocast && !arch->gated_mlp && !arch->relu_act && arch->gelu_python && !moe)
    down.price = LP_PRICE_CAST, down.bytes = 4.0 + e;
  linear(p, arch, act, LP_COLS_I, LP_COLS_H, moe, down);
  then_drop(p, act);
  for (int i = 0; i < 2; i++)
    if (keep[i]) then_drop(p, keep[i]);
}
