/* A memory snapshot as PyTorch writes one: the pickle
 * torch.cuda.memory._dump_snapshot() makes and pytorch.org/memory_viz
 * loads (torch/cuda/memory.py _snapshot: a dict of "segments", each with
 * its "blocks", and "device_traces", the allocator's events, with the keys
 * torch/csrc/cuda/memory_snapshot.cpp gives them: "action", "addr" (an
 * OOM's "device_free"), "size", "stream", "time_us", "frames").
 *
 * A block and an event carry one frame where the trace knows where the
 * allocation came from: "filename" and "line" of the source line that
 * asked for it ("at=FILE:LINE"), "name" the module that ran (its path in
 * the model, "model.layers.0.mlp"); without one, memory_viz would say the
 * block was "allocated before _record_history was enabled". The trace
 * holds no clock: "time_us" is the event's place in the trace (the n-th
 * line), which orders the timeline as the job did. Written in
 * pickle protocol 2 (Python's Lib/pickle.py opcodes: PROTO, EMPTY_DICT,
 * MARK, SETITEMS, EMPTY_LIST, APPENDS, BINUNICODE, BININT, LONG1, NEWTRUE,
 * NEWFALSE, STOP), without a memo: any unpickler reads it. */
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/caching.h"
#include "vramledger/render.h"

static void op(FILE *o, int c) { fputc(c, o); }

static void str_n(FILE *o, const char *s, size_t n) {
  op(o, 'X'); /* BINUNICODE: a 4-byte little-endian length, UTF-8 */
  for (int i = 0; i < 4; i++)
    op(o, (int)((n >> (8 * i)) & 0xff));
  fwrite(s, 1, n, o);
}

static void str(FILE *o, const char *s) { str_n(o, s, strlen(s)); }

/* A string from the trace, which may hold anything: valid UTF-8 (a byte
 * of no character as '?'), as BINUNICODE must be. */
static void text(FILE *o, const char *s) {
  char buf[128];
  str_n(o, buf, vl__utf8_copy(buf, sizeof buf, s));
}

static void num(FILE *o, uint64_t v) {
  if (v < 0x80000000u) { /* BININT: 4-byte little-endian signed */
    op(o, 'J');
    for (int i = 0; i < 4; i++)
      op(o, (int)((v >> (8 * i)) & 0xff));
    return;
  }
  /* LONG1: n little-endian two's-complement bytes; a byte more when the
   * top bit is set, so the value stays positive */
  int n = 0;
  for (uint64_t x = v; x; x >>= 8)
    n++;
  bool pad = (v >> (8 * n - 1)) & 1;
  op(o, 0x8a);
  op(o, n + pad);
  for (int i = 0; i < n; i++)
    op(o, (int)((v >> (8 * i)) & 0xff));
  if (pad) op(o, 0);
}

static void flag(FILE *o, bool b) { op(o, b ? 0x88 : 0x89); }

/* a key and an integer, a key and a string: inside a MARK ... SETITEMS */
static void kv_num(FILE *o, const char *k, uint64_t v) {
  str(o, k);
  num(o, v);
}
static void kv_str(FILE *o, const char *k, const char *v) {
  str(o, k);
  str(o, v);
}

/* "frames": [] or [{"filename", "line", "name"}] for trace event at */
static void frames(FILE *o, const struct vl_trace *t, size_t at) {
  str(o, "frames");
  op(o, ']');
  if (!t || at >= t->n) return;
  const struct vl_trace_ev *e = &t->ev[at];
  const char *mod = e->module && e->module < t->n_modules ? t->modules[e->module] : "";
  const char *where = e->at && e->at < t->n_modules ? t->modules[e->at] : "";
  if (!*mod && !*where) return;
  char file[96] = "??";
  uint64_t line = 0;
  const char *colon = strrchr(where, ':');
  if (*where) { /* "FILE:LINE"; without a line, all of it is the file */
    size_t n = strlen(where);
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
        strlen(colon + 1) < 10) {
      n = (size_t)(colon - where);
      for (const char *d = colon + 1; *d; d++)
        line = line * 10 + (uint64_t)(*d - '0');
    }
    snprintf(file, sizeof file, "%.*s", (int)n, where);
  }
  op(o, '(');
  op(o, '}');
  op(o, '(');
  str(o, "filename");
  text(o, file);
  kv_num(o, "line", line);
  str(o, "name");
  text(o, *mod ? mod : "??");
  op(o, 'u');
  op(o, 'e');
}

