/* The run report as one HTML page: the record's words (run_words.c), the
 * ladder, every layer over time on one chart, the framework layer
 * (html_framework.c), the findings. report.c calls in here for
 * --format html; nothing here calls report.c.
 *
 * The chart: one time axis (seconds from the record's start). NVML process
 * memory and driver-allocated are drawn as sampled, min/max decimated, one
 * NVML curve per GPU where the job used several. Reserved and allocated
 * are the most the probe counted in each phase (or step), per rank: a
 * maximum of an interval, drawn as a mark at one moment, never as a line
 * across the interval (it was not held all that time). The moment is the
 * first sample from the interval's start whose NVML reading of the rank's
 * GPU holds it (reserved memory is part of the process's: NVML is read at
 * most every 100 ms, so up to that long after the interval's end), or the
 * interval's end without samples. The first view is the training steps;
 * the whole run is one click away. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

enum { BUCKETS = 2000 };    /* per series: 2 values a bucket, about 2 a pixel */
enum { MAX_BANDS = 20000 }; /* under 1 MiB of page */

struct span { /* an interval with the most allocated and reserved in it */
  uint64_t t0_ns, t1_ns;
  uint64_t allocated, reserved;
};

static const char *const band_kind[][2] = {{"forward", "#dbe9f6"},   {"loss", "#fde0c5"},
                                           {"backward", "#f8d5d5"},  {"pre_step", "#eeeeee"},
                                           {"optimizer", "#d9f0d3"}, {"eval", "#e8e0f0"}};
enum { N_BANDS = sizeof band_kind / sizeof band_kind[0] };

static int by_t0(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  return (x->t0_ns > y->t0_ns) - (x->t0_ns < y->t0_ns);
}

static int by_step(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (x > y) - (x < y);
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

/* A rank's intervals with allocator counters, in time order: its phases,
 * and the steps that have a peak but no phase with counters, *n_out of
 * them. The caller frees *out with vl_free. @return VL_OK or VL_ENOMEM
 * (none then: never some of them). */
static vl_status spans(const struct vl_record *r, unsigned pid, struct span **out, size_t *n_out) {
  size_t n = 0, n_counted = 0, cap = r->n_phases + r->n_steps;
  *out = NULL;
  *n_out = 0;
  if (!cap) return VL_OK;
  struct span *s = vl_malloc(cap * sizeof *s);
  unsigned *counted = r->n_phases ? vl_malloc(r->n_phases * sizeof *counted) : NULL;
  if (!s || (r->n_phases && !counted)) {
    vl_free(s);
    vl_free(counted);
    return VL_ENOMEM;
  }
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    if (p->pid != pid || !p->has_alloc || p->t0_ns < r->start_ns) continue;
    s[n++] = (struct span){p->t0_ns, p->t_ns, p->peak_allocated, p->peak_reserved};
    counted[n_counted++] = p->step;
  }
  if (n_counted) qsort(counted, n_counted, sizeof *counted, by_step);
  for (size_t i = 0; i < r->n_steps; i++) { /* steps the phases did not count */
    const struct vl_rec_step *st = &r->steps[i];
    if (st->pid != pid || !st->has_peak || st->t_ns < r->start_ns + st->time_ns) continue;
    if (n_counted && bsearch(&st->step, counted, n_counted, sizeof *counted, by_step)) continue;
    s[n++] = (struct span){st->t_ns - st->time_ns, st->t_ns, st->peak_allocated, st->peak_reserved};
  }
  vl_free(counted);
  qsort(s, n, sizeof *s, by_t0);
  *out = s;
  *n_out = n;
  return VL_OK;
}

enum { MAX_RANK_CURVES = 8 };

/* What the chart draws, and how each series relates to the others. */
struct timeline {
  const struct vl_record *r;
  const struct vl_run_summary *s;
  const struct vl_probe_layer *f;
  json_t *c;
  int nvml, drv;                    /* the job's NVML (all GPUs), driver-allocated */
  int gpu_nvml[VL_RECORD_MAX_GPUS]; /* NVML of one GPU, -1 where not drawn */
  unsigned n_gpu_curves, gpu_of_curve[VL_RECORD_MAX_GPUS];
  json_t **row_of_sample; /* the chart's row of a kept sample, NULL for the others */
};

