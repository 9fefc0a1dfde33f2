/* The sensitivity report. */
#include <jansson.h>
#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"
#include "vramledger/sensitivity.h"

static const char *dist_name(const struct vl_vary *v, char *buf, size_t n) {
  if (v->dist == VL_DIST_DISCRETE) {
    size_t o = 0;
    for (int i = 0; i < v->n_values && o + 1 < n; i++) {
      const char *s = v->var == VL_VARY_PRECISION
                          ? vl_precision_name((enum vl_precision)v->values[i])
                          : vl_attention_name((enum vl_attention)v->values[i]);
      int w = snprintf(buf + o, n - o, "%s%s", i ? "," : "one of ", s);
      if (w < 0 || (size_t)w >= n - o) break;
      o += (size_t)w;
    }
  } else {
    snprintf(buf, n,
             v->dist == VL_DIST_UNIFORM ? "uniform +-%.0f %%" : "normal, 95 %% within +-%.0f %%",
             100 * v->pct);
  }
  return buf;
}

/* An input's value at a tornado end, with its unit. */
static const char *input_at(enum vl_vary_var v, double at, char *buf, size_t n) {
  static const char *const unit[] = {"tokens", "sequences", "hidden", "layers"};
  if (v == VL_VARY_PRECISION)
    snprintf(buf, n, "%s", vl_precision_name((enum vl_precision)(int)at));
  else if (v == VL_VARY_ATTENTION)
    snprintf(buf, n, "%s", vl_attention_name((enum vl_attention)(int)at));
  else
    snprintf(buf, n, "%.0f %s", at, (unsigned)v < 4 ? unit[v] : "");
  return buf;
}

static json_t *tornado_json(const struct vl_sens_result *r) {
  json_t *tor = json_array();
  for (int i = 0; i < r->n_tornado; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "var", vl__json_str(vl_vary_name(r->tornado[i].var)));
    json_object_set_new(e, "low_bytes", U(r->tornado[i].low));
    json_object_set_new(e, "high_bytes", U(r->tornado[i].high));
    enum vl_vary_var v = r->tornado[i].var;
    bool named = v == VL_VARY_PRECISION || v == VL_VARY_ATTENTION;
    char at[64];
    json_object_set_new(e, "low_at",
                        named ? vl__json_str(input_at(v, r->tornado[i].low_at, at, sizeof at))
                              : D(r->tornado[i].low_at));
    json_object_set_new(e, "high_at",
                        named ? vl__json_str(input_at(v, r->tornado[i].high_at, at, sizeof at))
                              : D(r->tornado[i].high_at));
    json_object_set_new(e, "low_cut", json_boolean(r->tornado[i].low_cut));
    json_object_set_new(e, "high_cut", json_boolean(r->tornado[i].high_cut));
    json_array_append_new(tor, e);
  }
  return tor;
}

/* the check's errors within the tolerance the surface is refined to */
static bool within(const struct vl_sens_surface *s) {
  return s->max_error_pct <= VL_SENS_TOLERANCE && s->max_error_time_pct <= VL_SENS_TOLERANCE;
}

/* a surface's lattice and check, or null where the draws were estimated */
static json_t *surface_json(const struct vl_sens_surface *s) {
  if (!s->used) return json_null();
  json_t *e = json_object(), *lat = json_object(), *err = json_object();
  for (int d = 0; d < s->n_dims; d++)
    json_object_set_new(lat, vl_vary_name(s->var[d]), json_integer(s->nodes[d]));
  json_object_set_new(lat, "precision_attention_pairs", json_integer(s->combos));
  json_object_set_new(e, "lattice", lat);
  json_object_set_new(e, "lattice_estimates", U(s->lattice));
  json_object_set_new(e, "exact_draws", U(s->exact_draws));
  json_object_set_new(e, "checked", U(s->checked));
  json_object_set_new(e, "max_error_bytes", U(s->max_error_bytes));
  json_object_set_new(err, "memory", json_real(s->max_error_pct));
  json_object_set_new(err, "time", json_real(s->max_error_time_pct));
  json_object_set_new(e, "max_error_pct", err);
  json_object_set_new(e, "tolerance_pct", json_real(VL_SENS_TOLERANCE));
  json_object_set_new(e, "within_tolerance", json_boolean(within(s)));
  json_object_set_new(e, "refinements", json_integer(s->refinements));
  json_object_set_new(e, "short_of_estimates", json_boolean(s->short_of_estimates));
  return e;
}

