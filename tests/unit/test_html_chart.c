/* lib/render/html_chart.c: min/max decimation keeps every extreme. The
 * expectations are derived by brute force over the same buckets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "render/internal.h"

struct series {
  size_t n;
  const double *t, *y[2];
};

static double t_of(const void *ctx, size_t i) { return ((const struct series *)ctx)->t[i]; }
static double y_of(const void *ctx, size_t i, int k) {
  return ((const struct series *)ctx)->y[k][i];
}

/* A noisy hour at 100 ms with a one-sample spike and a one-sample dip. */
enum { N = 36000, BUCKETS = 2000 };
static double t[N], a[N], b[N];
static size_t keep[N];

static void fill(void) {
  srand(7);
  for (size_t i = 0; i < N; i++) {
    t[i] = 0.1 * (double)i;
    a[i] = 4.0 + 0.01 * (double)(rand() % 100);
    b[i] = 3.0 + 0.01 * (double)(rand() % 100);
  }
  a[23456] = 20.0; /* the spike */
  b[777] = 0.5;    /* the dip, in the other series */
}

static void few_samples_are_all_kept(void **state) {
  (void)state;
  fill();
  struct series s = {100, t, {a, b}};
  size_t m = vl__minmax_keep(100, t_of, y_of, 2, &s, BUCKETS, keep);
  assert_int_equal(m, 100);
  for (size_t i = 0; i < m; i++)
    assert_int_equal(keep[i], i);
}

static void every_bucket_keeps_its_extremes(void **state) {
  (void)state;
  fill();
  struct series s = {N, t, {a, b}};
  size_t m = vl__minmax_keep(N, t_of, y_of, 2, &s, BUCKETS, keep);
  assert_true(m <= 2 * 2 * BUCKETS + 2);
  assert_true(m < N / 4); /* it does thin */
  assert_int_equal(keep[0], 0);
  assert_int_equal(keep[m - 1], N - 1);
  for (size_t i = 1; i < m; i++)
    assert_true(keep[i] > keep[i - 1]);
  /* the spike and the dip: the plotted maximum and minimum are the record's */
  double hi = 0, lo = 1e9;
  for (size_t i = 0; i < m; i++) {
    if (a[keep[i]] > hi) hi = a[keep[i]];
    if (b[keep[i]] < lo) lo = b[keep[i]];
  }
  assert_true(hi == 20.0);
  assert_true(lo == 0.5);
  /* in every bucket, each series' max and min among the kept equal the
   * bucket's own */
  double span = t[N - 1] - t[0];
  size_t j = 0;
  for (size_t first = 1; first < N - 1;) {
    size_t bucket = (size_t)((t[first] - t[0]) / span * BUCKETS), end = first;
    while (end < N - 1 && (size_t)((t[end] - t[0]) / span * BUCKETS) == bucket)
      end++;
    for (int k = 0; k < 2; k++) {
      const double *y = k ? b : a;
      double bmax = y[first], bmin = y[first], kmax = -1e9, kmin = 1e9;
      for (size_t i = first; i < end; i++)
        bmax = y[i] > bmax ? y[i] : bmax, bmin = y[i] < bmin ? y[i] : bmin;
      for (j = 0; j < m; j++)
        if (keep[j] >= first && keep[j] < end)
          kmax = y[keep[j]] > kmax ? y[keep[j]] : kmax,
          kmin = y[keep[j]] < kmin ? y[keep[j]] : kmin;
      assert_true(kmax == bmax);
      assert_true(kmin == bmin);
    }
    first = end;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(few_samples_are_all_kept),
      cmocka_unit_test(every_bucket_keeps_its_extremes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
