/* vramledger fit: the memory formula fitted on measured points.
 * docs/cmd/fit.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/model.h"
#include "vramledger/regress.h"
#include "vramledger/render.h"

#define MAX_PREDICT 64
#define MAX_SOURCES 32

static const char *const measures[] = {"total", "reserved", "allocated", NULL};

struct fo {
  const char *src[MAX_SOURCES]; /* CSV files or sweep directories */
  int n_src;
  char label[4200]; /* what the fit is of, for messages and the report */
  const char *terms, *compare;
  const char *predict[MAX_PREDICT];
  int n_predict, fmt;
  bool by_phase;
  struct est e;
};

/* fit's own flags (--predict repeats); the rest are the job's flags, for
 * the estimator at the same points (--model ...), and --format, --help. */
/* One source: a CSV, or a sweep's directory (its sweep.csv). */
static int load_one(const char *src, const char *y, struct vl_points *p, char *path, size_t n) {
  struct stat st;
  bool dir = stat(src, &st) == 0 && S_ISDIR(st.st_mode);
  snprintf(path, n, dir ? "%s/sweep.csv" : "%s", src);
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) {
    if (dir) cli_hint("a directory given to fit is a sweep's --out, with its sweep.csv");
    return VL_EXIT_ERROR;
  }
  struct vl_err err = {""};
  vl_status s = vl_points_parse_y(text, len, NULL, 0, y, p, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot read '%s': %s", path, err.msg);
    if (s == VL_EKEY && strcmp(y, "peak_bytes"))
      cli_hint("--by-phase needs a sweep of a PyTorch training job with the probe; a sweep made "
               "before these columns existed gets them when run again with the same --out (its "
               "points are not run again)");
    return VL_EXIT_ERROR;
  }
  return 0;
}

/* Is the file at path one read before (seen[0..n), by device and inode)?
 * The same CSV given twice (by two names, or a sweep and its sweep.csv)
 * would count its points twice and narrow the fit's intervals. */
static int twice(const char *path, struct stat *seen, int n, const char *const *src) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  for (int i = 0; i < n; i++)
    if (seen[i].st_dev == st.st_dev && seen[i].st_ino == st.st_ino) {
      if (strcmp(src[i], src[n]) == 0)
        cli_error("'%s' is given twice: its points would count twice", src[n]);
      else
        cli_error("'%s' is '%s' again: its points would count twice", src[n], src[i]);
      cli_hint("give each sweep or CSV file once");
      return VL_EXIT_USAGE;
    }
  seen[n] = st;
  return 0;
}

/* Drop the rows that repeat an earlier one exactly (every variable and
 * y): the same measurement twice is no new point. @return how many. */
static size_t drop_repeats(struct vl_points *p) {
  size_t kept = 0;
  for (size_t i = 0; i < p->n; i++) {
    const double *x = p->x + i * VL_FIT_MAX_VARS;
    bool seen = false;
    for (size_t j = 0; j < kept && !seen; j++)
      seen = p->y[j] == p->y[i] && memcmp(p->x + j * VL_FIT_MAX_VARS, x, p->nvars * sizeof *x) == 0;
    if (seen) continue;
    memmove(p->x + kept * VL_FIT_MAX_VARS, x, VL_FIT_MAX_VARS * sizeof *x);
    p->y[kept++] = p->y[i];
  }
  size_t dropped = p->n - kept;
  p->n = kept;
  return dropped;
}

/* All sources' points in one set, y from column y; the label names them.
 * Rows that repeat another exactly are dropped, with a note. */
static int load_points(struct fo *f, const char *y, struct vl_points *pts) {
  char path[4096];
  struct stat seen[MAX_SOURCES];
  int rc = load_one(f->src[0], y, pts, path, sizeof path);
  if (!rc && (rc = twice(path, seen, 0, f->src))) vl_points_release(pts);
  if (rc) return rc;
  snprintf(f->label, sizeof f->label, "%s", path);
  for (int i = 1; i < f->n_src; i++) {
    struct vl_points more;
    if ((rc = load_one(f->src[i], y, &more, path, sizeof path))) break;
    if ((rc = twice(path, seen, i, f->src))) {
      vl_points_release(&more);
      break;
    }
    struct vl_err err = {""};
    vl_status s = vl_points_append(pts, &more, &err);
    vl_points_release(&more);
    if (s != VL_OK) {
      cli_error("cannot add '%s' to '%s': %s", path, f->label, err.msg);
      rc = VL_EXIT_ERROR;
      break;
    }
  }
  if (rc) {
    vl_points_release(pts);
    return rc;
  }
  if (f->n_src > 1) {
    size_t l = strlen(f->label);
    snprintf(f->label + l, sizeof f->label - l, " and %d more", f->n_src - 1);
  }
  size_t dropped = drop_repeats(pts);
  if (dropped)
    fprintf(stderr,
            "vramledger: note: %zu row%s of %s repeat%s another exactly (every variable and %s): "
            "counted once\n",
            dropped, dropped == 1 ? "" : "s", f->label, dropped == 1 ? "s" : "", y);
  return 0;
}

