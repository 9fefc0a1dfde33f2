/* The time of a traced training step (docs/model.md, "Time of a traced
 * step"): the ops the tracer counted for one step of the job itself
 * (python/vramledger/optrace.py: "# op", "# optimizer", "# step" lines of
 * alloc.trace), each priced by vl_op_device_s as estimate prices the ops it
 * enumerates, issued in order on one vl_time_pipe, the optimizer by its
 * measured row (vl_time_optimizer_s). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/steptime.h"

/* host seconds a traced ATen op costs: the median over full-size jobs each
 * run in a process of its own whose priced device time is under 0.4 of
 * the measured step (9 of 38 traced runs: T5, BART, ResNet-50, MoE and
 * MLA LoRA, on both cards; bench/time/host_fit.py isolated over
 * bench/results/step-time/trace/isolated-h100.jsonl and isolated-h200.jsonl):
 * 13.4 us an op, 7.9-16.0 us (the H100 lease's host 7.9 us for T5, the
 * H200's 11-14 us). It was 16.7 us, fitted on tiny models (hidden 64,
 * 16 tokens) run one after another in one process
 * (bench/results/step-time/raw.jsonl:h200/host/host.json), whose cost an
 * op climbed with the order; full-size jobs run again each alone were not
 * faster than in one process (bench/results/step-time/README.md, "One
 * process a job"): the tiny models' ATen calls cost more than a full-size
 * job's. Views and empty tensors are dispatched ops too. Smaller than
 * VL_KT_HOST_OP, an op estimate enumerates: the tracer sees every ATen
 * call, estimate one op for several */
#define TRACE_HOST_OP 1.34e-05

double vl_trace_host_op_s(void) { return TRACE_HOST_OP; }

enum phase { P_FORWARD, P_BACKWARD, P_RECOMPUTE, P_PRESTEP, P_OPTIMIZER, P_OTHER, P_COUNT };
static const char *const phase_names[] = {"forward", "backward",  "recompute",
                                          "prestep", "optimizer", "other"};

/* the tracer's memory-bound classes (optrace.py): how each is priced and
 * which kind of --explain it is booked to; a class not listed is ew */
static const struct {
  const char *name;
  enum vl_mem_class mem;
  enum vl_time_kind kind;
} mem_classes[] = {
    {"cast", VL_MEM_CAST, VL_TK_MEMORY},
    {"norm", VL_MEM_NORM, VL_TK_MEMORY},
    {"softmax", VL_MEM_SOFTMAX, VL_TK_MEMORY},
    {"loss", VL_MEM_SOFTMAX, VL_TK_LOSS},
    {"logsoftmax", VL_MEM_LOGSOFTMAX, VL_TK_LOSS},
    {"logsoftmax_bwd", VL_MEM_LOGSOFTMAX_BWD, VL_TK_LOSS},
    {"bcast", VL_MEM_BROADCAST, VL_TK_MEMORY},
    {"strided", VL_MEM_STRIDED, VL_TK_MEMORY},
    {"bnorm", VL_MEM_BATCHNORM, VL_TK_MEMORY},
    {"bnorm_bwd", VL_MEM_BATCHNORM_BWD, VL_TK_MEMORY},
    {"bicubic", VL_MEM_BICUBIC, VL_TK_MEMORY},
    {"bicubic_bwd", VL_MEM_BICUBIC_BWD, VL_TK_MEMORY},
};

static void mem_class(const char *name, enum vl_mem_class *mem, enum vl_time_kind *kind) {
  *mem = VL_MEM_ELEMENTWISE, *kind = VL_TK_MEMORY;
  for (size_t i = 0; i < sizeof mem_classes / sizeof mem_classes[0]; i++)
    if (!strcmp(name, mem_classes[i].name)) *mem = mem_classes[i].mem, *kind = mem_classes[i].kind;
}

/* a line's field "key=value" as a word into buf; "" when absent */
static void word(const char *s, const char *end, const char *key, char *buf, size_t n) {
  size_t kn = strlen(key);
  buf[0] = '\0';
  for (const char *p = s; p && p + kn < end; p = memchr(p + 1, ' ', (size_t)(end - p - 1))) {
    const char *w = *p == ' ' ? p + 1 : p;
    if ((size_t)(end - w) > kn && !memcmp(w, key, kn) && w[kn] == '=') {
      const char *v = w + kn + 1, *e = memchr(v, ' ', (size_t)(end - v));
      size_t len = (size_t)((e ? e : end) - v);
      if (len >= n) len = n - 1;
      memcpy(buf, v, len);
      buf[len] = '\0';
      return;
    }
  }
}

