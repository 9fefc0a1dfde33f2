/* Replay speed of the caching-allocator model (>= 10^7 events/s).
 * A training-like stream: per step, a few thousand activation-sized
 * allocations, frees in reverse (backward), optimizer temporaries; plus
 * random small tensors. usage: caching_bench [events] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vramledger/caching.h"

int main(int argc, char **argv) {
  long events = argc > 1 ? atol(argv[1]) : 20000000;
  struct vl_cache_conf conf = {0, 0, 0, false};
  struct vl_cache *c;
  if (vl_cache_new(&conf, &c) != VL_OK) return 1;
  static uint32_t live[8192];
  int n = 0;
  uint64_t x = 88172645463325252ull, sizes[64];
  for (int i = 0; i < 64; i++) { /* a model's tensor sizes: 512 B .. 64 MiB */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sizes[i] = 512ull << (x % 18);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long done = 0;
  while (done < events) {
    for (int k = 0; k < 2000 && n < 8192; k++, done++) { /* forward */
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      uint32_t h;
      if (vl_cache_malloc(c, sizes[x % 64] + (x >> 40) % 4096, &h) == VL_OK) live[n++] = h;
    }
    while (n > 0 && done < events) { /* backward frees, last first */
      vl_cache_free(c, live[--n]);
      done++;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  struct vl_cache_stats st;
  vl_cache_stats(c, &st);
  printf("{\"events\": %ld, \"seconds\": %.4f, \"events_per_s\": %.4g, \"peak_reserved\": %llu, "
         "\"segments\": %llu}\n",
         done, s, (double)done / s, (unsigned long long)st.peak_reserved,
         (unsigned long long)st.segments);
  vl_cache_destroy(c);
  return 0;
}
