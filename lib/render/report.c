/* The run report: text, Markdown, JSON, and Chrome/Perfetto trace JSON. */
#include <jansson.h>
#include <stdio.h>

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

static int report_json(FILE *out, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  json_t *o = json_object();
  json_object_set_new(o, "schema", json_string("vramledger.report/1"));
  json_object_set_new(o, "record", json_string(v->source));
  json_object_set_new(o, "command", json_string(r->command));
  json_object_set_new(o, "host", json_string(r->host));
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
    json_array_append_new(g, json_string(r->gpus[i].name));
  json_object_set_new(o, "gpus", g);
  json_object_set_new(o, "driver", json_string(r->driver));
  json_object_set_new(o, "nvml", json_string(r->nvml));
  json_object_set_new(o, "exit_status", r->exited ? json_integer(r->exit_status) : json_null());
  json_object_set_new(o, "leak_bytes_per_s", json_real(s->leak_bytes_per_s));
  json_object_set_new(o, "imbalance", json_real(s->imbalance));
  json_object_set_new(o, "gpus_used", U(s->gpus_used));
  json_object_set_new(o, "peak_gpu_bytes", U(s->peak_gpu_bytes));
  json_object_set_new(o, "truncated", json_boolean(r->truncated));
  json_t *f = json_array();
  for (int i = 0; i < v->n_findings; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "code", json_string(v->findings[i].code));
    json_object_set_new(e, "text", json_string(v->findings[i].text));
    json_array_append_new(f, e);
  }
  json_object_set_new(o, "findings", f);
  return dump(out, o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
}

/* Chrome trace event format: counters ("C") per layer, marks as instants,
 * timestamps in microseconds from the start. */
static int report_trace(FILE *out, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  json_t *ev = json_array();
  json_t *m = json_object();
  json_object_set_new(m, "name", json_string("process_name"));
  json_object_set_new(m, "ph", json_string("M"));
  json_object_set_new(m, "pid", json_integer(1));
  json_t *a = json_object();
  json_object_set_new(a, "name", json_string(r->command[0] ? r->command : "vramledger run"));
  json_object_set_new(m, "args", a);
  json_array_append_new(ev, m);
  for (size_t i = 0; i < r->n_samples; i++) {
    const struct vl_rec_sample *s = &r->samples[i];
    double ts = (double)(s->t_ns - r->start_ns) / 1000.0;
    static const char *const names[] = {"process (NVML) GiB", "driver-allocated GiB",
                                        "context + other GiB"};
    double vals[3] = {GIB(s->tree_bytes), GIB(s->cuda_alloc_bytes),
                      GIB(vl__sub0(s->tree_bytes, s->cuda_alloc_bytes))};
    for (int k = 0; k < 3; k++) {
      json_t *e = json_object();
      json_object_set_new(e, "name", json_string(names[k]));
      json_object_set_new(e, "ph", json_string("C"));
      json_object_set_new(e, "ts", json_real(ts));
      json_object_set_new(e, "pid", json_integer(1));
      json_t *args = json_object();
      json_object_set_new(args, "GiB", json_real(vals[k]));
      json_object_set_new(e, "args", args);
      json_array_append_new(ev, e);
    }
  }
  for (size_t i = 0; i < r->n_marks; i++) {
    const struct vl_rec_mark *mk = &r->marks[i];
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(mk->name));
    json_object_set_new(e, "ph", json_string("i"));
    json_object_set_new(e, "s", json_string("p"));
    json_object_set_new(e, "ts", json_real((double)(mk->t_ns - r->start_ns) / 1000.0));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(mk->pid));
    json_array_append_new(ev, e);
  }
  if (v->fw) vl__fw_trace(ev, v->fw, r);
  json_t *o = json_object();
  json_object_set_new(o, "traceEvents", ev);
  json_object_set_new(o, "displayTimeUnit", json_string("ms"));
  return dump(out, o, JSON_COMPACT | JSON_REAL_PRECISION(9));
}

static void text(FILE *o, const struct vl_report_view *v, bool md) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  const char *b = md ? "- " : "  ";
  fprintf(o, "%s%s\n", md ? "## Run: " : "run: ", r->command);
  fprintf(o, "%srecord %s, %zu samples every %llu ms, %.1f s", md ? "\n" : "  ", v->source,
          r->n_samples, (unsigned long long)r->interval_ms, (double)s->duration_ns * 1e-9);
  if (r->exited)
    fprintf(o, ", exit status %d", r->exit_status);
  else
    fprintf(o, ", no exit line (the run was killed)");
  fprintf(o, "\n%sGPUs:", md ? "\n" : "  ");
  for (unsigned i = 0; i < r->n_gpus; i++)
    fprintf(o, "%s %u %s", i ? "," : "", r->gpus[i].index, r->gpus[i].name);
  if (!r->n_gpus) fprintf(o, " none (%s)", r->nvml);
  fprintf(o, "\n\n");
  if (md) fprintf(o, "| layer | peak GiB |\n|---|---:|\n");
  const char *fmt = md ? "| %s | %.2f |\n" : "  %-46s %8.2f GiB\n";
  fprintf(o, fmt, "process memory (NVML, the job's processes)", GIB(s->peak_process_bytes));
  fprintf(o, fmt, "driver-allocated (interposer)", GIB(s->peak_cuda_alloc_bytes));
  for (unsigned i = 0; i < r->n_alloc_libs; i++) /* who asked: the most each held */
    if (r->alloc_libs[i].peak)
      fprintf(o, md ? "| - by %s | %.2f |\n" : "    by %-42s %8.2f GiB\n", r->alloc_libs[i].name,
              GIB(r->alloc_libs[i].peak));
  fprintf(o, fmt, "CUDA context and other, at the process peak", GIB(s->context_bytes));
  if (s->peak_other_bytes)
    fprintf(o, fmt, "other processes on the job's GPUs", GIB(s->peak_other_bytes));
  fprintf(o, "\n%speak process memory at %.1f s\n", b, (double)s->peak_process_t_ns * 1e-9);
  if (v->fw) vl__fw_text(o, v->fw, v->cmp, md);
  if (v->n_findings) fprintf(o, "\n%s\n", md ? "### Findings\n" : "findings:");
  for (int i = 0; i < v->n_findings; i++)
    fprintf(o, "%s[%s] %s\n", b, v->findings[i].code, v->findings[i].text);
}

