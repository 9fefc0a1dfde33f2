/* The time of a training step (docs/model.md, "Time"). The step is written
 * as the kernels PyTorch runs for it, layer by layer: the linears of the
 * parameter inventory (forward, the input's gradient, the weight's where
 * it trains), attention by the kernel SDPA picks or eager's matmuls and
 * softmax, the memory-bound ops of each part (norms, rotary, activations,
 * residual adds, dropout, autocast's casts, the loss over the vocabulary)
 * by the bytes they read and write, and the optimizer's step. Each is
 * priced with what one card was measured to do (bench/time/kernels.py,
 * data/reference/h100-torch-2.11/kernels.json, compiled into
 * kernel_tables.h): GEMM throughput by shape and dtype, SDPA's kernels by
 * sequence length and head size, memory-bound kernels' bandwidth, the host's
 * cost of dispatching one eager op. The GPU runs behind the host: a pass
 * (forward; backward with its recomputation) takes the longer of its
 * device time and its dispatch time. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "../model/policy.h"
#include "../model/kernel_tables.h"
#include "../model/lp.h"
#include "vramledger/steptime.h"

/* the measured card: H100 SXM 80GB datasheet (dense bf16 989.4 TFLOP/s,
 * fp32 66.9 TFLOP/s, HBM3 3,350 GB/s), the ratios other cards scale by */
#define REF_BF16_TFLOPS 989.4
#define REF_FP32_TFLOPS 66.9
#define REF_HBM_GB_S 3350.0

enum { FWD, DGRAD, WGRAD };

/* a recomputed op costs the host more than a forward op: the checkpoint's
 * saved-tensor hooks and its Python run around it (torch/utils/
 * checkpoint.py, non-reentrant). Profiled on the H100, BERT-large under
 * AMP, host-bound: 8.6 us an aten call without checkpointing, 15.9 us an
 * added call with it (bench/results/step-time/raw.jsonl:profile/profile-ckpt.json) */
#define RECOMPUTE_HOST (15.9 / 8.6)

struct ctx {
  struct vl_time_card card;   /* the card as ops are priced on it */
  const struct vl_kt_card *k; /* the measured card (g itself, or the one g is derived from) */
  const struct vl_arch *a;
  const struct vl_job *j;
  struct vl__policy pol;
  bool fp32;                  /* matmuls in fp32 (no autocast, fp32 weights) */
  double e, r;                /* activation and residual-stream bytes an element */
  enum vl_time_kind mem_kind; /* where memory-bound ops are booked (the loss's apart) */
  double conv_flops;          /* a micro-batch's convolutions, forward (ResNet's MFU) */
  struct vl_time_pass *tail;  /* where a layer's forward ops after its last saved tensor go
                               * (not recomputed: recompute_tail()), or NULL */
};

/* a stretch of ops (struct vl_time_pass): device seconds by kind, host
 * seconds, ops */
#define seg vl_time_pass

static double seg_gpu(const struct seg *s) {
  double t = 0;
  for (int i = 0; i < VL_TK_COUNT; i++)
    if (i != VL_TK_HOST) t += s->k[i];
  return t;
}

/* i, w: x between grid[i] and grid[i+1], w its log-space weight */
static void bracket(const double *grid, int n, double x, int *i, double *w) {
  if (x <= grid[0]) {
    *i = 0, *w = 0;
    return;
  }
  if (x >= grid[n - 1]) {
    *i = n - 2, *w = 1;
    return;
  }
  int k = 0;
  while (k < n - 2 && x > grid[k + 1])
    k++;
  *i = k, *w = log(x / grid[k]) / log(grid[k + 1] / grid[k]);
}

/* measured GEMM throughput (FLOP/s), log-trilinear between grid points */
static double gemm_rate(const struct vl_kt_card *kc, bool fp32, int layout, double m, double n,
                        double k) {
  const double(*t)[5][5] = kc->gemm[fp32][layout];
  int im, in, ik;
  double wm, wn, wk, acc = 0;
  bracket(vl_kt_m, 5, m, &im, &wm);
  bracket(vl_kt_nk, 5, n, &in, &wn);
  bracket(vl_kt_nk, 5, k, &ik, &wk);
  for (int c = 0; c < 8; c++) {
    int dm = c & 1, dn = (c >> 1) & 1, dk = c >> 2;
    double w = (dm ? wm : 1 - wm) * (dn ? wn : 1 - wn) * (dk ? wk : 1 - wk);
    if (w > 0) acc += w * log(t[im + dm][in + dn][ik + dk]);
  }
  return exp(acc);
}

/* one GEMM (m x n, inner k), `count` times: its FLOPs at the rate measured
 * at the nearest grid point (a dimension below the grid, a LoRA rank of
 * 16, at the rate of 64), and never under the grid's smallest GEMM's time
 * (launch- and latency-bound) */
static bool off8(double x) { return fmod(x, 8.0) != 0; }

/* the datasheets' dense TF32 rate against the 16-bit one (H100, H200,
 * A100: 494.7 / 989.4, 156 / 312 TFLOP/s) */
#define TF32_OF_BF16 0.5

