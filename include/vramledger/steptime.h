/* The time of a training step on one card (docs/model.md, "Time"): the
 * step's kernels priced one by one with what the card was measured to do
 * (lib/decide/steptime.c). */
#ifndef VRAMLEDGER_STEPTIME_H
#define VRAMLEDGER_STEPTIME_H
#include "vramledger/arch.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/status.h"

/* what the step's time goes to, seconds on the critical path */
enum vl_time_kind {
  VL_TK_MATMUL,    /* linears (forward, the input's and the weight's gradients) */
  VL_TK_ATTENTION, /* SDPA's kernel, or eager's score and value matmuls */
  VL_TK_MEMORY,    /* elementwise, norms, softmax, casts, rotary, dropout, gathers */
  VL_TK_LOSS,      /* logits cast, cross-entropy and its gradient */
  VL_TK_OPTIMIZER, /* the optimizer's step (and the scaler's, the master copy's) */
  VL_TK_HOST,      /* time the GPU waits on Python and the dispatcher (launch-bound ops) */
  VL_TK_COUNT
};

struct vl_step_time {
  double step_s;                /* one optimizer step: grad_accum micro-batches + the update */
  double forward_s, backward_s; /* of the whole step (all micro-batches) */
  double recompute_s;           /* full checkpointing's second forward, inside backward */
  double optimizer_s;           /* zero_grad, the step, the scaler, the master copy */
  double kind_s[VL_TK_COUNT];   /* the same time by op kind */
  double gpu_s, host_s;         /* device busy time; host dispatch time */
  double model_flops;           /* 6ND-style: matmul and attention FLOPs of forward + backward */
  double executed_flops;        /* with recomputation */
  double tokens_per_s;          /* batch x seq x grad_accum / step_s */
  double mfu;                   /* model_flops / step_s / the card's dense 16-bit peak */
  uint64_t ops;                 /* eager ops a step dispatches */
  char source[96];              /* where the card's figures come from */
  bool derived;                 /* the card was not measured: scaled from one that was */
  bool approximate;             /* parts priced by a rule, not an op list (say which in note) */
  char note[160];
};

/*! Price one training step of job j (one GPU's share: tp, pp applied) on
 * card g. Cards never measured are derived from the measured one by their
 * datasheet ratios (dense 16-bit and fp32 peaks, HBM bandwidth) and say
 * so in t->source. Communication is the planner's (lib/decide/plan.c). */
vl_status vl_step_time(const struct vl_arch *a, const struct vl_job *j, const struct vl_gpu *g,
                       struct vl_step_time *t, struct vl_err *err);

const char *vl_time_kind_name(enum vl_time_kind k);

/*! N of 6ND: the parameters a token passes through (MoE: k of E experts). */
double vl_active_params(const struct vl_arch *a, const struct vl_inventory *inv);

#endif
