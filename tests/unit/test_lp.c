/* Layer programs (lib/model/lp.h, lp_mlp.c, lp_norm.c, lp_attention.c,
 * lp_head.c, lp_embed.c): each part's ops, what they save and their
 * FLOPs; the training replay issuing exactly the program's ops and
 * keeping exactly what it says is saved; the time model pricing exactly
 * the program's priced bytes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "model/kernel_tables.h"
#include "model/lp.h"
#include "model/prog.h"
#include "model/train_replay.h"
#include "vramledger/catalog.h"
#include "vramledger/steptime.h"

enum { ROWS = 512, H = 1024, I = 2048, E = 2 };

static double cols(unsigned c) { return c == LP_COLS_H ? H : c == LP_COLS_2I ? 2.0 * I : I; }
static double tensor_bytes(const struct lp *p, unsigned x) {
  return ROWS * cols(p->op[x].cols) * p->op[x].ob;
}

/* the tensor whose storage x is */
static unsigned storage(const struct lp *p, unsigned x) {
  while (p->op[x].kind == LP_VIEW || p->op[x].kind == LP_REF)
    x = p->op[x].in[0];
  return x;
}

/* the bytes the program's backward keeps: saved tensors and outputs kept
 * by their own op (the linears' inputs are the linears' to keep) */
static double saved_bytes(const struct lp *p) {
  double s = 0;
  for (unsigned i = LP_FIRST; i <= p->n; i++) {
    for (int k = 0; k < 2; k++)
      if (p->op[i].saved[k]) s += tensor_bytes(p, p->op[i].saved[k]);
    if (p->op[i].save_out) s += tensor_bytes(p, i);
  }
  return s;
}

static unsigned count(const struct lp *p, unsigned kind) {
  unsigned k = 0;
  for (unsigned i = LP_FIRST; i <= p->n; i++)
    k += p->op[i].kind == kind;
  return k;
}

struct kind {
  const char *name, *config;
  bool moe, autocast;
  unsigned ops, linears;
  double saved; /* in rows x I elements of E bytes */
  unsigned input_linears;
};

/* saved: activations.c's per-element figures for the same kinds (gated:
 * act(gate)'s input, both factors; GPT-2's chain: 4 e, under autocast
 * 4 + 4 + 2 + 4 bytes) */
static const struct kind kinds[] = {
    {"gated, two linears (SwiGLU)", "data/models/llama-3-8b.json", false, false, 5, 3, 3, 2},
    {"gated, gate_up fused", "data/models/phi-3-mini.json", false, false, 6, 2, 3, 1},
    {"plain GELU", "data/models/bert-base-uncased.json", false, false, 3, 2, 1, 1},
    {"ReLU", "data/models/opt-125m.json", false, false, 3, 2, 1, 1},
    {"GPT-2's Python GELU", "data/models/gpt2.json", false, false, 11, 2, 4, 1},
    {"GPT-2's Python GELU, autocast", "data/models/gpt2.json", false, true, 11, 2, 7, 1},
    {"gpt-oss's clamped GLU (an expert)", "data/models/gpt-oss-20b.json", true, false, 13, 2, 7, 1},
    {"a routed expert (gate_up)", "data/models/qwen3-30b-a3b.json", true, false, 6, 2, 3, 1},
};

static void each_kind(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const struct kind *c = &kinds[k];
    struct vl_arch a;
    tu_arch(c->config, &a);
    struct lp p;
    vl__lp_mlp(&p, &a, c->autocast, E, c->moe);
    printf("%-36s %2u ops, saved %g\n", c->name, p.n - LP_IN, saved_bytes(&p) / (ROWS * I * E));
    assert_int_equal(p.n - LP_IN, c->ops);
    assert_int_equal(count(&p, LP_LINEAR), c->linears);
    assert_int_equal(vl__lp_input_linears(&p), c->input_linears);
    assert_true(saved_bytes(&p) == c->saved * ROWS * I * E);
    /* every linear: 2 rows in out; the last one down to h */
    double in_out = 0;
    for (unsigned i = LP_FIRST; i <= p.n; i++) {
      const struct lp_op *o = &p.op[i];
      if (o->kind != LP_LINEAR) continue;
      double want = 2.0 * ROWS * cols(o->in_cols) * cols(o->cols);
      assert_true(vl__lp_flops(o, &(struct lp_dims){.rows = ROWS, .I = I, .h = H}) == want);
      in_out += cols(o->in_cols) * cols(o->cols);
      /* its input is the part's, or an op's before it */
      assert_true(o->in[0] == LP_IN || o->in[0] < i);
    }
    /* the MLP's weights: h x I each (gate_up: two of them) */
    assert_true(in_out == (a.gated_mlp || c->moe ? 3.0 : 2.0) * H * I);
    /* every tensor made is let go of once, but the output; the part's
     * input only where the layer rebinds it after fc1 (OPT) */
    unsigned drops[LP_MAX] = {0};
    for (unsigned i = LP_FIRST; i <= p.n; i++)
      for (int d = 0; d < 3 && p.op[i].drop[d]; d++) {
        assert_true(p.op[i].drop[d] >= LP_IN && p.op[i].drop[d] < i);
        drops[p.op[i].drop[d]]++;
      }
    assert_int_equal(drops[LP_IN], a.layer_inline);
    for (unsigned i = LP_FIRST; i < p.n; i++)
      assert_int_equal(drops[i] + (p.op[i + 1].kind == LP_DROPOUT && p.op[i + 1].in[0] == i), 1);
    assert_int_equal(drops[p.n], 0);
  }
}

