/* Least squares for the fitted memory formula, with GSL
 * (gsl_multifit_linear: SVD-based, covariance sigma^2 (X'X)^-1). */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/regress.h"

/* ---- CSV ----------------------------------------------------------------- */

struct csv {
  const char *s, *end;
  size_t line, col;
  bool cut; /* the last field was longer than its buffer: never read as a shorter one */
};

/* Next field into buf; returns 1 at end of line, 2 at end of input, 0 else. */
static int field(struct csv *c, char *buf, size_t n) {
  size_t k = 0;
  c->cut = false;
  bool quoted = c->s < c->end && *c->s == '"';
  if (quoted) c->s++, c->col++;
  while (c->s < c->end) {
    char ch = *c->s;
    if (quoted) {
      if (ch == '"' && c->s + 1 < c->end && c->s[1] == '"') {
        c->s++;
      } else if (ch == '"') {
        quoted = false;
        c->s++;
        c->col++;
        continue;
      }
    } else if (ch == ',' || ch == '\n' || ch == '\r') {
      break;
    }
    if (k + 1 < n)
      buf[k++] = ch;
    else
      c->cut = true;
    c->s++;
    c->col++;
  }
  buf[k] = '\0';
  if (c->s >= c->end) return 2;
  if (*c->s == '\r') c->s++;
  if (c->s < c->end && *c->s == ',') {
    c->s++;
    c->col++;
    return 0;
  }
  if (c->s < c->end && *c->s == '\n') c->s++;
  c->line++;
  c->col = 1;
  return c->s >= c->end ? 2 : 1;
}

#define MAX_COLS 64

/* Columns that are measurements or bookkeeping, not swept variables (the
 * CSV of `vramledger sweep`: point, *_bytes, *_pct, seconds). */
static bool measurement(const char *name) {
  size_t l = strlen(name);
  if (!strcmp(name, "point") || !strcmp(name, "seconds")) return true;
  return (l > 6 && !strcmp(name + l - 6, "_bytes")) || (l > 4 && !strcmp(name + l - 4, "_pct")) ||
         (l > 6 && !strcmp(name + l - 6, "_per_s"));
}

/* Is s a plain decimal: [-]digits[.digits][e[+-]digits]? strtod alone
 * takes "0x10" (16), "inf", "nan" and leading spaces, which no measured
 * point or --predict value means. */
static bool plain_decimal(const char *s) {
  size_t i = s[0] == '-', d = 0;
  for (; s[i] >= '0' && s[i] <= '9'; i++)
    d++;
  if (s[i] == '.')
    for (i++; s[i] >= '0' && s[i] <= '9'; i++)
      d++;
  if (!d) return false;
  if (s[i] == 'e' || s[i] == 'E') {
    i += s[i + 1] == '-' || s[i + 1] == '+';
    if (s[++i] < '0' || s[i] > '9') return false;
    while (s[i] >= '0' && s[i] <= '9')
      i++;
  }
  return s[i] == '\0';
}

vl_status vl_points_parse(const char *text, size_t len, const char *const *vars, size_t nvars,
                          struct vl_points *p, struct vl_err *err) {
  return vl_points_parse_y(text, len, vars, nvars, "peak_bytes", p, err);
}

