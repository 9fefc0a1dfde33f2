/* The fitted memory formula: coefficients with 95 % intervals, R^2, the
 * leave-one-out error, predictions with the constant + linear and the
 * quadratic parts apart (which one dominates at the next scale). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/regress.h"
#include "vramledger/render.h"

static void at_str(const struct vl_points *p, const double *x, char *at, size_t n) {
  size_t off = 0;
  at[0] = '\0';
  for (size_t k = 0; k < p->nvars; k++) {
    int w = snprintf(at + off, n - off, "%s%s=%g", k ? "," : "", p->var[k], x[k]);
    if (w < 0 || (size_t)w >= n - off) break;
    off += (size_t)w;
  }
}

static double rel(double a, double b) { return b != 0 ? (a - b) / b : 0; }

static json_t *estimator_json(const struct vl_fit_view *v) {
  const struct vl_points *p = v->pts;
  json_t *e = json_object(), *pts = json_array();
  json_object_set_new(e, "model", vl__json_str(v->model));
  json_object_set_new(e, "measure", vl__json_str(v->measure));
  for (size_t i = 0; i < p->n; i++) {
    json_t *q = json_object();
    for (size_t k = 0; k < p->nvars; k++)
      json_object_set_new(q, p->var[k], json_real(p->x[i * VL_FIT_MAX_VARS + k]));
    json_object_set_new(q, "measured_bytes", D(p->y[i]));
    json_object_set_new(q, "estimate_bytes", D(v->estimate[i]));
    json_object_set_new(q, "rel_error", json_real(rel(v->estimate[i], p->y[i])));
    json_array_append_new(pts, q);
  }
  json_object_set_new(e, "points", pts);
  const struct vl_fit_est_summary *su = v->est_summary;
  json_object_set_new(e, "mean_abs_rel_error", json_real(su->mean_abs_rel));
  json_object_set_new(e, "max_abs_rel_error", json_real(fabs(su->worst_rel)));
  json_object_set_new(e, "points_beyond", U(su->beyond));
  json_object_set_new(e, "threshold", json_real(VL_FIT_DISAGREE));
  return e;
}

static json_t *fit_json(const struct vl_term_spec *t, size_t nt, const struct vl_fit_result *r) {
  json_t *e = json_object(), *coef = json_object();
  for (size_t k = 0; k < nt; k++)
    json_object_set_new(coef, t[k].name, json_real(r->coef[k]));
  json_object_set_new(e, "coefficients", coef);
  json_object_set_new(e, "r2", json_real(r->r2));
  json_object_set_new(e, "loo_rel_rms", json_real(r->loo_rel_rms));
  return e;
}

/* the fit as JSON (vramledger.fit/1) */
static int render_fit_json(FILE *o, const struct vl_fit_view *v) {
  const struct vl_fit_result *r = v->fit;
  const struct vl_points *p = v->pts;
  json_t *root = json_object(), *coef = json_object(), *ci = json_object(), *pred = json_array();
  json_object_set_new(root, "schema", vl__json_str("vramledger.fit/1"));
  json_object_set_new(root, "source", vl__json_str(v->source));
  json_object_set_new(root, "points", U(p->n));
  json_object_set_new(root, "skipped", U(p->skipped));
  json_t *vars = json_array(), *terms = json_array();
  for (size_t k = 0; k < p->nvars; k++)
    json_array_append_new(vars, vl__json_str(p->var[k]));
  for (size_t k = 0; k < v->n_terms; k++)
    json_array_append_new(terms, vl__json_str(v->terms[k].name));
  json_object_set_new(root, "variables", vars);
  json_object_set_new(root, "terms", terms);
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
  if (v->fit_opt) {
    json_t *bp = json_object();
    json_object_set_new(bp, "fwd_bwd", fit_json(v->terms, v->n_terms, r));
    json_object_set_new(bp, "optimizer", fit_json(v->opt_terms, v->n_opt_terms, v->fit_opt));
    json_object_set_new(bp, "max_rel_error", json_real(v->phase_rel_max));
    json_object_set_new(root, "by_phase", bp);
  }
  for (size_t i = 0; i < v->n_predict; i++) {
    const struct vl_fit_prediction *q = &v->predictions[i];
    const double *x = q->x;
    double hw = q->half_width, lin = q->linear, quad = q->quadratic, y = q->y;
    json_t *e = json_object();
    for (size_t k = 0; k < p->nvars; k++)
      json_object_set_new(e, p->var[k], json_real(x[k]));
    json_object_set_new(e, "peak_bytes", D(y));
    json_object_set_new(e, "low_bytes", D(y - hw));
    json_object_set_new(e, "high_bytes", D(y + hw));
    json_object_set_new(e, "linear_bytes", D(lin));
    json_object_set_new(e, "quadratic_bytes", D(quad));
    if (v->phase) json_object_set_new(e, "phase", vl__json_str(v->phase[i]));
    if (v->estimate) {
      json_object_set_new(e, "estimate_bytes", D(q->estimate));
      json_object_set_new(e, "disagree", json_boolean(q->disagree));
    }
    json_array_append_new(pred, e);
  }
  json_object_set_new(root, "predictions", pred);
  if (v->estimate) json_object_set_new(root, "estimator", estimator_json(v));
  int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
  json_decref(root);
  fputc('\n', o);
  return rc == 0 && !ferror(o) ? 0 : -1;
}

