/* Three cudaMalloc calls of 1 MiB through the PLT (the stub runtime's),
 * then the bytes the interposer counts live ("live N", 0 without it):
 * what dlsym_cuda.sh's wrapper wraps. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);

int main(void) {
  void *p[3];
  for (int i = 0; i < 3; i++)
    if (cudaMalloc(&p[i], 1 << 20) != 0) return 1;
  void (*counts)(uint64_t *, uint64_t *) =
      (void (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "vl_preload_counts");
  uint64_t live = 0, peak = 0;
  if (counts) counts(&live, &peak);
  printf("live %llu\n", (unsigned long long)live);
  for (int i = 0; i < 3; i++)
    cudaFree(p[i]);
  return 0;
}
