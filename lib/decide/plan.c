/* The planner. Time: training FLOPs 6ND (forward 2ND, backward 4ND; full
 * recomputation adds 2ND; a frozen LoRA base skips its weight gradients,
 * 2ND) over count x dense bf16 peak x MFU (EleutherAI "Transformer Math
 * 101"; PaLM appendix B; the default MFU 0.40 is the Llama-2 model card's
 * 0.39-0.43 on A100s, REFERENCE.md). Data parallelism pays a ring
 * all-reduce of the gradients, 2(dp-1)/dp x bytes over the interconnect,
 * ZeRO-3 an all-gather of the weights, hidden behind the last micro-batch's
 * backward up to its time; tensor parallelism four all-reduces of a
 * micro-batch's activations per layer and the pipeline's sends, on the
 * critical path (step_time). QLoRA pays at least its dequantisation traffic at HBM bandwidth.
 * Memory: vl_bill_compute. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "../model/policy.h"
#include "../model/pytorch_constants.h"
#include "vramledger/alloc.h"
#include "vramledger/plan.h"
#include "vramledger/steptime.h"

void vl_plan_query_init(struct vl_plan_query *q) {
  memset(q, 0, sizeof *q);
  vl_job_init(&q->base);
  q->max_gpus = 64;
  q->gpus_per_node = 8;
  q->inter_node_gb_s = 50.0;
  q->margin = VL_FIT_MARGIN_DEFAULT;
  q->mfu = 0.40;
  q->overlap = 1.0;
  q->offload_slowdown = 4.0;
}

/* 6 x N FLOPs a token (4 with LoRA: no weight gradients for the frozen
 * base), + 2 x N when every layer is recomputed; N the active parameters.
 * The same convention as the plan's times (docs/model.md, plan). */
static double flops_factor(const struct vl_job *j) {
  double f = j->lora_rank ? 4.0 : 6.0;
  if (j->checkpointing == VL_CKPT_FULL) f += 2.0;
  return f;
}

static double flops_per_token(const struct vl_arch *a, const struct vl_job *j) {
  struct vl_inventory inv;
  if (vl_inventory_build(a, &inv, NULL) != VL_OK) return 0;
  return flops_factor(j) * vl_active_params(a, &inv);
}

/* the card's dense tensor peak for the job's 16-bit type (TFLOP/s): fp16
 * for the fp16 policies, bf16 for the others (fp32 jobs run their matmuls
 * in TF32/bf16 on tensor cores or not at all: the bf16 figure is the
 * published convention for MFU) */
static double peak_tflops(const struct vl_gpu *g, const struct vl_job *j) {
  bool fp16 = j->precision == VL_PREC_AMP_FP16 || j->precision == VL_PREC_FP16 ||
              j->precision == VL_PREC_MIXED_FP16;
  return fp16 && g->fp16_tflops > 0 ? g->fp16_tflops : g->bf16_tflops;
}

double vl_plan_mfu_measured(const struct vl_arch *a, const struct vl_job *j,
                            double tokens_per_s_per_gpu, const struct vl_gpu *g) {
  double fpt = flops_per_token(a, j);
  double peak = peak_tflops(g, j);
  if (!(fpt > 0) || !(peak > 0) || !(tokens_per_s_per_gpu > 0)) return 0;
  return tokens_per_s_per_gpu * fpt / (peak * 1e12);
}

/* parallel dimensions in use: 0 for one GPU */
static int dims(const struct vl_plan_candidate *c) {
  return (c->tp > 1) + (c->pp > 1) + (c->dp > 1);
}

static bool admissible(const struct vl_plan_candidate *c) {
  return c->meets_deadline && c->within_budget;
}

/* by value alone: admissible first, then the higher net value */
static int by_value(const void *x, const void *y) {
  const struct vl_plan_candidate *a = x, *b = y;
  if (admissible(a) != admissible(b)) return admissible(a) ? -1 : 1;
  if (a->net_value_usd != b->net_value_usd) return a->net_value_usd > b->net_value_usd ? -1 : 1;
  return 0;
}

/* Values within 1 % are one value: sorted by value, each plan joins the
 * tier of the best plan above it while its net value is within 1 % of that
 * one's, else opens the next (a budget owner pays the same for the hours
 * saved, so the faster plan wins among them). Tiers are anchored at their
 * best, not fixed bins: $13.27 and $13.30 share a tier wherever they fall. */
static void value_tiers(struct vl_plan_candidate *c, size_t n) {
  qsort(c, n, sizeof *c, by_value);
  unsigned tier = 0;
  for (size_t i = 0, anchor = 0; i < n; i++) {
    double a = c[anchor].net_value_usd;
    bool joins = i > 0 && admissible(&c[i]) == admissible(&c[anchor]) &&
                 fabs(a - c[i].net_value_usd) <= 0.01 * fabs(a);
    if (i > 0 && !joins) tier++, anchor = i;
    c[i].tier = tier;
  }
}

