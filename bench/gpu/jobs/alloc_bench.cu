// Allocation-heavy micro-benchmark for the interposer: N cudaMalloc/cudaFree
// pairs of a few sizes; prints ns per pair. Run with and without
// LD_PRELOAD=libvramledger-preload.so (bench/gpu/interposer.sh).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  void *warm;
  cudaMalloc(&warm, 1 << 20);
  cudaFree(warm);
  static const size_t sizes[] = {512, 4096, 1 << 20, 2 << 20};
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) {
    void *p;
    if (cudaMalloc(&p, sizes[i & 3]) != cudaSuccess) return 1;
    if (cudaFree(p) != cudaSuccess) return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (double)n;
  printf("{\"pairs\": %ld, \"ns_per_pair\": %.1f}\n", n, ns);
  return 0;
}
