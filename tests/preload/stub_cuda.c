/* A stub libcuda.so.1 for tests: cuGetProcAddress and the memory functions
 * the interposer wraps, backed by malloc. Counts what it handed out so the
 * test can compare with the interposer. */
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
  *h = next_handle++;
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

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                             void *st) {
  (void)ver, (void)flags, (void)st;
  static const struct {
    const char *name;
    void *fn;
  } tab[] = {{"cuMemAlloc", (void *)cuMemAlloc_v2},
             {"cuMemFree", (void *)cuMemFree_v2},
             {"cuMemCreate", (void *)cuMemCreate},
             {"cuMemRelease", (void *)cuMemRelease},
             {"cuMemMap", (void *)cuMemMap}};
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strcmp(sym, tab[i].name) == 0) {
      *pfn = tab[i].fn;
      return 0;
    }
  *pfn = NULL;
  return 500; /* CUDA_ERROR_NOT_FOUND */
}
