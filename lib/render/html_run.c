/* The run report's chart: every layer on one time axis (seconds from the
 * record's start). NVML process memory and driver-allocated come from the
 * samples, min/max decimated; reserved and allocated from the probe, the
 * most each held in every phase (or step, where phases carry no counters)
 * drawn as steps, broken where nothing was counted; the phases as bands. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

enum { BUCKETS = 2000 };    /* per series: 2 values a bucket, about 2 a pixel */
enum { MAX_BANDS = 20000 }; /* under 1 MiB of page */

struct span { /* an interval with the most allocated and reserved in it */
  double t0, t1;
  uint64_t allocated, reserved;
};

static const char *const band_kind[][2] = {{"forward", "#dbe9f6"},   {"loss", "#fde0c5"},
                                           {"backward", "#f8d5d5"},  {"pre_step", "#eeeeee"},
                                           {"optimizer", "#d9f0d3"}, {"eval", "#e8e0f0"}};
enum { N_BANDS = sizeof band_kind / sizeof band_kind[0] };

static double sample_t(const void *ctx, size_t i) {
  const struct vl_record *r = ctx;
  return vl__since_s(r, r->samples[i].t_ns);
}
static double sample_y(const void *ctx, size_t i, int k) {
  const struct vl_rec_sample *x = &((const struct vl_record *)ctx)->samples[i];
  return (double)(k == 0 ? x->tree_bytes : x->cuda_alloc_max_bytes);
}

static int by_t0(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static int by_step(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (x > y) - (x < y);
}

/* The main process's intervals with allocator counters, in time order:
 * its phases, and the steps that have a peak but no phase with counters.
 * The caller frees *out with vl_free. */
static size_t spans(const struct vl_record *r, const struct vl_probe_layer *f, struct span **out) {
  size_t n = 0, n_counted = 0, cap = r->n_phases + r->n_steps;
  struct span *s = cap ? vl_malloc(cap * sizeof *s) : NULL;
  unsigned *counted = r->n_phases ? vl_malloc(r->n_phases * sizeof *counted) : NULL;
  *out = s;
  if (!s || (r->n_phases && !counted)) {
    vl_free(counted);
    return 0;
  }
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    if (p->pid != f->main_pid || !p->has_alloc || p->t0_ns < r->start_ns) continue;
    s[n++] = (struct span){vl__since_s(r, p->t0_ns), vl__since_s(r, p->t_ns), p->peak_allocated,
                           p->peak_reserved};
    counted[n_counted++] = p->step;
  }
  if (n_counted) qsort(counted, n_counted, sizeof *counted, by_step);
  for (size_t i = 0; i < r->n_steps; i++) { /* steps the phases did not count */
    const struct vl_rec_step *st = &r->steps[i];
    if (st->pid != f->main_pid || !st->has_peak || st->t_ns < r->start_ns + st->time_ns) continue;
    if (n_counted && bsearch(&st->step, counted, n_counted, sizeof *counted, by_step)) continue;
    s[n++] = (struct span){vl__since_s(r, st->t_ns - st->time_ns), vl__since_s(r, st->t_ns),
                           st->peak_allocated, st->peak_reserved};
  }
  vl_free(counted);
  qsort(s, n, sizeof *s, by_t0);
  return n;
}

/* The spans as steps of the two series, neighbours merged (the most of
 * each) where they share one of BUCKETS intervals of [0, end]; a break
 * where time passes with nothing counted. */
static void span_rows(json_t *c, const struct span *s, size_t n, double end, int a, int rs) {
  double width = end / BUCKETS;
  for (size_t i = 0; i < n;) {
    struct span m = s[i];
    size_t j = i + 1;
    while (j < n && floor(s[j].t0 / width) == floor(m.t0 / width) && s[j].t0 <= m.t1 + 1e-3) {
      if (s[j].t1 > m.t1) m.t1 = s[j].t1;
      if (s[j].allocated > m.allocated) m.allocated = s[j].allocated;
      if (s[j].reserved > m.reserved) m.reserved = s[j].reserved;
      j++;
    }
    const double at[2] = {m.t0, m.t1};
    for (int e = 0; e < 2; e++) {
      json_t *row = vl__chart_row(c, at[e]);
      vl__chart_set(row, a, (double)m.allocated);
      if (rs >= 0) vl__chart_set(row, rs, (double)m.reserved);
    }
    if (j < n && s[j].t0 > m.t1 + 1e-3) { /* nothing counted in between */
      json_t *row = vl__chart_row(c, (m.t1 + s[j].t0) / 2);
      vl__chart_set(row, a, NAN);
      if (rs >= 0) vl__chart_set(row, rs, NAN);
    }
    i = j;
  }
}

static int band_of(const struct vl_rec_phase *p) {
  int b = 0;
  while (b < N_BANDS && strcmp(p->phase, band_kind[b][0]) != 0)
    b++;
  return b;
}

/* The phase bands: [t0, t1, kind, step], every phase of the main process;
 * past MAX_BANDS, those of every k-th step only (whole steps, k written as
 * "every"), so a long run's page stays small. The page draws a band only
 * once it is a pixel wide: zoom in to see them. */
