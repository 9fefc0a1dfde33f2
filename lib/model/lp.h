/* Layer programs: a part of a layer written once, as the ops of its
 * forward in the order PyTorch runs them, one line each (llm.c's act_sizes,
 * the shape in the comment): what each op reads, the shape and dtype of
 * what it makes, what its backward keeps, when Python lets go of each
 * tensor, its FLOPs and the bytes it moves. The consumers walk the same
 * lines: the training replay issues them as tape ops (train_replay_decoder.c
 * vl__tr_mlp), the time model prices them (steptime.c lp_kernels). A new part
 * is a new emitter beside vl__lp_mlp; docs/architecture.md, "Layer
 * programs".
 *
 * A program is built per call into caller storage (no allocation: the time
 * model builds one per configuration), from the architecture's flags and
 * the dtypes; its shapes are symbolic: rows x I (the MLP's width), rows x
 * 2I, rows x h, with rows, I and h the consumer's. Index LP_IN is the part's
 * input; op i makes tensor i; 0 is "none" in in[], saved[] and drop[]. */
#ifndef VRAMLEDGER_MODEL_LP_H
#define VRAMLEDGER_MODEL_LP_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/arch.h"

#define LP_MAX 32 /* 0 (none), the input and the ops (the longest MLP: 14) */
#define LP_IN 1   /* the part's input */
#define LP_FIRST 2

enum lp_kind {
  LP_INPUT,   /* the part's input (index LP_IN) */
  LP_LINEAR,  /* x @ W^T (+ b), a parameter of its own (the layer's next
               * linear, LoRA's adapter on it); its GEMMs: the time model's
               * linears(), from the parameter inventory */
  LP_VIEW,    /* a view of in[0] (chunk): no kernel, no storage */
  LP_REF,     /* in[0] itself under another name (a cast to its own dtype) */
  LP_EW,      /* an elementwise kernel: activation, product, sum, scalar op */
  LP_CAST,    /* a dtype conversion kernel */
  LP_DROPOUT, /* native_dropout: the output and a byte mask its backward keeps;
               * takes in[0] over (nothing to drop) */
};

/* an output's columns, rows being the consumer's */
enum lp_cols { LP_COLS_I, LP_COLS_2I, LP_COLS_H };

/* how the time model prices an op's kernel (steptime.c's mem classes) */
enum lp_price { LP_UNPRICED, LP_PRICE_EW, LP_PRICE_CAST };

struct lp_op {
  uint8_t kind;     /* enum lp_kind */
  uint8_t in[2];    /* what it reads (tensor indices) */
  uint8_t cols, ob; /* its output: rows x cols, ob bytes an element */
  uint8_t in_cols;  /* LP_LINEAR: in_features (enum lp_cols) */
  uint8_t saved[2]; /* what its backward keeps, in autograd's order */
  uint8_t drop[3];  /* Python lets go of these after it, in order */
  uint8_t pass;     /* its gradient passes through (tape.h TAPE_ADD) */
  uint8_t price;    /* enum lp_price; a linear: its input's cast (autocast) */
  bool save_out;    /* its backward keeps its own output (tanh, sigmoid, relu) */
  bool bias;        /* LP_LINEAR: with a bias */
  bool stop;        /* a checkpoint's recomputation ends before it */
  double bytes;     /* read + written, an element of rows x I, as the time model
                     * prices it (0: not priced there) */
};

struct lp {
  struct lp_op op[LP_MAX];
  uint8_t n; /* the last op's index (ops: LP_FIRST..n) */
  uint8_t e; /* the activations' bytes an element */
  bool autocast;
};

/* the dense MLP of arch (plain, gated, GPT-2's Python GELU, gpt-oss's
 * clamped GLU for an expert) into *p; moe: a routed expert of
 * transformers 5 (one 3-D gate_up_proj); e: the activations' bytes an
 * element; autocast: under torch.autocast */
void vl__lp_mlp(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned e, bool moe);

/* the columns c (enum lp_cols) for a width I and hidden size h */
static inline uint64_t vl__lp_cols(unsigned c, uint64_t I, uint64_t h) {
  return c == LP_COLS_H ? h : c == LP_COLS_2I ? 2 * I : I;
}

/* an op's FLOPs on `rows` rows: a linear's 2 rows in out, an elementwise
 * op's one an output element, views and references none */
double vl__lp_flops(const struct lp_op *o, double rows, double I, double h);

/* the linears reading the part's input (autocast casts each one's input) */
unsigned vl__lp_input_linears(const struct lp *p);

#endif
