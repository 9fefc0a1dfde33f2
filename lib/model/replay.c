/* An allocation trace, parsed and replayed through the caching-allocator
 * model (vramledger/caching.h). Pure: text in, figures out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/caching.h"

#define MAX_EVENTS (1ull << 31)

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 4096;
  if (nc > MAX_EVENTS) return -1;
  void *q = vl_realloc(*p, nc * elem);
  if (!q) return -1;
  *p = q;
  *cap = nc;
  return 0;
}

/* A decimal number at *p, before lim: digits only (no sign, no blanks:
 * strtoull would skip a newline into the next line), at most 2^63. */
static bool digits(const char **p, const char *lim, uint64_t *out) {
  const char *q = *p;
  uint64_t v = 0;
  while (q < lim && *q >= '0' && *q <= '9') {
    if (v > (UINT64_MAX >> 1) / 10) return false;
    v = v * 10 + (uint64_t)(*q - '0');
    q++;
  }
  if (q == *p) return false;
  *p = q;
  *out = v;
  return true;
}

static int device_code(const char *s, size_t n) {
  if (n == 3 && !memcmp(s, "cpu", 3)) return 0;
  if (n == 4 && !memcmp(s, "cuda", 4)) return 1;
  if (n == 4 && !memcmp(s, "meta", 4)) return 2;
  return 3;
}

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* The index of module name s[0..n) into *out, added when new (0: no
 * name); false when out of memory. */
static bool intern(struct vl_trace *t, const char *s, size_t n, uint32_t *out) {
  *out = 0;
  if (n == 0) return true;
  if (n > 95) n = 95;
  if (t->n_modules * 2 >= t->index_cap) { /* grow and rehash */
    size_t cap = t->index_cap ? t->index_cap * 2 : 1024;
    uint32_t *ix = vl_calloc(cap, sizeof *ix);
    if (!ix) return false;
    for (size_t m = 1; m < t->n_modules; m++) {
      size_t k = hash(t->modules[m], strlen(t->modules[m])) & (cap - 1);
      while (ix[k])
        k = (k + 1) & (cap - 1);
      ix[k] = (uint32_t)m;
    }
    vl_free(t->module_index);
    t->module_index = ix;
    t->index_cap = cap;
  }
  size_t k = hash(s, n) & (t->index_cap - 1);
  while (t->module_index[k]) {
    const char *m = t->modules[t->module_index[k]];
    if (strlen(m) == n && !memcmp(m, s, n)) {
      *out = t->module_index[k];
      return true;
    }
    k = (k + 1) & (t->index_cap - 1);
  }
  if (t->n_modules == 0) { /* [0] is "no module" */
    t->modules = vl_calloc(64, sizeof *t->modules);
    if (!t->modules) return false;
    t->n_modules = 1;
  } else if ((t->n_modules & (t->n_modules - 1)) == 0 && t->n_modules >= 64) {
    void *q = vl_realloc(t->modules, t->n_modules * 2 * sizeof *t->modules);
    if (!q) return false;
    t->modules = q;
  }
  memcpy(t->modules[t->n_modules], s, n);
  t->modules[t->n_modules][n] = '\0';
  t->module_index[k] = (uint32_t)t->n_modules;
  *out = (uint32_t)t->n_modules++;
  return true;
}

/* The parser's place in the text and the arrays' capacities. */
struct parser {
  struct vl_trace *t;
  struct vl_err *err;
  size_t cap_ev, cap_marks, cap_addr, cap_size;
  size_t line;
  bool unterminated; /* the last line, without its newline: it may be cut short */
};

/* A field of the unterminated last line that may have lost its end, and
 * would change the replay if it had (a number's digits, a device's name). */
static vl_status cut_short(const struct parser *p) {
  return vl__fail(p->err, VL_EPARSE, "line %zu: no newline: it may be cut short", p->line);
}