static json_t *fallbacks_json(const struct vl_sens_result *r) {
  json_t *fb = json_array();
  for (int i = 0; i < r->n_fallbacks; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "fallback", vl__json_str(r->fallback[i].name));
    json_object_set_new(e, "p95_bytes", U(r->fallback[i].p95));
    json_object_set_new(e, "p_exceed", json_real(r->fallback[i].p_exceed));
    json_object_set_new(e, "drawn", U(r->fallback[i].drawn));
    json_object_set_new(e, "failed", U(r->fallback[i].failed));
    if (r->fallback[i].surface.used)
      json_object_set_new(e, "surface", surface_json(&r->fallback[i].surface));
    json_array_append_new(fb, e);
  }
  return fb;
}

/* each gate's id in JSON, its flag, and what its probability is of */
static const char *const gate_id[VL_SENS_GATES] = {"oom", "budget", "deadline"};
static const char *const gate_flag[VL_SENS_GATES] = {"--fail-above", "--fail-above-budget",
                                                     "--fail-above-deadline"};

static json_t *verdict_clauses(const struct vl_sens_query *q, const struct vl_sens_verdict *v) {
  json_t *a = json_array();
  for (int g = 0; v && g < VL_SENS_GATES; g++) {
    if (!v->given[g]) continue;
    json_t *c = json_object();
    json_object_set_new(c, "clause", vl__json_str(gate_id[g]));
    json_object_set_new(c, "result", vl__json_str(v->fail[g] ? "fail" : "pass"));
    json_object_set_new(c, "measured", json_real(v->p[g]));
    json_object_set_new(c, "threshold", json_real(v->limit[g]));
    json_object_set_new(c, "flag", vl__json_str(gate_flag[g]));
    if (g == VL_SENS_GATE_OOM) {
      json_object_set_new(c, "gpu", vl__json_str(q->gpus[0]->name));
      json_object_set_new(c, "rule",
                          vl__json_str("P(over the card with the margin kept free, refused "
                                       "draws counted as over) <= threshold"));
    } else if (g == VL_SENS_GATE_BUDGET) {
      json_object_set_new(c, "budget_usd", json_real(q->budget_usd));
      json_object_set_new(c, "rule",
                          vl__json_str("P(a run costs more than the budget) <= threshold"));
    } else {
      json_object_set_new(c, "deadline_hours", json_real(q->deadline_hours));
      json_object_set_new(c, "rule",
                          vl__json_str("P(a run takes longer than the deadline) <= threshold"));
    }
    json_array_append_new(a, c);
  }
  return a;
}

