/* The run report: text, Markdown, JSON and HTML; Chrome/Perfetto trace
 * JSON is report_trace.c's. */
#include <jansson.h>
#include <stdarg.h>
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

/* Seconds from the record's start to t (0 before it). */
double vl__since_s(const struct vl_record *r, uint64_t t) {
  return t > r->start_ns ? (double)(t - r->start_ns) * 1e-9 : 0;
}

/* Append to buf[0..n) at *w, never past its end. */
static void put(char *buf, size_t n, size_t *w, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *w, const char *fmt, ...) {
  if (*w >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *w, n - *w, fmt, ap);
  va_end(ap);
  *w = k < 0 ? n : vl__min(*w + (size_t)k, n);
}

/* The record's descendants lines in words ("3 processes outlived the job's
 * own at 5.0 s (PIDs 12, 13, 14); run waited for them until 6.1 s"), ""
 * when it has none. */
static void descendants_words(const struct vl_record *r, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  if (!r->desc_events) return;
  unsigned k = r->desc_procs;
  put(buf, n, &w, "%u process%s outlived the job's own at %.1f s", k, k == 1 ? "" : "es",
      vl__since_s(r, r->desc_t_ns));
  char pids[160]; /* as run says them */
  vl__pid_list(pids, sizeof pids, r->desc_pids, r->n_desc_pids,
               k > vl__min(r->n_desc_pids, VL__PIDS_SHOWN));
  if (*pids) put(buf, n, &w, " (%s)", pids);
  if (!r->desc_waited)
    put(buf, n, &w, "; run did not wait for %s (--no-wait-descendants)", k == 1 ? "it" : "them");
  else if (r->exited)
    put(buf, n, &w, "; run waited for %s until %.1f s", k == 1 ? "it" : "them",
        vl__since_s(r, r->end_ns));
  else
    put(buf, n, &w, "; run was waiting for %s where the record ends", k == 1 ? "it" : "them");
}