/* Best first: meets the deadline and budget, then the least cost (or cost +
 * time x value) within 1 % (value_tiers), then the faster, then the exact
 * value, then the simpler plan: fewer GPUs, fewer parallel dimensions, a
 * lower ZeRO stage, states on the GPU, a 16-bit base, no recomputation,
 * the smaller micro-batch. */
static int by_rank(const void *x, const void *y) {
  const struct vl_plan_candidate *a = x, *b = y;
  double ka = a->net_value_usd, kb = b->net_value_usd; /* higher is better */
  /* admissible plans come first in the tiers (value_tiers) */
  if (a->tier != b->tier) return a->tier < b->tier ? -1 : 1;
  if (a->hours != b->hours) return a->hours < b->hours ? -1 : 1;
  if (ka != kb) return ka > kb ? -1 : 1;
#define SIMPLER(e)                                                                                 \
  if ((e(a)) != (e(b))) return (e(a)) < (e(b)) ? -1 : 1
#define COUNT(c) (c)->count
#define ZERO(c) (c)->zero
#define OFFLOAD(c) ((c)->offload != VL_OFFLOAD_NONE)
#define QLORA(c) (c)->qlora
#define CKPT(c) ((c)->checkpointing != VL_CKPT_NONE)
#define MB(c) (c)->micro_batch
  SIMPLER(COUNT);
  SIMPLER(dims);
  SIMPLER(ZERO);
  SIMPLER(OFFLOAD);
  SIMPLER(QLORA);
  SIMPLER(CKPT);
  SIMPLER(MB);
#undef SIMPLER
#undef COUNT
#undef ZERO
#undef OFFLOAD
#undef QLORA
#undef CKPT
#undef MB
  return (a->hours > b->hours) - (a->hours < b->hours);
}

/* Put x on a grid of `step` so that values that differ only by rounding
 * (the same cost reached by 1 GPU or by 8 with the traffic hidden) compare
 * equal, exactly and transitively. */
static double quantise(double x, double step) {
  return step > 0 ? (double)llround(x / step) * step : x;
}

static int by_time(const void *x, const void *y) {
  const struct vl_plan_candidate *a = x, *b = y;
  if (a->hours != b->hours) return a->hours < b->hours ? -1 : 1;
  return (a->cost_usd > b->cost_usd) - (a->cost_usd < b->cost_usd);
}

/* What one search varies besides the layout and the micro-batch: the
 * optimizer's place (offloaded to the CPU, tried when the job does not
 * say), checkpointing, and a 4-bit base (QLoRA, tried beside LoRA when the
 * job has LoRA and did not ask for QLoRA itself). */
struct variant {
  enum vl_offload offload;
  enum vl_ckpt ckpt;
  bool qlora;
};

static int variants(const struct vl_job *base, struct variant *v) {
  int n = 0;
  int n_off = base->offload == VL_OFFLOAD_NONE ? 2 : 1;
  int n_q = base->lora_rank && !base->qlora ? 2 : 1;
  for (int off = 0; off < n_off; off++)
    for (int ck = 0; ck < 2; ck++)
      for (int ql = 0; ql < n_q; ql++)
        v[n++] = (struct variant){off ? VL_OFFLOAD_OPTIMIZER : base->offload,
                                  ck ? VL_CKPT_FULL : VL_CKPT_NONE, base->qlora || ql};
  return n;
}

/* Weights a QLoRA base keeps in 4 bits: the layers' linear weights (as
 * the bill quantises them, lib/model/bill.c). */
static double quantised_params(const struct vl_inventory *inv) {
  double q = 0;
  for (int i = 0; i < inv->n; i++)
    if (inv->t[i].kind == VL_T_LINEAR && inv->t[i].per_layer)
      q += (double)inv->t[i].rows * (double)inv->t[i].cols * (double)inv->t[i].count;
  return q;
}

/* The search's fixed figures, shared by every candidate. */
/* A bill does not depend on the card, and every card of the search tries
 * the same jobs: each distinct job is estimated once, keyed by two hashes
 * of its bytes (every candidate's job is copied from the query's base). */
#define PLAN_MEMO_SLOTS (1u << 15)
struct bill_memo {
  uint64_t h1, h2; /* h1 == 0: empty */
  bool ok;
  uint64_t budget, host, trainable;
};

/* the priced step of a job on a card (vl_step_time), kept */
struct time_memo {
  uint64_t h1, h2; /* h1 == 0: empty */
  bool ok;
  double step_s, backward_s;
};

struct search {
  struct time_memo *tmemo; /* NULL: every step priced */
  const struct vl_plan_query *q;
  const struct vl_overheads *ov;
  const struct vl_inventory *inv;
  double P;  /* active parameters */
  double Pq; /* parameters a QLoRA base quantises */
  double tokens_per_step;
  struct vl_bill *bill;
  struct bill_memo *memo; /* NULL: every candidate estimated */
  struct vl_plan_result *r;
  size_t cap;
};

/* The job's bytes per element, as the bill counts them (lib/model/precision.c) */
static struct vl__policy policy(const struct vl_job *j) {
  struct vl__policy pol;
  vl__policy_get(j->precision, &pol);
  return pol;
}

