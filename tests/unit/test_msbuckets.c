/* lib/measure/msbuckets.h: the interposer's millisecond ring, noted as the
 * interposer does (its slot's live bytes changed atomically, then noted)
 * and read back as the sampler does. */
#include <pthread.h>

#include "measure/msbuckets.h"
#include "testutil.h"

#define N VL_COUNTERS_RING_MS

static struct vl_msbucket ring[N];
static uint64_t live;

static void set_live(uint64_t ms, uint64_t v) {
  __atomic_store_n(&live, v, __ATOMIC_SEQ_CST);
  vl__msb_note(ring, N, ms, v, &live);
}

/* The end of a millisecond and the most within it; a millisecond without
 * a note reads as no change. */
static void end_and_most(void **state) {
  (void)state;
  memset(ring, 0, sizeof ring);
  uint64_t end = 0, hi = 0;
  set_live(5000, 100);
  set_live(5000, 500); /* a block held for less than a millisecond */
  set_live(5000, 200);
  assert_int_equal(vl__msb_read(ring, N, 5000, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, 200);
  assert_int_equal(hi, 500);
  assert_int_equal(vl__msb_read(ring, N, 4999, &end, &hi), VL_MSB_NONE);
  assert_int_equal(vl__msb_read(ring, N, 5001, &end, &hi), VL_MSB_NONE);
  /* the next millisecond starts over: its most is what its notes said */
  set_live(5001, 150);
  assert_int_equal(vl__msb_read(ring, N, 5001, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, 150);
  assert_int_equal(hi, 150);
  /* more than the word holds is written as the most it holds */
  set_live(5002, 1ull << 50);
  assert_int_equal(vl__msb_read(ring, N, 5002, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, VL_MSB_BYTES_MAX);
}

/* A reader more than N ms late finds the bucket taken by a later
 * millisecond; a note for a millisecond the bucket has left behind (its
 * thread stopped for that long) is dropped. */
static void overrun(void **state) {
  (void)state;
  memset(ring, 0, sizeof ring);
  uint64_t end = 0, hi = 0;
  set_live(7000, 300);
  set_live(7000 + N, 40);
  assert_int_equal(vl__msb_read(ring, N, 7000, &end, &hi), VL_MSB_LOST);
  assert_int_equal(vl__msb_read(ring, N, 7000 + N, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, 40);
  assert_int_equal(hi, 40);
  vl__msb_note(ring, N, 7000, 900, &live); /* late */
  assert_int_equal(vl__msb_read(ring, N, 7000 + N, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, 40);
  assert_int_equal(hi, 40);
  /* the same bucket's older millisecond, not yet taken over: no change */
  memset(ring, 0, sizeof ring);
  set_live(7000, 300);
  assert_int_equal(vl__msb_read(ring, N, 7000 + N, &end, &hi), VL_MSB_NONE);
}

/* ---- many threads, one bucket ---- */

#define THREADS 8
#define ROUNDS 200
#define REPEATS 300 /* the last notes race at each repeat's end */
#define MS 123456u

static uint64_t most_seen; /* the highest value any change returned */
static int writers_left, rounds_left;
static pthread_barrier_t last; /* the threads' last notes at once, the reader reading */

static void raise_most(uint64_t v) {
  uint64_t m = __atomic_load_n(&most_seen, __ATOMIC_RELAXED);
  while (v > m &&
         !__atomic_compare_exchange_n(&most_seen, &m, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void *writer(void *arg) {
  uint64_t size = (uint64_t)(uintptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t v = __atomic_add_fetch(&live, size, __ATOMIC_SEQ_CST);
    raise_most(v);
    vl__msb_note(ring, N, MS, v, &live);
    v = __atomic_sub_fetch(&live, size, __ATOMIC_SEQ_CST);
    vl__msb_note(ring, N, MS, v, &live);
  }
  __atomic_sub_fetch(&rounds_left, 1, __ATOMIC_SEQ_CST);
  pthread_barrier_wait(&last);
  uint64_t v = __atomic_add_fetch(&live, size, __ATOMIC_SEQ_CST); /* one kept */
  raise_most(v);
  vl__msb_note(ring, N, MS, v, &live);
  __atomic_sub_fetch(&writers_left, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* One reading: consistent, or *bad set. @return 1 when it found the
 * millisecond. */
static int read_once(uint64_t all, bool *bad) {
  uint64_t end = 0, hi = 0;
  enum vl_msb_read r = vl__msb_read(ring, N, MS, &end, &hi);
  if (r == VL_MSB_LOST || end > hi || hi > all) *bad = true;
  return r == VL_MSB_SET;
}

/* The reader meanwhile, through the rounds and then the last notes (at
 * least one reading after the rounds, when the bucket is the
 * millisecond's): whatever it reads is consistent. @return the number of
 * readings that found the millisecond, UINT64_MAX: one was not. */
static void *reader(void *arg) {
  uint64_t all = (uint64_t)(uintptr_t)arg, sets = 0;
  bool bad = false;
  while (__atomic_load_n(&rounds_left, __ATOMIC_SEQ_CST) > 0)
    sets += read_once(all, &bad);
  pthread_barrier_wait(&last);
  do
    sets += read_once(all, &bad);
  while (__atomic_load_n(&writers_left, __ATOMIC_SEQ_CST) > 0);
  return (void *)(uintptr_t)(bad ? UINT64_MAX : sets);
}

static void threads_once(void) {
  memset(ring, 0, sizeof ring);
  live = most_seen = 0;
  /* the bucket held an older millisecond: the first note takes it over */
  vl__msb_note(ring, N, MS - N, 1ull << 40, &live);
  writers_left = rounds_left = THREADS;
  pthread_barrier_init(&last, NULL, THREADS + 1);
  pthread_t w[THREADS], rd;
  uint64_t all = 0;
  for (int i = 0; i < THREADS; i++)
    all += 1ull << (10 + i);
  assert_int_equal(pthread_create(&rd, NULL, reader, (void *)(uintptr_t)all), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)(1ull << (10 + i))), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(w[i], NULL);
  void *sets;
  pthread_join(rd, &sets);
  pthread_barrier_destroy(&last);
  assert_true((uint64_t)(uintptr_t)sets != UINT64_MAX);
  assert_true((uint64_t)(uintptr_t)sets >= 1); /* it did read the millisecond */
  uint64_t end = 0, hi = 0;
  assert_int_equal(vl__msb_read(ring, N, MS, &end, &hi), VL_MSB_SET);
  assert_int_equal(end, all); /* each thread kept one block */
  assert_int_equal(end, live);
  assert_int_equal(hi, most_seen); /* the most, whichever thread reached it */
}

static void threads_one_bucket(void **state) {
  (void)state;
  for (int k = 0; k < REPEATS; k++)
    threads_once();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(end_and_most),
      cmocka_unit_test(overrun),
      cmocka_unit_test(threads_one_bucket),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
