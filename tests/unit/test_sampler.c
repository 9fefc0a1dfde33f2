/* lib/measure/sampler.c: the counters scan and the decimal writer of the
 * sample lines. */
#include <sys/wait.h>
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dec_as_printf),
      cmocka_unit_test(scan_stops_at_never_taken),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