vl_status vl_points_parse_y(const char *text, size_t len, const char *const *vars, size_t nvars,
                            const char *y, struct vl_points *p, struct vl_err *err) {
  memset(p, 0, sizeof *p);
  struct csv c = {text, text + len, 1, 1, false};
  char head[MAX_COLS][32];
  size_t nh = 0;
  char buf[128];
  int e;
  do {
    e = field(&c, buf, sizeof buf);
    if (nh == MAX_COLS) return vl__fail(err, VL_EPARSE, "line 1: more than %d columns", MAX_COLS);
    snprintf(head[nh++], sizeof head[0], "%.31s", buf);
  } while (e == 0);
  int ycol = -1, scol = -1, vcol[VL_FIT_MAX_VARS];
  for (size_t i = 0; i < nh; i++) {
    if (!strcmp(head[i], y)) ycol = (int)i;
    if (!strcmp(head[i], "status")) scol = (int)i;
  }
  if (ycol < 0) return vl__fail(err, VL_EKEY, "line 1: no '%s' column", y);
  if (nvars == 0) { /* every other column is a variable, but for measurements */
    for (size_t i = 0; i < nh; i++)
      if ((int)i != ycol && (int)i != scol && head[i][0] && !measurement(head[i]) &&
          p->nvars < VL_FIT_MAX_VARS) {
        snprintf(p->var[p->nvars], sizeof p->var[0], "%.23s", head[i]);
        vcol[p->nvars++] = (int)i;
      }
  } else {
    for (size_t v = 0; v < nvars && v < VL_FIT_MAX_VARS; v++) {
      vcol[v] = -1;
      for (size_t i = 0; i < nh; i++)
        if (!strcmp(head[i], vars[v])) vcol[v] = (int)i;
      if (vcol[v] < 0) return vl__fail(err, VL_EKEY, "line 1: no '%s' column", vars[v]);
      snprintf(p->var[v], sizeof p->var[0], "%s", vars[v]);
      p->nvars++;
    }
  }
  size_t cap = 64;
  p->x = vl_malloc(cap * VL_FIT_MAX_VARS * sizeof *p->x);
  p->y = vl_malloc(cap * sizeof *p->y);
  if (!p->x || !p->y) goto nomem;
  while (e != 2) {
    size_t line = c.line;
    double row[MAX_COLS];
    bool ok = true, empty = true;
    size_t col = 0;
    do {
      size_t at = c.col;
      e = field(&c, buf, sizeof buf);
      if (c.cut) {
        vl_points_release(p);
        return vl__fail(err, VL_EPARSE, "line %zu column %zu: a field longer than %zu bytes", line,
                        at, sizeof buf - 1);
      }
      if (buf[0]) empty = false;
      if (col >= nh) {
        vl_points_release(p);
        return vl__fail(err, VL_EPARSE, "line %zu column %zu: more fields than the header", line,
                        at);
      }
      if ((int)col == scol) {
        ok = strcmp(buf, "ok") == 0;
      } else {
        bool used = (int)col == ycol;
        for (size_t v = 0; v < p->nvars; v++)
          used |= vcol[v] == (int)col;
        char *endp;
        row[col] = used ? strtod(buf, &endp) : 0;
        if (used && (!plain_decimal(buf) || *endp || !isfinite(row[col]))) {
          if (!empty || buf[0]) {
            vl_points_release(p);
            return vl__fail(err, VL_EPARSE, "line %zu column %zu: '%s' is not a number (%s)", line,
                            at, buf, head[col]);
          }
        }
        if ((int)col == ycol && fabs(row[col]) > 9007199254740992.0) { /* 2^53 */
          vl_points_release(p);
          return vl__fail(err, VL_ERANGE,
                          "line %zu column %zu: %s %.17g is past 2^53, beyond what can be "
                          "represented exactly",
                          line, at, head[col], row[col]);
        }
      }
      col++;
    } while (e == 0);
    if (empty) continue; /* a blank line */
    if (col != nh) {
      vl_points_release(p);
      return vl__fail(err, VL_EPARSE, "line %zu: %zu fields, the header has %zu", line, col, nh);
    }
    if (!ok) {
      p->skipped++;
      continue;
    }
    if (p->n == cap) {
      cap *= 2;
      double *nx = vl_realloc(p->x, cap * VL_FIT_MAX_VARS * sizeof *p->x);
      if (!nx) goto nomem;
      p->x = nx;
      double *ny = vl_realloc(p->y, cap * sizeof *p->y);
      if (!ny) goto nomem;
      p->y = ny;
    }
    for (size_t v = 0; v < p->nvars; v++)
      p->x[p->n * VL_FIT_MAX_VARS + v] = row[vcol[v]];
    p->y[p->n++] = row[ycol];
  }
  return VL_OK;
nomem:
  vl_points_release(p);
  return vl__fail(err, VL_ENOMEM, "out of memory reading the points");
}