static double gemm_s(const struct vl_time_card *c, const struct vl_op *op) {
  const struct vl_kt_card *kc = c->tables;
  double m = op->batch > 1 ? op->batch * op->m : op->m, n = op->n, k = op->k, count = op->count;
  if (count <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  int layout = (int)op->layout;
  bool fp32 = op->fp32 && !op->tf32; /* TF32 runs on the tensor cores: the 16-bit table */
  /* a 16-bit GEMM whose leading dimensions are not multiples of 8
   * elements (16 bytes) cannot take cuBLAS's aligned tensor-core kernels:
   * it runs align1 kernels where one is odd (GPT-2's 50,257-token head at
   * a sixth of its aligned twin), align2 where both are even (BERT's
   * 30,522, DeBERTa-v3's 128,100: about a third), with a bias or not
   * (bench/results/step-time/raw.jsonl:align/, the heads' kernels in
   * profile/profile.json). The leading dimensions: a linear's in and out
   * features, n and k here but for the weight's gradient (out x in, over
   * the tokens) */
  double d1 = n, d2 = layout == VL_GEMM_WGRAD ? m : k;
  bool off = !op->fp32 && (off8(d1) || off8(d2));
  const double *slow = kc->unaligned[fmod(d1, 2) != 0 || fmod(d2, 2) != 0 ? 0 : 1];
  double scale = fp32 ? c->s32 : op->fp32 ? c->s16 * TF32_OF_BF16 : c->s16;
  double rate =
      gemm_rate(kc, fp32, layout, fmax(m, vl_kt_m[0]), fmax(n, vl_kt_nk[0]), fmax(k, vl_kt_nk[0])) *
      scale;
  if (off && slow[layout] > 0) rate = fmin(rate, slow[layout] * c->s16);
  double least =
      2.0 * vl_kt_m[0] * vl_kt_nk[0] * vl_kt_nk[0] / (kc->gemm[fp32][layout][0][0][0] * scale);
  /* and never under its bytes at the card's bandwidth: a thin GEMM (a
   * LoRA adapter's rank of 16, below the grid's 64, priced at the edge's
   * rate) still reads its whole input once. The grid's thin rows are
   * memory-bound so: 32,768 x 64 x 4,096 takes 87.5 us on the H100 once
   * the dispatch is off, its 554 MB at the add kernel's bandwidth 91 us */
  double b = op->batch > 1 ? op->batch : 1, rows = m / b, el = op->fp32 ? 4 : 2;
  double bytes = b * (rows * k + k * n + rows * n) * el;
  least = fmax(least, bytes / (kc->bw_add * c->sbw));
  return count * fmax(2.0 * m * n * k / rate, least);
}

static void gemm(struct ctx *c, struct seg *s, int layout, bool fp32, double m, double n, double k,
                 double count) {
  struct vl_op op = {.kind = VL_OP_GEMM,
                     .layout = (enum vl_gemm_layout)layout,
                     .fp32 = fp32,
                     .m = m,
                     .n = n,
                     .k = k,
                     .count = count};
  s->k[VL_TK_MATMUL] += gemm_s(&c->card, &op);
}

/* a linear (m rows, in -> out) forward, or its backward: the input's
 * gradient and, when the weight trains, the weight's */
static void linear(struct ctx *c, struct seg *f, struct seg *b, bool fp32, double m, double in,
                   double out, double count, bool trained) {
  gemm(c, f, FWD, fp32, m, out, in, count);
  f->ops += count;
  gemm(c, b, DGRAD, fp32, m, in, out, count);
  if (trained) gemm(c, b, WGRAD, fp32, out, in, m, count);
  b->ops += count;
}

enum mem {
  EW = VL_MEM_ELEMENTWISE,
  CAST = VL_MEM_CAST,
  NORM = VL_MEM_NORM,
  SOFTMAX = VL_MEM_SOFTMAX,
  BNORM = VL_MEM_BATCHNORM,
  BNORM_BWD = VL_MEM_BATCHNORM_BWD,
  BCAST = VL_MEM_BROADCAST,
  STRIDED = VL_MEM_STRIDED,
  LOGSOFTMAX = VL_MEM_LOGSOFTMAX,
  LOGSOFTMAX_BWD = VL_MEM_LOGSOFTMAX_BWD
};

/* A ViT at an image side other than its config's interpolates its position
 * table, (1, h, g, g) to (1, h, G, G) bicubic (modeling_vit.py
 * ViTEmbeddings.interpolate_pos_encoding). PyTorch gives each of the G^2
 * output pixels one thread that walks the h channels: forward 16 taps a
 * channel, backward 16 atomic adds a channel into the g^2 input pixels every
 * thread shares (aten/src/ATen/native/cuda/UpSampleBicubic2d.cu,
 * upsample_bicubic2d_backward_out_frame). Its time is that serial chain, not
 * bytes: on the H100, h = 768, bf16, 14 -> 24 patches, 2.32 ms forward and
 * 24.5 ms backward, 40 % of the step (bench/results/step-time/
 * raw.jsonl:vision-kernels/profile.json). Latency, not bandwidth or FLOPs: not scaled by card. */
#define BICUBIC_TAP_S (2.32148e-3 / (768.0 * 16))
#define BICUBIC_ATOMIC_S (24.538104e-3 / (768.0 * 16))

/* BatchNorm by the bytes its op moves (forward: the map read and the output
 * written, 2x; backward: the gradient and the map read, the input's gradient
 * written, 3x), at the rates of the estimate's resnet() below: the
 * statistics' read at BN_STATS_EFF and the normalisation at a norm's, 7x of
 * a norm's time for 2x moved; the backward at BN_BACKWARD_EFF */
#define BN_STATS_EFF 0.2
#define BN_BACKWARD_EFF 0.26
#define BN_FORWARD_EFF (2.0 / (1.0 / BN_STATS_EFF + 2.0))

/* What whole training steps' profiles show each kind of memory-bound op
 * reaching (bench/time/op_rates.py: the device time torch.profiler gave
 * each ATen op of a step against the bytes the trace of the same step
 * counts for it; bench/results/step-time/README.md, "Memory-bound ops in
 * whole steps"; 5 runs on the H100, 3 on the H200):
 * - a product by a broadcast operand (RMSNorm's x * rsqrt and weight * x,
 *   rotary's * cos and * sin: an operand of stride 0) is not contiguous,
 *   so TensorIterator runs the unvectorised elementwise_kernel: 1.6-1.8
 *   TB/s on both cards (median 1.7), where the vectorised add of the
 *   tables moves 3.1 (H100) and 4.3 TB/s (H200);
 * - rotate_half's neg and cat on the strided halves of the rows, and their
 *   backward's slice_backward: 0.8-1.5 TB/s on both (cat 0.82, neg 1.5,
 *   slice_backward 1.2);
 * - log_softmax over the vocabulary: 1.20 and, backward, 1.75 times the
 *   softmax row's bandwidth (H100: 1.54 and 2.25 TB/s; Qwen2-0.5B,
 *   GPT-2). Not scaled by card: the same SMs (an unmeasured card: by its
 *   bandwidth, as every memory-bound op) */
#define BCAST_BPS 1.7e12
#define STRIDED_BPS 1.2e12
#define LOGSOFTMAX_EFF 1.20
#define LOGSOFTMAX_BWD_EFF 1.75

static double mem_s(const struct vl_time_card *c, const struct vl_op *op) {
  const struct vl_kt_card *k = c->tables;
  if (op->mem == VL_MEM_BICUBIC || op->mem == VL_MEM_BICUBIC_BWD)
    return op->count * op->planes * 16 *
           (op->mem == VL_MEM_BICUBIC ? BICUBIC_TAP_S : BICUBIC_ATOMIC_S);
  const double bw[] = {[VL_MEM_ELEMENTWISE] = k->bw_add,
                       [VL_MEM_CAST] = k->bw_cast,
                       [VL_MEM_NORM] = k->bw_norm,
                       [VL_MEM_SOFTMAX] = k->bw_softmax,
                       [VL_MEM_BATCHNORM] = k->bw_norm * BN_FORWARD_EFF,
                       [VL_MEM_BATCHNORM_BWD] = k->bw_norm * BN_BACKWARD_EFF,
                       [VL_MEM_BROADCAST] = BCAST_BPS,
                       [VL_MEM_STRIDED] = STRIDED_BPS,
                       [VL_MEM_LOGSOFTMAX] = k->bw_softmax * LOGSOFTMAX_EFF,
                       [VL_MEM_LOGSOFTMAX_BWD] = k->bw_softmax * LOGSOFTMAX_BWD_EFF};
  return op->count * op->bytes / (bw[op->mem] * c->sbw);
}

/* a memory-bound op moving `bytes` (read + write), `count` times */
static void mem(struct ctx *c, struct seg *s, enum mem kind, double bytes, double count) {
  struct vl_op op = {
      .kind = VL_OP_MEMORY, .mem = (enum vl_mem_class)kind, .bytes = bytes, .count = count};
  s->k[c->mem_kind] += mem_s(&c->card, &op);
  s->ops += count;
}

/* a kernel inside an op already counted (its dispatch is that op's):
 * device time only */
static void kernel_in(struct ctx *c, struct seg *s, enum mem kind, double bytes, double count) {
  double ops = s->ops;
  mem(c, s, kind, bytes, count);
  s->ops = ops;
}

/* the same op in forward (f) and its backward (b: the gradient read, the
 * saved input read, the input's gradient written: twice the bytes) */
static void mem2(struct ctx *c, struct seg *f, struct seg *b, enum mem kind, double bytes,
                 double count) {
  mem(c, f, kind, bytes, count);
  mem(c, b, kind, 2 * bytes, count);
}

/* one priced line of a layer program, `times` x its kernels */
static void lp_price(struct ctx *c, const struct lp_op *o, struct seg *f, struct seg *b,
                     const double *n, double times) {
  static const enum mem cls[] = {[LP_PRICE_EW] = EW,
                                 [LP_PRICE_CAST] = CAST,
                                 [LP_PRICE_NORM] = NORM,
                                 [LP_PRICE_SOFTMAX] = SOFTMAX,
                                 [LP_PRICE_BCAST] = BCAST,
                                 [LP_PRICE_STRIDED] = STRIDED,
                                 [LP_PRICE_LOGSOFTMAX] = LOGSOFTMAX,
                                 [LP_PRICE_LOGSOFTMAX_BWD] = LOGSOFTMAX_BWD};
  const double el = n[o->pcols] * o->bytes;
  if (o->fwd_only)
    mem(c, f, cls[o->price], el, times * (o->times ? o->times : 1));
  else if (o->bwd_only)
    mem(c, b, cls[o->price], el, times * (o->times ? o->times : 1));
  else if (o->times > 1)
    mem2(c, f, b, cls[o->price], el, times * o->times);
  else
    mem2(c, f, b, cls[o->price], el, times);
}

/* the memory-bound kernels of a layer program (lp.h), n[c] the elements
 * of rows x c columns (enum lp_cols), `dense` x `count` times: each op at
 * the bytes it prices on the elements it names, a run of alike kernels
 * priced together, a line marked late after the one that follows; its
 * linears are the inventory's (linears()) but for the input's cast
 * autocast adds */
static void lp_kernels(struct ctx *c, const struct lp *p, struct seg *f, struct seg *b,
                       const double *n, double dense, double count) {
  for (unsigned i = LP_FIRST; i <= p->n;) {
    const struct lp_op *o = &p->op[i];
    unsigned k = 1;
    if (o->price == LP_UNPRICED) {
      i++;
      continue;
    }
    while (i + k <= p->n && p->op[i + k].kind == o->kind && p->op[i + k].price == o->price &&
           p->op[i + k].bytes == o->bytes && p->op[i + k].pcols == o->pcols &&
           p->op[i + k].times == o->times && p->op[i + k].fwd_only == o->fwd_only &&
           p->op[i + k].bwd_only == o->bwd_only && p->op[i + k].late == o->late)
      k++;
    if (o->late && i + k <= p->n) { /* the line after the run first */
      if (p->op[i + k].price) lp_price(c, &p->op[i + k], f, b, n, dense * count);
      lp_price(c, o, f, b, n, k * dense * count);
      i += k + 1;
      continue;
    }
    lp_price(c, o, f, b, n, k * dense * count);
    i += k;
  }
}

/* a norm over rows x width: its layer program's priced lines (lp_norm.c:
 * nn.LayerNorm one fused kernel, under autocast its output fp32; the
 * RMSNorms of transformers' modeling files Python: to(fp32), pow, mean,
 * rsqrt, mul, to(dtype), weight mul, modeling_llama.py
 * LlamaRMSNorm.forward), its input the residual stream's dtype */
static void norm(struct ctx *c, struct seg *f, struct seg *b, double rows, double width,
                 double count) {
  struct lp p;
  vl__lp_norm(&p, c->a, c->pol.autocast, (unsigned)c->pol.resid, (unsigned)c->pol.weight);
  const double n[LP_COLS_N] = {[LP_COLS_H] = rows * width, [LP_COLS_ROW] = rows};
  lp_kernels(c, &p, f, b, n, 1, count);
}

/* dropout of p > 0 on n elements of `bytes` each: one kernel writing the
 * output and a byte mask (native_dropout); its backward reads the mask */
static void dropout(struct ctx *c, struct seg *f, struct seg *b, double p, double n, double bytes,
                    double count) {
  if (p > 0) mem2(c, f, b, EW, n * (2 * bytes + 1), count);
}

static bool has_kernel(const struct vl_kt_card *k, const char *kern) {
  for (size_t i = 0; i < k->n_attn; i++)
    if (!strcmp(k->attn[i].kernel, kern)) return true;
  return false;
}

/* rows of kernel kern in the dtype (a kernel may have bf16's only) */
static bool has_rows(const struct vl_kt_card *k, const char *kern, bool half) {
  for (size_t i = 0; i < k->n_attn; i++)
    if (!strcmp(k->attn[i].kernel, kern) && !strcmp(k->attn[i].dtype, half ? "bf16" : "fp32"))
      return true;
  return false;
}

/* transformers hands SDPA an explicit mask where a sliding window reaches
 * the keys (masking_utils.py _ignore_causal_mask_sdpa: kv_length <
 * local_attention_size skips it) */
static bool sdpa_masked(const struct vl_op *op) {
  return op->window > 0 && op->kv_len >= op->window;
}

/* the kernel SDPA runs for op's "default" where the card's tables can say
 * better (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
 * select_sdp_backend: cuDNN first on sm90 and later, then flash, then
 * memory-efficient): cuDNN takes an attn_mask and training's dropout
 * (PyTorch 2.11 on an H100 picks it for dropout 0.1: bench/results/
 * dry-run/raw.jsonl:sdpa-choice-h100/), but its rows are timed without
 * dropout, which costs it 1.2 to 1.7 times (step-time/raw.jsonl:
 * h100-isolated-b/masked.json): a dropout is priced at flash's rows (no
 * attn_mask: check_for_attn_mask) or the memory-efficient kernel's,
 * which come out near that */
static const char *sdpa_pick(const struct vl_time_card *c, const struct vl_op *op,
                             const char *kern) {
  const struct vl_kt_card *kc = c->tables;
  if (strcmp(kern, "default")) return kern;
  const bool cudnn = op->half && c->cudnn_sdpa && has_rows(kc, "cudnn", true);
  if (cudnn && op->dropout == 0) return "cudnn";
  if (sdpa_masked(op)) return has_rows(kc, "efficient", op->half) ? "efficient" : kern;
  if (cudnn && op->dqk <= 256 && has_rows(kc, "flash", true)) return "flash";
  return kern;
}

/* one fused attention kernel, forward or backward: its FLOPs at the rate
 * measured for its kernel, dtype, head size (64 up to 96, else 128) and
 * mask, log-linear between the sequence lengths measured. SDPA's choice
 * ("default": cuDNN for 16-bit inputs on Hopper, memory-efficient for
 * fp32) where the card was measured so; else flash (16-bit, head size up
 * to 256) or memory-efficient */
static double attn_s(const struct vl_time_card *c, const struct vl_op *op) {
  const struct vl_kt_card *kc = c->tables;
  bool half = op->half;
  double q_len = op->q_len, kv_len = op->kv_len, dqk = op->dqk, dv = op->dv, count = op->count;
  bool causal = op->causal;
  const char *kern = op->kernel && op->kernel[0] ? op->kernel : "default";
  if (!has_kernel(kc, kern) || (strcmp(kern, "default") && !has_rows(kc, kern, half)))
    kern = "default";
  if (!has_kernel(kc, kern)) kern = half && dqk <= 256 ? "flash" : "efficient";
  /* SDPA's own choice for 16-bit inputs on sm90 and later is cuDNN's
   * attention (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:
   * cuDNN first in the priority order there; every profiled step,
   * bench/results/step-time/raw.jsonl:profile/, ran its kernels); the
   * "default" rows at 512 tokens timed something slower (a forward+backward
   * of 372 us against cuDNN's 167, kernels.py's timing: a fifth of its rate
   * once the dispatch is off) */
  kern = sdpa_pick(c, op, kern);
  const char *dt = half ? "bf16" : "fp32";
  double d = dqk <= 96 ? 64 : 128;
  /* the kernel skips the blocks a causal mask leaves out; under an
   * explicit mask (an additive bias to the kernel) it computes every key */
  causal = causal && !sdpa_masked(op);
  double keys = causal ? kv_len / 2 : kv_len;
  double bh = op->bs * op->heads, fl = 2.0 * bh * q_len * keys * (dqk + dv);
  /* the measured rate at this sequence length (log-linear between the
   * lengths measured for this kernel, dtype, head size and mask) */
  double lo_s = 0, lo_f = 0, lo_b = 0, hi_s = 0, hi_f = 0, hi_b = 0;
  for (size_t i = 0; i < kc->n_attn; i++) {
    const struct vl_kt_attn *k = &kc->attn[i];
    if (strcmp(k->kernel, kern) || strcmp(k->dtype, dt) || k->d != d || k->causal != causal)
      continue;
    if (k->s <= q_len && k->s >= lo_s) lo_s = k->s, lo_f = k->fwd, lo_b = k->fwd_bwd;
    if (k->s >= q_len && (hi_s == 0 || k->s <= hi_s)) hi_s = k->s, hi_f = k->fwd, hi_b = k->fwd_bwd;
  }
  if (lo_s == 0) lo_s = hi_s, lo_f = hi_f, lo_b = hi_b;
  if (hi_s == 0) hi_s = lo_s, hi_f = lo_f, hi_b = lo_b;
  if (lo_s == 0) return 0; /* no rows at all for this dtype and head size */
  double w = hi_s > lo_s ? log(q_len / lo_s) / log(hi_s / lo_s) : 0;
  double rf = exp((1 - w) * log(lo_f) + w * log(hi_f)) * c->s16;
  double rb = exp((1 - w) * log(lo_b) + w * log(hi_b)) * c->s16;
  if (!half) rf *= c->s32 / c->s16, rb *= c->s32 / c->s16;
  double tf = fl / rf, tfb = 3.5 * fl / rb;
  return op->backward ? count * fmax(tfb - tf, 2.5 * tf) : count * tf;
}

/* DeBERTa's disentangled attention (modeling_deberta_v2.py
 * disentangled_attention_bias): c2p and p2c (those the config's
 * pos_att_type names) each a batched matmul against
 * the 2k relative-position rows, torch.gather of the n = bh x q x kv
 * scores from it, / scale and + into the scores. gather's backward is a
 * scatter-add of atomic adds into zeros: measured on the H100 over those
 * shapes at 14.5 ps an element, the gather at 3.5, whatever the dtype
 * (bench/results/step-time/raw.jsonl:h100-c/align.json "scatter"); the
 * same silicon on the H200, a derived card by its bandwidth */
#define GATHER_S_EL 3.5e-12
#define SCATTER_ADD_S_EL 14.5e-12

static void rel_terms(struct ctx *c, struct seg *f, struct seg *b, double bh, double q_len,
                      double dqk, double n, double count) {
  unsigned att = c->a->rel_att;
  double e = c->e, rows = (double)c->a->rel_embed_rows, terms = ((att & 1) + (att >> 1)) * count;
  gemm(c, f, FWD, c->fp32, bh * q_len, rows, dqk, terms);
  gemm(c, b, DGRAD, c->fp32, bh * q_len, dqk, rows, 2 * terms);
  f->k[c->mem_kind] += terms * n * GATHER_S_EL / c->card.sbw;
  b->k[c->mem_kind] += terms * n * SCATTER_ADD_S_EL / c->card.sbw;
  f->ops += terms, b->ops += terms;
  kernel_in(c, b, EW, bh * q_len * rows * e, terms); /* the zeros scattered into */
  mem(c, f, EW, n * 5 * e, terms);                   /* / scale, + into the scores */
  mem(c, b, EW, n * 2 * e, terms);                   /* / scale's backward */
}

/* the attention kernel of one layer: q_len x kv_len per head, a query
 * heads of dqk (dv for values), batch bs. SDPA picks flash for 16-bit
 * inputs with head size <= 256 and no bias; memory-efficient otherwise
 * (fp32; an additive bias); eager materialises the scores: two batched
 * matmuls, the mask add, softmax (fp32 in every family but GPT-2, cast
 * back), dropout (torch/nn/functional.py, sdp_utils.cpp) */
static void attn_kernel(struct ctx *c, struct seg *f, struct seg *b, double bs, double q_len,
                        double kv_len, double heads, double dqk, double dv, bool causal,
                        double window, double count) {
  const struct vl_arch *a = c->a;
  double bh = bs * heads;
  bool eager = c->j->attention == VL_ATTN_EAGER || a->rel_bias || a->family == VL_FAM_DEBERTA_V2;
  /* Falcon's own SDPA call hands multi-query keys (one head against a
   * heads) with a mask: no fused kernel takes that, and SDPA's math path
   * runs in fp32 (modeling_falcon.py FalconAttention.forward;
   * aten/src/ATen/native/transformers/attention.cpp upcasts half inputs) */
  bool math32 = !eager && a->family == VL_FAM_FALCON && a->kv_heads && a->kv_heads < a->heads;
  if (!eager && !math32) {
    struct vl_op op = {.kind = VL_OP_ATTENTION,
                       .kernel = "default",
                       .half = !c->fp32,
                       .causal = causal,
                       .bs = bs,
                       .heads = heads,
                       .q_len = q_len,
                       .kv_len = kv_len,
                       .dqk = dqk,
                       .dv = dv,
                       .window = window,
                       .dropout = c->j->task == VL_TASK_TRAIN ? a->attn_dropout : 0,
                       .count = count};
    f->k[VL_TK_ATTENTION] += attn_s(&c->card, &op);
    op.backward = true;
    b->k[VL_TK_ATTENTION] += attn_s(&c->card, &op);
    f->ops += 2 * count, b->ops += count;
    return;
  }
  double e = c->e, n = bh * q_len * kv_len, sm = vl__softmax_bytes(a, c->pol.autocast, (uint64_t)e);
  bool f32 = c->fp32 || math32;
  if (math32) {
    mem2(c, f, b, CAST, bs * q_len * heads * dqk * (e + 4), 3 * count); /* q, k, v to fp32 */
    e = sm = 4;
  }
  struct seg ff = {0}, bb = {0};
  gemm(c, &ff, FWD, f32, bh * q_len, kv_len, dqk, 1);   /* q k^T */
  gemm(c, &ff, FWD, f32, bh * q_len, dv, kv_len, 1);    /* p v */
  gemm(c, &bb, DGRAD, f32, bh * q_len, kv_len, dv, 2);  /* dp, dv */
  gemm(c, &bb, DGRAD, f32, bh * q_len, dqk, kv_len, 2); /* dq, dk */
  f->k[VL_TK_ATTENTION] += count * seg_gpu(&ff), b->k[VL_TK_ATTENTION] += count * seg_gpu(&bb);
  f->ops += 3 * count, b->ops += 3 * count;
  /* the mask or bias added, the soft cap, softmax, the cast back, dropout:
   * the scores' program (lp_attention.c), priced on the scores' elements */
  struct lp p;
  vl__lp_scores(&p, a, a->rel_bias || causal || math32, false, (unsigned)e, (unsigned)e,
                (unsigned)sm, (unsigned)e);
  lp_kernels(c, &p, f, b, (const double[LP_COLS_N]){[LP_COLS_H] = n}, 1, count);
  if (a->family == VL_FAM_DEBERTA_V2) rel_terms(c, f, b, bh, q_len, dqk, n, count);
}

/* a view, transpose or other op that only costs its dispatch */
static void views(struct seg *f, struct seg *b, double n) {
  f->ops += n;
  b->ops += n;
}

/* the memory-bound ops of `count` transformer layers over T tokens (bs
 * sequences of q_len, attending to kv_len), and their attention kernel;
 * cross: a decoder layer's cross-attention too (T5, BART) */
static void layer_ops(struct ctx *c, struct seg *f, struct seg *b, double bs, double q_len,
                      double kv_len, bool causal, bool cross, double count) {
  const struct vl_arch *a = c->a;
  double T = bs * q_len, h = (double)a->hidden, e = c->e, r = c->r, tp = (double)c->j->tp;
  double heads = (double)a->heads / tp, kvh = (double)(a->kv_heads ? a->kv_heads : a->heads) / tp;
  double d = (double)a->head_dim, dqk = d, dv = d;
  if (a->mla) dqk = (double)(a->qk_nope_dim + a->qk_rope_dim), dv = (double)a->v_head_dim;
  struct lp mlp;
  vl__lp_mlp(&mlp, a, c->pol.autocast, (unsigned)c->pol.act, false);
  double norms = a->shared_norm ? 1 : a->sandwich_norm ? 4 : 2;
  if (cross) norms += 1;
  norm(c, f, b, T, h, norms * count);
  if (a->qk_norm) norm(c, f, b, T, (heads + kvh) * dqk, count);
  /* autocast casts each linear's fp32 input on its own (not cached): the
   * q, k, v program's and the MLP's linears on the layer's input
   * (DeepSeek-V2's latent attention, not a program yet: three) */
  if (c->pol.autocast) {
    struct lp qkv;
    vl__lp_qkv(&qkv, a, (unsigned)c->pol.act, false, false, false);
    double ins =
        (a->mla ? 3 : (double)vl__lp_input_linears(&qkv)) + (double)vl__lp_input_linears(&mlp);
    mem2(c, f, b, CAST, T * h * 6, ins * count);
  }
  views(f, b, 8 * count); /* q, k, v: view and transpose; the output's transpose and view */
  if (a->rotary_pct > 0 && !a->learned_pos) {
    /* q * cos + rotate_half(q) * sin, rotate_half = cat(-x2, x1), q and k
     * (modeling_llama.py apply_rotary_pos_emb) */
    double n = T * (heads + kvh) * dqk * a->rotary_pct;
    struct lp rope; /* its program's priced lines (lp_attention.c): two muls, the add; neg, cat */
    vl__lp_rope(&rope, (unsigned)e, (unsigned)e, false);
    lp_kernels(c, &rope, f, b, (const double[LP_COLS_N]){[LP_COLS_I] = n}, 1, count);
    views(f, b, 4 * count); /* the slices */
  }
  double window = a->sliding_window && a->sliding_layers ? (double)a->sliding_window : 0;
  double slide = window > 0 ? (double)a->sliding_layers / (double)a->layers : 0;
  /* (a decoder with cross-attention: its self-attention over its own
   * tokens, the cross-attention's keys the encoder's, kv_len) */
  const double self_len = cross ? q_len : kv_len;
  if (slide > 0) {
    attn_kernel(c, f, b, bs, q_len, self_len, heads, dqk, dv, causal, window, slide * count);
    attn_kernel(c, f, b, bs, q_len, self_len, heads, dqk, dv, causal, 0, (1 - slide) * count);
  } else {
    attn_kernel(c, f, b, bs, q_len, self_len, heads, dqk, dv, causal, 0, count);
  }
  if (cross) attn_kernel(c, f, b, bs, q_len, kv_len, heads, dqk, dv, false, 0, count);
  mem2(c, f, b, EW, T * heads * dv * 2 * e, count); /* the output made contiguous */
  /* residual adds; dropout on each branch (the MLP's add, and its branch's
   * scaling, after the layer's last saved tensor: recompute_tail) */
  struct seg *last = c->tail ? c->tail : f;
  mem2(c, f, b, EW, T * h * 3 * r, (cross ? 2 : 1) * count);
  mem2(c, last, b, EW, T * h * 3 * r, count);
  if (a->resid_scaled) mem2(c, f, b, EW, T * h * 2 * e, count);
  if (a->resid_scaled) mem2(c, last, b, EW, T * h * 2 * e, count);
  dropout(c, f, b, a->hidden_dropout, T * h, e, 2 * count);
  /* the MLP's kernels (a dense layer; MoE layers: moe_ops) */
  double dense = a->experts ? (double)a->dense_layers / (double)a->layers : 1;
  lp_kernels(c, &mlp, f, b,
             (const double[LP_COLS_N]){[LP_COLS_I] = T * (double)a->intermediate / tp}, dense,
             count);
}

/* A masked_fill by a (rows, 1) mask or a product by a (rows, 1) weight is
 * a broadcast: ATen runs its unvectorised elementwise kernel
 * (elementwise_kernel<128, 4>), which moved the bytes 2.3 times slower
 * than the vectorised add in the MoE steps profiled on the H100 (OLMoE,
 * LoRA, 2 x 1,024 tokens: 96 masked_fill kernels over 64 MiB tensors, 101
 * us each, 9.7 ms of the step; bench/results/step-time/raw.jsonl:
 * h100-c/moe-profile.json) */
#define BROADCAST_EW 2.3

/* the routed experts of `count` MoE layers, as transformers 5 runs them by
 * default (experts_implementation "grouped_mm", integrations/moe.py
 * grouped_mm_experts_forward): the router's softmax and top-k, the S = T k
 * (token, expert) pairs sorted by expert and gathered, one grouped GEMM for
 * gate and up and one for down (their shapes: linears()), the gate, the
 * routing weights, the pairs put back in order and summed per token */
static void moe_ops(struct ctx *c, struct seg *f, struct seg *b, double T, double count) {
  const struct vl_arch *a = c->a;
  double E = (double)a->experts, k = (double)a->experts_per_token, e = c->e;
  double h = (double)a->hidden, S = T * k, w = (double)a->moe_intermediate;
  mem2(c, f, b, SOFTMAX, T * E * 8, count); /* router softmax (fp32) */
  mem2(c, f, b, EW, T * E * 4, 3 * count);  /* topk, normalise, to(dtype) */
  mem2(c, f, b, EW, S * 16, 4 * count);     /* sort, histc, cumsum, clamp */
  views(f, b, 6 * count);                   /* reshapes, chunk, empty_like, arange */
  double bc = BROADCAST_EW;
  mem2(c, f, b, EW, S * h * 2 * e, count);          /* gather the pairs */
  mem2(c, f, b, EW, bc * S * h * 2 * e, count);     /* masked_fill */
  mem2(c, f, b, EW, bc * S * 2 * w * 2 * e, count); /* masked_fill of gate_up's output */
  mem2(c, f, b, EW, S * w * 5 * e, count);          /* act(gate) * up */
  mem2(c, f, b, EW, bc * S * h * 2 * e, count);     /* masked_fill of down's output */
  mem2(c, f, b, EW, bc * S * h * 3 * e, count);     /* * routing weight */
  mem2(c, f, b, EW, S * h * 2 * e, 2 * count);      /* inverse permutation, gather back */
  mem2(c, f, b, EW, S * h * e + T * h * e, count);  /* sum over k */
  if (a->shared_gate) mem2(c, f, b, EW, T * h * 3 * e, 2 * count);
}

/* ResNet (modeling_resnet.py): each convolution an implicit GEMM of
 * (images x out side^2) rows, out channels, in x k x k inner, with its
 * BatchNorm (training: statistics, then normalise) and ReLU; the stem's 7x7
 * stride 2 and max pool take the side to a quarter; each later stage halves
 * it, in its first block's 3x3 and shortcut (downsample_in_bottleneck off,
 * transformers' default: the block's first 1x1 runs at the input's side).
 *
 * Measured on the H100 (bench/results/step-time/raw.jsonl:vision-kernels/profile.json, resnet-50
 * bf16, 16 images of 224 and 512 pixels), what runs beside the GEMMs:
 * - BatchNorm on NCHW tensors is ATen's own kernels, a block per channel:
 *   the statistics (one read of the map) ran at 0.19-0.21 of a norm's
 *   bandwidth, the backward (map and gradient read, gradient written) at
 *   0.25-0.27; the normalisation itself at a norm's;
 * - cuDNN runs a k x k or strided convolution in NHWC: its input and
 *   output are transposed there and back (nchwToNhwcKernel,
 *   nhwcToNchwKernel) in the forward, the input's gradient and the
 *   weight's; 1 x 1 convolutions of stride 1 run as GEMMs on NCHW as is. */
static void conv(struct ctx *c, struct seg *f, struct seg *b, double bs, double side, double cin,
                 double cout, double k, double stride, bool grad_in) {
  double rows = bs * side * side, e = c->e, x = rows * cout * e;
  linear(c, f, b, c->fp32, rows, cin * k * k, cout, 1, true);
  c->conv_flops += 2 * rows * cin * k * k * cout;
  mem(c, f, BNORM, 2 * x, 1);                /* batch_norm: statistics, then normalise */
  mem(c, b, BNORM_BWD, 3 * x, 1);            /* its backward */
  mem2(c, f, b, EW, rows * cout * 2 * e, 1); /* relu */
  if (c->pol.autocast) mem2(c, f, b, CAST, rows * cin * 6, 1);
  if (k > 1 || stride > 1) {
    double moved = 2 * (rows * stride * stride * cin + rows * cout) * e;
    kernel_in(c, f, CAST, moved, 1);
    kernel_in(c, b, CAST, moved, grad_in ? 2 : 1);
  }
}

static void resnet(struct ctx *c, struct seg *f, struct seg *b, double bs) {
  const struct vl_arch *a = c->a;
  double side = (double)vl_job_image_side(a, c->j) / 2; /* the image side after the stem */
  conv(c, f, b, bs, side, (double)a->channels, (double)a->stem_width, 7, 2, false);
  side /= 2;
  double in = (double)a->stem_width;
  for (uint64_t s = 0; s < a->stages; s++) {
    double out = (double)a->stage_width[s], r = out / 4;
    double stride = s > 0 || a->stride_first ? 2 : 1;
    for (uint64_t l = 0; l < a->stage_depth[s]; l++) {
      double cin = l ? out : in, st = l ? 1 : stride, to = fmax(1, side / st);
      if (!l) conv(c, f, b, bs, to, cin, out, 1, st, true); /* the shortcut */
      if (a->bottleneck) {
        conv(c, f, b, bs, side, cin, r, 1, 1, true);
        conv(c, f, b, bs, to, r, r, 3, st, true);
        conv(c, f, b, bs, to, r, out, 1, 1, true);
      } else {
        conv(c, f, b, bs, to, cin, out, 3, st, true);
        conv(c, f, b, bs, to, out, out, 3, 1, true);
      }
      side = to;
      mem2(c, f, b, EW, bs * side * side * out * 3 * c->e, 1); /* the residual add */
    }
    in = out;
  }
}

static void vit_interpolation(struct ctx *c, struct seg *f, struct seg *b) {
  const struct vl_arch *a = c->a;
  if (!a->patch_size || !a->image_size || vl_job_image_side(a, c->j) == a->image_size) return;
  struct vl_op op = {
      .kind = VL_OP_MEMORY, .mem = VL_MEM_BICUBIC, .planes = (double)a->hidden, .count = 1};
  f->k[VL_TK_MEMORY] += mem_s(&c->card, &op);
  op.mem = VL_MEM_BICUBIC_BWD;
  b->k[VL_TK_MEMORY] += mem_s(&c->card, &op);
  f->ops += 1;
  b->ops += 1;
}

/* a dense MLP's output projection, by the inventory's names (params.c) */
static bool mlp_out(const char *name) {
  static const char *const names[] = {"down_proj", "dense_4h_to_h", "fc2", "c_proj", "mlp.c_proj"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i])) return true;
  return false;
}

