/* Internal: the probe's events, parsed for record.c. */
#ifndef VRAMLEDGER_PROBE_EVENTS_H
#define VRAMLEDGER_PROBE_EVENTS_H
#include <jansson.h>
#include <stdbool.h>

#include "vramledger/record.h"

struct vl__probe_caps {
  size_t phases, steps, ooms;
};

/* Parse one event if it is the probe's (*handled), into r. */
vl_status vl__probe_event(json_t *o, const char *type, struct vl_record *r,
                          struct vl__probe_caps *caps, size_t line, struct vl_err *err,
                          bool *handled);
void vl__probe_release(struct vl_record *r);

#endif
