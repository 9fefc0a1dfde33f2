/* trace --gpu's step time, as text, Markdown and JSON members
 * (lib/render/trace_time.c), for lib/render/trace.c. */
#ifndef VRAMLEDGER_RENDER_TRACE_TIME_H
#define VRAMLEDGER_RENDER_TRACE_TIME_H
#include <jansson.h>
#include <stdio.h>

#include "vramledger/steptime.h"

/* a step time's members as estimate writes them (step_seconds,
 * phase_seconds, tokens_per_second, mfu, time) into r: estimate.c */
void vl__time_json(json_t *r, const struct vl_step_time *t);

/* tt NULL: the line that says --gpu prices the trace's ops (none when the
 * trace has none: ops 0) */
void vl__trace_time_text(FILE *o, const struct vl_trace_time *tt, const char *gpu, double ops);
void vl__trace_time_md(FILE *o, const struct vl_trace_time *tt, const char *gpu, double ops);
/* the members into r: those of estimate, the step priced and its ops;
 * tt NULL: step_seconds null */
void vl__trace_time_json(json_t *r, const struct vl_trace_time *tt, const char *gpu);

#endif
