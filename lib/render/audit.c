/* The audit of a run against its commitment: a table with a row per
 * clause, or JSON (vramledger.audit/1). vl_audit_compute decided it. */
#include <jansson.h>
#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "vramledger/audit.h"
#include "vramledger/render.h"

#define REVIEW "  <- review"

/* each clause's id in JSON, and the rule it is held to */
static const char *const line_id[VL_AUDIT_LINES] = {"gpus", "parameters_bytes", "peak_bytes",
                                                    "gpu_hours", "tokens_per_s"};
static const char *const line_rule[VL_AUDIT_LINES] = {
    "the committed card and GPU count",
    "|measured - committed| <= tolerance x committed",
    "|measured - committed| <= tolerance x committed, and the record has memory samples",
    "|measured - committed| <= tolerance x committed",
    "measured >= committed x (1 - tolerance)",
};

static void text_rows(FILE *o, const struct vl_audit *a) {
  const struct vl_audit_clause *l = a->line;
  const struct vl_audit_clause *g = &l[VL_AUDIT_GPUS], *p = &l[VL_AUDIT_PARAMS],
                               *m = &l[VL_AUDIT_PEAK], *h = &l[VL_AUDIT_GPU_HOURS],
                               *t = &l[VL_AUDIT_TOKENS_PER_S];
  fprintf(o, "  %-28s %14s %14s%s\n", "GPUs", a->want, a->ran,
          g->review ? "          " REVIEW : "");
  const char *pn = "parameters per GPU (probe)";
  if (!p->compared)
    fprintf(o, "  %-28s %14s %14s\n", pn, p->committed_known ? "" : "not committed",
            a->probe ? "" : "no probe");
  else
    fprintf(o, "  %-28s %10.2f GiB %10.2f GiB %+8.1f%%%s\n", pn, GIB(p->committed),
            GIB(p->measured), p->off * 100, p->review ? REVIEW : "");
  fprintf(o, "  %-28s %10.2f GiB %10.2f GiB %+8.1f%%%s\n",
          a->peak_other ? "peak memory per GPU (other)" : "peak memory per GPU", GIB(m->committed),
          GIB(m->measured), m->off * 100, m->review ? REVIEW : "");
  char name[40];
  snprintf(name, sizeof name, "GPU-hours (%u GPU%s%s)", a->hours_gpus,
           a->hours_gpus == 1 ? "" : "s", a->hours_gpus_committed ? ", committed" : "");
  if (!h->compared)
    fprintf(o, "  %-28s %14s %14.4g\n", name, "not committed", h->measured);
  else
    fprintf(o, "  %-28s %14.4g %14.4g %+8.1f%%%s\n", name, h->committed, h->measured, h->off * 100,
            h->review ? REVIEW : "");
  char sla[32];
  if (t->committed_known)
    snprintf(sla, sizeof sla, "%.4g", t->committed);
  else
    snprintf(sla, sizeof sla, "not committed");
  if (!t->measured_known)
    fprintf(o, "  %-28s %14s %14s\n", "tokens/s", sla, "not stamped");
  else if (!t->compared)
    fprintf(o, "  %-28s %14s %14.4g\n", "tokens/s (median step)", sla, t->measured);
  else
    fprintf(o, "  %-28s %14s %14.4g %+8.1f%%%s\n", "tokens/s (median step)", sla, t->measured,
            t->off * 100, t->review ? REVIEW : "");
  if (a->price > 0) {
    fprintf(o, "  %-28s %14s %13.2f$\n", "cost at the given price", "", a->cost_usd);
    if (h->committed_known)
      fprintf(o, "  %-28s %13.2f$\n", "committed cost", a->committed_cost_usd);
  }
}