static int parse(int argc, const char **argv, struct fo *f) {
  const char *rest[256];
  int n = 0;
  if (argc > 255) {
    cli_error("too many arguments");
    return VL_EXIT_USAGE;
  }
  int i = 1;
  rest[n++] = argv[0];
  for (; i < argc && argv[i][0] != '-'; i++) { /* leading RUN_DIRS */
    if (f->n_src == MAX_SOURCES) {
      cli_error("at most %d sweeps or CSV files", MAX_SOURCES);
      return VL_EXIT_USAGE;
    }
    f->src[f->n_src++] = argv[i];
  }
  for (; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--by-phase")) {
      f->by_phase = true;
      continue;
    }
    static const char *const own[] = {"--csv",     "--terms",  "--predict",
                                      "--compare", "--format", NULL};
    int k = -1;
    for (int m = 0; own[m]; m++) {
      size_t l = strlen(own[m]);
      if (!strncmp(a, own[m], l) && (a[l] == '\0' || a[l] == '=')) {
        k = m;
        v = a[l] == '=' ? a + l + 1 : NULL;
        break;
      }
    }
    if (k < 0) {
      rest[n++] = a;
      continue;
    }
    if (!v && i + 1 >= argc) {
      cli_error("option '%s' needs a value", own[k]);
      return VL_EXIT_USAGE;
    }
    if (!v) v = argv[++i];
    if (k == 0) {
      if (f->n_src == MAX_SOURCES) {
        cli_error("at most %d sweeps or CSV files", MAX_SOURCES);
        return VL_EXIT_USAGE;
      }
      f->src[f->n_src++] = v;
    } else if (k == 1) {
      f->terms = v;
    } else if (k == 2) {
      if (f->n_predict == MAX_PREDICT) {
        cli_error("at most %d --predict", MAX_PREDICT);
        return VL_EXIT_USAGE;
      }
      f->predict[f->n_predict++] = v;
    } else if (k == 3) {
      if (cli_choice("compare", v, measures) < 0) return VL_EXIT_USAGE;
      f->compare = v;
    } else {
      static const char *const formats[] = {"text", "json", "md", "html", NULL};
      if ((f->fmt = cli_choice("format", v, formats)) < 0) return VL_EXIT_USAGE;
    }
  }
  est_init(&f->e);
  int rc = est_parse(n, rest, &f->e);
  if (rc || f->e.model || f->e.help) return rc;
  if (n > 1) { /* job flags mean nothing without a model */
    cli_error("'%s' describes the job for the estimator: give --model too", rest[1]);
    return VL_EXIT_USAGE;
  }
  return 0;
}

/* "batch=32,seq=1024" -> x[]; every variable of the points must be given,
 * batch and seq as whole numbers from 1 (a job has no batch -1: the
 * fitted formula there is no memory). */
static int parse_point(const char *s, const struct vl_points *p, double *x) {
  struct vl_err err = {""};
  if (vl_point_parse(s, p, x, &err) != VL_OK) {
    cli_error("--predict '%s': %s", s, err.msg);
    return VL_EXIT_USAGE;
  }
  for (size_t k = 0; k < p->nvars; k++) {
    bool b = !strcmp(p->var[k], "batch"), q = !strcmp(p->var[k], "seq");
    double hi = b ? 1u << 20 : 1u << 24; /* as --batch and --seq take them */
    if ((b || q) && !(x[k] >= 1 && x[k] <= hi && x[k] == floor(x[k]))) {
      cli_error("--predict '%s': %s %g is out of range: give a whole number from 1 to %.0f", s,
                p->var[k], x[k], hi);
      return VL_EXIT_USAGE;
    }
  }
  return 0;
}