/* The NVML series a rank's reserved must stay under: its GPU's curve where
 * there is one (its local rank), else the job's. */
static int nvml_under(const struct timeline *tl, unsigned pid) {
  for (unsigned i = 0; i < tl->r->n_probes; i++)
    if (tl->r->probes[i].pid == pid) {
      unsigned g = tl->r->probes[i].local_rank;
      if (g < VL_RECORD_MAX_GPUS && tl->gpu_nvml[g] >= 0) return tl->gpu_nvml[g];
    }
  return tl->nvml;
}

static uint64_t nvml_of(const struct timeline *tl, size_t i, int series) {
  const struct vl_rec_sample *x = &tl->r->samples[i];
  for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++)
    if (tl->gpu_nvml[g] == series) return x->gpu_tree[g];
  return x->tree_bytes;
}

struct decimate {
  const struct timeline *tl;
};
static double dec_t(const void *ctx, size_t i) {
  const struct timeline *tl = ((const struct decimate *)ctx)->tl;
  return vl__since_s(tl->r, tl->r->samples[i].t_ns);
}
/* the series decimated: the job's NVML, driver-allocated, each GPU's NVML */
static double dec_y(const void *ctx, size_t i, int k) {
  const struct timeline *tl = ((const struct decimate *)ctx)->tl;
  const struct vl_rec_sample *x = &tl->r->samples[i];
  if (k == 0) return (double)x->tree_bytes;
  if (k == 1) return (double)x->cuda_alloc_max_bytes;
  return (double)x->gpu_tree[tl->gpu_of_curve[k - 2]];
}

/* The first sample at or after t_ns (samples are in time order). */
static size_t first_sample(const struct vl_record *r, uint64_t t_ns) {
  size_t lo = 0, hi = r->n_samples;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->samples[mid].t_ns < t_ns)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Where a span's maximum is drawn: the first sample from its start, up to
 * NVML's reading period after its end, whose NVML reading of `under`
 * holds the span's reserved (or allocated, without reserved); else the
 * highest of those samples (the chart's check then says the record
 * disagrees with itself); SIZE_MAX without samples in reach. */
static size_t mark_sample(const struct timeline *tl, const struct span *sp, int under) {
  const struct vl_record *r = tl->r;
  if (!r->n_samples || under < 0) return SIZE_MAX;
  uint64_t reach = sp->t1_ns + 100000000ull + 2 * r->interval_ms * 1000000ull;
  uint64_t want = sp->reserved ? sp->reserved : sp->allocated;
  size_t best = SIZE_MAX;
  for (size_t i = first_sample(r, sp->t0_ns); i < r->n_samples && r->samples[i].t_ns <= reach;
       i++) {
    uint64_t v = nvml_of(tl, i, under);
    if (v >= want) return i;
    if (best == SIZE_MAX || v > nvml_of(tl, best, under)) best = i;
  }
  return best;
}

/* v into row's series, unless the row holds more already */
static void set_max(json_t *row, int series, double v) {
  json_t *old = json_array_get(row, (size_t)series + 1);
  if (json_is_number(old) && json_number_value(old) >= v) return;
  vl__chart_set(row, series, v);
}

struct mark {
  size_t sample; /* SIZE_MAX: at t1 */
  double t1;
  uint64_t allocated, reserved;
};

/* Place each span's maxima; spans of one of BUCKETS intervals of the run
 * merged first (the most of each kept), so a long run's page stays small
 * and its peak is kept. *n_out marks into *out, freed with vl_free.
 * @return VL_OK or VL_ENOMEM (no marks then: never fewer). */