/* "# batch N": the traced job's micro-batch; not a number: not known. */
static vl_status batch_line(struct parser *p, const char *s, size_t n) {
  if (p->unterminated) return cut_short(p);
  const char *q = s + 8;
  uint64_t b = 0;
  if (digits(&q, s + n, &b) && q == s + n && b > 0 && b < (1ull << 32)) p->t->batch = b;
  return VL_OK;
}

/* "# convolutions N": the convolutions the job ran so far (the tracer says
 * it again as the count grows: the largest stands). It changes no replay: a
 * line cut short is left out. */
static vl_status convolutions_line(struct parser *p, const char *s, size_t n) {
  const char *q = s + 15;
  uint64_t c = 0;
  if (!p->unterminated && digits(&q, s + n, &c) && q == s + n && c > p->t->convolutions)
    p->t->convolutions = c;
  return VL_OK;
}

/* "s ADDR SIZE": a segment the driver gave the allocator. */
static vl_status segment_line(struct parser *p, const char *s, size_t n) {
  struct vl_trace *t = p->t;
  const char *q = s + 2, *lim = s + n;
  uint64_t a = 0, sz = 0;
  if (!digits(&q, lim, &a) || q >= lim || *q != ' ' || (q++, !digits(&q, lim, &sz)) || q != lim ||
      sz == 0 || sz > (1ull << 50) || a > UINT64_MAX - (1ull << 51))
    return vl__fail(p->err, VL_EPARSE,
                    "line %zu: 's ADDR SIZE' expected (a segment's address and bytes)", p->line);
  if (p->unterminated) return cut_short(p);
  if (grow((void **)&t->seg_addr, &p->cap_addr, t->n_segs, sizeof *t->seg_addr) ||
      grow((void **)&t->seg_size, &p->cap_size, t->n_segs, sizeof *t->seg_size))
    return vl__fail(p->err, VL_ENOMEM, "line %zu: too many segments", p->line);
  t->seg_addr[t->n_segs] = a;
  t->seg_size[t->n_segs++] = sz;
  return VL_OK;
}

/* The next event's slot, zeroed (t->n counts it once it is whole); NULL
 * when out of memory. */
static struct vl_trace_ev *next_event(struct parser *p) {
  if (grow((void **)&p->t->ev, &p->cap_ev, p->t->n, sizeof *p->t->ev)) return NULL;
  struct vl_trace_ev *e = &p->t->ev[p->t->n];
  memset(e, 0, sizeof *e);
  return e;
}

/* "m NAME": a mark (a phase of the job), kept to 63 bytes. */
static vl_status mark_line(struct parser *p, struct vl_trace_ev *e, const char *s, size_t n) {
  struct vl_trace *t = p->t;
  if (grow((void **)&t->marks, &p->cap_marks, t->n_marks, sizeof *t->marks))
    return vl__fail(p->err, VL_ENOMEM, "line %zu: too many marks", p->line);
  size_t k = n - 2 < 63 ? n - 2 : 63;
  memcpy(t->marks[t->n_marks], s + 2, k);
  t->marks[t->n_marks][k] = '\0';
  e->kind = VL_TR_MARK;
  e->id = (uint32_t)t->n_marks++;
  return VL_OK;
}

/* An allocation's words after its device, space-separated: the module (the
 * first word without a key), dtype=T, at=FILE:LINE. false when out of
 * memory. */
static bool alloc_words(struct vl_trace *t, struct vl_trace_ev *e, const char *w, const char *lim) {
  bool ok = true;
  while (ok && w && w < lim) {
    w++;
    const char *end = memchr(w, ' ', (size_t)(lim - w));
    size_t wl = (size_t)((end ? end : lim) - w);
    if (wl > 6 && !memcmp(w, "dtype=", 6))
      ok = intern(t, w + 6, wl - 6, &e->dtype);
    else if (wl > 3 && !memcmp(w, "at=", 3))
      ok = intern(t, w + 3, wl - 3, &e->at);
    else if (wl && !e->module)
      ok = intern(t, w, wl, &e->module);
    w = end;
  }
  return ok;
}

