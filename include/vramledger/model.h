/* vramledger: the memory bill of one training step or one generation, per
 * GPU. Pure: no I/O, no globals, no printing.
 *
 * Data flows one way: struct vl_arch (config) + struct vl_job (flags) +
 * struct vl_overheads (the installed stack's constants) -> struct vl_bill.
 * Every number in the bill carries a term with its formula and source
 * (struct vl_term) so that renderers can explain it without computing. */
#ifndef VRAMLEDGER_MODEL_H
#define VRAMLEDGER_MODEL_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/arch.h"
#include "vramledger/status.h"

enum vl_task { VL_TASK_TRAIN, VL_TASK_INFER };

enum vl_precision {
  VL_PREC_FP32,
  VL_PREC_AMP_BF16, /* fp32 weights, autocast to bf16 (PyTorch AMP, HF Trainer) */
  VL_PREC_AMP_FP16,
  VL_PREC_BF16, /* weights, grads and optimizer state in bf16 */
  VL_PREC_FP16,
  VL_PREC_MIXED_BF16, /* bf16 weights + fp32 master copy (Megatron/DeepSpeed) */
  VL_PREC_MIXED_FP16,
  VL_PREC_COUNT
};

enum vl_optimizer {
  VL_OPT_SGD,
  VL_OPT_SGD_MOMENTUM,
  VL_OPT_ADAM,
  VL_OPT_ADAMW,
  VL_OPT_LION,
  VL_OPT_ADAFACTOR,
  VL_OPT_ADAM8BIT,
  VL_OPT_COUNT
};

enum vl_opt_impl { VL_IMPL_FOREACH, VL_IMPL_FUSED, VL_IMPL_FORLOOP, VL_IMPL_COUNT };
/* the training loop around the model: what it keeps alive (docs/model.md,
 * "Loops") */
enum vl_loop {
  VL_LOOP_PLAIN,
  VL_LOOP_TRAINER,
  VL_LOOP_LIGHTNING,
  VL_LOOP_ACCELERATE,
  VL_LOOP_COUNT
};
enum vl_attention { VL_ATTN_EAGER, VL_ATTN_SDPA, VL_ATTN_COUNT };
enum vl_ckpt { VL_CKPT_NONE, VL_CKPT_SELECTIVE, VL_CKPT_FULL, VL_CKPT_COUNT };
/* Whose accounting conventions: Hugging Face/PyTorch (default), Megatron-LM
 * (Korthikanti activations, fp32 main grads), DeepSpeed (ZeRO buffers). */
enum vl_framework { VL_FW_HF, VL_FW_MEGATRON, VL_FW_DEEPSPEED, VL_FW_COUNT };
enum vl_offload { VL_OFFLOAD_NONE, VL_OFFLOAD_OPTIMIZER, VL_OFFLOAD_FULL, VL_OFFLOAD_COUNT };
enum vl_kv_layout { VL_KV_CONTIGUOUS, VL_KV_PAGED, VL_KV_COUNT };
/* PyTorch's caching allocator mode (PYTORCH_CUDA_ALLOC_CONF):
 * expandable_segments:True maps pages into growing segments. */
enum vl_allocator { VL_ALLOC_DEFAULT, VL_ALLOC_EXPANDABLE, VL_ALLOC_COUNT };

/* Names of enum values as the CLI spells them; NULL when out of range. */
const char *vl_precision_name(enum vl_precision p);
const char *vl_optimizer_name(enum vl_optimizer o);
const char *vl_opt_impl_name(enum vl_opt_impl i);
const char *vl_attention_name(enum vl_attention a);
const char *vl_ckpt_name(enum vl_ckpt c);
const char *vl_loop_name(enum vl_loop l);
const char *vl_framework_name(enum vl_framework f);
const char *vl_offload_name(enum vl_offload o);
const char *vl_kv_layout_name(enum vl_kv_layout k);
const char *vl_allocator_name(enum vl_allocator a);

/* The reverse: true and *out set when s is one of the names above. */
bool vl_precision_parse(const char *s, enum vl_precision *out);
bool vl_optimizer_parse(const char *s, enum vl_optimizer *out);
bool vl_opt_impl_parse(const char *s, enum vl_opt_impl *out);
bool vl_attention_parse(const char *s, enum vl_attention *out);
bool vl_ckpt_parse(const char *s, enum vl_ckpt *out);
bool vl_loop_parse(const char *s, enum vl_loop *out);
bool vl_allocator_parse(const char *s, enum vl_allocator *out);