vl_status vl_points_append(struct vl_points *dst, const struct vl_points *src, struct vl_err *err) {
  int map[VL_FIT_MAX_VARS];
  bool same = src->nvars == dst->nvars;
  for (size_t k = 0; same && k < dst->nvars; k++) {
    map[k] = -1;
    for (size_t m = 0; m < src->nvars; m++)
      if (!strcmp(src->var[m], dst->var[k])) map[k] = (int)m;
    same = map[k] >= 0;
  }
  if (!same) {
    char a[256] = "", b[256] = "";
    for (size_t k = 0; k < dst->nvars; k++)
      snprintf(a + strlen(a), sizeof a - strlen(a), "%s%s", k ? "," : "", dst->var[k]);
    for (size_t k = 0; k < src->nvars; k++)
      snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", k ? "," : "", src->var[k]);
    return vl__fail(err, VL_EKEY, "the variables differ (%s against %s)", b, a);
  }
  size_t n = dst->n + src->n;
  double *nx = vl_realloc(dst->x, (n ? n : 1) * VL_FIT_MAX_VARS * sizeof *nx);
  if (!nx) return vl__fail(err, VL_ENOMEM, "out of memory merging the points");
  dst->x = nx;
  double *ny = vl_realloc(dst->y, (n ? n : 1) * sizeof *ny);
  if (!ny) return vl__fail(err, VL_ENOMEM, "out of memory merging the points");
  dst->y = ny;
  for (size_t i = 0; i < src->n; i++) {
    for (size_t k = 0; k < dst->nvars; k++)
      dst->x[(dst->n + i) * VL_FIT_MAX_VARS + k] = src->x[i * VL_FIT_MAX_VARS + (size_t)map[k]];
    dst->y[dst->n + i] = src->y[i];
  }
  dst->n = n;
  dst->skipped += src->skipped;
  return VL_OK;
}

void vl_points_release(struct vl_points *p) {
  if (!p) return;
  vl_free(p->x);
  vl_free(p->y);
  p->x = p->y = NULL;
  p->n = 0;
}

/* ---- terms ---------------------------------------------------------------- */

static int var_index(const struct vl_points *p, const char *name) {
  const char *alias = !strcmp(name, "b") ? "batch" : !strcmp(name, "s") ? "seq" : name;
  for (size_t i = 0; i < p->nvars; i++)
    if (!strcmp(p->var[i], alias)) return (int)i;
  return -1;
}

