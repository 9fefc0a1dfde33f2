/* The runtime guard's throughput watch (run --commitment): the probe's
 * step events read back from the record as the job writes them. */
#ifndef VRAMLEDGER_GUARD_H
#define VRAMLEDGER_GUARD_H
#include <stdbool.h>
#include <stddef.h>

#define GUARD_WINDOW 8    /* steady steps in the median */
#define GUARD_WARMUP 3    /* the first steps of a process are not steady */
#define GUARD_MIN_STEPS 5 /* steady steps before the trigger may fire */

struct tput_watch {
  int fd;
  char buf[1 << 16];
  size_t len;
  size_t scanned;            /* of buf[0..len), the bytes known to hold no newline */
  double rate[GUARD_WINDOW]; /* tokens/s of the last steady steps (rank 0's) */
  size_t n, at;
  size_t seen_steady;
  unsigned pids[64]; /* processes seen stepping: the job's rate = rank 0's x ranks */
  size_t npids;
};

/*! Start reading the record at path from its current end. @return 0 or -1. */
int tput_open(struct tput_watch *w, const char *path);
/*! Read what was appended; *job_tps: the job's median tokens/s over the
 * window once GUARD_MIN_STEPS steady steps were seen, else 0. */
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
