// Two plain CUDA programs for the interposer, one by its first argument
// (built with nvcc by bench/gpu/interposer.sh and probe.sh):
//
//   cuda_checks alloc-bench [N]
//   Allocation-heavy micro-benchmark for the interposer: N cudaMalloc/cudaFree
//   pairs of a few sizes; prints ns per pair. Run with and without
//   LD_PRELOAD=libvramledger-preload.so (bench/gpu/interposer.sh).
//
//   cuda_checks pool-check
//   The interposer's live bytes against a plain CUDA C program's own
//   bookkeeping of its stream-ordered pool: at each quiet point the program
//   reads cudaMemPoolAttrReservedMemCurrent of the device's pool (what it
//   holds from the driver) and vl_preload_counts() (the interposer, when
//   preloaded), and prints one JSON line. Pool left at its default release
//   threshold (0) first, then at the maximum, as PyTorch sets it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>

static int alloc_bench(long n) {
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

typedef void (*counts_fn)(uint64_t *, uint64_t *);

static void point(const char *tag, cudaMemPool_t pool, counts_fn counts) {
  cudaDeviceSynchronize();
  uint64_t reserved = 0, used = 0, live = 0, peak = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  if (counts) counts(&live, &peak);
  printf("{\"point\": \"%s\", \"pool_reserved\": %llu, \"pool_used\": %llu, \"interposer_live\": "
         "%llu, \"diff\": %lld}\n",
         tag, (unsigned long long)reserved, (unsigned long long)used, (unsigned long long)live,
         (long long)live - (long long)reserved);
}

static int pool_check(void) {
  counts_fn counts = (counts_fn)dlsym(RTLD_DEFAULT, "vl_preload_counts");
  printf("{\"point\": \"start\", \"interposer_found\": %s}\n", counts ? "true" : "false");
  cudaFree(0);
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaStream_t s;
  cudaStreamCreate(&s);
  for (int round = 0; round < 2; round++) {
    uint64_t thr = round ? UINT64_MAX : 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
    const char *r = round ? "threshold-max" : "threshold-0";
    char tag[64];
    void *p[64];
    size_t sizes[] = {512, 1 << 20, 3 << 20, 20 << 20, 100 << 20, 7000, 64 << 20, 1 << 30};
    for (int i = 0; i < 64; i++)
      cudaMallocAsync(&p[i], sizes[i % 8], s);
    snprintf(tag, sizeof tag, "%s: 64 live", r);
    point(tag, pool, counts);
    for (int i = 0; i < 64; i += 2)
      cudaFreeAsync(p[i], s);
    snprintf(tag, sizeof tag, "%s: half freed", r);
    point(tag, pool, counts);
    for (int i = 0; i < 32; i++)
      cudaMallocAsync(&p[2 * i], sizes[(i * 3) % 8] / 2 + 1, s);
    snprintf(tag, sizeof tag, "%s: reallocated", r);
    point(tag, pool, counts);
    for (int i = 0; i < 64; i++)
      cudaFreeAsync(p[i], s);
    snprintf(tag, sizeof tag, "%s: all freed", r);
    point(tag, pool, counts);
    cudaMemPoolTrimTo(pool, 0);
    snprintf(tag, sizeof tag, "%s: trimmed", r);
    point(tag, pool, counts);
  }
  // a pool of the program's own, then destroyed
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t own;
  cudaMemPoolCreate(&own, &props);
  void *q;
  cudaMallocFromPoolAsync(&q, 256 << 20, own, s);
  cudaDeviceSynchronize();
  uint64_t own_reserved = 0, live = 0, peak = 0;
  cudaMemPoolGetAttribute(own, cudaMemPoolAttrReservedMemCurrent, &own_reserved);
  if (counts) counts(&live, &peak);
  printf("{\"point\": \"own pool: 256 MiB\", \"pool_reserved\": %llu, \"interposer_live\": %llu, "
         "\"diff\": %lld}\n",
         (unsigned long long)own_reserved, (unsigned long long)live,
         (long long)live - (long long)own_reserved);
  cudaFreeAsync(q, s);
  cudaStreamSynchronize(s);
  cudaMemPoolDestroy(own);
  if (counts) counts(&live, &peak);
  printf("{\"point\": \"own pool destroyed\", \"pool_reserved\": 0, \"interposer_live\": %llu, "
         "\"diff\": %lld}\n",
         (unsigned long long)live, (long long)live);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "alloc-bench") == 0)
    return alloc_bench(argc > 2 ? atol(argv[2]) : 1000000);
  if (argc > 1 && strcmp(argv[1], "pool-check") == 0) return pool_check();
  fprintf(stderr, "usage: %s alloc-bench [N] | pool-check\n", argv[0]);
  return 2;
}