static vl_status place_marks(const struct timeline *tl, const struct span *sp, size_t n, int under,
                             double end, struct mark **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!n) return VL_OK;
  struct mark *m = vl_malloc(n * sizeof *m);
  if (!m) return VL_ENOMEM;
  double width = end / BUCKETS;
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    struct span x = sp[i];
    size_t j = i + 1;
    double b = floor(vl__since_s(tl->r, x.t0_ns) / width);
    while (j < n && floor(vl__since_s(tl->r, sp[j].t0_ns) / width) == b) {
      if (sp[j].allocated > x.allocated) x.allocated = sp[j].allocated;
      if (sp[j].reserved > x.reserved) x.reserved = sp[j].reserved;
      if (sp[j].t1_ns > x.t1_ns) x.t1_ns = sp[j].t1_ns;
      j++;
    }
    m[k++] = (struct mark){mark_sample(tl, &x, under), vl__since_s(tl->r, x.t1_ns), x.allocated,
                           x.reserved};
    i = j;
  }
  *out = m;
  *n_out = k;
  return VL_OK;
}

/* The probe's ranks drawn, in rank order: the first MAX_RANK_CURVES and
 * always the one that peaks. Returns how many; *peak_k the rank that peaks
 * (an index of f->ranks). */
static unsigned ranks_drawn(const struct vl_probe_layer *f, unsigned idx[MAX_RANK_CURVES],
                            unsigned *peak_k) {
  unsigned n = 0;
  *peak_k = 0;
  for (unsigned k = 1; k < f->n_rank_peaks; k++)
    if (f->ranks[k].peak_allocated > f->ranks[*peak_k].peak_allocated) *peak_k = k;
  for (unsigned k = 0; k < f->n_rank_peaks && k < VL_FW_MAX_RANKS; k++) {
    unsigned at = n;
    while (at > 0 && f->ranks[idx[at - 1]].rank > f->ranks[k].rank)
      at--;
    if (at == MAX_RANK_CURVES) continue;
    for (unsigned j = (n < MAX_RANK_CURVES ? n : MAX_RANK_CURVES - 1); j > at; j--)
      idx[j] = idx[j - 1];
    idx[at] = k;
    if (n < MAX_RANK_CURVES) n++;
  }
  bool has_peak = false;
  for (unsigned j = 0; j < n; j++)
    has_peak |= idx[j] == *peak_k;
  if (!has_peak && n) idx[n - 1] = *peak_k;
  return n;
}

static const char *const rank_reserved_colour[MAX_RANK_CURVES] = {
    "#2ca02c", "#17becf", "#98df8a", "#bcbd22", "#006d2c", "#9edae5", "#74c476", "#dbdb8d"};
static const char *const rank_alloc_colour[MAX_RANK_CURVES] = {
    "#1f77b4", "#9467bd", "#aec7e8", "#c5b0d5", "#08519c", "#6baed6", "#3f007d", "#bcbddc"};
static const char *const gpu_colour[] = {"#d62728", "#e377c2", "#8c564b", "#ff9896",
                                         "#7f7f7f", "#c49c94", "#f7b6d2", "#a50f15"};

/* a series' extra members for the page: the NVML series it stays under,
 * its rank, whether it is the rank that peaks */
static void series_meta(json_t *c, int series, int under, int rank, bool highlight) {
  json_t *s = json_array_get(json_object_get(c, "series"), (size_t)series);
  if (under >= 0) json_object_set_new(s, "under", json_integer(under));
  if (rank >= 0) json_object_set_new(s, "rank", json_integer(rank));
  if (highlight) {
    json_object_set_new(s, "highlight", json_true());
    json_object_set_new(s, "width", json_real(2.5));
  }
}

/* The first view: the training steps (the first step's start to the last
 * one's end, every rank), when they are less than 80 % of the run. */
static void zoom(json_t *c, const struct vl_record *r, double end) {
  uint64_t a = UINT64_MAX, b = 0;
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *st = &r->steps[i];
    if (st->t_ns < r->start_ns + st->time_ns) continue;
    if (st->t_ns - st->time_ns < a) a = st->t_ns - st->time_ns;
    if (st->t_ns > b) b = st->t_ns;
  }
  if (a >= b) return;
  double t0 = vl__since_s(r, a), t1 = vl__since_s(r, b), pad = (t1 - t0) * 0.03;
  if (t1 - t0 > 0.8 * end) return;
  t0 = fmax(0, t0 - pad), t1 = fmin(end, t1 + pad);
  json_object_set_new(c, "zoom",
                      json_pack("{s:[f,f],s:[f,f]}", "steps", t0, t1, "whole", 0.0, end));
}