static bool expert_tensor(const struct vl_tensor *t) {
  return !strcmp(t->name, "w1") || !strcmp(t->name, "w2") || !strcmp(t->name, "w3");
}

/* the inventory's linears over T tokens: per-layer ones into the layers'
 * stretch (pp stages: this stage's share), the rest (the LM head, MLM
 * transforms, classifiers) into the head's; LoRA's adapters on its targets
 * (PEFT: fp32 adapters unless autocast; x cast to them, B(A(x)) * scaling
 * added to the frozen output and cast back) */
static void linears(struct ctx *c, const struct vl_inventory *inv, double T, struct seg *lf,
                    struct seg *lb, struct seg *hf, struct seg *hb) {
  const struct vl_arch *a = c->a;
  const struct vl_job *j = c->j;
  double tp = (double)j->tp, pp = (double)j->pp, rank = (double)j->lora_rank;
  bool base = !j->lora_rank;
  /* an encoder-decoder: T the encoder's tokens; its decoder's stack (the
   * inventory's second "q" on: params.c seq2seq), head and loss run the
   * decoder's Td, its cross-attention's k and v (half of the decoder's)
   * the encoder's */
  const double Td = (double)j->batch * (double)vl_job_target_seq(a, j);
  bool dec = false;
  int qs = 0;
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    if (a->enc_layers && t->per_layer && !strcmp(t->name, "q") && qs++) dec = true;
    if (t->kind != VL_T_LINEAR && t->kind != VL_T_HEAD) continue;
    bool layer = t->per_layer;
    double m = T, n = (double)t->count / (layer ? pp : 1);
    if (a->enc_layers && (dec || !layer)) {
      m = Td;
      if (layer && (!strcmp(t->name, "k") || !strcmp(t->name, "v"))) {
        n /= 2; /* the self-attention's here, the cross-attention's over the encoder's */
        linear(c, lf, lb, c->fp32, T, (double)t->cols, (double)t->rows / tp, n, base);
      }
    }
    if (expert_tensor(t)) { /* one grouped GEMM a layer over the S = T k pairs, each expert's
                             * rows padded to the kernel's 128-row tiles */
      double E = (double)a->experts, per = T * (double)a->experts_per_token / E;
      m = E * ceil(per / 128) * 128, n /= E;
    }
    if (a->family == VL_FAM_VIT || a->family == VL_FAM_RESNET) {
      if (t->kind == VL_T_HEAD) m = (double)j->batch; /* the classifier sees one row an image */
    }
    struct seg *f = layer ? lf : hf, *b = layer ? lb : hb;
    bool lora = j->lora_rank && layer && vl__lora_is_target(a, j, t->name);
    /* the MLP's output projection is a layer's last GEMM: not recomputed
     * (recompute_tail), and under LoRA neither is B, which runs after the
     * frozen product and A, whose input and output B's backward keeps */
    struct seg *last = c->tail && layer && mlp_out(t->name) ? c->tail : f;
    linear(c, lora ? f : last, b, c->fp32, m, (double)t->cols, (double)t->rows / tp, n, base);
    if (lora) {
      bool fp32 = !c->pol.autocast;
      double ab = c->pol.autocast ? c->e : 4, out = m * (double)t->rows / tp;
      if (ab != c->e) mem2(c, f, b, CAST, m * (double)t->cols * (c->e + ab), n);
      linear(c, f, b, fp32, m, (double)t->cols, rank, n, true);
      linear(c, last, b, fp32, m, rank, (double)t->rows / tp, n, true);
      mem2(c, last, b, EW, out * 2 * ab, n);          /* * scaling */
      mem2(c, last, b, EW, out * (c->e + 2 * ab), n); /* + the frozen output */
      if (ab != c->e) mem2(c, last, b, CAST, out * (ab + c->e), n);
    }
  }
  /* a tied head is the embedding's matrix (trained with it) */
  if (a->tie_embeddings && a->vocab && a->family != VL_FAM_VIT && a->family != VL_FAM_RESNET)
    linear(c, hf, hb, c->fp32, a->enc_layers ? Td : T, (double)a->hidden, (double)a->vocab / tp, 1,
           base);
}

