/* vramledger: the run record (schema vramledger.run/2; /1 read too).
 *
 * JSON Lines, one event per line, every event stamped with CLOCK_MONOTONIC
 * nanoseconds (one clock for the sampler, the interposer and the probe).
 * The record's own file (record.jsonl) has one writer, `run`; each process
 * of the job writes its own stream in the record's streams folder
 * (record.d/interposer.PID.jsonl, record.d/probe.PID.jsonl), so no writer
 * can cut another's lines; readers merge them by t_ns. Each writer appends
 * whole lines with single write() calls, so a crash leaves every line
 * before its last intact. Fields: lib/measure/record_schema.def. Event
 * types:
 *   meta   the command, host, GPUs, driver, sampling interval (first line)
 *   sample NVML per GPU, the job's process tree, the interposer's counters
 *   alloc  an interposed process's live/peak driver-allocated bytes
 *   mark   a phase stamp (vl_mark, the probe)
 *   note   something the reader should know (no NVML, ...)
 *   gap    bytes lost to writes that failed (the line before may be cut)
 *   lost   what the interposer could not count (slots, table)
 *   probe, device, phase, step, oom   the PyTorch probe (probe.py)
 *   descendants  processes the command left running when it exited
 *   exit   the command's status
 * Every event and field: docs/record.md.
 * Readers skip event types they do not know (forward compatible) and
 * refuse another major schema. */
#ifndef VRAMLEDGER_RECORD_H
#define VRAMLEDGER_RECORD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramledger/run_hw.h"
#include "vramledger/status.h"

/* what `run` writes: its lines in the record's own file and one stream a
 * writer (docs/record.md, "Streams"); readers read /1 too (one file) */
#define VL_RECORD_SCHEMA "vramledger.run/2"
#define VL_RECORD_SCHEMA_1 "vramledger.run/1"
#define VL_RECORD_MAX_GPUS 16

struct vl_rec_gpu {
  unsigned index;
  char name[96];
  char uuid[96];
  uint64_t total_bytes;
};

struct vl_rec_sample {
  uint64_t t_ns;
  uint64_t tree_bytes;                   /* NVML: the job's processes, all GPUs */
  uint64_t other_bytes;                  /* NVML: processes outside the job on its GPUs */
  uint64_t cuda_alloc_bytes;             /* interposer: live driver allocations of the job */
  uint64_t cuda_alloc_max_bytes;         /* the most of those since the last sample, at least
                                          * cuda_alloc_bytes (a line without the member) */
  unsigned tree_procs;                   /* processes of the job holding GPU memory */
  uint64_t gpu_used[VL_RECORD_MAX_GPUS]; /* device used memory */
  uint64_t gpu_tree[VL_RECORD_MAX_GPUS]; /* the job's bytes per GPU */
};

struct vl_rec_mark {
  uint64_t t_ns;
  unsigned pid;
  char name[64];
};

/* ---- the framework layer (python/vramledger/probe.py) ---- */

/* The bill's parts as the probe counts them (bytes, by storage). */
enum vl_bill_part {
  VL_BILL_PARAMETERS,
  VL_BILL_GRADIENTS,
  VL_BILL_OPTIMIZER_STATES,
  VL_BILL_ACTIVATIONS, /* saved for backward, still held by a graph */
  VL_BILL_AUTOCAST,    /* autocast's cached low-precision weights, saved */
  VL_BILL_OUTPUTS,     /* tensors a top-level forward returned, while alive */
  VL_BILL_COMM,        /* DDP's gradient buckets (communication buffers) */
  VL_BILL_N
};
extern const char *const vl_bill_part_names[VL_BILL_N]; /* JSON keys */

/* One phase interval of a step: forward, loss, backward, pre_step,
 * optimizer, idle, eval. Counters at its end, peaks inside it (sampled
 * steps); a step not sampled gives its intervals' times only. */
struct vl_rec_phase {
  uint64_t t0_ns, t_ns;
  unsigned pid, rank, step;
  char phase[16];
  bool has_alloc; /* the CUDA caching allocator's counters are present */
  uint64_t allocated, reserved, active, inactive_split, peak_allocated, peak_reserved;
  bool has_requested;           /* PyTorch >= 2.1 counts the bytes asked for */
  uint64_t requested;           /* sum of the live allocations' requested sizes */
  uint64_t alloc_retries, ooms; /* cumulative */
  bool has_bill, acts_known;    /* acts_known: false under torch.compile */
  uint64_t bill[VL_BILL_N];     /* at the interval's end */
};

