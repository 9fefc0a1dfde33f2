/* Internal interfaces between the renderers. */
#ifndef VRAMLEDGER_RENDER_INTERNAL_H
#define VRAMLEDGER_RENDER_INTERNAL_H
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vramledger/model.h"
#include "vramledger/record.h"

/* Sizes are shown in binary units (a GiB is 2^30 bytes), the unit always
 * printed: a byte count, integer or double, as a double in that unit. */
#define GIB(x) ((double)(x) / (double)(1ull << 30))
#define MIB(x) ((double)(x) / (double)(1ull << 20))
#define KIB(x) ((double)(x) / 1024.0)

/* A count or byte count as a JSON integer (new reference), exact: every
 * unsigned value the renderers print goes through it. jansson's integer is
 * signed; a value past INT64_MAX would wrap to a negative number, so it is
 * written as a JSON real (the nearest double) instead, never wrapped. The
 * commands refuse a configuration whose numbers pass 2^53 before rendering
 * (vl_bill_representable), so an estimate never gets there. */
static inline json_t *U(uint64_t x) {
  return x <= (uint64_t)INT64_MAX ? json_integer((json_int_t)x) : json_real((double)x);
}

/* A whole number held as a double (a fit's bytes, a draw's value) as a
 * JSON integer, rounded; past the int64 range a JSON real, never wrapped
 * (llround there is undefined); NaN and the infinities as null. */
static inline json_t *D(double x) {
  if (x != x || x == 1.0 / 0.0 || x == -1.0 / 0.0) return json_null();
  if (x >= 9223372036854775807.0 || x <= -9223372036854775807.0) return json_real(x);
  return json_integer((json_int_t)llround(x));
}

/* A job's settings as a JSON object (new reference), by the names
 * vl_job_from_settings reads back (check and `commit --plan` compare them). */
json_t *vl__settings_json(const struct vl_job *j);
struct vl_context_carry;
/* A card's line on the CUDA context and cuBLAS workspaces the bill carries
 * over from the H200 ("" when the card is of its architecture); and the
 * same as JSON (a new object). */
void vl__context_carry_text(const struct vl_context_carry *c, const char *gpu, char *buf, size_t n);
json_t *vl__context_carry_json(const struct vl_context_carry *c);
struct vl_fit;
/* what a fit within the context's range on its card means (a static string) */
const char *vl__context_edge_text(const struct vl_fit *f);

struct vl_recipe_view;
/* A recipe's keys (estimate --recipe): its text and Markdown sections
 * (under --explain) and its JSON object (a new reference), lib/render/recipe.c. */
void vl__recipe_text(FILE *o, const struct vl_recipe_view *r);
void vl__recipe_md(FILE *o, const struct vl_recipe_view *r);
json_t *vl__recipe_json(const struct vl_recipe_view *r);

/* Strings from outside (a record, a configuration, the command line) are
 * written through one function per format (lib/render/escape.c); each
 * writes valid UTF-8 (a byte of no character as '?') and NULL as "".
 * Text for a terminal: control characters (C0, DEL, C1) as '?'. */
void vl__plain_text(FILE *o, const char *s);
/* HTML text and attribute values (always in double quotes): <, >, & and "
 * as entities, control characters as '?'. */
void vl__html_text(FILE *o, const char *s);
/* Markdown: <, > and & as entities (no raw HTML passes), |, \, [, ] and `
 * backslash-escaped (a table cell stays one, no link or code span),
 * control characters (new lines) as '?'. */
void vl__md_text(FILE *o, const char *s);
/* Markdown code span of s: a fence longer than any run of backticks in
 * s (CommonMark), | escaped (GFM tables), control characters as '?'. */
void vl__md_code(FILE *o, const char *s);
/* vl__md_text when md, else vl__plain_text */
void vl__text(FILE *o, const char *s, bool md);
/* vl__text, then spaces to width bytes of s (as %-*s pads) */
void vl__text_pad(FILE *o, const char *s, int width, bool md);
/* A Prometheus label value (exposition format 0.0.4): \, " and the new
 * line escaped, other control characters as '?'. */
void vl__prom_label(FILE *o, const char *s);
/* A CSV field (RFC 4180): quoted, quotes doubled, control characters as
 * '?'; one that starts with =, +, - or @ gets a leading ' so that no
 * spreadsheet takes it for a formula (OWASP, CSV injection). */
void vl__csv_field(FILE *o, const char *s);
/* A JSON string written by hand, quotes included: ", \ and control
 * characters escaped, and <, >, & as \u escapes (safe inside HTML). */
void vl__json_text(FILE *o, const char *s);
/* json_string of s made valid UTF-8 (jansson refuses other strings and
 * would drop the member); NULL for NULL or no memory. New reference. */
json_t *vl__json_str(const char *s);
/* The page's head and <body>: title, the house style, dygraphs' style. */
void vl__html_head(FILE *o, const char *title);

/* The page's end: the chart library and lib/render/html_charts.js (both
 * embedded at build time, so the page is one file that works offline),
 * then </body></html>. Every page with vl__html_chart ends with it. */
void vl__html_foot(FILE *o);

/* A chart spec (lib/render/html_charts.js reads it; new reference): kind
 * "lines", "bars" or "stack"; units "bytes", "time" (seconds), "usd", "h"
 * or "" (the page picks GiB/MiB, s/min/h from the largest value). */
json_t *vl__chart_new(const char *kind, const char *x_title, const char *x_unit,
                      const char *y_title, const char *y_unit);
/* STEP: held until the next value; POINTS: a dot at each value; NO_LINE:
 * dots only; BIG: larger dots; DASH: a short level mark for each dot */
