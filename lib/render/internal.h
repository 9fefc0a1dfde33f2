/* Internal interfaces between the renderers. */
#ifndef VRAMLEDGER_RENDER_INTERNAL_H
#define VRAMLEDGER_RENDER_INTERNAL_H
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "vramledger/model.h"

/* Sizes are shown in binary units (a GiB is 2^30 bytes), the unit always
 * printed: a byte count, integer or double, as a double in that unit. */
#define GIB(x) ((double)(x) / (double)(1ull << 30))
#define MIB(x) ((double)(x) / (double)(1ull << 20))
#define KIB(x) ((double)(x) / 1024.0)

/* A byte count as a JSON integer (new reference). */
static inline json_t *U(uint64_t x) { return json_integer((json_int_t)x); }

/* A job's settings as a JSON object (new reference), by the names
 * vl_job_from_settings reads back (check and `commit --plan` compare them). */
json_t *vl__settings_json(const struct vl_job *j);

/* s with <, >, & and " escaped for HTML. */
void vl__html_text(FILE *o, const char *s);
/* The page's head and <body>: title, the house style. */
void vl__html_head(FILE *o, const char *title);
/* <svg> w x h with its two axes: x along the bottom margin, y along the left. */
void vl__svg_open(FILE *o, double w, double h, double left, double top, double right,
                  double bottom);

struct vl_probe_layer;
struct vl_record;
/* The framework layer's parts of the run report (lib/render/framework.c). */
struct vl_probe_compare;
void vl__fw_json(json_t *o, json_t *peak, const struct vl_probe_layer *f, const struct vl_record *r,
                 const struct vl_probe_compare *cmp);
void vl__fw_text(FILE *o, const struct vl_probe_layer *f, const struct vl_probe_compare *cmp,
                 bool md);
void vl__fw_html(FILE *o, const struct vl_probe_layer *f, const struct vl_record *r,
                 const struct vl_probe_compare *cmp);
void vl__fw_trace(json_t *events, const struct vl_probe_layer *f, const struct vl_record *r);
/* The bill of the billed step: its lines, step, phase (new reference); as
 * text or Markdown lines with each part's share. Also for `trace`. */
json_t *vl__fw_bill_json(const struct vl_probe_layer *f);
void vl__fw_bill_lines(FILE *o, const struct vl_probe_layer *f, bool md);
/* A part of the measured bill in the user's words: enum vl_bill_part, then
 * VL_BILL_N the cuBLAS workspaces, VL_BILL_N + 1 the transient. */
const char *vl__fw_line_name(int part);

#endif