/* Dropout on the activation is one more op, priced as native_dropout's
 * output and byte mask (BART's activation_dropout) */
static void dropout_on_the_activation(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/bart-base.json", &a);
  struct lp p0, p1;
  a.act_dropout = 0;
  vl__lp_mlp(&p0, &a, false, E, false);
  a.act_dropout = 0.1;
  vl__lp_mlp(&p1, &a, false, E, false);
  assert_int_equal(p1.n, p0.n + 1);
  assert_int_equal(count(&p1, LP_DROPOUT), 1);
  const struct lp_op *d = &p1.op[p1.n - 1];
  assert_int_equal(d->kind, LP_DROPOUT);
  assert_true(d->bytes == 2.0 * E + 1);
}

/* the replay of one MLP on a bare tape: a tape node for each op that runs
 * a kernel, and what stays allocated once the forward is done is the
 * input, the output, what the program says is saved, the linears' inputs
 * and the dropout's mask */
static void replay_issues_the_program(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const struct kind *c = &kinds[k];
    if (c->autocast) continue; /* (autocast's weight copies: the replay's own) */
    struct vl_arch a;
    tu_arch(c->config, &a);
    a.mlp_bias = 0, a.expert_bias = 0; /* (a bias's column-sum scratch) */
    struct vl__train_sizes z = {.h = H, .e = E, .wb = E, .r = E};
    struct vl_cache_conf conf = {0};
    struct run R = {.arch = &a, .z = &z, .out32 = NONE};
    assert_int_equal(vl_cache_new(&conf, &R.p.c), VL_OK);
    R.tp = (struct tape){.p = &R.p, .ws = NONE, .grad = true};
    uint32_t x = tape_new(&R.tp, (uint64_t)ROWS * H * E);
    uint32_t n0 = R.tp.nn;
    uint32_t y = vl__tr_mlp(&R, x, E, ROWS, I, c->moe, false);
    struct lp p;
    vl__lp_mlp(&p, &a, false, E, c->moe);
    unsigned kernels = 0;
    bool kept[LP_MAX] = {false}; /* by storage: a view's or a reference's is its base's */
    double keep = 2.0 * ROWS * H * E;
    for (unsigned i = LP_FIRST; i <= p.n; i++) {
      const struct lp_op *o = &p.op[i];
      /* a node each (a slice: slice_backward's) */
      kernels += o->kind == LP_LINEAR || o->kind == LP_EW || o->kind == LP_CAST ||
                 o->kind == LP_DROPOUT || (o->kind == LP_VIEW && o->slice);
      if (o->kind == LP_LINEAR && o->in[0] != LP_IN) kept[storage(&p, o->in[0])] = true;
      for (int d = 0; d < 2; d++)
        if (o->saved[d]) kept[storage(&p, o->saved[d])] = true;
      if (o->save_out) kept[i] = true;
      if (o->kind == LP_DROPOUT) keep += ROWS * cols(o->cols); /* its mask */
    }
    for (unsigned i = LP_FIRST; i <= p.n; i++)
      if (kept[i]) keep += tensor_bytes(&p, i);
    struct vl_cache_stats s;
    vl_cache_stats(R.p.c, &s);
    printf("%-36s %u nodes, %g bytes kept\n", c->name, R.tp.nn - n0, (double)s.allocated);
    assert_int_equal(R.tp.nn - n0, kernels);
    assert_true((double)R.tp.t[y].bytes == (double)ROWS * H * E);
    assert_true((double)s.allocated == keep);
    tape_free(&R.tp);
    vl_free(R.cached.h);
    vl_cache_destroy(R.p.c);
  }
}

/* the bundled catalog's H100 and its time card (its kernel tables) */
static const struct vl_gpu *h100(struct vl_catalog *cat, struct vl_time_card *card) {
  assert_int_equal(tu_catalog(cat), 0);
  const struct vl_gpu *g = vl_catalog_find(cat, "h100-80gb");
  assert_non_null(g);
  vl_time_card_init(card, g, false);
  return g;
}

/* the device seconds of a program's priced line o over `elements`, `times`
 * over: its bytes at its class's rate (steptime.c mem_s) */
static double line_s(const struct vl_time_card *c, const struct lp_op *o, double elements,
                     double times) {
  static const enum vl_mem_class cls[] = {[LP_PRICE_EW] = VL_MEM_ELEMENTWISE,
                                          [LP_PRICE_CAST] = VL_MEM_CAST,
                                          [LP_PRICE_NORM] = VL_MEM_NORM,
                                          [LP_PRICE_SOFTMAX] = VL_MEM_SOFTMAX,
                                          [LP_PRICE_BCAST] = VL_MEM_BROADCAST,
                                          [LP_PRICE_STRIDED] = VL_MEM_STRIDED,
                                          [LP_PRICE_LOGSOFTMAX] = VL_MEM_LOGSOFTMAX,
                                          [LP_PRICE_LOGSOFTMAX_BWD] = VL_MEM_LOGSOFTMAX_BWD};
  assert_true(o->price < sizeof cls / sizeof cls[0]);
  const struct vl_op line = {
      .kind = VL_OP_MEMORY, .mem = cls[o->price], .bytes = elements * o->bytes, .count = times};
  return vl_op_device_s(c, &line);
}
/* the time model's MLP kernels are the program's priced lines: widening
 * the MLP adds, per layer, its priced bytes over the card's bandwidth for
 * each class, once forward and twice backward (its GEMMs are matmul time,
 * apart) */