static int as_json(FILE *o, const struct vl_sens_query *q, const struct vl_sens_result *r,
                   const struct vl_sens_verdict *v) {
  char d[128];
  json_t *root = json_object(), *pc = json_object(), *pe = json_object(), *vary = json_array();
  json_object_set_new(root, "schema", vl__json_str("vramledger.sensitivity/1"));
  bool gated = v && v->n_given;
  json_object_set_new(root, "verdict",
                      gated ? vl__json_str(v->n_failed ? "fail" : "pass") : json_null());
  json_object_set_new(root, "clauses", verdict_clauses(q, gated ? v : NULL));
  json_object_set_new(root, "samples", U(r->samples));
  json_object_set_new(root, "seed", U(r->seed));
  json_object_set_new(root, "drawn", U(r->drawn));
  json_object_set_new(root, "failed", U(r->failed));
  if (r->failed) json_object_set_new(root, "refused_why", vl__json_str(r->refused_why));
  json_object_set_new(root, "estimates", U(r->estimates));
  json_object_set_new(root, "distinct_jobs", r->distinct ? U(r->distinct) : json_null());
  json_object_set_new(root, "evaluator",
                      vl__json_str(q->fit            ? "fit"
                                   : r->surface.used ? "surface"
                                                     : "estimator"));
  if (q->fit) json_object_set_new(root, "fit", vl__json_str(q->fit_source));
  if (r->surface.used) json_object_set_new(root, "surface", surface_json(&r->surface));
  for (int i = 0; i < q->n_vary; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "var", vl__json_str(vl_vary_name(q->vary[i].var)));
    json_object_set_new(e, "distribution", vl__json_str(dist_name(&q->vary[i], d, sizeof d)));
    json_array_append_new(vary, e);
  }
  json_object_set_new(root, "vary", vary);
  json_object_set_new(pc, "p50", U(r->p50));
  json_object_set_new(pc, "p95", U(r->p95));
  json_object_set_new(pc, "p99", U(r->p99));
  json_object_set_new(pc, "min", U(r->min));
  json_object_set_new(pc, "max", U(r->max));
  json_object_set_new(root, "percentiles", pc);
  for (int g = 0; g < q->n_gpus; g++)
    json_object_set_new(pe, q->gpus[g]->name, json_real(r->p_exceed[g]));
  json_object_set_new(root, "p_exceed", pe);
  json_t *per = json_object();
  for (int g = 0; g < q->n_gpus; g++)
    json_object_set_new(per, q->gpus[g]->name, json_real(r->p_exceed_refused[g]));
  json_object_set_new(root, "p_exceed_refused_as_over", per);
  if (q->carry && !q->fit) { /* each card's CUDA context: measured, or carried over */
    json_t *cx = json_object();
    for (int g = 0; g < q->n_gpus; g++)
      json_object_set_new(cx, q->gpus[g]->name, vl__context_carry_json(&q->carry[g]));
    json_object_set_new(root, "context", cx);
  }
  if (r->timed) {
    json_t *t = json_object();
    json_object_set_new(t, "gpu", vl__json_str(q->gpus[0]->name));
    json_object_set_new(t, "priced_draws", U(r->n_timed));
    json_object_set_new(t, "step_seconds_p50", json_real(r->step_p50));
    json_object_set_new(t, "step_seconds_p95", json_real(r->step_p95));
    if (q->tokens) {
      json_object_set_new(t, "tokens", U(q->tokens));
      json_object_set_new(t, "hours_p50", json_real(r->hours_p50));
      json_object_set_new(t, "hours_p95", json_real(r->hours_p95));
      json_object_set_new(t, "p_past_deadline",
                          q->deadline_hours > 0 ? json_real(r->p_late) : json_null());
      json_object_set_new(t, "p_over_budget",
                          q->budget_usd > 0 ? json_real(r->p_over_budget) : json_null());
    }
    json_object_set_new(root, "time", t);
  }
  json_object_set_new(root, "margin", json_real(q->margin));
  json_object_set_new(root, "tornado", tornado_json(r));
  json_object_set_new(root, "fallbacks", fallbacks_json(r));
  int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(root);
  fputc('\n', o);
  return rc == 0 && !ferror(o) ? 0 : -1;
}

/* a surface's lattice, "seq 5 x hidden 5 x 2 precision/attention pairs" */
static void lattice_text(FILE *o, const struct vl_sens_query *q, const struct vl_sens_surface *s) {
  for (int d = 0; d < s->n_dims; d++)
    fprintf(o, "%s%s %d", d ? " x " : "", vl_vary_name(s->var[d]), s->nodes[d]);
  bool prec = false, attn = false;
  for (int v = 0; v < q->n_vary; v++) {
    prec |= q->vary[v].var == VL_VARY_PRECISION;
    attn |= q->vary[v].var == VL_VARY_ATTENTION;
  }
  if (s->combos > 1)
    fprintf(o, "%s%d %s", s->n_dims ? " x " : "", s->combos,
            prec && attn ? "precision/attention pairs"
            : prec       ? "precisions"
                         : "attention implementations");
}