/* embeddings: their program's priced lines (lp_embed.c: the gather of
 * each table, h wide, and their sums; the scaling, dropout; backward,
 * where the table trains: embedding_dense_backward zeroes the table's
 * gradient, V x h its LP_COLS_V, and scatters the tokens' into it) */
static void embeddings(struct ctx *c, struct seg *f, struct seg *b, double T) {
  const struct vl_arch *a = c->a;
  const double h = (double)a->hidden;
  struct lp p;
  vl__lp_embed(&p, a, c->pol.autocast, (unsigned)c->r, (unsigned)c->pol.weight,
               (unsigned)c->pol.grad, !c->j->lora_rank, false);
  const double n[LP_COLS_N] = {
      [LP_COLS_H] = T * h, [LP_COLS_V] = (double)a->vocab / (double)c->j->tp * h};
  lp_kernels(c, &p, f, b, n, 1, 1);
}

/* the head's memory-bound kernels over T rows: its program's priced lines
 * (lp_head.c: Gemma 2's soft cap, Granite's scaling; the loss over the
 * vocabulary, transformers' ForCausalLMLoss: the logits' upcast to fp32,
 * log_softmax, nll_loss; backward: the cast's, nll_loss's zeros and
 * scatter, log_softmax's), booked as the loss's */