/* "a ID BYTES DEVICE [words]", "b ..." (grows with the batch), "f ID". */
static vl_status alloc_line(struct parser *p, struct vl_trace_ev *e, const char *s, size_t n) {
  const char *q = s + 2, *lim = s + n;
  uint64_t id = 0, bytes = 0;
  if (!digits(&q, lim, &id) || id == 0 || id > UINT32_MAX)
    return vl__fail(p->err, VL_EPARSE, "line %zu: a positive id expected", p->line);
  e->id = (uint32_t)id;
  if (s[0] == 'f') {
    /* an id that lost digits frees another block: the end's counts, never a peak */
    if (p->unterminated && q != lim) return cut_short(p);
    e->kind = VL_TR_FREE;
  } else {
    if (q >= lim || *q != ' ' || (q++, !digits(&q, lim, &bytes)) || bytes > (1ull << 50) ||
        q >= lim || *q != ' ')
      return vl__fail(p->err, VL_EPARSE, "line %zu: bytes (at most 2^50) and a device expected",
                      p->line);
    const char *d = q + 1, *sp = memchr(d, ' ', (size_t)(lim - d));
    e->device = (uint8_t)device_code(d, (size_t)((sp ? sp : lim) - d));
    if (p->unterminated && e->device == 3) return cut_short(p); /* "cu" of "cuda" */
    e->kind = VL_TR_ALLOC;
    e->batch = s[0] == 'b';
    e->bytes = bytes;
    if (!alloc_words(p->t, e, sp, lim)) return vl__fail(p->err, VL_ENOMEM, "out of memory");
    p->t->per_device[e->device]++;
  }
  if (e->id > p->t->max_id) p->t->max_id = e->id;
  return VL_OK;
}

/* An event line: "a", "b", "f", "m" or "e". */
static vl_status event_line(struct parser *p, const char *s, size_t n) {
  struct vl_trace_ev *e = next_event(p);
  if (!e) return vl__fail(p->err, VL_ENOMEM, "line %zu: too many events", p->line);
  vl_status st;
  if (n == 1 && s[0] == 'e') { /* torch.cuda.empty_cache(), or a retry's release */
    e->kind = VL_TR_EMPTY;
    st = VL_OK;
  } else if (s[0] == 'm' && n > 2 && s[1] == ' ') {
    st = mark_line(p, e, s, n);
  } else if ((s[0] == 'a' || s[0] == 'b' || s[0] == 'f') && n >= 3 && s[1] == ' ') {
    st = alloc_line(p, e, s, n);
  } else {
    st = vl__fail(p->err, VL_EPARSE,
                  "line %zu: expected 'a ID BYTES DEVICE', 'b ID BYTES DEVICE', 'f ID', "
                  "'m NAME' or 'e'",
                  p->line);
  }
  if (st == VL_OK) p->t->n++;
  return st;
}

static vl_status parse_line(struct parser *p, const char *s, size_t n) {
  if (n > 8 && !memcmp(s, "# batch ", 8)) return batch_line(p, s, n);
  if (n > 15 && !memcmp(s, "# convolutions ", 15)) return convolutions_line(p, s, n);
  if (n == 0 || s[0] == '#') return VL_OK; /* a comment: what the allocator itself did */
  if (s[0] == 's' && n > 2 && s[1] == ' ') return segment_line(p, s, n);
  return event_line(p, s, n);
}

/* The last line, without its newline: the job may have died writing it
 * (the tracer ends every line with one). A whole event is kept; anything
 * else is left out and its length put in cut_last_line: not an error. */
static vl_status last_line(struct parser *p, const char *s, size_t n) {
  struct vl_err mine = {""}, *theirs = p->err;
  p->err = &mine;
  p->unterminated = true;
  vl_status st = parse_line(p, s, n);
  p->err = theirs;
  if (st == VL_EPARSE) {
    p->t->cut_last_line = n;
    return VL_OK;
  }
  if (st != VL_OK && theirs) *theirs = mine;
  return st;
}

