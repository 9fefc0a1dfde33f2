/* vramledger trace's output: the replays side by side, text or JSON. */
#include <jansson.h>
#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "trace_time.h"
#include "vramledger/caching.h"
#include "vramledger/probe.h"
#include "vramledger/render.h"

/* The replay covers the whole job: it exited 0 (or, for a replayed file,
 * is not known to have failed) and its trace's last line is whole. */
static bool complete(const struct vl_trace_view *v) {
  return v->job_exit_status == 0 && v->tr->cut_last_line == 0;
}

/* The last mark in the trace: where an incomplete run stopped; NULL: none. */
static const char *last_mark(const struct vl_trace *tr) {
  return tr->n_marks ? tr->marks[tr->n_marks - 1] : NULL;
}

static json_t *str_or_null(const char *s) { return s ? vl__json_str(s) : json_null(); }

/* What a trace of convolutions cannot hold: cuDNN's workspaces
 * (aten/src/ATen/native/cudnn/Conv_v8.cpp takes one from the caching
 * allocator per convolution, sized by cuDNN's heuristics, and no op returns
 * it); how much it moved peak reserved where measured. */
#define CONV_CAVEAT                                                                                \
  "on CUDA each takes a cuDNN workspace that no op returns and no trace holds (sized by "          \
  "cuDNN's heuristics): peak reserved can be above this replay (ResNet-50 under AMP on an "        \
  "H200: 6 to 8 % above; bench/results/dry-run/)"

#define LIVE_LINES 8 /* text: the largest groups shown */
#define LIVE_JSON 24 /* JSON: the largest groups listed, the rest summed */

static const char *live_name(const struct vl_trace *tr, const struct vl_live_group *g, bool mark) {
  if (mark) return g->key ? tr->marks[g->key - 1] : NULL;
  return g->key ? tr->modules[g->key] : NULL;
}

static json_t *live_groups(const struct vl_trace *tr, const struct vl_live_group *g, size_t n,
                           bool mark) {
  json_t *a = json_array();
  uint64_t rest = 0, rest_n = 0;
  for (size_t i = 0; i < n; i++) {
    if (i >= LIVE_JSON) {
      rest += g[i].bytes;
      rest_n += g[i].allocations;
      continue;
    }
    json_t *x = json_object();
    const char *name = live_name(tr, &g[i], mark);
    json_object_set_new(x, mark ? "mark" : "module", name ? vl__json_str(name) : json_null());
    json_object_set_new(x, "bytes", U(g[i].bytes));
    json_object_set_new(x, "allocations", U(g[i].allocations));
    json_array_append_new(a, x);
  }
  if (rest) {
    json_t *x = json_object();
    json_object_set_new(x, mark ? "mark" : "module", vl__json_str("(the others)"));
    json_object_set_new(x, "bytes", U(rest));
    json_object_set_new(x, "allocations", U(rest_n));
    json_array_append_new(a, x);
  }
  return a;
}

static json_t *live_json(const struct vl_trace *tr, const struct vl_live_at *l) {
  json_t *o = json_object();
  json_object_set_new(o, "bytes", U(l->bytes));
  json_object_set_new(o, "by_mark", live_groups(tr, l->by_mark, l->n_mark, true));
  json_object_set_new(o, "by_module", live_groups(tr, l->by_module, l->n_module, false));
  return o;
}

static void live_lines(FILE *o, const struct vl_trace *tr, const struct vl_live_group *g, size_t n,
                       bool mark) {
  uint64_t rest = 0;
  for (size_t i = 0; i < n; i++) {
    if (i >= LIVE_LINES) {
      rest += g[i].bytes;
      continue;
    }
    const char *name = live_name(tr, &g[i], mark);
    char cut[41]; /* the name in 40 bytes, whole characters: the job's words */
    vl__utf8_copy(cut, sizeof cut, name ? name : mark ? "(before the first mark)" : "(no module)");
    fputs("    ", o);
    vl__text_pad(o, cut, 40, false);
    fprintf(o, " %10.3f GiB %8zu allocations\n", GIB(g[i].bytes), g[i].allocations);
  }
  if (rest) fprintf(o, "    %-40s %10.3f GiB\n", "(the others)", GIB(rest));
}