static void time_model_prices_the_program(void **state) {
  (void)state;
  struct vl_catalog cat;
  struct vl_time_card card;
  const struct vl_gpu *g = h100(&cat, &card);
  const char *configs[] = {"data/models/llama-3-8b.json", "data/models/phi-3-mini.json",
                           "data/models/gpt2.json", "data/models/opt-125m.json",
                           "data/models/bart-base.json"};
  for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
    /* (autocast's copies of the wider weights are memory time too) */
    for (int prec = VL_PREC_FP32; prec <= VL_PREC_BF16; prec += VL_PREC_BF16) {
      struct vl_arch a;
      tu_arch(configs[k], &a);
      a.act_dropout = 0.1;
      struct vl_job j;
      vl_job_init(&j);
      j.precision = (enum vl_precision)prec, j.batch = 2, j.seq = 128;
      struct vl_step_time t1, t2;
      struct vl_err err = {""};
      assert_int_equal(vl_step_time(&a, &j, g, &t1, &err), VL_OK);
      const uint64_t I1 = a.intermediate;
      a.intermediate *= 2;
      assert_int_equal(vl_step_time(&a, &j, g, &t2, &err), VL_OK);
      const bool autocast = false;
      unsigned e = prec == VL_PREC_FP32 ? 4 : 2;
      struct lp p;
      vl__lp_mlp(&p, &a, autocast, e, false);
      double per_el = 0;
      for (unsigned i = LP_FIRST; i <= p.n; i++)
        if (p.op[i].price) per_el += line_s(&card, &p.op[i], 1, 1);
      /* (an encoder-decoder: both stacks, the decoder on as many tokens) */
      double layers = (double)(a.layers + a.enc_layers);
      double want = 3 * per_el * (double)(j.batch * j.seq * I1) * layers;
      double got = t2.kind_s[VL_TK_MEMORY] - t1.kind_s[VL_TK_MEMORY];
      printf("%-32s %d: %.6g s, priced %.6g s\n", configs[k], prec, got, want);
      assert_true(fabs(got - want) <= 1e-9 * want);
    }
  }
  vl_catalog_release(&cat);
}

/* a bare replay of one part: the run, its input x of rows x h */
struct bare {
  struct vl_arch a;
  struct vl__train_sizes z;
  struct run R;
};
static void bare_begin(struct bare *b, const char *config, uint64_t e, bool autocast, bool lora) {
  tu_arch(config, &b->a);
  b->z = (struct vl__train_sizes){
      .h = H, .e = E, .wb = e, .r = e, .autocast = autocast, .lora_rank = lora ? 8 : 0};
  struct vl_cache_conf conf = {0};
  b->R = (struct run){.arch = &b->a, .z = &b->z, .out32 = NONE};
  assert_int_equal(vl_cache_new(&conf, &b->R.p.c), VL_OK);
  b->R.tp = (struct tape){.p = &b->R.p, .ws = NONE, .grad = true};
}
static double bare_allocated(struct bare *b) {
  struct vl_cache_stats s;
  vl_cache_stats(b->R.p.c, &s);
  return (double)s.allocated;
}
static void bare_end(struct bare *b) {
  tape_free(&b->R.tp);
  vl_free(b->R.cached.h);
  vl_cache_destroy(b->R.p.c);
}

struct norm_kind {
  const char *name, *config;
  unsigned xb; /* the input's bytes an element (the weight's too) */
  bool autocast;
  unsigned ops, ob;       /* ops, the output's bytes an element */
  double kept, kept_lora; /* bytes kept an element of rows x h beside the input and the output
                           * (the rsqrt's rows x 4 apart) */
};

/* each norm's program: its ops, its output's dtype, and what the replay
 * keeps once it has run (the input and output, what the lines save:
 * LayerNorm its input; Llama's fp32 copy and the product's half input,
 * not kept for a frozen weight; Gemma's and OLMo 2's fp32 product's
 * input) */
static const struct norm_kind norms[] = {
    {"LayerNorm", "data/models/bert-base-uncased.json", 2, false, 1, 2, 0, 0},
    {"LayerNorm, autocast", "data/models/bert-base-uncased.json", 4, true, 1, 4, 0, 0},
    {"Llama RMSNorm, bf16", "data/models/llama-3-8b.json", 2, false, 7, 2, 4 + 2, 4},
    {"Llama RMSNorm, fp32", "data/models/llama-3-8b.json", 4, false, 7, 4, 4, 0},
    {"Llama RMSNorm, q/k under autocast", "data/models/qwen3-0.6b.json", 2, true, 7, 4, 4 + 2, 4},
    {"Gemma RMSNorm (1 + w), bf16", "data/models/gemma-2b.json", 2, false, 7, 2, 4 + 4, 4},
    {"Gemma RMSNorm (1 + w), fp32", "data/models/gemma-2b.json", 4, false, 6, 4, 4, 0},
    {"OLMo 2 RMSNorm, bf16", "data/models/olmo-2-1b.json", 2, false, 7, 2, 4 + 4, 4},
    {"T5 RMSNorm, bf16", "data/models/t5-base.json", 2, false, 8, 2, 4 + 2, 4},
};