/* a surface's check: "64 draws checked exactly: largest error ..." */
static void check_text(FILE *o, const struct vl_sens_surface *s, bool timed) {
  fprintf(o, "%llu draws checked exactly: largest error %.2f %% (%.1f MiB) of the memory",
          (unsigned long long)s->checked, s->max_error_pct, (double)s->max_error_bytes / 1048576.0);
  if (timed) fprintf(o, ", %.2f %% of the step time", s->max_error_time_pct);
}

/* the limit's line, and each input's distribution */
static void distributions(FILE *o, bool md, const struct vl_sens_query *q,
                          const struct vl_sens_result *r) {
  char d[128];
  const char *b = md ? "- " : "  ";
  if (!q->fit && !r->surface.used && r->drawn < r->samples && r->distinct)
    fprintf(o,
            "%sthe %llu draws hold %llu distinct jobs, each a full estimate with its replay: "
            "--estimates %llu estimates every draw (docs/cmd/sensitivity.md has the time an "
            "estimate takes), or take fewer --samples or fewer --vary\n%s",
            b, (unsigned long long)r->samples, (unsigned long long)r->distinct,
            (unsigned long long)r->distinct, md ? "\n" : "");
  for (int i = 0; i < q->n_vary; i++)
    fprintf(o, "%s%s: %s\n", b, vl_vary_name(q->vary[i].var), dist_name(&q->vary[i], d, sizeof d));
  fputc('\n', o);
}

/* the first line's end and the lines after it, for draws on a surface */
static void surface_lines(FILE *o, bool md, const struct vl_sens_query *q,
                          const struct vl_sens_result *r) {
  const struct vl_sens_surface *s = &r->surface;
  const char *b = md ? "- " : "  ";
  if (r->drawn == r->samples)
    fprintf(o, ", interpolated between %llu exact estimates (lattice ",
            (unsigned long long)s->lattice);
  else
    fprintf(o, ": the first %llu interpolated between %llu exact estimates (lattice ",
            (unsigned long long)r->drawn, (unsigned long long)s->lattice);
  lattice_text(o, q, s);
  fprintf(o, ")\n%s%s", md ? "\n" : "", b);
  check_text(o, s, r->timed);
  if (!within(s) && s->short_of_estimates)
    fprintf(o, "; above the tolerance of %g %%, and a finer lattice needs more than --estimates",
            VL_SENS_TOLERANCE);
  else if (!within(s))
    fprintf(o,
            "; above the tolerance of %g %% with the lattice made finer along each input: the "
            "estimates themselves are not smooth there (the caching allocator's reserve jumps "
            "where a block stops fitting a cached segment)",
            VL_SENS_TOLERANCE);
  fprintf(o,
          "\n%sthe %llu draws hold %llu distinct jobs, more than --estimates %llu: each draw's "
          "process memory and step time are interpolated between the lattice's estimates, "
          "refusals decided for each draw%s; --estimates %llu estimates every draw exactly\n%s",
          b, (unsigned long long)r->samples, (unsigned long long)r->distinct,
          (unsigned long long)(q->max_estimates ? q->max_estimates : VL_SENS_ESTIMATES),
          s->exact_draws ? " (a draw by a refused lattice point estimated exactly)" : "",
          (unsigned long long)r->distinct, md ? "\n" : "");
}