static int as_json(FILE *o, const struct vl_trace_view *v) {
  const struct vl_replay *r = v->replays;
  const struct vl_trace *tr = v->tr;
  json_t *root = json_object();
  json_object_set_new(root, "schema", vl__json_str("vramledger.trace/1"));
  json_object_set_new(root, "trace", vl__json_str(v->trace));
  json_object_set_new(root, "device", vl__json_str(v->device));
  json_object_set_new(root, "events", U(tr->n));
  json_object_set_new(root, "allocations", U(r[0].allocs));
  json_object_set_new(root, "frees", U(r[0].frees));
  json_object_set_new(root, "job_exit_status", json_integer(v->job_exit_status));
  json_object_set_new(root, "complete", json_boolean(complete(v)));
  json_object_set_new(root, "stopped_after_mark", str_or_null(last_mark(tr)));
  json_object_set_new(root, "cut_last_line_bytes", U(tr->cut_last_line));
  json_object_set_new(root, "batch", tr->batch ? U(tr->batch) : json_null());
  json_object_set_new(root, "convolutions", U(tr->convolutions));
  json_t *caveats = json_array();
  if (tr->convolutions) json_array_append_new(caveats, vl__json_str("convolutions: " CONV_CAVEAT));
  json_object_set_new(root, "caveats", caveats);
  json_object_set_new(root, "peaks_from_mark", str_or_null(v->from_mark));
  json_object_set_new(root, "peak_mark",
                      r[0].peak_mark >= 0 ? vl__json_str(tr->marks[r[0].peak_mark]) : json_null());
  json_object_set_new(root, "peak_module",
                      r[0].peak_module ? vl__json_str(tr->modules[r[0].peak_module]) : json_null());
  json_object_set_new(root, "peak_at",
                      r[0].peak_at ? vl__json_str(tr->modules[r[0].peak_at]) : json_null());
  json_object_set_new(root, "peak_dtype",
                      r[0].peak_dtype ? vl__json_str(tr->modules[r[0].peak_dtype]) : json_null());
  json_t *a = json_array();
  for (int i = 0; i < v->n; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "allocator", vl__json_str(v->names[i]));
    json_object_set_new(x, "batch",
                        v->batches && v->batches[i] ? U(v->batches[i])
                        : tr->batch                 ? U(tr->batch)
                                                    : json_null());
    json_object_set_new(x, "peak_allocated_bytes", U(r[i].peak_allocated));
    json_object_set_new(x, "peak_reserved_bytes", U(r[i].peak_reserved));
    json_object_set_new(x, "inactive_split_at_peak_bytes", U(r[i].inactive_split_at_peak));
    json_object_set_new(x, "segments_created", U(r[i].end.cuda_mallocs));
    json_object_set_new(x, "alloc_retries", U(r[i].end.alloc_retries));
    json_object_set_new(x, "oom", json_boolean(r[i].oom));
    json_object_set_new(x, "oom_event", r[i].oom ? U(r[i].oom_event + 1) : json_null());
    json_array_append_new(a, x);
  }
  json_object_set_new(root, "replays", a);
  if (v->live) json_object_set_new(root, "live_at_peak", live_json(tr, v->live));
  if (v->fw && v->fw->has_bill) /* the probe's categories, as report gives them */
    json_object_set_new(root, "bill", vl__fw_bill_json(v->fw));
  if (v->time || v->ops > 0) vl__trace_time_json(root, v->time, v->gpu);
  int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  fputc('\n', o);
  return rc == 0 && !ferror(o) ? 0 : -1;
}

/* What an incomplete run's replay covers: how the job ended, the cut
 * line, and where the trace stops. */
static void incomplete_lines(FILE *o, const struct vl_trace_view *v) {
  int st = v->job_exit_status;
  if (st > 128) /* `run`'s convention, as a shell's: 128 + the signal */
    fprintf(o, "  an incomplete run: the job was killed by signal %d (status %d)\n", st - 128, st);
  else if (st)
    fprintf(o, "  an incomplete run: the job exited with status %d\n", st);
  if (v->tr->cut_last_line)
    fprintf(o, "  the trace's last line was cut (%zu bytes), ignored\n", v->tr->cut_last_line);
  const char *m = last_mark(v->tr);
  fprintf(o, "  the replay covers the part that ran: %zu events, ", v->tr->n);
  if (m) {
    fputs("stopped after mark '", o);
    vl__plain_text(o, m); /* the job's own words */
    fputs("'\n", o);
  } else
    fprintf(o, "no mark\n");
}