static void each_norm(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof norms / sizeof norms[0]; k++) {
    const struct norm_kind *c = &norms[k];
    for (int lora = 0; lora <= 1; lora++) {
      struct bare b;
      bare_begin(&b, c->config, c->xb, c->autocast, lora);
      /* (a q/k norm's input is the activations': half under autocast) */
      b.z.wb = c->autocast ? 4 : c->xb;
      struct lp p;
      vl__lp_norm(&p, &b.a, c->autocast, c->xb, (unsigned)b.z.wb);
      uint32_t x = tape_new(&b.R.tp, (uint64_t)ROWS * H * c->xb);
      uint64_t ob = 0;
      uint32_t y = vl__tr_norm_w(&b.R, x, c->xb, ROWS, H, &ob);
      double rows = b.a.rms_norm ? ROWS * 4.0 : 0; /* the rsqrt, kept for its backward */
      double want = ROWS * H * (c->xb + c->ob + (lora ? c->kept_lora : c->kept)) + rows;
      printf("%-36s %s %u ops, kept %g\n", c->name, lora ? "LoRA" : "    ", p.n - LP_IN,
             (bare_allocated(&b) - rows) / (ROWS * H) - c->xb - c->ob);
      assert_int_equal(p.n - LP_IN, c->ops);
      assert_int_equal(ob, c->ob);
      assert_int_equal(p.op[p.n].ob, c->ob);
      assert_true((double)b.R.tp.t[y].bytes == (double)ROWS * H * c->ob);
      assert_true(bare_allocated(&b) == want);
      /* T5 multiplies the rsqrt by its input itself */
      if (b.a.rms_norm)
        for (unsigned i = LP_FIRST; i <= p.n; i++)
          if (p.op[i].in[1] && p.op[p.op[i].in[1]].cols == LP_COLS_ROW)
            assert_int_equal(p.op[i].in[0] == LP_IN, b.a.family == VL_FAM_T5);
      bare_end(&b);
    }
  }
}

/* the time model's norms are the program's priced lines: the final norm
 * adds one norm over T x h, its lines at their bytes at their class's rate
 * (the broadcast products at the profiles', the others at the card's
 * bandwidth of their kind), once forward and (but the rsqrt's) twice
 * backward */
static void time_model_prices_the_norm(void **state) {
  (void)state;
  struct vl_catalog cat;
  struct vl_time_card card;
  const struct vl_gpu *g = h100(&cat, &card);
  const char *configs[] = {"data/models/llama-3-8b.json", "data/models/gemma-2b.json",
                           "data/models/gpt2.json", "data/models/olmo-2-1b.json"};
  for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
    for (int prec = VL_PREC_FP32; prec <= VL_PREC_BF16; prec++) {
      struct vl_arch a;
      tu_arch(configs[k], &a);
      struct vl_job j;
      vl_job_init(&j);
      j.precision = (enum vl_precision)prec, j.batch = 2, j.seq = 128;
      struct vl_step_time t1, t0;
      struct vl_err err = {""};
      a.final_norm = true;
      assert_int_equal(vl_step_time(&a, &j, g, &t1, &err), VL_OK);
      a.final_norm = false;
      assert_int_equal(vl_step_time(&a, &j, g, &t0, &err), VL_OK);
      const bool autocast = prec == VL_PREC_AMP_BF16 || prec == VL_PREC_AMP_FP16;
      const unsigned r = prec == VL_PREC_BF16 || prec == VL_PREC_FP16 ? 2 : 4;
      struct lp p;
      vl__lp_norm(&p, &a, autocast, r, r);
      const double T = (double)(j.batch * j.seq);
      double want = 0;
      for (unsigned i = LP_FIRST; i <= p.n; i++) {
        const struct lp_op *o = &p.op[i];
        if (!o->price) continue;
        double n = o->pcols == LP_COLS_ROW ? T : T * (double)a.hidden;
        want += line_s(&card, o, n, (o->fwd_only ? 1 : 3) * (o->times ? o->times : 1));
      }
      double got = t1.kind_s[VL_TK_MEMORY] - t0.kind_s[VL_TK_MEMORY];
      printf("%-32s %d: %.6g s, priced %.6g s\n", configs[k], prec, got, want);
      assert_true(fabs(got - want) <= 1e-9 * want);
    }
  }
  vl_catalog_release(&cat);
}

/* the time a program's priced lines take on n[] elements, forward once
 * and backward twice but a forward-only line's */
static double priced_s(const struct lp *p, const double *n, const struct vl_time_card *c) {
  double s = 0;
  for (unsigned i = LP_FIRST; i <= p->n; i++) {
    const struct lp_op *o = &p->op[i];
    if (o->price)
      s += line_s(c, o, n[o->pcols],
                  (o->fwd_only || o->bwd_only ? 1 : 3) * (o->times ? o->times : 1));
  }
  return s;
}

struct scores_kind {
  const char *name, *config;
  bool masked;
  unsigned e, sm, tb; /* the scores', softmax's and the weights' bytes an element */
  unsigned ops;
  double kept; /* bytes kept an element of rows x keys, the output among them */
};

/* eager attention's scores to weights: the ops, and what the replay keeps
 * once they ran (softmax's output, the weights, tanh's output, dropout's
 * mask, gpt-oss's joined logits and row maxima) */
static const struct scores_kind scores[] = {
    {"Llama bf16: mask, fp32 softmax, cast", "data/models/llama-3-8b.json", true, 2, 4, 2, 4,
     4 + 2},
    {"Llama autocast: fp32 query, no cast", "data/models/llama-3-8b.json", true, 2, 4, 4, 4, 4},
    {"GPT-2 bf16: half softmax, dropout", "data/models/gpt2.json", true, 2, 2, 2, 4, 2 + 2 + 1},
    {"Gemma 2 bf16: soft cap", "data/models/gemma-2-2b.json", true, 2, 4, 2, 7, 2 + 4 + 2},
    {"BERT bf16: no mask, dropout", "data/models/bert-base-uncased.json", false, 2, 2, 2, 3,
     2 + 2 + 1},
};

