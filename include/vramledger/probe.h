/* vramledger: the framework layer of a run, analysed (pure).
 *
 * From the probe's events in a record: the five-part bill at the step's
 * peak, where the peak is, the ledger of every phase boundary (named bytes
 * against memory_allocated()), the ladder NVML >= driver-allocated >=
 * reserved >= allocated with each gap named, growth across steps, step
 * time, tokens/s and the probe's own cost, per rank. docs/model.md
 * ("The measured bill") gives every rule. */
#ifndef VRAMLEDGER_PROBE_H
#define VRAMLEDGER_PROBE_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/record.h"

#define VL_FW_MAX_LEDGER 16
#define VL_FW_MAX_RANKS 64

/* One phase boundary of the billed step: what is named and what is not. */
struct vl_fw_boundary {
  char phase[16]; /* the interval that ends here */
  uint64_t allocated, named, cublas_workspaces;
  uint64_t rounding; /* allocated - requested: the allocator's blocks beyond the bytes asked
                      * for (512 B rounding, unsplit remainders); 0 when not recorded */
  int64_t unnamed;   /* allocated - rounding - named - workspaces (may be < 0) */
};

struct vl_fw_rank {
  unsigned rank, pid;
  uint64_t peak_allocated, peak_reserved;
  uint64_t peak_named; /* the most the bill named at a boundary (CPU: no allocator) */
  /* DDP's first gradient buckets kept into step 2: the step-2 peak above
   * every later step's (two at least) by the parameters' bytes, +-20 %
   * (docs/model.md, DDP's two outcomes); 0 when not */
  uint64_t ddp_step2_extra;
  uint64_t steady_peak_allocated; /* peak_allocated without that extra */
  bool ddp_extra_in_bill;         /* the extra is within the bill's transient below */
  /* this rank's own bill at the peak of its billed step (as the layer's
   * below, for the main rank), for the ranks side by side */
  bool has_bill;
  unsigned bill_step;
  char bill_phase[16];
  uint64_t bill[VL_BILL_N];
  uint64_t cublas_workspaces, transient;
};

struct vl_probe_layer {
  bool present;      /* a probe wrote into the record */
  bool cuda;         /* allocator counters present */
  char torch[32];    /* the first probe's torch version */
  char device[96];   /* the GPU as PyTorch names it */
  unsigned n_ranks;  /* distinct ranks (processes with a probe) */
  unsigned n_steps;  /* optimizer steps of the main rank */
  unsigned main_pid; /* the process analysed below (rank 0's) */

  /* time */
  double step_s_median; /* median step time, s */
  double tokens_per_s;  /* tokens of a step / its time, median over steps */
  double samples_per_s;
  double probe_share_light; /* the probe's own time / step time, median, unsampled steps */
  double probe_share_sampled;

  /* the peak */
  uint64_t peak_allocated, peak_reserved; /* max over steps (bytes) */
  unsigned peak_step;
  char peak_phase[16];
  uint64_t peak_inactive_split; /* at the end of the peak's phase */
  /* the peak apart by what spends it: the largest peak allocated of the
   * forward, loss and backward phases (activations), and of the pre_step
   * and optimizer phases (model states), over every step (bytes; 0: none) */
  uint64_t peak_fwd_bwd, peak_optimizer;
  uint64_t alloc_retries, ooms; /* the allocator's counters at the end */

  /* the bill at the peak of the billed step (a sampled step with the
   * highest peak) */
  bool has_bill;
  unsigned bill_step;
  char bill_phase[16];
  char bill_taken_at[16]; /* the boundary whose categories are used */
  uint64_t bill[VL_BILL_N];
  bool activations_by_difference; /* torch.compile: no saved-tensor hooks */
  uint64_t cublas_workspaces;     /* estimated: workspace x threads */
  uint64_t transient;             /* peak - everything named */

  /* the boundaries of the billed step */
  struct vl_fw_boundary ledger[VL_FW_MAX_LEDGER];
  unsigned n_ledger;
  double worst_unnamed_share; /* max |unnamed| / allocated over the ledger */

  /* baseline (the first questions a run answers) */
  uint64_t load_bytes;          /* allocated when the first forward starts */
  uint64_t first_forward_bytes; /* what the first forward added */

  /* growth: allocated at the start of each step, steps 4.. (bytes/step) */
  double growth_bytes_per_step;
  unsigned growth_steps;
  uint64_t growth_total;

  /* modules that saved the most in the billed step */
  unsigned n_modules;
  struct vl_rec_module modules[VL_REC_TOP_MODULES];

  /* per rank */
  unsigned n_rank_peaks;
  struct vl_fw_rank ranks[VL_FW_MAX_RANKS];
  double rank_imbalance;   /* (max - min) / max of per-rank peak allocated (named on the CPU) */
  unsigned ddp_kept_ranks; /* ranks with ddp_step2_extra */
  double steady_rank_imbalance; /* the same with those ranks at steady_peak_allocated */

  /* reserved released between steps (empty_cache churn) */
  unsigned reserved_drops;

  /* the ladder at the peaks (vl_probe_ladder): process (NVML) >=
   * driver-allocated (interposer) >= reserved >= allocated, each gap named */
  bool has_ladder;
  uint64_t ladder[4];
  unsigned ladder_ranks; /* > 1: reserved and allocated are the ranks' peaks summed, as NVML
                          * and the interposer see every rank of the process tree */
  uint64_t gap_context;  /* NVML - driver-allocated: CUDA context, kernels, NCCL/cuDNN handles */
  uint64_t gap_outside;  /* driver-allocated - reserved: allocations outside PyTorch's allocator */
  uint64_t gap_cached;   /* reserved - allocated: cached free blocks */
  uint64_t gap_fragmented; /* of which inactive split blocks at the peak (fragmentation) */
  /* who allocates outside PyTorch's allocator: the libraries other than
   * libc10_cuda that the interposer saw ask the driver (cuBLAS's own
   * workspaces, NCCL's buffers, ...), the most each held at once */
  struct vl_fw_lib {
    char name[48];
    uint64_t bytes;
  } outside[8];
  unsigned n_outside;

  /* the first out-of-memory */
  bool oom;
  struct vl_rec_oom first_oom;
};

/*! Analyse the probe's events of a record (pure). f->present is false when
 * the record has none. @return VL_OK, or VL_ENOMEM: *f is then zeroed
 * (present false), never a layer with its bill or step times missing. */
vl_status vl_probe_analyze(const struct vl_record *rec, struct vl_probe_layer *f) VL_MUST_USE;

/* The measured bill beside the estimate for the same settings, line by
 * line (report --estimate; vl_probe_compare in vramledger/render.h fills
 * it). Lines: the probe's parts, cuBLAS workspaces, transient, then the
 * peak allocated. */
#define VL_CMP_LINES (VL_BILL_N + 3)
struct vl_probe_compare {
  bool present;
  uint64_t measured[VL_CMP_LINES], estimate[VL_CMP_LINES];
  char estimate_phase[16];
  /* the step priced on the record's card (vl_step_time), against the
   * probe's median step; est_step_s 0: not priced */
  double est_step_s, est_forward_s, est_backward_s, est_optimizer_s;
  double measured_step_s;
  char card[32];
};

struct vl_run_summary;
/*! Fill the ladder from the record's summary (the system and allocation
 * layers) and the framework's peaks (pure). */
void vl_probe_ladder(struct vl_probe_layer *f, const struct vl_run_summary *s);

#endif