/* Seconds of one ring all-reduce of `bytes` over n ranks at bw bytes/s:
 * each rank sends and receives 2(n-1)/n of the bytes (NCCL's ring; Patarasuk
 * and Yuan 2009). */
static double ring_allreduce_s(double bytes, double n, double bw) {
  return n > 1 ? 2.0 * (n - 1) / n * bytes / bw : 0.0;
}

/* Tensor parallelism's all-reduces of one step, in seconds (on the critical
 * path: each sits between two dependent matmuls). Megatron-LM splits each
 * layer's attention and MLP so that forward all-reduces the b x s x h
 * activations twice and backward their gradients twice (Shoeybi et al.
 * 2019, section 3; Narayanan et al. 2021, section 3.2); a full recomputation
 * reruns the forward, its two all-reduces included (Megatron-LM's
 * tensor_parallel/random.py CheckpointFunction). Sequence parallelism turns
 * each into a reduce-scatter and an all-gather of the same volume
 * (Korthikanti et al. 2022, section 4.2.2): the same time. A GPU runs the
 * layers of its pipeline stage, once per micro-batch. */
static double tp_comm_s(const struct vl_arch *a, const struct vl_job *j, double link_bw) {
  if (j->tp < 2) return 0.0;
  struct vl__policy pol = policy(j);
  /* forward: the row-parallel matmuls' outputs, in the compute dtype (autocast's half, or
   * the weights'); backward: the gradients of the column-parallel matmuls' inputs, the
   * norms' outputs, in their dtype: the residual stream's (under autocast layer_norm runs
   * in fp32 and HF's RMSNorm returns its input's dtype, so fp32; the matmul's own cast to
   * half is after the split, and its backward casts the gradient back) */
  double fwd = (j->checkpointing == VL_CKPT_FULL ? 4.0 : 2.0) * (double)pol.act;
  double bwd = 2.0 * (double)pol.resid;
  double bsh = (double)j->batch * (double)j->seq * (double)a->hidden; /* elements */
  double layers = (double)a->layers / (double)(j->pp ? j->pp : 1);
  return layers * (double)j->grad_accum * ring_allreduce_s(bsh * (fwd + bwd), j->tp, link_bw);
}

/* Bytes of the whole model's weights as stored: the policy's weight dtype, NF4 for the
 * layers' linear weights of a QLoRA base (as the bill stores them, lib/model/bill.c) */
static double stored_weight_bytes(const struct search *S, const struct vl_job *j,
                                  const struct vl__policy *pol) {
  double quantised = j->qlora ? S->Pq : 0.0;
  return ((double)S->inv->total - quantised) * (double)pol->weight +
         quantised * VL_BNB_NF4_BYTES_PER_ELEM;
}

/* Data parallelism's traffic of one step (`trainable` elements), in seconds, at bw
 * bytes/s. The gradients are all-reduced in their own dtype: DDP's buckets take
 * their parameters' (torch/csrc/distributed/c10d/reducer.cpp, Reducer::initialize_buckets:
 * a bucket's flat gradients have its parameters' options; a comm hook may compress them,
 * none is assumed), so fp32 under autocast, whose weights stay fp32, and the half
 * dtype only for half weights; Megatron-LM reduces its fp32 main_grad
 * (vl__grad_elem_bytes). ZeRO-3 all-gathers the weights in their storage dtype for
 * forward and for backward, (n-1)/n of them each: the volume of one ring all-reduce. */
static double dp_comm_s(const struct search *S, const struct vl_job *j, uint64_t trainable,
                        double bw) {
  struct vl__policy pol = policy(j);
  double dp = (double)j->dp, tp = (double)j->tp;
  double grads = (double)trainable * (double)vl__grad_elem_bytes(j, &pol) / tp;
  double s = ring_allreduce_s(grads, dp, bw);
  if (j->zero == 3) s += ring_allreduce_s(stored_weight_bytes(S, j, &pol) / tp, dp, bw);
  return s;
}

/* Pipeline sends of one step, in seconds, at link_bw bytes/s: each micro-batch's
 * b x s x h hidden states forward and their gradient backward across each of the pp-1
 * stage boundaries, in the residual stream's dtype (the bill's resid): a layer's output
 * is the residual sum, which under autocast stays fp32 (autocast leaves add alone, and
 * the fp32 embeddings plus a half matmul output promote to fp32), else the weights'. */
static double pp_comm_s(const struct vl_arch *a, const struct vl_job *j, double link_bw) {
  if (j->pp < 2) return 0.0;
  double bytes = (double)j->batch * (double)j->seq * (double)a->hidden * (double)policy(j).resid;
  return 2.0 * (double)j->grad_accum * bytes * (double)(j->pp - 1) / link_bw;
}

/* Time one optimizer step of job j (`trainable` elements) on count x g
 * (compute, communication, offload and dequantisation), in seconds:
 *   step = compute + tensor-parallel all-reduces + pipeline sends
 *          + max(0, data-parallel traffic - overlap x last backward)
 * The data-parallel gradient all-reduce (and ZeRO-3's weight gathers) runs
 * bucket by bucket while backward goes on (PyTorch DDP's reducer; DeepSpeed
 * overlap_comm); under accumulation only the last micro-batch's backward
 * synchronises (DDP no_sync), so that backward is what hides it. */