static void loss(struct ctx *c, struct seg *f, struct seg *b, double T) {
  struct lp p;
  vl__lp_head(&p, c->a, c->pol.autocast, (unsigned)c->e, (unsigned)c->r);
  const double n[LP_COLS_N] = {
      [LP_COLS_V] = T * (double)c->a->vocab / (double)c->j->tp, [LP_COLS_ROW] = T};
  c->mem_kind = VL_TK_LOSS;
  lp_kernels(c, &p, f, b, n, 1, 1);
  c->mem_kind = VL_TK_MEMORY;
}

/* the measured row of optimizer o in impl; *approx where another stands in */
static const struct vl_kt_opt *opt_row(const struct vl_kt_card *kc, const char *o, const char *impl,
                                       bool *approx) {
  if (strcmp(o, "adamw") && strcmp(o, "sgd") && strcmp(o, "sgd-momentum")) {
    o = "adamw"; /* Lion, Adafactor, 8-bit Adam: priced as AdamW */
    *approx = true;
  }
  const struct vl_kt_opt *best = NULL;
  for (size_t i = 0; i < kc->n_opt; i++) {
    const struct vl_kt_opt *r = &kc->opt[i];
    if (strcmp(r->optimizer, o)) continue;
    if (!strcmp(r->impl, impl)) return r;
    if (!best || !strcmp(r->impl, "foreach")) best = r;
  }
  *approx = true;
  return best;
}

