/* The estimator at the points of a fit: the same job with the swept
 * variables (batch, seq) set to each point's values, so that `fit` can show
 * where the measured curve and the analytic bill part ways. Pure. */
#include <math.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/model.h"
#include "vramledger/regress.h"

vl_status vl_fit_check_vars(const struct vl_points *p, struct vl_err *err) {
  for (size_t k = 0; k < p->nvars; k++)
    if (strcmp(p->var[k], "batch") && strcmp(p->var[k], "seq")) {
      return vl__fail(err, VL_EINVAL,
                      "the variable '%s' has no meaning for the estimator (it knows batch and "
                      "seq); drop --model or the column",
                      p->var[k]);
    }
  return VL_OK;
}

static bool whole(double v) { return v >= 1 && v <= 1e9 && v == floor(v); }

vl_status vl_fit_estimate_at(const struct vl_points *p, const double *x, const struct vl_arch *arch,
                             const struct vl_job *base, const struct vl_overheads *ov,
                             enum vl_fit_measure m, double *bytes, struct vl_err *err) {
  struct vl_job j = *base;
  for (size_t k = 0; k < p->nvars; k++) {
    if (!whole(x[k])) {
      return vl__fail(err, VL_ERANGE, "%s=%g is not a whole number between 1 and 10^9", p->var[k],
                      x[k]);
    }
    if (!strcmp(p->var[k], "batch"))
      j.batch = (uint64_t)x[k];
    else if (!strcmp(p->var[k], "seq"))
      j.seq = (uint64_t)x[k];
  }
  struct vl_bill *b = vl_malloc(sizeof *b);
  if (!b) return VL_ENOMEM;
  vl_status s = vl_bill_compute(arch, &j, ov, b, err);
  if (s == VL_OK)
    *bytes = (double)(m == VL_FIT_ALLOCATED  ? b->peak_allocated_bytes
                      : m == VL_FIT_RESERVED ? b->peak_reserved_bytes
                                             : b->total_bytes);
  vl_free(b);
  return s;
}

bool vl_fit_disagrees(double fit, double half_width, double estimate) {
  return isfinite(estimate) && fabs(estimate - fit) > fmax(VL_FIT_DISAGREE * fabs(fit), half_width);
}