/* one GPU's step priced kernel by kernel (lib/decide/steptime.c), memoised
 * by job and card: false when it cannot be priced, or (VL_ENOMEM in *st)
 * when memory ran out pricing it */
static bool priced(struct search *S, const struct vl_gpu *g, const struct vl_job *j, double *step,
                   double *backward, vl_status *st) {
  uint64_t h1 = 0x9e3779b97f4a7c15ull, h2 = 0xc2b2ae3d27d4eb4full, k1, k2;
  vl__hash2(j, sizeof *j, &h1, &h2);
  vl__hash2(&g, sizeof g, &h1, &h2);
  vl__memo_keys(h1, h2, &k1, &k2);
  struct time_memo one = {0}, *m = &one;
  if (S->tmemo) {
    size_t i = vl__memo_probe(S->tmemo, sizeof *S->tmemo, PLAN_MEMO_SLOTS, k1, k2, 16);
    if (i != SIZE_MAX) m = &S->tmemo[i];
  }
  if (!m->h1) {
    struct vl_step_time t;
    vl_status ts = vl_step_time(S->q->arch, j, g, &t, NULL);
    if (ts == VL_ENOMEM) { /* not a step that cannot be priced: not kept */
      *st = ts;
      return false;
    }
    m->ok = ts == VL_OK;
    m->step_s = t.step_s;
    m->backward_s = t.backward_s + t.recompute_s;
    if (m != &one) m->h1 = k1, m->h2 = k2;
  }
  *step = m->step_s, *backward = m->backward_s;
  return m->ok;
}

static void step_time(struct search *S, const struct vl_gpu *g, unsigned count,
                      const struct vl_job *j, uint64_t trainable, struct vl_plan_candidate *c,
                      vl_status *st) {
  const struct vl_plan_query *q = S->q;
  double f = flops_factor(j);
  double compute, last_backward, step, backward;
  if (!q->mfu_given && priced(S, g, j, &step, &backward, st)) {
    /* the per-GPU step: its micro-batches, its share of the layers and of
     * each matmul (tp), the optimizer */
    compute = step;
    last_backward = backward / (double)j->grad_accum;
  } else {
    if (*st != VL_OK) return;
    compute = f * S->P * S->tokens_per_step / ((double)count * peak_tflops(g, j) * 1e12 * q->mfu);
    /* backward of one micro-batch: all but the forward's 2N of fN a token
     * (recomputation runs inside backward) */
    last_backward = compute / (double)j->grad_accum * (f - 2.0) / f;
  }
  /* a pipeline idles (pp-1) of its (m + pp-1) slots, m micro-batches a step
   * (1F1B; Narayanan et al. 2021, the bubble) */
  if (j->pp > 1) compute *= (double)(j->grad_accum + j->pp - 1) / (double)j->grad_accum;
  double link = (g->link_gb_s > 0 ? g->link_gb_s : 16.0) * 1e9;
  double bw = count <= q->gpus_per_node ? link : fmin(link, q->inter_node_gb_s * 1e9);
  double tp = (double)j->tp;
  /* a measured scaling efficiency stands for the data-parallel traffic:
   * compute / efficiency, the modelled gradients not added */
  bool measured = q->dp_efficiency > 0 && j->dp > 1;
  double dp_comm = measured ? 0 : dp_comm_s(S, j, trainable, bw);
  double pp_comm = pp_comm_s(q->arch, j, link);
  c->compute_s = compute;
  c->tp_comm_s = tp_comm_s(q->arch, j, link); /* within a node: tp <= gpus_per_node */
  c->dp_comm_s = dp_comm;
  c->dp_hidden_s = fmin(dp_comm, q->overlap * last_backward);
  c->comm_s = c->tp_comm_s + pp_comm + dp_comm;
  c->step_s = (measured ? compute / q->dp_efficiency : compute) + c->tp_comm_s + pp_comm +
              (dp_comm - c->dp_hidden_s);
  if (j->offload != VL_OFFLOAD_NONE) c->step_s *= q->offload_slowdown;
  if (j->qlora) {
    /* bitsandbytes dequantises each 4-bit weight to the compute type before
     * its matmul, in forward, backward and any recomputation: 0.5 B read
     * and the compute dtype's bytes written a weight (2 B under half and
     * AMP, 4 B under fp32; the matmul's own read LoRA pays too), at the
     * card's HBM bandwidth. A lower bound (kernels do not reach the peak);
     * --qlora-slowdown replaces it with a measured factor. */
    double passes = j->checkpointing == VL_CKPT_FULL ? 3.0 : 2.0;
    double hbm = (g->hbm_gb_s > 0 ? g->hbm_gb_s : 1000.0) * 1e9;
    double moved = 0.5 + (double)policy(j).act; /* bytes a weight */
    c->dequant_s = (double)j->grad_accum * passes * S->Pq / (tp * (double)j->pp) * moved / hbm;
    c->step_s = q->qlora_slowdown > 0 ? c->step_s * q->qlora_slowdown : c->step_s + c->dequant_s;
  }
}

