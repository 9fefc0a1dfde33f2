/* The interposer's bookkeeping at scale, on the stub CUDA libraries (run
 * under LD_PRELOAD of the interposer):
 *   table_test churn PAIRS   PAIRS allocations freed again (cuMemCreate /
 *                            cuMemRelease, a new handle each time, 16
 *                            live), after a burst of 200 000 live ones:
 *                            the virtual memory afterwards is what it was
 *                            at rest before the burst (within 1 MiB), the
 *                            counts exact
 *   table_test threads N P   N threads of P pairs each (32 handles held
 *                            each, sizes their own) while they go on and
 *                            at the end: the live bytes exact, every
 *                            allocation and free counted (the shards'
 *                            locks, preload/preload.c), the peak what
 *                            was live when every thread held its handles
 *   table_test runtime N P   N threads of P cudaMalloc/cudaFree pairs (32
 *                            held each) beside one that holds 20 000 at
 *                            once and lets them go (shards resizing while
 *                            others count): the live bytes exact; with
 *                            tests/preload/tsan.sh, under ThreadSanitizer
 *   table_test pools N P     N threads of P cudaMallocAsync/cudaFreeAsync
 *                            pairs of their own sizes from the device's
 *                            pool, trimming it and synchronising now and
 *                            then: when they are done the live bytes are
 *                            what the pool reserves, with no call after,
 *                            and again after 4 threads made, used and
 *                            destroyed 800 pools of their own;
 *                            and a change made while another thread's
 *                            reading is in flight is read again by that
 *                            thread (no thread waits for another's)
 *   table_test full          under `ulimit -v` (RLIMIT_AS set here) the
 *                            table cannot grow: the allocations it cannot
 *                            hold are counted in the counters file, the
 *                            flag set, one line on stderr
 *   table_test slots N IDLE  N allocating children and IDLE idle ones in
 *                            one counters file of 256 slots: the idle ones
 *                            take none, the ones past 256 are counted in
 *                            no_slot, the flag set, one line on stderr
 * `full` and `slots` make the counters file, run themselves again with
 * $VRAMLEDGER_COUNTERS (the interposer maps it as the program starts) and
 * their stderr piped, and check both. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vramledger/counters.h"

typedef int cudaError_t;
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t n, void *s);
cudaError_t cudaFreeAsync(void *p, void *s);
cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, void *pool, void *s);
cudaError_t cudaMemPoolCreate(void **pool, const void *props);
cudaError_t cudaMemPoolDestroy(void *pool);
cudaError_t cudaMemPoolTrimTo(void *pool, size_t keep);
cudaError_t cudaDeviceGetMemPool(void **pool, int dev);
cudaError_t cudaDeviceSynchronize(void);

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "table_test: %s:%d: failed: %s\n", __FILE__, __LINE__, #c);                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

typedef int (*create_fn)(unsigned long long *, size_t, const void *, unsigned long long);
typedef int (*release_fn)(unsigned long long);
static create_fn create;
static release_fn release;
static void (*counts)(uint64_t *, uint64_t *);

static uint64_t live(void) {
  uint64_t l = 0, p = 0;
  counts(&l, &p);
  return l;
}

/* cuMemCreate and cuMemRelease as PyTorch's expandable segments reach
 * them: through cuGetProcAddress (wrapped by the interposer) */
static void driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(lib);
  int (*gp)(const char *, void **, int, unsigned long long, void *) =
      (int (*)(const char *, void **, int, unsigned long long, void *))dlsym(lib,
                                                                             "cuGetProcAddress_v2");
  CHECK(gp);
  CHECK(gp("cuMemCreate", (void **)&create, 12000, 0, NULL) == 0 && create);
  CHECK(gp("cuMemRelease", (void **)&release, 12000, 0, NULL) == 0 && release);
  *(void **)&counts = dlsym(RTLD_DEFAULT, "vl_preload_counts");
  CHECK(counts);
}

/* VmSize, bytes */
static uint64_t vm_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f);
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

