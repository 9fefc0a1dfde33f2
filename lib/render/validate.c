/* The validate report: estimate vs measured, per run and summarised. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/validate.h"
#include "vramledger/render.h"

static const char *pct(char *buf, size_t n, double v) {
  if (isnan(v))
    snprintf(buf, n, "n/a");
  else
    snprintf(buf, n, "%+.1f %%", v);
  return buf;
}

static void summary_line(FILE *o, const char *set, const struct vl_compare_summary *s,
                         const struct vl_validate_view *v, const char *bullet) {
  if (!s->n) return;
  fprintf(
      o, "%s%s: %d run%s; peak allocated |error| median %.1f %%, max %.1f %%, %d/%d within %.0f %%",
      bullet, set, s->n, s->n == 1 ? "" : "s", s->median_allocated, s->max_allocated,
      s->within_allocated, s->n, v->tol_allocated);
  if (s->other_outcome) fprintf(o, " (%d against the other outcome)", s->other_outcome);
  if (s->n_total)
    fprintf(o, "; process total vs NVML median %.1f %%, max %.1f %%, %d/%d within %.0f %%",
            s->median_total, s->max_total, s->within_total, s->n_total, v->tol_total);
  fprintf(o, "\n");
}

static void text(FILE *o, const struct vl_validate_view *v, bool md) {
  const struct vl_measured *m = v->measured;
  char a[32], b[32], c[32];
  char date[11];
  vl__utf8_copy(date, sizeof date, m->date);
  const char *part[] = {m->device, m->torch, m->cuda, m->transformers, date};
  static const char *const before[] = {"estimate vs measured on ", " (torch ", ", CUDA ",
                                       ", transformers ", ", "};
  fputs(md ? "## " : "", o);
  for (int k = 0; k < 5; k++) { /* a measured file's words */
    fputs(before[k], o);
    vl__text(o, part[k], md);
  }
  fprintf(o, ")\n%ssource: ", md ? "\n" : "  ");
  vl__text(o, v->source, md);
  fputs("\n\n", o);
  if (md)
    fprintf(o, "| run | set | peak allocated est / meas GiB | err | reserved est / meas | err | "
               "process est / NVML | err |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  else
    fprintf(o, "  %-34s %-5s %19s %8s %17s %8s %17s %8s\n", "run", "set", "allocated est/meas",
            "err", "reserved est/meas", "err", "process est/NVML", "err");
  for (size_t i = 0; i < v->n; i++) {
    const struct vl_compare_row *r = &v->rows[i];
    const char *set = r->run->holdout ? "hold" : "cal";
    if (!r->estimated) {
      fputs(md ? "| " : "  ", o);
      vl__text_pad(o, r->run->name, md ? 0 : 34, md);
      fprintf(o, md ? " | %s | not compared: " : " %-5s not compared: ", set);
      vl__text(o, r->why, md);
      fputs(md ? " |||||||\n" : "\n", o);
      continue;
    }
    const struct vl_measured_run *x = r->run;
    if (r->other_outcome) set = r->run->holdout ? "hold*" : "cal*";
    fputs(md ? "| " : "  ", o);
    vl__text_pad(o, x->name, md ? 0 : 34, md);
    if (md)
      fprintf(o, " | %s | %.2f / %.2f | %s | %.2f / %.2f | %s | %.2f / %.2f | %s |\n", set,
              GIB(r->est_allocated), GIB(x->peak_allocated), pct(a, sizeof a, r->err_allocated),
              GIB(r->est_reserved), GIB(x->peak_reserved), pct(b, sizeof b, r->err_reserved),
              GIB(r->est_total), GIB(x->nvml_process), pct(c, sizeof c, r->err_total));
    else
      fprintf(o, " %-5s %8.2f / %8.2f %8s %7.2f / %7.2f %8s %7.2f / %7.2f %8s\n", set,
              GIB(r->est_allocated), GIB(x->peak_allocated), pct(a, sizeof a, r->err_allocated),
              GIB(r->est_reserved), GIB(x->peak_reserved), pct(b, sizeof b, r->err_reserved),
              GIB(r->est_total), GIB(x->nvml_process), pct(c, sizeof c, r->err_total));
  }
  fprintf(o, "\n");
  for (size_t i = 0; i < v->n; i++)
    if (v->rows[i].other_outcome) {
      fprintf(o,
              "%s* judged against the job's other outcome, the one timing decides (DDP's "
              "first buckets freed at the rebuild or kept into step 2), its peak allocated "
              "the nearer\n\n",
              md ? "" : "  ");
      break;
    }
  int shared = v->tally->shared_process, host = v->tally->host_shared;
  if (shared)
    fprintf(o,
            "%sreserved and process memory not compared for %d run%s measured after others in "
            "one process (\"in_process\"): a block an earlier run left cached pins its segment "
            "in the later run's reservation\n\n",
            md ? "" : "  ", shared, shared == 1 ? "" : "s");
  if (host)
    fprintf(o,
            "%sstep time not compared for %d run%s timed while other work ran on the host "
            "(\"host_shared\"): a host-bound step waits on the CPU it shares\n\n",
            md ? "" : "  ", host, host == 1 ? "" : "s");
  summary_line(o, "calibration set", v->calibration, v, md ? "- " : "  ");
  summary_line(o, "hold-out set", v->holdout, v, md ? "- " : "  ");
  if (v->time)
    fprintf(o,
            "%sstep time priced on %s against the measured step: %d run%s; |error| median %.1f %%, "
            "max %.1f %%, %d/%d within %.0f %%%s\n",
            md ? "- " : "  ", v->time_card, v->time->n, v->time->n == 1 ? "" : "s", v->time->median,
            v->time->max, v->time->within, v->time->n, v->tol_time,
            v->time_gate ? "" : " (not a gate: --time-tolerance makes it one)");
  if (v->tally->beyond)
    fprintf(o,
            "%s%d run%s beyond tolerance (peak allocated %.0f %%, process total %.0f %%): the "
            "estimator is off on this stack\n",
            md ? "\n**" : "  ", v->tally->beyond, v->tally->beyond == 1 ? "" : "s",
            v->tol_allocated, v->tol_total);
  else
    fprintf(o, "%severy run within tolerance (peak allocated %.0f %%, process total %.0f %%)\n",
            md ? "\n" : "  ", v->tol_allocated, v->tol_total);
}

