/* What a loop that only sleeps to an absolute deadline every INTERVAL_MS
 * (as vl_sampler_run does) costs a core: the floor under the sampler's own
 * cost, the kernel's share of a tick (the system call, the timer, the
 * switch to and from the idle task).
 *   tick_floor INTERVAL_MS TICKS   (the tick_floor target, or cc -O2 bench/speed/tick_floor.c)
 * One JSON line: CPU time per tick (getrusage, user + system) and the share
 * of a core. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

static double mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: tick_floor INTERVAL_MS TICKS\n");
    return 2;
  }
  long ms = strtol(argv[1], NULL, 10), ticks = strtol(argv[2], NULL, 10);
  if (ms < 1 || ticks < 1) return 2;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  double c0 = cpu_ns(), w0 = mono_ns();
  for (long i = 0; i < ticks; i++) {
    next.tv_nsec += (ms % 1000) * 1000000L;
    next.tv_sec += ms / 1000 + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
    }
  }
  double c = cpu_ns() - c0, w = mono_ns() - w0;
  printf("{\"floor\": true, \"interval_ms\": %ld, \"ticks\": %ld, \"cpu_us_per_tick\": %.2f, "
         "\"cpu_pct_of_one_core\": %.3f}\n",
         ms, ticks, c / 1e3 / (double)ticks, 100 * c / w);
  return 0;
}
