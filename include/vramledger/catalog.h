/* vramledger: the GPU catalog (data/gpus.json) and the fit check.
 * Pure: the caller reads the file; the library parses text. */
#ifndef VRAMLEDGER_CATALOG_H
#define VRAMLEDGER_CATALOG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramledger/model.h"
#include "vramledger/status.h"

#define VL_GPU_NAME 32
#define VL_GPU_ALIASES 4

struct vl_gpu {
  char name[VL_GPU_NAME];
  char aliases[VL_GPU_ALIASES][VL_GPU_NAME];
  int n_aliases;
  char label[64];        /* "NVIDIA H100 80GB HBM3 (SXM)" */
  uint64_t memory_bytes; /* what cudaMemGetInfo reports as total */
  double bf16_tflops;    /* dense, vendor datasheet */
  double fp16_tflops;    /* dense; the bf16 figure when the file has none */
  double fp8_tflops;     /* dense; 0: no FP8 tensor cores */
  double fp32_tflops; /* non-tensor FP32 (what PyTorch's default fp32 matmul runs on); 0 unknown */
  char compute_capability[16]; /* CUDA's "8.0", or an AMD target "gfx942"; "" unknown */
  bool no_bf16;                /* known to lack native bf16 (from compute_capability, or the file's
                                * "bf16": false); false also when unknown */
  double hbm_gb_s;             /* memory bandwidth, GB/s */
  char interconnect[24];       /* "nvlink", "pcie", ... */
  double link_gb_s;            /* GPU-to-GPU within a node, per direction, GB/s */
  double usd_per_hour;         /* on-demand price (an input; 0 when unknown) */
  uint64_t cublas_workspace_bytes;   /* PyTorch's default cuBLAS workspace on it; 0 unknown */
  uint64_t cublaslt_workspace_bytes; /* PyTorch's separate cuBLASLt one (ROCm); 0: none */
  bool context_measured;             /* the CUDA context estimate bills was measured on this card */
  unsigned sm_count;           /* streaming multiprocessors (multiProcessorCount); 0 unknown */
  unsigned max_threads_per_sm; /* resident threads an SM holds; 0 unknown */
};

struct vl_catalog {
  struct vl_gpu *gpus;
  size_t n;
  char date[16]; /* the date the figures were taken */
  char prices_date[16];
};

/*! Parse a catalog held in text[0..len). The caller releases it with
 * vl_catalog_release(). @return VL_OK, VL_EPARSE (line and column),
 * VL_EKEY, VL_ERANGE, VL_ENOMEM. */
vl_status vl_catalog_parse(const char *text, size_t len, struct vl_catalog *cat,
                           struct vl_err *err) VL_MUST_USE;
void vl_catalog_release(struct vl_catalog *cat);

/*! Override the catalog's prices with a prices file:
 * {"date": "YYYY-MM-DD", "source": "...", "usd_per_hour": {"h100-80gb": 2.99, ...}}
 * (names or aliases). All or nothing. @return VL_OK, VL_EPARSE (line and
 * column), VL_EKEY (a missing field, an unknown GPU), VL_ERANGE. */
vl_status vl_prices_apply(const char *text, size_t len, struct vl_catalog *cat,
                          struct vl_err *err) VL_MUST_USE;

/*! Look up a GPU by name or alias, case-insensitively; NULL if absent. */
const struct vl_gpu *vl_catalog_find(const struct vl_catalog *cat, const char *name);
/*! The card a device name from CUDA or NVML names ("NVIDIA H200",
 * "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"): the longest run of
 * its words that is a catalog name or alias; NULL when none is. */
const struct vl_gpu *vl_catalog_match_device(const struct vl_catalog *cat, const char *device);

/*! The card's architecture from its compute capability: "Volta" (7.0),
 * "Turing" (7.5), "Ampere" (8.0, 8.6, 8.7), "Ada" (8.9), "Hopper" (9.x),
 * "Blackwell" (10.x, 12.x), "CDNA 3" (gfx94x), "CDNA 2" (gfx90a), "CDNA"
 * (gfx908); "unknown" otherwise. A static string. */
const char *vl_gpu_architecture(const struct vl_gpu *g);

/* The CUDA context and cuBLAS workspaces a bill holds were measured on the
 * H200 (Hopper); a card of another architecture carries them over. */
