/* The runtime guard's throughput watch (run --commitment): the probe's
 * step events read from its streams as the job's processes write them. */
#ifndef VRAMLEDGER_GUARD_H
#define VRAMLEDGER_GUARD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUARD_WINDOW 8    /* steady steps in the median */
#define GUARD_WARMUP 3    /* the first steps of a process are not steady */
#define GUARD_MIN_STEPS 5 /* steady steps before the trigger may fire */

#define GUARD_STREAMS 64           /* the probe's streams read (one a process) */
#define GUARD_LIST_NS 250000000ull /* the streams folder listed again at most this often */

/* A probe stream read as it grows: its descriptor, and the bytes after its
 * last whole line (the watch's buffer's size). */
struct tput_stream {
  int fd;
  char name[48];
  size_t rest_len;
  char rest[1 << 16];
};

struct tput_watch {
  char dir[4096]; /* the record's streams folder; "": none */
  struct tput_stream *streams[GUARD_STREAMS];
  size_t n_streams;
  uint64_t listed_ns; /* when the folder was last listed (CLOCK_MONOTONIC) */
  char buf[1 << 16];
  size_t len;
  size_t scanned;            /* of buf[0..len), the bytes known to hold no newline */
  double rate[GUARD_WINDOW]; /* tokens/s of the last steady steps (rank 0's) */
  size_t n, at;
  size_t seen_steady;
  unsigned pids[64]; /* processes seen stepping: the job's rate = rank 0's x ranks */
  size_t npids;
};

/*! Read the probe's streams (probe.PID.jsonl) in the record's streams
 * folder dir (docs/record.md, "Streams") as the job's processes write
 * them, each from its start. */
void tput_open(struct tput_watch *w, const char *dir);
/*! Read what was appended (the folder listed again for new processes'
 * streams every GUARD_LIST_NS); *job_tps: the job's median tokens/s over
 * the window once GUARD_MIN_STEPS steady steps were seen, else 0. */
void tput_poll(struct tput_watch *w, double *job_tps);
void tput_close(struct tput_watch *w);
/*! What tput_poll does with the bytes it reads, for bytes from elsewhere
 * (w zeroed, no file): the step lines of data[0..n) read, a partial last
 * line kept for the next call. */
void tput_feed(struct tput_watch *w, const char *data, size_t n);
/*! The job's median tokens/s over the window once GUARD_MIN_STEPS steady
 * steps were seen, else 0. */
double tput_rate(const struct tput_watch *w);

#endif