vl_status vl_terms_parse(const char *spec, const struct vl_points *p, struct vl_term_spec *t,
                         size_t *n, struct vl_err *err) {
  struct vl__list l;
  bool gap;
  *n = 0;
  if (!vl__list_init(&l, spec, ',')) /* never cut: a cut term may be another term */
    return vl__fail(err, VL_EINVAL, "the terms are longer than %zu bytes", sizeof l.buf - 1);
  for (char *tok; (tok = vl__list_next(&l, &gap));) {
    if (gap) /* the terms after it would be dropped */
      return vl__fail(err, VL_EINVAL, "an empty term after '%s'", tok);
    if (*n == VL_FIT_MAX_TERMS)
      return vl__fail(err, VL_EINVAL, "at most %d terms", VL_FIT_MAX_TERMS);
    struct vl_term_spec *x = &t[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%.31s", tok);
    if (!strcmp(tok, "const") || !strcmp(tok, "1")) continue;
    if (strchr(tok, '*') || strchr(tok, '^') || var_index(p, tok) >= 0) { /* batch*seq^2 */
      struct vl__list fs;
      (void)vl__list_init(&fs, tok, '*'); /* fits: tok is a part of l.buf */
      for (char *f; (f = vl__list_next(&fs, NULL));) {
        char *caret = strchr(f, '^');
        int pw = 1;
        if (caret) {
          *caret = '\0';
          long v = strtol(caret + 1, NULL, 10);
          pw = v > 0 && v <= 4 ? (int)v : 0;
        }
        int vi = var_index(p, f);
        if (vi < 0 || !pw || x->nf == 4)
          return vl__fail(err, VL_EINVAL, "term '%s': '%s' is not a variable of the points", tok,
                          f);
        x->var[x->nf] = vi;
        x->pow[x->nf++] = pw;
      }
      continue;
    }
    for (const char *c = tok; *c;) { /* short form: b, s, bs, bs2, s2 */
      char v[2] = {*c++, 0};
      int pw = 1;
      if (*c >= '1' && *c <= '4') pw = *c++ - '0';
      int vi = var_index(p, v);
      if (vi < 0 || x->nf == 4)
        return vl__fail(err, VL_EINVAL,
                        "term '%s': '%s' is not a variable of the points (b = batch, "
                        "s = seq)",
                        tok, v);
      x->var[x->nf] = vi;
      x->pow[x->nf++] = pw;
    }
  }
  if (!*n) return vl__fail(err, VL_EINVAL, "no terms");
  return VL_OK;
}

vl_status vl_point_parse(const char *spec, const struct vl_points *p, double *x,
                         struct vl_err *err) {
  bool seen[VL_FIT_MAX_VARS] = {false};
  struct vl__list l;
  if (!vl__list_init(&l, spec, ',')) /* never cut: a cut number is another number */
    return vl__fail(err, VL_EINVAL, "longer than %zu bytes", sizeof l.buf - 1);
  for (char *t; (t = vl__list_next(&l, NULL));) {
    char *eq = strchr(t, '=');
    if (!eq) return vl__fail(err, VL_EINVAL, "expected NAME=VALUE,... (%s)", t);
    *eq = '\0';
    int k = var_index(p, t); /* b and s name batch and seq, as in the terms */
    char *end;
    double v = strtod(eq + 1, &end);
    if (k < 0 || *end || !isfinite(v) || !plain_decimal(eq + 1))
      return vl__fail(err, VL_EINVAL, "'%s' is not a variable of the points or not a number", t);
    x[k] = v;
    seen[k] = true;
  }
  for (size_t k = 0; k < p->nvars; k++)
    if (!seen[k]) return vl__fail(err, VL_EINVAL, "give %s too", p->var[k]);
  return VL_OK;
}

void vl_terms_eval(const struct vl_term_spec *t, size_t nt, const double *x, double *out) {
  for (size_t k = 0; k < nt; k++) {
    double v = 1.0;
    for (int f = 0; f < t[k].nf; f++)
      v *= pow(x[t[k].var[f]], t[k].pow[f]);
    out[k] = v;
  }
}

/* ---- fitting ------------------------------------------------------------- */

/* Fit rows except `skip` (SIZE_MAX: none); coefficients and covariance in
 * the original units. */
static vl_status solve(const struct vl_points *p, const struct vl_term_spec *t, size_t nt,
                       size_t skip, double *coef,
                       double cov_out[VL_FIT_MAX_TERMS][VL_FIT_MAX_TERMS], double *chisq,
                       double *rcond) {
  size_t n = p->n - (skip < p->n ? 1 : 0);
  gsl_matrix *X = gsl_matrix_alloc(n, nt), *cov = gsl_matrix_alloc(nt, nt);
  gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc(nt);
  gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, nt);
  if (!X || !cov || !y || !c || !w) {
    if (X) gsl_matrix_free(X);
    if (cov) gsl_matrix_free(cov);
    if (y) gsl_vector_free(y);
    if (c) gsl_vector_free(c);
    if (w) gsl_multifit_linear_free(w);
    return VL_ENOMEM;
  }
  double scale[VL_FIT_MAX_TERMS] = {0}, row[VL_FIT_MAX_TERMS];
  for (size_t i = 0, r = 0; i < p->n; i++) {
    if (i == skip) continue;
    vl_terms_eval(t, nt, &p->x[i * VL_FIT_MAX_VARS], row);
    for (size_t k = 0; k < nt; k++) {
      gsl_matrix_set(X, r, k, row[k]);
      scale[k] = fmax(scale[k], fabs(row[k]));
    }
    gsl_vector_set(y, r++, p->y[i]);
  }
  for (size_t k = 0; k < nt; k++) { /* columns scaled to 1: conditioning */
    if (scale[k] == 0) scale[k] = 1;
    for (size_t r = 0; r < n; r++)
      gsl_matrix_set(X, r, k, gsl_matrix_get(X, r, k) / scale[k]);
  }
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int st = gsl_multifit_linear(X, y, c, cov, chisq, w);
  *rcond = gsl_multifit_linear_rcond(w);
  gsl_set_error_handler(old);
  for (size_t k = 0; k < nt; k++) {
    coef[k] = gsl_vector_get(c, k) / scale[k];
    if (cov_out)
      for (size_t l = 0; l < nt; l++)
        cov_out[k][l] = gsl_matrix_get(cov, k, l) / (scale[k] * scale[l]);
  }
  gsl_matrix_free(X);
  gsl_matrix_free(cov);
  gsl_vector_free(y);
  gsl_vector_free(c);
  gsl_multifit_linear_free(w);
  return st ? VL_ERANGE : VL_OK;
}