static void scores_program(void **state) {
  (void)state;
  enum { Q = 64, K = 64 }; /* rows: batch x heads x queries; keys */
  for (size_t k = 0; k < sizeof scores / sizeof scores[0]; k++) {
    const struct scores_kind *c = &scores[k];
    struct bare b;
    bare_begin(&b, c->config, c->e, false, false);
    struct lp p;
    vl__lp_scores(&p, &b.a, c->masked, false, c->e, c->e, c->sm, c->tb);
    uint32_t s = tape_new(&b.R.tp, (uint64_t)Q * K * c->e), t[LP_MAX];
    uint32_t w = vl__tr_lp(&b.R, &p, s, c->e, &(struct lp_dims){.rows = Q, .h = K}, false, t);
    const uint32_t held = t[p.held];
    printf("%-40s %u ops, kept %g\n", c->name, p.n - LP_IN, bare_allocated(&b) / (Q * K));
    assert_int_equal(p.n - LP_IN, c->ops);
    assert_int_equal(held, 0);
    assert_true(bare_allocated(&b) == c->kept * Q * K);
    rel(&b.R, w);
    bare_end(&b);
  }
  /* gpt-oss: the sink column joined, the row maxima (value and index) kept
   * to the backward, the joined logits held for the caller (512 rows: the
   * blocks whole multiples of the allocator's 512 bytes) */
  struct bare b;
  bare_begin(&b, "data/models/gpt-oss-20b.json", 2, false, false);
  struct lp p;
  vl__lp_scores(&p, &b.a, true, false, 2, 2, 4, 2);
  uint32_t s = tape_new(&b.R.tp, (uint64_t)512 * 64 * 2), t[LP_MAX];
  vl__tr_lp(&b.R, &p, s, 2, &(struct lp_dims){.rows = 512, .h = 64}, false, t);
  const uint32_t held = t[p.held];
  assert_true(held != 0);
  assert_true((double)b.R.tp.t[held].bytes == 512.0 * 65 * 2);
  assert_true(bare_allocated(&b) == 512.0 * (65 * 2 + 10 + 65 * 4 + 64 * 2));
  bare_end(&b);
}

/* a's memory-bound seconds of job j's step on card g (steptime.c) */
static double memory_s(const struct vl_arch *a, const struct vl_job *j, const struct vl_gpu *g) {
  struct vl_err err = {""};
  struct vl_step_time t;
  assert_int_equal(vl_step_time(a, j, g, &t, &err), VL_OK);
  return t.kind_s[VL_TK_MEMORY];
}

/* the time model moved by got seconds where the programs' priced lines
 * moved by want */
static void moved_as_priced(const char *what, double got, double want) {
  printf("%s %.6g s, priced %.6g s\n", what, got, want);
  assert_true(want > 0 && fabs(got - want) <= 1e-9 * want);
}

/* the time model prices eager attention's scores and rotary from the
 * programs: Gemma 2's soft cap and dropout on the scores, and rotary on
 * half of each head against all of it, move the memory time by the
 * programs' priced lines */
static void time_model_prices_attention(void **state) {
  (void)state;
  struct vl_catalog cat;
  struct vl_time_card card;
  const struct vl_gpu *g = h100(&cat, &card);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_BF16, j.batch = 2, j.seq = 128, j.attention = VL_ATTN_EAGER;
  struct vl_arch a;
  tu_arch("data/models/gemma-2-2b.json", &a);
  a.attn_dropout = 0, a.attn_softcap = 0;
  double got = -memory_s(&a, &j, g);
  struct lp p0, p1;
  vl__lp_scores(&p0, &a, true, false, 2, 2, 4, 2);
  a.attn_dropout = 0.1, a.attn_softcap = 50;
  got += memory_s(&a, &j, g);
  vl__lp_scores(&p1, &a, true, false, 2, 2, 4, 2);
  const double n = (double)(j.batch * a.heads * j.seq * j.seq);
  const double ns[LP_COLS_N] = {[LP_COLS_H] = n};
  moved_as_priced("scores: soft cap and dropout", got,
                  (priced_s(&p1, ns, &card) - priced_s(&p0, ns, &card)) * a.layers);
  /* rotary: its priced lines per element rotated */
  tu_arch("data/models/llama-3-8b.json", &a);
  a.rotary_pct = 1;
  got = memory_s(&a, &j, g);
  a.rotary_pct = 0.5;
  got -= memory_s(&a, &j, g);
  struct lp r;
  vl__lp_rope(&r, 2, 2, false);
  const double rot = (double)(j.batch * j.seq) * (double)(a.heads + a.kv_heads) * a.head_dim / 2;
  moved_as_priced("rotary on half of each head:", got,
                  priced_s(&r, (const double[LP_COLS_N]){[LP_COLS_I] = rot}, &card) * a.layers);
  vl_catalog_release(&cat);
}

/* rotary on a bare tape: what stays is its input and output (the
 * products save nothing the program does not say: cos and sin are the
 * model's); partial rotary's output is the whole, in the wider dtype */
static void rope_program(void **state) {
  (void)state;
  for (int part = 0; part <= 1; part++) {
    struct bare b;
    bare_begin(&b, "data/models/pythia-160m.json", 2, true, false);
    const uint64_t n = 4096, nr = part ? 1024 : n;
    struct lp p;
    vl__lp_rope(&p, 2, 4, part);
    uint32_t x = tape_new(&b.R.tp, n * 2);
    uint32_t y =
        vl__tr_lp(&b.R, &p, x, 2, &(struct lp_dims){.rows = 1, .I = nr, .h = n}, false, NULL);
    printf("rotary%s: %u ops\n", part ? " on a part" : "", p.n - LP_IN);
    assert_int_equal(p.n - LP_IN, part ? 10 : 7);
    assert_true((double)b.R.tp.t[y].bytes == n * 4.0);
    assert_true(bare_allocated(&b) == n * 2.0 + n * 4.0);
    bare_end(&b);
  }
}

