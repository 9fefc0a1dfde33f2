/* vramledger fit: the memory formula fitted on measured points.
 * docs/cmd/fit.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "vramledger/alloc.h"
#include "vramledger/regress.h"
#include "vramledger/render.h"

#define MAX_PREDICT 64

enum { O_HELP, O_CSV, O_TERMS, O_PREDICT, O_FORMAT };
static const struct cli_opt opts[] = {{"help", false, O_HELP},    {"csv", true, O_CSV},
                                      {"terms", true, O_TERMS},   {"predict", true, O_PREDICT},
                                      {"format", true, O_FORMAT}, {NULL, false, 0}};
struct fo {
  bool help;
  const char *csv, *terms;
  const char *predict[MAX_PREDICT];
  int n_predict, fmt;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct fo *f = ctx;
  static const char *const formats[] = {"text", "json", "md", NULL};
  switch (id) {
  case O_HELP: f->help = true; break;
  case O_CSV: f->csv = arg; break;
  case O_TERMS: f->terms = arg; break;
  case O_PREDICT:
    if (f->n_predict == MAX_PREDICT) {
      cli_error("at most %d --predict", MAX_PREDICT);
      return VL_EXIT_USAGE;
    }
    f->predict[f->n_predict++] = arg;
    break;
  case O_FORMAT:
    if ((f->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
    break;
  }
  return 0;
}

/* "batch=32,seq=1024" -> x[]; every variable of the points must be given. */
static int parse_point(const char *s, const struct vl_points *p, double *x) {
  bool seen[VL_FIT_MAX_VARS] = {false};
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *t = buf, *next; t && *t; t = next) {
    next = strchr(t, ',');
    if (next) *next++ = '\0';
    char *eq = strchr(t, '=');
    if (!eq) {
      cli_error("--predict '%s': expected NAME=VALUE,... (%s)", s, t);
      return VL_EXIT_USAGE;
    }
    *eq = '\0';
    size_t k = 0;
    while (k < p->nvars && strcmp(p->var[k], t))
      k++;
    char *end;
    double v = strtod(eq + 1, &end);
    if (k == p->nvars || *end || !isfinite(v)) {
      cli_error("--predict '%s': '%s' is not a variable of the points or not a number", s, t);
      return VL_EXIT_USAGE;
    }
    x[k] = v;
    seen[k] = true;
  }
  for (size_t k = 0; k < p->nvars; k++)
    if (!seen[k]) {
      cli_error("--predict '%s': give %s too", s, p->var[k]);
      return VL_EXIT_USAGE;
    }
  return 0;
}

int cmd_fit(int argc, const char **argv) {
  struct fo f = {0};
  int rc = cli_parse(argc, argv, opts, on_opt, &f);
  if (rc) return rc;
  if (f.help) {
    fputs(vl_help_fit, stdout);
    return VL_EXIT_OK;
  }
  if (!f.csv) {
    cli_error("fit needs --csv FILE (columns: the variables, peak_bytes, optionally status)");
    return VL_EXIT_USAGE;
  }
  size_t len = 0;
  char *text = cli_read_file(f.csv, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_points pts;
  struct vl_err err = {""};
  vl_status s = vl_points_parse(text, len, NULL, 0, &pts, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot read '%s': %s", f.csv, err.msg);
    return VL_EXIT_ERROR;
  }
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
  struct vl_term_spec t[VL_FIT_MAX_TERMS];
  size_t nt = 0;
  struct vl_fit_result r;
  struct vl_fit_prediction *px = vl_calloc((size_t)f.n_predict + 1, sizeof *px);
  if (!px) {
    vl_points_release(&pts);
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  if ((s = vl_terms_parse(terms, &pts, t, &nt, &err)) != VL_OK) {
    cli_error("--terms: %s", err.msg);
    rc = VL_EXIT_USAGE;
  } else if ((s = vl_fit_points(&pts, t, nt, &r, &err)) != VL_OK) {
    cli_error("cannot fit '%s': %s", f.csv, err.msg);
    rc = VL_EXIT_ERROR;
  } else {
    for (int i = 0; i < f.n_predict && !rc; i++) {
      rc = parse_point(f.predict[i], &pts, px[i].x);
      if (!rc) vl_fit_predict_parts(&r, t, nt, &px[i]);
    }
    if (!rc) {
      struct vl_fit_view v = {&pts, t, nt, &r, px, (size_t)f.n_predict, f.csv};
      static const enum vl_format map[] = {VL_FMT_TEXT, VL_FMT_JSON, VL_FMT_MD};
      rc = vl_render_fit(stdout, map[f.fmt], &v) == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
    }
  }
  vl_free(px);
  vl_points_release(&pts);
  return rc;
}
