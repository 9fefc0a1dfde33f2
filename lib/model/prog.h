/* A program of allocations and frees run through the caching-allocator
 * model (caching.c): what infer_replay.c and train_replay.c write their
 * sequences in, small blocks (1 MiB or less: the small pool, its own 2 MiB
 * segments) included — LoRA's adapters, their gradients and states, a
 * ResNet's weights; the first failure stops the program. */
#ifndef VRAMLEDGER_MODEL_PROG_H
#define VRAMLEDGER_MODEL_PROG_H
#include "vramledger/caching.h"
#include "pytorch_constants.h"

/* Built with -DVL_PROG_LOG (a developer's build, never the product's) the
 * program is written to stderr as a trace (`a ID BYTES cuda`, `f ID`, the
 * format of `vramledger trace`), with `# segment` lines for each new
 * segment and caching.c's `# land` lines for where each block goes, to
 * compare with an allocator history: bench/accuracy/replay_segments.py. */
#ifdef VL_PROG_LOG
#include <stdio.h>
#define PROG_LOG(...) fprintf(stderr, __VA_ARGS__)
#else
#define PROG_LOG(...) ((void)0)
#endif

#define NONE UINT32_MAX

struct prog {
  struct vl_cache *c;
  bool failed;
};

/* allocate: a handle, or NONE (nothing asked, or the program failed) */
static inline uint32_t A(struct prog *p, uint64_t bytes) {
  uint32_t h = NONE;
  if (p->failed || !bytes) return NONE;
#ifdef VL_PROG_LOG
  struct vl_cache_stats s0, s1;
  vl_cache_stats(p->c, &s0);
#endif
  if (vl_cache_malloc(p->c, bytes, &h) != VL_OK) {
    p->failed = true;
    return NONE;
  }
#ifdef VL_PROG_LOG
  vl_cache_stats(p->c, &s1);
  if (s1.reserved > s0.reserved) /* a new segment: its size, the allocated bytes before */
    fprintf(stderr, "# segment %llu for %llu allocated %llu\n",
            (unsigned long long)(s1.reserved - s0.reserved), (unsigned long long)bytes,
            (unsigned long long)s0.allocated);
#endif
  PROG_LOG("a %u %llu cuda\n", h + 1, (unsigned long long)bytes);
  return h;
}

/* free *h (NONE: nothing) and clear it */
static inline void F(struct prog *p, uint32_t *h) {
  if (*h != NONE) {
    PROG_LOG("f %u\n", *h + 1);
    vl_cache_free(p->c, *h);
  }
  *h = NONE;
}

/* the layer program p (lp.h) run as a forward under no_grad on *x (its
 * input, the caller's: NONE afterwards where p let go of it), d its sizes;
 * the block of its last tensor, the caller's to free; tensors (NULL: not
 * wanted) the block of each name the program has not let go of, NONE for
 * a view or a reference (its base's block is the base's) (infer_lp.c) */
struct lp;
struct lp_dims;
uint32_t vl__inf_lp(struct prog *pr, const struct lp *p, uint32_t *x, const struct lp_dims *d,
                    uint32_t *tensors);

#endif