/* a line's field "key=value" as a number (a shape, a byte count: never
 * negative, NaN or past 1e18); def when absent or not such a number. The
 * value is copied out first: the text need not end in a NUL */
static double field(const char *s, const char *end, const char *key, double def) {
  char v[40], *e;
  word(s, end, key, v, sizeof v);
  if (!v[0]) return def;
  double x = strtod(v, &e);
  return *e == '\0' && x >= 0 && x < 1e18 ? x : def;
}

/* the i-th space-separated word of [s, end) into buf */
static bool nth(const char *s, const char *end, int i, char *buf, size_t n) {
  const char *p = s;
  for (; i > 0 && p; i--) {
    p = memchr(p, ' ', (size_t)(end - p));
    if (p) p++;
  }
  if (!p || p >= end) return false;
  const char *e = memchr(p, ' ', (size_t)(end - p));
  size_t len = (size_t)((e ? e : end) - p);
  if (len >= n) len = n - 1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  return true;
}

struct scan {
  uint64_t last_any, last_full; /* the last step with a forward; with an optimizer step too */
  uint64_t steps;               /* the highest step with ops */
  bool fp16;
};

static bool is_half(const char *dt) { return !strcmp(dt, "bfloat16") || !strcmp(dt, "float16"); }

/* one "# op STEP PHASE COUNT KIND NAME ..." line as an op; false when not one */
static bool op_of(const char *s, const char *end, struct vl_op *op, enum vl_time_kind *kind,
                  double *count, int *phase, uint64_t *step, char *name, size_t name_n) {
  char w[64];
  memset(op, 0, sizeof *op);
  if (!nth(s, end, 2, w, sizeof w)) return false;
  *step = strtoull(w, NULL, 10);
  if (!nth(s, end, 3, w, sizeof w)) return false;
  *phase = P_OTHER;
  for (int p = 0; p < P_COUNT; p++)
    if (!strcmp(w, phase_names[p])) *phase = p;
  if (!nth(s, end, 4, w, sizeof w)) return false;
  *count = strtod(w, NULL);
  if (!(*count > 0 && *count < 1e15)) return false; /* not a count (NaN, negative, absurd) */
  op->count = *count;
  if (!nth(s, end, 5, w, sizeof w) || !nth(s, end, 6, name, name_n)) return false;
  char dt[24], v[24];
  word(s, end, "dtype", dt, sizeof dt);
  if (!strcmp(w, "gemm")) {
    op->kind = VL_OP_GEMM;
    *kind = !strcmp(name, "bmm") || !strcmp(name, "baddbmm") ? VL_TK_ATTENTION : VL_TK_MATMUL;
    word(s, end, "layout", v, sizeof v);
    op->layout = !strcmp(v, "wgrad")   ? VL_GEMM_WGRAD
                 : !strcmp(v, "dgrad") ? VL_GEMM_DGRAD
                                       : VL_GEMM_FWD;
    op->m = field(s, end, "m", 0), op->n = field(s, end, "n", 0), op->k = field(s, end, "k", 0);
    op->batch = field(s, end, "batch", 1);
    op->fp32 = !is_half(dt);
    op->tf32 = !strcmp(dt, "tf32");
  } else if (!strcmp(w, "attn")) {
    op->kind = VL_OP_ATTENTION;
    *kind = VL_TK_ATTENTION;
    op->half = is_half(dt);
    word(s, end, "kernel", v, sizeof v);
    /* the kernel SDPA picks (cuDNN for 16-bit inputs on Hopper, memory-
     * efficient for fp32) is the tables' "default", measured as picked */
    bool picked = (op->half && !strcmp(v, "cudnn")) || (!op->half && !strcmp(v, "efficient"));
    op->kernel = picked                    ? "default"
                 : !strcmp(v, "flash")     ? "flash"
                 : !strcmp(v, "efficient") ? "efficient"
                 : !strcmp(v, "cudnn")     ? "cudnn"
                                           : "default";
    word(s, end, "pass", v, sizeof v);
    op->backward = !strcmp(v, "bwd");
    op->causal = field(s, end, "causal", 0) != 0;
    op->bs = field(s, end, "b", 0), op->heads = field(s, end, "h", 0);
    op->q_len = field(s, end, "sq", 0), op->kv_len = field(s, end, "skv", 0);
    op->dqk = field(s, end, "dqk", 0), op->dv = field(s, end, "dv", 0);
  } else if (!strcmp(w, "mem")) {
    op->kind = VL_OP_MEMORY;
    word(s, end, "class", v, sizeof v);
    mem_class(v, &op->mem, kind);
    op->bytes = field(s, end, "bytes", 0);
    op->planes = field(s, end, "planes", 0);
  } else {
    op->kind = VL_OP_DISPATCH;
    *kind = VL_TK_MEMORY;
  }
  return true;
}