static void bands(json_t *c, const struct vl_record *r, const struct vl_probe_layer *f) {
  json_t *kinds = json_array(), *list = json_array();
  for (int b = 0; b < N_BANDS; b++)
    json_array_append_new(
        kinds, json_pack("{s:s,s:s}", "name", band_kind[b][0], "colour", band_kind[b][1]));
  size_t n = 0;
  for (size_t k = 0; k < r->n_phases; k++)
    n += r->phases[k].pid == f->main_pid && band_of(&r->phases[k]) < N_BANDS;
  unsigned every = n > MAX_BANDS ? (unsigned)((n + MAX_BANDS - 1) / MAX_BANDS) : 1;
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    int b = band_of(p);
    if (p->pid != f->main_pid || p->t0_ns < r->start_ns || b == N_BANDS || p->step % every)
      continue;
    json_array_append_new(list, json_pack("[f,f,i,i]", vl__since_s(r, p->t0_ns),
                                          vl__since_s(r, p->t_ns), b, (int)p->step));
  }
  json_object_set_new(
      c, "bands", json_pack("{s:o,s:o,s:i}", "kinds", kinds, "list", list, "every", (int)every));
}

void vl__run_chart(FILE *o, const struct vl_record *r, const struct vl_run_summary *s,
                   const struct vl_probe_layer *f) {
  bool probe = f && f->present && f->cuda;
  struct span *sp = NULL;
  size_t n_sp = probe ? spans(r, f, &sp) : 0;
  if (!r->n_samples && !n_sp) {
    vl_free(sp);
    return;
  }
  double end = (double)s->duration_ns * 1e-9;
  for (size_t i = 0; i < n_sp; i++)
    end = fmax(end, sp[i].t1);
  if (!(end > 0)) end = 1;
  json_t *c = vl__chart_new("lines", "time from the start", "time", "memory", "bytes");
  int nvml = -1, drv = -1, res = -1, alloc = -1;
  char rank[48] = "";
  if (probe && f->n_ranks > 1) snprintf(rank, sizeof rank, ", the process of rank 0");
  char name[96];
  if (r->n_samples) nvml = vl__chart_series(c, "process memory (NVML)", "#d62728", 0);
  if (r->n_samples && s->peak_cuda_alloc_bytes)
    drv = vl__chart_series(c, "driver-allocated (interposer)", "#ff7f0e", 0);
  if (n_sp) {
    snprintf(name, sizeof name, "reserved (PyTorch cache%s)", rank);
    res = vl__chart_series(c, name, "#2ca02c", VL_SERIES_STEP);
    snprintf(name, sizeof name, "allocated (tensors%s)", rank);
    alloc = vl__chart_series(c, name, "#1f77b4", VL_SERIES_STEP);
  }
  if (r->n_samples) {
    size_t *keep = vl_malloc(r->n_samples * sizeof *keep);
    size_t m =
        keep ? vl__minmax_keep(r->n_samples, sample_t, sample_y, drv >= 0 ? 2 : 1, r, BUCKETS, keep)
             : 0;
    for (size_t i = 0; i < m; i++) {
      const struct vl_rec_sample *x = &r->samples[keep[i]];
      json_t *row = vl__chart_row(c, vl__since_s(r, x->t_ns));
      vl__chart_set(row, nvml, (double)x->tree_bytes);
      /* the most since the previous sample (a block held microseconds at
       * --interval-ms 1 shows; docs/record.md, cuda_alloc_max_bytes) */
      if (drv >= 0) vl__chart_set(row, drv, (double)x->cuda_alloc_max_bytes);
    }
    vl_free(keep);
    vl__chart_peak(c, nvml, (double)s->peak_process_t_ns * 1e-9, (double)s->peak_process_bytes,
                   "peak process memory");
  }
  if (n_sp) {
    span_rows(c, sp, n_sp, end, alloc, res);
    double at = NAN;
    for (size_t i = 0; i < n_sp && isnan(at); i++)
      if (sp[i].allocated == f->peak_allocated) at = (sp[i].t0 + sp[i].t1) / 2;
    vl__chart_peak(c, alloc, at, (double)f->peak_allocated, "peak allocated");
    bands(c, r, f);
  }
  vl_free(sp);
  if (r->n_marks) { /* the job's own marks: dashed lines, named on hover */
    json_t *marks = json_array();
    for (size_t i = 0; i < r->n_marks && i < 500; i++)
      json_array_append_new(marks,
                            json_pack("[f,s]", vl__since_s(r, r->marks[i].t_ns), r->marks[i].name));
    json_object_set_new(c, "marks", marks);
  }
  fputs("<h2>Memory over time</h2>\n", o);
  vl__html_chart(o, "memory over time", c, 360);
  fputs("<p class=\"vl-caption\">", o);
  if (r->n_samples)
    fprintf(o,
            "Every sample's extremes are kept (the most and the least in each of %d intervals), "
            "so a one-sample spike is drawn at its height. ",
            BUCKETS);
  if (n_sp) fputs("Reserved and allocated: the most in each phase (or step). ", o);
  fputs("Drag across the chart or the strip under it to zoom, double-click to zoom out.</p>\n", o);
}
