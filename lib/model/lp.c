/* What every layer program (lp.h) answers the same way: an op's FLOPs,
 * the linears reading the part's input. */
#include "lp.h"

double vl__lp_flops(const struct lp_op *o, const struct lp_dims *d) {
  const double rows = (double)(o->krows ? d->rows_k : d->rows);
  const double out = rows * (double)vl__lp_cols(o->cols, d);
  switch (o->kind) {
  case LP_LINEAR: return 2 * out * (double)vl__lp_cols(o->in_cols, d);
  case LP_EW:
  case LP_CAST:
  case LP_DROPOUT: return out;
  default: return 0;
  }
}

unsigned vl__lp_input_linears(const struct lp *p) {
  unsigned k = 0;
  for (unsigned i = LP_FIRST; i <= p->n; i++)
    k += p->op[i].kind == LP_LINEAR && p->op[i].in[0] == LP_IN;
  return k;
}
