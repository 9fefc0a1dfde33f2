/* vramledger: the memory formula fitted on measured points:
 * constant + linear + quadratic in sequence length, regressed on ~20
 * configurations). Least squares by GSL (gsl_multifit_linear). Pure. */
#ifndef VRAMLEDGER_REGRESS_H
#define VRAMLEDGER_REGRESS_H
#include <stdbool.h>
#include <stddef.h>

#include "vramledger/status.h"

#define VL_FIT_MAX_VARS 8
#define VL_FIT_MAX_TERMS 12

struct vl_points {
  size_t n, nvars;
  char var[VL_FIT_MAX_VARS][24]; /* column names, e.g. "batch", "seq" */
  double *x;                     /* n rows of VL_FIT_MAX_VARS (nvars used) */
  double *y;                     /* peak_bytes */
  size_t skipped;                /* rows whose status was not ok (out of memory, ...) */
};

/*! Read a CSV with a header: the variables' columns, `peak_bytes`, and
 * optionally `status` (rows not "ok" are skipped). Only the columns in
 * vars[] (or all but peak_bytes/status when nvars is 0) are read.
 * @return VL_OK, VL_EPARSE ("line L column C: ..."), VL_EKEY (missing
 * column), VL_ENOMEM. Release with vl_points_release. */
vl_status vl_points_parse(const char *text, size_t len, const char *const *vars, size_t nvars,
                          struct vl_points *p, struct vl_err *err) VL_MUST_USE;
/*! The same, with y from the column named y (e.g. "peak_fwd_bwd_bytes"). */
vl_status vl_points_parse_y(const char *text, size_t len, const char *const *vars, size_t nvars,
                            const char *y, struct vl_points *p, struct vl_err *err) VL_MUST_USE;
void vl_points_release(struct vl_points *p);

/*! Append src's points to dst; both must have the same variables (in any
 * order). @return VL_OK, VL_EKEY naming both sets, VL_ENOMEM. */
vl_status vl_points_append(struct vl_points *dst, const struct vl_points *src,
                           struct vl_err *err) VL_MUST_USE;

/* A term: a product of variables with powers ("const" has none). */
struct vl_term_spec {
  char name[32];
  int nf;
  int var[4]; /* index into the points' variables */
  int pow[4];
};

/*! Parse "const,b,bs,bs2" (b = batch, s = seq) or "batch*seq^2" against
 * the variables. @return VL_OK or VL_EINVAL naming the term. */
vl_status vl_terms_parse(const char *spec, const struct vl_points *p, struct vl_term_spec *terms,
                         size_t *n, struct vl_err *err) VL_MUST_USE;

/*! Parse a point "batch=32,seq=1024" (fit --predict) against the points'
 * variables into x[VL_FIT_MAX_VARS]; every variable must be given, each a
 * finite number. @return VL_OK or VL_EINVAL saying what is wrong. */
vl_status vl_point_parse(const char *spec, const struct vl_points *p, double *x,
                         struct vl_err *err) VL_MUST_USE;

struct vl_fit_result {
  size_t n, p;
  double coef[VL_FIT_MAX_TERMS];
  double ci95[VL_FIT_MAX_TERMS]; /* half-width of the 95 % interval */
  double cov[VL_FIT_MAX_TERMS][VL_FIT_MAX_TERMS];
  double r2;
  double sigma;       /* residual standard deviation, bytes */
  double loo_rel_rms; /* leave-one-out relative RMS error */
  double loo_rel_max;
  double t95; /* Student t quantile used */
};

/*! Least squares of y on the terms (columns scaled for conditioning).
 * @return VL_OK; VL_ERANGE when there are fewer points than terms + 1, or
 * the design is ill-conditioned (message says which). */
vl_status vl_fit_points(const struct vl_points *p, const struct vl_term_spec *t, size_t nt,
                        struct vl_fit_result *r, struct vl_err *err) VL_MUST_USE;

/*! Value of each term at x (nvars values). */
void vl_terms_eval(const struct vl_term_spec *t, size_t nt, const double *x, double *out);

struct vl_fit_prediction {
  double x[VL_FIT_MAX_VARS];
  double y, half_width;     /* bytes; 95 % prediction interval */
  double linear, quadratic; /* constant + linear terms, and terms with a square */
  double estimate;          /* the estimator at x, bytes; NAN when not asked */
  bool disagree;            /* vl_fit_disagrees(y, half_width, estimate) */
};

/*! Prediction at p->x, with its interval and its parts, filled into *p. */
void vl_fit_predict_parts(const struct vl_fit_result *r, const struct vl_term_spec *t, size_t nt,
                          struct vl_fit_prediction *p);

/*! Prediction at x with its 95 % prediction interval half-width. */
double vl_fit_predict(const struct vl_fit_result *r, const struct vl_term_spec *t, size_t nt,
                      const double *x, double *half_width);

#define VL_FIT_CURVE_N 48
#define VL_FIT_MAX_CURVES 12

/* The fitted peak along one variable, the others fixed. */
struct vl_fit_curve {
  double fixed[VL_FIT_MAX_VARS]; /* the other variables' values (axis entry unused) */
  size_t n;
  double x[VL_FIT_CURVE_N], y[VL_FIT_CURVE_N];
};