/* Is step st among the n steps the optimizer took (ascending, as written)? */
static bool stepped(const uint64_t *opt, size_t n, uint64_t st) {
  for (size_t i = 0; i < n; i++)
    if (opt[i] == st) return true;
  return false;
}

/* the step to price: the last with a forward op and an optimizer step
 * (last_full), else the last with a forward op (last_any) */
static vl_status scan(const char *text, size_t len, struct scan *sc) {
  memset(sc, 0, sizeof *sc);
  char w[32];
  const char *lim = text + len;
  uint64_t *opt = NULL;
  size_t n = 0, cap = 0;
  for (int pass = 0; pass < 2; pass++)
    for (const char *s = text; s < lim;) {
      const char *e = memchr(s, '\n', (size_t)(lim - s));
      if (!e) e = lim;
      if (pass == 0 && e - s > 12 && !memcmp(s, "# optimizer ", 12) && nth(s, e, 2, w, sizeof w)) {
        if (n == cap) {
          uint64_t *more = vl_realloc(opt, (cap = cap ? 2 * cap : 64) * sizeof *opt);
          if (!more) {
            vl_free(opt);
            return VL_ENOMEM;
          }
          opt = more;
        }
        opt[n++] = strtoull(w, NULL, 10);
      } else if (pass == 1 && e - s > 5 && !memcmp(s, "# op ", 5) && nth(s, e, 2, w, sizeof w)) {
        uint64_t st = strtoull(w, NULL, 10);
        if (st > sc->steps) sc->steps = st;
        char ph[16], dt[24];
        if (nth(s, e, 3, ph, sizeof ph) && !strcmp(ph, "forward")) {
          if (st > sc->last_any) sc->last_any = st;
          if (st > sc->last_full && stepped(opt, n, st)) sc->last_full = st;
        }
        word(s, e, "dtype", dt, sizeof dt);
        if (!strcmp(dt, "float16") && nth(s, e, 5, w, sizeof w) && !strcmp(w, "gemm"))
          sc->fp16 = true;
      }
      s = e + 1;
    }
  vl_free(opt);
  return VL_OK;
}

