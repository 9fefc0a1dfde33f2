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

static int load(void) {
  if (drv_alloc) return 0;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  get_proc_fn gp = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!gp) return -1;
  gp("cuMemAlloc", (void **)&drv_alloc, 12000, 0, NULL);
  gp("cuMemFree", (void **)&drv_free, 12000, 0, NULL);
  return drv_alloc && drv_free ? 0 : -1;
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
cudaError_t cudaMallocAsync(void **p, size_t n, void *s) {
  (void)s;
  return cudaMalloc(p, n);
}
cudaError_t cudaFreeAsync(void *p, void *s) {
  (void)s;
  return cudaFree(p);
}
cudaError_t cudaGetDriverEntryPoint(const char *sym, void **pfn, unsigned long long flags,
                                    void *st) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 35;
  get_proc_fn gp = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  return gp && gp(sym, pfn, 12000, flags, st) == 0 ? 0 : 500;
}
