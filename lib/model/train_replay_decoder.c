/* The training replay's pre-norm layer (train_replay.h): a decoder's, and
 * the encoder layers of the same shape (T5's encoder, ModernBERT), with
 * its MLP (lp_mlp.c's layer program, issued as tape ops) and its MoE
 * block. */
#include <string.h>

#include "lp.h"
#include "train_replay.h"

/* the MLP of width I on rows x h (n2, nb bytes an element); moe: an
 * expert of transformers 5 (one 3-D gate_up_proj): its layer program
 * (lp_mlp.c) run by vl__tr_lp */
uint32_t vl__tr_mlp(struct run *R, uint32_t n2, uint64_t nb, uint64_t rows, uint64_t I, bool moe,
                    bool stop) {
  struct lp p;
  vl__lp_mlp(&p, R->arch, R->z->autocast, (unsigned)R->z->e, moe);
  return vl__tr_lp(R, &p, n2, nb, &(struct lp_dims){.rows = rows, .I = I, .h = R->z->h}, stop,
                   NULL);
}

/* a residual branch's output y before the add: Gemma 2/3's and OLMo 2's
 * norm after it, Granite's residual_multiplier (a new tensor) */
static uint32_t branch_out(struct run *R, uint32_t y) {
  const struct vl_arch *arch = R->arch;
  if (arch->sandwich_norm || arch->post_norm) {
    uint64_t ob, yb = R->tp.t[y].bytes / (R->T * R->z->h);
    uint32_t n = vl__tr_norm(R, y, yb, &ob);
    rel(R, y);
    return n;
  }
  if (arch->resid_scaled) {
    uint32_t m = op(R, (struct tape_op){.out_bytes = R->tp.t[y].bytes, .in = {y}});
    rel(R, y);
    return m;
  }
  return y;
}

static uint32_t grouped_experts(struct run *R, uint32_t n2, uint64_t nb, uint32_t mo, bool stop);

/* the layer's next linear is the inventory's `name` (LoRA's targets are
 * matched by position: a MoE layer's router and experts are no linears of
 * the replay's, and a sparse layer has no dense MLP) */
static void seek_linear(struct run *R, const char *name) {
  for (unsigned i = 0; i < R->z->n_lin; i++)
    if (!strcmp(R->z->lin[i].name, name)) R->lin = i;
}

/* the MoE block on n2 (T x h): the shared expert(s) on every token (and
 * Qwen2-MoE's sigmoid gate), then the routed experts as transformers 5
 * runs them (grouped_experts); under autocast (where its grouped GEMMs
 * would run in the weights' fp32) each routed expert on its share of the
 * tokens: the rows gathered (hidden_states[token_idx]), its MLP, the
 * product with the routing weights (saved: the weights need its gradient),
 * index_add_ into the output (the loop of transformers 4's
 * modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock) */
static uint32_t experts(struct run *R, uint32_t n2, uint64_t nb, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e;
  uint64_t k = arch->experts_per_token ? arch->experts_per_token : 1;
  uint64_t Te = vl__div_ceil(T * k, arch->experts);
  uint32_t mo = R->z->autocast ? tape_new(&R->tp, T * h * e) : 0; /* index_add_'s zeros */
  if (arch->shared_intermediate) {
    seek_linear(R, "shared_expert.gate_proj");
    uint32_t sh = vl__tr_mlp(R, n2, nb, T, arch->shared_intermediate, false, false);
    if (arch->shared_gate) {
      uint32_t g = vl__tr_linear(R, n2, nb, T, h, 1, false);
      uint32_t sg = op(R, (struct tape_op){.out_bytes = T * e, .in = {g}, .save_out = true});
      rel(R, g);
      uint32_t p =
          op(R, (struct tape_op){.out_bytes = T * h * e, .in = {sg, sh}, .saved = {sg, sh}});
      rel(R, sg);
      rel(R, sh);
      sh = p;
    }
    rel(R, mo);
    mo = sh;
  }
  if (!R->z->autocast) return grouped_experts(R, n2, nb, arch->shared_intermediate ? mo : 0, stop);
  for (uint64_t i = 0; i < arch->experts && !R->p.failed; i++) {
    uint32_t cur = op(R, (struct tape_op){.out_bytes = Te * h * nb, .in = {n2}});
    uint32_t y = vl__tr_mlp(R, cur, nb, Te, arch->moe_intermediate, true, false);
    rel(R, cur);
    uint32_t yw = op(R, (struct tape_op){.out_bytes = Te * h * e, .in = {y}, .saved = {y}});
    rel(R, y);
    uint32_t acc =
        op(R, (struct tape_op){.out_bytes = T * h * e, .in = {mo, yw}, .pass = TAPE_ADD});
    rel(R, yw);
    rel(R, mo);
    mo = acc;
  }
  if (stop) R->tp.no_alloc = true;
  return mo;
}