/* The leave-one-out relative errors of the fit coef: e_i / (1 - h_ii),
 * h_ii = x_i' (X'X)^-1 x_i with X's columns scaled to 1 as solve() scales
 * them; a point the others cannot fit without (h_ii = 1) is left out, as
 * a refit without it would fail. */
static vl_status loo(const struct vl_points *p, const struct vl_term_spec *t, size_t nt,
                     const double *coef, double *rms, double *mx) {
  double scale[VL_FIT_MAX_TERMS] = {0}, row[VL_FIT_MAX_TERMS];
  for (size_t i = 0; i < p->n; i++) {
    vl_terms_eval(t, nt, &p->x[i * VL_FIT_MAX_VARS], row);
    for (size_t k = 0; k < nt; k++)
      scale[k] = fmax(scale[k], fabs(row[k]));
  }
  for (size_t k = 0; k < nt; k++)
    if (scale[k] == 0) scale[k] = 1;
  gsl_matrix *A = gsl_matrix_calloc(nt, nt);
  gsl_permutation *perm = gsl_permutation_alloc(nt);
  gsl_matrix *inv = gsl_matrix_alloc(nt, nt);
  if (!A || !perm || !inv) {
    if (A) gsl_matrix_free(A);
    if (perm) gsl_permutation_free(perm);
    if (inv) gsl_matrix_free(inv);
    return VL_ENOMEM;
  }
  for (size_t i = 0; i < p->n; i++) { /* X'X, scaled */
    vl_terms_eval(t, nt, &p->x[i * VL_FIT_MAX_VARS], row);
    for (size_t k = 0; k < nt; k++)
      for (size_t l = 0; l < nt; l++)
        *gsl_matrix_ptr(A, k, l) += row[k] / scale[k] * (row[l] / scale[l]);
  }
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int sign = 0;
  bool ok = gsl_linalg_LU_decomp(A, perm, &sign) == 0 && gsl_linalg_LU_invert(A, perm, inv) == 0;
  gsl_set_error_handler(old);
  double sum = 0, worst = 0;
  for (size_t i = 0; ok && i < p->n; i++) {
    vl_terms_eval(t, nt, &p->x[i * VL_FIT_MAX_VARS], row);
    double yhat = 0, h = 0;
    for (size_t k = 0; k < nt; k++) {
      yhat += coef[k] * row[k];
      for (size_t l = 0; l < nt; l++)
        h += row[k] / scale[k] * gsl_matrix_get(inv, k, l) * (row[l] / scale[l]);
    }
    if (!(1.0 - h > 1e-12)) continue;
    double yl = p->y[i] - (p->y[i] - yhat) / (1.0 - h); /* the fit without point i, at it */
    double e = p->y[i] ? fabs(yl - p->y[i]) / fabs(p->y[i]) : 0;
    sum += e * e;
    worst = fmax(worst, e);
  }
  gsl_matrix_free(A);
  gsl_matrix_free(inv);
  gsl_permutation_free(perm);
  *rms = sqrt(sum / (double)p->n);
  *mx = worst;
  return VL_OK;
}