vl_status vl_trace_parse(const char *text, size_t len, struct vl_trace *t, struct vl_err *err) {
  memset(t, 0, sizeof *t);
  struct parser p = {.t = t, .err = err};
  for (size_t pos = 0; pos < len;) {
    const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - s) : len - pos;
    pos += n + 1;
    p.line++;
    vl_status st = nl ? parse_line(&p, s, n) : last_line(&p, s, n);
    if (st != VL_OK) {
      vl_trace_release(t);
      return st;
    }
  }
  return VL_OK;
}

void vl_trace_release(struct vl_trace *t) {
  vl_free(t->ev);
  vl_free(t->marks);
  vl_free(t->modules);
  vl_free(t->module_index);
  vl_free(t->seg_addr);
  vl_free(t->seg_size);
  memset(t, 0, sizeof *t);
}

/* The device a replay takes: `device`, or for -1 cuda when the trace has
 * any, else meta when it has any, else every device (-1). */
static int replay_device(const struct vl_trace *t, int device) {
  if (device >= 0) return device;
  return t->per_device[1] ? 1 : t->per_device[2] ? 2 : -1;
}

/* An allocation's bytes as the job at `scale` times the traced batch asks
 * (the batch-dependent ones scaled, rounded up; at most 2^50). */
static uint64_t scaled_bytes(const struct vl_trace_ev *e, double scale) {
  if (!e->batch || scale == 1.0) return e->bytes;
  double b = ceil((double)e->bytes * scale);
  return b < 1125899906842624.0 ? (uint64_t)b : 1125899906842624ull;
}

/* A new allocator for a replay; with an allocator history's segments
 * where the driver put them (not for expandable segments, mapped into one
 * growing range, nor when scaled). */
static vl_status replay_cache(const struct vl_trace *t, const struct vl_cache_conf *conf,
                              double scale, struct vl_cache **c) {
  vl_status s = vl_cache_new(conf, c);
  if (s != VL_OK) return s;
  if (t->n_segs && !conf->expandable && scale == 1.0 &&
      (s = vl_cache_segment_addresses(*c, t->seg_addr, t->seg_size, t->n_segs)) != VL_OK) {
    vl_cache_destroy(*c);
    *c = NULL;
  }
  return s;
}

vl_status vl_trace_replay(const struct vl_trace *t, int device, const struct vl_cache_conf *conf,
                          struct vl_replay *out) {
  return vl_trace_replay_scaled(t, device, conf, 1.0, out);
}

vl_status vl_trace_replay_scaled(const struct vl_trace *t, int device,
                                 const struct vl_cache_conf *conf, double scale,
                                 struct vl_replay *out) {
  return vl_trace_replay_from(t, device, conf, scale, -1, out);
}

long vl_trace_find_mark(const struct vl_trace *t, const char *name) {
  for (size_t i = 0; i < t->n_marks; i++)
    if (strcmp(t->marks[i], name) == 0) return (long)i;
  return -1;
}