/* NVML: the job's, and each GPU's where the job used several. */
static void sampled_series(struct timeline *tl) {
  const struct vl_record *r = tl->r;
  const struct vl_run_summary *s = tl->s;
  char name[96];
  tl->nvml = vl__chart_series(
      tl->c, s->gpus_used > 1 ? "process memory, every GPU (NVML)" : "process memory (NVML)",
      "#d62728", 0);
  if (s->peak_cuda_alloc_bytes)
    tl->drv = vl__chart_series(tl->c, "driver-allocated (interposer)", "#ff7f0e", 0);
  if (tl->drv >= 0) series_meta(tl->c, tl->drv, tl->nvml, -1, false);
  if (s->gpus_used < 2) return;
  for (unsigned g = 0; g < r->n_gpus && g < VL_RECORD_MAX_GPUS && tl->n_gpu_curves < 8; g++) {
    unsigned idx = r->gpus[g].index < VL_RECORD_MAX_GPUS ? r->gpus[g].index : g;
    bool used = false;
    for (size_t i = 0; i < r->n_samples && !used; i++)
      used = r->samples[i].gpu_tree[idx] > 0;
    if (!used) continue;
    int rank = -1;
    for (unsigned p = 0; p < r->n_probes; p++)
      if (r->probes[p].local_rank == idx && r->probes[p].world_size > 1)
        rank = (int)r->probes[p].rank;
    if (rank >= 0)
      snprintf(name, sizeof name, "GPU %u, rank %d (NVML)", idx, rank);
    else
      snprintf(name, sizeof name, "GPU %u (NVML)", idx);
    tl->gpu_nvml[idx] = vl__chart_series(tl->c, name, gpu_colour[tl->n_gpu_curves % 8], 0);
    series_meta(tl->c, tl->gpu_nvml[idx], -1, rank, false);
    tl->gpu_of_curve[tl->n_gpu_curves++] = idx;
  }
}

/* The samples, min/max decimated, with every sample a mark stands on.
 * @return VL_OK or VL_ENOMEM (no rows then). */
static vl_status sample_rows(struct timeline *tl, const bool *need) {
  const struct vl_record *r = tl->r;
  size_t *keep = vl_malloc(r->n_samples * sizeof *keep);
  if (!keep) return VL_ENOMEM;
  struct decimate d = {tl};
  size_t m =
      vl__minmax_keep(r->n_samples, dec_t, dec_y, 2 + (int)tl->n_gpu_curves, &d, BUCKETS, keep);
  size_t j = 0;
  for (size_t i = 0; i < r->n_samples; i++) {
    bool kept = j < m && keep[j] == i;
    if (kept) j++;
    if (!kept && !(need && need[i])) continue;
    const struct vl_rec_sample *x = &r->samples[i];
    json_t *row = vl__chart_row(tl->c, vl__since_s(r, x->t_ns));
    tl->row_of_sample[i] = row;
    vl__chart_set(row, tl->nvml, (double)x->tree_bytes);
    /* the most since the previous sample (a block held microseconds at
     * --interval-ms 1 shows; docs/record.md, cuda_alloc_max_bytes) */
    if (tl->drv >= 0) vl__chart_set(row, tl->drv, (double)x->cuda_alloc_max_bytes);
    for (unsigned g = 0; g < tl->n_gpu_curves; g++)
      vl__chart_set(row, tl->gpu_nvml[tl->gpu_of_curve[g]],
                    (double)x->gpu_tree[tl->gpu_of_curve[g]]);
  }
  vl_free(keep);
  return VL_OK;
}

/* The samples where the record's two system layers disagree: the
 * interposer counted more than NVML's reading (a process exiting, which
 * NVML no longer lists, or a reading older than the interposer's). */
static void disagreements(struct timeline *tl) {
  json_t *list = json_array();
  for (size_t i = 0; tl->drv >= 0 && i < tl->r->n_samples; i++) {
    const struct vl_rec_sample *x = &tl->r->samples[i];
    if (x->cuda_alloc_max_bytes > x->tree_bytes && tl->row_of_sample[i])
      json_array_append_new(list, json_real(vl__since_s(tl->r, x->t_ns)));
  }
  json_object_set_new(tl->c, "disagree", list);
}

