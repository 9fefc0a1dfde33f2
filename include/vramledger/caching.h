/* vramledger: a model of PyTorch's CUDA caching allocator (pure).
 *
 * Replays a sequence of allocations and frees the way
 * c10/cuda/CUDACachingAllocator.cpp serves them, and says what the GPU
 * would hold: allocated and reserved bytes, their peaks, inactive split
 * blocks (fragmentation), segments created and freed, retries and
 * out-of-memory. One stream. docs/model.md section 12 lists every rule.
 * The foundation of `vramledger trace`: exact before it predicts
 * (validated against the allocator's own counters on a GPU trace). */
#ifndef VRAMLEDGER_CACHING_H
#define VRAMLEDGER_CACHING_H
#include <stdbool.h>
#include <stddef.h>
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
/*! Two 64-bit hashes of everything the allocator's next calls depend on:
 * its segments in the order made, their blocks in address order (a live
 * block's handle and requested bytes, a wholly free segment's rank by when
 * it was freed), the next segment's address. Equal digests: the same calls
 * take the same blocks (the free trees' shape, which differs, decides no
 * block). */
void vl_cache_digest(const struct vl_cache *c, uint64_t out[2]);
/*! Count the event counters' growth since `since` `times` more (a cycle of
 * calls from a state its end returns to, run once and not repeated). */
void vl_cache_repeat(struct vl_cache *c, const struct vl_cache_stats *since, uint64_t times);
/*! The device addresses the driver gave the allocator's segments, in the
 * order it made them (an allocator history's segment_alloc events): among
 * free blocks of one size the allocator takes the lowest address, so the
 * driver's order decides ties. New segments take these addresses while
 * their sizes agree with the plan; from the first that does not, they are
 * numbered above all of them, as without a plan. Copied.
 * @return VL_OK, VL_ENOMEM. */
vl_status vl_cache_segment_addresses(struct vl_cache *c, const uint64_t *addr, const uint64_t *size,
                                     size_t n) VL_MUST_USE;
void vl_cache_stats(const struct vl_cache *c, struct vl_cache_stats *s);
/* The allocator's state, as torch.cuda.memory_snapshot() gives it. */
struct vl_cache_block {
  uint64_t addr, size, requested; /* requested: what was asked for (0: free) */
  bool allocated;
};
struct vl_cache_segment {
  uint64_t addr, size;
  bool small; /* the small pool's (2 MiB segments) */
};
/*! Call seg() for every segment the allocator holds, in the order it made
 * them, then blk() for each of its blocks in address order. */
void vl_cache_walk(const struct vl_cache *c,
                   void (*seg)(void *ctx, const struct vl_cache_segment *),
                   void (*blk)(void *ctx, const struct vl_cache_block *), void *ctx);
/*! The device address of a live block (a handle from vl_cache_malloc). */
uint64_t vl_cache_block_addr(const struct vl_cache *c, uint32_t handle);
/*! Walk every segment and recompute allocated, reserved and inactive split
 * bytes, the free trees and the neighbour links; true when they agree with
 * the counters (for tests and fuzzing). */
bool vl_cache_check(const struct vl_cache *c);

/* The allocator's size rules (c10/cuda/CUDACachingAllocator.cpp). */
uint64_t vl_cache_round(uint64_t size);       /* a block: 512 B multiples */
uint64_t vl_cache_segment_for(uint64_t size); /* a new segment for a rounded request */

/* ---- replay of an allocation trace (python/vramledger/tracer.py) ---- */

enum vl_trace_kind { VL_TR_ALLOC, VL_TR_FREE, VL_TR_MARK, VL_TR_EMPTY /* empty_cache() */ };
struct vl_trace_ev {
  uint8_t kind;
  uint8_t device;  /* 0 cpu, 1 cuda, 2 meta, 3 other */
  uint8_t batch;   /* an allocation that grows with the batch ("b" lines) */
  uint32_t id;     /* dense, from 1; a mark: its index in marks */
  uint32_t module; /* index in modules; 0: not known */
  uint32_t at;     /* "file:line" that asked for it, index in modules; 0: not known */
  uint32_t dtype;  /* its dtype, index in modules; 0: not known */
  uint64_t bytes;
};