#define VL_REC_TOP_MODULES 10
#define VL_REC_MAX_LIBS 16
struct vl_rec_module {
  char name[96];
  uint64_t saved_bytes;
};

struct vl_rec_step {
  uint64_t t_ns, time_ns, tokens, samples, probe_ns;
  bool has_end; /* allocated/reserved after the step */
  uint64_t allocated, reserved;
  unsigned pid, rank, step, micro_batches;
  bool sampled, has_peak;
  uint64_t peak_allocated, peak_reserved;
  char peak_phase[16];
  unsigned n_modules;
  struct vl_rec_module modules[VL_REC_TOP_MODULES];
};

struct vl_rec_oom {
  uint64_t t_ns, request_bytes, device_allocated_bytes, device_free_bytes;
  unsigned pid, rank, step;
  char phase[16];
  bool has_bill;
  uint64_t bill[VL_BILL_N];
  char snapshot[256];
};

#define VL_REC_MAX_PROBES 64
#define VL_REC_MAX_DESC_PIDS 16
struct vl_rec_probe {
  unsigned pid, rank, local_rank, world_size, sample_every;
  char torch[32];
  bool cuda;
  /* from the "device" event, once CUDA is in use */
  char device_name[96];
  char capability[8];
  uint64_t cublas_workspace_bytes;
};

struct vl_record {
  /* meta */
  char schema[32];
  char host[64];
  char command[512]; /* argv joined by spaces, for display */
  char driver[64];
  char nvml[160]; /* "ok" or why not */
  uint64_t start_ns, start_unix_ms, interval_ms;
  unsigned n_gpus;
  struct vl_rec_gpu gpus[VL_RECORD_MAX_GPUS];
  /* events */
  struct vl_rec_sample *samples;
  size_t n_samples;
  struct vl_rec_mark *marks;
  size_t n_marks;
  struct vl_rec_phase *phases;
  size_t n_phases;
  struct vl_rec_step *steps;
  size_t n_steps;
  struct vl_rec_oom *ooms;
  size_t n_ooms;
  struct vl_rec_probe probes[VL_REC_MAX_PROBES]; /* one per process with the probe */
  unsigned n_probes;
  char probe_note[256];      /* why a probe stopped, when one did */
  uint64_t alloc_peak_bytes; /* max over alloc events of the sum of live per pid */
  unsigned alloc_pids;
  /* the interposer's live bytes by the library that asked for them (alloc
   * events' "libs"): the most each held at once, all processes summed */
  struct vl_rec_lib {
    char name[48];
    uint64_t peak;
  } alloc_libs[VL_REC_MAX_LIBS];
  unsigned n_alloc_libs;
  /* exit */
  bool exited;
  int exit_status; /* as a shell reports it: code, or 128 + signal */
  uint64_t end_ns;
  bool truncated; /* the last line was cut (a crash mid-write) */
  unsigned gaps;  /* "gap" lines: writes that failed (ENOSPC, EFBIG, EIO) */
  uint64_t gap_bytes;
  bool disk_full;        /* a gap line's error was a full disk (ENOSPC, EDQUOT) */
  uint64_t exit_samples; /* exit's "samples": those the sampler made, 0: not said */
  /* lines that were no JSON object (not UTF-8, not JSON: a writer's bug, a
   * stray write) with no gap line after them: skipped and counted, the
   * first one's number and what was wrong with it */
  unsigned damaged;
  size_t damaged_line;
  char damaged_why[96];
  char damaged_file[64]; /* its stream ("record.d/probe.7.jsonl"); "": the record's own file */
  /* the "lost" event: what the interposer could not count */
  unsigned lost_no_slot_procs; /* processes that allocated with every counter slot taken */
  unsigned lost_slots;         /* the slots there were */
  uint64_t lost_uncounted;     /* allocations a full pointer table left out */
  /* "descendants" events: processes the command started that ran on after
   * it exited (run is their subreaper; docs/record.md) */
  unsigned desc_events;                     /* descendants lines; 0: none */
  unsigned desc_procs;                      /* the processes they name, summed */
  uint64_t desc_t_ns;                       /* the first line's: when the command exited */
  bool desc_waited;                         /* the last line's: run sampled until they ended */
  unsigned n_desc_pids;                     /* of desc_pids */
  unsigned desc_pids[VL_REC_MAX_DESC_PIDS]; /* the first of their PIDs */
  unsigned desc_left; /* exit's descendants_left: still running when the record closed */
  size_t lines;
  /* events with a measured value past the card's memory (meta's GPUs, as
   * NVML states them): damaged data, skipped; the first one named */
  unsigned implausible;
  size_t implausible_line;
  char implausible_what[192];
  char implausible_file[64]; /* its stream, as damaged_file */
};