/* One rank's probe series: its intervals, where their maxima stand, and
 * the two series that draw them. */
struct rank_series {
  unsigned pid;
  int rank;       /* -1 with one rank: the series are not named by rank */
  bool highlight; /* the rank that peaks, of several */
  uint64_t peak;  /* its peak allocated, which the chart rings and checks */
  int res, alloc, under;
  struct span *sp;
  size_t n_sp;
  struct mark *mk;
  size_t n_mk;
};

/* The ranks drawn (*n_out) and their intervals. @return VL_OK or
 * VL_ENOMEM; either way the caller frees each one's sp and mk. */
static vl_status rank_series_init(const struct vl_record *r, const struct vl_probe_layer *f,
                                  struct rank_series rs[MAX_RANK_CURVES], unsigned *n_out) {
  unsigned idx[MAX_RANK_CURVES], peak_k = 0, n = 0;
  *n_out = 0;
  if (!f || !f->present || !f->cuda) return VL_OK;
  if (f->n_rank_peaks) {
    n = ranks_drawn(f, idx, &peak_k);
    for (unsigned j = 0; j < n; j++) {
      const struct vl_fw_rank *x = &f->ranks[idx[j]];
      rs[j] = (struct rank_series){.pid = x->pid,
                                   .rank = n > 1 ? (int)x->rank : -1,
                                   .highlight = n > 1 && idx[j] == peak_k,
                                   .peak = n > 1 ? x->peak_allocated : f->peak_allocated};
    }
  } else { /* one process, no per-rank peaks */
    rs[n++] = (struct rank_series){.pid = f->main_pid, .rank = -1, .peak = f->peak_allocated};
  }
  *n_out = n;
  for (unsigned j = 0; j < n; j++)
    if (spans(r, rs[j].pid, &rs[j].sp, &rs[j].n_sp) != VL_OK) return VL_ENOMEM;
  return VL_OK;
}

/* A rank's reserved and allocated series, the most in each phase as a
 * mark, named by rank where there are several. */
static void rank_series_add(struct timeline *tl, struct rank_series *x, unsigned j) {
  char name[112], who[48] = "";
  if (x->rank >= 0) snprintf(who, sizeof who, "rank %d: ", x->rank);
  const char *hl = x->highlight ? " (the rank that peaks)" : "";
  const unsigned marks = VL_SERIES_POINTS | VL_SERIES_NO_LINE | VL_SERIES_DASH;
  x->under = tl->r->n_samples ? nvml_under(tl, x->pid) : -1;
  snprintf(name, sizeof name, "%sreserved%s, the most in a phase%s", who,
           x->rank >= 0 ? "" : " (PyTorch cache)", hl);
  x->res = vl__chart_series(tl->c, name, rank_reserved_colour[j], marks);
  series_meta(tl->c, x->res, x->under, x->rank, x->highlight);
  snprintf(name, sizeof name, "%sallocated%s, the most in a phase%s", who,
           x->rank >= 0 ? "" : " (tensors)", hl);
  x->alloc = vl__chart_series(tl->c, name, rank_alloc_colour[j], marks);
  series_meta(tl->c, x->alloc, x->under, x->rank, x->highlight);
}

/* Each mark into the row of the sample it stands on (or a row of its
 * own at its interval's end), the most kept where two share one; the
 * peak of the rank that peaks (of the one rank) ringed. */
static void rank_series_draw(struct timeline *tl, const struct rank_series *x, bool several) {
  double peak_x = NAN;
  uint64_t peak_v = 0;
  for (size_t i = 0; i < x->n_mk; i++) {
    const struct mark *m = &x->mk[i];
    json_t *row = m->sample != SIZE_MAX && tl->row_of_sample ? tl->row_of_sample[m->sample] : NULL;
    double at = row ? json_number_value(json_array_get(row, 0)) : m->t1;
    if (!row) row = vl__chart_row(tl->c, at);
    set_max(row, x->res, (double)m->reserved);
    set_max(row, x->alloc, (double)m->allocated);
    if (m->allocated > peak_v) peak_v = m->allocated, peak_x = at;
  }
  if ((x->highlight || !several) && peak_v)
    vl__chart_peak(tl->c, x->alloc, peak_x, (double)x->peak,
                   several ? "peak allocated, the rank that peaks" : "peak allocated");
}

