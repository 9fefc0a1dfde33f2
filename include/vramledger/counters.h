/* vramledger: the counters the interposer shares with the sampler.
 *
 * `vramledger run` creates a small file in the run directory and passes its
 * path in $VRAMLEDGER_COUNTERS; every interposed process of the job maps it
 * and, at its first allocation, takes one slot: its pid, live and peak
 * driver-allocated bytes. The sampler reads the slots at each tick. A
 * process takes the lowest free slot (pid 0) and never frees it; only the
 * sampler frees the slot of a process that exited. So the slots after the
 * first never taken are free, and the sampler stops there
 * (vl_counters_scan). What
 * the interposer could not count is said in `lost` (flags) and its two
 * counts, what it could not write into the record in record_lost_bytes;
 * `run` puts them into the record. Header-only; the interposer
 * links nothing but libc. */
#ifndef VRAMLEDGER_COUNTERS_H
#define VRAMLEDGER_COUNTERS_H
#include <stdint.h>

#define VL_COUNTERS_MAGIC 0x564c4354u /* "VLCT" */
#define VL_COUNTERS_VERSION 3u        /* 2: lost, no_slot, uncounted; 3: record_lost_bytes */
#define VL_COUNTERS_SLOTS 256u

struct vl_counters_slot {
  uint32_t pid; /* 0: free; claimed with an atomic compare-and-swap */
  uint32_t pad;
  uint64_t live; /* bytes allocated through the runtime or driver API, not freed */
  uint64_t peak;
  uint64_t allocs;
  uint64_t frees;
};

/* bits of vl_counters.lost, set by the first process that meets each */
#define VL_COUNTERS_LOST_NO_SLOT 1u /* a process allocated with every slot taken */
#define VL_COUNTERS_LOST_TABLE 2u   /* a process's pointer table could not grow */

struct vl_counters {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t lost;    /* VL_COUNTERS_LOST_* (atomically) */
  uint32_t no_slot; /* processes whose bytes are in no slot (atomically) */
  uint32_t pad;
  uint64_t uncounted;         /* allocations no table could hold (atomically) */
  uint64_t record_lost_bytes; /* the interposers' lines that did not go into the
                               * record whole (a full disk, ulimit -f) (atomically) */
  struct vl_counters_slot slot[VL_COUNTERS_SLOTS];
};

#endif
