/* A program of allocations and frees run through the caching-allocator
 * model (caching.c): what infer_replay.c and train_replay.c write their
 * sequences in. Blocks of 1 MiB or less (the small pool, its own 2 MiB
 * segments) are left out; the first failure stops the program. */
#ifndef VRAMLEDGER_MODEL_PROG_H
#define VRAMLEDGER_MODEL_PROG_H
#include "vramledger/caching.h"

#define NONE UINT32_MAX

struct prog {
  struct vl_cache *c;
  bool failed;
};

/* allocate: a handle, or NONE (small pool, or the program failed) */
static inline uint32_t A(struct prog *p, uint64_t bytes) {
  uint32_t h = NONE;
  if (p->failed || bytes <= (1ull << 20)) return NONE;
  if (vl_cache_malloc(p->c, bytes, &h) != VL_OK) {
    p->failed = true;
    return NONE;
  }
  return h;
}

/* free *h (NONE: nothing) and clear it */
static inline void F(struct prog *p, uint32_t *h) {
  if (*h != NONE) vl_cache_free(p->c, *h);
  *h = NONE;
}

#endif
