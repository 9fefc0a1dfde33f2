/* The estimator at the points of a fit: the same job with the swept
 * variables (batch, seq) set to each point's values, so that `fit` can show
 * where the measured curve and the analytic bill part ways. Pure. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
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

vl_status vl_fitted_parse(const char *text, size_t len, struct vl_fitted *f, struct vl_err *err) {
  memset(f, 0, sizeof *f);
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  if (!root) return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column, je.text);
  vl_status s = VL_OK;
  const char *schema = json_string_value(json_object_get(root, "schema"));
  json_t *vars = json_object_get(root, "variables"), *terms = json_object_get(root, "terms");
  json_t *coef = json_object_get(root, "coefficients");
  if (!schema || strcmp(schema, "vramledger.fit/1")) {
    s = vl__fail(err, VL_EKEY, "not the JSON of `vramledger fit --format json` (schema %s)",
                 schema ? schema : "missing");
  } else if (!json_is_array(vars) || !json_array_size(vars) ||
             json_array_size(vars) > VL_FIT_MAX_VARS || !json_is_array(terms) ||
             !json_array_size(terms) || json_array_size(terms) > VL_FIT_MAX_TERMS ||
             !json_is_object(coef)) {
    s = vl__fail(err, VL_EKEY,
                 "'variables', 'terms' or 'coefficients' missing or of the wrong "
                 "shape (a fit from an older vramledger? fit it again)");
  }
  for (size_t k = 0; s == VL_OK && k < json_array_size(vars); k++) {
    const char *v = json_string_value(json_array_get(vars, k));
    if (!v || strlen(v) >= sizeof f->vars.var[0])
      s = vl__fail(err, VL_EKEY, "variables[%zu] is not a name", k);
    else
      snprintf(f->vars.var[f->vars.nvars++], sizeof f->vars.var[0], "%s", v);
  }
  char spec[512] = "";
  for (size_t k = 0; s == VL_OK && k < json_array_size(terms); k++) {
    const char *t = json_string_value(json_array_get(terms, k));
    json_t *c = t ? json_object_get(coef, t) : NULL;
    if (!t || !json_is_number(c) || !isfinite(json_number_value(c))) {
      s = vl__fail(err, VL_EKEY, "terms[%zu] has no finite coefficient", k);
      break;
    }
    f->coef[k] = json_number_value(c);
    size_t l = strlen(spec);
    snprintf(spec + l, sizeof spec - l, "%s%s", k ? "," : "", t);
  }
  if (s == VL_OK) s = vl_terms_parse(spec, &f->vars, f->terms, &f->nt, err);
  if (s == VL_OK && f->nt != json_array_size(terms)) /* each coefficient with its own term */
    s = vl__fail(err, VL_EKEY, "terms: a name holds a ',' or is empty");
  json_decref(root);
  return s;
}

double vl_fitted_eval(const struct vl_fitted *f, const double *x) {
  double row[VL_FIT_MAX_TERMS], y = 0;
  vl_terms_eval(f->terms, f->nt, x, row);
  for (size_t k = 0; k < f->nt; k++)
    y += f->coef[k] * row[k];
  return y;
}

void vl_fit_est_summarize(const struct vl_points *p, const double *estimate,
                          struct vl_fit_est_summary *s) {
  memset(s, 0, sizeof *s);
  double sum = 0;
  for (size_t i = 0; i < p->n; i++) {
    double e = p->y[i] != 0 ? (estimate[i] - p->y[i]) / p->y[i] : 0;
    sum += fabs(e);
    if (fabs(e) > fabs(s->worst_rel) || i == 0) s->worst_rel = e, s->worst = i;
    s->beyond += fabs(e) > VL_FIT_DISAGREE;
  }
  s->mean_abs_rel = p->n ? sum / (double)p->n : 0;
}
