/* The inference replay's interpreter of layer programs (lp.h): a part's
 * lines issued as the allocations and frees of a forward under
 * torch.no_grad() (infer_replay.c, generate()'s replay). Nothing is
 * saved: a tensor goes when Python lets go of its last name (a view or a
 * reference shares its base's block), where the program's lines say.
 * Dropout in eval mode returns its input (F.dropout, training=False); a
 * row's statistic (rows x 1) is a block of the small pool, which this
 * replay leaves out. The training replay's interpreter is
 * train_replay_lp.c vl__tr_lp. */
#include <string.h>

#include "lp.h"
#include "prog.h"

/* a program's tensors: each name's root (the tensor whose block it
 * names: a view's or a reference's base), each root's block and live
 * names */
struct names {
  uint32_t h[LP_MAX];
  uint8_t root[LP_MAX], refs[LP_MAX];
  bool live[LP_MAX];
};

static void name(struct names *n, uint8_t i, uint8_t root) {
  n->root[i] = root, n->live[i] = true;
  n->refs[root]++;
}

/* Python lets go of name x: its root's block goes with its last name */
static void let_go(struct prog *pr, struct names *n, uint8_t x) {
  if (!x || !n->live[x]) return;
  n->live[x] = false;
  if (--n->refs[n->root[x]] == 0) F(pr, &n->h[n->root[x]]);
}

/* line i of p, d its sizes: its block allocated, or a name of another's */
static void issue(struct prog *pr, struct names *n, const struct lp *p, uint8_t i,
                  const struct lp_dims *d) {
  const struct lp_op *o = &p->op[i];
  const uint64_t rows = o->krows ? d->rows_k : d->rows;
  switch (o->kind) {
  case LP_INPUT: /* the part's second input, the caller's */
    n->h[i] = d->in2;
    name(n, i, i);
    return;
  case LP_VIEW:
  case LP_REF:
  case LP_DROPOUT: /* eval: its input itself (the name taken over) */
    name(n, i, n->root[o->in[0]]);
    if (o->kind == LP_DROPOUT) let_go(pr, n, o->in[0]);
    return;
  default:
    n->h[i] = o->cols == LP_COLS_ROW ? NONE : A(pr, rows * vl__lp_cols(o->cols, d) * o->ob);
    name(n, i, i);
  }
}

uint32_t vl__inf_lp(struct prog *pr, const struct lp *p, uint32_t *x, const struct lp_dims *d,
                    uint32_t *tensors) {
  struct names n;
  memset(&n, 0, sizeof n);
  n.h[LP_IN] = *x;
  name(&n, LP_IN, LP_IN);
  for (uint8_t i = LP_FIRST; i <= p->n; i++) {
    const struct lp_op *o = &p->op[i];
    if (!o->bwd_only && !o->unmade) issue(pr, &n, p, i, d);
    for (int k = 0; k < 3 && o->drop[k]; k++)
      let_go(pr, &n, o->drop[k]);
  }
  *x = n.h[LP_IN]; /* NONE where the program let go of it */
  if (tensors)
    for (unsigned i = 0; i < LP_MAX; i++)
      tensors[i] = n.live[i] && n.root[i] == i ? n.h[i] : NONE;
  return n.h[n.root[p->n]];
}