/* what was drawn, how each draw was evaluated, the distributions */
static void header_lines(FILE *o, bool md, const struct vl_sens_query *q,
                         const struct vl_sens_result *r) {
  fprintf(o, "%s%llu draws (seed %llu)",
          md ? "## Sensitivity: " : "sensitivity: ", (unsigned long long)r->samples,
          (unsigned long long)r->seed);
  if (q->fit) {
    fputs(", each evaluated with the fit ", o);
    vl__text(o, q->fit_source, md);
  } else if (r->surface.used) {
    surface_lines(o, md, q, r);
    distributions(o, md, q, r);
    return;
  } else if (r->drawn == r->samples)
    fprintf(o, ", each estimated (%llu distinct jobs)", (unsigned long long)r->estimates);
  else
    fprintf(o,
            ": the first %llu estimated, where the limit of %llu distinct jobs was reached "
            "(--estimates)",
            (unsigned long long)r->drawn, (unsigned long long)r->estimates);
  fprintf(o, "\n%s", md ? "\n" : "");
  distributions(o, md, q, r);
}

/* the percentiles of the peak and each card's chance of running out */
static void peak_lines(FILE *o, bool md, const struct vl_sens_query *q,
                       const struct vl_sens_result *r) {
  const char *b = md ? "- " : "  ";
  uint64_t est = r->drawn - r->failed;
  if (r->failed)
    fprintf(o, "%srefused by the %s: %llu of %llu draws (the first: %s)\n", b,
            q->fit ? "fit" : "estimator", (unsigned long long)r->failed,
            (unsigned long long)r->drawn, r->refused_why);
  fprintf(o, "%s%s per GPU", b, q->fit ? "fitted peak" : "process memory");
  if (r->failed) fprintf(o, " of the %llu estimated draws", (unsigned long long)est);
  fprintf(o, ": p50 %.2f GiB, p95 %.2f GiB, p99 %.2f GiB (min %.2f, max %.2f)\n", GIB(r->p50),
          GIB(r->p95), GIB(r->p99), GIB(r->min), GIB(r->max));
  for (int g = 0; g < q->n_gpus; g++) {
    fprintf(o, "%sP(over %s with %.0f %% kept free) = %.1f %%", b, q->gpus[g]->name,
            100 * q->margin, 100 * r->p_exceed[g]);
    if (r->failed)
      fprintf(o, " of the estimated draws, %.1f %% with the refused counted as over",
              100 * r->p_exceed_refused[g]);
    fputc('\n', o);
  }
  for (int g = 0; q->carry && !q->fit && g < q->n_gpus; g++) {
    char line[400];
    vl__context_carry_text(&q->carry[g], q->gpus[g]->name, line, sizeof line);
    if (line[0]) fprintf(o, "%s%s\n", b, line);
  }
}

/* the tornado: each varied input's range of the peak, as a bar */
static void tornado_lines(FILE *o, bool md, const struct vl_sens_result *r) {
  const char *b = md ? "- " : "  ";
  if (r->n_tornado) fprintf(o, "\n%s\n", md ? "### What drives the peak" : "what drives the peak:");
  double top = r->n_tornado ? (double)(r->tornado[0].high - r->tornado[0].low) : 1;
  for (int i = 0; i < r->n_tornado; i++) {
    double sw = (double)(r->tornado[i].high - r->tornado[i].low);
    int bar = top > 0 ? (int)(30 * sw / top + 0.5) : 0;
    enum vl_vary_var v = r->tornado[i].var;
    char lo[64], hi[64];
    fprintf(o, "%s%-10s %7.2f .. %7.2f GiB  %-30.*s  (", b, vl_vary_name(v), GIB(r->tornado[i].low),
            GIB(r->tornado[i].high), bar, "##############################");
    if (v == VL_VARY_PRECISION || v == VL_VARY_ATTENTION)
      fprintf(o, "%s .. %s", input_at(v, r->tornado[i].low_at, lo, sizeof lo),
              input_at(v, r->tornado[i].high_at, hi, sizeof hi));
    else
      fprintf(o, "%.0f .. %s", r->tornado[i].low_at,
              input_at(v, r->tornado[i].high_at, hi, sizeof hi));
    if (r->tornado[i].low_cut) fprintf(o, ", refused below");
    if (r->tornado[i].high_cut) fprintf(o, ", refused above");
    fprintf(o, "%s)\n", sw > 0 ? "" : "; no effect");
  }
}