/* the memo's slot for job j (keyed by k1, k2): its entry (k1 set) or an
 * empty one to fill; NULL without a memo or in a crowded stretch */
static struct bill_memo *memo_slot(struct search *S, const struct vl_job *j,
                                   const struct vl_overheads *ov, uint64_t *k1, uint64_t *k2) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  vl__hash2(j, sizeof *j, &h1, &h2);
  /* and the card's workspaces, the one input of the bill that is the card's */
  const uint64_t ws[2] = {ov->cublas_workspace_bytes, ov->cublaslt_workspace_bytes};
  vl__hash2(ws, sizeof ws, &h1, &h2);
  vl__memo_keys(h1, h2, k1, k2);
  if (!S->memo) return NULL;
  size_t i = vl__memo_probe(S->memo, sizeof *S->memo, PLAN_MEMO_SLOTS, *k1, *k2, 16);
  return i == SIZE_MAX ? NULL : &S->memo[i];
}

/* Estimate the configuration `pick` (its card, count, layout, variant and
 * micro-batch) as the job vl_plan_candidate_job makes of it; keep it when
 * it fits. @return false when it does not fit (larger micro-batches need
 * more), VL_ENOMEM in *st. */
static bool consider(struct search *S, const struct vl_plan_candidate *pick, vl_status *st) {
  const struct vl_plan_query *q = S->q;
  struct vl_plan_result *r = S->r;
  const struct vl_gpu *g = pick->gpu;
  unsigned count = pick->count;
  struct vl_job job, *j = &job;
  vl_plan_candidate_job(q, pick, j);
  r->evaluated++;
  struct vl_overheads ov = *S->ov;
  vl_overheads_for_gpu(&ov, g); /* its cuBLAS workspaces */
  uint64_t k1, k2;
  struct bill_memo one = {0}, *m = memo_slot(S, j, &ov, &k1, &k2);
  if (!m) m = &one; /* estimated, not kept */
  if (!m->h1) {
    vl_status bs = vl_bill_compute(q->arch, j, &ov, S->bill, NULL);
    if (bs == VL_ENOMEM) { /* not a job that cannot be estimated: not kept */
      *st = bs;
      return false;
    }
    m->ok = bs == VL_OK;
    m->budget = vl_bill_budget_bytes(S->bill);
    m->host = S->bill->host_bytes;
    m->trainable = S->bill->trainable_params;
    if (m != &one) {
      m->h1 = k1;
      m->h2 = k2;
    }
  }
  if (!m->ok) return false;
  struct vl_fit fit;
  vl_fit_check(m->budget, g, q->margin, &fit);
  if (!fit.fits) return false;
  if (r->n == S->cap) {
    void *p = vl_realloc(r->c, S->cap * 2 * sizeof *r->c);
    if (!p) {
      *st = VL_ENOMEM;
      return false;
    }
    r->c = p;
    S->cap *= 2;
  }
  struct vl_plan_candidate *c = &r->c[r->n++];
  *c = *pick;
  c->peak_bytes_per_gpu = m->budget;
  c->headroom_bytes = fit.headroom_bytes;
  /* a card whose context is carried over from the H200: a headroom inside
   * its range is a fit the card's own context may undo, said, not hidden */
  c->context_range_bytes = vl_context_range_bytes(g);
  c->context_edge = vl_fit_near_edge(&fit, c->context_range_bytes);
  c->host_bytes = m->host;
  c->memory_share = (double)c->peak_bytes_per_gpu / (double)g->memory_bytes;
  step_time(S, g, count, j, m->trainable, c, st);
  if (*st != VL_OK) return false;
  c->efficiency = c->compute_s / c->step_s;
  c->hours = (double)r->steps * c->step_s / 3600.0;
  c->cost_usd = c->hours * count * g->usd_per_hour;
  c->meets_deadline = q->deadline_hours <= 0 || c->hours <= q->deadline_hours;
  c->within_budget = q->budget_usd <= 0 || c->cost_usd <= q->budget_usd;
  /* value: what the business gives up per hour, plus a late penalty */
  double late = q->deadline_hours > 0 && c->hours > q->deadline_hours ? q->late_penalty_usd : 0;
  c->net_value_usd = -(c->cost_usd + c->hours * q->value_per_hour + late);
  return true;
}

/* bf16 weights, or autocast to bf16 */
static bool runs_bf16(enum vl_precision p) {
  return p == VL_PREC_BF16 || p == VL_PREC_AMP_BF16 || p == VL_PREC_MIXED_BF16;
}

/* A card the query cannot be planned on, its reason kept for the output:
 * no throughput to time a step by, or bf16 asked of a card without it
 * (the catalog's compute capability: docs/cmd/plan.md). */