/* ModernBERT's rotary: q.float() made twice, each let go of once used;
 * what stays is the input and the fp32 output; in fp32 q.float() is q
 * itself (no block) */
static void rope_upcast_program(void **state) {
  (void)state;
  for (unsigned e = 2; e <= 4; e += 2) {
    struct bare b;
    bare_begin(&b, "data/models/modernbert-base.json", e, false, false);
    const uint64_t n = 4096;
    struct lp p;
    vl__lp_rope_upcast(&p, e);
    assert_int_equal(p.n - LP_IN, 9);
    assert_int_equal(p.op[LP_IN + 1].kind, e < 4 ? LP_CAST : LP_REF);
    uint32_t x = tape_new(&b.R.tp, n * e);
    uint32_t y =
        vl__tr_lp(&b.R, &p, x, e, &(struct lp_dims){.rows = 1, .I = n, .h = n}, false, NULL);
    assert_true((double)b.R.tp.t[y].bytes == n * 4.0);
    assert_true(bare_allocated(&b) == n * (double)e + n * 4.0);
    bare_end(&b);
  }
}

/* q, k and v: the fused projection's views and its output held for the
 * caller; three linears (OPT's q scaled, cross-attention's k and v of the
 * second input on the keys' rows); eager's head views; the time model's
 * count of the input's casts */
static void qkv_program(void **state) {
  (void)state;
  struct {
    const char *config;
    bool cross, split;
    unsigned ops, input_linears;
    bool held;
  } qkv_kinds[] = {
      {"data/models/gpt2.json", false, true, 4, 1, true},
      {"data/models/llama-3-8b.json", false, false, 3, 3, false},
      {"data/models/llama-3-8b.json", false, true, 6, 3, false},
      {"data/models/opt-125m.json", false, false, 4, 3, false},
      {"data/models/bart-base.json", true, true, 7, 1, false},
  };
  for (size_t k = 0; k < sizeof qkv_kinds / sizeof qkv_kinds[0]; k++) {
    struct bare b;
    bare_begin(&b, qkv_kinds[k].config, E, false, false);
    b.a.qkv_bias = 0;
    struct lp p;
    vl__lp_qkv(&p, &b.a, E, qkv_kinds[k].cross, qkv_kinds[k].split, false);
    printf("%-28s cross %d split %d: %u ops\n", qkv_kinds[k].config, qkv_kinds[k].cross,
           qkv_kinds[k].split, p.n - LP_IN);
    assert_int_equal(p.n - LP_IN, qkv_kinds[k].ops);
    assert_int_equal(vl__lp_input_linears(&p), qkv_kinds[k].input_linears);
    assert_int_equal(p.held != 0, qkv_kinds[k].held);
    const uint64_t T = 256, Tk = qkv_kinds[k].cross ? 512 : T, a = 8, g = 2, dh = 64;
    b.R.kv_src = qkv_kinds[k].cross ? tape_new(&b.R.tp, Tk * H * E) : 0, b.R.kv_srcb = E;
    uint32_t x = tape_new(&b.R.tp, T * H * E), t[LP_MAX];
    const struct lp_dims d = {.rows = T, .rows_k = Tk, .I = a * dh, .J = g * dh, .h = H};
    vl__tr_lp(&b.R, &p, x, E, &d, false, t);
    assert_true((double)b.R.tp.t[t[p.out[0]]].bytes == (double)T * a * dh * E);
    assert_true((double)b.R.tp.t[t[p.out[1]]].bytes == (double)Tk * g * dh * E);
    assert_true((double)b.R.tp.t[t[p.out[2]]].bytes == (double)Tk * g * dh * E);
    if (p.held) assert_true((double)b.R.tp.t[t[p.held]].bytes == (double)T * (a + 2 * g) * dh * E);
    bare_end(&b);
  }
}

/* the head's program: its lines (the linear; Gemma 2's soft cap; the
 * loss: the upcast where the replay makes it, log_softmax, an encoder's
 * fp32 copy for nll_loss under autocast, nll_loss; the backward's priced
 * lines), the tensors the replay makes of the loss, and what its forward
 * keeps beside the logits (log_softmax's output, the copy, tanh's output),
 * all let go of by the loss's backward, which leaves the logits' gradient */
struct head_kind {
  const char *name, *config;
  unsigned e;
  bool autocast;
  unsigned ops, loss_made;
  double kept, node; /* bytes an element of rows x V: the loss's, the tape's nodes' */
};
static const struct head_kind heads[] = {
    {"Llama bf16: the upcast", "data/models/llama-3-8b.json", 2, false, 8, 3, 4, 0},
    {"Llama fp32: no cast", "data/models/llama-3-8b.json", 4, false, 6, 2, 4, 0},
    {"Gemma 2 bf16: soft cap", "data/models/gemma-2-2b.json", 2, false, 11, 3, 4, 2},
    {"BERT bf16: log_softmax in bf16", "data/models/bert-base-uncased.json", 2, false, 8, 2, 2, 0},
    {"BERT autocast: nll_loss's copy", "data/models/bert-base-uncased.json", 2, true, 9, 3, 2 + 4,
     0},
};

