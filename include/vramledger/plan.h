/* vramledger: the planner. Which GPUs, how many, which strategy, what it
 * costs and how long it takes. Pure. */
#ifndef VRAMLEDGER_PLAN_H
#define VRAMLEDGER_PLAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramledger/arch.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"

struct vl_plan_query {
  const struct vl_arch *arch;
  struct vl_job base;        /* precision, optimizer, attention, LoRA...: kept */
  uint64_t tokens;           /* training tokens, D */
  uint64_t global_batch;     /* sequences per optimizer step */
  const struct vl_gpu *gpus; /* candidate cards */
  size_t n_gpus;
  unsigned max_gpus;       /* largest count tried (powers of two) */
  unsigned gpus_per_node;  /* 8: beyond it, gradients cross the network */
  double inter_node_gb_s;  /* per GPU, per direction; default 50 (400 Gb/s) */
  double margin;           /* fraction of each card kept free */
  double mfu;              /* model FLOPs utilisation, used only with mfu_given */
  bool mfu_given;          /* time compute as 6ND / (peak x mfu) (--mfu, --run); else the
                            * step is priced kernel by kernel (vl_step_time) */
  double overlap;          /* data-parallel traffic hidden, as a fraction of the last
                            * micro-batch's backward time; 1.0 */
  double offload_slowdown; /* a step with the optimizer offloaded to the CPU takes this many
                            * times as long; 4 (published offload runs: 3 to 5 times slower) */
  double qlora_slowdown;   /* > 0: a QLoRA step takes this many times as long as LoRA's
                            * (measured); 0: the dequantisation traffic at HBM bandwidth */
  double dp_efficiency;    /* > 0: measured data-parallel scaling (step time on one GPU / on
                            * several, the same micro-batch a GPU) replaces the gradient
                            * communication model for dp > 1; 0: modelled */
  double deadline_hours;   /* 0: none */
  double budget_usd;       /* 0: none */
  double value_per_hour;   /* 0: rank by cost */
  double late_penalty_usd; /* with a deadline */
};

/*! Defaults for the numeric knobs (mfu 0.40, overlap 1.0, 8 GPUs a node,
 * 50 GB/s between nodes, margin 0.10, up to 64 GPUs). */
void vl_plan_query_init(struct vl_plan_query *q);

struct vl_plan_candidate {
  const struct vl_gpu *gpu;
  unsigned count, dp, tp, pp, zero;
  enum vl_ckpt checkpointing;
  enum vl_offload offload; /* ZeRO-Offload of the optimizer states (and parameters) */
  bool qlora;              /* the frozen base in 4 bits (NF4) */
  uint64_t micro_batch, grad_accum;
  uint64_t peak_bytes_per_gpu;
  int64_t headroom_bytes;       /* usable (the margin kept free) - peak */
  uint64_t context_range_bytes; /* the card's CUDA context, either way (vl_context_range_bytes) */
  bool context_edge;            /* the headroom is within that range */
  uint64_t host_bytes;          /* CPU memory the offloaded states take, per GPU */
  double memory_share;          /* peak / card */
  double compute_s, comm_s, step_s; /* comm_s: all the modelled traffic */
  double tp_comm_s;                 /* tensor-parallel all-reduces a step, on the critical path */
  double dp_comm_s;                 /* data-parallel gradients (and ZeRO-3 gathers) a step */
  double dp_hidden_s;               /* the part of dp_comm_s hidden behind backward */
  double dequant_s;                 /* QLoRA: the dequantisation traffic a step (lower bound) */
  double efficiency;                /* compute-only time / step time */
  double hours, cost_usd, net_value_usd;
  bool pareto, meets_deadline, within_budget;
  unsigned tier; /* its rank's value tier: plans whose net value is within 1 % of the best of
                  * their tier share it (0: the best's); the faster ranks first within one */
};

#define VL_PLAN_TRACE 8
#define VL_PLAN_EXCLUDED 16

struct vl_plan_result {
  struct vl_plan_candidate *c; /* feasible candidates, ranked (best first) */
  size_t n;
  size_t evaluated; /* configurations estimated */
  bool have_best;   /* c[0] meets the deadline and the budget */
  uint64_t steps;
  double flops; /* training FLOPs */
  int n_trace;
  char trace[VL_PLAN_TRACE][256]; /* the decision tree, for the best */
  int n_excluded;                 /* cards of the query not planned on, and why */
  struct {
    const struct vl_gpu *gpu;
    char why[160];
  } excluded[VL_PLAN_EXCLUDED];
};

/*! Search GPU x count x tensor parallelism x pipeline x ZeRO stage x
 * optimizer offload (when the base job has none) x checkpointing x
 * QLoRA (beside LoRA, when the base job has LoRA) x
 * micro-batch (x accumulation to the global batch); keep what fits with the
 * margin; time it from 6ND (+2ND recomputed) over count x peak x MFU plus
 * tensor parallelism's all-reduces and the gradient all-reduce not hidden
 * behind backward, over the interconnect; price it; rank by cost (or
 * by cost + time x value). Release with vl_plan_release. */
vl_status vl_plan_search(const struct vl_plan_query *q, const struct vl_overheads *ov,
                         struct vl_plan_result *r, struct vl_err *err) VL_MUST_USE;
void vl_plan_release(struct vl_plan_result *r);

/*! A duration in the unit that fits it: "4.5 h", "12 min", "8.3 s"
 * (hours >= 0). @return buf. */
const char *vl_plan_hours_text(double hours, char *buf, size_t n);
/*! A cost in the unit that fits it: "$13.53", "45.3 cents", "0.42 cents",
 * "$0" (usd >= 0). @return buf. */
const char *vl_plan_usd_text(double usd, char *buf, size_t n);

/*! The job a candidate runs: the query's base job with the candidate's
 * layout, micro-batch, accumulation, checkpointing, offload and QLoRA. */
void vl_plan_candidate_job(const struct vl_plan_query *q, const struct vl_plan_candidate *c,
                           struct vl_job *j);

/*! The MFU a measured throughput means: tokens/s of one GPU x FLOPs a
 * token (6N, 4N with LoRA, +2N recomputed) / the card's dense bf16 peak.
 * 0 when it cannot be told (pure). */
double vl_plan_mfu_measured(const struct vl_arch *a, const struct vl_job *j,
                            double tokens_per_s_per_gpu, const struct vl_gpu *g);

#endif