struct vl_trace {
  struct vl_trace_ev *ev;
  size_t n;
  uint32_t max_id;
  char (*marks)[64];
  size_t n_marks;
  char (*modules)[96]; /* [0] is ""; also the "at=" and "dtype=" strings */
  size_t n_modules;
  uint32_t *module_index; /* open addressing over modules, for parsing */
  size_t index_cap;
  size_t per_device[4];  /* allocations per device */
  uint64_t batch;        /* the traced job's micro-batch ("# batch N"); 0: not known */
  uint64_t convolutions; /* "# convolutions N": the job's convolutions (cuDNN's workspaces on
                            CUDA, which no trace holds); 0: none said */
  uint64_t *seg_addr, *seg_size; /* "s ADDR SIZE": the driver's segments, in order */
  size_t n_segs;
  size_t cut_last_line; /* bytes of a last line left out as cut short (see below); 0: none */
};

/*! Parse a trace ("a ID BYTES DEVICE [MODULE] [dtype=T] [at=FILE:LINE]", "b ..." the same for an
 * allocation that grows with the batch, "f ID", "m NAME", "# ..." comments,
 * "# batch N" the job's micro-batch, "# convolutions N" how many
 * convolutions it ran, "s ADDR SIZE" a segment the driver
 * gave the allocator, from an allocator history). Every line ends with a
 * newline; a last line without one (a job that died writing it) is kept
 * when it is a whole event, and otherwise left out, its length in
 * t->cut_last_line: when it is no whole event, or when a field that
 * changes the replay may have lost its end (an allocation's device not
 * cpu, cuda or meta; "s ADDR SIZE"; "# batch N"). A free whose id lost
 * digits frees another block, or none: the end's counts change, never a peak.
 * A trace of no events parses (t->n == 0): whether that is an error is the
 * caller's to say. The caller releases *t with vl_trace_release after
 * VL_OK; on failure *t holds nothing.
 * @return VL_OK, VL_EPARSE ("line N: ..."), VL_ENOMEM. */
vl_status vl_trace_parse(const char *text, size_t len, struct vl_trace *t,
                         struct vl_err *err) VL_MUST_USE;
void vl_trace_release(struct vl_trace *t);

struct vl_replay {
  struct vl_cache_stats end; /* the allocator after the last event */
  uint64_t peak_allocated, peak_reserved;
  uint64_t inactive_split_at_peak; /* at the allocated peak */
  size_t peak_event;               /* index of the event of the allocated peak */
  long peak_mark;                  /* the last mark before it, or -1 */
  uint32_t peak_module;            /* the module that made the peak's allocation (0: unknown) */
  uint32_t peak_at, peak_dtype;    /* its source line and dtype (0: unknown) */
  size_t allocs, frees, skipped;
  bool from_mark_seen; /* vl_trace_replay_from: its mark was reached (the peaks are from there) */
  bool oom;            /* the device ran out; stopped there */
  size_t oom_event;    /* the event that ran out */
};

/*! Replay the allocations on `device` (0 cpu, 1 cuda, 2 meta; -1: cuda if
 * the trace has any, else meta if it has any, else every device) through
 * the allocator model.
 * @return VL_OK, VL_ENOMEM, VL_EINVAL (a bad configuration). */
vl_status vl_trace_replay(const struct vl_trace *t, int device, const struct vl_cache_conf *conf,
                          struct vl_replay *out) VL_MUST_USE;
/*! The same with the allocations that grow with the batch scaled by
 * `scale` (another batch / the traced one; sizes rounded up to bytes):
 * the trace of a job at another batch size, without running it.
 * @return as vl_trace_replay; VL_EINVAL for a scale that is not > 0. */
vl_status vl_trace_replay_scaled(const struct vl_trace *t, int device,
                                 const struct vl_cache_conf *conf, double scale,
                                 struct vl_replay *out) VL_MUST_USE;
/*! The same with the peaks counted from the first occurrence of mark
 * `from_mark` (an index in t->marks; -1: from the start), as a job that
 * calls torch.cuda.reset_peak_memory_stats() there measures them: what
 * is live and cached then stays, the peaks start from it.
 * @return as vl_trace_replay_scaled. */
vl_status vl_trace_replay_from(const struct vl_trace *t, int device,
                               const struct vl_cache_conf *conf, double scale, long from_mark,
                               struct vl_replay *out) VL_MUST_USE;