vl_status vl_trace_replay_from(const struct vl_trace *t, int device,
                               const struct vl_cache_conf *conf, double scale, long from_mark,
                               struct vl_replay *out) {
  memset(out, 0, sizeof *out);
  if (!(scale > 0) || scale > 1e6) return VL_EINVAL;
  out->peak_mark = -1;
  device = replay_device(t, device);
  struct vl_cache *c;
  vl_status s = replay_cache(t, conf, scale, &c);
  if (s != VL_OK) return s;
  uint32_t *h = vl_calloc((size_t)t->max_id + 1, sizeof *h); /* 0: not live */
  uint8_t *on = vl_calloc((size_t)t->max_id + 1, 1);
  if (!h || !on) {
    vl_free(h);
    vl_free(on);
    vl_cache_destroy(c);
    return VL_ENOMEM;
  }
  long mark = -1;
  struct vl_cache_stats st;
  for (size_t i = 0; i < t->n; i++) {
    const struct vl_trace_ev *e = &t->ev[i];
    if (e->kind == VL_TR_MARK) {
      mark = (long)e->id;
      if (mark == from_mark && !out->from_mark_seen) { /* peaks from here, as */
        vl_cache_reset_peaks(c); /* torch.cuda.reset_peak_memory_stats() would */
        vl_cache_stats(c, &st);
        out->from_mark_seen = true;
        out->peak_allocated = st.allocated;
        out->peak_event = i;
        out->peak_mark = mark;
        out->peak_module = out->peak_at = out->peak_dtype = 0;
        out->inactive_split_at_peak = st.inactive_split;
      }
      continue;
    }
    if (e->kind == VL_TR_EMPTY) {
      vl_cache_empty(c);
      continue;
    }
    if (e->kind == VL_TR_ALLOC) {
      if ((device >= 0 && e->device != device) || on[e->id]) {
        out->skipped++;
        continue;
      }
      uint32_t hh;
      s = vl_cache_malloc(c, scaled_bytes(e, scale), &hh);
      if (s == VL_ERANGE) {
        out->oom = true;
        out->oom_event = i;
        s = VL_OK;
        break;
      }
      if (s != VL_OK) break;
      h[e->id] = hh;
      on[e->id] = 1;
      out->allocs++;
      vl_cache_stats(c, &st);
      if (st.allocated > out->peak_allocated) {
        out->peak_allocated = st.allocated;
        out->peak_event = i;
        out->peak_mark = mark;
        out->peak_module = e->module;
        out->peak_at = e->at;
        out->peak_dtype = e->dtype;
        out->inactive_split_at_peak = st.inactive_split;
      }
    } else if (on[e->id]) {
      vl_cache_free(c, h[e->id]);
      on[e->id] = 0;
      out->frees++;
    } else {
      out->skipped++;
    }
  }
  vl_cache_stats(c, &out->end);
  out->peak_reserved = out->end.peak_reserved;
  if (out->end.peak_allocated > out->peak_allocated) out->peak_allocated = out->end.peak_allocated;
  vl_free(h);
  vl_free(on);
  vl_cache_destroy(c);
  return s;
}

/* ---- what is live at an event, grouped -------------------------------- */

