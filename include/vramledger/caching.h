/* vramledger: a model of PyTorch's CUDA caching allocator (pure).
 *
 * Replays a sequence of allocations and frees the way
 * c10/cuda/CUDACachingAllocator.cpp serves them, and says what the GPU
 * would hold: allocated and reserved bytes, their peaks, inactive split
 * blocks (fragmentation), segments created and freed, retries and
 * out-of-memory. One stream. docs/model.md section 12 lists every rule.
 * The foundation of `vramledger trace` (issue 7): exact before it predicts
 * (validated against the allocator's own counters on a GPU trace). */
#ifndef VRAMLEDGER_CACHING_H
#define VRAMLEDGER_CACHING_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/status.h"

struct vl_cache_conf {
  uint64_t device_bytes;   /* what the allocator may reserve (0: unlimited) */
  uint64_t max_split_size; /* max_split_size_mb in bytes; 0: none (PyTorch's default) */
  double gc_threshold;     /* garbage_collection_threshold, 0 < t < 1; 0: off */
  bool expandable;         /* expandable_segments:True */
};

struct vl_cache_stats {
  uint64_t allocated, reserved;           /* bytes now (blocks rounded, segments) */
  uint64_t peak_allocated, peak_reserved; /* since the start or vl_cache_reset_peaks */
  uint64_t requested;                     /* bytes asked for, before rounding */
  uint64_t inactive_split;                /* free blocks inside segments in use */
  uint64_t segments, cuda_mallocs, cuda_frees;
  uint64_t alloc_retries, ooms;
  uint64_t live_blocks;
};

struct vl_cache;

/*! A new allocator. @return VL_OK, VL_ENOMEM, VL_EINVAL (a threshold
 * outside (0, 1)). */
vl_status vl_cache_new(const struct vl_cache_conf *conf, struct vl_cache **out) VL_MUST_USE;
void vl_cache_destroy(struct vl_cache *c);

/*! Allocate `size` bytes. *handle names the block for vl_cache_free.
 * @return VL_OK; VL_ERANGE when the device would run out (the allocator's
 * OutOfMemoryError: counted in ooms, nothing allocated); VL_ENOMEM. */
vl_status vl_cache_malloc(struct vl_cache *c, uint64_t size, uint32_t *handle) VL_MUST_USE;
/*! Free a block from vl_cache_malloc (a handle not live is ignored). */
void vl_cache_free(struct vl_cache *c, uint32_t handle);
/*! torch.cuda.empty_cache(): return every wholly free segment. */
void vl_cache_empty(struct vl_cache *c);
void vl_cache_reset_peaks(struct vl_cache *c);
void vl_cache_stats(const struct vl_cache *c, struct vl_cache_stats *s);
/*! Walk every segment and recompute allocated, reserved and inactive split
 * bytes, the free trees and the neighbour links; true when they agree with
 * the counters (for tests and fuzzing). */
bool vl_cache_check(const struct vl_cache *c);

/* The allocator's size rules (c10/cuda/CUDACachingAllocator.cpp). */
uint64_t vl_cache_round(uint64_t size);       /* a block: 512 B multiples */
uint64_t vl_cache_segment_for(uint64_t size); /* a new segment for a rounded request */

#endif
