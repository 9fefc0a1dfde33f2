/* Internal: the probe's events, parsed for record.c. */
#ifndef VRAMLEDGER_PROBE_EVENTS_H
#define VRAMLEDGER_PROBE_EVENTS_H
#include <jansson.h>
#include <stdbool.h>

#include "vramledger/record.h"

/* Reading records, shared by record.c and probe_events.c: a positive
 * integer member (0 when absent or not one), a string member copied into
 * dst (empty when absent; cleaned as vl__rec_clean does), and a growable
 * array with a hard cap (doubling from 64; -1 past the cap or out of
 * memory). */
uint64_t vl__rec_u(json_t *o, const char *k);
void vl__rec_str(char *dst, size_t n, json_t *o, const char *k);
/* A record's string made printable in place: control characters (C0,
 * DEL, and C1 as UTF-8) become '?', so that no record reaches a terminal
 * or a Markdown page as escape sequences or new lines. */
void vl__rec_clean(char *s);
int vl__rec_grow(void **p, size_t *cap, size_t n, size_t elem, size_t limit);

struct vl__probe_caps {
  size_t phases, steps, ooms;
};

/* Parse one event if it is the probe's (*handled), into r. */
vl_status vl__probe_event(json_t *o, const char *type, struct vl_record *r,
                          struct vl__probe_caps *caps, size_t line, struct vl_err *err,
                          bool *handled);
void vl__probe_release(struct vl_record *r);

#endif