/* the measured seconds an element are for fp32 parameters, gradients and
 * states, scaled by the bytes these dtypes move */
double vl_time_optimizer_s(const struct vl_time_card *c, const char *optimizer, const char *impl,
                           double elems, double tensors, double w, double g, double st,
                           double states, bool *approx) {
  const struct vl_kt_opt *row = opt_row(c->tables, optimizer, impl, approx);
  if (!row) return 0;
  double moved = (2 * w + g + 2 * states * st) / (8 + 4 + 8 * states);
  return row->per_elem * elems * moved / c->sbw + row->per_tensor * tensors;
}

/* the optimizer's step over the trainable tensors, after zero_grad;
 * GradScaler's unscale (amp-fp16) reads and writes every gradient;
 * mixed-* copies the fp32 master back into the half weights */
static double optimizer_s(struct ctx *c, double elems, double tensors, bool *approx) {
  const struct vl_job *j = c->j;
  const char *o = "adamw";
  switch (j->optimizer) {
  case VL_OPT_SGD: o = "sgd"; break;
  case VL_OPT_SGD_MOMENTUM: o = "sgd-momentum"; break;
  case VL_OPT_ADAM:
  case VL_OPT_ADAMW: break;
  default: o = vl_optimizer_name(j->optimizer); break; /* priced as AdamW's */
  }
  bool lora = j->lora_rank != 0;
  double w = lora ? 4 : (double)(c->pol.master ? c->pol.master : c->pol.weight);
  double g = lora ? 4 : (double)vl__grad_elem_bytes(j, &c->pol),
         st = lora ? 4 : (double)c->pol.state;
  double states = j->optimizer == VL_OPT_SGD ? 0 : j->optimizer == VL_OPT_SGD_MOMENTUM ? 1 : 2;
  double t = vl_time_optimizer_s(&c->card, o, vl_opt_impl_name(j->opt_impl), elems, tensors, w, g,
                                 st, states, approx);
  if (t == 0) return 0;
  if (j->precision == VL_PREC_AMP_FP16)
    t += elems * g * 2 / (c->k->bw_add * c->card.sbw) + tensors * VL_KT_HOST_OP;
  if (c->pol.master && !lora)
    t += elems * ((double)c->pol.master + (double)c->pol.weight) / (c->k->bw_cast * c->card.sbw) +
         tensors * VL_KT_HOST_OP;
  return t;
}

/* autocast's half copies of the linears' weights: made in each forward
 * (cached for the step's trained leaves, anew at each call for frozen
 * ones), their gradients cast back to the fp32 weights in backward */
static void weight_casts(struct ctx *c, const struct vl_inventory *inv, struct seg *f,
                         struct seg *b) {
  if (!c->pol.autocast) return;
  double tp = (double)c->j->tp, pp = (double)c->j->pp;
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    if (t->kind != VL_T_LINEAR || !t->per_layer) continue;
    double n = (double)t->count / pp, el = (double)t->rows * (double)t->cols / tp;
    mem(c, f, CAST, el * 6, n);
    if (!c->j->lora_rank) mem(c, b, CAST, el * 6, n);
  }
}

static void seg_host(struct seg *s, double per_op) { s->host = s->ops * per_op; }

static void seg_sum(struct seg *to, const struct seg *s) {
  for (int i = 0; i < VL_TK_COUNT; i++)
    to->k[i] += s->k[i];
  to->host += s->host;
  to->ops += s->ops;
}

/* a pass's device time by kind, its host time and ops, `times` over (the
 * time the GPU waits on the host is booked by vl_time_phases) */