/* The routed experts under LoRA, as transformers 5 runs them by default
 * (integrations/moe.py grouped_mm_experts_forward) with frozen expert
 * weights: the router (F.linear to E logits, softmax in fp32, top-k, the
 * weights cast back), the S = T k (token, expert) pairs sorted by expert,
 * their rows and routing weights gathered, one grouped GEMM for gate and up
 * and one for down (frozen: their backward needs no input saved), each
 * output masked out of place, the gate, the weighted rows put back in
 * order and summed per token. What each node keeps and its backward makes
 * follow the meta trace of OLMoE's step (moe.py:393-479). */
static uint32_t grouped_experts(struct run *R, uint32_t n2, uint64_t nb, uint32_t mo, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e, E = arch->experts;
  const uint64_t k = arch->experts_per_token ? arch->experts_per_token : 1, S = T * k;
  const uint64_t I = arch->moe_intermediate;
  /* the routing weights' bytes an element, and so the weighted rows' */
  const uint64_t wb = arch->router_fp32 ? 4 : e, pb = R->z->wb;
  const bool tr = base_trained(R); /* full training: the weights' gradients, their inputs saved */
  uint32_t lg, wr = base_param(R, E * h * pb);
  if (arch->router_fp32 == 2) { /* the input and the weight cast to fp32 first */
    uint32_t xf = op(R, (struct tape_op){.out_bytes = T * h * 4, .in = {n2}});
    uint32_t wf = op(R, (struct tape_op){.out_bytes = E * h * 4, .in = {wr}});
    lg = op(R, (struct tape_op){
                   .out_bytes = T * E * 4, .in = {wf, xf}, .saved = {wf, tr ? xf : 0}, .mm = true});
    rel(R, xf);
    rel(R, wf);
  } else {
    lg = op(R, (struct tape_op){
                   .out_bytes = T * E * e, .in = {wr, n2}, .saved = {tr ? n2 : 0}, .mm = true});
  }
  uint32_t pr = op(R, (struct tape_op){.out_bytes = T * E * 4, .in = {lg}, .save_out = true});
  uint32_t ix = tape_const(&R->tp, T * k * 8);
  uint32_t tv = op(R, (struct tape_op){.out_bytes = T * k * 4, .in = {pr}, .saved = {ix}});
  rel(R, pr);
  uint32_t rw = op(R, (struct tape_op){.out_bytes = T * k * wb, .in = {tv}}); /* cast, or scaled */
  rel(R, tv);
  rel(R, ix);
  /* sort, the rows' and the weights' gathers (index saves its indices) */
  uint32_t ids = tape_const(&R->tp, S * 8), perm = tape_const(&R->tp, S * 8);
  uint32_t pk = tape_const(&R->tp, S * 8);
  uint32_t sel = op(R, (struct tape_op){.out_bytes = S * h * nb,
                                        .in = {n2},
                                        .saved = {pk},
                                        .tmp = T * h * nb,
                                        .tmp_first = true});
  uint32_t sw = op(
      R, (struct tape_op){
             .out_bytes = S * wb, .in = {rw}, .saved = {perm}, .tmp = S * wb, .tmp_first = true});
  rel(R, rw);
  uint32_t i32 = tape_const(&R->tp, S * 4), offs = tape_const(&R->tp, E * 4);
  uint32_t mask = tape_const(&R->tp, S);
  /* gate_up (its backward's d_input, then the in-place pre-mask's) */
  uint32_t gu = op(R, (struct tape_op){.out_bytes = S * 2 * I * e,
                                       .in = {sel, base_param(R, E * 2 * I * h * pb)},
                                       .saved = {tr ? sel : 0},
                                       .tmp = S * h * e,
                                       .mm = true,
                                       .tmp_first = true});
  uint32_t gm = op(R, (struct tape_op){.out_bytes = S * 2 * I * e, .in = {gu}, .saved = {mask}});
  rel(R, gu);
  uint32_t gate = tape_piece(&R->tp, gm, S * I * e), up = tape_piece(&R->tp, gm, S * I * e);
  rel(R, gm);
  uint32_t ag = op(R, (struct tape_op){.out_bytes = S * I * e, .in = {gate}, .saved = {gate}});
  uint32_t act = op(R, (struct tape_op){.out_bytes = S * I * e, .in = {up, ag}, .saved = {up, ag}});
  rel(R, gate);
  rel(R, ag);
  rel(R, up);
  uint32_t dn = op(R, (struct tape_op){.out_bytes = S * h * e,
                                       .in = {act, base_param(R, E * h * I * pb)},
                                       .saved = {tr ? act : 0},
                                       .mm = true});
  rel(R, act);
  uint32_t dm = op(R, (struct tape_op){.out_bytes = S * h * e, .in = {dn}, .saved = {mask}});
  rel(R, dn);
  /* the rows times their routing weights (float32 where the weights are),
   * put back in token order, summed over k, cast to the hidden dtype */
  uint32_t wo = op(R, (struct tape_op){.out_bytes = S * h * wb,
                                       .in = {dm, sw},
                                       .saved = {dm, sw},
                                       .tmp = S * h * wb,
                                       .tmp_first = true});
  rel(R, dm);
  rel(R, sw);
  uint32_t inv = tape_const(&R->tp, S * 8), ar = tape_const(&R->tp, S * 8);
  rel(R, ar);
  uint32_t g = op(R, (struct tape_op){.out_bytes = S * h * wb,
                                      .in = {wo},
                                      .saved = {inv},
                                      .tmp = S * h * wb,
                                      .tmp_first = true});
  rel(R, wo);
  uint32_t y = op(R, (struct tape_op){.out_bytes = T * h * wb, .in = {g}});
  if (wb != e) {
    uint32_t c = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {y}});
    rel(R, y);
    y = c;
  }
  uint32_t done[] = {ids, sel, i32, g, lg, perm, pk, inv, offs, mask};
  for (size_t i = 0; i < sizeof done / sizeof done[0]; i++)
    rel(R, done[i]);
  if (mo) { /* the shared experts' output added */
    uint32_t sum = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {mo, y}, .pass = TAPE_ADD});
    rel(R, mo);
    rel(R, y);
    y = sum;
  }
  if (stop) R->tp.no_alloc = true;
  return y;
}