vl_status vl_trace_step_time(const char *text, size_t len, const struct vl_gpu *g,
                             struct vl_trace_time *out, struct vl_err *err) {
  memset(out, 0, sizeof *out);
  struct scan sc;
  if (scan(text, len, &sc) != VL_OK) return vl__fail(err, VL_ENOMEM, "out of memory");
  uint64_t step = sc.last_full ? sc.last_full : sc.last_any;
  if (!step)
    return vl__fail(err, VL_ENOTFOUND,
                    "the trace has no ops ('# op' lines): it was written before the tracer "
                    "counted them, or with VRAMLEDGER_TRACE_OPS=0");
  out->step = step;
  out->steps = sc.steps;
  out->complete = sc.last_full == step;
  struct vl_time_card card;
  vl_time_card_init(&card, g, sc.fp16);
  struct vl_step_time *t = &out->time;
  snprintf(t->source, sizeof t->source, "%s", card.source);
  t->derived = card.derived;
  struct vl_time_pass pass[P_COUNT];
  memset(pass, 0, sizeof pass);
  double flops[P_COUNT] = {0};
  const char *lim = text + len;
  bool approx = false;
  double opt_s = 0;
  /* the forward's and the backward's ops issued in order as the host
   * dispatches them (vl_time_issue); spans[0]: forward, [1]: backward */
  struct vl_time_pipe pipe = {0};
  double spans[2] = {0, 0}, mark = 0;
  int in = -1;
  for (const char *s = text; s < lim;) {
    const char *e = memchr(s, '\n', (size_t)(lim - s));
    if (!e) e = lim;
    char w[32], name[80];
    if (e - s > 5 && !memcmp(s, "# op ", 5)) {
      struct vl_op op;
      enum vl_time_kind kind;
      double count;
      int ph;
      uint64_t st;
      if (op_of(s, e, &op, &kind, &count, &ph, &st, name, sizeof name) && st == step) {
        /* inner=1: a kernel of the op on the line before (cuDNN's layout
         * transposes around a convolution): device time, no dispatch */
        const bool inner = field(s, e, "inner", 0) != 0;
        vl_time_pass_add(&pass[ph], &card, &op, kind);
        if (inner) pass[ph].ops -= count;
        if (ph <= P_RECOMPUTE) {
          int now = ph == P_FORWARD ? 0 : 1;
          if (now != in) {
            if (in >= 0) spans[in] += pipe.gpu_at - mark;
            mark = pipe.gpu_at, in = now;
          }
          double h =
              inner ? 0
                    : count * TRACE_HOST_OP * (ph == P_RECOMPUTE ? vl_time_recompute_host() : 1);
          vl_time_issue(&pipe, vl_op_device_s(&card, &op), h);
        }
        flops[ph] += count * vl_op_flops(&op);
        if (!inner) out->phase_ops[ph] += count;
        if (op.kind != VL_OP_DISPATCH && ph <= P_PRESTEP) out->kernels += count;
      }
    } else if (e - s > 12 && !memcmp(s, "# optimizer ", 12) && nth(s, e, 2, w, sizeof w) &&
               strtoull(w, NULL, 10) == step) {
      char impl[24];
      nth(s, e, 3, out->optimizer, sizeof out->optimizer);
      nth(s, e, 4, impl, sizeof impl);
      snprintf(out->optimizer_impl, sizeof out->optimizer_impl, "%s", impl);
      double el = field(s, e, "elems", 0), tn = field(s, e, "tensors", 0);
      out->trained_elems += el;
      opt_s += vl_time_optimizer_s(&card, out->optimizer, impl, el, tn, field(s, e, "w", 4),
                                   field(s, e, "g", 4), field(s, e, "st", 4),
                                   field(s, e, "states", 2), &approx);
    } else if (e - s > 7 && !memcmp(s, "# step ", 7) && nth(s, e, 2, w, sizeof w) &&
               strtoull(w, NULL, 10) == step) {
      out->tokens = field(s, e, "tokens", 0);
      out->samples = field(s, e, "samples", 0);
      out->micro_batches = field(s, e, "micro", 0);
    }
    s = e + 1;
  }
  if (in >= 0) spans[in] += pipe.gpu_at - mark;
  double host = TRACE_HOST_OP;
  for (int p = 0; p < P_COUNT; p++)
    pass[p].host = pass[p].ops * host;
  pass[P_RECOMPUTE].host *= vl_time_recompute_host();
  bool ckpt = pass[P_RECOMPUTE].ops > 0;
  /* the micro-batches of the step are in the passes already: one step's ops */
  vl_time_phases(t, &pass[P_FORWARD], &pass[P_BACKWARD], ckpt ? &pass[P_RECOMPUTE] : NULL, spans[0],
                 spans[1], 1);
  /* between backward and the step (clipping, the scaler's unscale): a
   * stretch of its own; optimizer.step's kernels: its measured row */
  const struct vl_time_pass *pre = &pass[P_PRESTEP];
  double pg = 0;
  for (int k = 0; k < VL_TK_COUNT; k++)
    pg += pre->k[k];
  double pre_s = fmax(pg, pre->host);
  t->optimizer_s = opt_s + pre_s + vl_time_host_step_s();
  t->kind_s[VL_TK_OPTIMIZER] += t->optimizer_s;
  t->gpu_s += opt_s + pg + vl_time_host_step_s();
  t->host_s += pre->host;
  t->ops += (uint64_t)(pre->ops + 0.5);
  t->step_s = t->forward_s + t->backward_s + t->recompute_s + t->optimizer_s;
  t->model_flops = flops[P_FORWARD] + flops[P_BACKWARD];
  t->executed_flops = t->model_flops + flops[P_RECOMPUTE];
  t->tokens_per_s = t->step_s > 0 && out->tokens > 0 ? out->tokens / t->step_s : 0;
  double peak = sc.fp16 && g->fp16_tflops > 0 ? g->fp16_tflops : g->bf16_tflops;
  t->mfu = t->step_s > 0 && peak > 0 ? t->model_flops / t->step_s / (peak * 1e12) : 0;
  t->approximate = approx || !out->optimizer[0];
  t->host_bound = t->host_s > t->gpu_s;
  if (!out->optimizer[0])
    snprintf(t->note, sizeof t->note, "no optimizer step was traced: the step has no update");
  else if (approx)
    snprintf(t->note, sizeof t->note, "the %s %s step is priced by another measured row",
             out->optimizer, out->optimizer_impl);
  return VL_OK;
}
