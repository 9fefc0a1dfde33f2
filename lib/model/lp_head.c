/* The head as a layer program (lp.h): the head's linear (a tied one is
 * the embedding's matrix: its weight is the caller's), what a model does
 * to its logits (Gemma 2's final soft cap, Granite's scaling, BART's
 * final_logits_bias), then the loss over the vocabulary, cross_entropy =
 * log_softmax + nll_loss (transformers' loss/loss_utils.py). The replay
 * (train_replay.c head_forward, loss_backward) runs them through vl__tr_lp
 * and walks the loss's lines back for its backward; the time model
 * (steptime.c loss) prices them, its GEMMs the inventory's (linears()). */
#include "internal.h"
#include "lp.h"

#define OP(...) vl__lp_emit(p, (struct lp_op){__VA_ARGS__})

/* what the model does to its logits lg (rows x V, new tensors of their
 * size): Gemma 2's final softcapping, / cap, tanh (saves its output),
 * * cap (modeling_gemma2.py Gemma2ForCausalLM.forward); Granite's
 * logits / logits_scaling (modeling_granite.py); BART's + final_logits_bias
 * (modeling_bart.py BartForConditionalGeneration), which the time model
 * does not price: under autocast the bias is an fp32 buffer and the sum
 * fp32, so the loss runs on fp32 logits (bart-base AMP LoRA on an H200:
 * peak allocated -9.1 -> -0.1 %, reserved -12.1 -> -0.2 %,
 * bench/results/reserved/lora-seq2seq-h200/). (No family has two of them.) */
static uint8_t logits(struct lp *p, const struct vl_arch *arch, uint8_t lg) {
  const uint8_t e = p->e;
  const double ew = 2.0 * e;
  if (arch->final_softcap > 0) {
    uint8_t c0 = OP(.kind = LP_EW, .in = {lg}, .cols = LP_COLS_V, .ob = e, .drop = {lg},
                    .price = LP_PRICE_EW, .pcols = LP_COLS_V, .bytes = ew); /* / cap */
    uint8_t c1 = OP(.kind = LP_EW, .in = {c0}, .cols = LP_COLS_V, .ob = e, .save_out = true,
                    .drop = {c0}, .price = LP_PRICE_EW, .pcols = LP_COLS_V, .bytes = ew); /* tanh */
    return OP(.kind = LP_EW, .in = {c1}, .cols = LP_COLS_V, .ob = e, .drop = {c1},
              .price = LP_PRICE_EW, .pcols = LP_COLS_V, .bytes = ew); /* * cap */
  }
  if (arch->logits_scaled)
    return OP(.kind = LP_EW, .in = {lg}, .cols = LP_COLS_V, .ob = e, .drop = {lg},
              .price = LP_PRICE_EW, .pcols = LP_COLS_V, .bytes = ew); /* / logits_scaling */
  if (arch->family == VL_FAM_BART) /* an fp32 buffer under autocast: the sum promotes to fp32 */
    return OP(.kind = LP_EW, .in = {lg}, .cols = LP_COLS_V, .ob = p->autocast ? 4 : e,
              .drop = {lg}); /* + bias */
  return lg;
}

/* the loss of the logits lg, then the head's input in goes. ForCausalLMLoss upcasts them
 * (logits.float()): log_softmax and nll_loss in fp32, log_softmax's output saved (ModernBERT's
 * masked LM calls ForMaskedLMLoss, which upcasts too). An encoder's
 * CrossEntropyLoss runs log_softmax in the logits' dtype (saved) and, under
 * autocast, nll_loss on its fp32 list casts that to fp32 (the copy saved by
 * nll_loss); backward: nll's dense gradient, its cast back, log_softmax's
 * backward in the logits' dtype (RoBERTa AMP's allocator history,
 * bench/results/model-types/raw.jsonl: model-types-unseen/type-peaks-large.json:
 * events 10642-10817).
 *
 * The time model prices every model's loss as the causal one: the upcast
 * wherever the logits are not fp32 (an encoder's too, which makes none),
 * log_softmax reading and writing fp32, nll_loss and the mean on the rows;
 * its backward's kernels are lines of their own, in the order it has
 * always priced them (the cast's first; autograd runs nll_loss's,
 * log_softmax's, then the cast's) */