static void head_program(void **state) {
  (void)state;
  enum { V = 4096 };
  for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) {
    const struct head_kind *c = &heads[k];
    struct bare b;
    bare_begin(&b, c->config, c->e, c->autocast, false);
    struct lp p;
    vl__lp_head(&p, &b.a, c->autocast, c->e, c->e);
    unsigned made = 0;
    for (unsigned i = LP_FIRST; i <= p.n; i++)
      made += p.op[i].kind == LP_LOSS && !p.op[i].bwd_only && !p.op[i].unmade;
    assert_int_equal(p.n - LP_IN, c->ops);
    assert_int_equal(made, c->loss_made);
    assert_int_equal(count(&p, LP_LINEAR), 1);
    uint32_t x = tape_new(&b.R.tp, ROWS * H * c->e), w = tape_leaf(&b.R.tp, (uint64_t)V * H * c->e);
    const double before = bare_allocated(&b);
    uint32_t t[LP_MAX];
    const struct lp_dims d = {.rows = ROWS, .h = H, .V = V, .w = w};
    vl__tr_lp(&b.R, &p, x, c->e, &d, false, t);
    /* (autocast: the weight's half copy the linear keeps) */
    const double copy = c->autocast ? (double)V * H * 2 : 0, logits = (double)ROWS * V * c->e;
    const double kept = bare_allocated(&b) - before - copy - logits - c->node * ROWS * V;
    printf("%-34s %2u ops, kept %g\n", c->name, p.n - LP_IN, kept / (ROWS * V));
    assert_true(kept == c->kept * ROWS * V);
    /* the backward: the logits' gradient alone stays */
    uint32_t gl = vl__tr_lp_loss_backward(&b.R, &p, t);
    assert_true(b.R.tp.t[gl].bytes == logits);
    assert_true(bare_allocated(&b) - before - copy - logits - c->node * ROWS * V == logits);
    bare_end(&b);
  }
}

/* the time model's loss is the head program's priced lines on the
 * logits: forward and backward, each line once where it is priced in one
 * of them (the cast's backward, nll_loss's and log_softmax's are lines of
 * their own) */
static void time_model_prices_the_head(void **state) {
  (void)state;
  struct vl_catalog cat;
  struct vl_time_card card;
  const struct vl_gpu *g = h100(&cat, &card);
  const char *configs[] = {"data/models/llama-3-8b.json", "data/models/gemma-2-2b.json",
                           "data/models/granite-3.0-2b.json", "data/models/bert-base-uncased.json"};
  for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
    for (int prec = VL_PREC_FP32; prec <= VL_PREC_BF16; prec += VL_PREC_BF16) {
      struct vl_arch a;
      tu_arch(configs[k], &a);
      struct vl_job j;
      vl_job_init(&j);
      j.precision = (enum vl_precision)prec, j.batch = 2, j.seq = 128;
      struct vl_step_time t;
      struct vl_err err = {""};
      assert_int_equal(vl_step_time(&a, &j, g, &t, &err), VL_OK);
      struct lp p;
      const unsigned e = prec == VL_PREC_FP32 ? 4 : 2;
      vl__lp_head(&p, &a, false, e, e);
      const double T = (double)(j.batch * j.seq);
      const double n[LP_COLS_N] = {[LP_COLS_V] = T * (double)a.vocab, [LP_COLS_ROW] = T};
      const double want = priced_s(&p, n, &card), got = t.kind_s[VL_TK_LOSS];
      printf("%-36s %d: loss %.6g s, priced %.6g s\n", configs[k], prec, got, want);
      assert_true(want > 0 && fabs(got - want) <= 1e-9 * want);
    }
  }
  vl_catalog_release(&cat);
}

/* the embeddings' program: its lines (the words' lookup and Python's name
 * for it; an encoder's lookups, sums and LayerNorm; GPT-2's sum the
 * replay does not make; dropout; Gemma's scaling; the backward's priced
 * lines where the table trains) and what the replay keeps once they
 * return: the output, dropout's mask, the norm's saved input (the output
 * alone where LoRA freezes the table) */
struct embed_kind {
  const char *name, *config;
  unsigned ops;
  double kept; /* bytes an element of rows x h */
};
static const struct embed_kind embeds[] = {
    {"Llama: the lookup", "data/models/llama-3-8b.json", 4, 2},
    {"Gemma: scaled", "data/models/gemma-2b.json", 5, 2},
    {"GPT-2: positions, dropout", "data/models/gpt2.json", 6, 2 + 1},
    {"BERT: token types, positions, LayerNorm", "data/models/bert-base-uncased.json", 10,
     2 + 2 + 1},
};

static void embed_program(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof embeds / sizeof embeds[0]; k++) {
    const struct embed_kind *c = &embeds[k];
    for (int lora = 0; lora < 2; lora++) {
      struct bare b;
      bare_begin(&b, c->config, E, false, lora);
      struct lp p;
      vl__lp_embed(&p, &b.a, false, E, E, E, !lora, false);
      assert_int_equal(p.n - LP_IN, c->ops - (lora ? 2 : 0));
      assert_int_equal(p.op[LP_FIRST].kind, LP_GATHER);
      uint32_t t[LP_MAX];
      const struct lp_dims d = {.rows = ROWS, .rows_k = ROWS / 2, .I = H, .h = H};
      vl__tr_lp(&b.R, &p, 0, 0, &d, false, t);
      const double kept = bare_allocated(&b);
      printf("%-40s %2u ops, kept %g\n", c->name, p.n - LP_IN, kept / (ROWS * H));
      /* (under LoRA the lookup needs no gradient: no node keeps anything) */
      assert_true(kept == (lora ? E : c->kept) * ROWS * H);
      assert_true(b.R.tp.t[t[p.out[0]]].bytes == (double)ROWS * H * E);
      bare_end(&b);
    }
  }
}

