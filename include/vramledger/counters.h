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
 * links nothing but libc.
 *
 * The file may go on, at VL_COUNTERS_RINGS_AT, with a ring of millisecond
 * buckets for each of the first VL_COUNTERS_RING_SLOTS slots (struct
 * vl_msbucket, lib/measure/msbuckets.h): what
 * the slot's live bytes were at the end of each millisecond and the most
 * they were within it, for the last VL_COUNTERS_RING_MS milliseconds, so
 * a sampler that wakes every few milliseconds still writes a sample for
 * each one (docs/record.md). ring_ms says the rings are there (a file
 * without them, from an older `run`, has 0 there and is
 * sizeof(struct vl_counters) long: the interposer maps no more than the
 * file), and a slot's `rings` that its process notes into its ring (an
 * older interposer leaves it 0: the sampler reads its live bytes when it
 * wakes). The rings are an addition the version 3 layout leaves room
 * for, not a new version: an interposer checks the version for equality,
 * and an older one given a new version would count nothing at all. */
#ifndef VRAMLEDGER_COUNTERS_H
#define VRAMLEDGER_COUNTERS_H
#include <stdint.h>

#define VL_COUNTERS_MAGIC 0x564c4354u /* "VLCT" */
/* 2: lost, no_slot, uncounted; 3: record_lost_bytes (ring_ms and the rings
 * after it, in room version 3 left zero) */
#define VL_COUNTERS_VERSION 3u
#define VL_COUNTERS_SLOTS 256u

struct vl_counters_slot {
  uint32_t pid;   /* 0: free; claimed with an atomic compare-and-swap */
  uint32_t rings; /* 1: the process notes into its ring (a slot under
                   * VL_COUNTERS_RING_SLOTS), set before its first count */
  uint64_t live;  /* bytes allocated through the runtime or driver API, not freed */
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
  uint32_t lost;              /* VL_COUNTERS_LOST_* (atomically) */
  uint32_t no_slot;           /* processes whose bytes are in no slot (atomically) */
  uint32_t ring_ms;           /* buckets in each slot's ring: VL_COUNTERS_RING_MS; 0: no rings */
  uint64_t uncounted;         /* allocations no table could hold (atomically) */
  uint64_t record_lost_bytes; /* the interposers' lines that did not go into the
                               * record whole (a full disk, ulimit -f) (atomically) */
  struct vl_counters_slot slot[VL_COUNTERS_SLOTS];
};

/* One millisecond of a slot's live bytes. end and hi each hold the low
 * VL_MSB_TAG_BITS bits of the millisecond they are for above the bytes,
 * so a word is never mistaken for another millisecond's; t_ms, the whole
 * millisecond (CLOCK_MONOTONIC / 1e6), is written last. */
struct vl_msbucket {
  uint64_t t_ms;
  uint64_t end; /* tag | the live bytes when the millisecond ended */
  uint64_t hi;  /* tag | the most they were within it */
};

/* 512 buckets: a sampler waking every 20 ms may be half a second late (a
 * busy machine) before a millisecond is overwritten; 12 KiB a slot. The
 * first VL_COUNTERS_RING_SLOTS slots have one (a job of more processes
 * that allocate is rare; the others are read at the sampler's wake-ups):
 * 768 KiB in all, given disk blocks when the file is made, since a page
 * of a shared mapping that the disk has no room for kills the process
 * that writes it (SIGBUS). */
#define VL_COUNTERS_RING_MS 512u
#define VL_COUNTERS_RING_SLOTS 64u
#define VL_COUNTERS_RINGS_AT ((sizeof(struct vl_counters) + 4095) / 4096 * 4096)
#define VL_COUNTERS_FILE_BYTES                                                                     \
  (VL_COUNTERS_RINGS_AT +                                                                          \
   (size_t)VL_COUNTERS_RING_SLOTS * VL_COUNTERS_RING_MS * sizeof(struct vl_msbucket))

/* Slot i's ring (i < VL_COUNTERS_RING_SLOTS) in a mapping of
 * VL_COUNTERS_FILE_BYTES (ring_ms set). */
static inline struct vl_msbucket *vl_counters_ring(struct vl_counters *c, unsigned i) {
  return (struct vl_msbucket *)((char *)c + VL_COUNTERS_RINGS_AT) + (size_t)i * VL_COUNTERS_RING_MS;
}

/* Does a counters file of size bytes with blocks 512-byte blocks (stat's
 * st_size, st_blocks) hold len bytes, every page with its disk blocks? A
 * page of a shared mapping that has none (a sparse file) is given one when
 * it is first written, and where the file system has no room (a full
 * disk, a small tmpfs) the process that touched it is killed (SIGBUS).
 * `run` makes the file with its blocks (posix_fallocate, or zeros
 * written); the interposer maps nothing else. */
static inline int vl_counters_backed(long long size, long long blocks, unsigned long long len) {
  return size >= 0 && (unsigned long long)size >= len && blocks >= 0 &&
         (unsigned long long)blocks * 512u >= (unsigned long long)size;
}

#endif