static void loss(struct lp *p, const struct vl_arch *arch, uint8_t lg, uint8_t in) {
  const uint8_t e = p->op[lg].ob; /* the logits' bytes an element */
  const bool upcast = arch->causal || arch->family == VL_FAM_MODERNBERT;
  const bool mlm_amp = !upcast && p->autocast && e < 4;
  const uint8_t lb = upcast || p->autocast ? 4 : e; /* log_softmax's dtype but mlm_amp's */
  const bool made = e < lb && !mlm_amp;
  uint8_t x = lg, up = 0;
  if (e != 4) /* logits.float()  (rows, V) fp32 */
    up = OP(.kind = LP_LOSS, .in = {lg}, .cols = LP_COLS_V, .ob = 4, .unmade = !made,
            .price = LP_PRICE_CAST, .pcols = LP_COLS_V, .fwd_only = true, .bytes = e + 4.0);
  if (made) x = up;
  uint8_t ls = OP(.kind = LP_LOSS, .in = {x}, .cols = LP_COLS_V, .ob = mlm_amp ? e : lb,
                  .save_out = true, .drop = {made ? up : 0}, .price = LP_PRICE_LOGSOFTMAX,
                  .pcols = LP_COLS_V, .fwd_only = true, .bytes = 8); /* log_softmax */
  /* nll_loss's fp32 copy of half log-probabilities under autocast */
  const uint8_t n32 = mlm_amp ? OP(.kind = LP_LOSS, .in = {ls}, .cols = LP_COLS_V, .ob = 4) : 0;
  OP(.kind = LP_LOSS, .in = {n32 ? n32 : ls}, .cols = LP_COLS_ROW, .saved = {n32},
     .price = LP_PRICE_EW, .pcols = LP_COLS_ROW, .times = 2, .fwd_only = true,
     .bytes = 8); /* nll_loss, the mean: a scalar (none made) */
  /* the loss is the forward's (labels given): its hidden_states =
   * outputs.last_hidden_state, the head's input, goes as it returns
   * (modeling_llama.py LlamaForCausalLM.forward, modeling_opt.py
   * OPTForCausalLM.forward: outputs[0]; OPT-1.3B AMP LoRA's history,
   * bench/results/reserved/breadth/) */
  vl__lp_then_drop(p, in);
  if (e != 4) /* the cast's backward */
    OP(.kind = LP_LOSS, .bwd_only = true, .price = LP_PRICE_CAST, .pcols = LP_COLS_V,
       .bytes = 4.0 + e);
  OP(.kind = LP_LOSS, .bwd_only = true, .price = LP_PRICE_EW, .pcols = LP_COLS_V,
     .bytes = 4); /* nll_loss_backward: zeros written (then one value a row scattered) */
  OP(.kind = LP_LOSS, .bwd_only = true, .price = LP_PRICE_LOGSOFTMAX_BWD, .pcols = LP_COLS_V,
     .bytes = 12); /* log_softmax_backward */
}

void vl__lp_head(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned e, unsigned xb) {
  vl__lp_begin(p, e, autocast, LP_COLS_H);
  const bool vision = vl_arch_is_vision(arch);
  /* the head's input: a ViT's [CLS] row a sample (a view), else the final
   * norm's output itself; the caller's reference goes */
  uint8_t x = OP(.kind = vision ? LP_VIEW : LP_REF, .in = {LP_IN}, .cols = LP_COLS_H,
                 .ob = (uint8_t)xb, .drop = {LP_IN});
  uint8_t lg = OP(.kind = LP_LINEAR, .in = {x}, .in_cols = LP_COLS_H, .cols = LP_COLS_V,
                  .ob = (uint8_t)e, .bias = arch->head_bias || vision);
  lg = logits(p, arch, lg);
  p->out[0] = lg;
  loss(p, arch, lg, x);
}
