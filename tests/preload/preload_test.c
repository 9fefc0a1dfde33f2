/* Exercises the interposer on the stub CUDA libraries:
 *   preload_test check     assert the counts (under LD_PRELOAD)
 *   preload_test plain     runs without the interposer: same results
 *   preload_test hold MiB SECONDS [PROCS_FILE]
 *                          allocate and hold (for `vramledger run` tests;
 *                          writes "pid bytes" to PROCS_FILE for fake NVML)
 *   preload_test leave CODE MiB SECONDS [PROCS_FILE]
 *                          fork a child that holds as `hold` does, and
 *                          exit CODE once it has allocated: a launcher
 *                          that leaves its training process running
 *   preload_test blip      64 MiB held 150 ms; 50 ms in, 32 MiB more for 3 ms;
 *                          100 ms in, 16 MiB more for a few microseconds
 *                          (for `run --interval-ms 1`)
 *   preload_test flash     64 MiB held 150 ms, and a child that, 50 ms in,
 *                          allocates 16 MiB for a few microseconds and
 *                          exits 50 ms later: 80 MiB only between two
 *                          samples, and in no process's own peak
 *   preload_test churn SECONDS
 *                          allocate and free 1 MiB over and over, SECONDS long
 *   preload_test marks N [solo]
 *                          two processes (this one and a forked child) each
 *                          stamp N marks as fast as they can, at once: the
 *                          record's streams keep every line whole (one
 *                          writer a file) and read back in time order;
 *                          solo: this process alone
 *   preload_test closefds FILE
 *                          close every inherited descriptor, open FILE (it
 *                          gets the record's number), stamp a mark: FILE
 *                          must stay empty (daemon-style jobs)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t n, void *s);
cudaError_t cudaFreeAsync(void *p, void *s);
cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, void *pool, void *s);
cudaError_t cudaMemPoolTrimTo(void *pool, size_t keep);
cudaError_t cudaMemPoolCreate(void **pool, const void *props);
cudaError_t cudaMemPoolDestroy(void *pool);
cudaError_t cudaDeviceGetMemPool(void **pool, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetDriverEntryPoint(const char *sym, void **pfn, unsigned long long f, void *st);

typedef void (*counts_fn)(uint64_t *, uint64_t *);
typedef void (*mark_fn)(const char *);

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "preload_test: %s:%d: failed: %s\n", __FILE__, __LINE__, #c);                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static counts_fn counts;

static uint64_t live(void) {
  uint64_t l = 0, p = 0;
  counts(&l, &p);
  return l;
}

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    void *p;
    CHECK(cudaMalloc(&p, 4096) == 0);
    CHECK(cudaFree(p) == 0);
  }
  return NULL;
}

/* Allocate MiB, write "pid bytes" to procs (for fake NVML), stamp a mark,
 * five "steps" over SECONDS as a training loop stamps them, free. ready:
 * a byte is written there once the allocation is held (or -1). */
