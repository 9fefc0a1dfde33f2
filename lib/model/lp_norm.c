/* The norms as a layer program (lp.h): nn.LayerNorm (one fused kernel)
 * and the RMSNorms transformers writes in Python: Llama's (the input
 * upcast to fp32, the weight's product in its dtype), Gemma's (1 + w) in
 * fp32, T5's (the rsqrt times the half input). One program serves every
 * place a layer normalises: the layer's input norms, Gemma 2/3's and
 * OLMo 2's norms after a branch, Qwen3's and OLMo 2's q/k norms (rows the
 * heads' or the tokens', h the head's or every head's width), the final
 * norm. The replay (train_replay_lp.c) issues these ops over rows x h, the
 * time model (steptime.c norm) prices them.
 *
 * The time model prices every norm as reading the residual stream's dtype
 * (a post-norm's and a q/k norm's input is the activations'); it is built
 * with xb = the residual's bytes there, the replay with the input's. */
#include "internal.h"
#include "lp.h"

#define OP(...) vl__lp_emit(p, (struct lp_op){__VA_ARGS__})

/* nn.LayerNorm: one kernel, its output fp32 under autocast (layer_norm is
 * on autocast's float32 list); its backward keeps its input (and the
 * row statistics, rows x 8 bytes: not counted) */
static void layer_norm(struct lp *p, uint8_t x, unsigned xb) {
  const uint8_t ob = (uint8_t)(p->autocast ? 4 : xb);
  OP(.kind = LP_EW, .in = {x}, .cols = LP_COLS_H, .ob = ob, .saved = {x}, .price = LP_PRICE_NORM,
     .pcols = LP_COLS_H, .bytes = xb + ob);
}

/* the weight's product and the cast back to the input's dtype of y32,
 * (x * rsqrt) in fp32: Llama's casts first and multiplies in the weight's
 * dtype (LlamaRMSNorm.forward: weight * hidden_states.to(input_dtype));
 * Gemma's multiplies by (1 + weight.float()) in fp32, then type_as(x)
 * (transformers 5.17 modeling_gemma.py GemmaRMSNorm; OLMo 2's weight * x
 * in fp32, then .to(input_dtype)). The time model prices both as Llama's:
 * the cast (4 + xb), then the product at 2 ob bytes (Gemma's is fp32 in
 * and out: 8), so Gemma's product is priced late, after its cast */
static void rms_weight(struct lp *p, const struct vl_arch *arch, unsigned xb, unsigned wb,
                       uint8_t y32) {
  if (vl__norm_weight_fp32(arch)) {
    uint8_t o32 = OP(.kind = LP_EW, .in = {y32}, .cols = LP_COLS_H, .ob = 4, .saved = {y32},
                     .wsave = true, .drop = {y32}, .price = LP_PRICE_BCAST, .pcols = LP_COLS_H,
                     .late = xb < 4, .bytes = 2.0 * xb); /* * (1 + w)  (rows, h) fp32 */
    if (xb < 4)
      OP(.kind = LP_CAST, .in = {o32}, .cols = LP_COLS_H, .ob = (uint8_t)xb, .drop = {o32},
         .price = LP_PRICE_CAST, .pcols = LP_COLS_H, .bytes = 4.0 + xb); /* type_as(x) */
    return;
  }
  const uint8_t ob = (uint8_t)(wb > xb ? wb : xb);
  uint8_t yh = xb < 4 ? OP(.kind = LP_CAST, .in = {y32}, .cols = LP_COLS_H, .ob = (uint8_t)xb,
                           .price = LP_PRICE_CAST, .pcols = LP_COLS_H, .bytes = 4.0 + xb)
                      : OP(.kind = LP_REF, .in = {y32}, .cols = LP_COLS_H, .ob = 4); /* .to() */
  /* weight * x saves x for the weight's gradient: not where the weight is
   * frozen (LoRA; y-qwen05-bf16-lora16-adamw-b8s2048's history); that
   * gradient is grad * x summed over the rows, Reduce.cuh's partials
   * beside the product (Llama-3-8B's H100 history: 132 MiB a norm at
   * 8,192 rows of 4,096, bench/results/reserved/raw.jsonl:histories-addr-h100/) */
  OP(.kind = LP_EW, .in = {yh}, .cols = LP_COLS_H, .ob = ob, .saved = {yh}, .wsave = true,
     .tmpb = ob, .wsum = true, .drop = {yh, y32}, .price = LP_PRICE_BCAST, .pcols = LP_COLS_H,
     .bytes = 2.0 * ob); /* weight *  (rows, h) */
}

/* RMSNorm: x.float(); pow(2).mean(-1, keepdim); rsqrt(+ eps); x * rsqrt;
 * then the weight (modeling_llama.py LlamaRMSNorm.forward). The time
 * model prices + eps and rsqrt as two forward kernels of a row's 8 bytes;
 * the replay makes one tensor of them (var + eps's rows x 4 bytes are not
 * made there) */