static json_t *summary_json(const struct vl_compare_summary *s) {
  json_t *o = json_object();
  json_object_set_new(o, "runs", json_integer(s->n));
  json_object_set_new(o, "median_abs_error_allocated_pct",
                      s->n ? json_real(s->median_allocated) : json_null());
  json_object_set_new(o, "max_abs_error_allocated_pct",
                      s->n ? json_real(s->max_allocated) : json_null());
  json_object_set_new(o, "within_allocated", json_integer(s->within_allocated));
  json_object_set_new(o, "runs_with_nvml", json_integer(s->n_total));
  json_object_set_new(o, "median_abs_error_total_pct",
                      s->n_total ? json_real(s->median_total) : json_null());
  json_object_set_new(o, "max_abs_error_total_pct",
                      s->n_total ? json_real(s->max_total) : json_null());
  json_object_set_new(o, "within_total", json_integer(s->within_total));
  json_object_set_new(o, "other_outcome", json_integer(s->other_outcome));
  return o;
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

int vl_render_validate(FILE *out, enum vl_format fmt, const struct vl_validate_view *v) {
  if (fmt != VL_FMT_JSON) {
    text(out, v, fmt == VL_FMT_MD);
    return ferror(out) ? -1 : 0;
  }
  json_t *r = json_object();
  json_object_set_new(r, "schema", vl__json_str("vramledger.validate/1"));
  json_object_set_new(r, "device", vl__json_str(v->measured->device));
  json_object_set_new(r, "torch", vl__json_str(v->measured->torch));
  json_object_set_new(r, "source", vl__json_str(v->source));
  json_object_set_new(r, "tolerance_allocated_pct", json_real(v->tol_allocated));
  json_object_set_new(r, "tolerance_total_pct", json_real(v->tol_total));
  json_object_set_new(r, "verdict", vl__json_str(v->tally->beyond ? "fail" : "pass"));
  json_object_set_new(r, "beyond", json_integer(v->tally->beyond));
  json_t *rows = json_array();
  for (size_t i = 0; i < v->n; i++) {
    const struct vl_compare_row *x = &v->rows[i];
    json_t *e = json_object();
    json_object_set_new(e, "name", vl__json_str(x->run->name));
    json_object_set_new(e, "holdout", json_boolean(x->run->holdout));
    json_object_set_new(e, "compared", json_boolean(x->estimated));
    if (!x->estimated) {
      json_object_set_new(e, "why", vl__json_str(x->why));
    } else {
      json_object_set_new(e, "other_outcome", json_boolean(x->other_outcome));
      json_object_set_new(e, "shared_process", json_boolean(x->run->shared_process));
      json_object_set_new(e, "host_shared", json_boolean(x->run->host_shared));
      json_object_set_new(e, "estimate_allocated_bytes", U(x->est_allocated));
      json_object_set_new(e, "measured_allocated_bytes", U(x->run->peak_allocated));
      json_object_set_new(e, "error_allocated_pct", num_or_null(x->err_allocated));
      json_object_set_new(e, "estimate_reserved_bytes", U(x->est_reserved));
      json_object_set_new(e, "measured_reserved_bytes", U(x->run->peak_reserved));
      json_object_set_new(e, "error_reserved_pct", num_or_null(x->err_reserved));
      json_object_set_new(e, "estimate_total_bytes", U(x->est_total));
      json_object_set_new(e, "nvml_process_bytes", U(x->run->nvml_process));
      json_object_set_new(e, "error_total_pct", num_or_null(x->err_total));
      if (!isnan(x->err_step)) {
        json_object_set_new(e, "estimate_step_seconds", json_real(x->est_step_s));
        json_object_set_new(e, "measured_step_seconds", json_real(x->run->step_s));
        json_object_set_new(e, "error_step_pct", json_real(x->err_step));
      }
    }
    json_array_append_new(rows, e);
  }
  json_object_set_new(r, "runs", rows);
  json_object_set_new(r, "calibration", summary_json(v->calibration));
  json_object_set_new(r, "holdout", summary_json(v->holdout));
  if (v->time) {
    json_t *t = json_object();
    json_object_set_new(t, "card", vl__json_str(v->time_card));
    json_object_set_new(t, "runs", json_integer(v->time->n));
    json_object_set_new(t, "median_abs_error_pct", json_real(v->time->median));
    json_object_set_new(t, "max_abs_error_pct", json_real(v->time->max));
    json_object_set_new(t, "within", json_integer(v->time->within));
    json_object_set_new(t, "tolerance_pct", json_real(v->tol_time));
    json_object_set_new(t, "gate", json_boolean(v->time_gate));
    json_object_set_new(r, "step_time", t);
  }
  json_object_set_new(r, "beyond_tolerance", json_integer(v->tally->beyond));
  int rc = json_dumpf(r, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(4));
  json_decref(r);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}
