/* vramledger: the sampler of `vramledger run`.
 *
 * While the job runs, the sampler reads the interposer's counters
 * (vramledger/counters.h) at every tick and NVML when a reading is due,
 * appends one "sample" event a tick to the run record (vramledger/record.h),
 * and reaps the job when it exits. The commitment's triggers are the
 * caller's: the sampler calls its hooks and never prints. Linux: the job's
 * process tree is read from /proc.
 *
 * The processes the job starts may outlive it (a launcher that starts the
 * training process in the background and exits, a daemon reparented when
 * its parent dies). When the caller is the job's child subreaper
 * (prctl(2) PR_SET_CHILD_SUBREAPER, Linux 3.4), those orphans become its
 * children and stay in the job's tree: the sampler attributes their memory
 * to the job, reaps them, and at the job's exit goes on sampling until the
 * last of them ends, a pidfd each (Linux 5.3) ending its sleep when one
 * does. */
#ifndef VRAMLEDGER_SAMPLER_H
#define VRAMLEDGER_SAMPLER_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vramledger/counters.h"
#include "vramledger/status.h"

struct vl_counters;
struct vl_nvml;

/*! CLOCK_MONOTONIC now, in ns: the record's clock. */
uint64_t vl_monotonic_ns(void);

/* ---- the record as vramledger writes it ---- */

/* One line, newline included, goes out in one write(): whole lines beside
 * the interposer's and the probe's. Sample lines wait in the buffer and go
 * out together (one write instead of one a tick: in a profile on the
 * development machine the writes were a sixth of the sampler's time; no
 * gain measured yet, bench/results/speed/README.md#sampler-cost). Each
 * line stays whole; the record's other writers (the interposer, the probe)
 * may land between batches, so lines of different writers are up to
 * VL_SAMPLE_FLUSH_NS out of time order (readers go by t_ns); a kill -9 of
 * vramledger loses at most that much of its samples. */
#define VL_SAMPLE_FLUSH_NS 100000000ull
/* A write that fails (ENOSPC, EIO, EFBIG under `ulimit -f`) loses the
 * lines it did not write whole (those of a batch before a short write's
 * end stand): the next write that goes out starts with a newline when a
 * line of ours was cut (a cut line is never fused with the next), then a
 * "gap" line saying how many bytes were lost and why (docs/record.md). The
 * writer is its file's only one (the job's processes write their own
 * streams). */
struct vl_record_writer {
  int fd;              /* the record, opened O_WRONLY | O_APPEND by the caller, who closes it */
  uint64_t lost_bytes; /* lost in all: the caller says so once */
  uint64_t gap_bytes;  /* lost since the last "gap" line went out */
  int err;             /* the last failed write's errno */
  bool cut;            /* part of a line of ours went out last */
  size_t sample_len;
  char sample_buf[1 << 16];
};

/*! Write one event: json, one JSON object without its newline, as one line
 * in one write(), after the samples waiting (vramledger's own lines stay in
 * order). json may be NULL (rendering it failed): the samples still go out.
 * @return VL_OK; VL_ENOMEM (json NULL, or no memory for the line); VL_EIO
 * (the write failed or was short). The message is strerror's words. */
vl_status vl_record_writer_put(struct vl_record_writer *w, const char *json,
                               struct vl_err *err) VL_MUST_USE;
/*! Write the sample lines waiting, in one write(). */
void vl_record_writer_flush(struct vl_record_writer *w);

/* ---- the sampler ---- */

/* What the sampler asks of its caller for the commitment's triggers: the
 * actions of a trigger (its event into the record, the fallback file, a
 * message, a signal to the job) and the throughput watch. Each fires at most
 * once a run; a NULL hook is not called. */