static void table(FILE *o, const struct vl_trace_view *v, const char *for_part) {
  const struct vl_replay *r = v->replays;
  fprintf(o, "\n  the GPU would see%s (PyTorch's caching allocator, docs/model.md section 12):\n\n",
          for_part);
  fprintf(o, "  %-26s %14s %14s %10s %9s %8s\n", "allocator", "peak alloc", "peak reserved",
          "cached", "segments", "retries");
  for (int i = 0; i < v->n; i++) {
    double cached =
        r[i].peak_reserved ? 1.0 - (double)r[i].peak_allocated / (double)r[i].peak_reserved : 0;
    fprintf(o, "  %-26s %10.3f GiB %10.3f GiB %8.1f %% %9llu %8llu%s", v->names[i],
            GIB(r[i].peak_allocated), GIB(r[i].peak_reserved), 100 * cached,
            (unsigned long long)r[i].end.cuda_mallocs, (unsigned long long)r[i].end.alloc_retries,
            r[i].oom ? "  out of memory at event " : "");
    if (r[i].oom) fprintf(o, "%zu", r[i].oom_event + 1);
    fputc('\n', o);
  }
}

int vl_render_trace(FILE *o, bool json, const struct vl_trace_view *v) {
  if (json) return as_json(o, v);
  const struct vl_replay *r = v->replays;
  const struct vl_trace *tr = v->tr;
  bool whole = complete(v);
  const char *of = whole ? "" : " of the part that ran";
  fputs("trace: ", o);
  vl__plain_text(o, v->trace);
  fprintf(o, "\n  %zu allocations and %zu frees replayed (device ", r[0].allocs, r[0].frees);
  vl__plain_text(o, v->device);
  fputs(")\n", o);
  if (!whole) incomplete_lines(o, v);
  if (v->from_mark) {
    fputs("  peaks from mark '", o);
    vl__plain_text(o, v->from_mark);
    fputs("' on (--from-mark)\n", o);
  }
  table(o, v, whole ? "" : " for the part that ran");
  fprintf(o, "\n  the peak%s: event %zu of %zu", of, r[0].peak_event + 1, tr->n);
  /* the trace's marks and module names are the job's: plain text */
  if (r[0].peak_mark >= 0) {
    fputs(", in '", o);
    vl__plain_text(o, tr->marks[r[0].peak_mark]);
    fputc('\'', o);
  }
  if (r[0].peak_module) {
    fputs(", allocated by ", o);
    vl__plain_text(o, tr->modules[r[0].peak_module]);
  }
  if (r[0].peak_at) {
    fputs(" at ", o);
    vl__plain_text(o, tr->modules[r[0].peak_at]);
  }
  if (r[0].peak_dtype) {
    fputs(" (", o);
    vl__plain_text(o, tr->modules[r[0].peak_dtype]);
    fputc(')', o);
  }
  fputc('\n', o);
  if (tr->convolutions) {
    fprintf(o, "\n  %llu convolutions ran: ", (unsigned long long)tr->convolutions);
    fputs(CONV_CAVEAT "\n", o);
  }
  if (v->live && v->live->bytes) {
    fprintf(o,
            "\n  live at the peak: %.3f GiB, by the mark before each allocation (what each "
            "phase made and still holds):\n",
            GIB(v->live->bytes));
    live_lines(o, tr, v->live->by_mark, v->live->n_mark, true);
    fprintf(o, "  and by the module that made it:\n");
    live_lines(o, tr, v->live->by_module, v->live->n_module, false);
  }
  if (v->fw && v->fw->has_bill) {
    fprintf(o, "\n  the bill (the probe's, by storage, step %u, after its ", v->fw->bill_step);
    vl__plain_text(o, v->fw->bill_phase);
    fputs("; activations by difference; as `vramledger report` gives it):\n", o);
    vl__fw_bill_lines(o, v->fw, false);
  }
  vl__trace_time_text(o, v->time, v->gpu, v->ops);
  return ferror(o) ? -1 : 0;
}

int vl_render_trace_md(FILE *o, const struct vl_trace_view *v) {
  const struct vl_replay *r = v->replays;
  fputs("# Trace\n\n`", o);
  vl__md_text(o, v->trace);
  fprintf(o, "`: %zu allocations and %zu frees replayed (device ", r[0].allocs, r[0].frees);
  vl__md_text(o, v->device);
  fprintf(o, ")%s.\n\n", complete(v) ? "" : "; an incomplete run: the part that ran");
  fputs("| allocator | peak allocated | peak reserved | segments | retries |\n"
        "|---|---:|---:|---:|---:|\n",
        o);
  for (int i = 0; i < v->n; i++) {
    fputs("| ", o);
    vl__md_text(o, v->names[i]);
    fprintf(o, " | %.3f GiB | %.3f GiB | %llu | %llu%s |\n", GIB(r[i].peak_allocated),
            GIB(r[i].peak_reserved), (unsigned long long)r[i].end.cuda_mallocs,
            (unsigned long long)r[i].end.alloc_retries, r[i].oom ? " (out of memory)" : "");
  }
  vl__trace_time_md(o, v->time, v->gpu, v->ops);
  return ferror(o) ? -1 : 0;
}