static void seg_add(struct vl_step_time *t, const struct seg *s, double times) {
  double gpu = seg_gpu(s);
  for (int i = 0; i < VL_TK_COUNT; i++)
    if (i != VL_TK_HOST) t->kind_s[i] += times * s->k[i];
  t->gpu_s += times * gpu;
  t->host_s += times * s->host;
  t->ops += (uint64_t)(times * s->ops + 0.5);
}

void vl_time_issue(struct vl_time_pipe *p, double gpu, double host) {
  double start = fmax(p->gpu_at, p->host_at);
  p->host_at += host;
  p->gpu_at = fmax(start + gpu, p->host_at);
}

double vl_time_recompute_host(void) { return RECOMPUTE_HOST; }

void vl_time_phases(struct vl_step_time *t, const struct vl_time_pass *fwd,
                    const struct vl_time_pass *bwd, const struct vl_time_pass *rec, double fwd_s,
                    double back_s, double times) {
  double fg = seg_gpu(fwd), bg = seg_gpu(bwd), rg = rec ? seg_gpu(rec) : 0;
  seg_add(t, fwd, times);
  seg_add(t, bwd, times);
  if (rec) seg_add(t, rec, times);
  t->forward_s = fwd_s;
  /* the recomputation's share of the backward pass, by its device or host time */
  double rh = rec ? rec->host : 0;
  double rshare = bg + rg > bwd->host + rh ? rg / (bg + rg) : rh / (bwd->host + rh);
  t->recompute_s = rec ? back_s * rshare : 0;
  t->backward_s = back_s - t->recompute_s;
  t->kind_s[VL_TK_HOST] = fwd_s + back_s - times * (fg + bg + rg); /* the GPU waits */
}

/* micro-batches issued back to back (no sync between them: measure.py's
 * and the usual accumulation loop call backward() on each and step once);
 * past MICRO_EXACT of them each adds what the last one did */
#define MICRO_EXACT 64

void vl_time_passes(struct vl_step_time *t, const struct vl_time_pass *fwd,
                    const struct vl_time_pass *bwd, const struct vl_time_pass *rec, double times) {
  struct vl_time_pass none = {0}, r = rec ? *rec : none;
  r.host *= RECOMPUTE_HOST;
  struct vl_time_pipe pipe = {0};
  double fwd_s = 0, back_s = 0, fwd_last = 0, back_last = 0;
  int n = times < MICRO_EXACT ? (int)times : MICRO_EXACT;
  for (int m = 0; m < n; m++) {
    double g0 = pipe.gpu_at;
    vl_time_issue(&pipe, seg_gpu(fwd), fwd->host);
    double g1 = pipe.gpu_at;
    vl_time_issue(&pipe, seg_gpu(bwd) + seg_gpu(&r), bwd->host + r.host);
    fwd_last = g1 - g0, back_last = pipe.gpu_at - g1;
    fwd_s += fwd_last, back_s += back_last;
  }
  fwd_s += (times - n) * fwd_last, back_s += (times - n) * back_last;
  vl_time_phases(t, fwd, bwd, rec ? &r : NULL, fwd_s, back_s, times);
}

void vl_time_pass_add(struct vl_time_pass *p, const struct vl_time_card *c, const struct vl_op *op,
                      enum vl_time_kind kind) {
  p->k[kind] += vl_op_device_s(c, op);
  p->ops += op->count;
}

double vl_op_device_s(const struct vl_time_card *c, const struct vl_op *op) {
  switch (op->kind) {
  case VL_OP_GEMM: return gemm_s(c, op);
  case VL_OP_ATTENTION: return attn_s(c, op);
  case VL_OP_MEMORY: return mem_s(c, op);
  case VL_OP_DISPATCH: break;
  }
  return 0;
}

double vl_op_flops(const struct vl_op *op) {
  if (op->kind == VL_OP_GEMM) return 2.0 * op->m * op->n * op->k * (op->batch > 1 ? op->batch : 1);
  if (op->kind != VL_OP_ATTENTION) return 0;
  double span = op->window > 0 && op->window < op->kv_len ? op->window : op->kv_len;
  double keys = op->causal && span == op->kv_len ? span / 2 : span;
  double fl = 2.0 * op->bs * op->heads * op->q_len * keys * (op->dqk + op->dv);
  return op->backward ? 2.5 * fl : fl;
}

double vl_time_host_op_s(void) { return VL_KT_HOST_OP; }
double vl_time_host_step_s(void) { return VL_KT_HOST_STEP; }

/* the card's own measured tables, or NULL */
static const struct vl_kt_card *measured(const struct vl_gpu *g) {
  for (size_t i = 0; i < sizeof vl_kt_cards / sizeof vl_kt_cards[0]; i++)
    if (!strcmp(vl_kt_cards[i].name, g->name)) return &vl_kt_cards[i];
  return NULL;
}

static bool bf16_policy(enum vl_precision p) {
  return p == VL_PREC_AMP_BF16 || p == VL_PREC_BF16 || p == VL_PREC_MIXED_BF16;
}

static bool fp16_policy(enum vl_precision p) {
  return p == VL_PREC_AMP_FP16 || p == VL_PREC_FP16 || p == VL_PREC_MIXED_FP16;
}

void vl_time_card_init(struct vl_time_card *c, const struct vl_gpu *g, bool fp16) {
  memset(c, 0, sizeof *c);
  c->s16 = c->s32 = c->sbw = 1;
  c->cudnn_sdpa = strtol(g->compute_capability, NULL, 10) >= 9; /* "gfx942" gives 0 */
  const struct vl_kt_card *k = measured(g);
  if (k) {
    c->tables = k;
    snprintf(c->source, sizeof c->source, "measured on %s, %s (%s)", k->device, k->date, k->source);
    return;
  }
  c->tables = k = &vl_kt_cards[0]; /* the H100 SXM */
  double p16 = fp16 && g->fp16_tflops > 0 ? g->fp16_tflops : g->bf16_tflops;
  c->s16 = p16 > 0 ? p16 / REF_BF16_TFLOPS : 1;
  c->s32 = g->fp32_tflops > 0 ? g->fp32_tflops / REF_FP32_TFLOPS : c->s16;
  c->sbw = g->hbm_gb_s > 0 ? g->hbm_gb_s / REF_HBM_GB_S : 1;
  c->derived = true;
  snprintf(c->source, sizeof c->source, "derived from %s by datasheet ratios", k->name);
}

/* the card against the measured H100 SXM: its datasheet ratios */
static void card_scales(struct ctx *c, const struct vl_gpu *g, struct vl_step_time *t) {
  vl_time_card_init(&c->card, g, fp16_policy(c->j->precision));
  c->k = c->card.tables;
  t->derived = c->card.derived;
  snprintf(t->source, sizeof t->source, "%s", c->card.source);
}

/* N of 6ND: the parameters a token passes through (MoE: k of E experts) */
double vl_active_params(const struct vl_arch *a, const struct vl_inventory *inv) {
  double p = (double)inv->total, experts = 0;
  if (!a->experts) return p;
  for (int i = 0; i < inv->n; i++)
    if (expert_tensor(&inv->t[i]))
      experts += (double)inv->t[i].rows * (double)inv->t[i].cols * (double)inv->t[i].count;
  return p - experts * (1.0 - (double)a->experts_per_token / (double)a->experts);
}

/* the trainable elements and tensors the optimizer steps over (this GPU's
 * share under tp and pp) */
static void trainable(struct ctx *c, const struct vl_inventory *inv, double *elems,
                      double *tensors) {
  const struct vl_job *j = c->j;
  double tp = (double)j->tp, pp = (double)j->pp;
  *elems = *tensors = 0;
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    double n = (double)t->count / (t->per_layer ? pp : 1);
    double el = (double)t->rows * (double)t->cols /
                (t->kind == VL_T_LINEAR || t->kind == VL_T_HEAD || t->kind == VL_T_EMBED ? tp : 1);
    if (j->lora_rank) { /* the adapters: A (r x in) and B (out x r) on each target */
      if (t->kind != VL_T_LINEAR || !t->per_layer || !vl__lora_is_target(c->a, j, t->name))
        continue;
      *elems += n * (double)j->lora_rank * (double)(t->rows / j->tp + t->cols);
      *tensors += 2 * n;
      continue;
    }
    *elems += n * el;
    *tensors += n;
  }
}

static vl_status check(const struct vl_job *j, const struct vl_gpu *g, struct vl_err *err) {
  if (j->task != VL_TASK_TRAIN)
    return vl__fail(err, VL_EINVAL, "the step time is a training step's (--task train)");
  if (g->no_bf16 && bf16_policy(j->precision))
    return vl__fail(err, VL_EINVAL,
                    "%s has no bf16 (compute capability %s): --precision %s cannot run on it; "
                    "use an fp16 policy or fp32",
                    g->label[0] ? g->label : g->name, g->compute_capability,
                    vl_precision_name(j->precision));
  if (j->batch == 0 || j->seq == 0 || j->grad_accum == 0 || j->tp == 0 || j->pp == 0)
    return vl__fail(err, VL_ERANGE, "batch, seq, grad_accum, tp and pp must be at least 1");
  return VL_OK;
}