struct vl_sampler_hooks {
  void *ctx;
  /* the job holds bytes on one GPU, over guard_bytes, at t_ns */
  void (*peak_over)(void *ctx, uint64_t t_ns, uint64_t bytes);
  /* the job's tokens/s now into *tps (0: not known yet); false when there
   * is no throughput watch (nothing to read) */
  bool (*poll_tokens_per_s)(void *ctx, double *tps);
  /* the job's tokens/s, tps, under tput_floor at t_ns */
  void (*tput_under)(void *ctx, uint64_t t_ns, double tps);
  /* The processes the job left that run now: total, the first n (at most
   * VL_SAMPLER_LEFT_MAX) in pids. found: to be said — the job exited at
   * t_ns and they still ran 100 ms later (at once with no_wait), or, once
   * those ended, processes they started were found still running. Not
   * found: the list changed (at the job's exit, or some ended; n may be
   * 0). */
  void (*left)(void *ctx, uint64_t t_ns, const pid_t *pids, unsigned n, unsigned total, bool found);
  /* a child of this process other than the job was reaped (an orphan of
   * the job, or keep_out) */
  void (*reaped)(void *ctx, pid_t pid);
};

/* What NVML said at its last reading, put into every sample until the
 * next: per GPU its used bytes and the job's, the job's processes, the
 * job's total, other processes' total, the job on its fullest GPU. */
struct vl_sampler_nvml {
  char *gpus, *procs; /* their JSON arrays, rendered once a reading */
  uint64_t tree, other, gpu_max;
  unsigned tree_procs;
  uint64_t t_ns;    /* when read; 0: never */
  uint64_t high;    /* the most the counters showed at a reading */
  uint64_t reads;   /* readings so far */
  uint64_t cpu_ns;  /* the CPU time they took */
  uint64_t cost_ns; /* one reading's, a moving average */
};

/* pid -> member of the job's tree; cached, as NVML lists the same pids at
 * every tick. */
#define VL_SAMPLER_TREE_CACHE 1024
struct vl_sampler_pid {
  pid_t pid;
  bool member;
};

/* The processes the job left that are watched at once (a pidfd each);
 * more are found in /proc when these have ended. */
#define VL_SAMPLER_LEFT_MAX 256

/* The sampling loop's inputs and what it found. Zero it, set the inputs,
 * then vl_sampler_run, vl_sampler_finish, vl_sampler_put_exit. The
 * caller owns what the inputs point to. */
struct vl_sampler {
  /* in */
  pid_t pid;                           /* the job: a child of this process */
  volatile sig_atomic_t *child_exited; /* set by the caller's SIGCHLD handler */
  struct vl_record_writer *out;        /* the record */
  struct vl_counters *ctr;             /* the interposer's counters, or NULL */
  struct vl_nvml *nv;                  /* or NULL */
  const unsigned *vis;                 /* the NVML indices the job may use */
  unsigned n_vis;
  bool blind; /* no interposer: NVML is all there is */
  unsigned interval_ms;
  uint64_t start_ns;                /* the run's start, vl_monotonic_ns */
  uint64_t guard_bytes;             /* the commitment's peak trigger, 0: none */
  double tput_floor;                /* its throughput trigger (tokens/s), 0: none */
  bool subreaper;                   /* this process is the job's child subreaper: its
                                     * descendants (but keep_out's) are the job's */
  pid_t keep_out;                   /* a child of this process outside the job, or 0 */
  bool no_wait;                     /* stop at the job's exit, leaving what it started */
  volatile sig_atomic_t *stop_wait; /* set by the caller: stop waiting for
                                     * what the job left; or NULL */
  const sigset_t *wake;             /* the signals whose handlers set child_exited and
                                     * stop_wait: blocked but in the sampler's sleeps
                                     * (one that comes just before a sleep ends it at
                                     * once), or NULL */
  struct vl_sampler_hooks hooks;
  /* out */
  int status;                                                     /* waitpid's */
  uint64_t slot_peak, peak_tree, peak_t, peak_alloc, ctx_at_peak; /* bytes; peak_t ns */
  unsigned peak_procs;
  uint64_t n_samples;
  uint64_t n_wakes;                      /* the loop's iterations: a sample each, or a batch */
  unsigned ctr_end;                      /* vl_counters_scan's end */
  uint64_t loop_cpu0, loop_t0, loop_end; /* ns */
  struct vl_sampler_nvml nvv;
  /* the samples made from the interposer's millisecond rings (interval_ms
   * under VL_SAMPLER_BATCH_BELOW_MS): the next millisecond to read, the
   * next sample's (the end of its millisecond), the most since the last
   * sample, and per slot the pid and live bytes at ms_done */
  uint64_t ms_done, ms_next, ms_hi;
  uint32_t ms_pid[VL_COUNTERS_SLOTS];
  uint64_t ms_live[VL_COUNTERS_SLOTS];
  bool ms_lost_said; /* the note that a ring was overrun went out */
  /* the job's process tree, as read from /proc */
  struct vl_sampler_pid tree[VL_SAMPLER_TREE_CACHE];
  unsigned tree_n;
  /* what the job left: the processes found at its exit (and later) */
  uint64_t job_end_ns;              /* when the job was reaped; 0: not yet */
  unsigned left_seen;               /* said (found) in all, 0: none */
  unsigned left_total;              /* running at the end (the last look), or found */
  bool left_stopped;                /* the wait ended by stop_wait */
  pid_t left[VL_SAMPLER_LEFT_MAX];  /* those watched (at the end: running) */
  int left_fd[VL_SAMPLER_LEFT_MAX]; /* their pidfds, -1: none */
  unsigned left_n;
  bool left_ready; /* a pidfd said its process ended */
  pid_t self;
};

