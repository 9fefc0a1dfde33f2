/* The constants of PyTorch, CUDA libraries and bitsandbytes that the model
 * uses, each once, under its upstream name and with the file it comes
 * from, so that a reader can check every one against its source. These
 * are read from source code, not measured: the measured constants are in
 * calibration.h. */
#ifndef VRAMLEDGER_PYTORCH_CONSTANTS_H
#define VRAMLEDGER_PYTORCH_CONSTANTS_H

/* ---- c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x) ------------------ */

/* kMinBlockSize: every request rounds up to a multiple of it */
#define VL_PT_MIN_BLOCK_SIZE 512ull
/* kSmallSize: rounded requests up to it are served from the small pool */
#define VL_PT_SMALL_SIZE (1ull << 20)
/* kSmallBuffer: the small pool's segments */
#define VL_PT_SMALL_BUFFER (2ull << 20)
/* kLargeBuffer: the large pool's shared segments, for requests below
 * kMinLargeAlloc; also the slack a request at or above max_split_size may
 * leave in the block it takes */
#define VL_PT_LARGE_BUFFER (20ull << 20)
/* kMinLargeAlloc: requests at or above it get a segment of their own */
#define VL_PT_MIN_LARGE_ALLOC (10ull << 20)
/* kRoundLarge: such a segment's size rounds up to a multiple of it */
#define VL_PT_ROUND_LARGE (2ull << 20)
/* the page by which an expandable segment grows and shrinks, as
 * lib/model/caching.c models ExpandableSegment (to be checked on a GPU
 * trace) */
#define VL_PT_EXPANDABLE_PAGE (2ull << 20)

/* ---- aten/src/ATen/cuda/CublasHandlePool.cpp ------------------------- */

/* getChosenWorkspaceSize(): the default cuBLAS workspace of a handle on a
 * compute capability 9.0 card (H100, H200), 4096 KiB x 8, without
 * CUBLAS_WORKSPACE_CONFIG; the first bf16 matmul on the H200 allocates
 * exactly that (data/reference/h200-torch-2.11/basics.json) */
#define VL_PT_CUBLAS_WORKSPACE_SM90 (4096ull * 8 * 1024)

/* ---- torch/nn/parallel/distributed.py -------------------------------- */

/* DistributedDataParallel(bucket_cap_mb=25): the gradient buckets built
 * at the rebuild before step 2 */
#define VL_PT_DDP_BUCKET_CAP (25ull << 20)
/* DistributedDataParallel's broadcast_bucket_size (250 MiB): the flat
 * buffers _sync_module_states broadcasts the module's states through */
#define VL_PT_DDP_BROADCAST_BUCKET (250ull << 20)

/* ---- DeepSpeed deepspeed/runtime/zero/config.py ---------------------- */

/* reduce_bucket_size's default: elements of the ZeRO-1/2 reduce bucket */
#define VL_DS_REDUCE_BUCKET_ELEMS 500000000ull

/* ---- bitsandbytes ---------------------------------------------------- */

/* NF4 with double quantisation (bitsandbytes functional.quantize_4bit,
 * blocksize 64; the absmax values quantised to 8 bits in blocks of 256
 * with an fp32 constant each): bytes a weight element, 4 bits + an 8-bit
 * absmax per 64 values + an fp32 constant per 256 absmax blocks */
#define VL_BNB_NF4_BYTES_PER_ELEM (0.5 + 1.0 / 64.0 + 4.0 / (64.0 * 256.0))

#endif
