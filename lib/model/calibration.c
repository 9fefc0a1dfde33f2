/* The measured constants of the model (calibration.h), one row each, on
 * the reference stack: NVIDIA H200, CUDA 13.0, PyTorch 2.11. */
#include <stddef.h>

#include "calibration.h"

#if !defined(VL_REFERENCE_SM_COUNT) || !defined(VL_REFERENCE_THREADS_PER_SM)
#error "the build defines the reference card's figures (cmake/reference_gpu.cmake)"
#endif

static const struct vl__calibration rows[VL_CAL_COUNT] = {
    /* NVML process memory - max_memory_reserved during real training
     * steps: 0.725-0.758 GiB over 36 runs (kernels load lazily, so it grows
     * past the 586 MiB seen after one matmul in
     * data/reference/h200-torch-2.11/basics.json) */
    [VL_CAL_CUDA_CONTEXT] = {"cuda_context_bytes", 805306368.0, "bytes",
                             "data/reference/h200-torch-2.11/calibration.json",
                             "median of NVML process - max_memory_reserved over its 36 training "
                             "runs"},
    /* a process that only runs generate() loads fewer kernels (no
     * backward, no optimizer; CUDA loads modules lazily): 678-734 MiB;
     * not with expandable segments, whose generate() process holds as
     * much as a training one (vl_context_bytes) */
    [VL_CAL_CUDA_CONTEXT_INFER] =
        {"cuda_context_infer_bytes", 731906048.0, "bytes",
         "data/reference/h200-torch-2.11/calibration.json, types-measured.json and "
         "infer-*.json",
         "median of NVML process - max_memory_reserved over the 14 "
         "generate() runs of these"},
    /* a rank's memory beyond one GPU's context when ranks talk: NCCL's own
     * buffers (libnccl.so.2's driver allocations: 484 MiB a rank) and the
     * larger context NCCL's kernels and peers bring. 1,679,818,752 B under
     * FSDP full shard and shard-grad-op; pipeline stages' point-to-point
     * adds 161 MB more (not counted). Was 256 MiB (4 MiB NCCL_BUFFSIZE x 2
     * directions x 16 channels x 2 ring peers), -0.56 GiB a rank. */
    [VL_CAL_NCCL] = {"nccl_bytes", 876609536.0, "bytes",
                     "data/reference/h200-torch-2.11/per-gpu-overhead.txt",
                     "NVML's per-GPU peak - the rank's max_memory_reserved on the four GPT-2 DDP "
                     "runs over 2 H200s (1,681,915,904 B on each), less cuda_context_bytes"},
    /* they size the partials of ATen's CUDA reductions (Reduce.cuh), a
     * linear's bias gradient among them; the H100 SXM has the same. Their
     * values are the catalog's h200 entry (data/gpus.json), which the
     * build reads (cmake/reference_gpu.cmake): written there only */
    [VL_CAL_SM_COUNT] = {"sm_count", VL_REFERENCE_SM_COUNT, "", "bench/results/cuda-reduce/",
                         "cudaDeviceProp multiProcessorCount read on the H200"},
    [VL_CAL_THREADS_PER_SM] = {"threads_per_sm", VL_REFERENCE_THREADS_PER_SM, "",
                               "bench/results/cuda-reduce/",
                               "cudaDeviceProp maxThreadsPerMultiProcessor read on the H200"},
    /* cached free blocks among the churning tensors (activations and
     * temporaries) where no replay gives the reserve; it cannot cover the
     * runs where freed large blocks are split and re-requested (up to
     * 28 %) */
    [VL_CAL_CHURN] = {"allocator_churn", 0.05, "fraction",
                      "data/reference/h200-torch-2.11/calibration.json",
                      "fitted: the value that fits most of its runs (bench/accuracy/compare.py)"},
    [VL_CAL_CHURN_EXPANDABLE] = {"allocator_churn_expandable", 0.02, "fraction",
                                 "data/reference/h200-torch-2.11/expandable-segments.json",
                                 "chosen within the 0.2-3 % measured on the runs that fragment "
                                 "most"},
};

const struct vl__calibration *vl__calibration(enum vl__cal id) {
  return (unsigned)id < VL_CAL_COUNT ? &rows[id] : NULL;
}
