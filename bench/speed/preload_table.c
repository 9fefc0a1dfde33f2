/* How long can one allocation or free wait on the interposer's lock, and
 * does its pointer table stay the size of what is live? THREADS threads
 * each make PAIRS cuMemCreate/cuMemRelease pairs (a new handle each time,
 * LIVE of them held per thread) on the stub driver; meanwhile one more
 * thread holds BURST at once, lets them go, and makes 20 000 pairs more
 * (the table grows and shrinks while the others go on; THREADS 0: the
 * burst alone). Each call is timed; printed: the slowest call,
 * the 99.99th percentile, calls over 10 us, and VmSize before and after.
 * Built and run by bench/speed/run.sh preload-table (under LD_PRELOAD). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*create_fn)(unsigned long long *, size_t, const void *, unsigned long long);
typedef int (*release_fn)(unsigned long long);
static create_fn create;
static release_fn release;
static unsigned long long pairs = 2000000, burst = 2000000;
enum { LIVE = 64, BUCKETS = 64 };
/* every thread started (its stack and malloc arena are there) before the
 * first VmSize, then all go */
static pthread_barrier_t started, go;
static double vm_top; /* VmSize with the burst held */
static double vm_mib(void);

static void ready(void) {
  free(malloc(1));
  pthread_barrier_wait(&started);
  pthread_barrier_wait(&go);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct stats {
  uint64_t max_ns, over_10us, n;
  uint64_t hist[BUCKETS]; /* calls by floor(log2(ns)) */
};

static void note(struct stats *s, uint64_t ns) {
  if (ns > s->max_ns) s->max_ns = ns;
  if (ns > 10000) s->over_10us++;
  unsigned b = 0;
  while ((ns >> b) > 1 && b + 1 < BUCKETS)
    b++;
  s->hist[b]++;
  s->n++;
}

static void *worker(void *arg) {
  struct stats *s = arg;
  unsigned long long h[LIVE];
  ready();
  for (int i = 0; i < LIVE; i++)
    create(&h[i], 4096, NULL, 0);
  for (unsigned long long k = 0; k < pairs; k++) {
    unsigned i = (unsigned)(k % LIVE);
    uint64_t t0 = now_ns();
    release(h[i]);
    uint64_t t1 = now_ns();
    create(&h[i], 4096, NULL, 0);
    uint64_t t2 = now_ns();
    note(s, t1 - t0);
    note(s, t2 - t1);
  }
  for (int i = 0; i < LIVE; i++)
    release(h[i]);
  return NULL;
}

/* thread 0's burst: BURST held at once, then let go */
static void *burster(void *arg) {
  struct stats *s = arg;
  unsigned long long *b = malloc((burst + 1) * sizeof *b);
  ready();
  if (!b) return NULL;
  for (unsigned long long i = 0; i < burst; i++) {
    uint64_t t0 = now_ns();
    create(&b[i], 1, NULL, 0);
    note(s, now_ns() - t0);
  }
  vm_top = vm_mib();
  for (unsigned long long i = 0; i < burst; i++) {
    uint64_t t0 = now_ns();
    release(b[i]);
    note(s, now_ns() - t0);
  }
  /* and on, as a job goes on after its peak: the emptied tables are
   * unmapped a piece per call */
  for (int i = 0; i < 20000 && burst; i++) {
    uint64_t t0 = now_ns();
    create(&b[0], 1, NULL, 0);
    release(b[0]);
    note(s, now_ns() - t0);
  }
  free(b);
  return NULL;
}

/* a field of /proc/self/status, MiB ("VmSize", "VmRSS", "VmHWM") */
static double status_mib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long kb = 0;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':' &&
        sscanf(line + n + 1, " %llu kB", &kb) == 1)
      break;
  if (f) fclose(f);
  return (double)kb / 1024;
}

static double vm_mib(void) { return status_mib("VmSize"); }

int main(int argc, char **argv) {
  int threads = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 8;
  if (argc > 2) pairs = strtoull(argv[2], NULL, 10);
  if (argc > 3) burst = strtoull(argv[3], NULL, 10);
  if (threads < 0 || threads > 64) return 2; /* 0: the burst alone */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*gp)(const char *, void **, int, unsigned long long, void *) =
      lib ? (int (*)(const char *, void **, int, unsigned long long, void *))dlsym(
                lib, "cuGetProcAddress_v2")
          : NULL;
  if (!gp || gp("cuMemCreate", (void **)&create, 12000, 0, NULL) ||
      gp("cuMemRelease", (void **)&release, 12000, 0, NULL)) {
    fprintf(stderr, "preload_table: no stub driver (LD_LIBRARY_PATH)\n");
    return 1;
  }
  pthread_t t[65];
  struct stats *st = calloc((size_t)threads + 1, sizeof *st);
  pthread_barrier_init(&started, NULL, (unsigned)threads + 2);
  pthread_barrier_init(&go, NULL, (unsigned)threads + 2);
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, worker, &st[i]);
  pthread_create(&t[threads], NULL, burster, &st[threads]);
  pthread_barrier_wait(&started);
  double vm0 = vm_mib(), rss0 = status_mib("VmRSS");
  uint64_t t0 = now_ns();
  pthread_barrier_wait(&go);
  for (int i = 0; i <= threads; i++)
    pthread_join(t[i], NULL);
  double wall = (double)(now_ns() - t0) * 1e-9;
  struct stats all = {0};
  for (int i = 0; i <= threads; i++) {
    if (st[i].max_ns > all.max_ns) all.max_ns = st[i].max_ns;
    all.over_10us += st[i].over_10us;
    all.n += st[i].n;
    for (int b = 0; b < BUCKETS; b++)
      all.hist[b] += st[i].hist[b];
  }
  uint64_t want = all.n - all.n / 10000, seen = 0;
  int p9999 = 0;
  for (; p9999 < BUCKETS && (seen += all.hist[p9999]) < want; p9999++) {
  }
  printf("threads %d, pairs %llu each, burst %llu: %llu calls in %.2f s; slowest %.3f ms, "
         "99.99%% under %.1f us, %llu over 10 us; VmSize %.1f MiB before, %.1f MiB with the burst "
         "held, %.1f MiB after; VmRSS %.1f MiB before, %.1f MiB after, VmHWM %.1f MiB\n",
         threads, pairs, burst, (unsigned long long)all.n, wall, (double)all.max_ns * 1e-6,
         (double)(2ull << p9999) * 1e-3, (unsigned long long)all.over_10us, vm0, vm_top, vm_mib(),
         rss0, status_mib("VmRSS"), status_mib("VmHWM"));
  free(st);
  return 0;
}
