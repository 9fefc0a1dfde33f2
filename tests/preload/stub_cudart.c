/* A stub libcudart for tests. Like the real runtime, cudaMalloc allocates
 * through the driver, reached with cuGetProcAddress from a dlopen'ed
 * libcuda.so.1: the interposer must count it once, not twice. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int cudaError_t;
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*get_proc_fn)(const char *, void **, int, unsigned long long, void *);

static CUresult (*drv_alloc)(CUdeviceptr *, size_t);
static CUresult (*drv_free)(CUdeviceptr);
static CUresult (*drv_alloc_async)(CUdeviceptr *, size_t, void *);
static CUresult (*drv_alloc_pool)(CUdeviceptr *, size_t, void *, void *);
static CUresult (*drv_free_async)(CUdeviceptr, void *);
static CUresult (*drv_trim)(void *, size_t);
static CUresult (*drv_pool_create)(void **, const void *);
static CUresult (*drv_pool_destroy)(void *);

static int load(void) {
  if (drv_alloc) return 0;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  get_proc_fn gp = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!gp) return -1;
  gp("cuMemAlloc", (void **)&drv_alloc, 12000, 0, NULL);
  gp("cuMemFree", (void **)&drv_free, 12000, 0, NULL);
  gp("cuMemAllocAsync", (void **)&drv_alloc_async, 12000, 0, NULL);
  gp("cuMemAllocFromPoolAsync", (void **)&drv_alloc_pool, 12000, 0, NULL);
  gp("cuMemFreeAsync", (void **)&drv_free_async, 12000, 0, NULL);
  gp("cuMemPoolTrimTo", (void **)&drv_trim, 12000, 0, NULL);
  gp("cuMemPoolCreate", (void **)&drv_pool_create, 12000, 0, NULL);
  gp("cuMemPoolDestroy", (void **)&drv_pool_destroy, 12000, 0, NULL);
  return drv_alloc && drv_free && drv_alloc_async && drv_free_async ? 0 : -1;
}

cudaError_t cudaMalloc(void **p, size_t n) {
  if (load()) return 35;
  CUdeviceptr d;
  if (drv_alloc(&d, n)) return 2;
  *p = (void *)(uintptr_t)d;
  return 0;
}
cudaError_t cudaFree(void *p) {
  if (!p) return 0;
  if (load()) return 35;
  return drv_free((CUdeviceptr)(uintptr_t)p) ? 1 : 0;
}
/* the stream-ordered allocator: from the device's pool, through the driver */
cudaError_t cudaMallocAsync(void **p, size_t n, void *s) {
  if (load()) return 35;
  CUdeviceptr d;
  if (drv_alloc_async(&d, n, s)) return 2;
  *p = (void *)(uintptr_t)d;
  return 0;
}
cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, void *pool, void *s) {
  if (load()) return 35;
  CUdeviceptr d;
  if (drv_alloc_pool(&d, n, pool, s)) return 2;
  *p = (void *)(uintptr_t)d;
  return 0;
}
cudaError_t cudaFreeAsync(void *p, void *s) {
  if (!p) return 0;
  if (load()) return 35;
  return drv_free_async((CUdeviceptr)(uintptr_t)p, s) ? 1 : 0;
}
cudaError_t cudaMemPoolTrimTo(void *pool, size_t keep) {
  return load() ? 35 : drv_trim(pool, keep) ? 1 : 0;
}
cudaError_t cudaMemPoolCreate(void **pool, const void *props) {
  return load() ? 35 : drv_pool_create(pool, props) ? 2 : 0;
}
cudaError_t cudaMemPoolDestroy(void *pool) { return load() ? 35 : drv_pool_destroy(pool) ? 1 : 0; }
cudaError_t cudaDeviceGetMemPool(void **pool, int dev) {
  if (load()) return 35;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CUresult (*get)(void **, int) =
      lib ? (CUresult(*)(void **, int))dlsym(lib, "cuDeviceGetMemPool") : NULL;
  return get && get(pool, dev) == 0 ? 0 : 1;
}
cudaError_t cudaDeviceSynchronize(void) { return 0; }
cudaError_t cudaStreamSynchronize(void *s) {
  (void)s;
  return 0;
}
cudaError_t cudaGetDriverEntryPoint(const char *sym, void **pfn, unsigned long long flags,
                                    void *st) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 35;
  get_proc_fn gp = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  return gp && gp(sym, pfn, 12000, flags, st) == 0 ? 0 : 500;
}
