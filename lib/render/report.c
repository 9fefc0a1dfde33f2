/* The run report: text, Markdown, JSON, and Chrome/Perfetto trace JSON. */
#include <jansson.h>
#include <stdio.h>

#include "../util/internal.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

#define GIB(x) ((double)(x) / (double)(1ull << 30))

static json_t *U(uint64_t x) { return json_integer((json_int_t)x); }

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
  json_object_set_new(o, "peak", peak);
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
  fprintf(o, fmt, "CUDA context and other, at the process peak", GIB(s->context_bytes));
  if (s->peak_other_bytes)
    fprintf(o, fmt, "other processes on the job's GPUs", GIB(s->peak_other_bytes));
  fprintf(o, "\n%speak process memory at %.1f s\n", b, (double)s->peak_process_t_ns * 1e-9);
  if (v->n_findings) fprintf(o, "\n%s\n", md ? "### Findings\n" : "findings:");
  for (int i = 0; i < v->n_findings; i++)
    fprintf(o, "%s[%s] %s\n", b, v->findings[i].code, v->findings[i].text);
}

int vl_render_report(FILE *out, enum vl_report_format fmt, const struct vl_report_view *v) {
  if (fmt == VL_REP_JSON) return report_json(out, v);
  if (fmt == VL_REP_TRACE) return report_trace(out, v);
  text(out, v, fmt == VL_REP_MD);
  return ferror(out) ? -1 : 0;
}