vl_status vl_fit_points(const struct vl_points *p, const struct vl_term_spec *t, size_t nt,
                        struct vl_fit_result *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  if (nt > VL_FIT_MAX_TERMS) return vl__fail(err, VL_EINVAL, "too many terms");
  if (p->n < nt + 1)
    return vl__fail(err, VL_ERANGE, "%zu points for %zu terms: give at least %zu points", p->n, nt,
                    nt + 1);
  double chisq, rcond;
  vl_status s = solve(p, t, nt, SIZE_MAX, r->coef, r->cov, &chisq, &rcond);
  if (s == VL_ENOMEM) return vl__fail(err, s, "out of memory fitting");
  if (s != VL_OK || !(rcond > 1e-10))
    return vl__fail(err, VL_ERANGE,
                    "the terms cannot be told apart on these points (condition %.2g): vary the "
                    "variables more, or drop a term",
                    rcond);
  r->n = p->n;
  r->p = nt;
  double mean = 0, tss = 0;
  for (size_t i = 0; i < p->n; i++)
    mean += p->y[i] / (double)p->n;
  for (size_t i = 0; i < p->n; i++)
    tss += (p->y[i] - mean) * (p->y[i] - mean);
  r->r2 = tss > 0 ? 1.0 - chisq / tss : 1.0;
  size_t dof = p->n - nt;
  r->sigma = sqrt(chisq / (double)dof);
  r->t95 = gsl_cdf_tdist_Pinv(0.975, (double)dof);
  for (size_t k = 0; k < nt; k++)
    r->ci95[k] = r->t95 * sqrt(fmax(0.0, r->cov[k][k]));
  /* leave one out: each point predicted by the fit without it, from the
   * one fit: its residual over 1 - its leverage (the hat matrix's
   * diagonal; Cook & Weisberg, Residuals and Influence in Regression,
   * 1982, eq. 2.2.21) -- O(n p^2), not n refits */
  if (p->n >= nt + 2) {
    vl_status ls = loo(p, t, nt, r->coef, &r->loo_rel_rms, &r->loo_rel_max);
    if (ls != VL_OK) return vl__fail(err, ls, "out of memory fitting");
  }
  return VL_OK;
}

double vl_fit_predict(const struct vl_fit_result *r, const struct vl_term_spec *t, size_t nt,
                      const double *x, double *hw) {
  double row[VL_FIT_MAX_TERMS], y = 0, var = 0;
  vl_terms_eval(t, nt, x, row);
  for (size_t k = 0; k < nt; k++)
    y += r->coef[k] * row[k];
  for (size_t k = 0; k < nt; k++)
    for (size_t l = 0; l < nt; l++)
      var += row[k] * r->cov[k][l] * row[l];
  if (hw) *hw = r->t95 * sqrt(fmax(0.0, var + r->sigma * r->sigma));
  return y;
}

void vl_fit_predict_parts(const struct vl_fit_result *r, const struct vl_term_spec *t, size_t nt,
                          struct vl_fit_prediction *p) {
  p->y = vl_fit_predict(r, t, nt, p->x, &p->half_width);
  p->estimate = NAN;
  double row[VL_FIT_MAX_TERMS];
  vl_terms_eval(t, nt, p->x, row);
  p->linear = p->quadratic = 0;
  for (size_t k = 0; k < nt; k++) {
    bool square = false;
    for (int f = 0; f < t[k].nf; f++)
      square |= t[k].pow[f] >= 2;
    if (square)
      p->quadratic += r->coef[k] * row[k];
    else
      p->linear += r->coef[k] * row[k];
  }
}

static bool same_others(const double *a, const double *b, size_t nvars, size_t axis) {
  for (size_t k = 0; k < nvars; k++)
    if (k != axis && a[k] != b[k]) return false;
  return true;
}

