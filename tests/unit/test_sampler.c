/* lib/measure/sampler.c: the counters scan, the decimal writer of the
 * sample lines, and the wait for the processes a job leaves. */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "util/internal.h"
#include "vramledger/counters.h"
#include "vramledger/sampler.h"

static void expect_dec(uint64_t v) {
  char want[32], got[32];
  int n = snprintf(want, sizeof want, "%llu", (unsigned long long)v);
  memset(got, 'x', sizeof got);
  size_t k = vl__u64_dec(got, v);
  assert_int_equal(k, (size_t)n);
  assert_memory_equal(got, want, k);
  assert_int_equal(got[k], 'x'); /* nothing written past the digits */
}

/* The PIDs of what a job left in words (run's notes, doctor's VL-D016):
 * the first eight, ", ..." when the caller knows of more, cut to fit */
static void pid_list_words(void **state) {
  (void)state;
  const unsigned p[10] = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  static const struct {
    size_t cap;
    unsigned n;
    bool more;
    const char *want;
  } cases[] = {
      {80, 0, true, ""},
      {80, 1, false, "PID 11"},
      {80, 1, true, "PIDs 11, ..."},
      {80, 3, false, "PIDs 11, 12, 13"},
      {80, 10, false, "PIDs 11, 12, 13, 14, 15, 16, 17, 18"},
      {80, 10, true, "PIDs 11, 12, 13, 14, 15, 16, 17, 18, ..."},
      {12, 3, true, "PIDs 11, 12"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char b[80];
    vl__pid_list(b, cases[i].cap, p, cases[i].n, cases[i].more);
    assert_string_equal(b, cases[i].want);
  }
}

/* As printf's "%llu" on the edges: every power of ten and its neighbours,
 * the type limits, and a spread of others. */
static void dec_as_printf(void **state) {
  (void)state;
  expect_dec(0);
  expect_dec(UINT32_MAX);
  expect_dec((uint64_t)UINT32_MAX + 1);
  expect_dec(INT64_MAX);
  expect_dec((uint64_t)INT64_MAX + 1);
  expect_dec(UINT64_MAX - 1);
  expect_dec(UINT64_MAX);
  uint64_t p = 1;
  for (int i = 0; i < 20; i++, p *= 10) {
    expect_dec(p - 1);
    expect_dec(p);
    expect_dec(p + 1);
  }
  uint64_t x = 88172645463325252ull; /* xorshift64 */
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    expect_dec(x >> (i % 64));
  }
}

static void take(struct vl_counters *c, unsigned i, pid_t pid, uint64_t live, uint64_t peak) {
  c->slot[i].pid = (uint32_t)pid;
  c->slot[i].live = live;
  c->slot[i].peak = peak;
  c->slot[i].allocs = 1;
}

/* a pid that no process has: a child's, reaped */
static pid_t gone_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return p;
}

/* The scan reads the slots up to the first never taken (processes take
 * the lowest free slot: counters.h), and as much as the full read there. */
static void scan_stops_at_never_taken(void **state) {
  (void)state;
  struct vl_counters *c = calloc(1, sizeof *c);
  assert_non_null(c);
  pid_t me = getpid();
  take(c, 0, me, 10, 20);
  take(c, 1, gone_pid(), 5, 7);
  unsigned end = 0;
  uint64_t peak = 0, ops = 0, full_peak = 0;
  assert_int_equal(vl_counters_scan(c, &end, &peak, false, &ops), 15);
  assert_int_equal(end, 2);
  assert_int_equal(peak, 20);
  assert_int_equal(ops, 2);
  assert_int_equal(vl_counters_read(c, &full_peak, false, NULL), 15);
  take(c, 2, me, 100, 100); /* taken after the last scan: seen */
  assert_int_equal(vl_counters_scan(c, &end, &peak, false, NULL), 115);
  assert_int_equal(end, 3);
  /* slot 1's process exited: freed, and the slots after it still read */
  assert_int_equal(vl_counters_scan(c, &end, &peak, true, NULL), 110);
  assert_int_equal(c->slot[1].pid, 0);
  assert_int_equal(end, 3);
  assert_int_equal(vl_counters_scan(c, &end, &peak, false, NULL), 110);
  /* a slot past one never taken is not looked at (no process takes it
   * while a lower one is free); the full read still sees it */
  take(c, 5, me, 1000, 1000);
  assert_int_equal(vl_counters_scan(c, &end, &peak, false, NULL), 110);
  assert_int_equal(end, 3);
  assert_int_equal(vl_counters_read(c, &full_peak, false, NULL), 1110);
  free(c);
}

/* ---- what a job leaves -------------------------------------------------- */

struct left_seen {
  unsigned found, changed, n;
  pid_t first;
  volatile sig_atomic_t *stop; /* set at the first found, when not NULL */
};