static void block(FILE *o, const struct vl_snapshot *s, size_t i) {
  const struct vl_cache_block *b = &s->blocks[i];
  op(o, '}');
  op(o, '(');
  kv_num(o, "address", b->addr);
  kv_num(o, "size", b->size);
  kv_num(o, "requested_size", b->requested);
  kv_str(o, "state", b->allocated ? "active_allocated" : "inactive");
  frames(o, s->trace, s->block_at ? s->block_at[i] : VL_SNAP_NO_EVENT);
  op(o, 'u');
}

static void segment(FILE *o, const struct vl_snapshot *s, const struct vl_snap_segment *g) {
  op(o, '}');
  op(o, '(');
  kv_num(o, "device", 0);
  kv_num(o, "address", g->addr);
  kv_num(o, "total_size", g->size);
  kv_num(o, "allocated_size", g->allocated);
  kv_num(o, "active_size", g->allocated);
  kv_num(o, "requested_size", g->requested);
  kv_num(o, "stream", 0);
  kv_str(o, "segment_type", g->small ? "small" : "large");
  str(o, "is_expandable");
  flag(o, false);
  str(o, "frames");
  op(o, ']');
  str(o, "blocks");
  op(o, ']');
  if (g->n) {
    op(o, '(');
    for (size_t i = 0; i < g->n; i++)
      block(o, s, g->first + i);
    op(o, 'e');
  }
  op(o, 'u');
}

static void event(FILE *o, const struct vl_snapshot *s, const struct vl_snap_event *e) {
  static const char *const actions[] = {
      [VL_SNAP_ALLOC] = "alloc",
      [VL_SNAP_FREE_REQUESTED] = "free_requested",
      [VL_SNAP_FREE_COMPLETED] = "free_completed",
      [VL_SNAP_SEGMENT_ALLOC] = "segment_alloc",
      [VL_SNAP_SEGMENT_FREE] = "segment_free",
      [VL_SNAP_SEGMENT_MAP] = "segment_map",
      [VL_SNAP_SEGMENT_UNMAP] = "segment_unmap",
      [VL_SNAP_OOM] = "oom",
  };
  op(o, '}');
  op(o, '(');
  kv_str(o, "action", e->action <= VL_SNAP_OOM ? actions[e->action] : "alloc");
  kv_num(o, e->action == VL_SNAP_OOM ? "device_free" : "addr", e->addr);
  kv_num(o, "size", e->size);
  kv_num(o, "stream", 0);
  kv_num(o, "time_us", e->at);
  frames(o, s->trace, e->frame);
  op(o, 'u');
}

int vl_render_snapshot(FILE *o, const struct vl_snapshot *s) {
  op(o, 0x80); /* PROTO 2 */
  op(o, 2);
  op(o, '}');
  op(o, '(');
  str(o, "segments");
  op(o, ']');
  if (s->n_segs) {
    op(o, '(');
    for (size_t i = 0; i < s->n_segs; i++)
      segment(o, s, &s->segs[i]);
    op(o, 'e');
  }
  str(o, "device_traces"); /* one device: its events in order */
  op(o, ']');
  op(o, '(');
  op(o, ']');
  if (s->n_ev) {
    op(o, '(');
    for (size_t i = 0; i < s->n_ev; i++)
      event(o, s, &s->ev[i]);
    op(o, 'e');
  }
  op(o, 'e');
  op(o, 'u');
  op(o, '.'); /* STOP */
  return ferror(o) ? -1 : 0;
}
