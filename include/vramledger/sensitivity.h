/* vramledger: how robust a memory plan is: draw the inputs
 * (sequence ±20 %, hidden size ±15 %, precision switch, ...), estimate each
 * draw, and report percentiles, the chance of exceeding each card, the
 * inputs that drive the peak, and the fallback that helps. Pure; the random
 * state is a seed the caller prints. */
#ifndef VRAMLEDGER_SENSITIVITY_H
#define VRAMLEDGER_SENSITIVITY_H
#include <stdint.h>

#include "vramledger/arch.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/regress.h"

enum vl_vary_var {
  VL_VARY_SEQ,
  VL_VARY_BATCH,
  VL_VARY_HIDDEN,
  VL_VARY_LAYERS,
  VL_VARY_PRECISION,
  VL_VARY_ATTENTION,
  VL_VARY_COUNT
};
enum vl_dist { VL_DIST_UNIFORM, VL_DIST_NORMAL, VL_DIST_DISCRETE };

struct vl_vary {
  enum vl_vary_var var;
  enum vl_dist dist;
  double pct;   /* uniform: +-pct; normal: sigma = pct / 2 (pct is the 95 % band) */
  int n_values; /* discrete: enum values of precision or attention */
  int values[8];
};

#define VL_SENS_MAX_VARY 8
#define VL_SENS_MAX_GPUS 16
#define VL_SENS_FALLBACKS 4
/* full estimates one pass may make when vl_sens_query.max_estimates is
 * 0; draws holding more distinct jobs go on a surface of at most that many
 * (a GPT-2 estimate takes about 0.2 ms, a Llama-3-8B LoRA one about 2 ms:
 * bench/results/speed/README.md#sensitivity) */
#define VL_SENS_ESTIMATES 1024

/* Where the draws hold more distinct jobs than a pass may estimate, each
 * draw's total and step are interpolated (multilinearly) between exact
 * estimates on a lattice over the continuous inputs drawn, one lattice a
 * precision x attention pair drawn; refusals are decided for each draw
 * (vl_bill_check), and a fixed number of draws are estimated exactly to
 * measure the surface's error (docs/cmd/sensitivity.md). */
#define VL_SENS_SURFACE_DIMS 4 /* seq, batch, hidden, layers */
#define VL_SENS_CHECKS 64      /* draws a surface is checked on */
#define VL_SENS_TOLERANCE 0.5  /* percent of the exact a surface is refined to */
struct vl_sens_surface {
  bool used;
  int n_dims;
  enum vl_vary_var var[VL_SENS_SURFACE_DIMS];
  int nodes[VL_SENS_SURFACE_DIMS]; /* lattice points along each input */
  int combos;                      /* precision x attention pairs: one lattice each */
  uint64_t lattice;                /* the lattice's points: exact estimates */
  uint64_t exact_draws;            /* draws estimated exactly: a corner of their cell refused */
  uint64_t checked;                /* draws estimated exactly to check the surface */
  uint64_t max_error_bytes;        /* the largest |interpolated - exact| total of those */
  double max_error_pct;            /* the same in percent of the exact */
  double max_error_time_pct;       /* the step's; 0 where no step is priced */
  int refinements;                 /* times the lattice was made finer along one input */
  bool short_of_estimates;         /* above the tolerance, and a finer lattice would pass
                                    * max_estimates */
};

struct vl_sens_query {
  const struct vl_arch *arch;
  struct vl_job job;
  struct vl_vary vary[VL_SENS_MAX_VARY];
  int n_vary;
  uint64_t samples, seed;
  const struct vl_gpu *gpus[VL_SENS_MAX_GPUS];
  int n_gpus;
  double margin;
  const struct vl_fitted *fit; /* evaluate draws with a fitted formula, not the estimator */
  const char *fit_source;      /* its file, for the report */
  uint64_t max_estimates;      /* full estimates per pass; 0: VL_SENS_ESTIMATES */
  /* for the report: each card's CUDA context as the estimates hold it
   * (vl_context_carry), one per gpus[]; NULL: not said */
  const struct vl_context_carry *carry;
  /* time, on gpus[0], of a training job (docs/model.md 13.1): the job's
   * hours for `tokens` (0: none) against deadline_hours and its cost
   * (hours x GPUs x the card's price) against budget_usd (0: none) */
  uint64_t tokens;
  double deadline_hours, budget_usd;
};

