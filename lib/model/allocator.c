/* PyTorch's CUDA caching allocator, as far as the bill needs it.
 * c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize 512 (every request
 * rounds up to 512 B); requests <= kSmallSize (1 MiB) are served from 2 MiB
 * small-pool segments; requests < kMinLargeAlloc (10 MiB) from 20 MiB
 * segments shared by several blocks; larger ones get a segment rounded up to
 * kRoundLarge (2 MiB). Measured on the H200: 513 B -> 1024 B allocated,
 * 1 MiB + 1 B -> 1 MiB + 512 B, 100 MiB -> a 100 MiB segment
 * (data/reference/h200-torch-2.11/basics.json). */
#include "internal.h"
#include "pytorch_constants.h"

uint64_t vl__alloc_block_bytes(uint64_t n) { return vl__round_up(n ? n : 1, VL_PT_MIN_BLOCK_SIZE); }

uint64_t vl__alloc_segment_bytes(uint64_t n) {
  uint64_t b = vl__alloc_block_bytes(n);
  if (b < VL_PT_MIN_LARGE_ALLOC) return b; /* packed into shared 2 or 20 MiB segments */
  return vl__round_up(b, VL_PT_ROUND_LARGE);
}
