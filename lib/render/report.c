/* The run report: text, Markdown and JSON; the HTML page is html_run.c's,
 * Chrome/Perfetto trace JSON report_trace.c's. Words both say about the
 * record (sampling, descendants) are run_words.c's. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/record.h"
#include "internal.h"
#include "vramledger/render.h"

static int dump(FILE *out, json_t *r, size_t flags) {
  int rc = json_dumpf(r, out, flags | JSON_PRESERVE_ORDER);
  json_decref(r);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}

static json_t *descendants_json(const struct vl_record *r) {
  json_t *d = json_object(), *pids = json_array();
  json_object_set_new(d, "procs", U(r->desc_procs));
  for (unsigned i = 0; i < r->n_desc_pids; i++)
    json_array_append_new(pids, U(r->desc_pids[i]));
  json_object_set_new(d, "pids", pids);
  json_object_set_new(d, "job_exited_t_s",
                      r->desc_events ? json_real(vl__since_s(r, r->desc_t_ns)) : json_null());
  json_object_set_new(d, "waited", json_boolean(r->desc_waited));
  json_object_set_new(d, "left", U(r->desc_left));
  return d;
}

static int report_json(FILE *out, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  json_t *o = json_object();
  json_object_set_new(o, "schema", vl__json_str("vramledger.report/1"));
  json_object_set_new(o, "record", vl__json_str(v->source));
  json_object_set_new(o, "command", vl__json_str(r->command));
  json_object_set_new(o, "host", vl__json_str(r->host));
  /* what the record did not measure is null, never 0 (as the text says
   * "not sampled"/"not measured"): NVML's layer without samples, the
   * interposer's without driver allocations, the context without both */
  const bool nvml = vl__run_nvml_sampled(r), drv = s->peak_cuda_alloc_bytes > 0;
  json_t *peak = json_object();
  json_object_set_new(peak, "process_bytes", nvml ? U(s->peak_process_bytes) : json_null());
  json_object_set_new(peak, "process_t_s",
                      nvml ? json_real((double)s->peak_process_t_ns * 1e-9) : json_null());
  json_object_set_new(peak, "cuda_alloc_bytes", drv ? U(s->peak_cuda_alloc_bytes) : json_null());
  json_object_set_new(peak, "context_bytes", nvml && drv ? U(s->context_bytes) : json_null());
  json_object_set_new(peak, "other_processes_bytes", nvml ? U(s->peak_other_bytes) : json_null());
  json_t *libs = json_object(); /* who asked the driver: the most each held */
  for (unsigned i = 0; i < r->n_alloc_libs; i++)
    json_object_set_new(libs, r->alloc_libs[i].name, U(r->alloc_libs[i].peak));
  json_object_set_new(peak, "cuda_alloc_by_library", libs);
  json_object_set_new(o, "peak", peak);
  if (v->fw) vl__fw_json(o, peak, v->fw, r, v->cmp);
  json_object_set_new(o, "samples", U(r->n_samples));
  json_object_set_new(o, "marks", U(r->n_marks));
  json_object_set_new(o, "duration_s", json_real((double)s->duration_ns * 1e-9));
  json_t *g = json_array();
  for (unsigned i = 0; i < r->n_gpus; i++)
    json_array_append_new(g, vl__json_str(r->gpus[i].name));
  json_object_set_new(o, "gpus", g);
  json_object_set_new(o, "driver", vl__json_str(r->driver));
  json_object_set_new(o, "nvml", vl__json_str(r->nvml));
  json_object_set_new(o, "exit_status", r->exited ? json_integer(r->exit_status) : json_null());
  json_object_set_new(o, "leak_bytes_per_s", json_real(s->leak_bytes_per_s));
  json_object_set_new(o, "imbalance", json_real(s->imbalance));
  json_object_set_new(o, "gpus_used", U(s->gpus_used));
  json_object_set_new(o, "peak_gpu_bytes", nvml ? U(s->peak_gpu_bytes) : json_null());
  json_object_set_new(o, "truncated", json_boolean(r->truncated));
  if (r->damaged) { /* lines skipped (docs/record.md); only then, as descendants */
    json_object_set_new(o, "damaged_lines", U(r->damaged));
    json_object_set_new(o, "first_damaged_line", U(r->damaged_line));
    if (r->damaged_file[0]) /* a stream's: only then, older reports as they were */
      json_object_set_new(o, "first_damaged_file", vl__json_str(r->damaged_file));
  }
  if (r->implausible) { /* values past the card: damaged data, skipped */
    json_object_set_new(o, "implausible_events", U(r->implausible));
    json_object_set_new(o, "first_implausible_line", U(r->implausible_line));
    if (r->implausible_file[0])
      json_object_set_new(o, "first_implausible_file", vl__json_str(r->implausible_file));
  }
  if (r->desc_events || r->desc_left) /* only then: older reports stay as they were */
    json_object_set_new(o, "descendants", descendants_json(r));
  json_t *f = json_array();
  for (int i = 0; i < v->n_findings; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "code", vl__json_str(v->findings[i].code));
    json_object_set_new(e, "text", vl__json_str(v->findings[i].text));
    json_array_append_new(f, e);
  }
  json_object_set_new(o, "findings", f);
  return dump(out, o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
}

