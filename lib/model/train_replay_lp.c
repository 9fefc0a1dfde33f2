/* The training replay's interpreter of layer programs (lp.h): a part's
 * lines issued op by op on the tape, each tensor let go where the program
 * says. The MLP (vl__tr_mlp, train_replay_decoder.c), the norms
 * (vl__tr_norm_w), attention's projections, rotary and eager scores
 * (train_replay_attention.c), the embeddings (vl__tr_embed) and the head
 * and its loss (train_replay.c) are their programs run here. */
#include <string.h>

#include "lp.h"
#include "train_replay.h"

/* Python lets go of the tensors line o names */
static void let_go(struct run *R, const struct lp_op *o, const uint32_t *t) {
  for (int k = 0; k < 3 && o->drop[k]; k++)
    rel(R, t[o->drop[k]]);
}

/* p over x (rows x its input's columns, xb bytes an element), d its
 * sizes; stop: a checkpoint's recomputation ends at the line marked so;
 * its last tensor; tensors (NULL: not wanted) each of its tensors, for
 * the caller to take those p->out and p->held name */
uint32_t vl__tr_lp(struct run *R, const struct lp *p, uint32_t x, uint64_t xb,
                   const struct lp_dims *d, bool stop, uint32_t *tensors) {
  uint32_t t[LP_MAX] = {0}; /* the program's tensors on the tape */
  uint64_t b[LP_MAX] = {0}; /* their bytes an element */
  t[LP_IN] = x, b[LP_IN] = xb;
  for (unsigned i = LP_FIRST; i <= p->n; i++) {
    const struct lp_op *o = &p->op[i];
    const uint32_t in = t[o->in[0]];
    const uint64_t rows = o->krows ? d->rows_k : d->rows;
    const uint64_t elems = rows * vl__lp_cols(o->cols, d), bytes = elems * o->ob;
    const bool keep = !o->wsave || base_trained(R);
    if (o->bwd_only || o->unmade) { /* the time model's lines alone */
      let_go(R, o, t);
      continue;
    }
    b[i] = o->ob;
    switch (o->kind) {
    case LP_LINEAR:
      /* a checkpoint's recomputation stops in it (vl__tr_linear) */
      if (o->stop && stop) R->stop_in_linear = true;
      /* BERT's intermediate_output: the caller of vl__tr_mlp holds the
       * down projection's input to the layer's end (R->keep_act) */
      if (i == p->n && R->keep_act) R->act = tape_ref(&R->tp, in);
      t[i] = d->w ? vl__tr_linear_w(R, d->w, in, b[o->in[0]], rows, vl__lp_cols(o->in_cols, d),
                                    vl__lp_cols(o->cols, d), o->bias)
                  : vl__tr_linear(R, in, b[o->in[0]], rows, vl__lp_cols(o->in_cols, d),
                                  vl__lp_cols(o->cols, d), o->bias);
      break;
    case LP_GATHER:
      if (o->wsave && d->w) /* a node of the caller's table */
        t[i] = op(R, (struct tape_op){.out_bytes = bytes, .in = {d->w}});
      else if (o->wsave && (base_trained(R) || vl__tr_inputs_grad(R)))
        t[i] = tape_new(&R->tp, bytes);
      else
        t[i] = tape_const(&R->tp, bytes);
      break;
    case LP_LOSS: /* off the tape: no node; nll_loss's scalar none */
      t[i] = bytes ? tape_const(&R->tp, bytes) : 0;
      break;
    case LP_INPUT: /* the part's second input */ t[i] = d->in2, b[i] = d->in2b; continue;
    case LP_VIEW:
      t[i] = o->slice   ? tape_slice(&R->tp, in, bytes)
             : o->piece ? tape_piece(&R->tp, in, bytes)
                        : tape_view(&R->tp, in, bytes);
      break;
    case LP_REF: t[i] = tape_ref(&R->tp, in); break;
    case LP_DROPOUT: { /* native_dropout: its mask saved; takes its input over */
      uint32_t mask = tape_new(&R->tp, rows * vl__lp_cols(o->pcols, d) * o->maskb);
      t[i] = op(R, (struct tape_op){.out_bytes = bytes, .in = {in}, .saved = {mask}});
      rel(R, mask);
      rel(R, in);
      break;
    }
    default:
      t[i] = op(R, (struct tape_op){.out_bytes = bytes,
                                    .in = {in, t[o->in[1]]},
                                    .saved = {keep ? t[o->saved[0]] : 0, keep ? t[o->saved[1]] : 0},
                                    .pass = o->pass,
                                    .save_out = o->save_out,
                                    /* a frozen weight's gradient (its product
                                     * and column sum) is not made: phi-3-mini
                                     * LoRA's meta trace */
                                    .tmp = o->wsum && !keep ? 0 : elems * o->tmpb,
                                    .tmp_first = o->tmp_first,
                                    .wide_in = {elems * o->wideb},
                                    .tmp2 = o->wsum && keep ? vl__column_sum_scratch(
                                                                  rows, vl__lp_cols(o->cols, d),
                                                                  o->tmpb, 4, R->z->sms, R->z->tps)
                                                            : 0});
    }
    let_go(R, o, t);
  }
  if (tensors) memcpy(tensors, t, sizeof t);
  return t[p->n];
}
/* the loss's backward (lp.h LP_LOSS) after its forward's tensors t (from
 * vl__tr_lp): its lines walked back, each making its input's gradient,
 * then letting go of its output's and of what it kept (its saved tensor,
 * its own output); the logits' gradient, pending for the tape's backward */