static void rms_norm(struct lp *p, const struct vl_arch *arch, uint8_t x, unsigned xb,
                     unsigned wb) {
  uint8_t x32 = xb < 4 ? OP(.kind = LP_CAST, .in = {x}, .cols = LP_COLS_H, .ob = 4,
                            .price = LP_PRICE_CAST, .pcols = LP_COLS_H, .bytes = xb + 4.0)
                       : OP(.kind = LP_REF, .in = {x}, .cols = LP_COLS_H, .ob = 4);
  uint8_t sq = OP(.kind = LP_EW, .in = {x32}, .cols = LP_COLS_H, .ob = 4, .saved = {x32}, /* pow */
                  .tmpb = 4, .tmp_first = true, .wideb = 4, .price = LP_PRICE_EW,
                  .pcols = LP_COLS_H, .bytes = 8);
  uint8_t var = OP(.kind = LP_EW, .in = {sq}, .cols = LP_COLS_ROW, .ob = 4, .drop = {sq}, /* mean */
                   .price = LP_PRICE_NORM, .pcols = LP_COLS_H, .bytes = 4);
  uint8_t rs = OP(.kind = LP_EW, .in = {var}, .cols = LP_COLS_ROW, .ob = 4, .save_out = true,
                  .drop = {var}, .price = LP_PRICE_EW, .pcols = LP_COLS_ROW, .times = 2,
                  .fwd_only = true, .bytes = 8); /* + eps, rsqrt  (rows, 1) */
  uint8_t y32 = OP(.kind = LP_EW, .in = {x32, rs}, .cols = LP_COLS_H, .ob = 4, .saved = {x32, rs},
                   .tmpb = 4, .drop = {x32, rs}, .price = LP_PRICE_BCAST, .pcols = LP_COLS_H,
                   .bytes = 12); /* x * rsqrt  (rows, h) fp32 */
  rms_weight(p, arch, xb, wb, y32);
}

/* T5LayerNorm (modeling_t5.py T5LayerNorm.forward), its lines as the time
 * model prices RMSNorm's, its tensors let go where Python does:
 * x.to(float32) is a temporary of pow (which saves it), the variance a
 * local to the return; variance + eps a temporary of rsqrt, the rsqrt one
 * of the product, which multiplies the half input itself (and saves it);
 * hidden_states rebound to the cast frees the fp32 product before the
 * weight's product (t5-base's meta trace: modeling_t5.py:65-72) */
static void t5_norm(struct lp *p, uint8_t x, unsigned xb, unsigned wb) {
  uint8_t x32 = xb < 4 ? OP(.kind = LP_CAST, .in = {x}, .cols = LP_COLS_H, .ob = 4,
                            .price = LP_PRICE_CAST, .pcols = LP_COLS_H, .bytes = xb + 4.0)
                       : OP(.kind = LP_REF, .in = {x}, .cols = LP_COLS_H, .ob = 4);
  /* pow's backward: self.pow(1), * 2, then grad * that (the temporaries
   * around the gradient: tmp_first, wideb) */
  uint8_t sq = OP(.kind = LP_EW, .in = {x32}, .cols = LP_COLS_H, .ob = 4, .saved = {x32}, .tmpb = 4,
                  .tmp_first = true, .wideb = 4, .drop = {x32}, .price = LP_PRICE_EW,
                  .pcols = LP_COLS_H, .bytes = 8);
  /* pow */                                                                               /* pow */
  uint8_t var = OP(.kind = LP_EW, .in = {sq}, .cols = LP_COLS_ROW, .ob = 4, .drop = {sq}, /* mean */
                   .price = LP_PRICE_NORM, .pcols = LP_COLS_H, .bytes = 4);
  uint8_t ve = OP(.kind = LP_EW, .in = {var}, .cols = LP_COLS_ROW, .ob = 4); /* + eps (unpriced) */
  uint8_t rs = OP(.kind = LP_EW, .in = {ve}, .cols = LP_COLS_ROW, .ob = 4, .save_out = true,
                  .drop = {ve}, .price = LP_PRICE_EW, .pcols = LP_COLS_ROW, .times = 2,
                  .fwd_only = true, .bytes = 8); /* rsqrt  (rows, 1) */
  /* x * rsqrt's backward: grad * x (fp32, summed over the row into the
   * rsqrt's gradient after) and grad * rsqrt in fp32, cast to x's dtype */
  uint8_t y32 = OP(.kind = LP_EW, .in = {x, rs}, .cols = LP_COLS_H, .ob = 4, .saved = {x, rs},
                   .tmpb = 4, .tmp_first = true, .wideb = xb < 4 ? 4 : 0, .drop = {rs},
                   .price = LP_PRICE_BCAST, .pcols = LP_COLS_H, .bytes = 12);
  /* x * rsqrt (rows, h) fp32 */ /* x * rsqrt  (rows, h) fp32 */
  const uint8_t ob = (uint8_t)(wb > xb ? wb : xb);
  uint8_t yh =
      xb < 4 ? OP(.kind = LP_CAST, .in = {y32}, .cols = LP_COLS_H, .ob = (uint8_t)xb, .drop = {y32},
                  .price = LP_PRICE_CAST, .pcols = LP_COLS_H, .bytes = 4.0 + xb)
             : OP(.kind = LP_REF, .in = {y32}, .cols = LP_COLS_H, .ob = 4, .drop = {y32});
  /* its weight's gradient, (grad * hidden_states) summed over the rows:
   * Reduce.cuh's partials beside that product (the meta trace's
   * cuda_reduce blocks: 24 MiB a norm at t5-base's 4,096 rows) */
  OP(.kind = LP_EW, .in = {yh}, .cols = LP_COLS_H, .ob = ob, .saved = {yh}, .wsave = true,
     .tmpb = ob, .wsum = true, .drop = {yh, var}, .price = LP_PRICE_BCAST, .pcols = LP_COLS_H,
     .bytes = 2.0 * ob); /* weight *  (rows, h) */
}

uint8_t vl__lp_norm_of(struct lp *p, const struct vl_arch *arch, uint8_t x, unsigned xb,
                       unsigned wb) {
  if (arch->family == VL_FAM_T5)
    t5_norm(p, x, xb, wb);
  else if (arch->rms_norm)
    rms_norm(p, arch, x, xb, wb);
  else
    layer_norm(p, x, xb);
  return p->n;
}

void vl__lp_norm(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned xb,
                 unsigned wb) {
  vl__lp_begin(p, xb, autocast, LP_COLS_H);
  vl__lp_norm_of(p, arch, LP_IN, xb, wb);
}