static void text(FILE *o, const struct vl_report_view *v, bool md) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  const char *b = md ? "- " : "  ";
  fputs(md ? "## Run: " : "run: ", o);
  vl__text(o, r->command, md);
  fprintf(o, "\n%srecord ", md ? "\n" : "  ");
  vl__text(o, v->source, md);
  char d[400];
  vl__run_sampling_words(r, s, d, sizeof d);
  fputs(", ", o);
  vl__text(o, d, md); /* the record's own "not sampled: ..." */
  vl__run_end_words(r, d, sizeof d);
  fprintf(o, ", %s", d);
  vl__run_descendants_words(r, d, sizeof d);
  if (*d) fprintf(o, "\n%s%s", md ? "\n" : "  ", d);
  vl__run_left_words(r, d, sizeof d);
  if (*d) fprintf(o, "\n%s%s", md ? "\n" : "  ", d);
  fprintf(o, "\n%sGPUs:", md ? "\n" : "  ");
  for (unsigned i = 0; i < r->n_gpus; i++) {
    fprintf(o, "%s %u ", i ? "," : "", r->gpus[i].index);
    vl__text(o, r->gpus[i].name, md);
  }
  if (!r->n_gpus && strncmp(r->nvml, "not sampled", 11) == 0) {
    fputs(" none in the record", o); /* why: said on the line above */
  } else if (!r->n_gpus) {
    fputs(" none (", o);
    vl__text(o, r->nvml, md);
    fputs(")", o);
  }
  fprintf(o, "\n\n");
  if (md) fprintf(o, "| layer | peak GiB |\n|---|---:|\n");
  const char *fmt = md ? "| %s | %.2f |\n" : "  %-46s %8.2f GiB\n";
  const char *none = md ? "| %s | %s |\n" : "  %-46s %s\n";
  bool nvml = vl__run_nvml_sampled(r), drv = s->peak_cuda_alloc_bytes > 0;
  if (nvml)
    fprintf(o, fmt, "process memory (NVML, the job's processes)", GIB(s->peak_process_bytes));
  else
    fprintf(o, none, "process memory (NVML, the job's processes)", "not sampled");
  if (drv)
    fprintf(o, fmt, "driver-allocated (interposer)", GIB(s->peak_cuda_alloc_bytes));
  else
    fprintf(o, none, "driver-allocated (interposer)", "not measured");
  for (unsigned i = 0; i < r->n_alloc_libs; i++) /* who asked: the most each held */
    if (r->alloc_libs[i].peak) {
      char name[sizeof r->alloc_libs[i].name];
      snprintf(name, sizeof name, "%s", r->alloc_libs[i].name);
      fputs(md ? "| - by " : "    by ", o);
      vl__text(o, name, md);
      if (md)
        fprintf(o, " | %.2f |\n", GIB(r->alloc_libs[i].peak));
      else
        fprintf(o, "%*s %8.2f GiB\n", (int)(42 - vl__min(strlen(name), 42)), "",
                GIB(r->alloc_libs[i].peak));
    }
  if (nvml && drv)
    fprintf(o, fmt, "CUDA context and other, at the process peak", GIB(s->context_bytes));
  else
    fprintf(o, none, "CUDA context and other, at the process peak",
            "not measured (needs both layers above)");
  if (s->peak_other_bytes)
    fprintf(o, fmt, "other processes on the job's GPUs", GIB(s->peak_other_bytes));
  if (nvml)
    fprintf(o, "\n%speak process memory at %.1f s\n", b, (double)s->peak_process_t_ns * 1e-9);
  if (v->fw) vl__fw_text(o, v->fw, v->cmp, md);
  if (v->n_findings) fprintf(o, "\n%s\n", md ? "### Findings\n" : "findings:");
  for (int i = 0; i < v->n_findings; i++) {
    fprintf(o, "%s[%s] ", b, v->findings[i].code);
    vl__text(o, v->findings[i].text, md);
    fputc('\n', o);
  }
}

int vl_render_report(FILE *out, enum vl_report_format fmt, const struct vl_report_view *v) {
  if (fmt == VL_REP_HTML) return vl__report_html(out, v); /* html_run.c */
  if (fmt == VL_REP_JSON) return report_json(out, v);
  if (fmt == VL_REP_TRACE) return vl__report_trace(out, v); /* report_trace.c */
  text(out, v, fmt == VL_REP_MD);
  return ferror(out) ? -1 : 0;
}