/* The estimator at every point and every prediction (--model given). */
static int estimates(const struct fo *f, const struct vl_points *pts, struct vl_fit_prediction *px,
                     double **out) {
  struct vl_err err = {""};
  if (vl_fit_check_vars(pts, &err) != VL_OK) {
    cli_error("cannot compare '%s' with the estimator: %s", f->label, err.msg);
    return VL_EXIT_USAGE;
  }
  struct vl_arch arch;
  int rc = cli_load_model(f->e.model, &arch);
  if (rc) return rc;
  int m = 0;
  while (f->compare && strcmp(measures[m], f->compare))
    m++;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  double *est = vl_calloc(pts->n + 1, sizeof *est);
  if (!est) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  vl_status s = VL_OK;
  for (size_t i = 0; i < pts->n && s == VL_OK; i++)
    s = vl_fit_estimate_at(pts, pts->x + i * VL_FIT_MAX_VARS, &arch, &f->e.job, &ov,
                           (enum vl_fit_measure)m, &est[i], &err);
  for (int i = 0; i < f->n_predict && s == VL_OK; i++) {
    s = vl_fit_estimate_at(pts, px[i].x, &arch, &f->e.job, &ov, (enum vl_fit_measure)m,
                           &px[i].estimate, &err);
    px[i].disagree = vl_fit_disagrees(px[i].y, px[i].half_width, px[i].estimate);
  }
  if (s != VL_OK) {
    cli_error("cannot estimate at the points of '%s': %s", f->label, err.msg);
    vl_free(est);
    return s == VL_ENOMEM ? VL_EXIT_ERROR : VL_EXIT_USAGE;
  }
  *out = est;
  return 0;
}

/* v's curves along its axis, for the plot (with --by-phase the larger of
 * the two fits), into *curves, the caller's to vl_free. @return 0, or
 * VL_EXIT_ERROR (said): never a plot of the first fit alone, or of none. */
static int fit_curves(const struct fo *f, struct vl_fit_view *v, struct vl_fit_curve **curves) {
  *curves = vl_calloc(VL_FIT_MAX_CURVES, sizeof **curves);
  vl_status s = *curves ? VL_OK : VL_ENOMEM;
  if (s == VL_OK && v->fit_opt)
    s = vl_fit_curves_larger(v->pts, v->fit, v->terms, v->n_terms, v->fit_opt, v->opt_terms,
                             v->n_opt_terms, v->predictions, v->n_predict, v->axis, *curves,
                             VL_FIT_MAX_CURVES, &v->n_curves);
  else if (s == VL_OK)
    v->n_curves = vl_fit_curves(v->pts, v->fit, v->terms, v->n_terms, v->predictions, v->n_predict,
                                v->axis, *curves, VL_FIT_MAX_CURVES);
  if (s != VL_OK) {
    cli_error("cannot draw the fit of '%s': %s", f->label, vl_strerror(s));
    vl_free(*curves);
    *curves = NULL;
    return VL_EXIT_ERROR;
  }
  v->curves = *curves;
  return 0;
}