int vl_render_fit(FILE *o, enum vl_format fmt, const struct vl_fit_view *v) {
  const struct vl_fit_result *r = v->fit;
  const struct vl_points *p = v->pts;
  if (fmt == VL_FMT_JSON) return render_fit_json(o, v);
  bool md = fmt == VL_FMT_MD;
  fprintf(o, "%s%s fitted on %zu points of ",
          md ? "## Fit: " : "fit: ", v->fit_opt ? "the forward/backward peak" : "peak_bytes", p->n);
  vl__text(o, v->source, md);
  if (p->skipped) fprintf(o, " (%zu not ok, skipped)", p->skipped);
  fprintf(o, "\n%s",
          md ? "\n| term | coefficient (bytes) | 95 % interval |\n|---|---:|---:|\n" : "\n");
  for (size_t k = 0; k < v->n_terms; k++) { /* terms of the CSV's columns */
    fputs(md ? "| " : "  ", o);
    vl__text_pad(o, v->terms[k].name, md ? 0 : 14, md);
    fprintf(o, md ? " | %.6g | ± %.3g |\n" : " %16.6g  ± %.3g\n", r->coef[k], r->ci95[k]);
  }
  fprintf(o, "%sR² %.5f, residual sigma %.3f GiB, leave-one-out error %.2f %% rms, %.2f %% max\n",
          md ? "\n" : "\n  ", r->r2, GIB(r->sigma), 100 * r->loo_rel_rms, 100 * r->loo_rel_max);
  if (v->fit_opt) {
    const struct vl_fit_result *q = v->fit_opt;
    fprintf(o, md ? "\nThe optimizer step's peak, fitted apart:\n\n| term | coefficient (bytes) |\n"
                    "|---|---:|\n"
                  : "\n  the optimizer step's peak, fitted apart:\n");
    for (size_t k = 0; k < v->n_opt_terms; k++) {
      fputs(md ? "| " : "  ", o);
      vl__text_pad(o, v->opt_terms[k].name, md ? 0 : 14, md);
      fprintf(o, md ? " | %.6g |\n" : " %16.6g\n", q->coef[k]);
    }
    fprintf(o,
            "%sR² %.5f, leave-one-out error %.2f %% rms. The peak is the larger of the two "
            "fits: at the measured points (PyTorch's peak allocated) within %.2f %%\n",
            md ? "\n" : "  ", q->r2, 100 * q->loo_rel_rms, 100 * v->phase_rel_max);
  }
  if (v->n_predict)
    fprintf(o,
            md ? "\n| at | peak GiB | 95 %% interval GiB | constant + linear | quadratic |%s\n"
                 "|---|---:|---:|---:|---:|%s\n"
               : "\n  predictions (GiB):\n",
            v->estimate ? " estimator GiB |" : "", v->estimate ? "---:|" : "");
  for (size_t i = 0; i < v->n_predict; i++) {
    const struct vl_fit_prediction *q = &v->predictions[i];
    double hw = q->half_width, lin = q->linear, quad = q->quadratic, y = q->y;
    char at[160];
    at_str(p, q->x, at, 128);
    if (md && v->phase) {
      size_t l = strlen(at);
      snprintf(at + l, sizeof at - l, " (peak in %s)", v->phase[i]);
    }
    fputs(md ? "| " : "  ", o); /* the CSV's column names and phases: escaped */
    vl__text_pad(o, at, md ? 0 : 28, md);
    if (md) {
      fprintf(o, " | %.2f | %.2f – %.2f | %.2f | %.2f |", GIB(y), GIB(y - hw), GIB(y + hw),
              GIB(lin), GIB(quad));
    } else {
      fprintf(o, " %9.2f  [%.2f, %.2f]  constant+linear %.2f, quadratic %.2f%s", GIB(y),
              GIB(y - hw), GIB(y + hw), GIB(lin), GIB(quad),
              quad > lin ? "  <- quadratic dominates" : "");
      if (v->phase) {
        fputs("  peak in ", o);
        vl__plain_text(o, v->phase[i]);
      }
    }
    if (v->estimate) {
      bool off = q->disagree;
      if (md)
        fprintf(o, " %.2f (%+.1f %%)%s |", GIB(q->estimate), 100 * rel(q->estimate, y),
                off ? " **disagree**" : "");
      else
        fprintf(o, "\n  %-28s %9s  estimator %.2f (%+.1f %%)%s", "", "", GIB(q->estimate),
                100 * rel(q->estimate, y), off ? "  <- fit and estimator disagree" : "");
    }
    fputc('\n', o);
  }
  if (v->estimate) {
    fprintf(o,
            md ? "\n### Estimator (%s, %s peak) at the measured points\n\n| at | measured GiB | "
                 "estimate GiB | error |\n|---|---:|---:|---:|\n"
               : "\n  estimator (%s, %s peak) at the measured points (GiB):\n",
            v->model, v->measure);
    for (size_t i = 0; i < p->n; i++) {
      char at[128];
      at_str(p, p->x + i * VL_FIT_MAX_VARS, at, sizeof at);
      double e = v->estimate[i], m = p->y[i];
      fputs(md ? "| " : "  ", o);
      vl__text_pad(o, at, md ? 0 : 28, md);
      fprintf(o,
              md ? " | %.2f | %.2f | %+.1f %% |\n"
                 : " measured %7.2f  estimate %7.2f  %+6.1f %%%s\n",
              GIB(m), GIB(e), 100 * rel(e, m),
              !md && fabs(rel(e, m)) > VL_FIT_DISAGREE ? "  <- beyond 10 %" : "");
    }
    const struct vl_fit_est_summary *su = v->est_summary;
    char at[128] = "";
    if (p->n) at_str(p, p->x + su->worst * VL_FIT_MAX_VARS, at, sizeof at);
    fprintf(o, "%smean |error| %.1f %%, worst %+.1f %% at ", md ? "\n" : "  ",
            100 * su->mean_abs_rel, 100 * su->worst_rel);
    vl__text(o, at, md);
    fprintf(o, "; %zu of %zu points beyond %.0f %%\n", su->beyond, p->n, 100 * VL_FIT_DISAGREE);
  }
  return ferror(o) ? -1 : 0;
}

