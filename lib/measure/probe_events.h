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

/* Measured values checked against the card (docs/record.md): true when v
 * is past bound (bytes; 0: no bound known), the event at line to be
 * skipped as damaged data, counted in r->implausible, the first one said
 * in r->implausible_what ("a sample's process memory, 8.0 EiB, is more
 * than the 141.0 GB of the job's GPUs"). */
bool vl__rec_implausible(struct vl_record *r, size_t line, const char *what, uint64_t v,
                         uint64_t bound, const char *of);
/* The meta line's GPUs: their memory summed (the bound of what the job's
 * processes hold together), and the largest card's (of one process's
 * PyTorch counters, of one GPU's reading); 0 when meta names none. */
uint64_t vl__rec_gpus_bytes(const struct vl_record *r);
/* Driver-allocated bytes may pass the card's memory (managed memory
 * oversubscribes it, into host memory): their bound is the address space
 * a CUDA process has, 2^49 bytes (49-bit virtual addresses since Pascal). */
#define VL_REC_DRIVER_MAX (1ull << 49)
#define VL_REC_DRIVER_OF "the address space of a CUDA process (2^49 bytes)"
uint64_t vl__rec_card_bytes(const struct vl_record *r);
/* A sample with a value past its bound: true, said as vl__rec_implausible. */
bool vl__rec_sample_implausible(struct vl_record *r, size_t line, const struct vl_rec_sample *s);

struct vl__probe_caps {
  size_t phases, steps, ooms;
};

/* Parse one event if it is the probe's (*handled), into r. */
vl_status vl__probe_event(json_t *o, const char *type, struct vl_record *r,
                          struct vl__probe_caps *caps, size_t line, struct vl_err *err,
                          bool *handled);
void vl__probe_release(struct vl_record *r);

#endif