uint32_t vl__tr_lp_loss_backward(struct run *R, const struct lp *p, const uint32_t *t) {
  uint32_t g[LP_MAX] = {0}, gl = 0;
  for (unsigned i = p->n; i >= LP_FIRST; i--) {
    const struct lp_op *o = &p->op[i];
    if (o->kind != LP_LOSS || o->bwd_only || o->unmade) continue;
    const uint8_t x = o->in[0];
    const uint32_t gx = tape_new(&R->tp, R->tp.t[t[x]].bytes);
    if (p->op[x].kind == LP_LOSS)
      g[x] = gx;
    else
      gl = gx;
    rel(R, g[i]);
    rel(R, t[o->saved[0]]);
    if (o->save_out) rel(R, t[i]);
  }
  return gl;
}

/* the token embeddings (lp_embed.c) of R->T tokens, the words' table
 * `width` wide: a node of w where the caller gives its table (0: none);
 * held: the words' lookup kept by the caller; *x0: that lookup. The
 * words' lookup requires grad where the table trains or the inputs do (an
 * encoder-decoder's under checkpointing whatever is trained:
 * gradient_checkpointing_enable calls enable_input_require_grads,
 * modeling_utils.py; vl__tr_inputs_grad). Gemma's scaling is a new
 * tensor, the unscaled one freed at once (bench/results/replay-histories/
 * raw.jsonl:unseen6/embed-probe.txt: allocations #0, #1, #3) */
uint32_t vl__tr_embed(struct run *R, uint32_t w, bool held, uint64_t width, uint32_t *x0) {
  const struct vl__train_sizes *z = R->z;
  struct lp p;
  uint32_t t[LP_MAX];
  vl__lp_embed(&p, R->arch, z->autocast, (unsigned)z->r, (unsigned)z->wb, (unsigned)z->gb,
               base_trained(R), held);
  const struct lp_dims d = {.rows = R->T, .rows_k = R->P, .I = width, .h = z->h, .w = w};
  vl__tr_lp(R, &p, 0, 0, &d, false, t);
  *x0 = t[p.out[1]];
  /* the hook's output a leaf (vl__tr_inputs_leaf): the words' lookup (what
   * follows it recorded: forward() in train_replay.c), or Gemma's scaled
   * lookup, the module's own output (the unscaled one goes at once) */
  if (vl__tr_inputs_leaf(R)) {
    const bool own = R->arch->embed_scale_own;
    const uint32_t y = t[p.out[own ? 0 : 1]];
    R->tp.t[y].rg = true;
    R->in_leaf = tape_ref(&R->tp, y);
  }
  return t[p.out[0]];
}

/* a norm over `width` of x (rows x width, xb bytes an element): its
 * program (lp_norm.c) run; *ob: its output's bytes an element */
uint32_t vl__tr_norm_w(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t width,
                       uint64_t *ob) {
  struct lp p;
  vl__lp_norm(&p, R->arch, R->z->autocast, (unsigned)xb, (unsigned)R->z->wb);
  *ob = p.op[p.n].ob;
  return vl__tr_lp(R, &p, x, xb, &(struct lp_dims){.rows = rows, .h = width}, false, NULL);
}

/* a norm of x (T x h) */
uint32_t vl__tr_norm(struct run *R, uint32_t x, uint64_t xb, uint64_t *ob) {
  return vl__tr_norm_w(R, x, xb, R->T, R->z->h, ob);
}