/* ---- HTML: points, curves and predictions on one SVG ------------------- */

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                      "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
                                      "#bcbd22", "#17becf", "#393b79", "#637939"};

/* Which curve a point belongs to: the one whose fixed variables it has. */
static size_t curve_of(const struct vl_fit_view *v, const double *x) {
  for (size_t c = 0; c < v->n_curves; c++) {
    bool same = true;
    for (size_t k = 0; k < v->pts->nvars; k++)
      same &= k == v->axis || v->curves[c].fixed[k] == x[k];
    if (same) return c;
  }
  return v->n_curves;
}

/* x with four significant digits and no exponent (a page is read, not
 * parsed; the JSON output keeps full precision). */
static const char *plain(char *buf, size_t n, double x) {
  double a = fabs(x);
  int d = a > 0 ? 3 - (int)floor(log10(a)) : 0;
  snprintf(buf, n, "%.*f", d < 0 ? 0 : d > 12 ? 12 : d, x);
  return buf;
}

/* The other variables of a curve ("batch=16"); empty when it has none. */
static void curve_name(const struct vl_fit_view *v, size_t c, char *at, size_t n) {
  const struct vl_points *p = v->pts;
  size_t off = 0;
  at[0] = '\0';
  for (size_t k = 0; k < p->nvars; k++) {
    if (k == v->axis) continue;
    int w =
        snprintf(at + off, n - off, "%s%s=%g", off ? "," : "", p->var[k], v->curves[c].fixed[k]);
    if (w < 0 || (size_t)w >= n - off) break;
    off += (size_t)w;
  }
}

/* The fit's curves, the measured points in their curve's colour, the
 * estimator at each point, the predictions with their 95 % interval. */