/* one decoder layer on x (T x h, the residual stream's dtype); Python's
 * reference to x is taken over. `stop`: a checkpoint's recomputation (no
 * allocation after the MLP's last saved tensor). GPT-NeoX's parallel
 * residual: mlp(ln2(x)) + attn(ln1(x)) + x. */
uint32_t vl__tr_layer(struct run *R, uint32_t x, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, r = R->z->r, e = R->z->e;
  uint64_t nb;
  R->lin = 0;
  /* ModernBERT: the first layer's attn_norm is nn.Identity, and
   * attn_output and the argument are ModernBertEncoderLayer.forward's and
   * its caller's until the layer returns (modeling_modernbert.py). Not
   * under autocast, which keeps the earlier lifetimes: with these the CPU
   * dry run of modernbert-base amp-bf16 2 x 1,024 reserved 4.4 % more than
   * it (+0.6 % before) */
  const bool mbert = arch->family == VL_FAM_MODERNBERT && !R->z->autocast;
  const bool ident = arch->post_norm || (mbert && R->l == 0);
  uint32_t n1 = ident ? tape_ref(&R->tp, x) : vl__tr_norm(R, x, r, &nb), held = 0;
  if (ident) nb = r;
  const uint64_t n1b = nb;
  uint32_t at = vl__tr_attention(R, n1, nb, &held);
  /* OPT rebinds hidden_states to self_attn's output before its dropout */
  if (arch->layer_inline) rel(R, n1);
  at = vl__tr_dropout(R, at, arch->hidden_dropout);
  at = branch_out(R, at); /* Gemma 2/3, OLMo 2 post-norm; Granite's multiplier */
  if (!arch->shared_norm && !arch->layer_inline) rel(R, n1);
  uint32_t h1 = x;
  if (!arch->parallel_residual) {
    h1 = op(R, (struct tape_op){.out_bytes = T * h * r, .in = {x, at}, .pass = TAPE_ADD});
    if (!mbert) {
      rel(R, at);
      rel(R, x);
    }
  }
  uint32_t n2, mo;
  if (arch->shared_norm) { /* Phi, Falcon: one norm feeds both */
    n2 = n1;
    nb = n1b;
  } else if (arch->post_norm) {
    n2 = tape_ref(&R->tp, h1);
    nb = r;
  } else {
    n2 = vl__tr_norm(R, h1, r, &nb);
  }
  const bool sparse = arch->experts && R->l >= arch->dense_layers;
  if (sparse) {
    mo = experts(R, n2, nb, stop);
  } else {
    mo = vl__tr_mlp(R, n2, nb, T, R->z->I, false, stop);
  }
  if (sparse || !arch->layer_inline) rel(R, n2); /* (else fc1 let go of it) */
  mo = branch_out(R, vl__tr_dropout(R, mo, arch->hidden_dropout));
  uint32_t sum = 0; /* parallel: (mlp + attn) + x, the temporaries go after */
  if (arch->parallel_residual)
    sum = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {mo, at}, .pass = TAPE_ADD});
  uint32_t out =
      op(R, (struct tape_op){.out_bytes = T * h * r, .in = {h1, sum ? sum : mo}, .pass = TAPE_ADD});
  rel(R, sum);
  rel(R, mo);
  if (arch->parallel_residual) rel(R, at);
  rel(R, h1);
  if (mbert) {
    rel(R, at);
    /* the first layer's argument, the embeddings' output, is also
     * ModernBertModel.forward's mask_kwargs["inputs_embeds"]: held to its
     * return, after the final norm (R->mb_in) */
    if (R->l == 0 && !stop && !R->mb_in)
      R->mb_in = x;
    else
      rel(R, x);
  }
  rel(R, held); /* the layer returns */
  R->tp.no_alloc = false;
  return out;
}