#define VL_MAX_LORA_TARGETS 16

struct vl_job {
  enum vl_task task;
  uint64_t batch;      /* micro-batch per GPU (sequences) */
  uint64_t seq;        /* tokens per sequence (prompt length for infer; an
                          encoder-decoder's encoder tokens) */
  uint64_t target_seq; /* an encoder-decoder's decoder tokens per sequence
                          (labels batch x target_seq; 0: seq) */
  uint64_t image_size; /* a vision model's image side in pixels (0: the
                          config's image_size) */
  uint64_t grad_accum; /* micro-batches per optimizer step (>= 1) */
  enum vl_precision precision;
  enum vl_optimizer optimizer;
  enum vl_opt_impl opt_impl;
  enum vl_attention attention;
  enum vl_ckpt checkpointing;
  enum vl_framework framework;
  bool grads_persist;     /* zero_grad(set_to_none=False): grads live all step */
  enum vl_loop loop;      /* the loop's defaults, applied by vl_bill_compute */
  bool opt_impl_given;    /* --optimizer-impl was given (a loop's default does not apply) */
  bool grads_to_backward; /* the last step's grads live until just before the backward
                             (Lightning zeroes them inside its closure) */
  bool drop_outputs;      /* the loop keeps only the loss (HF Trainer), not the
                             model output with its logits, past the forward */
  bool master_grads_fp32; /* mixed-*: keep fp32 main grads (Megatron's 18 B/param) */
  bool ddp_static_graph;  /* DDP(static_graph=True): the first buckets live into step 2 */
  bool analytic_only;     /* no training replay: the lines alone (sensitivity's draws) */
  /* LoRA / QLoRA */
  uint64_t lora_rank;                            /* 0: full fine-tuning */
  const char *lora_targets[VL_MAX_LORA_TARGETS]; /* module names; "all-linear" */
  int n_lora_targets;                            /* 0: the PEFT default for the architecture */
  bool qlora;                                    /* 4-bit NF4 base weights (bitsandbytes) */
  /* parallelism, per GPU */
  unsigned zero;       /* 0..3 */
  uint64_t dp, tp, pp; /* >= 1 each */
  bool pp_gpipe;       /* GPipe: every stage holds all micro-batches (else 1F1B) */
  bool sp;             /* sequence parallelism (with tp) */
  enum vl_offload offload;
  /* inference */
  uint64_t new_tokens;
  enum vl_kv_layout kv_layout;
  uint64_t kv_block_tokens; /* paged KV block size (vLLM: 16) */
  uint64_t kv_bytes;        /* bytes per cached element; 0: the activation dtype */
  enum vl_allocator allocator;
};

/*! Defaults: batch 1, seq 2048, amp-bf16, adamw foreach, sdpa, no
 * checkpointing, HF accounting, 1 GPU. */
void vl_job_init(struct vl_job *job);
/*! A vision model's image side in pixels: job->image_size, else the
 * config's image_size. */
uint64_t vl_job_image_side(const struct vl_arch *arch, const struct vl_job *job);
/*! An encoder-decoder's decoder tokens per sequence: job->target_seq, else
 * job->seq; a model without a decoder of its own: job->seq. */
uint64_t vl_job_target_seq(const struct vl_arch *arch, const struct vl_job *job);

/* Constants of the installed software stack. Calibration changes these
 * numbers, not the structure. Sources in docs/model.md. */
struct vl_overheads {
  uint64_t cuda_context_bytes;       /* driver context + loaded kernels, outside PyTorch */
  uint64_t cuda_context_infer_bytes; /* the same for a process that only generates */
  uint64_t cublas_workspace_bytes;   /* one cuBLAS handle's workspace, inside the allocator
                                        (CUDA's cuBLASLt shares it) */
  uint64_t cublaslt_workspace_bytes; /* a separate cuBLASLt workspace beside it (ROCm's
                                        hipBLASLt); 0: none */
  uint64_t nccl_bytes;               /* NCCL internal buffers per process, when ranks > 1 */
  unsigned sm_count, threads_per_sm; /* the card's, for the scratch of CUDA reductions */
  double allocator_churn;            /* reserved - allocated, as a fraction of the churning
                                        bytes (activations + temporaries) */
  double allocator_churn_expandable; /* the same with expandable segments */
};