static json_t *fit_chart(const struct vl_fit_view *v) {
  const struct vl_points *p = v->pts;
  json_t *c = vl__chart_new("lines", p->var[v->axis], "", "memory", "bytes");
  size_t nc = v->n_curves < 12 ? v->n_curves : 12;
  int line[12], dots[12], other = -1, est = -1, pred = -1;
  for (size_t k = 0; k < nc; k++) {
    char at[128], name[160];
    curve_name(v, k, at, sizeof at);
    snprintf(name, sizeof name, "%s%s", at, *at ? " (fit)" : "fit");
    line[k] = vl__chart_series(c, name, palette[k], 0);
    bool measured = false; /* a curve may be there only for a prediction */
    for (size_t i = 0; i < p->n && !measured; i++)
      measured = curve_of(v, p->x + i * VL_FIT_MAX_VARS) == k;
    snprintf(name, sizeof name, "%s%s", at, *at ? " (measured)" : "measured");
    dots[k] =
        measured ? vl__chart_series(c, name, palette[k], VL_SERIES_POINTS | VL_SERIES_NO_LINE) : -1;
  }
  for (size_t i = 0; i < p->n && other < 0; i++)
    if (curve_of(v, p->x + i * VL_FIT_MAX_VARS) >= nc)
      other = vl__chart_series(c, "measured, on no curve", "#000000",
                               VL_SERIES_POINTS | VL_SERIES_NO_LINE);
  if (v->estimate)
    est = vl__chart_series(c, "the estimator at the point", "#555555",
                           VL_SERIES_POINTS | VL_SERIES_NO_LINE | VL_SERIES_DASH);
  if (v->n_predict)
    pred = vl__chart_series(c, "prediction (95 % interval)", "#000000",
                            VL_SERIES_POINTS | VL_SERIES_NO_LINE | VL_SERIES_BIG);
  for (size_t k = 0; k < nc; k++)
    for (size_t i = 0; i < v->curves[k].n; i++)
      vl__chart_set(vl__chart_row(c, v->curves[k].x[i]), line[k], fmax(0.0, v->curves[k].y[i]));
  for (size_t i = 0; i < p->n; i++) {
    const double *x = p->x + i * VL_FIT_MAX_VARS;
    size_t k = curve_of(v, x);
    json_t *row = vl__chart_row(c, x[v->axis]);
    vl__chart_set(row, k < nc ? dots[k] : other, p->y[i]);
    if (est >= 0) vl__chart_set(row, est, v->estimate[i]);
  }
  json_t *ranges = json_array();
  for (size_t i = 0; i < v->n_predict; i++) {
    const struct vl_fit_prediction *q = &v->predictions[i];
    vl__chart_set(vl__chart_row(c, q->x[v->axis]), pred, q->y);
    json_array_append_new(ranges, json_pack("[f,f,f]", q->x[v->axis],
                                            fmax(0.0, q->y - q->half_width), q->y + q->half_width));
  }
  json_object_set_new(c, "ranges", ranges);
  return c;
}

int vl_render_fit_html(FILE *o, const struct vl_fit_view *v) {
  const struct vl_points *p = v->pts;
  const struct vl_fit_result *r = v->fit;
  vl__html_head(o, "vramledger fit");
  fputs("<h1>Fit: ", o);
  vl__html_text(o, v->source);
  fprintf(o,
          "</h1>\n<p>%zu points%s; R² %.5f, residual sigma %.3f GiB, leave-one-out error "
          "%.2f %% rms, %.2f %% max</p>\n",
          p->n, p->skipped ? " (some not ok, skipped)" : "", r->r2, GIB(r->sigma),
          100 * r->loo_rel_rms, 100 * r->loo_rel_max);
  if (v->fit_opt)
    fprintf(o,
            "<p>Fitted phase by phase: the forward/backward peak (below) and the optimizer "
            "step's (R² %.5f) apart; the curves are the larger of the two, within %.2f %% of "
            "the measured peaks.</p>\n",
            v->fit_opt->r2, 100 * v->phase_rel_max);
  fputs("<table><tr><th>term</th><th>coefficient (bytes)</th><th>95 % interval</th></tr>\n", o);
  for (size_t k = 0; k < v->n_terms; k++) {
    fputs("<tr><td>", o);
    vl__html_text(o, v->terms[k].name);
    char coef[48], ci[48];
    fprintf(o, "</td><td class=n>%s</td><td class=n>± %s</td></tr>\n",
            plain(coef, sizeof coef, r->coef[k]), plain(ci, sizeof ci, r->ci95[k]));
  }
  fputs("</table>\n", o);
  vl__html_chart(o, "the fit", fit_chart(v), 420);
  if (v->n_predict) {
    fprintf(o,
            "<table><tr><th>at</th><th>peak GiB</th><th>95 %% interval</th><th>constant + "
            "linear</th><th>quadratic</th>%s</tr>\n",
            v->estimate ? "<th>estimator GiB</th>" : "");
    for (size_t i = 0; i < v->n_predict; i++) {
      const struct vl_fit_prediction *q = &v->predictions[i];
      char at[128];
      at_str(p, q->x, at, sizeof at);
      fputs("<tr><td>", o);
      vl__html_text(o, at);
      fprintf(o,
              "</td><td class=n>%.2f</td><td class=n>%.2f – %.2f</td><td class=n>%.2f</td>"
              "<td class=n>%.2f</td>",
              GIB(q->y), GIB(q->y - q->half_width), GIB(q->y + q->half_width), GIB(q->linear),
              GIB(q->quadratic));
      if (v->estimate)
        fprintf(o, "<td class=n>%.2f%s</td>", GIB(q->estimate), q->disagree ? " (disagrees)" : "");
      fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
  }
  vl__html_foot(o);
  return ferror(o) ? -1 : 0;
}