static bool excluded(const struct vl_plan_query *q, const struct vl_gpu *g,
                     struct vl_plan_result *r) {
  char why[160];
  if (g->bf16_tflops <= 0)
    snprintf(why, sizeof why, "no bf16_tflops in the catalog to time a step by");
  else if (g->no_bf16 && runs_bf16(q->base.precision))
    snprintf(why, sizeof why,
             "no native bf16 for --precision %s (compute capability %s; bf16 needs 8.0, "
             "Ampere, or later): fp16 or fp32 runs there",
             vl_precision_name(q->base.precision),
             *g->compute_capability ? g->compute_capability : "unknown");
  else
    return false;
  if (r->n_excluded < VL_PLAN_EXCLUDED) {
    r->excluded[r->n_excluded].gpu = g;
    snprintf(r->excluded[r->n_excluded].why, sizeof r->excluded[0].why, "%s", why);
    r->n_excluded++;
  }
  return true;
}

const char *vl_plan_hours_text(double hours, char *buf, size_t n) {
  double s = hours * 3600.0;
  if (hours >= 100)
    snprintf(buf, n, "%.0f h", hours);
  else if (hours >= 1)
    snprintf(buf, n, "%.1f h", hours);
  else if (s >= 600)
    snprintf(buf, n, "%.0f min", s / 60);
  else if (s >= 60)
    snprintf(buf, n, "%.1f min", s / 60);
  else if (s >= 10)
    snprintf(buf, n, "%.0f s", s);
  else
    snprintf(buf, n, "%.1f s", s);
  return buf;
}

const char *vl_plan_usd_text(double usd, char *buf, size_t n) {
  if (usd >= 1)
    snprintf(buf, n, "$%.2f", usd);
  else if (usd >= 0.01)
    snprintf(buf, n, "%.1f cents", 100 * usd);
  else if (usd > 0)
    snprintf(buf, n, "%.2g cents", 100 * usd);
  else
    snprintf(buf, n, "$0");
  return buf;
}

/* A time in seconds as a reader takes it: seconds, or milliseconds under 1 s. */
static void seconds_text(double s, char *buf, size_t n) {
  if (s >= 1)
    snprintf(buf, n, "%.2f s", s);
  else
    snprintf(buf, n, "%.3g ms", 1e3 * s);
}

/* The decision tree's line on the chosen plan's communication a step: what
 * the tensor-parallel all-reduces add, how much of the data-parallel
 * traffic backward hides. */
static void comm_trace(const struct vl_plan_candidate *b, char *line, size_t n) {
  char comp[24], tp[24], dp[24], hid[24];
  seconds_text(b->compute_s, comp, sizeof comp);
  seconds_text(b->tp_comm_s, tp, sizeof tp);
  seconds_text(b->dp_comm_s, dp, sizeof dp);
  seconds_text(b->dp_hidden_s, hid, sizeof hid);
  size_t l = (size_t)snprintf(line, n, "communication a step beside %s of compute:", comp);
  if (b->tp > 1 && l < n)
    l +=
        (size_t)snprintf(line + l, n - l, " tensor-parallel all-reduces %s, on the critical path%s",
                         tp, b->dp_comm_s > 0 ? ";" : "");
  if (b->dp_comm_s > 0 && l < n)
    snprintf(line + l, n - l, " data-parallel traffic %s, %s of it hidden behind backward", dp,
             hid);
}

/* The decision tree (a training-memory budget: model states, activations,
 * a 10-15 % fragmentation reserve) behind the best candidate, r->c[0];
 * Pq the weights a QLoRA base quantises. None when the job of one
 * sequence cannot be estimated; VL_ENOMEM when memory runs out. */
