/* The fitted memory formula: coefficients with 95 % intervals, R^2, the
 * leave-one-out error, predictions with the constant + linear and the
 * quadratic parts apart (which one dominates at the next scale). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "../util/internal.h"
#include "vramledger/regress.h"
#include "vramledger/render.h"

#define GIB(x) ((x) / (double)(1ull << 30))

int vl_render_fit(FILE *o, enum vl_format fmt, const struct vl_fit_view *v) {
  const struct vl_fit_result *r = v->fit;
  const struct vl_points *p = v->pts;
  if (fmt == VL_FMT_JSON) {
    json_t *root = json_object(), *coef = json_object(), *ci = json_object(), *pred = json_array();
    json_object_set_new(root, "schema", json_string("vramledger.fit/1"));
    json_object_set_new(root, "source", json_string(v->source));
    json_object_set_new(root, "points", json_integer((json_int_t)p->n));
    json_object_set_new(root, "skipped", json_integer((json_int_t)p->skipped));
    for (size_t k = 0; k < v->n_terms; k++) {
      json_object_set_new(coef, v->terms[k].name, json_real(r->coef[k]));
      json_object_set_new(ci, v->terms[k].name, json_real(r->ci95[k]));
    }
    json_object_set_new(root, "coefficients", coef);
    json_object_set_new(root, "ci95", ci);
    json_object_set_new(root, "r2", json_real(r->r2));
    json_object_set_new(root, "sigma_bytes", json_real(r->sigma));
    json_object_set_new(root, "loo_rel_rms", json_real(r->loo_rel_rms));
    json_object_set_new(root, "loo_rel_max", json_real(r->loo_rel_max));
    for (size_t i = 0; i < v->n_predict; i++) {
      const struct vl_fit_prediction *q = &v->predictions[i];
      const double *x = q->x;
      double hw = q->half_width, lin = q->linear, quad = q->quadratic, y = q->y;
      json_t *e = json_object();
      for (size_t k = 0; k < p->nvars; k++)
        json_object_set_new(e, p->var[k], json_real(x[k]));
      json_object_set_new(e, "peak_bytes", json_integer((json_int_t)llround(y)));
      json_object_set_new(e, "low_bytes", json_integer((json_int_t)llround(y - hw)));
      json_object_set_new(e, "high_bytes", json_integer((json_int_t)llround(y + hw)));
      json_object_set_new(e, "linear_bytes", json_integer((json_int_t)llround(lin)));
      json_object_set_new(e, "quadratic_bytes", json_integer((json_int_t)llround(quad)));
      json_array_append_new(pred, e);
    }
    json_object_set_new(root, "predictions", pred);
    int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
    json_decref(root);
    fputc('\n', o);
    return rc == 0 && !ferror(o) ? 0 : -1;
  }
  bool md = fmt == VL_FMT_MD;
  fprintf(o, "%speak_bytes fitted on %zu points of %s", md ? "## Fit: " : "fit: ", p->n, v->source);
  if (p->skipped) fprintf(o, " (%zu not ok, skipped)", p->skipped);
  fprintf(o, "\n%s",
          md ? "\n| term | coefficient (bytes) | 95 % interval |\n|---|---:|---:|\n" : "\n");
  for (size_t k = 0; k < v->n_terms; k++)
    fprintf(o, md ? "| %s | %.6g | ± %.3g |\n" : "  %-14s %16.6g  ± %.3g\n", v->terms[k].name,
            r->coef[k], r->ci95[k]);
  fprintf(o, "%sR² %.5f, residual sigma %.3f GiB, leave-one-out error %.2f %% rms, %.2f %% max\n",
          md ? "\n" : "\n  ", r->r2, GIB(r->sigma), 100 * r->loo_rel_rms, 100 * r->loo_rel_max);
  if (v->n_predict)
    fprintf(o, md ? "\n| at | peak GiB | 95 %% interval GiB | constant + linear | quadratic "
                    "|\n|---|---:|---:|---:|---:|\n"
                  : "\n  predictions (GiB):\n");
  for (size_t i = 0; i < v->n_predict; i++) {
    const struct vl_fit_prediction *q = &v->predictions[i];
    const double *x = q->x;
    double hw = q->half_width, lin = q->linear, quad = q->quadratic, y = q->y;
    char at[128] = "";
    size_t off = 0;
    for (size_t k = 0; k < p->nvars; k++) {
      int w = snprintf(at + off, sizeof at - off, "%s%s=%g", k ? "," : "", p->var[k], x[k]);
      if (w < 0 || (size_t)w >= sizeof at - off) break;
      off += (size_t)w;
    }
    if (md)
      fprintf(o, "| %s | %.2f | %.2f – %.2f | %.2f | %.2f |\n", at, GIB(y), GIB(y - hw),
              GIB(y + hw), GIB(lin), GIB(quad));
    else
      fprintf(o, "  %-28s %9.2f  [%.2f, %.2f]  constant+linear %.2f, quadratic %.2f%s\n", at,
              GIB(y), GIB(y - hw), GIB(y + hw), GIB(lin), GIB(quad),
              quad > lin ? "  <- quadratic dominates" : "");
  }
  return ferror(o) ? -1 : 0;
}