int cmd_fit(int argc, const char **argv) {
  struct fo f = {0};
  int rc = parse(argc, argv, &f);
  if (rc) return rc;
  if (f.e.help) {
    fputs(vl_help_fit, stdout);
    return VL_EXIT_OK;
  }
  if (!f.n_src) {
    cli_error("fit needs the points: --csv FILE (columns: the variables, peak_bytes, optionally "
              "status) or the directory of a sweep");
    return VL_EXIT_USAGE;
  }
  /* --by-phase: the overall peak measured (for the table and the
   * estimator), the forward/backward and optimizer peaks fitted apart */
  struct vl_points pts, act = {0}, opt = {0};
  if ((rc = load_points(&f, f.by_phase ? "peak_allocated_bytes" : "peak_bytes", &pts))) return rc;
  if (f.by_phase) {
    if ((rc = load_points(&f, "peak_fwd_bwd_bytes", &act)) == 0 &&
        (rc = load_points(&f, "peak_optimizer_bytes", &opt)) != 0)
      vl_points_release(&act);
    if (rc) {
      vl_points_release(&pts);
      return rc;
    }
    if (!f.compare) f.compare = "allocated";
  }
  vl_status s;
  struct vl_err err = {""};
  bool has_b = false, has_s = false;
  for (size_t k = 0; k < pts.nvars; k++) {
    has_b |= !strcmp(pts.var[k], "batch");
    has_s |= !strcmp(pts.var[k], "seq");
  }
  const char *terms = f.terms          ? f.terms
                      : has_b && has_s ? "const,b,bs,bs2"
                      : has_s          ? "const,s,s2"
                                       : NULL;
  char deflt[256] = "const";
  if (!terms) {
    for (size_t k = 0; k < pts.nvars; k++) {
      size_t l = strlen(deflt);
      snprintf(deflt + l, sizeof deflt - l, ",%s", pts.var[k]);
    }
    terms = deflt;
  }
  struct vl_term_spec t[VL_FIT_MAX_TERMS], to[VL_FIT_MAX_TERMS];
  size_t nt = 0, nto = 0;
  struct vl_fit_result r, ro;
  struct vl_fit_prediction *px = vl_calloc((size_t)f.n_predict + 1, sizeof *px);
  const char **phase = vl_calloc((size_t)f.n_predict + 1, sizeof *phase);
  double phase_rel_max = 0;
  if (!px || !phase) {
    vl_free(px);
    vl_free(phase);
    vl_points_release(&pts);
    vl_points_release(&act);
    vl_points_release(&opt);
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  s = vl_terms_parse(terms, &pts, t, &nt, &err);
  if (s == VL_OK) nto = vl_terms_without_squares(t, nt, to);
  if (s != VL_OK) {
    cli_error("--terms: %s", err.msg);
    rc = VL_EXIT_USAGE;
  } else if ((s = vl_fit_points(f.by_phase ? &act : &pts, t, nt, &r, &err)) != VL_OK ||
             (f.by_phase && (s = vl_fit_points(&opt, to, nto, &ro, &err)) != VL_OK)) {
    cli_error("cannot fit '%s'%s: %s", f.label, f.by_phase ? " phase by phase" : "", err.msg);
    rc = VL_EXIT_ERROR;
  } else {
    for (int i = 0; i < f.n_predict && !rc; i++) {
      rc = parse_point(f.predict[i], &pts, px[i].x);
      if (!rc) vl_fit_predict_parts(&r, t, nt, &px[i]);
      if (!rc && !(isfinite(px[i].y) && isfinite(px[i].half_width))) {
        cli_error("--predict '%s': the fit's prediction there is not a finite number: a point "
                  "far outside the swept range",
                  f.predict[i]);
        rc = VL_EXIT_USAGE;
      } else if (!rc && fabs(px[i].y) + fabs(px[i].half_width) > 9007199254740992.0) {
        cli_error("--predict '%s': the fit's prediction there passes 2^53 bytes, beyond what can "
                  "be represented exactly: a point far outside the swept range",
                  f.predict[i]);
        rc = VL_EXIT_USAGE;
      }
      if (!rc && f.by_phase) phase[i] = vl_fit_take_larger(&ro, to, nto, &px[i]);
    }
    if (f.by_phase) phase_rel_max = vl_fit_larger_max_rel(&pts, &r, t, nt, &ro, to, nto);
    double *est = NULL;
    if (!rc && f.e.model) rc = estimates(&f, &pts, px, &est);
    if (!rc) {
      size_t axis = 0;
      for (size_t k = 0; k < pts.nvars; k++)
        if (!strcmp(pts.var[k], "seq")) axis = k;
      struct vl_fit_est_summary su = {0};
      if (est) vl_fit_est_summarize(&pts, est, &su);
      struct vl_fit_view v = {.pts = &pts,
                              .terms = t,
                              .n_terms = nt,
                              .fit = &r,
                              .predictions = px,
                              .n_predict = (size_t)f.n_predict,
                              .source = f.label,
                              .estimate = est,
                              .est_summary = &su,
                              .model = f.e.model,
                              .measure = f.compare ? f.compare : measures[0],
                              .axis = axis,
                              .fit_opt = f.by_phase ? &ro : NULL,
                              .opt_terms = to,
                              .n_opt_terms = nto,
                              .phase = f.by_phase ? phase : NULL,
                              .phase_rel_max = phase_rel_max};
      static const enum vl_format map[] = {VL_FMT_TEXT, VL_FMT_JSON, VL_FMT_MD};
      struct vl_fit_curve *curves = NULL;
      if (!(rc = fit_curves(&f, &v, &curves))) {
        int w = f.fmt == 3 ? vl_render_fit_html(stdout, &v) : vl_render_fit(stdout, map[f.fmt], &v);
        rc = w == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
      }
      vl_free(curves);
    }
    vl_free(est);
  }
  vl_free(px);
  vl_free(phase);
  vl_points_release(&pts);
  vl_points_release(&act);
  vl_points_release(&opt);
  return rc;
}
