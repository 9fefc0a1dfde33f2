/* A stub libcuda.so.1 for tests: cuGetProcAddress and the memory functions
 * the interposer wraps, backed by malloc. Counts what it handed out so the
 * test can compare with the interposer. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

unsigned long long stub_driver_live;

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  void *m = malloc(n ? n : 1);
  if (!m) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  stub_driver_live += n;
  return 0;
}
/* sizes are not tracked here; tests free what they allocated */
CUresult cuMemFree_v2(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  return 0;
}
static unsigned long long next_handle = 1;
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const void *prop,
                     unsigned long long f) {
  (void)prop, (void)f, (void)n;
  *h = __atomic_fetch_add(&next_handle, 1, __ATOMIC_RELAXED); /* threads: each its own */
  return 0;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  (void)h;
  return 0;
}
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,
                  unsigned long long f) {
  (void)p, (void)n, (void)off, (void)h, (void)f;
  return 0;
}

/* Stream-ordered pools, as the driver keeps them with the release
 * threshold at its maximum (PyTorch's setting): a pool reserves 2 MiB
 * chunks as its use grows and keeps freed blocks until trimmed. */
#define CHUNK (2ull << 20)
struct stub_pool {
  unsigned long long used, reserved;
  int made; /* created and not destroyed ([0] always) */
};
#define STUB_POOLS 8
static struct stub_pool stub_pools[STUB_POOLS] = {{0, 0, 1}}; /* [0]: the device's default pool */
static pthread_mutex_t stub_pool_lock = PTHREAD_MUTEX_INITIALIZER; /* pools and blocks */
static struct {
  CUdeviceptr p;
  size_t n;
  struct stub_pool *pool;
} blocks[256];

static CUresult pool_take_locked(CUdeviceptr *p, size_t n, struct stub_pool *pl) {
  for (int i = 0; i < 256; i++)
    if (!blocks[i].p) {
      void *m = malloc(n ? n : 1);
      if (!m) return 2;
      *p = blocks[i].p = (CUdeviceptr)(uintptr_t)m;
      blocks[i].n = n, blocks[i].pool = pl;
      pl->used += n;
      unsigned long long need = (pl->used + CHUNK - 1) / CHUNK * CHUNK;
      if (need > pl->reserved) pl->reserved = need;
      return 0;
    }
  return 2;
}
static CUresult pool_take(CUdeviceptr *p, size_t n, struct stub_pool *pl) {
  pthread_mutex_lock(&stub_pool_lock);
  CUresult r = pool_take_locked(p, n, pl);
  pthread_mutex_unlock(&stub_pool_lock);
  return r;
}
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) {
  (void)s;
  return pool_take(p, n, &stub_pools[0]);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, void *pool, void *s) {
  (void)s;
  return pool_take(p, n, pool);
}
CUresult cuMemFreeAsync(CUdeviceptr p, void *s) {
  (void)s;
  CUresult r = 1;
  pthread_mutex_lock(&stub_pool_lock);
  for (int i = 0; i < 256; i++)
    if (blocks[i].p == p) {
      blocks[i].pool->used -= blocks[i].n; /* the pool keeps the memory */
      free((void *)(uintptr_t)p);
      blocks[i].p = 0;
      r = 0;
      break;
    }
  pthread_mutex_unlock(&stub_pool_lock);
  return r;
}
CUresult cuMemPoolTrimTo(void *pool, size_t keep) {
  struct stub_pool *pl = pool;
  pthread_mutex_lock(&stub_pool_lock);
  unsigned long long floor = (pl->used + CHUNK - 1) / CHUNK * CHUNK;
  unsigned long long k = keep < pl->reserved ? keep : pl->reserved;
  pl->reserved = floor > k ? floor : k;
  pthread_mutex_unlock(&stub_pool_lock);
  return 0;
}
void (*stub_after_pool_read)(void);
CUresult cuMemPoolGetAttribute(void *pool, int attr, void *v) {
  if (attr != 5) return 1; /* only CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT here */
  pthread_mutex_lock(&stub_pool_lock);
  *(unsigned long long *)v = ((struct stub_pool *)pool)->reserved;
  pthread_mutex_unlock(&stub_pool_lock);
  if (stub_after_pool_read) stub_after_pool_read(); /* a test's: the reading is now old */
  return 0;
}
/* a destroyed pool's slot is made again: the driver may hand out a
 * destroyed pool's handle to a new one */
CUresult cuMemPoolCreate(void **pool, const void *props) {
  (void)props;
  CUresult r = 2;
  pthread_mutex_lock(&stub_pool_lock);
  for (int i = 1; i < STUB_POOLS && r; i++)
    if (!stub_pools[i].made) {
      stub_pools[i] = (struct stub_pool){0, 0, 1};
      *pool = &stub_pools[i];
      r = 0;
    }
  pthread_mutex_unlock(&stub_pool_lock);
  return r;
}
CUresult cuMemPoolDestroy(void *pool) {
  pthread_mutex_lock(&stub_pool_lock);
  *(struct stub_pool *)pool = (struct stub_pool){0, 0, 0};
  pthread_mutex_unlock(&stub_pool_lock);
  return 0;
}
CUresult cuCtxGetDevice(int *dev) {
  *dev = 0;
  return 0;
}
CUresult cuDeviceGetMemPool(void **pool, int dev) {
  if (dev != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *pool = &stub_pools[0];
  return 0;
}

/* cuStreamSynchronize in its two variants: legacy default stream [0] and
 * per-thread default stream [1]; a test checks each caller gets its own */
unsigned long long stub_sync_calls[2];
CUresult cuStreamSynchronize(void *s) {
  (void)s;
  stub_sync_calls[0]++;
  return 0;
}
CUresult cuStreamSynchronize_ptsz(void *s) {
  (void)s;
  stub_sync_calls[1]++;
  return 0;
}

/* As the real driver: cuGetProcAddress (4 arguments, CUDA 11.3) and
 * cuGetProcAddress_v2 (5, CUDA 12.0: writes the status); asked for itself,
 * it hands out the ABI of the version asked for; the flag
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (2) gives _ptsz variants. */
CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                             void *st);

static void *lookup(const char *sym, int ver, unsigned long long flags) {
  static const struct {
    const char *name;
    void *fn;
  } tab[] = {{"cuMemAlloc", (void *)cuMemAlloc_v2},
             {"cuMemFree", (void *)cuMemFree_v2},
             {"cuMemCreate", (void *)cuMemCreate},
             {"cuMemRelease", (void *)cuMemRelease},
             {"cuMemMap", (void *)cuMemMap},
             {"cuMemAllocAsync", (void *)cuMemAllocAsync},
             {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
             {"cuMemFreeAsync", (void *)cuMemFreeAsync},
             {"cuMemPoolTrimTo", (void *)cuMemPoolTrimTo},
             {"cuMemPoolCreate", (void *)cuMemPoolCreate},
             {"cuMemPoolDestroy", (void *)cuMemPoolDestroy}};
  if (strcmp(sym, "cuGetProcAddress") == 0)
    return ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
  if (strcmp(sym, "cuStreamSynchronize") == 0)
    return flags & 2 ? (void *)cuStreamSynchronize_ptsz : (void *)cuStreamSynchronize;
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strcmp(sym, tab[i].name) == 0) return tab[i].fn;
  return NULL;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
  *pfn = lookup(sym, ver, flags);
  return *pfn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                             void *st) {
  *pfn = lookup(sym, ver, flags);
  if (st) *(int *)st = *pfn ? 0 : 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return *pfn ? 0 : 500;
}