/*! The constants of the reference stack (H200, CUDA 13, PyTorch 2.11): the
 * measured ones from lib/model/calibration.c, where each names the dataset
 * under bench/results/ that set it; the cuBLAS workspace is PyTorch's
 * default (lib/model/pytorch_constants.h). */
void vl_overheads_default(struct vl_overheads *o);
/*! The CUDA context and libraries of one of the job's processes, outside
 * PyTorch (NCCL's not counted): a generate()-only process's, except with
 * expandable segments, or a training one's. */
uint64_t vl_context_bytes(const struct vl_overheads *o, const struct vl_job *job);
/*! The BLAS workspaces one thread that runs matmuls holds, in bytes: its
 * cuBLAS handle's and, where cuBLASLt keeps its own, that one's. */
uint64_t vl_workspace_thread_bytes(const struct vl_overheads *o);
/* Threads of a training step that run matmuls, each with its own cuBLAS
 * handle and workspace: the forward's and autograd's backward thread
 * (measured: bench/results/probe/unexplained.json); a generate() process
 * runs them on one. */
#define VL_WORKSPACE_THREADS_TRAIN 2u
#define VL_WORKSPACE_THREADS_INFER 1u
/* Of those, how many job's task has: the one place that chooses. */
unsigned vl_workspace_threads(const struct vl_job *job);

/* ---- the bill --------------------------------------------------------- */

enum vl_line {
  VL_LINE_PARAMETERS,
  VL_LINE_MASTER,
  VL_LINE_GRADIENTS,
  VL_LINE_OPTIMIZER,
  VL_LINE_ACTIVATIONS,
  VL_LINE_AUTOCAST,
  VL_LINE_TRANSIENT,
  VL_LINE_KV_CACHE,
  VL_LINE_COMM,
  VL_LINE_WORKSPACE,
  VL_LINE_RESERVE,
  VL_LINE_CONTEXT,
  VL_LINE_COUNT
};

/*! JSON key of a bill line ("parameters", "master_weights", ...). */
const char *vl_line_key(enum vl_line l);
/*! Human label of a bill line ("optimizer states", ...). */
const char *vl_line_label(enum vl_line l);
/*! true for lines held by PyTorch's caching allocator (counted in
 * torch.cuda.max_memory_allocated); false for reserve and context. */
bool vl_line_in_allocated(enum vl_line l);

enum vl_phase {
  VL_PH_FORWARD,
  VL_PH_BACKWARD,
  VL_PH_OPTIMIZER,
  VL_PH_PREFILL,
  VL_PH_DECODE,
  VL_PH_COUNT
};
const char *vl_phase_name(enum vl_phase p);

struct vl_input {
  const char *name; /* symbol as in the formula */
  double value;     /* as shown */
  const char *unit; /* "bytes", "tokens", "" */
  uint64_t whole;   /* the value exactly, unless real */
  bool real;        /* a real factor (value), not a whole number */
};

#define VL_TERM_INPUTS 12 /* the most inputs a term shows */

/* One formula of the bill with its numbers plugged in. Detail terms explain
 * a part of another term and are not summed. The formula is the term's
 * definition: its bytes are that expression evaluated over in[] (whole,
 * or real where real is set), and nothing else; in[] holds the inputs it
 * names (lib/model/terms.def, the table; cmake/terms_gen.c, the grammar;
 * docs/architecture.md, how to add a term). */
struct vl_term {
  enum vl_line line;
  const char *name;
  const char *formula;
  const char *source;
  uint64_t bytes;
  bool detail;
  int n_in;
  struct vl_input in[VL_TERM_INPUTS];
};

#define VL_MAX_TERMS 96

/*! The most a count or byte count in an estimate may be: 2^53, exact in
 * the double of any JSON reader (8 PiB in bytes, past any machine). The
 * renderers refuse a bill past it (vl_bill_representable), so the bill
 * does not replay one. */
#define VL_EXACT_MAX (1ull << 53)