static void on_left(void *ctx, uint64_t t, const pid_t *pids, unsigned n, unsigned total,
                    bool found) {
  (void)t;
  struct left_seen *l = ctx;
  if (!found) {
    l->changed++;
    return;
  }
  if (!l->found++) {
    l->first = n ? pids[0] : 0;
    l->n = total;
  }
  if (l->stop) *l->stop = 1;
}

static uint64_t now_ms(void) { return vl_monotonic_ns() / 1000000; }

/* A job that exits with status 5 at once, leaving a child that lives
 * child_ms: its pid in *child. @return the job's pid. */
static pid_t leave_child(unsigned child_ms, pid_t *child) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t job = fork();
  assert_true(job >= 0);
  if (job == 0) {
    pid_t c = fork();
    if (c == 0) {
      struct timespec ts = {child_ms / 1000, (long)(child_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
      _exit(0);
    }
    if (write(p[1], &c, sizeof c) != sizeof c) _exit(1);
    _exit(5);
  }
  close(p[1]);
  assert_int_equal(read(p[0], child, sizeof *child), sizeof *child);
  close(p[0]);
  return job;
}

/* Sample the job until the sampler is done; @return the ms it took. */
static uint64_t sample_job(struct vl_sampler *s, pid_t job, struct left_seen *l) {
  static volatile sig_atomic_t exited;
  static struct vl_record_writer w;
  char path[] = "/tmp/vl-sampler-XXXXXX";
  w.fd = mkstemp(path);
  assert_true(w.fd >= 0);
  unlink(path);
  s->pid = job;
  s->child_exited = &exited;
  s->out = &w;
  s->interval_ms = 10;
  s->start_ns = vl_monotonic_ns();
  s->subreaper = true;
  s->hooks.ctx = l;
  s->hooks.left = on_left;
  uint64_t t0 = now_ms();
  vl_sampler_run(s);
  vl_sampler_finish(s);
  close(w.fd);
  return now_ms() - t0;
}

/* The job's child, reparented here (a subreaper), is waited for and reaped;
 * the status is the job's. */
static void waits_for_what_the_job_leaves(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  pid_t child;
  pid_t job = leave_child(400, &child);
  struct vl_sampler *s = calloc(1, sizeof *s);
  struct left_seen l = {0};
  uint64_t ms = sample_job(s, job, &l);
  assert_true(WIFEXITED(s->status) && WEXITSTATUS(s->status) == 5);
  assert_true(ms >= 350);
  assert_int_equal(l.found, 1);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.first, child);
  assert_true(l.changed >= 2); /* the list at the job's exit, and empty at the end */
  assert_int_equal(s->left_seen, 1);
  assert_int_equal(s->left_total, 0);
  assert_false(s->left_stopped);
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* reaped: no zombie */
  free(s);
}

/* no_wait: done at the job's exit, what it left named. The child lives
 * 60 s and is killed here: "not waited for" is done well before it, 15 s
 * at most however busy the machine. */
static void no_wait_stops_at_the_job_exit(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  pid_t child;
  pid_t job = leave_child(60000, &child);
  struct vl_sampler *s = calloc(1, sizeof *s);
  s->no_wait = true;
  struct left_seen l = {0};
  uint64_t ms = sample_job(s, job, &l);
  assert_true(WIFEXITED(s->status) && WEXITSTATUS(s->status) == 5);
  assert_true(ms < 15000);
  assert_int_equal(l.found, 1);
  assert_int_equal(s->left_total, 1);
  assert_int_equal(s->left_n, 1);
  assert_int_equal(s->left[0], child);
  kill(child, SIGKILL);
  assert_int_equal(waitpid(child, NULL, 0), child);
  free(s);
}

/* stop_wait ends the wait, and the sampler says what still runs (the
 * child of 60 s, as above). */
static void stop_wait_ends_the_wait(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  pid_t child;
  pid_t job = leave_child(60000, &child);
  static volatile sig_atomic_t stop;
  struct vl_sampler *s = calloc(1, sizeof *s);
  s->stop_wait = &stop;
  struct left_seen l = {.stop = &stop};
  uint64_t ms = sample_job(s, job, &l);
  assert_true(ms < 15000);
  assert_true(s->left_stopped);
  assert_int_equal(s->left_total, 1);
  assert_int_equal(s->left[0], child);
  kill(child, SIGKILL);
  assert_int_equal(waitpid(child, NULL, 0), child);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dec_as_printf),
      cmocka_unit_test(pid_list_words),
      cmocka_unit_test(scan_stops_at_never_taken),
      cmocka_unit_test(waits_for_what_the_job_leaves),
      cmocka_unit_test(no_wait_stops_at_the_job_exit),
      cmocka_unit_test(stop_wait_ends_the_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