static int churn(unsigned long long pairs) {
  driver();
  enum { LIVE = 16, BURST = 200000 };
  unsigned long long h[LIVE];
  /* at rest: every shard of the table has its smallest table (64 x 12 KiB,
   * preload/preload.c), made by a handle or more in each */
  enum { REST = 4096 };
  unsigned long long *r0 = malloc(REST * sizeof *r0);
  CHECK(r0);
  for (int i = 0; i < REST; i++)
    CHECK(create(&r0[i], 1, NULL, 0) == 0);
  for (int i = 0; i < REST; i++)
    CHECK(release(r0[i]) == 0);
  free(r0);
  for (int i = 0; i < LIVE; i++)
    CHECK(create(&h[i], 4096, NULL, 0) == 0);
  uint64_t vm0 = vm_bytes();
  /* a burst: the table grows to hold 200 000, then shrinks again */
  unsigned long long *b = malloc(BURST * sizeof *b);
  CHECK(b);
  for (int i = 0; i < BURST; i++)
    CHECK(create(&b[i], 1, NULL, 0) == 0);
  CHECK(live() == LIVE * 4096ull + BURST);
  uint64_t vm_burst = vm_bytes();
  for (int i = 0; i < BURST; i++)
    CHECK(release(b[i]) == 0);
  free(b);
  for (unsigned long long k = 0; k < pairs; k++) {
    unsigned i = (unsigned)(k % LIVE);
    CHECK(release(h[i]) == 0);
    CHECK(create(&h[i], 4096, NULL, 0) == 0);
  }
  /* at random, up to 60 000 live of sizes that add up exactly: the table
   * grows and shrinks through its moves with deletes in both tables */
  enum { R = 60000 };
  unsigned long long *rh = calloc(R, sizeof *rh);
  CHECK(rh);
  uint64_t want = LIVE * 4096ull, x = 88172645463325252ull;
  for (int k = 0; k < 3000000; k++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned i = (unsigned)(x % R);
    if (rh[i]) {
      CHECK(release(rh[i]) == 0);
      rh[i] = 0;
      want -= 1000 + i;
    } else if ((x >> 40) % 4 != 0 || k > 2000000) { /* fill up, then empty out */
      if (k > 2000000) continue;
      CHECK(create(&rh[i], 1000 + i, NULL, 0) == 0);
      want += 1000 + i;
    }
    if (k % 100000 == 0) CHECK(live() == want);
  }
  for (unsigned i = 0; i < R; i++)
    if (rh[i]) {
      CHECK(release(rh[i]) == 0);
      want -= 1000 + i;
    }
  free(rh);
  CHECK(live() == want && want == LIVE * 4096ull);
  /* the runtime API too (addresses from malloc, reused) */
  for (int k = 0; k < 100000; k++) {
    void *p;
    CHECK(cudaMalloc(&p, 100) == 0);
    CHECK(cudaFree(p) == 0);
  }
  CHECK(live() == LIVE * 4096ull);
  uint64_t vm1 = vm_bytes();
  printf("table_test churn: %llu pairs: VmSize %.1f MiB before, %.1f MiB with %d live, %.1f MiB "
         "after\n",
         pairs, (double)vm0 / 1048576, (double)vm_burst / 1048576, BURST + LIVE,
         (double)vm1 / 1048576);
  CHECK(vm_burst > vm0); /* the table did grow */
  CHECK(vm1 <= vm0 + (1u << 20));
  for (int i = 0; i < LIVE; i++)
    CHECK(release(h[i]) == 0);
  CHECK(live() == 0);
  return 0;
}

/* ---- with a counters file ------------------------------------------------ */

/* A fresh counters file at path, as `vramledger run` makes it when the
 * disk has no room for the millisecond rings (ring_ms 0), its blocks
 * given (the interposer maps no sparse file): the interposer counts into
 * it, and maps no more than its size (a page past the end would kill the
 * job). */
