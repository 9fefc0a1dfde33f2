/* Layer programs (lib/model/lp.h, lp_mlp.c): each dense MLP kind's ops,
 * what they save and their FLOPs; the training replay issuing exactly the
 * program's ops and keeping exactly what it says is saved; the time model
 * pricing exactly the program's priced bytes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "model/kernel_tables.h"
#include "model/lp.h"
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
      assert_true(vl__lp_flops(o, ROWS, I, H) == want);
      in_out += cols(o->in_cols) * cols(o->cols);
      /* its input is the part's, or an op's before it */
      assert_true(o->in[0] == LP_IN || o->in[0] < i);
    }
    /* the MLP's weights: h x I each (gate_up: two of them) */
    assert_true(in_out == (a.gated_mlp || c->moe ? 3.0 : 2.0) * H * I);
    /* every tensor made is let go of once, but the output */
    unsigned drops[LP_MAX] = {0};
    for (unsigned i = LP_FIRST; i <= p.n; i++)
      for (int d = 0; d < 3 && p.op[i].drop[d]; d++) {
        assert_true(p.op[i].drop[d] >= LP_FIRST && p.op[i].drop[d] < i);
        drops[p.op[i].drop[d]]++;
      }
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
      kernels +=
          o->kind == LP_LINEAR || o->kind == LP_EW || o->kind == LP_CAST || o->kind == LP_DROPOUT;
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

/* the time model's MLP kernels are the program's priced lines: widening
 * the MLP adds, per layer, its priced bytes over the card's bandwidth for
 * each class, once forward and twice backward (its GEMMs are matmul time,
 * apart) */
static void time_model_prices_the_program(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  const struct vl_gpu *g = vl_catalog_find(&cat, "h100-80gb");
  struct vl_time_card card;
  vl_time_card_init(&card, g, false);
  const struct vl_kt_card *kt = card.tables;
  const double bw[] = {[LP_PRICE_EW] = kt->bw_add, [LP_PRICE_CAST] = kt->bw_cast};
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
        if (p.op[i].price) per_el += p.op[i].bytes / bw[p.op[i].price];
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_kind),
      cmocka_unit_test(dropout_on_the_activation),
      cmocka_unit_test(replay_issues_the_program),
      cmocka_unit_test(time_model_prices_the_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
