/* The scratch of ATen's CUDA column sums: the gradient of a Linear
 * layer's bias is grad_output summed over its rows (rows x cols,
 * contiguous). When one output's rows are split over several thread
 * blocks, the kernel takes a block of partial results from the caching
 * allocator for the launch and frees it when it returns
 * (aten/src/ATen/native/cuda/Reduce.cuh: setReductionConfig,
 * ReduceConfig::global_memory_size()). This is that function for the one
 * layout, step by step; python/vramledger/cuda_reduce.py has the general
 * one, and both match the allocator's own history on an H200 over 2,040
 * reductions (bench/results/cuda-reduce/). The semaphores beside it (4 B
 * a block column) are left out: a small-pool block. */
#include "internal.h"

static uint64_t last_pow2(uint64_t n) {
  uint64_t p = 1;
  while (p * 2 <= n)
    p *= 2;
  return p;
}

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t vl__column_sum_scratch(uint64_t rows, uint64_t cols, uint64_t elem_bytes,
                                uint64_t acc_bytes, unsigned sms, unsigned threads_per_sm) {
  /* past INT32_MAX bytes TensorIterator halves the rows, a launch each
   * (with_32bit_indexing), one after the other: the larger half's */
  while (rows > 1 && rows * cols * elem_bytes > 0x7fffffffull)
    rows -= rows / 2;
  /* one output (cols 1) reduces across a block, and its partials are a
   * few bytes a block; one row is a copy */
  if (rows < 2 || cols < 2 || !sms || !threads_per_sm) return 0;
  uint64_t vec = 4; /* vectorised along the outputs: a divisor of cols */
  while (cols % vec)
    vec /= 2;
  const uint64_t max_threads = 512 / vec; /* MAX_NUM_THREADS over output_vec_size */
  const uint64_t dim0 = cols / vec, dim1 = rows;
  const uint64_t d0 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
  const uint64_t d1 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
  uint64_t bw = vl__min(d0, 32); /* the warp */
  const uint64_t bh = vl__min(d1, max_threads / bw);
  bw = vl__min(d0, max_threads / bh);
  uint64_t step_out = bw, step_in = 1; /* lanes split the outputs */
  if (rows >= bh * 16 || rows >= 256)
    step_in = bh; /* warps split the rows */
  else
    return 0; /* warps split the outputs: no global reduce */
  const uint64_t per_thread = div_up(rows, step_in);
  const uint64_t target = (uint64_t)sms * (threads_per_sm / (bw * bh));
  const uint64_t grid = div_up(dim0, step_out);
  if (per_thread < 256 || grid > target) return 0;
  uint64_t ctas = vl__min(div_up(target, grid), div_up(per_thread, 16));
  ctas = vl__max(ctas, div_up(per_thread, 256));
  if (ctas < 2) return 0;
  return acc_bytes * cols * ctas * bw * vec;
}