/*! Parse a record held in text[0..len). A cut last line is tolerated
 * (truncated = true); any other line that is no JSON object is skipped and
 * counted (damaged, damaged_line: docs/record.md), unless it is the first
 * (the meta line): an error naming it.
 * Release with vl_record_release(). @return VL_OK, VL_EPARSE ("line N: ..."),
 * VL_EKEY (wrong schema, missing meta), VL_ENOMEM. */
vl_status vl_record_parse(const char *text, size_t len, struct vl_record *rec,
                          struct vl_err *err) VL_MUST_USE;
/*! Read the record at path, streamed (its size is not limited; each line
 * is, to VL_RECORD_MAX_LINE bytes). As vl_record_parse, and VL_EIO (the
 * file cannot be read: why in err), VL_ERANGE (a line over the limit). */
#define VL_RECORD_MAX_LINE (64u << 20)
vl_status vl_record_read(const char *path, struct vl_record *rec, struct vl_err *err) VL_MUST_USE;
void vl_record_release(struct vl_record *rec);
/*! The streams folder of the record at path (docs/record.md, "Streams"):
 * path without its ".jsonl", and ".d" ("run/record.jsonl" ->
 * "run/record.d"), into dir[0..n). vl_record_read merges the "*.jsonl"
 * files there with the record's own file. */
void vl_record_streams_dir(const char *path, char *dir, size_t n);

/* What the record says, ready for a report. */
struct vl_run_summary {
  uint64_t peak_process_bytes; /* max of tree_bytes */
  uint64_t peak_process_t_ns;  /* when, from the start */
  /* the most of the samples' cuda_alloc_max_bytes and of the alloc events'
   * sums (docs/record.md) */
  uint64_t peak_cuda_alloc_bytes;
  uint64_t context_bytes;    /* tree - cuda_alloc at the process peak */
  uint64_t peak_other_bytes; /* other processes on the job's GPUs */
  unsigned max_tree_procs;   /* processes of the job holding GPU memory at once */
  uint64_t duration_ns;
  double leak_bytes_per_s; /* rise of the memory's floor (0 when it does not rise) */
  double imbalance;        /* (max - min) / max of per-GPU peaks of the job */
  unsigned gpus_used;
  uint64_t peak_gpu_bytes; /* the job's largest per-GPU peak (NVML): what one card holds */
};

#define VL_MAX_FINDINGS 8
struct vl_finding {
  char code[32]; /* "leak", "imbalance", "extra-contexts", "no-nvml", ... */
  char text[256];
};

/*! Summarise a record and list findings (pure). */
void vl_record_summarize(const struct vl_record *rec, struct vl_run_summary *s,
                         struct vl_finding *findings, int *n_findings);

/*! The median time between consecutive stamps of `name`, seconds, into
 * *median_s (0 when fewer than two): a steady step time that start-up and
 * a slow first step do not move. @return VL_OK, or VL_ENOMEM (*median_s
 * 0 then: not "too few stamps", a failure the caller reports). */
vl_status vl_record_mark_median_s(const struct vl_record *rec, const char *name,
                                  double *median_s) VL_MUST_USE;

/*! The GPUs a record's job ran on (the meta event's list, narrowed to those
 * the samples show it holding memory on). count 0: the record names none
 * (no NVML on that machine). */
void vl_run_hw_read(const struct vl_record *rec, struct vl_run_hw *hw);

#endif
