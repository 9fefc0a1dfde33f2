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
  bool host_bound;              /* the host's dispatch takes longer than the device: the step
                                 * is the host's, which differed 10-70 % between two hosts
                                 * of one card type (docs/model.md 13.1) */
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

/* ---- one op ------------------------------------------------------------
 * The step is priced op by op: estimate enumerates a model's ops from its
 * description, `trace` reads them from the job itself (the tracer's "# op"
 * lines); both go through vl_op_device_s. */

/* the card an op is priced on: the measured tables, or the measured card
 * scaled by datasheet ratios */
struct vl_time_card {
  const void *tables;   /* the measured card's tables (lib/model/kernel_tables.h) */
  double s16, s32, sbw; /* this card against the measured one: 16-bit, fp32, bandwidth */
  char source[96];      /* where the figures come from */
  bool derived;         /* not measured: scaled from a card that was */
  bool cudnn_sdpa;      /* SDPA runs cuDNN's attention for 16-bit inputs (compute capability 9+) */
};

/*! The card g as ops are priced on it; fp16: the job's 16-bit dtype is
 * fp16 (a card derived by ratios takes its fp16 peak then). Never fails:
 * a card not measured is derived from the H100 SXM. */
void vl_time_card_init(struct vl_time_card *c, const struct vl_gpu *g, bool fp16);

enum vl_op_kind {
  VL_OP_GEMM,      /* a matrix product (mm, addmm, bmm, a linear's three GEMMs) */
  VL_OP_ATTENTION, /* a fused attention kernel (SDPA's flash, cuDNN, memory-efficient) */
  VL_OP_MEMORY,    /* a memory-bound kernel: its bytes read and written */
  VL_OP_DISPATCH   /* a view, an empty tensor: no kernel, the host's dispatch only */
};

/* how a GEMM's operands lie, as a linear runs them: forward x @ W^T (B
 * transposed), the input's gradient g @ W (neither), the weight's
 * gradient g^T @ x (A transposed) */
enum vl_gemm_layout { VL_GEMM_FWD, VL_GEMM_DGRAD, VL_GEMM_WGRAD };

/* the measured bandwidth class of a memory-bound op */
/* BATCHNORM: BatchNorm's forward over NCHW (statistics, then the
 * normalisation), BATCHNORM_BWD its backward: by the bytes the op reads
 * and writes, at the rates ATen's per-channel kernels run (steptime.c
 * BN_STATS_EFF, BN_BACKWARD_EFF). BICUBIC, BICUBIC_BWD: bicubic
 * upsampling, a serial chain of taps per output pixel over the `planes`
 * (batch x channels), priced by that chain's latency (steptime.c
 * BICUBIC_TAP_S), not by bytes. */
enum vl_mem_class {
  VL_MEM_ELEMENTWISE,
  VL_MEM_CAST,
  VL_MEM_NORM,
  VL_MEM_SOFTMAX,
  VL_MEM_BATCHNORM,
  VL_MEM_BATCHNORM_BWD,
  VL_MEM_BICUBIC,
  VL_MEM_BICUBIC_BWD,
  VL_MEM_BROADCAST,     /* an elementwise op with a broadcast operand: ATen's unvectorised kernel */
  VL_MEM_STRIDED,       /* an elementwise op on a strided view (rotary's halves: neg, cat) */
  VL_MEM_LOGSOFTMAX,    /* the loss's log_softmax over the vocabulary */
  VL_MEM_LOGSOFTMAX_BWD /* its backward */
};

struct vl_op {
  enum vl_op_kind kind;
  double count; /* times the op runs (fractional: a share of layers) */
  /* VL_OP_GEMM: batch products of (m x k) (k x n) */
  enum vl_gemm_layout layout;
  double m, n, k, batch; /* batch 0 is 1 */
  bool fp32;             /* fp32 operands: CUDA cores, or tensor cores' TF32 when tf32 */
  bool tf32;             /* torch.backends.cuda.matmul.allow_tf32 (off by default) */
  /* VL_OP_ATTENTION: the forward or the backward kernel of bs x heads
   * (q_len x kv_len) scores, head sizes dqk (query, key) and dv (value) */
  const char *kernel; /* the kernel's rows: "default" (SDPA's choice), "cudnn", "flash",
                       * "efficient"; a name the card lacks: "default" */
  bool backward, half, causal;
  double bs, heads, q_len, kv_len, dqk, dv;
  double window;  /* a sliding window (0: none); where the keys reach it transformers
                   * hands SDPA an explicit mask, under which every key is computed */
  double dropout; /* dropout_p (training's attention dropout) */
  /* VL_OP_MEMORY */
  enum vl_mem_class mem;
  double bytes;  /* read + written, one run */
  double planes; /* VL_MEM_BICUBIC*: batch x channels */
};

/*! Device seconds of op (all op->count runs) on card c, by the measured
 * tables: a GEMM by its shape, dtype and layout (log-trilinear between the
 * grid's points, never under the grid's smallest GEMM's time; a 16-bit
 * dimension off 8 elements at the measured align1 or align2 rate; TF32
 * at half the 16-bit rate, the datasheets' dense ratio); attention by its
 * kernel's measured rate at that sequence length (the backward: the
 * forward-and-backward's time less the forward's, at least 2.5 forwards);
 * a memory-bound op by its bytes at its class's bandwidth; a dispatch 0.
 * The host's cost is VL_TIME_HOST_OP_S a run, whatever the op. */
