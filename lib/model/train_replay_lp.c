/* The training replay's interpreter of layer programs (lp.h): a part's
 * lines issued op by op on the tape, each tensor let go where the program
 * says. The MLP (vl__tr_mlp, train_replay_decoder.c), the norms
 * (vl__tr_norm_w), and attention's projections, rotary and eager scores
 * (train_replay_attention.c) are their programs run here. */
#include <string.h>

#include "lp.h"
#include "train_replay.h"

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
    b[i] = o->ob;
    switch (o->kind) {
    case LP_LINEAR:
      /* a checkpoint's recomputation stops in it (vl__tr_linear) */
      if (o->stop && stop) R->stop_in_linear = true;
      /* BERT's intermediate_output: the caller of vl__tr_mlp holds the
       * down projection's input to the layer's end (R->keep_act) */
      if (i == p->n && R->keep_act) R->act = tape_ref(&R->tp, in);
      t[i] = vl__tr_linear(R, in, b[o->in[0]], rows, vl__lp_cols(o->in_cols, d),
                           vl__lp_cols(o->cols, d), o->bias);
      break;
    case LP_INPUT: /* the part's second input */ t[i] = d->in2, b[i] = d->in2b; continue;
    case LP_VIEW: t[i] = tape_view(&R->tp, in, bytes); break;
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
                                    .tmp = elems * o->tmpb});
    }
    for (int k = 0; k < 3 && o->drop[k]; k++)
      rel(R, t[o->drop[k]]);
  }
  if (tensors) memcpy(tensors, t, sizeof t);
  return t[p->n];
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