static void hold(const char *mib_s, const char *secs_s, const char *procs, int ready) {
  size_t mib = mib_s ? strtoul(mib_s, NULL, 10) : 64;
  double secs = secs_s ? atof(secs_s) : 0.5;
  void *p;
  CHECK(cudaMalloc(&p, mib << 20) == 0);
  if (procs) {
    FILE *f = fopen(procs, "a");
    CHECK(f);
    fprintf(f, "%d %zu\n", (int)getpid(), (mib << 20) + (500u << 20));
    fclose(f);
  }
  mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "vl_mark");
  if (mark) mark("holding");
  if (ready >= 0) {
    CHECK(write(ready, "1", 1) == 1);
    close(ready);
  }
  for (int k = 0; k < 5; k++) { /* five "steps", as a training loop stamps them */
    double t = secs / 5;
    struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    nanosleep(&ts, NULL);
    if (mark) mark("step");
  }
  CHECK(cudaFree(p) == 0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "check";
  counts = (counts_fn)dlsym(RTLD_DEFAULT, "vl_preload_counts");
  if (strcmp(mode, "plain") == 0) {
    CHECK(counts == NULL); /* not preloaded: the program runs as ever */
    void *p;
    CHECK(cudaMalloc(&p, 1000) == 0 && p != NULL);
    CHECK(cudaFree(p) == 0);
    puts("plain ok");
    return 0;
  }
  if (strcmp(mode, "orphan") == 0) { /* a child allocates and exits without freeing */
    pid_t c = fork();
    if (c == 0) {
      void *p;
      if (cudaMalloc(&p, 32u << 20) != 0) _exit(1);
      struct timespec ts = {0, 300 * 1000 * 1000};
      nanosleep(&ts, NULL);
      _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    struct timespec ts = {0, 400 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "marks") == 0 && argc > 2) {
    long n = strtol(argv[2], NULL, 10);
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "vl_mark");
    CHECK(mark);
    mark("first"); /* the parent's stream open before the fork */
    pid_t c = argc > 3 && strcmp(argv[3], "solo") == 0 ? 1 : fork();
    CHECK(c >= 0);
    for (long i = 0; i < n; i++)
      mark(c == 0 ? "child" : "parent");
    if (c == 0) _exit(0);
    if (c == 1) return 0; /* solo: no child */
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "closefds") == 0 && argc > 2) {
    for (int fd = 3; fd < 1024; fd++)
      close(fd);
    FILE *f = fopen(argv[2], "w");
    CHECK(f);
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "vl_mark");
    CHECK(mark);
    mark("after-close");
    CHECK(ftell(f) == 0);
    fclose(f);
    return 0;
  }
  if (strcmp(mode, "churn") == 0) {
    double secs = argc > 2 ? atof(argv[2]) : 1;
    struct timespec t0, t, us100 = {0, 100000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      void *p;
      CHECK(cudaMalloc(&p, 1u << 20) == 0);
      CHECK(cudaFree(p) == 0);
      nanosleep(&us100, NULL);
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < secs);
    return 0;
  }
  if (strcmp(mode, "blip") == 0) {
    void *base, *p;
    struct timespec ms50 = {0, 50000000}, ms3 = {0, 3000000};
    CHECK(cudaMalloc(&base, 64u << 20) == 0);
    nanosleep(&ms50, NULL);
    CHECK(cudaMalloc(&p, 32u << 20) == 0);
    nanosleep(&ms3, NULL);
    CHECK(cudaFree(p) == 0);
    nanosleep(&ms50, NULL);
    CHECK(cudaMalloc(&p, 16u << 20) == 0);
    CHECK(cudaFree(p) == 0);
    nanosleep(&ms50, NULL);
    CHECK(cudaFree(base) == 0);
    return 0;
  }
  if (strcmp(mode, "flash") == 0) {
    void *base, *p;
    struct timespec ms50 = {0, 50000000};
    CHECK(cudaMalloc(&base, 64u << 20) == 0);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
      nanosleep(&ms50, NULL);
      CHECK(cudaMalloc(&p, 16u << 20) == 0);
      CHECK(cudaFree(p) == 0);
      nanosleep(&ms50, NULL);
      exit(0);
    }
    int st;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    nanosleep(&ms50, NULL);
    CHECK(cudaFree(base) == 0);
    return 0;
  }
  if (strcmp(mode, "hold") == 0) {
    hold(argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, -1);
    return 0;
  }
  if (strcmp(mode, "leave") == 0 && argc > 4) {
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
      close(ready[0]);
      hold(argv[3], argv[4], argc > 5 ? argv[5] : NULL, ready[1]);
      _exit(0);
    }
    close(ready[1]);
    char b;
    CHECK(read(ready[0], &b, 1) == 1); /* it holds its allocation */
    return (int)strtol(argv[2], NULL, 10);
  }
  CHECK(counts != NULL);
  CHECK(live() == 0);
  /* runtime API: counted once although the stub runtime calls the driver */
  void *a, *b;
  CHECK(cudaMalloc(&a, 1 << 20) == 0);
  CHECK(live() == 1 << 20);
  /* the stream-ordered allocator: what the pool reserves counts (2 MiB
   * chunks in the stub driver), not the blocks handed out, and a freed
   * block stays reserved until the pool is trimmed */
  const uint64_t M = 1u << 20;
  CHECK(cudaMallocAsync(&b, 3000, NULL) == 0);
  CHECK(live() == M + 2 * M);
  void *big;
  CHECK(cudaMallocAsync(&big, 5 * M, NULL) == 0);
  CHECK(live() == M + 6 * M); /* 5 MiB + 3000 B in 2 MiB chunks */
  CHECK(cudaFreeAsync(big, NULL) == 0);
  CHECK(cudaDeviceSynchronize() == 0);
  CHECK(live() == M + 6 * M); /* still reserved, as memory_reserved() says */
  void *pool;
  CHECK(cudaDeviceGetMemPool(&pool, 0) == 0);
  CHECK(cudaMemPoolTrimTo(pool, 0) == 0);
  CHECK(live() == M + 2 * M); /* the 3000 B block keeps one chunk */
  CHECK(cudaFreeAsync(b, NULL) == 0);
  CHECK(cudaMemPoolTrimTo(pool, 0) == 0);
  CHECK(live() == M);
  /* a pool of the program's own, then destroyed */
  void *own, *d1;
  CHECK(cudaMemPoolCreate(&own, NULL) == 0);
  CHECK(cudaMallocFromPoolAsync(&d1, 3 * M, own, NULL) == 0);
  CHECK(live() == M + 4 * M);
  CHECK(cudaFreeAsync(d1, NULL) == 0);
  CHECK(cudaMemPoolDestroy(own) == 0);
  CHECK(live() == M);
  uint64_t l0, pk0;
  counts(&l0, &pk0);
  CHECK(pk0 == M + 6 * M);
  CHECK(cudaFree(a) == 0);
  CHECK(live() == 0);
  CHECK(cudaFree(NULL) == 0); /* freeing what we never saw changes nothing */
  CHECK(live() == 0);
  /* driver API reached through dlsym and cuGetProcAddress, as PyTorch's
   * expandable segments do */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(lib);
  typedef int (*gp_fn)(const char *, void **, int, unsigned long long, void *);
  gp_fn gp = (gp_fn)dlsym(lib, "cuGetProcAddress_v2");
  CHECK(gp);
  int (*create)(unsigned long long *, size_t, const void *, unsigned long long) = NULL;
  int (*release)(unsigned long long) = NULL;
  CHECK(gp("cuMemCreate", (void **)&create, 12000, 0, NULL) == 0 && create);
  CHECK(gp("cuMemRelease", (void **)&release, 12000, 0, NULL) == 0 && release);
  /* cuGetProcAddress asked for itself (as the static CUDA runtime does):
   * what it hands out must still be wrapped */
  gp_fn gp_self = NULL;
  CHECK(gp("cuGetProcAddress", (void **)&gp_self, 12000, 0, NULL) == 0 && gp_self);
  int (*alloc_self)(unsigned long long *, size_t) = NULL;
  int (*free_self)(unsigned long long) = NULL;
  CHECK(gp_self("cuMemAlloc", (void **)&alloc_self, 12000, 0, NULL) == 0 && alloc_self);
  CHECK(gp_self("cuMemFree", (void **)&free_self, 12000, 0, NULL) == 0 && free_self);
  unsigned long long self_p;
  CHECK(alloc_self(&self_p, 4096) == 0);
  CHECK(live() == 4096);
  CHECK(free_self(self_p) == 0);
  CHECK(live() == 0);
  /* NCCL's sequence on 2 H200s (bench/results/parallel-calibration):
   * the plain exported cuGetProcAddress (4 arguments) is looked up first,
   * then cuGetProcAddress asked for itself at CUDA 12: what comes back must
   * take 5 arguments and write the status, or NCCL reads "not found" */
  typedef int (*gp1_fn)(const char *, void **, int, unsigned long long);
  gp1_fn gp1 = (gp1_fn)dlsym(lib, "cuGetProcAddress");
  CHECK(gp1);
  gp1_fn gp1_self = NULL;
  CHECK(gp1("cuGetProcAddress", (void **)&gp1_self, 11030, 0) == 0 && gp1_self);
  gp_fn gp2_self = NULL;
  CHECK(gp("cuGetProcAddress", (void **)&gp2_self, 12000, 0, NULL) == 0 && gp2_self);
  int status = 99;
  void *fn = NULL;
  CHECK(gp2_self("cuMemCreate", &fn, 12000, 0, &status) == 0 && fn && status == 0);
  status = 99;
  CHECK(gp2_self("cuNoSuchFunction", &fn, 12000, 0, &status) != 0 && status == 1);
  CHECK(gp1_self("cuMemFree", &fn, 11030, 0) == 0 && fn);
  /* each stream variant calls its own real function, whatever the order */
  int (*sync_legacy)(void *) = NULL, (*sync_ptds)(void *) = NULL;
  CHECK(gp("cuStreamSynchronize", (void **)&sync_legacy, 12000, 0, NULL) == 0 && sync_legacy);
  CHECK(gp("cuStreamSynchronize", (void **)&sync_ptds, 12000, 2, NULL) == 0 && sync_ptds);
  unsigned long long *sync_calls = (unsigned long long *)dlsym(lib, "stub_sync_calls");
  CHECK(sync_calls);
  CHECK(sync_legacy(NULL) == 0 && sync_ptds(NULL) == 0 && sync_legacy(NULL) == 0);
  CHECK(sync_calls[0] == 2 && sync_calls[1] == 1);
  /* a function without a stream argument asked for per thread is counted */
  int (*create_ptds)(unsigned long long *, size_t, const void *, unsigned long long) = NULL;
  CHECK(gp("cuMemCreate", (void **)&create_ptds, 12000, 2, NULL) == 0 && create_ptds);
  unsigned long long h0;
  CHECK(create_ptds(&h0, 1 << 20, NULL, 0) == 0);
  CHECK(live() == (1u << 20));
  CHECK(release(h0) == 0);
  CHECK(live() == 0);
  /* cuMemAlloc asked for before CUDA 3.2 is the 32-bit ABI: handed out
   * unwrapped (not counted), the 64-bit wrapper would misread it */
  int (*alloc_v1)(unsigned long long *, size_t) = NULL;
  CHECK(gp("cuMemAlloc", (void **)&alloc_v1, 3000, 0, NULL) == 0 && alloc_v1);
  CHECK(alloc_v1 != alloc_self);
  unsigned long long h1, h2;
  CHECK(create(&h1, 2 << 20, NULL, 0) == 0);
  CHECK(create(&h2, 20 << 20, NULL, 0) == 0);
  CHECK(live() == (22u << 20));
  CHECK(release(h1) == 0);
  CHECK(live() == (20u << 20));
  /* the runtime's entry points hand out wrapped functions too */
  int (*alloc)(unsigned long long *, size_t) = NULL;
  int (*dfree)(unsigned long long) = NULL;
  CHECK(cudaGetDriverEntryPoint("cuMemAlloc", (void **)&alloc, 0, NULL) == 0 && alloc);
  CHECK(cudaGetDriverEntryPoint("cuMemFree", (void **)&dfree, 0, NULL) == 0 && dfree);
  unsigned long long d;
  CHECK(alloc(&d, 5000) == 0);
  CHECK(live() == (20u << 20) + 5000);
  CHECK(dfree(d) == 0);
  CHECK(release(h2) == 0);
  CHECK(live() == 0);
  /* threads */
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  CHECK(live() == 0);
  uint64_t l, peak;
  counts(&l, &peak);
  CHECK(peak >= (22u << 20));
  /* fork: the child starts from nothing and can allocate */
  CHECK(cudaMalloc(&a, 777) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    if (live() != 0) _exit(2);
    void *c;
    if (cudaMalloc(&c, 100) != 0 || live() != 100) _exit(3);
    cudaFree(c);
    _exit(live() == 0 ? 0 : 4);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(live() == 777);
  CHECK(cudaFree(a) == 0);
  puts("preload ok");
  return 0;
}