double vl_op_device_s(const struct vl_time_card *c, const struct vl_op *op);

/* FLOPs of one run of op (a GEMM's 2mnk; attention's score and value
 * products, causal halved; backward 2.5 times the forward's), 0 for others */
double vl_op_flops(const struct vl_op *op);

/*! The host's seconds to dispatch one eager op, and a step's fixed cost
 * (zero_grad, the loop): bench/time/host_fit.py. */
double vl_time_host_op_s(void);
double vl_time_host_step_s(void);

/* a pass's ops: device seconds by kind, host seconds, ops */
struct vl_time_pass {
  double k[VL_TK_COUNT];
  double host;
  double ops;
};

/*! Add op (device time booked as `kind`, its count to the ops) to pass p. */
void vl_time_pass_add(struct vl_time_pass *p, const struct vl_time_card *c, const struct vl_op *op,
                      enum vl_time_kind kind);

/* The host issues a step's ops in order and runs ahead of the GPU (kernel
 * launches are asynchronous; no sync inside a step): a stretch of ops
 * starts on the GPU once the host has issued its first op and the GPU is
 * done with what came before, and ends no sooner than the host issues its
 * last. gpu_at, host_at: when each is done so far. The launch queue's
 * bound (1,024 kernels) is not modelled. */
struct vl_time_pipe {
  double gpu_at, host_at;
};

/*! Issue a stretch of `gpu` device and `host` host seconds on p. */
void vl_time_issue(struct vl_time_pipe *p, double gpu, double host);

/*! How much dearer the host finds a recomputed op than a forward op
 * (non-reentrant checkpointing's hooks): 1.85. */
double vl_time_recompute_host(void);

/*! t's forward_s, backward_s, recompute_s, kind_s, gpu_s, host_s and ops
 * from the passes (rec: NULL without checkpointing; its host already
 * dearer), `times` micro-batches, whose forward and backward took fwd_s
 * and back_s as issued. */
void vl_time_phases(struct vl_step_time *t, const struct vl_time_pass *fwd,
                    const struct vl_time_pass *bwd, const struct vl_time_pass *rec, double fwd_s,
                    double back_s, double times);

/*! The step's passes into t (vl_time_phases): forward, then backward with
 * the recomputation (or NULL) inside it, each a stretch issued on one
 * vl_time_pipe, `times` micro-batches back to back (no sync between them:
 * backward() on each, one step), the recomputation's host at
 * vl_time_recompute_host() a forward op's. The passes' host must be set
 * (ops x the host cost). */
void vl_time_passes(struct vl_step_time *t, const struct vl_time_pass *fwd,
                    const struct vl_time_pass *bwd, const struct vl_time_pass *rec, double times);

/*! The optimizer's step on card c: the measured row of optimizer ("adamw",
 * "sgd", "sgd-momentum"; others priced as AdamW, *approx set) in impl
 * ("foreach", "fused", "forloop"; another: the foreach row, *approx set)
 * over elems elements in tensors tensors whose weights, gradients and
 * states (states of them an element) are w, g and st bytes. Seconds. */
double vl_time_optimizer_s(const struct vl_time_card *c, const char *optimizer, const char *impl,
                           double elems, double tensors, double w, double g, double st,
                           double states, bool *approx);

/* ---- a traced step -------------------------------------------------------- */

/* the step time of a traced job (vramledger trace --gpu) */
struct vl_trace_time {
  struct vl_step_time time; /* its ops priced as estimate prices its own */
  uint64_t step;            /* the step priced: the last with a forward and an optimizer step */
  uint64_t steps;           /* steps the trace holds */
  bool complete;            /* the step priced had a forward and an optimizer step */
  double tokens, samples;   /* the step's (the probe's count of token ids); 0: not known */
  double micro_batches;
  double phase_ops[6];  /* ops by phase: forward, backward, recompute, prestep, optimizer, other */
  double kernels;       /* of them, ops that launch a kernel (not views, empty tensors) */
  double trained_elems; /* elements the optimizer stepped */
  char optimizer[32], optimizer_impl[24]; /* as the tracer named them; "": no step traced */
};

/*! Price the ops of a trace's last complete step ("# op", "# optimizer",
 * "# step" lines the tracer writes: python/vramledger/optrace.py) on card
 * g: each op by vl_op_device_s, the forward and the backward (with its
 * recomputation) by vl_time_passes, what runs between backward and
 * optimizer.step as a stretch of its own, the optimizer by its measured
 * row. text need not end in a newline. @return VL_OK, VL_ENOTFOUND (no op
 * lines: err says why). */
vl_status vl_trace_step_time(const char *text, size_t len, const struct vl_gpu *g,
                             struct vl_trace_time *out, struct vl_err *err) VL_MUST_USE;

/*! The host's seconds to dispatch one traced ATen op (a view included),
 * fitted on the same tiny models' steps as vl_time_host_op_s is for an op
 * estimate enumerates (bench/time/host_fit.py traces). */
double vl_trace_host_op_s(void);

#endif