/* The chart filled: the samples' series, each rank's marks (where each
 * stands, then the samples, those included), the phase bands, the job's
 * own marks. @return VL_OK or VL_ENOMEM: a chart with marks or samples
 * left out is never drawn. */
static vl_status chart_fill(struct timeline *tl, struct rank_series *rs, unsigned n_ranks,
                            size_t n_all, double end) {
  const struct vl_record *r = tl->r;
  const struct vl_run_summary *s = tl->s;
  if (r->n_samples) sampled_series(tl);
  for (unsigned j = 0; j < n_ranks; j++)
    rank_series_add(tl, &rs[j], j);
  vl_status st = VL_OK;
  bool *need = NULL;
  if (r->n_samples) {
    need = vl_calloc(r->n_samples, sizeof *need);
    tl->row_of_sample = vl_calloc(r->n_samples, sizeof *tl->row_of_sample);
    if (!need || !tl->row_of_sample) st = VL_ENOMEM;
  }
  for (unsigned j = 0; st == VL_OK && j < n_ranks; j++) {
    st = place_marks(tl, rs[j].sp, rs[j].n_sp, rs[j].under, end, &rs[j].mk, &rs[j].n_mk);
    for (size_t i = 0; need && i < rs[j].n_mk; i++)
      if (rs[j].mk[i].sample != SIZE_MAX) need[rs[j].mk[i].sample] = true;
  }
  if (st == VL_OK && r->n_samples) st = sample_rows(tl, need);
  if (st == VL_OK && r->n_samples) {
    vl__chart_peak(tl->c, tl->nvml, (double)s->peak_process_t_ns * 1e-9,
                   (double)s->peak_process_bytes, "peak process memory");
    disagreements(tl);
  }
  vl_free(need);
  for (unsigned j = 0; st == VL_OK && j < n_ranks; j++)
    rank_series_draw(tl, &rs[j], n_ranks > 1);
  vl_free(tl->row_of_sample);
  tl->row_of_sample = NULL;
  if (st != VL_OK) return st;
  if (n_all) {
    bands(tl->c, r, tl->f);
    zoom(tl->c, r, end);
  }
  json_object_set_new(tl->c, "end", json_real(end));
  if (r->n_marks) { /* the job's own marks: dashed lines, named on hover */
    json_t *marks = json_array();
    for (size_t i = 0; i < r->n_marks && i < 500; i++)
      json_array_append_new(marks,
                            json_pack("[f,s]", vl__since_s(r, r->marks[i].t_ns), r->marks[i].name));
    json_object_set_new(tl->c, "marks", marks);
  }
  return VL_OK;
}

/* The memory-over-time chart, built whole before the page is written. */
struct run_chart {
  json_t *c;    /* NULL: not drawn (no samples and no allocator counters) */
  bool counted; /* reserved and allocated drawn (the probe's counters) */
  bool several; /* one curve per rank */
};

