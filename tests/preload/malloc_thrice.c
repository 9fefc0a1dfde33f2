/* Three cudaMalloc calls of 1 MiB: through the PLT, through the function
 * dlsym(RTLD_DEFAULT) finds (the first definition: a wrapper's, the
 * interposer's or the stub runtime's), and through the PLT again; then
 * the bytes the interposer counts live ("live N", 0 without it): what
 * dlsym_cuda.sh's wrapper wraps. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);

int main(void) {
  int (*found)(void **, size_t) = (int (*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
  void *p[3];
  if (!found || cudaMalloc(&p[0], 1 << 20) != 0 || found(&p[1], 1 << 20) != 0 ||
      cudaMalloc(&p[2], 1 << 20) != 0)
    return 1;
  void (*counts)(uint64_t *, uint64_t *) =
      (void (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "vl_preload_counts");
  uint64_t live = 0, peak = 0;
  if (counts) counts(&live, &peak);
  printf("live %llu\n", (unsigned long long)live);
  for (int i = 0; i < 3; i++)
    cudaFree(p[i]);
  return 0;
}