/* the step time of the draws on the first card, and the job's hours, late
 * and over budget, where asked */
static void time_lines(FILE *o, bool md, const struct vl_sens_query *q,
                       const struct vl_sens_result *r) {
  if (!r->timed) return;
  const char *b = md ? "- " : "  ";
  fprintf(o, "%sstep time on %s: p50 %.3f s, p95 %.3f s (%llu priced draws)\n", b, q->gpus[0]->name,
          r->step_p50, r->step_p95, (unsigned long long)r->n_timed);
  if (!q->tokens) return;
  fprintf(o, "%s%.3g tokens: p50 %.1f h, p95 %.1f h a run", b, (double)q->tokens, r->hours_p50,
          r->hours_p95);
  if (q->deadline_hours > 0)
    fprintf(o, "; P(past the deadline of %.3g h) = %.1f %%", q->deadline_hours, 100 * r->p_late);
  if (q->budget_usd > 0)
    fprintf(o, "; P(over the budget of $%.2f) = %.1f %%", q->budget_usd, 100 * r->p_over_budget);
  fputc('\n', o);
}

static void fallback_lines(FILE *o, bool md, const struct vl_sens_result *r) {
  const char *b = md ? "- " : "  ";
  if (r->n_fallbacks) {
    fprintf(o, "\n%s\n", md ? "### Fallbacks on the first card" : "fallbacks on the first card:");
    for (int i = 0; i < r->n_fallbacks; i++) {
      fprintf(o, "%s%s: p95 %.2f GiB, P(over) %.1f %% (the first %llu draws", b,
              r->fallback[i].name, GIB(r->fallback[i].p95), 100 * r->fallback[i].p_exceed,
              (unsigned long long)r->fallback[i].drawn);
      if (r->fallback[i].failed)
        fprintf(o, ", %llu refused", (unsigned long long)r->fallback[i].failed);
      const struct vl_sens_surface *s = &r->fallback[i].surface;
      if (s->used) {
        fprintf(o, "; interpolated between %llu exact estimates, ", (unsigned long long)s->lattice);
        check_text(o, s, false);
      }
      fprintf(o, ")\n");
    }
  }
}

/* the gate: each threshold given, the probability against it */
static void verdict_lines(FILE *o, bool md, const struct vl_sens_query *q,
                          const struct vl_sens_verdict *v) {
  if (!v || !v->n_given) return;
  const char *b = md ? "- " : "  ";
  fprintf(o, "\n%s%s\n", md ? "### Gate: " : "gate: ", v->n_failed ? "fail" : "pass");
  for (int g = 0; g < VL_SENS_GATES; g++) {
    if (!v->given[g]) continue;
    if (g == VL_SENS_GATE_OOM)
      fprintf(o, "%sP(over %s, refused draws counted as over)", b, q->gpus[0]->name);
    else if (g == VL_SENS_GATE_BUDGET)
      fprintf(o, "%sP(over the budget of $%.2f)", b, q->budget_usd);
    else
      fprintf(o, "%sP(past the deadline of %.3g h)", b, q->deadline_hours);
    fprintf(o, " = %.2f %%, %s %g %% (%s)%s\n", 100 * v->p[g], v->fail[g] ? "above" : "at most",
            100 * v->limit[g], gate_flag[g], v->fail[g] ? "  <- fail" : "");
  }
}

int vl_render_sensitivity(FILE *o, enum vl_format fmt, const struct vl_sens_query *q,
                          const struct vl_sens_result *r, const struct vl_sens_verdict *v) {
  if (fmt == VL_FMT_JSON) return as_json(o, q, r, v);
  bool md = fmt == VL_FMT_MD;
  header_lines(o, md, q, r);
  peak_lines(o, md, q, r);
  time_lines(o, md, q, r);
  tornado_lines(o, md, r);
  fallback_lines(o, md, r);
  verdict_lines(o, md, q, v);
  return ferror(o) ? -1 : 0;
}