/*! The index in t->marks of the first mark named `name`, or -1. */
long vl_trace_find_mark(const struct vl_trace *t, const char *name);

/* What is live at one event of a replay, grouped (vl_trace_live_at). */
struct vl_live_group {
  uint32_t key; /* by mark: the mark before the allocation + 1 (0: before any); by module: its index
                   in t->modules (0: not known) */
  uint64_t bytes; /* requests rounded to the allocator's 512 B */
  size_t allocations;
};
struct vl_live_at {
  struct vl_live_group *by_mark, *by_module; /* each sorted by bytes, the largest first */
  size_t n_mark, n_module;
  uint64_t bytes; /* all of it */
};
/*! What is live just after event `upto` of the replay vl_trace_replay_from
 * makes on `device` (chosen as it chooses; batch allocations scaled by
 * `scale`): each live allocation once, grouped by the mark before it was
 * made (what each phase of each step made and still holds: the
 * parameters before the first mark, an optimizer's states in its first
 * step, ...) and by the module that made it. Release with
 * vl_trace_live_release. @return VL_OK, VL_ENOMEM, VL_EINVAL (a bad scale). */
vl_status vl_trace_live_at(const struct vl_trace *t, int device, double scale, size_t upto,
                           struct vl_live_at *out) VL_MUST_USE;
void vl_trace_live_release(struct vl_live_at *l);

/* The allocator's state at one event of a replay, and the allocator's
 * events that led there: what torch.cuda.memory._snapshot() holds (a
 * memory_viz file: lib/render/snapshot.c writes it). */
struct vl_snap_segment {
  uint64_t addr, size, allocated, requested;
  bool small;
  size_t first, n; /* its blocks: blocks[first .. first + n) */
};
/* The actions of torch/csrc/cuda/memory_snapshot.cpp's trace entries
 * (c10/cuda/CUDACachingAllocator.h TraceEntry::Action) a replay makes. */
enum vl_snap_action {
  VL_SNAP_ALLOC,          /* "alloc": a block handed out */
  VL_SNAP_FREE_REQUESTED, /* "free_requested": the tensor let it go */
  VL_SNAP_FREE_COMPLETED, /* "free_completed": the block is free to reuse (one stream: at once) */
  VL_SNAP_SEGMENT_ALLOC,  /* "segment_alloc": a cudaMalloc */
  VL_SNAP_SEGMENT_FREE,   /* "segment_free": a cudaFree */
  VL_SNAP_SEGMENT_MAP,    /* "segment_map": expandable segments, pages mapped */
  VL_SNAP_SEGMENT_UNMAP,  /* "segment_unmap": pages unmapped */
  VL_SNAP_OOM             /* "oom": size could not be had; addr is the device's free bytes */
};
#define VL_SNAP_NO_EVENT SIZE_MAX
struct vl_snap_event {
  uint8_t action; /* enum vl_snap_action */
  uint64_t addr, size;
  size_t at;    /* the trace's event (t->ev[at]) that led to it: its time */
  size_t frame; /* the allocation it is about (for a free, the block's own): its module and
                   source line */
};
struct vl_snapshot {
  struct vl_snap_segment *segs;
  size_t n_segs;
  struct vl_cache_block *blocks;
  size_t *block_at; /* per block: the trace event that allocated it (live ones), else
                       VL_SNAP_NO_EVENT */
  size_t n_blocks;
  struct vl_snap_event *ev;
  size_t n_ev;
  const struct vl_trace *trace; /* the trace replayed (borrowed): its modules name the frames */
};
/*! Replay the allocations on `device` (as vl_trace_replay_from chooses
 * it; batch allocations scaled) through event `upto` and take the
 * allocator's state there. Release with vl_snapshot_release.
 * @return VL_OK, VL_ENOMEM, VL_EINVAL (a bad scale or configuration),
 * VL_ERANGE (the device ran out before `upto`: the state is at that event). */
vl_status vl_trace_snapshot(const struct vl_trace *t, int device, const struct vl_cache_conf *conf,
                            double scale, size_t upto, struct vl_snapshot *out) VL_MUST_USE;
void vl_snapshot_release(struct vl_snapshot *s);

#endif
