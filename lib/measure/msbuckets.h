/* A ring of millisecond buckets (struct vl_msbucket, vramledger/counters.h):
 * the interposer notes each change of a slot's live bytes in the bucket of
 * its millisecond, the sampler reads completed milliseconds back. Shared
 * by preload/preload.c and lib/measure/sampler.c; atomics only, no libc,
 * no lock, no system call.
 *
 * Any number of threads may note into one ring at once. The most within a
 * millisecond is raised, to the value each caller's own atomic change
 * returned (a later reading could be after another thread's free), with a
 * compare-and-swap of a word that carries the millisecond's tag, so the
 * first note of a new millisecond replaces an old millisecond's value and
 * no note is lost. The end value is
 * stored, then the live counter read again and stored again until it
 * stands: the last store is of the value the counter held after the last
 * change. t_ms goes last, with release: a reader that finds t_ms equal to
 * the millisecond it asks for, before and after reading the words, and
 * both words tagged with it, has that millisecond's values. */
#ifndef VL_MSBUCKETS_H
#define VL_MSBUCKETS_H
#include <stdint.h>

#include "vramledger/counters.h"

#define VL_MSB_BYTES_BITS 42 /* 4 TiB a process; more is written as that */
#define VL_MSB_BYTES_MAX ((1ull << VL_MSB_BYTES_BITS) - 1)
#define VL_MSB_TAG_BITS (64 - VL_MSB_BYTES_BITS)

static inline uint64_t vl__msb_word(uint64_t ms, uint64_t bytes) {
  return ms << VL_MSB_BYTES_BITS | (bytes > VL_MSB_BYTES_MAX ? VL_MSB_BYTES_MAX : bytes);
}
static inline uint64_t vl__msb_bytes(uint64_t word) { return word & VL_MSB_BYTES_MAX; }
static inline int vl__msb_tagged(uint64_t word, uint64_t ms) {
  return word >> VL_MSB_BYTES_BITS == (ms & ((1ull << VL_MSB_TAG_BITS) - 1));
}

/* After a change of *live (the slot's live bytes, updated atomically by the
 * caller, to v as its atomic operation returned) at millisecond ms: note
 * it in ring[ms % n]. A note for a
 * millisecond the bucket has already left behind (the thread stopped for
 * n ms between its clock reading and here) is dropped. */
static inline void vl__msb_note(struct vl_msbucket *ring, unsigned n, uint64_t ms, uint64_t v,
                                const uint64_t *live) {
  struct vl_msbucket *b = &ring[ms % n];
  if (__atomic_load_n(&b->t_ms, __ATOMIC_ACQUIRE) > ms) return;
  uint64_t h = __atomic_load_n(&b->hi, __ATOMIC_RELAXED);
  while (!(vl__msb_tagged(h, ms) && vl__msb_bytes(h) >= v))
    if (__atomic_compare_exchange_n(&b->hi, &h, vl__msb_word(ms, v), 1, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      break;
  v = __atomic_load_n(live, __ATOMIC_SEQ_CST);
  for (;;) {
    __atomic_store_n(&b->end, vl__msb_word(ms, v), __ATOMIC_SEQ_CST);
    uint64_t again = __atomic_load_n(live, __ATOMIC_SEQ_CST);
    if (again == v) break;
    v = again; /* another thread changed it meanwhile: its value is the later one */
  }
  if (__atomic_load_n(&b->t_ms, __ATOMIC_RELAXED) != ms)
    __atomic_store_n(&b->t_ms, ms, __ATOMIC_RELEASE);
}

enum vl_msb_read {
  VL_MSB_NONE, /* no change in that millisecond */
  VL_MSB_SET,  /* *end and *hi are its values */
  VL_MSB_LOST  /* overwritten by a later millisecond: the reader is n ms late */
};

/* Millisecond ms of ring (n buckets): its values into *end and *hi (hi >=
 * end). Read only completed milliseconds: one still in progress may
 * change. */
static inline enum vl_msb_read vl__msb_read(const struct vl_msbucket *ring, unsigned n, uint64_t ms,
                                            uint64_t *end, uint64_t *hi) {
  const struct vl_msbucket *b = &ring[ms % n];
  uint64_t t1 = __atomic_load_n(&b->t_ms, __ATOMIC_ACQUIRE);
  uint64_t e = __atomic_load_n(&b->end, __ATOMIC_ACQUIRE);
  uint64_t h = __atomic_load_n(&b->hi, __ATOMIC_ACQUIRE);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  uint64_t t2 = __atomic_load_n(&b->t_ms, __ATOMIC_RELAXED);
  if (t1 > ms || t2 > ms) return VL_MSB_LOST;
  if (t1 != ms) return VL_MSB_NONE;
  if (t2 != ms || !vl__msb_tagged(e, ms) || !vl__msb_tagged(h, ms)) return VL_MSB_LOST;
  *end = vl__msb_bytes(e);
  *hi = vl__msb_bytes(h) > *end ? vl__msb_bytes(h) : *end;
  return VL_MSB_SET;
}

#endif