size_t vl_fit_curves(const struct vl_points *p, const struct vl_fit_result *r,
                     const struct vl_term_spec *t, size_t nt, const struct vl_fit_prediction *pred,
                     size_t n_pred, size_t axis, struct vl_fit_curve *c, size_t max) {
  double lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  for (size_t i = 0; i < p->n + n_pred; i++) {
    const double *x = i < p->n ? p->x + i * VL_FIT_MAX_VARS : pred[i - p->n].x;
    lo = fmin(lo, x[axis]);
    hi = fmax(hi, x[axis]);
    size_t k = 0;
    while (k < n && !same_others(c[k].fixed, x, p->nvars, axis))
      k++;
    if (k == n && n < max) {
      memcpy(c[n].fixed, x, sizeof c[n].fixed);
      c[n++].n = 0;
    }
  }
  for (size_t k = 0; k < n; k++) {
    double x[VL_FIT_MAX_VARS];
    memcpy(x, c[k].fixed, sizeof x);
    c[k].n = VL_FIT_CURVE_N;
    for (size_t i = 0; i < VL_FIT_CURVE_N; i++) {
      x[axis] = lo + (hi - lo) * (double)i / (VL_FIT_CURVE_N - 1);
      c[k].x[i] = x[axis];
      c[k].y[i] = vl_fit_predict(r, t, nt, x, NULL);
    }
  }
  return n;
}

size_t vl_terms_without_squares(const struct vl_term_spec *t, size_t nt, struct vl_term_spec *out) {
  size_t n = 0;
  for (size_t k = 0; k < nt; k++) {
    bool square = false;
    for (int j = 0; j < t[k].nf; j++)
      square |= t[k].pow[j] > 1;
    if (!square) out[n++] = t[k];
  }
  return n;
}

const char *vl_fit_take_larger(const struct vl_fit_result *ro, const struct vl_term_spec *to,
                               size_t nto, struct vl_fit_prediction *q) {
  struct vl_fit_prediction o = {0};
  memcpy(o.x, q->x, sizeof o.x);
  vl_fit_predict_parts(ro, to, nto, &o);
  if (o.y <= q->y) return "forward/backward";
  o.estimate = q->estimate;
  o.disagree = q->disagree;
  *q = o;
  return "optimizer";
}

double vl_fit_larger_max_rel(const struct vl_points *p, const struct vl_fit_result *r,
                             const struct vl_term_spec *t, size_t nt,
                             const struct vl_fit_result *ro, const struct vl_term_spec *to,
                             size_t nto) {
  double worst = 0;
  for (size_t i = 0; i < p->n; i++) {
    struct vl_fit_prediction q = {0};
    memcpy(q.x, p->x + i * VL_FIT_MAX_VARS, sizeof q.x);
    vl_fit_predict_parts(r, t, nt, &q);
    (void)vl_fit_take_larger(ro, to, nto, &q);
    double e = p->y[i] > 0 ? fabs(q.y - p->y[i]) / p->y[i] : 0;
    if (e > worst) worst = e;
  }
  return worst;
}

vl_status vl_fit_curves_larger(const struct vl_points *p, const struct vl_fit_result *r,
                               const struct vl_term_spec *t, size_t nt,
                               const struct vl_fit_result *ro, const struct vl_term_spec *to,
                               size_t nto, const struct vl_fit_prediction *pred, size_t n_pred,
                               size_t axis, struct vl_fit_curve *c, size_t max, size_t *n_curves) {
  *n_curves = 0;
  struct vl_fit_curve *o = vl_calloc(max ? max : 1, sizeof *o);
  if (!o) return VL_ENOMEM;
  size_t n = vl_fit_curves(p, r, t, nt, pred, n_pred, axis, c, max);
  size_t m = vl_fit_curves(p, ro, to, nto, pred, n_pred, axis, o, max);
  for (size_t k = 0; k < n && k < m; k++) /* the same grids: the larger of the two */
    for (size_t i = 0; i < c[k].n && i < o[k].n; i++)
      c[k].y[i] = fmax(c[k].y[i], o[k].y[i]);
  vl_free(o);
  *n_curves = n;
  return VL_OK;
}