/* the time model's embeddings are the program's priced lines: dropout and
 * the scaling move the memory time by theirs */
static void time_model_prices_the_embeddings(void **state) {
  (void)state;
  struct vl_catalog cat;
  struct vl_time_card card;
  const struct vl_gpu *g = h100(&cat, &card);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_BF16, j.batch = 2, j.seq = 128;
  struct vl_arch a;
  tu_arch("data/models/llama-3-8b.json", &a);
  double got = -memory_s(&a, &j, g);
  struct lp p0, p1;
  vl__lp_embed(&p0, &a, false, 2, 2, 2, true, false);
  a.embed_dropout = 0.1, a.embed_scaled = 1;
  got += memory_s(&a, &j, g);
  vl__lp_embed(&p1, &a, false, 2, 2, 2, true, false);
  const double T = (double)(j.batch * j.seq), h = (double)a.hidden;
  const double n[LP_COLS_N] = {[LP_COLS_H] = T * h, [LP_COLS_V] = (double)a.vocab * h};
  moved_as_priced("embeddings: dropout and scaling", got,
                  priced_s(&p1, n, &card) - priced_s(&p0, n, &card));
  vl_catalog_release(&cat);
}

/* generate()'s replay runs the same programs under no_grad
 * (infer_lp.c): nothing saved, so once a part has run only its input and
 * its output stay, and its peak is the most its live names hold at once
 * (in rows x the columns of E bytes beside the input: SwiGLU's act(gate),
 * up and their product; GPT-2's chain fc, 0.5*x, its last two steps'
 * and the result; Llama's RMSNorm two fp32 copies, then its product's
 * fp32 input, the cast and the output) */
static void inference_runs_the_program(void **state) {
  (void)state;
  static const struct {
    const char *config;
    int part;    /* 0: the MLP, 1: the norm, 2: rotary */
    double peak; /* rows x I (a norm's: rows x h) elements of E bytes */
  } cases[] = {{"data/models/llama-3-8b.json", 0, 3},
               {"data/models/gpt2.json", 0, 4},
               {"data/models/opt-125m.json", 0, 2},
               {"data/models/llama-3-8b.json", 1, 4},
               {"data/models/llama-3-8b.json", 2, 3}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    struct vl_arch a;
    tu_arch(cases[k].config, &a);
    a.layer_inline = 0;
    struct lp p;
    if (cases[k].part == 1)
      vl__lp_norm(&p, &a, false, E, E);
    else if (cases[k].part == 2)
      vl__lp_rope(&p, E, E, false);
    else
      vl__lp_mlp(&p, &a, false, E, false);
    struct prog pr = {NULL, false};
    struct vl_cache_conf conf = {0};
    assert_int_equal(vl_cache_new(&conf, &pr.c), VL_OK);
    const uint64_t in = (uint64_t)ROWS * H * E;
    uint32_t x = A(&pr, in);
    const struct lp_dims d = {.rows = ROWS, .I = I, .h = H};
    uint32_t y = vl__inf_lp(&pr, &p, &x, &d, NULL);
    struct vl_cache_stats st;
    vl_cache_stats(pr.c, &st);
    const double w = cases[k].part == 1 ? H : I;
    printf("%-32s part %d peak %g\n", cases[k].config, cases[k].part,
           (double)(st.peak_allocated - in) / (ROWS * w * E));
    assert_true(x != NONE && y != NONE);
    assert_true((double)st.allocated == in + tensor_bytes(&p, p.n)); /* the input, the output */
    assert_true((double)(st.peak_allocated - in) == cases[k].peak * ROWS * w * E);
    vl_cache_destroy(pr.c);
  }
  /* a fused q, k, v projection: q, k and v its views (no block of their
   * own), the projection the block the caller holds */
  struct vl_arch a;
  tu_arch("data/models/phi-3-mini.json", &a);
  struct lp p;
  vl__lp_qkv(&p, &a, E, false, false, false);
  struct prog pr = {NULL, false};
  struct vl_cache_conf conf = {0};
  assert_int_equal(vl_cache_new(&conf, &pr.c), VL_OK);
  uint32_t x = NONE, t[LP_MAX];
  const struct lp_dims d = {.rows = ROWS, .rows_k = ROWS, .I = I, .J = I / 4, .h = H};
  vl__inf_lp(&pr, &p, &x, &d, t);
  struct vl_cache_stats st;
  vl_cache_stats(pr.c, &st);
  for (int i = 0; i < 3; i++)
    assert_true(t[p.out[i]] == NONE);
  assert_true(p.held && t[p.held] != NONE);
  assert_true((double)st.allocated == (double)ROWS * (I + 2 * (I / 4)) * E);
  vl_cache_destroy(pr.c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_kind),
      cmocka_unit_test(dropout_on_the_activation),
      cmocka_unit_test(replay_issues_the_program),
      cmocka_unit_test(time_model_prices_the_program),
      cmocka_unit_test(each_norm),
      cmocka_unit_test(time_model_prices_the_norm),
      cmocka_unit_test(scores_program),
      cmocka_unit_test(qkv_program),
      cmocka_unit_test(rope_program),
      cmocka_unit_test(rope_upcast_program),
      cmocka_unit_test(time_model_prices_attention),
      cmocka_unit_test(head_program),
      cmocka_unit_test(time_model_prices_the_head),
      cmocka_unit_test(embed_program),
      cmocka_unit_test(time_model_prices_the_embeddings),
      cmocka_unit_test(inference_runs_the_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