static vl_status decision_trace(const struct vl_plan_query *q, const struct vl_overheads *ov,
                                double Pq, struct vl_plan_result *r) {
  const struct vl_plan_candidate *b = &r->c[0];
  struct vl_job j = q->base;
  j.batch = 1;
  struct vl_bill *one = vl_malloc(sizeof *one);
  vl_status st = one ? vl_bill_compute(q->arch, &j, ov, one, NULL) : VL_ENOMEM;
  if (st == VL_OK) {
    double card = (double)b->gpu->memory_bytes, G = (double)(1ull << 30);
    double states = (double)(one->line_max[VL_LINE_PARAMETERS] + one->line_max[VL_LINE_MASTER] +
                             one->line_max[VL_LINE_GRADIENTS] + one->line_max[VL_LINE_OPTIMIZER]);
    double acts = (double)one->line_max[VL_LINE_ACTIVATIONS];
    int n = 0;
    snprintf(r->trace[n++], 256,
             "model states on one card: %.1f GiB = %.0f %% of %s (%.1f GiB) -> %s", states / G,
             100 * states / card, b->gpu->name, card / G,
             states > VL_DECIDE_STATES_OF_CARD * card
                 ? (q->base.lora_rank ? "LoRA already; a 4-bit base (QLoRA) tried too"
                                      : "shard them: ZeRO / more GPUs")
                 : "they fit one card");
    double left = card - states;
    if (left > 0)
      snprintf(r->trace[n++], 256,
               "activations at micro-batch 1: %.1f GiB = %.0f %% of what is left -> %s", acts / G,
               100 * acts / left,
               acts > VL_DECIDE_ACTS_OF_LEFT * left ? "activation checkpointing"
                                                    : "no recomputation needed");
    else
      snprintf(r->trace[n++], 256,
               "activations at micro-batch 1: %.1f GiB, and nothing is left on one card: shard the "
               "states first, then weigh checkpointing",
               acts / G);
    snprintf(r->trace[n++], 256, "%.0f %% of each card kept free for fragmentation",
             100 * q->margin);
    bool on_gpu = false; /* does anything fit with the states on the GPUs? */
    for (size_t i = 0; i < r->n && !on_gpu; i++)
      on_gpu = r->c[i].offload == VL_OFFLOAD_NONE;
    if (b->offload != VL_OFFLOAD_NONE && n < VL_PLAN_TRACE - 1)
      snprintf(r->trace[n++], 256,
               "the optimizer states go to the CPU (%.1f GiB of host memory a GPU): %s, though "
               "a step takes %.0fx as long (published offload runs: 3 to 5 times)",
               (double)b->host_bytes / G,
               on_gpu ? "cheaper than keeping them on the GPUs" : "nothing fits without it",
               q->offload_slowdown);
    if (b->qlora && n < VL_PLAN_TRACE - 1)
      snprintf(r->trace[n++], 256,
               "the frozen base in 4 bits (QLoRA): %.1f GiB of layer weights instead of %.1f; "
               "dequantising them costs %s a step",
               Pq * VL_BNB_NF4_BYTES_PER_ELEM / G, Pq * (double)policy(&q->base).weight / G,
               q->qlora_slowdown > 0 ? "the measured factor (--qlora-slowdown)"
                                     : "at least their HBM traffic (a lower bound)");
    if (b->tp > 1 || b->dp_comm_s > 0) comm_trace(b, r->trace[n++], 256);
    char hours[32], usd[32], why[96];
    const char *rule = q->value_per_hour > 0 ? "least cost + time x value" : "least cost";
    double top = b->net_value_usd; /* the tier's best value (value_tiers) */
    for (size_t i = 1; i < r->n && r->c[i].tier == b->tier; i++)
      top = fmax(top, r->c[i].net_value_usd);
    if (top > b->net_value_usd)
      snprintf(why, sizeof why, "the fastest within 1 %% of the %s, %+.2f %%", rule,
               100.0 * (top - b->net_value_usd) / fabs(top));
    else
      snprintf(why, sizeof why, "%s", rule);
    snprintf(r->trace[n++], 256,
             "chosen: %u x %s, tp %u, dp %u, ZeRO-%u, %s checkpointing, micro-batch %llu x %llu "
             "accumulation: %s, %s (%s)",
             b->count, b->gpu->name, b->tp, b->dp, b->zero, vl_ckpt_name(b->checkpointing),
             (unsigned long long)b->micro_batch, (unsigned long long)b->grad_accum,
             vl_plan_hours_text(b->hours, hours, sizeof hours),
             vl_plan_usd_text(b->cost_usd, usd, sizeof usd), why);
    r->n_trace = n;
  }
  vl_free(one);
  return st == VL_ENOMEM ? st : VL_OK;
}