/* @return VL_OK, or VL_ENOMEM (out->c NULL then). */
static vl_status chart_build(const struct vl_record *r, const struct vl_run_summary *s,
                             const struct vl_probe_layer *f, struct run_chart *out) {
  *out = (struct run_chart){NULL, false, false};
  struct timeline tl = {r, s, f, NULL, -1, -1, {0}, 0, {0}, NULL};
  for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++)
    tl.gpu_nvml[g] = -1;
  struct rank_series rs[MAX_RANK_CURVES];
  unsigned n_ranks = 0;
  vl_status st = rank_series_init(r, f, rs, &n_ranks);
  size_t n_all = 0;
  for (unsigned j = 0; j < n_ranks; j++)
    n_all += rs[j].n_sp;
  if (st == VL_OK && (r->n_samples || n_all)) {
    double end = (double)s->duration_ns * 1e-9;
    for (unsigned j = 0; j < n_ranks; j++)
      for (size_t i = 0; i < rs[j].n_sp; i++)
        end = fmax(end, vl__since_s(r, rs[j].sp[i].t1_ns));
    if (!(end > 0)) end = 1;
    tl.c = vl__chart_new("lines", "time from the start", "time", "memory", "bytes");
    st = chart_fill(&tl, rs, n_ranks, n_all, end);
    if (st == VL_OK)
      *out = (struct run_chart){tl.c, n_all > 0, n_ranks > 1};
    else
      json_decref(tl.c);
  }
  for (unsigned j = 0; j < n_ranks; j++) {
    vl_free(rs[j].mk);
    vl_free(rs[j].sp);
  }
  return st;
}

/* The chart (stolen) and its caption, or why it is not drawn. */
static void run_chart(FILE *o, const struct vl_record *r, const struct vl_probe_layer *f,
                      const struct run_chart *ch) {
  if (!ch->c) {
    fputs("<h2>Memory over time</h2>\n<p id=\"vl-no-timeline\">Not drawn: the record has no "
          "samples (process memory and driver-allocated were not sampled) and no allocator "
          "counters (reserved and allocated were not measured",
          o);
    if (f && f->present && !f->cuda) fputs(": the job ran on the CPU", o);
    fputs(").</p>\n", o);
    return;
  }
  fputs("<h2>Memory over time</h2>\n", o);
  vl__html_chart(o, "memory over time", ch->c, 380);
  fputs("<p class=\"vl-caption\">", o);
  if (r->n_samples)
    fprintf(o,
            "NVML and driver-allocated are drawn as sampled: every sample's extremes are kept "
            "(the most and the least in each of %d intervals), so a one-sample spike is drawn "
            "at its height. ",
            BUCKETS);
  else
    fputs("Process memory (NVML) and driver-allocated: not sampled in this record. ", o);
  if (ch->counted)
    fputs("Reserved and allocated are the most PyTorch counted in each phase (or step), a mark "
          "each: the most of an interval, not held all of it. A mark stands at the first sample "
          "from the phase's start whose NVML reading of its GPU holds the reserved bytes (NVML "
          "is read at most every 100 ms: up to that long after the phase's end), or at the "
          "phase's end without samples. ",
          o);
  if (ch->several) fputs("One curve per rank; the rank that peaks is drawn thicker. ", o);
  fputs("Drag across the chart or the strip under it to zoom, double-click to zoom out.</p>\n", o);
}

static void html_para(FILE *o, const char *text) {
  if (!*text) return;
  fputs("<p>", o);
  vl__html_text(o, text);
  fputs("</p>\n", o);
}

/* The system layers' peaks, where the probe gave no ladder: what each
 * measured, or why it was not. */
static void peaks_table(FILE *o, const struct vl_record *r, const struct vl_run_summary *s) {
  char sz[32];
  bool nvml = vl__run_nvml_sampled(r), drv = s->peak_cuda_alloc_bytes > 0;
  fputs("<h2>Peaks</h2>\n<table><tr><th>layer</th><th>peak</th></tr>\n", o);
  fputs("<tr><td>process memory (NVML, the job's processes)</td>", o);
  if (nvml)
    fprintf(o, "<td class=n>%s</td></tr>\n", vl_fmt_gib(sz, sizeof sz, s->peak_process_bytes));
  else
    fputs("<td>not sampled</td></tr>\n", o);
  fputs("<tr><td>driver-allocated (interposer)</td>", o);
  if (drv)
    fprintf(o, "<td class=n>%s</td></tr>\n", vl_fmt_gib(sz, sizeof sz, s->peak_cuda_alloc_bytes));
  else
    fputs("<td>not measured (no interposer in this record)</td></tr>\n", o);
  fputs("<tr><td>CUDA context and other, at the process peak</td>", o);
  if (nvml && drv)
    fprintf(o, "<td class=n>%s</td></tr>\n", vl_fmt_gib(sz, sizeof sz, s->context_bytes));
  else
    fputs("<td>not measured (needs both layers above)</td></tr>\n", o);
  if (s->peak_other_bytes)
    fprintf(o, "<tr><td>other processes on the job's GPUs</td><td class=n>%s</td></tr>\n",
            vl_fmt_gib(sz, sizeof sz, s->peak_other_bytes));
  fputs("</table>\n", o);
}