static int as_text(FILE *o, const struct vl_audit *a) {
  fputs("audit of ", o);
  vl__plain_text(o, a->record);
  fputs(" against ", o);
  vl__plain_text(o, a->commitment);
  fprintf(o, " (tolerance %g %%%s)\n\n", a->tolerance * 100,
          a->tolerance_given ? ", --tolerance" : "");
  fprintf(o, "  %-28s %14s %14s %9s\n", "line", "committed", "actual", "off");
  text_rows(o, a);
  if (a->line[VL_AUDIT_GPUS].review)
    fprintf(o,
            "\n  the run ran on %s, the commitment is for %s: its memory and time do not measure "
            "the committed hardware\n",
            a->ran, a->want);
  if (a->line[VL_AUDIT_PARAMS].review)
    fprintf(o, "\n  the run's parameters are not the committed model's: another model, or the "
               "baseline's with another precision, LoRA or sharding\n");
  if (!a->line[VL_AUDIT_PEAK].measured_known)
    fprintf(o, "\n  the record has no GPU memory samples (no NVML on that machine?)\n");
  if (!a->line[VL_AUDIT_TOKENS_PER_S].measured_known)
    fprintf(o, "\n  the job stamped no steps: call vl_mark(\"step\") (Python: "
               "vramledger.mark(\"step\")) once per optimizer step to audit throughput\n");
  if (a->review)
    fprintf(o,
            "\nreview: %d line%s more than %g %% off the commitment; update the commitment or "
            "explain the difference\n",
            a->review, a->review == 1 ? "" : "s", a->tolerance * 100);
  else
    fprintf(o, "\nwithin the commitment\n");
  return ferror(o) ? -1 : 0;
}

/* a known number as JSON, else null */
static json_t *num(bool known, double x, bool whole) {
  if (!known) return json_null();
  return whole ? D(x) : json_real(x);
}

static json_t *clause_json(const struct vl_audit *a, int i) {
  const struct vl_audit_clause *l = &a->line[i];
  json_t *c = json_object();
  json_object_set_new(c, "clause", vl__json_str(line_id[i]));
  json_object_set_new(c, "result",
                      vl__json_str(!l->compared ? "not_compared"
                                   : l->review  ? "fail"
                                                : "pass"));
  bool whole = i != VL_AUDIT_GPU_HOURS && i != VL_AUDIT_TOKENS_PER_S;
  if (i == VL_AUDIT_GPUS) {
    json_object_set_new(c, "committed", vl__json_str(a->want));
    json_object_set_new(c, "measured", l->measured_known ? vl__json_str(a->ran) : json_null());
  } else {
    json_object_set_new(c, "committed", num(l->committed_known, l->committed, whole));
    json_object_set_new(c, "measured", num(l->measured_known, l->measured, whole));
    json_object_set_new(c, "off", l->compared ? json_real(l->off) : json_null());
    json_object_set_new(c, "tolerance", json_real(a->tolerance));
  }
  json_object_set_new(c, "rule", vl__json_str(line_rule[i]));
  if (i == VL_AUDIT_PEAK)
    json_object_set_new(c, "reference", vl__json_str(a->peak_other ? "other" : "total"));
  if (i == VL_AUDIT_GPU_HOURS) {
    json_object_set_new(c, "gpus", json_integer(a->hours_gpus));
    json_object_set_new(c, "gpus_from",
                        vl__json_str(a->hours_gpus_committed ? "commitment" : "record"));
  }
  if (i == VL_AUDIT_TOKENS_PER_S && l->measured_known)
    json_object_set_new(c, "measured_from",
                        vl__json_str(a->tokens_from_probe ? "probe" : "step_marks"));
  return c;
}

static int as_json(FILE *o, const struct vl_audit *a) {
  json_t *root = json_object(), *cl = json_array();
  json_object_set_new(root, "schema", vl__json_str("vramledger.audit/1"));
  json_object_set_new(root, "commitment", vl__json_str(a->commitment));
  json_object_set_new(root, "record", vl__json_str(a->record));
  json_object_set_new(root, "verdict", vl__json_str(a->review ? "fail" : "pass"));
  json_object_set_new(root, "tolerance", json_real(a->tolerance));
  json_object_set_new(root, "tolerance_from",
                      vl__json_str(a->tolerance_given ? "--tolerance" : "commitment"));
  for (int i = 0; i < VL_AUDIT_LINES; i++)
    json_array_append_new(cl, clause_json(a, i));
  json_object_set_new(root, "clauses", cl);
  if (a->price > 0) {
    json_t *cost = json_object();
    json_object_set_new(cost, "usd_per_gpu_hour", json_real(a->price));
    json_object_set_new(cost, "run_usd", json_real(a->cost_usd));
    json_object_set_new(cost, "committed_usd",
                        a->line[VL_AUDIT_GPU_HOURS].committed_known
                            ? json_real(a->committed_cost_usd)
                            : json_null());
    json_object_set_new(root, "cost", cost);
  }
  int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(root);
  fputc('\n', o);
  return rc == 0 && !ferror(o) ? 0 : -1;
}

int vl_render_audit(FILE *o, enum vl_format fmt, const struct vl_audit *a) {
  return fmt == VL_FMT_JSON ? as_json(o, a) : as_text(o, a);
}