static struct vl_counters *make_counters(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK(posix_fallocate(fd, 0, sizeof(struct vl_counters)) == 0);
  struct vl_counters *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(c != MAP_FAILED);
  close(fd);
  c->version = VL_COUNTERS_VERSION;
  c->slots = VL_COUNTERS_SLOTS;
  __atomic_store_n(&c->magic, VL_COUNTERS_MAGIC, __ATOMIC_RELEASE);
  return c;
}

/* Run this program again as MODE with the counters at path; its stderr
 * into errbuf. @return its exit status. */
static int again(const char *self, const char *path, char *const *args, char *errbuf,
                 size_t errcap) {
  int pfd[2];
  CHECK(pipe(pfd) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    dup2(pfd[1], 2);
    close(pfd[0]);
    close(pfd[1]);
    setenv("VRAMLEDGER_COUNTERS", path, 1);
    execv(self, args);
    _exit(127);
  }
  close(pfd[1]);
  size_t n = 0;
  ssize_t got;
  while ((got = read(pfd[0], errbuf + n, errcap - 1 - n)) > 0)
    n += (size_t)got;
  errbuf[n] = '\0';
  close(pfd[0]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static unsigned lines_with(const char *text, const char *what) {
  unsigned n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
    n++;
  return n;
}

/* In the child: the table may not grow past ~1 MiB of address space. */
static int full_child(void) {
  driver();
  enum { N = 200000 };
  unsigned long long *h = malloc(N * sizeof *h);
  CHECK(h);
  struct rlimit rl = {vm_bytes() + (1u << 20), RLIM_INFINITY};
  rl.rlim_max = rl.rlim_cur;
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
  for (int i = 0; i < N; i++)
    CHECK(create(&h[i], 1, NULL, 0) == 0); /* the program's calls still succeed */
  uint64_t counted = live();
  CHECK(counted > 0 && counted < N);
  for (int i = 0; i < N; i++)
    CHECK(release(h[i]) == 0);
  CHECK(live() == 0); /* what was counted is given back, nothing else */
  printf("%llu\n", (unsigned long long)counted);
  return 0;
}

static int full(const char *self) {
  char path[] = "/tmp/vl-table-test-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  struct vl_counters *c = make_counters(path);
  char err[8192];
  char *args[] = {(char *)self, "full-child", NULL};
  int rc = again(self, path, args, err, sizeof err);
  unlink(path);
  fputs(err, stderr);
  CHECK(rc == 0);
  CHECK(c->lost == VL_COUNTERS_LOST_TABLE);
  CHECK(c->uncounted > 0 && c->uncounted < 200000);
  CHECK(lines_with(err, "vramledger-preload: no memory to track") == 1);
  printf("table_test full: %llu of 200000 allocations not counted, said once\n",
         (unsigned long long)c->uncounted);
  return 0;
}

/* In the child: n children allocate 1 MiB each and idle ones do not; all
 * wait until the counters are read here. */
static int slots_child(unsigned n, unsigned idle) {
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  for (unsigned i = 0; i < n + idle; i++) {
    pid_t p = fork();
    CHECK(p >= 0);
    if (p) continue;
    close(ready[0]);
    close(go[1]);
    void *m = NULL;
    if (i < n && cudaMalloc(&m, 1u << 20) != 0) _exit(2);
    char x = 1;
    if (write(ready[1], &x, 1) != 1) _exit(3);
    if (read(go[0], &x, 1) < 0) _exit(4); /* EOF: go */
    if (m) cudaFree(m);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char x;
  for (unsigned i = 0; i < n + idle; i++)
    CHECK(read(ready[0], &x, 1) == 1);
  const char *path = getenv("VRAMLEDGER_COUNTERS");
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  struct vl_counters *c = mmap(NULL, sizeof *c, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(c != MAP_FAILED);
  close(fd);
  unsigned taken = 0;
  uint64_t bytes = 0;
  for (unsigned i = 0; i < VL_COUNTERS_SLOTS; i++)
    if (c->slot[i].pid) {
      taken++;
      bytes += c->slot[i].live;
    }
  unsigned want = n < VL_COUNTERS_SLOTS ? n : VL_COUNTERS_SLOTS;
  close(go[1]);
  while (wait(NULL) > 0) {
  }
  printf("%u slots taken, %llu MiB in them\n", taken, (unsigned long long)(bytes >> 20));
  CHECK(taken == want);
  CHECK(bytes == (uint64_t)want << 20);
  return 0;
}

static int slots(const char *self, unsigned n, unsigned idle) {
  char path[] = "/tmp/vl-table-test-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  struct vl_counters *c = make_counters(path);
  /* a file that says it has rings but is too short for them: the
   * processes count into its slots and write nothing past its end (a
   * write there would kill them: SIGBUS) */
  c->ring_ms = VL_COUNTERS_RING_MS;
  char err[65536], a1[16], a2[16];
  snprintf(a1, sizeof a1, "%u", n);
  snprintf(a2, sizeof a2, "%u", idle);
  char *args[] = {(char *)self, "slots-child", a1, a2, NULL};
  int rc = again(self, path, args, err, sizeof err);
  unlink(path);
  fputs(err, stderr);
  CHECK(rc == 0);
  unsigned over = n > VL_COUNTERS_SLOTS ? n - VL_COUNTERS_SLOTS : 0;
  CHECK(c->no_slot == over);
  CHECK(c->lost == (over ? VL_COUNTERS_LOST_NO_SLOT : 0u));
  CHECK(lines_with(err, "vramledger-preload: every counter slot is taken") == (over ? 1u : 0u));
  printf("table_test slots: %u allocating, %u idle: %u without a slot, said %s\n", n, idle, over,
         over ? "once" : "never");
  return 0;
}

/* one thread of `threads` and `runtime`: P pairs, 32 held, of size 4096 +
 * its index, through the driver's handles or the runtime's pointers */
enum { HELD = 32 };
struct pair_api {
  bool (*get)(uintptr_t *h, size_t n);
  bool (*put)(uintptr_t h);
};
static bool handle_get(uintptr_t *h, size_t n) {
  unsigned long long x;
  if (create(&x, n, NULL, 0) != 0) return false;
  *h = (uintptr_t)x;
  return true;
}
static bool handle_put(uintptr_t h) { return release(h) == 0; }
static bool pointer_get(uintptr_t *h, size_t n) {
  void *p;
  if (cudaMalloc(&p, n) != 0) return false;
  *h = (uintptr_t)p;
  return true;
}
static bool pointer_put(uintptr_t h) { return cudaFree((void *)h) == 0; }
static const struct pair_api handles = {handle_get, handle_put},
                             pointers = {pointer_get, pointer_put};

static const struct pair_api *t_api;
static unsigned long long t_pairs;
static pthread_barrier_t t_holding;
static void *t_work(void *arg) {
  uintptr_t id = (uintptr_t)arg, h[HELD];
  for (int i = 0; i < HELD; i++)
    CHECK(t_api->get(&h[i], 4096 + id));
  pthread_barrier_wait(&t_holding); /* the most that is ever live */
  for (unsigned long long k = 0; k < t_pairs; k++) {
    unsigned i = (unsigned)(k % HELD);
    CHECK(t_api->put(h[i]));
    CHECK(t_api->get(&h[i], 4096 + id));
  }
  for (int i = 0; i < HELD; i++)
    CHECK(t_api->put(h[i]));
  return NULL;
}

static int threads(unsigned n, unsigned long long pairs) {
  driver();
  t_api = &handles;
  t_pairs = pairs;
  pthread_t t[64];
  CHECK(n >= 1 && n <= 64);
  CHECK(pthread_barrier_init(&t_holding, NULL, n) == 0);
  unsigned long long keep;
  CHECK(create(&keep, 12345, NULL, 0) == 0);
  uint64_t most = 12345;
  for (uintptr_t i = 0; i < n; i++) {
    most += HELD * (4096 + i);
    CHECK(pthread_create(&t[i], NULL, t_work, (void *)i) == 0);
  }
  for (unsigned i = 0; i < n; i++)
    CHECK(pthread_join(t[i], NULL) == 0);
  uint64_t l = 0, peak = 0;
  counts(&l, &peak);
  CHECK(l == 12345);
  CHECK(peak == most); /* raised side by side by the shards, never lowered */
  CHECK(release(keep) == 0);
  CHECK(live() == 0);
  printf("table_test threads: %u x %llu pairs: live bytes and peak exact\n", n, pairs);
  return 0;
}

static void *r_burst(void *arg) {
  (void)arg;
  enum { BURST = 20000 };
  void **b = malloc(BURST * sizeof *b);
  CHECK(b);
  for (int i = 0; i < BURST; i++)
    CHECK(cudaMalloc(&b[i], 1) == 0);
  for (int i = 0; i < BURST; i++)
    CHECK(cudaFree(b[i]) == 0);
  free(b);
  return NULL;
}

static int runtime(unsigned n, unsigned long long pairs) {
  t_api = &pointers;
  t_pairs = pairs;
  pthread_t t[65];
  CHECK(n >= 1 && n <= 64);
  CHECK(pthread_barrier_init(&t_holding, NULL, n) == 0);
  *(void **)&counts = dlsym(RTLD_DEFAULT, "vl_preload_counts");
  CHECK(counts);
  void *keep;
  CHECK(cudaMalloc(&keep, 12345) == 0);
  for (uintptr_t i = 0; i < n; i++)
    CHECK(pthread_create(&t[i], NULL, t_work, (void *)i) == 0);
  CHECK(pthread_create(&t[n], NULL, r_burst, NULL) == 0);
  for (unsigned i = 0; i <= n; i++)
    CHECK(pthread_join(t[i], NULL) == 0);
  CHECK(live() == 12345);
  CHECK(cudaFree(keep) == 0);
  CHECK(live() == 0);
  printf("table_test runtime: %u x %llu pairs and a burst: live bytes exact\n", n, pairs);
  return 0;
}

/* one thread of `pools`: P pairs from the device's pool, 8 blocks held */
static void *p_work(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  enum { BLOCKS = 8 };
  void *b[BLOCKS] = {0}, *pool;
  CHECK(cudaDeviceGetMemPool(&pool, 0) == 0);
  for (unsigned long long k = 0; k < t_pairs; k++) {
    unsigned i = (unsigned)(k % BLOCKS);
    if (b[i]) CHECK(cudaFreeAsync(b[i], NULL) == 0);
    size_t n = (size_t)((k * 2654435761u + id * 40503u) % (3u << 20)) + 1;
    CHECK(cudaMallocAsync(&b[i], n, NULL) == 0);
    if (k % 61 == id % 61) CHECK(cudaMemPoolTrimTo(pool, 0) == 0);
    if (k % 97 == id % 97) CHECK(cudaDeviceSynchronize() == 0);
  }
  for (int i = 0; i < BLOCKS; i++)
    CHECK(cudaFreeAsync(b[i], NULL) == 0);
  return NULL;
}

/* the overlap of `pools`: o_trim's reading stops in the stub driver
 * (o_hook, once) until the main thread has changed the pool */
static sem_t o_read, o_changed;
static void o_hook(void) {
  static atomic_int once;
  if (atomic_exchange(&once, 1)) return;
  CHECK(sem_post(&o_read) == 0);
  while (sem_wait(&o_changed) != 0)
    ;
}
static void *o_trim(void *pool) {
  CHECK(cudaMemPoolTrimTo(pool, 0) == 0);
  return NULL;
}

/* one thread of `pools`' second part: pools of its own made, drawn from
 * and destroyed, their slots taken again by the others' */
static void *p_own(void *arg) {
  (void)arg;
  for (int r = 0; r < 200; r++) {
    void *own, *x;
    CHECK(cudaMemPoolCreate(&own, NULL) == 0);
    CHECK(cudaMallocFromPoolAsync(&x, 3u << 20, own, NULL) == 0);
    CHECK(cudaFreeAsync(x, NULL) == 0);
    CHECK(cudaMemPoolDestroy(own) == 0);
  }
  return NULL;
}

static int pool_threads(unsigned n, unsigned long long pairs) {
  driver();
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL), *pool;
  int (*reserved)(void *, int, void *) = lib ? dlsym(lib, "cuMemPoolGetAttribute") : NULL;
  CHECK(reserved);
  CHECK(cudaDeviceGetMemPool(&pool, 0) == 0);
  t_pairs = pairs;
  pthread_t t[64];
  CHECK(n >= 1 && n <= 32); /* the stub driver holds 256 blocks */
  for (uintptr_t i = 0; i < n; i++)
    CHECK(pthread_create(&t[i], NULL, p_work, (void *)i) == 0);
  for (unsigned i = 0; i < n; i++)
    CHECK(pthread_join(t[i], NULL) == 0);
  unsigned long long v = 0, v2 = 0;
  CHECK(reserved(pool, 5, &v) == 0); /* CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT */
  CHECK(live() == v);
  /* pools made and destroyed side by side (4 threads, 7 pools): each gives
   * back what it reserved */
  for (uintptr_t i = 0; i < 4; i++)
    CHECK(pthread_create(&t[i], NULL, p_own, NULL) == 0);
  for (unsigned i = 0; i < 4; i++)
    CHECK(pthread_join(t[i], NULL) == 0);
  CHECK(live() == v);
  /* the pool changes while another thread's reading is in flight: that
   * thread reads again before it lets go (the change's own thread does not
   * wait for it) */
  void (**hook)(void) = dlsym(lib, "stub_after_pool_read");
  CHECK(hook);
  CHECK(sem_init(&o_read, 0, 0) == 0 && sem_init(&o_changed, 0, 0) == 0);
  *hook = o_hook;
  CHECK(pthread_create(&t[0], NULL, o_trim, pool) == 0);
  CHECK(sem_wait(&o_read) == 0); /* its reading is taken, not yet counted */
  void *x;
  CHECK(cudaMallocAsync(&x, 5u << 20, NULL) == 0);
  CHECK(sem_post(&o_changed) == 0);
  CHECK(pthread_join(t[0], NULL) == 0);
  *hook = NULL;
  CHECK(reserved(pool, 5, &v2) == 0);
  CHECK(v2 == 6u << 20 && live() == v2);
  CHECK(cudaFreeAsync(x, NULL) == 0);
  CHECK(cudaMemPoolTrimTo(pool, 0) == 0);
  CHECK(live() == 0);
  printf("table_test pools: %u x %llu pairs: live bytes the pool's reservation (%llu B); a change "
         "during another thread's reading read again (%llu B)\n",
         n, pairs, v, v2);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "churn") == 0) return churn(argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000);
  if (strcmp(mode, "threads") == 0 && argc > 3)
    return threads((unsigned)strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
  if (strcmp(mode, "runtime") == 0 && argc > 3)
    return runtime((unsigned)strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
  if (strcmp(mode, "pools") == 0 && argc > 3)
    return pool_threads((unsigned)strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
  if (strcmp(mode, "full") == 0) return full("/proc/self/exe");
  if (strcmp(mode, "full-child") == 0) return full_child();
  if (strcmp(mode, "slots") == 0 && argc > 3)
    return slots("/proc/self/exe", (unsigned)strtoul(argv[2], NULL, 10),
                 (unsigned)strtoul(argv[3], NULL, 10));
  if (strcmp(mode, "slots-child") == 0 && argc > 3)
    return slots_child((unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10));
  fprintf(stderr, "usage: table_test churn PAIRS | threads N PAIRS | runtime N PAIRS | pools N "
                  "PAIRS | full | slots N IDLE\n");
  return 2;
}