struct vl_bill {
  enum vl_task task;
  uint64_t params;                  /* sum(p.numel()) of the whole model */
  uint64_t trainable_params;        /* whole model; LoRA: adapters only */
  uint64_t params_per_gpu;          /* elements this GPU stores (after TP/PP/ZeRO-3) */
  uint64_t lines[VL_LINE_COUNT];    /* bytes at the peak moment */
  uint64_t line_max[VL_LINE_COUNT]; /* each line's own maximum over the step */
  unsigned live[VL_LINE_COUNT];     /* bit mask of phases where the line is live */
  uint64_t phase_peak[VL_PH_COUNT]; /* allocated bytes at each phase's peak */
  enum vl_phase peak_phase;
  uint64_t peak_allocated_bytes; /* comparable with max_memory_allocated() */
  uint64_t peak_reserved_bytes;  /* comparable with max_memory_reserved() */
  uint64_t cuda_context_bytes;   /* outside PyTorch: context, NCCL */
  uint64_t total_bytes;          /* comparable with NVML process memory */
  uint64_t host_bytes;           /* CPU RAM for offloaded states */
  uint64_t tokens;               /* tokens per micro-batch (train) or per batch */
  uint64_t pp_stage;             /* which pipeline stage the bill is for (0-based) */
  /* with pp > 1: the first stage (micro-batches in flight) and the last
   * (the head, the outputs), of which the bill is the heavier */
  struct vl_bill_stage {
    uint64_t peak_allocated_bytes, peak_reserved_bytes, total_bytes;
  } pp_first, pp_last;
  /* The same job's other outcome, where timing rather than the job decides:
   * DDP frees its first gradient buckets at the rebuild before step 2, or
   * keeps them into step 2 when NCCL's watchdog has not yet seen the first
   * step's all-reduces finish (docs/model.md). All zero when there is none;
   * it may lie above or below the bill. */
  struct vl_bill_other {
    uint64_t peak_allocated_bytes, peak_reserved_bytes, total_bytes;
    const char *why; /* one line: what decides, in words */
  } other;
  /* why this job's estimate is approximate beyond its architecture
   * (vl_arch_approximate), or NULL (static storage) */
  const char *approximate;
  int n_terms;
  struct vl_term terms[VL_MAX_TERMS];
};

/*! The job as its loop (job->loop) runs it: the loop's defaults applied
 * (HF Trainer: outputs dropped, fused AdamW unless --optimizer-impl was
 * given; Lightning: outputs dropped, gradients zeroed just before the
 * backward). vl_bill_compute applies it itself. */
void vl_job_apply_loop(const struct vl_job *in, struct vl_job *out);
/*! The LoRA targets a LoraConfig without target_modules takes on this
 * model type: PEFT's default (peft 0.21 utils/constants.py), *peft true;
 * where PEFT has none (LoraConfig then asks for them) the type's query and
 * value projections, *peft false. Up to 4 names into names[] (the
 * inventory's, static strings). @return how many. */
int vl_lora_default_targets(const struct vl_arch *arch, const char **names, bool *peft);
/*! transformers' module name of the linear this inventory calls `name`
 * (DeBERTa-v2's query_proj for query, DistilBERT's q_lin), the name
 * a LoraConfig's target_modules takes; `name` itself where they agree. */
const char *vl_lora_module_name(const struct vl_arch *arch, const char *name);
/*! Does transformers 5.17 run this type's attention eagerly whatever is
 * asked (no SDPA path: gpt-oss's sinks, DeBERTa-v2)? The bill then
 * estimates eager attention. */
bool vl_arch_eager_only(const struct vl_arch *arch);
/*! The job's LoRA target modules as one comma-separated string in buf
 * (n bytes, cut to fit; "" for PEFT's default). */
void vl_job_lora_targets(const struct vl_job *j, char *buf, size_t n);

/*! Compute the per-GPU bill of one training step (job->task == TRAIN) or
 * one generate() call (INFER).
 * @return VL_OK; VL_ECONFLICT for inconsistent settings (message says which);
 * VL_EINVAL for an unknown LoRA target (message lists the valid ones);
 * VL_EOVERFLOW when a product does not fit 64 bits. */
/*! The bytes a fit decision must budget for: the process total, or the
 * other outcome's when timing decides between two and it needs more
 * (bill->other). */
uint64_t vl_bill_budget_bytes(const struct vl_bill *bill);

vl_status vl_bill_compute(const struct vl_arch *arch, const struct vl_job *job,
                          const struct vl_overheads *ov, struct vl_bill *bill,
                          struct vl_err *err) VL_MUST_USE;

/*! The refusals vl_bill_compute makes before it bills, with its messages:
 * the job's limits and settings, the model's parameter inventory, the LoRA
 * targets, what generate() takes. Not the bill's own overflow (a product
 * past 64 bits), which only billing finds. No replay: microseconds.
 * @return VL_OK where vl_bill_compute gets past them, else its status. */
vl_status vl_bill_check(const struct vl_arch *arch, const struct vl_job *job,
                        struct vl_err *err) VL_MUST_USE;

#endif