static int by_bytes_desc(const void *a, const void *b) {
  const struct vl_live_group *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* The groups with bytes, compacted and sorted; *n their count. */
static void compact(struct vl_live_group *g, size_t cap, size_t *n) {
  size_t k = 0;
  for (size_t i = 0; i < cap; i++)
    if (g[i].allocations) g[k++] = g[i];
  *n = k;
  qsort(g, k, sizeof *g, by_bytes_desc);
}

vl_status vl_trace_live_at(const struct vl_trace *t, int device, double scale, size_t upto,
                           struct vl_live_at *out) {
  memset(out, 0, sizeof *out);
  if (!(scale > 0) || scale > 1e6) return VL_EINVAL;
  device = replay_device(t, device);
  size_t ids = (size_t)t->max_id + 1;
  uint64_t *bytes = vl_calloc(ids, sizeof *bytes); /* 0: not live */
  uint32_t *made = vl_calloc(ids, sizeof *made);   /* the mark before it + 1 */
  uint32_t *mod = vl_calloc(ids, sizeof *mod);     /* the module that made it */
  out->by_mark = vl_calloc(t->n_marks + 1, sizeof *out->by_mark);
  out->by_module = vl_calloc(t->n_modules + 1, sizeof *out->by_module);
  if (!bytes || !made || !mod || !out->by_mark || !out->by_module) {
    vl_free(bytes);
    vl_free(made);
    vl_free(mod);
    vl_trace_live_release(out);
    return VL_ENOMEM;
  }
  uint32_t mark = 0;
  for (size_t i = 0; i < t->n && i <= upto; i++) {
    const struct vl_trace_ev *e = &t->ev[i];
    if (e->kind == VL_TR_MARK) {
      mark = e->id + 1;
    } else if (e->kind == VL_TR_ALLOC && (device < 0 || e->device == device) && !bytes[e->id]) {
      bytes[e->id] = vl_cache_round(scaled_bytes(e, scale));
      made[e->id] = mark;
      mod[e->id] = e->module;
    } else if (e->kind == VL_TR_FREE) {
      bytes[e->id] = 0;
    }
  }
  for (size_t id = 1; id < ids; id++) {
    if (!bytes[id]) continue;
    struct vl_live_group *m = &out->by_mark[made[id]], *d = &out->by_module[mod[id]];
    m->key = made[id];
    d->key = mod[id];
    m->bytes += bytes[id];
    d->bytes += bytes[id];
    m->allocations++;
    d->allocations++;
    out->bytes += bytes[id];
  }
  compact(out->by_mark, t->n_marks + 1, &out->n_mark);
  compact(out->by_module, t->n_modules + 1, &out->n_module);
  vl_free(bytes);
  vl_free(made);
  vl_free(mod);
  return VL_OK;
}

void vl_trace_live_release(struct vl_live_at *l) {
  vl_free(l->by_mark);
  vl_free(l->by_module);
  memset(l, 0, sizeof *l);
}

/* ---- the allocator's state at an event, for memory_viz ----------------- */

struct snap_build {
  struct vl_snapshot *s;
  size_t cap_seg, cap_blk;
  bool oom;
};

static bool snap_grow(void **p, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return true;
  size_t c = *cap ? *cap * 2 : 64;
  void *q = vl_realloc(*p, c * size);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

static void snap_seg(void *ctx, const struct vl_cache_segment *vs) {
  struct snap_build *b = ctx;
  struct vl_snapshot *s = b->s;
  if (b->oom || !snap_grow((void **)&s->segs, &b->cap_seg, s->n_segs, sizeof *s->segs)) {
    b->oom = true;
    return;
  }
  s->segs[s->n_segs++] =
      (struct vl_snap_segment){vs->addr, vs->size, 0, 0, vs->small, s->n_blocks, 0};
}

static void snap_blk(void *ctx, const struct vl_cache_block *vb) {
  struct snap_build *b = ctx;
  struct vl_snapshot *s = b->s;
  if (b->oom || !s->n_segs ||
      !snap_grow((void **)&s->blocks, &b->cap_blk, s->n_blocks, sizeof *s->blocks)) {
    b->oom = true;
    return;
  }
  s->blocks[s->n_blocks++] = *vb;
  struct vl_snap_segment *g = &s->segs[s->n_segs - 1];
  g->n++;
  if (vb->allocated) {
    g->allocated += vb->size;
    g->requested += vb->requested;
  }
}

static vl_status snap_event(struct vl_snapshot *s, size_t *cap, enum vl_snap_action action,
                            uint64_t addr, uint64_t size, size_t at, size_t frame) {
  if (!snap_grow((void **)&s->ev, cap, s->n_ev, sizeof *s->ev)) return VL_ENOMEM;
  s->ev[s->n_ev++] = (struct vl_snap_event){(uint8_t)action, addr, size, at, frame};
  return VL_OK;
}

/* The allocator's segments (address, size), in address order. */
struct seg_list {
  struct vl_cache_segment *v;
  size_t n, cap;
  bool oom;
};
static void seg_add(void *ctx, const struct vl_cache_segment *vs) {
  struct seg_list *l = ctx;
  if (l->oom || !snap_grow((void **)&l->v, &l->cap, l->n, sizeof *l->v)) {
    l->oom = true;
    return;
  }
  l->v[l->n++] = *vs;
}
static void blk_none(void *ctx, const struct vl_cache_block *vb) { (void)ctx, (void)vb; }
static int by_addr(const void *a, const void *b) {
  uint64_t x = ((const struct vl_cache_segment *)a)->addr;
  uint64_t y = ((const struct vl_cache_segment *)b)->addr;
  return (x > y) - (x < y);
}

/* The segment events between the allocator's segments before (*was) and
 * now, at trace event `at`, as PyTorch's allocator records them: what it
 * gave back first (segment_free; expandable segments: segment_unmap of the
 * pages unmapped), then what it took (segment_alloc; segment_map of the
 * pages mapped onto a segment's end). *was becomes now. */
static vl_status snap_segments(struct vl_snapshot *s, size_t *cap, const struct vl_cache *c,
                               struct seg_list *was, struct seg_list *now, size_t at) {
  now->n = 0;
  vl_cache_walk(c, seg_add, blk_none, now);
  if (now->oom) return VL_ENOMEM;
  if (now->n > 1) qsort(now->v, now->n, sizeof *now->v, by_addr);
  vl_status st = VL_OK;
  for (int pass = 0; pass < 2 && st == VL_OK; pass++) { /* 0: what went, 1: what came */
    size_t i = 0, j = 0;
    while (st == VL_OK && (i < was->n || j < now->n)) {
      const struct vl_cache_segment *a = i < was->n ? &was->v[i] : NULL;
      const struct vl_cache_segment *b = j < now->n ? &now->v[j] : NULL;
      if (a && (!b || a->addr < b->addr)) { /* gone */
        if (!pass) st = snap_event(s, cap, VL_SNAP_SEGMENT_FREE, a->addr, a->size, at, at);
        i++;
      } else if (b && (!a || b->addr < a->addr)) { /* new */
        if (pass) st = snap_event(s, cap, VL_SNAP_SEGMENT_ALLOC, b->addr, b->size, at, at);
        j++;
      } else { /* the same segment: grown or shrunk (expandable) */
        if (!pass && b->size < a->size)
          st = snap_event(s, cap, VL_SNAP_SEGMENT_UNMAP, a->addr + b->size, a->size - b->size, at,
                          at);
        if (pass && b->size > a->size)
          st =
              snap_event(s, cap, VL_SNAP_SEGMENT_MAP, a->addr + a->size, b->size - a->size, at, at);
        i++;
        j++;
      }
    }
  }
  struct seg_list t = *was;
  *was = *now;
  *now = t;
  return st;
}

/* Did the allocator take or give back memory since *last (its counts of
 * cudaMalloc and cudaFree)? *last becomes now. */
static bool segments_moved(const struct vl_cache *c, struct vl_cache_stats *last) {
  struct vl_cache_stats now;
  vl_cache_stats(c, &now);
  bool moved = now.cuda_mallocs != last->cuda_mallocs || now.cuda_frees != last->cuda_frees ||
               now.reserved != last->reserved;
  *last = now;
  return moved;
}

static int by_block_addr(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Each live block's trace event, from the live ids' addresses. */
static vl_status snap_block_events(struct vl_snapshot *out, const struct vl_trace *t,
                                   const struct vl_cache *c, const uint32_t *h, const uint8_t *on,
                                   const size_t *made) {
  out->block_at = vl_calloc(out->n_blocks + 1, sizeof *out->block_at);
  size_t n_live = 0;
  for (uint32_t id = 1; id <= t->max_id; id++)
    n_live += on[id];
  uint64_t(*live)[2] = vl_calloc(n_live + 1, sizeof *live); /* address, event */
  if (!out->block_at || !live) {
    vl_free(live);
    return VL_ENOMEM;
  }
  size_t k = 0;
  for (uint32_t id = 1; id <= t->max_id; id++)
    if (on[id]) {
      live[k][0] = vl_cache_block_addr(c, h[id]);
      live[k++][1] = made[id];
    }
  qsort(live, n_live, sizeof *live, by_block_addr);
  for (size_t i = 0; i < out->n_blocks; i++) {
    const struct vl_cache_block *b = &out->blocks[i];
    uint64_t(*f)[2] =
        b->allocated ? bsearch(&b->addr, live, n_live, sizeof *live, by_block_addr) : NULL;
    out->block_at[i] = f ? (size_t)(*f)[1] : VL_SNAP_NO_EVENT;
  }
  vl_free(live);
  return VL_OK;
}

vl_status vl_trace_snapshot(const struct vl_trace *t, int device, const struct vl_cache_conf *conf,
                            double scale, size_t upto, struct vl_snapshot *out) {
  memset(out, 0, sizeof *out);
  if (!(scale > 0) || scale > 1e6) return VL_EINVAL;
  device = replay_device(t, device);
  struct vl_cache *c;
  vl_status s = replay_cache(t, conf, scale, &c);
  if (s != VL_OK) return s;
  out->trace = t;
  uint32_t *h = vl_calloc((size_t)t->max_id + 1, sizeof *h);
  uint8_t *on = vl_calloc((size_t)t->max_id + 1, 1);
  uint64_t *sz = vl_calloc((size_t)t->max_id + 1, sizeof *sz);
  size_t *made = vl_calloc((size_t)t->max_id + 1, sizeof *made); /* the event that allocated it */
  size_t cap_ev = 0;
  struct seg_list was = {0}, now = {0};
  struct vl_cache_stats last;
  vl_cache_stats(c, &last);
  if (!h || !on || !sz || !made) s = VL_ENOMEM;
  for (size_t i = 0; s == VL_OK && i < t->n && i <= upto; i++) {
    const struct vl_trace_ev *e = &t->ev[i];
    if (e->kind == VL_TR_EMPTY) {
      vl_cache_empty(c);
    } else if (e->kind == VL_TR_ALLOC && (device < 0 || e->device == device) && !on[e->id]) {
      uint64_t bytes = scaled_bytes(e, scale);
      s = vl_cache_malloc(c, bytes, &h[e->id]);
      if (s == VL_ERANGE) { /* what was left of the device: its limit less the reserve */
        struct vl_cache_stats st;
        vl_cache_stats(c, &st);
        uint64_t left = conf->device_bytes > st.reserved ? conf->device_bytes - st.reserved : 0;
        vl_status f = VL_OK;
        if (segments_moved(c, &last)) f = snap_segments(out, &cap_ev, c, &was, &now, i);
        if (f == VL_OK) f = snap_event(out, &cap_ev, VL_SNAP_OOM, left, bytes, i, i);
        if (f != VL_OK) s = f;
        break;
      }
      if (s == VL_OK && segments_moved(c, &last)) s = snap_segments(out, &cap_ev, c, &was, &now, i);
      if (s == VL_OK) {
        on[e->id] = 1;
        sz[e->id] = vl_cache_round(bytes);
        made[e->id] = i;
        s = snap_event(out, &cap_ev, VL_SNAP_ALLOC, vl_cache_block_addr(c, h[e->id]), sz[e->id], i,
                       i);
      }
      continue;
    } else if (e->kind == VL_TR_FREE && on[e->id]) {
      uint64_t addr = vl_cache_block_addr(c, h[e->id]);
      vl_cache_free(c, h[e->id]);
      on[e->id] = 0;
      s = snap_event(out, &cap_ev, VL_SNAP_FREE_REQUESTED, addr, sz[e->id], i, made[e->id]);
      if (s == VL_OK)
        s = snap_event(out, &cap_ev, VL_SNAP_FREE_COMPLETED, addr, sz[e->id], i, made[e->id]);
    }
    if (s == VL_OK && segments_moved(c, &last)) s = snap_segments(out, &cap_ev, c, &was, &now, i);
  }
  vl_status ran = s; /* VL_ERANGE: out of memory, the state is there */
  struct snap_build sb = {out, 0, 0, false};
  if (s == VL_OK || s == VL_ERANGE) vl_cache_walk(c, snap_seg, snap_blk, &sb);
  if (sb.oom) ran = VL_ENOMEM;
  if ((ran == VL_OK || ran == VL_ERANGE) && snap_block_events(out, t, c, h, on, made) != VL_OK)
    ran = VL_ENOMEM;
  vl_free(h);
  vl_free(on);
  vl_free(sz);
  vl_free(made);
  vl_free(was.v);
  vl_free(now.v);
  vl_cache_destroy(c);
  if (ran != VL_OK && ran != VL_ERANGE) vl_snapshot_release(out);
  return ran;
}

void vl_snapshot_release(struct vl_snapshot *s) {
  vl_free(s->segs);
  vl_free(s->blocks);
  vl_free(s->block_at);
  vl_free(s->ev);
  memset(s, 0, sizeof *s);
}