/* the forward, the backward and the head of one micro-batch, as stretches;
 * lt: the layers' forward ops the recomputation skips */
struct micro {
  struct seg ef, eb, lf, lt, lb, hf, hb;
};

/* Non-reentrant checkpointing stops recomputing a layer once it has
 * recomputed every tensor backward keeps (torch/utils/checkpoint.py,
 * _StopRecomputationError, early stop on by default): the ops after the
 * layer's last saved tensor are not run again. In a pre-norm decoder
 * layer with no dropout on its branches those are the MLP's output
 * projection (its input is what its backward keeps) and the residual add
 * after it; a post-norm layer's closing norm, a dropout's mask and a
 * sandwich norm all keep what follows, and an MoE layer's weighted sum
 * keeps the experts' output. Seen in traced steps: Qwen2-0.5B's
 * recomputation runs every linear of a layer but down_proj
 * (tests/python/stack/test_trace_time.py, qwen2_ckpt). */
static bool recompute_tail(const struct vl_arch *a, const struct vl_job *j) {
  return j->checkpointing == VL_CKPT_FULL && a->causal && !a->enc_layers && !a->post_norm &&
         !a->sandwich_norm && a->hidden_dropout == 0;
}

static void micro_batch(struct ctx *c, const struct vl_inventory *inv, struct micro *m) {
  const struct vl_arch *a = c->a;
  const struct vl_job *j = c->j;
  double bs = (double)j->batch, q = (double)j->seq, pp = (double)j->pp;
  memset(m, 0, sizeof *m);
  c->tail = recompute_tail(a, j) ? &m->lt : NULL;
  if (a->family == VL_FAM_RESNET) {
    resnet(c, &m->lf, &m->lb, bs);
    linears(c, inv, bs, &m->lf, &m->lb, &m->hf, &m->hb);
    return;
  }
  if (a->family == VL_FAM_VIT && a->patch_size) { /* the patches and the [CLS] token */
    double p = (double)vl_job_image_side(a, j) / (double)a->patch_size;
    q = p * p + 1;
    vit_interpolation(c, &m->ef, &m->eb);
  }
  double T = bs * q;
  /* an encoder-decoder's decoder runs its own tokens (--target-seq) */
  double tq = (double)vl_job_target_seq(a, j), Td = bs * tq;
  linears(c, inv, T, &m->lf, &m->lb, &m->hf, &m->hb);
  weight_casts(c, inv, &m->lf, &m->lb);
  if (a->family == VL_FAM_T5 || a->family == VL_FAM_BART) {
    layer_ops(c, &m->lf, &m->lb, bs, q, q, false, false, (double)a->enc_layers / pp);
    layer_ops(c, &m->lf, &m->lb, bs, tq, q, true, true, (double)a->layers / pp);
  } else {
    layer_ops(c, &m->lf, &m->lb, bs, q, q, a->causal, false, (double)a->layers / pp);
    Td = T;
  }
  if (a->experts) moe_ops(c, &m->lf, &m->lb, T, (double)(a->layers - a->dense_layers) / pp);
  if (a->family != VL_FAM_VIT) embeddings(c, &m->ef, &m->eb, a->enc_layers ? T + Td : T);
  if (a->final_norm) norm(c, &m->hf, &m->hb, Td, (double)a->hidden, 1);
  if (a->family != VL_FAM_VIT) loss(c, &m->hf, &m->hb, Td);
}

vl_status vl_step_time(const struct vl_arch *a, const struct vl_job *j, const struct vl_gpu *g,
                       struct vl_step_time *t, struct vl_err *err) {
  memset(t, 0, sizeof *t);
  vl_status st = check(j, g, err);
  if (st != VL_OK) return st;
  struct vl_inventory inv;
  if ((st = vl_inventory_build(a, &inv, err)) != VL_OK) return st;
  struct ctx c = {.a = a, .j = j, .mem_kind = VL_TK_MEMORY};
  vl__policy_get(j->precision, &c.pol);
  c.e = (double)c.pol.act, c.r = (double)c.pol.resid, c.fp32 = c.pol.act == 4;
  card_scales(&c, g, t);
  struct micro m;
  micro_batch(&c, &inv, &m);
  struct seg *fw[] = {&m.ef, &m.lf, &m.lt, &m.hf}, *bw[] = {&m.hb, &m.lb, &m.eb};
  for (int i = 0; i < 4; i++)
    seg_host(fw[i], VL_KT_HOST_OP);
  for (int i = 0; i < 3; i++)
    seg_host(bw[i], VL_KT_HOST_OP);
  double acc = (double)j->grad_accum;
  bool ckpt = j->checkpointing == VL_CKPT_FULL, approx = false;
  struct seg fsum = {0}, bsum = {0}, rsum = {0};
  for (int i = 0; i < 4; i++)
    seg_sum(&fsum, fw[i]);
  for (int i = 0; i < 3; i++)
    seg_sum(&bsum, bw[i]);
  if (ckpt) seg_sum(&rsum, &m.lf);
  vl_time_passes(t, &fsum, &bsum, ckpt ? &rsum : NULL, acc);
  double elems, tensors;
  trainable(&c, &inv, &elems, &tensors);
  /* the optimizer's step, and the host's fixed cost of a step (zero_grad,
   * the loop, the model's own Python: bench/time/host_fit.py) */
  t->optimizer_s = optimizer_s(&c, elems, tensors, &approx) + VL_KT_HOST_STEP;
  t->kind_s[VL_TK_OPTIMIZER] += t->optimizer_s;
  t->gpu_s += t->optimizer_s;
  t->step_s = t->forward_s + t->backward_s + t->recompute_s + t->optimizer_s;
  /* (a ViT's tokens are its patches and [CLS]; a ResNet's are its images;
   * an encoder-decoder's its encoder's) */
  double per = (double)j->seq;
  if (a->family == VL_FAM_VIT && a->patch_size) {
    double p = (double)(vl_job_image_side(a, j) / a->patch_size);
    per = p * p + 1;
  } else if (vl_arch_is_conv(a)) {
    per = 1;
  }
  double tokens = (double)j->batch * per * acc;
  double N = vl_active_params(a, &inv) / ((double)j->tp * (double)j->pp);
  double f = j->lora_rank ? 4.0 : 6.0;
  t->model_flops = f * N * tokens;
  t->executed_flops = (f + (ckpt ? 2.0 : 0.0)) * N * tokens;
  if (a->enc_layers) { /* an encoder-decoder: the encoder's weights see --seq's tokens, the
                        * rest (decoder, head) --target-seq's (the inventory's second "q" on) */
    double enc = 0;
    int qs = 0;
    for (int i = 0; i < inv.n; i++) {
      const struct vl_tensor *w = &inv.t[i];
      if (w->per_layer && !strcmp(w->name, "q") && qs++) break;
      if (w->per_layer) enc += (double)w->rows * (double)w->cols * (double)w->count;
    }
    double td = (double)j->batch * (double)vl_job_target_seq(a, j) * acc;
    t->model_flops = f * (enc * tokens + (N - enc) * td);
    t->executed_flops = t->model_flops / f * (f + (ckpt ? 2.0 : 0.0));
  }
  if (vl_arch_is_conv(a)) { /* a convolution's weights see every position: its GEMMs, x3 */
    t->model_flops =
        3 * c.conv_flops * acc +
        f * (double)(a->labels * a->stage_width[a->stages - 1]) * (double)j->batch * acc;
    t->executed_flops = t->model_flops;
  }
  t->tokens_per_s = t->step_s > 0 ? tokens / t->step_s : 0;
  double peak = (fp16_policy(j->precision) && g->fp16_tflops > 0 ? g->fp16_tflops : g->bf16_tflops);
  t->mfu = t->step_s > 0 && peak > 0 ? t->model_flops / t->step_s / (peak * 1e12) : 0;
  t->approximate = approx || a->approximate;
  t->host_bound = t->host_s > t->gpu_s;
  if (approx)
    snprintf(t->note, sizeof t->note, "the %s step is priced as AdamW's (not measured)",
             vl_optimizer_name(j->optimizer));
  return VL_OK;
}

const char *vl_time_kind_name(enum vl_time_kind k) {
  static const char *names[] = {"matmul", "attention", "memory", "loss", "optimizer", "host"};
  return k < VL_TK_COUNT ? names[k] : "?";
}