enum {
  VL_SERIES_STEP = 1,
  VL_SERIES_POINTS = 2,
  VL_SERIES_NO_LINE = 4,
  VL_SERIES_BIG = 8,
  VL_SERIES_DASH = 16
};
/* A series, before the first row; returns its index. */
int vl__chart_series(json_t *c, const char *name, const char *colour, unsigned flags);
/* A row at x, every series without a value (borrowed: fill with _set). */
json_t *vl__chart_row(json_t *c, double x);
/* Series' value in row; NAN breaks its line there. */
void vl__chart_set(json_t *row, int series, double v);
/* The record's peak of a series: the page rings it (at x, unless NAN),
 * writes label and value under the chart, and checks the plotted maximum. */
void vl__chart_peak(json_t *c, int series, double x, double value, const char *label);
/* Bars: x is the index of labels[]. */
void vl__chart_categories(json_t *c, const char *const *labels, size_t n);
/* The <figure> for spec (stolen), height pixels, its legend under it. */
void vl__html_chart(FILE *o, const char *name, json_t *spec, int height);
/* Min/max decimation of n time-ordered samples (t(ctx, i) seconds, y(ctx,
 * i, k) the k-th of n_series values): into keep (room for n) the indices
 * of the first, the last and, in each of `buckets` equal time intervals,
 * the samples with each series' least and greatest value. Returns how
 * many; every index when n is small. */
size_t vl__minmax_keep(size_t n, double (*t)(const void *, size_t),
                       double (*y)(const void *, size_t, int), int n_series, const void *ctx,
                       size_t buckets, size_t *keep);

struct vl_probe_layer;
struct vl_record;
struct vl_run_summary;
/* What a record says about itself, in words (lib/render/run_words.c), for
 * report.c and html_run.c alike: report.c calls html_run.c for the page,
 * both call down into run_words.c, never the other way. */
/* seconds from the record's start to t (0 before it) */
double vl__since_s(const struct vl_record *r, uint64_t t);
/* the record has NVML samples (process memory was measured) */
bool vl__run_nvml_sampled(const struct vl_record *r);
/* "308 samples every 100 ms, 30.7 s", or why there are none ("not
 * sampled: the probe was attached by vramledger.attach() outside
 * vramledger run, 21.3 ms"): never "0 samples every 0 ms" */
void vl__run_sampling_words(const struct vl_record *r, const struct vl_run_summary *s, char *buf,
                            size_t n);
/* the processes that outlived the job, "" when none */
void vl__run_descendants_words(const struct vl_record *r, char *buf, size_t n);
/* exit's descendants_left, "" when 0 */
void vl__run_left_words(const struct vl_record *r, char *buf, size_t n);
/* "exit status 0" or "no exit line (the run was killed)" */
void vl__run_end_words(const struct vl_record *r, char *buf, size_t n);

/* The run report as one HTML page (lib/render/html_run.c). @return 0, -1
 * on a write error, or -2 out of memory (nothing written). */
struct vl_report_view;
int vl__report_html(FILE *o, const struct vl_report_view *v);
/* The framework layer's parts of the run report (lib/render/framework.c). */
struct vl_probe_compare;
void vl__fw_json(json_t *o, json_t *peak, const struct vl_probe_layer *f, const struct vl_record *r,
                 const struct vl_probe_compare *cmp);
void vl__fw_text(FILE *o, const struct vl_probe_layer *f, const struct vl_probe_compare *cmp,
                 bool md);
/* The framework layer's parts of the page (lib/render/html_framework.c):
 * the bill at the peak of the rank that peaks, the ladder as a stacked
 * bar, the boundaries, the modules, the ranks, the estimate beside it. */
void vl__fw_html(FILE *o, const struct vl_probe_layer *f, const struct vl_probe_compare *cmp);
/* The ladder at the peaks as a stacked bar with its numbers and a table,
 * every gap named; layers not measured said so (html_framework.c). */
void vl__fw_ladder_html(FILE *o, const struct vl_probe_layer *f);
/* framework.c's bill lines for the page: colour, bytes of the layer's
 * and of a rank's bill, a size in the unit that reads best, the compared
 * lines' names, the lowest (up to) 8 ranks with a bill in rank order. */
enum { VL__FW_LINES = VL_BILL_N + 2 };
const char *vl__fw_line_colour(int part);
uint64_t vl__fw_line_bytes(const struct vl_probe_layer *f, int part);
struct vl_fw_rank;
uint64_t vl__fw_rank_line_bytes(const struct vl_fw_rank *x, int part);
const char *vl__fw_size_str(char *buf, size_t n, uint64_t b);
extern const char *const vl__fw_cmp_name[];
bool vl__fw_step_time_words(char *buf, size_t n, const struct vl_probe_compare *c);
unsigned vl__fw_rank_order(const struct vl_probe_layer *f, unsigned idx[8]);
/* report --format trace (lib/render/report_trace.c). @return 0, or -1 on a
 * write error or no memory. */
struct vl_report_view;
int vl__report_trace(FILE *out, const struct vl_report_view *v);
/* The bill of the billed step: its lines, step, phase (new reference); as
 * text or Markdown lines with each part's share. Also for `trace`. */
json_t *vl__fw_bill_json(const struct vl_probe_layer *f);
void vl__fw_bill_lines(FILE *o, const struct vl_probe_layer *f, bool md);
/* A part of the measured bill in the user's words: enum vl_bill_part, then
 * VL_BILL_N the cuBLAS workspaces, VL_BILL_N + 1 the transient. */
const char *vl__fw_line_name(int part);

#endif