/*! Live driver-allocated bytes of the job's processes in the counters;
 * *peak raised to the highest slot peak. With reap, a process that exited
 * (its allocations went with it: the driver frees them) no longer counts and
 * its slot is handed back for the next process once its peak is kept.
 * *ops (if not NULL): the live processes' allocations and frees so far. */
uint64_t vl_counters_read(struct vl_counters *c, uint64_t *peak, bool reap, uint64_t *ops);

/*! vl_counters_read over the slots that were ever taken: *end (0 at the
 * start of a run, then kept by the caller) is one past the last slot seen
 * taken, and the scan goes on past it only while the slots are taken. A
 * process takes the lowest free slot and only the reader frees one
 * (vramledger/counters.h), so the first slot at or past *end found free
 * has none taken after it: a job of a few processes costs a few slots a
 * read instead of VL_COUNTERS_SLOTS. */
uint64_t vl_counters_scan(struct vl_counters *c, unsigned *end, uint64_t *peak, bool reap,
                          uint64_t *ops);

/* Below this interval, with the interposer's rings (ring_ms in the
 * counters), the sampler wakes every VL_SAMPLER_WAKE_MS and writes the
 * samples of the milliseconds that passed from the rings (docs/record.md):
 * a timer wake-up alone costs 10.4-11.0 us on the H200 host at 1 kHz
 * (bench/speed/tick_floor.c, bench/results/run-interposer/README.md#sampler-cost), 1.1 % of a
 * core, over the whole 1 % budget. On the development machine a wake-up
 * with its work costs ~100 us at 10 ms apart: 1 kHz batched was 0.86-1.04 %
 * of a core waking every 10 ms, 0.50-0.56 % every 20 ms
 * (bench/results/speed/README.md#sampler-cost); the flush is every 100 ms
 * regardless, and the rings hold 512 ms. */
#define VL_SAMPLER_BATCH_BELOW_MS 10u
#define VL_SAMPLER_WAKE_MS 20u

/*! Sample every interval_ms until the job exits (one last sample then),
 * and reap it (s->status): the counters every tick, NVML when a reading is
 * due, the triggers' hooks, the peaks. Every child of this process that
 * ends is reaped (waitpid(-1)): the job, and with subreaper the orphans it
 * leaves. With subreaper, when the job exits while processes it started
 * run on, the hook left is told and, unless no_wait, sampling goes on
 * until the last of them ends or *stop_wait is set (s->left_stopped);
 * s->left then holds those still running. A sample line that cannot be
 * formatted (no memory) is left out; nothing else fails. */
void vl_sampler_run(struct vl_sampler *s);

/*! After vl_sampler_run: the counters' own peaks, exact where the samples
 * may fall between them, into peak_alloc; NVML's last reading freed. */
void vl_sampler_finish(struct vl_sampler *s);

/*! The exit event: the job's exit code (code) and signal, how many
 * processes it left still ran when the record closed (descendants_left,
 * only when it left some), and what watching cost (this process's CPU time, not the job's: all of
 * it, NVML's start included, and the sampling loop's alone). @return as vl_record_writer_put. */
vl_status vl_sampler_put_exit(const struct vl_sampler *s, int code, struct vl_err *err) VL_MUST_USE;

#endif