/* who asked the driver for memory: the most each library held */
static void libraries(FILE *o, const struct vl_record *r) {
  bool any = false;
  for (unsigned i = 0; i < r->n_alloc_libs; i++)
    any |= r->alloc_libs[i].peak > 0;
  if (!any) return;
  char sz[32];
  fputs("<p>Driver-allocated by library (the most each held):", o);
  bool first = true;
  for (unsigned i = 0; i < r->n_alloc_libs; i++)
    if (r->alloc_libs[i].peak) {
      fputs(first ? " " : ", ", o);
      first = false;
      vl__html_text(o, r->alloc_libs[i].name); /* a file name from the record: escaped */
      fprintf(o, " %s", vl__fw_size_str(sz, sizeof sz, r->alloc_libs[i].peak));
    }
  fputs(".</p>\n", o);
}

/* One self-contained page: everything the text report says (report.c),
 * the ladder as a stacked bar, every layer over time on one chart. The
 * chart is built first: out of memory, nothing is written (-2). */
int vl__report_html(FILE *o, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  const struct vl_run_summary *s = v->sum;
  const struct vl_probe_layer *f = v->fw;
  struct run_chart chart;
  if (chart_build(r, s, f, &chart) != VL_OK) return -2;
  vl__html_head(o, "vramledger run");
  fputs("<h1>Run: ", o);
  vl__html_text(o, r->command);
  fputs("</h1>\n<p>", o);
  vl__html_text(o, v->source);
  char d[400];
  vl__run_sampling_words(r, s, d, sizeof d);
  fputs(", ", o);
  vl__html_text(o, d);
  vl__run_end_words(r, d, sizeof d);
  fprintf(o, ", %s", d);
  if (r->host[0]) {
    fputs(", host ", o);
    vl__html_text(o, r->host);
  }
  fputs(".</p>\n<p id=\"vl-gpus\">GPUs:", o);
  for (unsigned i = 0; i < r->n_gpus; i++) {
    fprintf(o, "%s %u ", i ? "," : "", r->gpus[i].index);
    vl__html_text(o, r->gpus[i].name);
  }
  if (!r->n_gpus) {
    fputs(" none in the record", o);
    if (strncmp(r->nvml, "not sampled", 11) != 0) { /* else said above */
      fputs(" (", o);
      vl__html_text(o, r->nvml);
      fputs(")", o);
    }
    if (f && f->present && f->device[0]) {
      fputs("; the probe saw ", o);
      vl__html_text(o, f->device);
    }
  }
  if (r->driver[0]) {
    fputs("; driver ", o);
    vl__html_text(o, r->driver);
  }
  fputs(".</p>\n", o);
  vl__run_descendants_words(r, d, sizeof d);
  html_para(o, d);
  vl__run_left_words(r, d, sizeof d);
  html_para(o, d);
  if (v->n_findings) fputs("<h2>Findings</h2>\n<ul id=\"vl-findings\">\n", o);
  for (int i = 0; i < v->n_findings; i++) {
    fputs("<li><b>", o);
    vl__html_text(o, v->findings[i].code);
    fputs("</b>: ", o);
    vl__html_text(o, v->findings[i].text);
    fputs("</li>\n", o);
  }
  if (v->n_findings) fputs("</ul>\n", o);
  if (f && f->has_ladder)
    vl__fw_ladder_html(o, f);
  else
    peaks_table(o, r, s);
  libraries(o, r);
  if (vl__run_nvml_sampled(r))
    fprintf(o, "<p>Peak process memory at %.1f s.</p>\n", (double)s->peak_process_t_ns * 1e-9);
  run_chart(o, r, f, &chart);
  if (f) vl__fw_html(o, f, v->cmp);
  vl__html_foot(o);
  return ferror(o) ? -1 : 0;
}