/*! Curves of the fit along variable `axis`, one per distinct combination of
 * the other variables among the points and the predictions (at most max,
 * the first met), from the smallest to the largest axis value among them.
 * @return the number of curves. */
size_t vl_fit_curves(const struct vl_points *p, const struct vl_fit_result *r,
                     const struct vl_term_spec *t, size_t nt, const struct vl_fit_prediction *pred,
                     size_t n_pred, size_t axis, struct vl_fit_curve *c, size_t max);

/* ---- a peak that is the larger of two fits (fit --by-phase) ------------ */
/*! The terms of t without a square (a power above 1), into out; their
 * count. The optimizer step's peak is fitted on these: nothing quadratic
 * in the sequence lives into the step. */
size_t vl_terms_without_squares(const struct vl_term_spec *t, size_t nt, struct vl_term_spec *out);
/*! *q holds the first fit's prediction at q->x; where the second fit
 * (ro over to) predicts more, *q becomes that one. @return the phase that
 * won: "forward/backward" (the first) or "optimizer" (the second). */
const char *vl_fit_take_larger(const struct vl_fit_result *ro, const struct vl_term_spec *to,
                               size_t nto, struct vl_fit_prediction *q);
/*! vl_fit_curves of the larger of the two fits (same grids), their count
 * in *n_curves. @return VL_OK, or VL_ENOMEM (*n_curves 0: never the first
 * fit's curves alone). */
vl_status vl_fit_curves_larger(const struct vl_points *p, const struct vl_fit_result *r,
                               const struct vl_term_spec *t, size_t nt,
                               const struct vl_fit_result *ro, const struct vl_term_spec *to,
                               size_t nto, const struct vl_fit_prediction *pred, size_t n_pred,
                               size_t axis, struct vl_fit_curve *c, size_t max,
                               size_t *n_curves) VL_MUST_USE;
/*! The largest |larger of the two fits - y| / y over the points. */
double vl_fit_larger_max_rel(const struct vl_points *p, const struct vl_fit_result *r,
                             const struct vl_term_spec *t, size_t nt,
                             const struct vl_fit_result *ro, const struct vl_term_spec *to,
                             size_t nto);

/* ---- the estimator at the same points (lib/decide/fitest.c) ------------- */

struct vl_arch;
struct vl_job;
struct vl_overheads;

/* Which of the estimator's peaks the points' peak_bytes measure. */
enum vl_fit_measure {
  VL_FIT_TOTAL,     /* NVML process memory (what `sweep` writes) */
  VL_FIT_RESERVED,  /* torch.cuda.max_memory_reserved() */
  VL_FIT_ALLOCATED, /* torch.cuda.max_memory_allocated() */
};

/*! Every variable of the points is one the estimator knows (batch, seq).
 * @return VL_OK or VL_EINVAL naming the variable. */
vl_status vl_fit_check_vars(const struct vl_points *p, struct vl_err *err) VL_MUST_USE;

/*! The estimator's peak (*bytes) for the job base with the points'
 * variables set to x. @return VL_OK; VL_ERANGE for a value that is not a
 * whole number; what vl_bill_compute returns otherwise. */
vl_status vl_fit_estimate_at(const struct vl_points *p, const double *x, const struct vl_arch *arch,
                             const struct vl_job *base, const struct vl_overheads *ov,
                             enum vl_fit_measure m, double *bytes, struct vl_err *err) VL_MUST_USE;

/* A fit read back from `fit --format json`, to evaluate elsewhere
 * (sensitivity --fit). */
struct vl_fitted {
  struct vl_points vars; /* names only (n = 0) */
  struct vl_term_spec terms[VL_FIT_MAX_TERMS];
  double coef[VL_FIT_MAX_TERMS];
  size_t nt;
};

/*! Parse the JSON of `fit --format json` (schema vramledger.fit/1 with
 * variables, terms, coefficients). @return VL_OK, VL_EPARSE (line and
 * column), VL_EKEY (a missing or wrong field, named). */
vl_status vl_fitted_parse(const char *text, size_t len, struct vl_fitted *f,
                          struct vl_err *err) VL_MUST_USE;

/*! The fitted peak at x (the fit's variables, in its order), bytes. */
double vl_fitted_eval(const struct vl_fitted *f, const double *x);

/* The estimator and the fit disagree when they are further apart than this
 * share of the fit and than the fit's 95 % prediction interval. */
#define VL_FIT_DISAGREE 0.10

/*! |estimate - fit| > max(VL_FIT_DISAGREE * fit, half_width). */
bool vl_fit_disagrees(double fit, double half_width, double estimate);

/* The estimator against the measured points, in relative error
 * (estimate - measured) / measured. */
struct vl_fit_est_summary {
  double mean_abs_rel; /* mean |error| */
  double worst_rel;    /* the error of largest magnitude, signed */
  size_t worst;        /* its point */
  size_t beyond;       /* points with |error| > VL_FIT_DISAGREE */
};

/*! Summarise estimate[0..p->n) against p->y. */
void vl_fit_est_summarize(const struct vl_points *p, const double *estimate,
                          struct vl_fit_est_summary *s);

#endif