/* exit's descendants_left in words, "" when 0 */
static void left_words(const struct vl_record *r, char *buf, size_t n) {
  size_t w = 0;
  buf[0] = '\0';
  if (r->desc_left)
    put(buf, n, &w,
        "%u %s still running when the record closed: their memory after that is not in "
        "this record",
        r->desc_left, r->desc_left == 1 ? "was" : "were");
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
  json_t *peak = json_object();
  json_object_set_new(peak, "process_bytes", U(s->peak_process_bytes));
  json_object_set_new(peak, "process_t_s", json_real((double)s->peak_process_t_ns * 1e-9));
  json_object_set_new(peak, "cuda_alloc_bytes", U(s->peak_cuda_alloc_bytes));
  json_object_set_new(peak, "context_bytes", U(s->context_bytes));
  json_object_set_new(peak, "other_processes_bytes", U(s->peak_other_bytes));
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
  json_object_set_new(o, "peak_gpu_bytes", U(s->peak_gpu_bytes));
  json_object_set_new(o, "truncated", json_boolean(r->truncated));
  if (r->damaged) { /* lines skipped (docs/record.md); only then, as descendants */
    json_object_set_new(o, "damaged_lines", U(r->damaged));
    json_object_set_new(o, "first_damaged_line", U(r->damaged_line));
  }
  if (r->implausible) { /* values past the card: damaged data, skipped */
    json_object_set_new(o, "implausible_events", U(r->implausible));
    json_object_set_new(o, "first_implausible_line", U(r->implausible_line));
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
  fprintf(o, ", %zu samples every %llu ms, %.1f s", r->n_samples,
          (unsigned long long)r->interval_ms, (double)s->duration_ns * 1e-9);
  if (r->exited)
    fprintf(o, ", exit status %d", r->exit_status);
  else
    fprintf(o, ", no exit line (%s)",
            r->disk_full ? "the record ends early: the disk was full" : "the run was killed");
  char d[400];
  descendants_words(r, d, sizeof d);
  if (*d) fprintf(o, "\n%s%s", md ? "\n" : "  ", d);
  left_words(r, d, sizeof d);
  if (*d) fprintf(o, "\n%s%s", md ? "\n" : "  ", d);
  fprintf(o, "\n%sGPUs:", md ? "\n" : "  ");
  for (unsigned i = 0; i < r->n_gpus; i++) {
    fprintf(o, "%s %u ", i ? "," : "", r->gpus[i].index);
    vl__text(o, r->gpus[i].name, md);
  }
  if (!r->n_gpus) {
    fputs(" none (", o);
    vl__text(o, r->nvml, md);
    fputs(")", o);
  }
  fprintf(o, "\n\n");
  if (md) fprintf(o, "| layer | peak GiB |\n|---|---:|\n");
  const char *fmt = md ? "| %s | %.2f |\n" : "  %-46s %8.2f GiB\n";
  fprintf(o, fmt, "process memory (NVML, the job's processes)", GIB(s->peak_process_bytes));
  fprintf(o, fmt, "driver-allocated (interposer)", GIB(s->peak_cuda_alloc_bytes));
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
  fprintf(o, fmt, "CUDA context and other, at the process peak", GIB(s->context_bytes));
  if (s->peak_other_bytes)
    fprintf(o, fmt, "other processes on the job's GPUs", GIB(s->peak_other_bytes));
  fprintf(o, "\n%speak process memory at %.1f s\n", b, (double)s->peak_process_t_ns * 1e-9);
  if (v->fw) vl__fw_text(o, v->fw, v->cmp, md);
  if (v->n_findings) fprintf(o, "\n%s\n", md ? "### Findings\n" : "findings:");
  for (int i = 0; i < v->n_findings; i++) {
    fprintf(o, "%s[%s] ", b, v->findings[i].code);
    vl__text(o, v->findings[i].text, md);
    fputc('\n', o);
  }
}

static void html_para(FILE *o, const char *text) {
  if (!*text) return;
  fputs("<p>", o);
  vl__html_text(o, text);
  fputs("</p>\n", o);
}

/* One self-contained page: the peaks table, every layer over time on one
 * chart (lib/render/html_run.c), the framework layer, the findings. */
static int report_html(FILE *o, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  vl__html_head(o, "vramledger run");
  fputs("<h1>Run: ", o);
  vl__html_text(o, r->command);
  fputs("</h1>\n<p>", o);
  vl__html_text(o, v->source);
  fprintf(o, ", %zu samples every %llu ms, %.1f s", r->n_samples,
          (unsigned long long)r->interval_ms, (double)s->duration_ns * 1e-9);
  if (r->exited) fprintf(o, ", exit status %d", r->exit_status);
  fputs("</p>\n", o);
  char d[400];
  descendants_words(r, d, sizeof d);
  html_para(o, d);
  left_words(r, d, sizeof d);
  html_para(o, d);
  fputs("<table><tr><th>layer</th><th>peak GiB</th></tr>\n", o);
  fprintf(o, "<tr><td>process memory (NVML)</td><td class=n>%.2f</td></tr>\n",
          GIB(s->peak_process_bytes));
  fprintf(o, "<tr><td>driver-allocated (interposer)</td><td class=n>%.2f</td></tr>\n",
          GIB(s->peak_cuda_alloc_bytes));
  for (unsigned i = 0; i < r->n_alloc_libs; i++)
    if (r->alloc_libs[i].peak) {
      fputs("<tr><td>&nbsp;&nbsp;by ", o);
      vl__html_text(o, r->alloc_libs[i].name); /* a file name from the record: escaped */
      fprintf(o, "</td><td class=n>%.2f</td></tr>\n", GIB(r->alloc_libs[i].peak));
    }
  fprintf(o, "<tr><td>CUDA context and other, at the process peak</td><td class=n>%.2f</td></tr>\n",
          GIB(s->context_bytes));
  fputs("</table>\n", o);
  vl__run_chart(o, r, s, v->fw);
  if (v->fw) vl__fw_html(o, v->fw, v->cmp);
  if (v->n_findings) fputs("<h2>Findings</h2>\n<ul>\n", o);
  for (int i = 0; i < v->n_findings; i++) {
    fputs("<li><b>", o);
    vl__html_text(o, v->findings[i].code);
    fputs("</b>: ", o);
    vl__html_text(o, v->findings[i].text);
    fputs("</li>\n", o);
  }
  if (v->n_findings) fputs("</ul>\n", o);
  vl__html_foot(o);
  return ferror(o) ? -1 : 0;
}

int vl_render_report(FILE *out, enum vl_report_format fmt, const struct vl_report_view *v) {
  if (fmt == VL_REP_HTML) return report_html(out, v);
  if (fmt == VL_REP_JSON) return report_json(out, v);
  if (fmt == VL_REP_TRACE) return vl__report_trace(out, v); /* report_trace.c */
  text(out, v, fmt == VL_REP_MD);
  return ferror(out) ? -1 : 0;
}