vl_status vl_plan_search(const struct vl_plan_query *q, const struct vl_overheads *ov,
                         struct vl_plan_result *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  if (!q->tokens || !q->global_batch || !q->base.seq)
    return vl__fail(err, VL_EINVAL, "--tokens, --global-batch and --seq must be at least 1");
  if (!(q->mfu > 0 && q->mfu <= 1)) return vl__fail(err, VL_ERANGE, "--mfu must be in (0, 1]");
  struct vl_inventory inv;
  vl_status s = vl_inventory_build(q->arch, &inv, err);
  if (s != VL_OK) return s;
  const double P = vl_active_params(q->arch, &inv);
  struct search S = {.q = q,
                     .ov = ov,
                     .inv = &inv,
                     .P = P,
                     .Pq = quantised_params(&inv),
                     .tokens_per_step = (double)q->global_batch * (double)q->base.seq,
                     .r = r,
                     .cap = 4096};
  r->steps = (uint64_t)ceil((double)q->tokens / S.tokens_per_step);
  r->c = vl_malloc(S.cap * sizeof *r->c);
  S.bill = vl_malloc(sizeof *S.bill);
  S.memo = vl_calloc(PLAN_MEMO_SLOTS, sizeof *S.memo);   /* NULL: every candidate estimated */
  S.tmemo = vl_calloc(PLAN_MEMO_SLOTS, sizeof *S.tmemo); /* NULL: every step priced */
  struct variant var[8];
  int n_var = variants(&q->base, var);
  vl_status st = r->c && S.bill ? VL_OK : VL_ENOMEM;
  for (size_t gi = 0; gi < q->n_gpus && st == VL_OK; gi++) {
    const struct vl_gpu *g = &q->gpus[gi];
    if (excluded(q, g, r)) continue;
    for (unsigned count = 1; count <= q->max_gpus && st == VL_OK; count *= 2)
      for (unsigned tp = 1; tp <= 8 && tp <= count && tp <= q->gpus_per_node; tp *= 2)
        for (unsigned pp = 1; pp <= 8 && tp * pp <= count; pp *= 2) {
          if (count % (tp * pp) || q->arch->heads % tp || q->arch->layers % pp) continue;
          unsigned dp = count / (tp * pp);
          for (unsigned zero = 0; zero <= 3; zero++) {
            if (zero && dp < 2) break;
            if (pp > 1 && zero > 1) break; /* pipelines shard the optimizer at most (ZeRO-1) */
            for (int v = 0; v < n_var; v++)
              for (uint64_t mb = 1; mb * dp <= q->global_batch; mb *= 2) {
                if (q->global_batch % (mb * dp)) continue;
                const struct vl_plan_candidate pick = {.gpu = g,
                                                       .count = count,
                                                       .dp = dp,
                                                       .tp = tp,
                                                       .pp = pp,
                                                       .zero = zero,
                                                       .checkpointing = var[v].ckpt,
                                                       .offload = var[v].offload,
                                                       .qlora = var[v].qlora,
                                                       .micro_batch = mb,
                                                       .grad_accum = q->global_batch / (mb * dp)};
                if (!consider(&S, &pick, &st)) break;
              }
          }
        }
  }
  struct vl_bill *bill = S.bill;
  vl_free(S.memo);
  vl_free(S.tmemo);
  if (st != VL_OK) {
    vl_free(bill);
    vl_plan_release(r);
    return vl__fail(err, VL_ENOMEM, "out of memory planning");
  }
  vl_free(bill);
  /* Pareto front in (hours, cost): by hours, then cost; a candidate is on
   * the front when it is cheaper than everything faster (n log n) */
  /* costs, values and times within 1e-9 of the largest are equal */
  double big_usd = 0, big_h = 0;
  for (size_t i = 0; i < r->n; i++) {
    big_usd = fmax(big_usd, fmax(r->c[i].cost_usd, fabs(r->c[i].net_value_usd)));
    big_h = fmax(big_h, r->c[i].hours);
  }
  for (size_t i = 0; i < r->n; i++) {
    r->c[i].cost_usd = quantise(r->c[i].cost_usd, 1e-9 * big_usd);
    r->c[i].net_value_usd = quantise(r->c[i].net_value_usd, 1e-9 * big_usd);
    r->c[i].hours = quantise(r->c[i].hours, 1e-9 * big_h);
  }
  /* the front: a plan is on it when no other is at least as fast and as
   * cheap and better in one (non-dominated; of plans equal in both, all) */
  qsort(r->c, r->n, sizeof *r->c, by_time);
  double cheapest_faster = INFINITY;
  for (size_t i = 0; i < r->n;) {
    size_t k = i;
    while (k < r->n && r->c[k].hours == r->c[i].hours)
      k++;
    double cheapest_here = INFINITY;
    for (size_t t = i; t < k; t++)
      cheapest_here = fmin(cheapest_here, r->c[t].cost_usd);
    for (size_t t = i; t < k; t++)
      r->c[t].pareto = r->c[t].cost_usd < cheapest_faster && r->c[t].cost_usd == cheapest_here;
    cheapest_faster = fmin(cheapest_faster, cheapest_here);
    i = k;
  }
  value_tiers(r->c, r->n);
  qsort(r->c, r->n, sizeof *r->c, by_rank);
  /* the FLOPs of the best's job, by the rule its time uses */
  if (r->n) {
    struct vl_job bj;
    vl_plan_candidate_job(q, &r->c[0], &bj);
    r->flops = flops_factor(&bj) * P * (double)q->tokens;
  } else {
    r->flops = flops_factor(&q->base) * P * (double)q->tokens;
  }
  r->have_best = r->n && r->c[0].meets_deadline && r->c[0].within_budget;
  if (!r->n) {
    /* under autocast every sharded strategy still holds the whole model's
     * half copies (docs/model.md, autocast weight copies) */
    if (r->evaluated &&
        (q->base.precision == VL_PREC_AMP_BF16 || q->base.precision == VL_PREC_AMP_FP16))
      snprintf(r->trace[r->n_trace++], 256,
               "under autocast every strategy holds the whole model's half copies: "
               "--precision mixed-bf16 (half weights and an fp32 master copy, as FSDP's "
               "MixedPrecision and DeepSpeed keep them) shards without them");
    return VL_OK;
  }

  if (decision_trace(q, ov, S.Pq, r) != VL_OK) {
    vl_plan_release(r);
    return vl__fail(err, VL_ENOMEM, "out of memory planning");
  }
  return VL_OK;
}

void vl_plan_candidate_job(const struct vl_plan_query *q, const struct vl_plan_candidate *c,
                           struct vl_job *j) {
  *j = q->base;
  j->batch = c->micro_batch;
  j->grad_accum = c->grad_accum;
  j->dp = c->dp;
  j->tp = c->tp;
  j->pp = c->pp;
  j->zero = c->zero;
  j->checkpointing = c->checkpointing;
  j->offload = c->offload;
  j->qlora = c->qlora;
}

void vl_plan_release(struct vl_plan_result *r) {
  if (!r) return;
  vl_free(r->c);
  r->c = NULL;
  r->n = 0;
}