#define VL_CONTEXT_MEASURED_ON "h200"
/* the context's range on another architecture: 200 MiB either way, about
 * half of what of the H200's context depends on the card (docs/model.md,
 * 9): an allowance, not a measurement */
#define VL_CONTEXT_RANGE_BYTES (200ull << 20)

/*! The bill's overheads on card g: ov's (the H200's, vl_overheads_default)
 * with the card's own cuBLAS and cuBLASLt workspaces, and its SM count and
 * threads per SM (the scratch of CUDA reductions), each where the catalog
 * gives them. Pure. */
void vl_overheads_for_gpu(struct vl_overheads *ov, const struct vl_gpu *g);
/*! How far the CUDA context may be from the bill's on card g, either way:
 * 0 where it was measured (the H200, and Hopper cards that share its
 * kernels), VL_CONTEXT_RANGE_BYTES on another architecture. */
uint64_t vl_context_range_bytes(const struct vl_gpu *g);

struct vl_context_carry {
  bool carried;                    /* another architecture than the measured card's */
  const char *architecture;        /* vl_gpu_architecture */
  uint64_t context_bytes;          /* what the bill holds (vl_context_bytes) */
  uint64_t range_bytes;            /* either way, when carried; 0 otherwise */
  uint64_t workspace_billed_bytes; /* one thread's BLAS workspaces as the bill holds them */
  uint64_t workspace_card_bytes; /* PyTorch's cuBLAS workspace on this card (catalog); 0 unknown */
  uint64_t lt_workspace_bytes;   /* its separate cuBLASLt workspace (catalog); 0 none */
  unsigned workspaces;           /* threads the bill holds them for */
};

/*! What the bill's CUDA context and cuBLAS workspaces mean on card g for
 * job, with ov's context (the H200's) and the card's workspaces, as
 * vl_overheads_for_gpu gives the bill them: the measured context, carried
 * over with a range to a card of another architecture than the H200's
 * (Hopper cards share its kernels). Pure. */
void vl_context_carry(const struct vl_gpu *g, const struct vl_overheads *ov,
                      const struct vl_job *job, struct vl_context_carry *out);

/* Fit of a bill on a card, keeping a fraction of it free for fragmentation
 * (seeds: keep 10-15 %). */
struct vl_fit {
  uint64_t capacity_bytes; /* the card */
  uint64_t usable_bytes;   /* capacity * (1 - margin) */
  int64_t headroom_bytes;  /* usable - total (negative: short by) */
  double margin;           /* fraction */
  bool fits;
};

/* The fraction of a card kept free where none is given (estimate, plan, a
 * commitment without one): the low end of 10-15 %. */
#define VL_FIT_MARGIN_DEFAULT 0.10
/* The decision tree's thresholds (plan's trace and commitment's fallback):
 * model states over this fraction of a card -> LoRA / QLoRA / ZeRO; */
#define VL_DECIDE_STATES_OF_CARD 0.8
/* else activations over this fraction of what is left -> checkpointing. */
#define VL_DECIDE_ACTS_OF_LEFT 0.5

/*! Check total_bytes against a card with the given margin (0 <= margin < 1). */
void vl_fit_check(uint64_t total_bytes, const struct vl_gpu *gpu, double margin,
                  struct vl_fit *fit);
/*! Whether a fit's headroom (or shortfall) lies within the context's range
 * on its card, so that the card's own context can turn the verdict. */
bool vl_fit_near_edge(const struct vl_fit *fit, uint64_t range_bytes);

enum vl_search_dim { VL_SEARCH_BATCH, VL_SEARCH_SEQ };

/*! Largest micro-batch (or sequence length) for which the job fits the card
 * with the margin; every other setting as in *job. *best is 0 when not even
 * 1 fits. The bill of the best value is left in *bill when best > 0.
 * @return VL_OK, or the error of a bill computation other than overflow. */
vl_status vl_search_max(const struct vl_arch *arch, const struct vl_job *job,
                        const struct vl_overheads *ov, const struct vl_gpu *gpu, double margin,
                        enum vl_search_dim dim, uint64_t *best, struct vl_bill *bill,
                        struct vl_err *err) VL_MUST_USE;

#endif
