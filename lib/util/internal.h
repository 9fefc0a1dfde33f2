/* Internal helpers shared by the library: checked arithmetic and errors.
 * Not part of the public API. */
#ifndef VRAMLEDGER_INTERNAL_H
#define VRAMLEDGER_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vramledger/status.h"

/* Checked 64-bit arithmetic that records overflow instead of wrapping, so a
 * formula can be written as plain arithmetic and checked once at the end.
 * Saturates at UINT64_MAX once overflowed. */
struct vl__ck {
  bool overflow;
};

static inline uint64_t vl__add(struct vl__ck *c, uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    c->overflow = true;
    return UINT64_MAX;
  }
  return r;
}

static inline uint64_t vl__mul(struct vl__ck *c, uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    c->overflow = true;
    return UINT64_MAX;
  }
  return r;
}

static inline uint64_t vl__mul3(struct vl__ck *c, uint64_t a, uint64_t b, uint64_t d) {
  return vl__mul(c, vl__mul(c, a, b), d);
}

static inline uint64_t vl__mul4(struct vl__ck *c, uint64_t a, uint64_t b, uint64_t d, uint64_t e) {
  return vl__mul(c, vl__mul3(c, a, b, d), e);
}

static inline uint64_t vl__sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* a * f for a non-negative factor f, rounded to nearest; overflow checked. */
static inline uint64_t vl__scale(struct vl__ck *c, uint64_t a, double f) {
  double r = (double)a * f + 0.5;
  if (!(r >= 0.0)) return 0;
  if (r >= 18446744073709551615.0) {
    c->overflow = true;
    return UINT64_MAX;
  }
  return (uint64_t)r;
}

static inline uint64_t vl__div_ceil(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : 0; }

static inline uint64_t vl__round_up(uint64_t a, uint64_t m) { return vl__div_ceil(a, m) * m; }

/* v in decimal at out, as printf's "%llu" writes it, without a
 * terminating NUL; out holds at least 20 bytes. @return the digits
 * written. The sampler writes two numbers a tick with it: snprintf was
 * most of what formatting a sample line cost. */
static inline size_t vl__u64_dec(char *out, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

/* Two unrelated 64-bit hashes of n bytes folded into *h1 (FNV-1a's step)
 * and *h2: memo keys of structs copied from one base (their bytes
 * compare). Eight bytes a step, the rest one by one: a job is a few
 * hundred bytes, hashed for each of plan's 10^5 candidates. */
static inline void vl__hash2(const void *p, size_t n, uint64_t *h1, uint64_t *h2) {
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, sizeof w);
    *h1 = (*h1 ^ w) * 0x100000001b3ull;
    *h2 = (*h2 + w + 1) * 0x9e3779b97f4a7c15ull ^ (*h2 >> 29);
  }
  for (; i < n; i++) {
    *h1 = (*h1 ^ b[i]) * 0x100000001b3ull;
    *h2 = (*h2 + b[i] + 1) * 0x9e3779b97f4a7c15ull ^ (*h2 >> 29);
  }
}

/* A memo's two keys from vl__hash2: h1 never 0, which marks an empty slot. */
static inline void vl__memo_keys(uint64_t h1, uint64_t h2, uint64_t *k1, uint64_t *k2) {
  *k1 = h1 ? h1 : 1;
  *k2 = h2;
}

/* A memo by open addressing over `slots` entries (a power of two) of
 * `stride` bytes, each beginning with its keys (uint64_t h1, h2; h1 0:
 * empty): the index of (k1, k2)'s entry, or of the empty one where it
 * goes, looking at most `probes` slots on from k1; SIZE_MAX when they are
 * all taken by others (a crowded stretch). */
static inline size_t vl__memo_probe(const void *base, size_t stride, size_t slots, uint64_t k1,
                                    uint64_t k2, size_t probes) {
  const unsigned char *b = base;
  for (size_t i = (size_t)k1 & (slots - 1), n = 0; n < probes; i = (i + 1) & (slots - 1), n++) {
    uint64_t h[2];
    memcpy(h, b + i * stride, sizeof h);
    if ((h[0] == k1 && h[1] == k2) || !h[0]) return i;
  }
  return SIZE_MAX;
}

static inline uint64_t vl__max(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t vl__min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The items of a list separated by one character (a,b,c), split in place
 * in a copy of the caller's text (lib/util/list.c): in buf, or in storage
 * the caller names (vl__list_init_in). */
struct vl__list {
  char buf[256];
  char *next; /* the rest of the list, or NULL once it is read */
  char sep;
  bool empty; /* empty items are items ("a,,b" three, "a," two, "" one) */
};

/* Copy text into l. @return false, with l empty, when text does not fit
 * whole in l->buf (sizeof l->buf - 1 bytes at most): a list is never cut,
 * since a cut item may read as another item. */
bool vl__list_init(struct vl__list *l, const char *text, char sep);

/* vl__list_init with the copy in dst (cap bytes, text itself allowed),
 * for a list longer than l->buf or items that must outlive l: they point
 * into dst, which the caller keeps. @return false, with l empty and dst
 * untouched, when text does not fit whole in cap - 1 bytes. */
bool vl__list_init_in(struct vl__list *l, const char *text, char sep, char *dst, size_t cap);

/* The next item of l, NUL-terminated in l's copy. @return NULL at the end
 * of the list, which an empty item also ends (",a" has no items, "a," one)
 * unless l->empty is set (after init): then every item, empty or not, as
 * a strchr loop over the whole text yields them;
 * *gap (if not NULL) is set when an empty item follows this one ("a,,b"),
 * for the callers that refuse it rather than drop what comes after. */
char *vl__list_next(struct vl__list *l, bool *gap);

/* pids[0..n) in words, into buf (cap > 0 bytes, cut to fit): "PID 12", or
 * "PIDs 12, 13, 14" (the first VL__PIDS_SHOWN), then ", ..." when more
 * (the caller knows of processes it does not name); "" when n is 0. One
 * wording for run's notes, doctor's and report's (lib/util/list.c). */
#define VL__PIDS_SHOWN 8
void vl__pid_list(char *buf, size_t cap, const unsigned *pids, unsigned n, bool more);

/* src into dst (n bytes, n > 0), cut on a character boundary to fit: a
 * byte that begins no well-formed UTF-8 character becomes '?', a character
 * cut at src's end is dropped. dst may be src (it never gets ahead). The
 * result is valid UTF-8 for every input; returns its length
 * (lib/util/utf8.c). */
size_t vl__utf8_copy(char *dst, size_t n, const char *src);
/* The bytes of the well-formed UTF-8 character at s (1 to 4); 0 when none
 * starts there (or s is ""). */
size_t vl__utf8_len(const char *s);

/* Fill err (if not NULL) and return s. printf-style. */
vl_status vl__fail(struct vl_err *err, vl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#include "vramledger/banned.h" /* last: after every system header */
#endif