struct vl_sens_result {
  uint64_t samples, seed;
  /* drawn: the first `drawn` of the samples, each estimated or refused
   * (fewer than samples when the pass reached max_estimates distinct jobs);
   * failed: those the estimator refused; estimates: full estimates made */
  uint64_t drawn, failed, estimates;
  /* distinct jobs among all the samples: the estimates a pass over every
   * draw makes (--estimates to give); 0 when it could not be counted */
  uint64_t distinct;
  /* used: more distinct jobs than max_estimates, every draw evaluated on
   * the surface (drawn == samples unless refused corners took the rest) */
  struct vl_sens_surface surface;
  char refused_why[256];             /* the first refusal's message; "" when none */
  uint64_t p50, p95, p99, min, max;  /* total bytes (the process on one GPU), estimated draws */
  double p_exceed[VL_SENS_MAX_GPUS]; /* P(total > card x (1 - margin)) among estimated draws */
  double p_exceed_refused[VL_SENS_MAX_GPUS]; /* the same with refused draws counted as over */
  int n_tornado;
  struct {
    enum vl_vary_var var;
    uint64_t low, high; /* total at the low and high end, others at base */
    /* the input at each end (tokens, sequences, hidden units, layers, or
     * the enum value of a discrete input); cut: that end of the spread was
     * refused, and the end is the furthest value toward it the estimator
     * takes (found by bisection) */
    double low_at, high_at;
    bool low_cut, high_cut;
  } tornado[VL_SENS_MAX_VARY]; /* largest swing first */
  /* the step time of the estimated draws on gpus[0] (timed: some were
   * priced; with the estimator only, a training job, a card) */
  bool timed;
  uint64_t n_timed;
  double step_p50, step_p95;   /* seconds */
  double hours_p50, hours_p95; /* with tokens */
  double p_late;               /* P(hours > deadline_hours) */
  double p_over_budget;        /* P(hours x GPUs x price > budget_usd) */
  int n_fallbacks;
  struct {
    const char *name;
    uint64_t p95;
    double p_exceed;                /* on gpus[0], among its estimated draws */
    uint64_t drawn, failed;         /* the same first draws as the base's (common random numbers) */
    struct vl_sens_surface surface; /* used: its draws on its own surface */
  } fallback[VL_SENS_FALLBACKS];
};

/* The gate a CI holds a plan to: each probability the draws give, against
 * a largest acceptable value. */
enum vl_sens_gate {
  VL_SENS_GATE_OOM,      /* P(over gpus[0]), refused draws counted as over */
  VL_SENS_GATE_BUDGET,   /* P(over budget_usd) */
  VL_SENS_GATE_DEADLINE, /* P(past deadline_hours) */
  VL_SENS_GATES
};
struct vl_sens_verdict {
  bool given[VL_SENS_GATES];   /* the caller's: a threshold was set */
  double limit[VL_SENS_GATES]; /* the caller's: largest acceptable probability, 0..1 */
  double p[VL_SENS_GATES];     /* the draws' probability (given gates only) */
  bool fail[VL_SENS_GATES];    /* p > limit */
  int n_given, n_failed;
};

/*! Judge r against the thresholds in v (given[], limit[] set by the
 * caller): each given gate's probability and whether it exceeds its
 * limit. A gate whose probability the result does not hold (no card; no
 * priced draws, tokens, budget or deadline) is not judged: the caller
 * refuses it first (vl_sens_gate_ready). */
void vl_sens_judge(const struct vl_sens_query *q, const struct vl_sens_result *r,
                   struct vl_sens_verdict *v);

/*! Can gate g be judged on r? (OOM: a card; the others: priced draws with
 * tokens and the budget or deadline.) */
bool vl_sens_gate_ready(const struct vl_sens_query *q, const struct vl_sens_result *r,
                        enum vl_sens_gate g);

const char *vl_vary_name(enum vl_vary_var v);
/*! Parse a --vary spec into *v: "seq=±20%" or "hidden=+-15%" (0 < P <
 * 100; normal: a normal draw with P as its 95 % band, else uniform), or
 * "precision=bf16,fp16", "attention=eager,sdpa" (at most 8 values). @return VL_OK or VL_EINVAL
 * saying what is wrong. */
vl_status vl_vary_parse(const char *spec, bool normal, struct vl_vary *v,
                        struct vl_err *err) VL_MUST_USE;

/*! Draw q->samples configurations (seeded mt19937), estimate each (with
 * the full estimator, memoised per distinct job, or q->fit at the draw's
 * batch and seq), summarise. With the estimator, where the draws hold more
 * distinct jobs than max_estimates, every draw is evaluated on a response
 * surface of at most max_estimates exact estimates (r->surface); where
 * even the smallest surface and its check do not fit, a pass stops at the
 * first draw that would need more than max_estimates distinct estimates:
 * the result is then of the first r->drawn draws (an unbiased sample).
 * @return VL_OK, VL_EINVAL (nothing could be estimated; with a fit, a
 * variable it does not know, varied or fitted), VL_ENOMEM. */
vl_status vl_sensitivity_run(const struct vl_sens_query *q, const struct vl_overheads *ov,
                             struct vl_sens_result *r, struct vl_err *err) VL_MUST_USE;

#endif