/* One self-contained page: the layers over time as SVG polylines, marks as
 * vertical lines, the process peak circled, and the findings. */
static int report_html(FILE *o, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  const double W = 900, H = 320, L = 60, B = 30;
  double tmax = (double)s->duration_ns * 1e-9, ymax = GIB(s->peak_process_bytes);
  if (GIB(s->peak_cuda_alloc_bytes) > ymax) ymax = GIB(s->peak_cuda_alloc_bytes);
  if (tmax <= 0) tmax = 1;
  if (ymax <= 0) ymax = 1;
  vl__html_head(o, "vramledger run");
  fputs("<h1>Run: ", o);
  vl__html_text(o, r->command);
  fputs("</h1>\n<p>", o);
  vl__html_text(o, v->source);
  fprintf(o, ", %zu samples every %llu ms, %.1f s", r->n_samples,
          (unsigned long long)r->interval_ms, tmax);
  if (r->exited) fprintf(o, ", exit status %d", r->exit_status);
  fputs("</p>\n<table><tr><th>layer</th><th>peak GiB</th></tr>\n", o);
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
  vl__svg_open(o, W, H, L, 10, 10, B);
  for (int k = 0; k <= 4; k++) {
    double y = H - B - (H - B - 10) * k / 4.0;
    fprintf(o, "<text x=\"5\" y=\"%.1f\">%.1f GiB</text>\n", y + 4, ymax * k / 4.0);
    fprintf(o, "<text x=\"%.1f\" y=\"%.0f\">%.1f s</text>\n", L + (W - 10 - L) * k / 4.0 - 10,
            H - 10, tmax * k / 4.0);
  }
  static const char *const colour[3] = {"#d62728", "#1f77b4", "#2ca02c"};
  static const char *const label[3] = {"process (NVML)", "driver-allocated", "context + other"};
  size_t step = r->n_samples > 2000 ? r->n_samples / 2000 : 1;
  for (int k = 0; k < 3; k++) {
    fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour[k]);
    for (size_t i = 0; i < r->n_samples; i += step) {
      const struct vl_rec_sample *x = &r->samples[i];
      double t = (double)(x->t_ns - r->start_ns) * 1e-9;
      double val = k == 0   ? GIB(x->tree_bytes)
                   : k == 1 ? GIB(x->cuda_alloc_bytes)
                            : GIB(vl__sub0(x->tree_bytes, x->cuda_alloc_bytes));
      fprintf(o, "%.1f,%.1f ", L + (W - 10 - L) * t / tmax, H - B - (H - B - 10) * val / ymax);
    }
    fputs("\"/>\n", o);
    fprintf(o, "<text x=\"%.0f\" y=\"%d\" fill=\"%s\">%s</text>\n", W - 160, 20 + 14 * k, colour[k],
            label[k]);
  }
  for (size_t i = 0; i < r->n_marks && i < 500; i++) {
    double x = L + (W - 10 - L) * (double)(r->marks[i].t_ns - r->start_ns) * 1e-9 / tmax;
    fprintf(o,
            "<line x1=\"%.1f\" y1=\"10\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#bbb\" "
            "stroke-dasharray=\"3,3\"><title>",
            x, x, H - B);
    vl__html_text(o, r->marks[i].name);
    fputs("</title></line>\n", o);
  }
  fprintf(o,
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" stroke=\"#d62728\">"
          "<title>peak %.2f GiB</title></circle>\n",
          L + (W - 10 - L) * (double)s->peak_process_t_ns * 1e-9 / tmax,
          H - B - (H - B - 10) * GIB(s->peak_process_bytes) / ymax, GIB(s->peak_process_bytes));
  fputs("</svg>\n", o);
  if (v->fw) vl__fw_html(o, v->fw, r, v->cmp);
  if (v->n_findings) fputs("<h2>Findings</h2>\n<ul>\n", o);
  for (int i = 0; i < v->n_findings; i++) {
    fputs("<li><b>", o);
    vl__html_text(o, v->findings[i].code);
    fputs("</b>: ", o);
    vl__html_text(o, v->findings[i].text);
    fputs("</li>\n", o);
  }
  if (v->n_findings) fputs("</ul>\n", o);
  fputs("</body></html>\n", o);
  return ferror(o) ? -1 : 0;
}

int vl_render_report(FILE *out, enum vl_report_format fmt, const struct vl_report_view *v) {
  if (fmt == VL_REP_HTML) return report_html(out, v);
  if (fmt == VL_REP_JSON) return report_json(out, v);
  if (fmt == VL_REP_TRACE) return report_trace(out, v);
  text(out, v, fmt == VL_REP_MD);
  return ferror(out) ? -1 : 0;
}
