/* Layer programs: a part of a layer written once, as the ops of its
 * forward in the order PyTorch runs them, one line each (llm.c's act_sizes,
 * the shape in the comment): what each op reads, the shape and dtype of
 * what it makes, what its backward keeps, when Python lets go of each
 * tensor, its FLOPs and the bytes it moves. The consumers walk the same
 * lines: the training replay issues them as tape ops (train_replay_lp.c
 * vl__tr_lp), the time model prices them (steptime.c lp_kernels). A new part
 * is a new emitter beside vl__lp_mlp, vl__lp_norm and lp_attention.c's;
 * docs/architecture.md, "Layer programs".
 *
 * A program is built per call into caller storage (no allocation: the time
 * model builds one per configuration), from the architecture's flags and
 * the dtypes; its shapes are symbolic, rows x cols (enum lp_cols): I the
 * MLP's width, the rotated elements, attention's query heads' width; J
 * the key/value heads'; h the hidden size, a norm's normalised width, the
 * scores' keys; 1 a row's statistic; with rows and the columns the
 * consumer's (struct lp_dims). Index LP_IN is the part's input; op i makes
 * tensor i; 0 is "none" in in[], saved[] and drop[]. */
#ifndef VRAMLEDGER_MODEL_LP_H
#define VRAMLEDGER_MODEL_LP_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/arch.h"

#define LP_MAX 32 /* 0 (none), the input and the ops (the longest MLP: 14; the scores: 11) */
#define LP_IN 1   /* the part's input */
#define LP_FIRST 2

enum lp_kind {
  LP_INPUT,   /* the part's input (index LP_IN); as a line: its second input
               * (struct lp_dims in2: the encoder's output cross-attention
               * reads, T5's position bias the scores add) */
  LP_LINEAR,  /* x @ W^T (+ b), a parameter of its own (the layer's next
               * linear, LoRA's adapter on it); its GEMMs: the time model's
               * linears(), from the parameter inventory */
  LP_VIEW,    /* a view of in[0] (chunk): no kernel, no storage */
  LP_REF,     /* in[0] itself under another name (a cast to its own dtype) */
  LP_EW,      /* an elementwise kernel: activation, product, sum, scalar op */
  LP_CAST,    /* a dtype conversion kernel */
  LP_DROPOUT, /* native_dropout: the output and a byte mask its backward keeps;
               * takes in[0] over (nothing to drop) */
  LP_GATHER,  /* an embedding lookup (F.embedding), a new tensor: the words'
               * (wsave) requires grad where the table trains or the inputs
               * do, or is a node of the caller's table (struct lp_dims w:
               * an encoder-decoder's decoder's); the others' gradients need
               * only the indices (none) */
  LP_LOSS,    /* a tensor of the loss (cross_entropy's casts, log_softmax,
               * nll_loss), which the replay keeps off autograd's tape: made
               * in the forward (no gradient flows through the tape), each
               * line's input's gradient made walking the lines back
               * (vl__tr_lp_loss_backward); nll_loss's scalar: ob 0, none */
};

/* an output's columns, rows being the consumer's */
enum lp_cols {
  LP_COLS_I,
  LP_COLS_2I,
  LP_COLS_H,
  LP_COLS_ROW, /* 1 */
  LP_COLS_H1,  /* h + 1 */
  LP_COLS_I2,  /* I / 2 */
  LP_COLS_HMI, /* h - I */
  LP_COLS_J,   /* attention: the keys' and values' heads x head size */
  LP_COLS_IJJ, /* I + 2 J: a fused q, k, v projection */
  LP_COLS_V,   /* the head's outputs: the vocabulary (a classifier's labels);
                * the embeddings' backward: the table's elements, V x h */
  LP_COLS_N
};

/* how the time model prices an op's kernel (steptime.c's mem classes) */
enum lp_price {
  LP_UNPRICED,
  LP_PRICE_EW,
  LP_PRICE_CAST,
  LP_PRICE_NORM,
  LP_PRICE_SOFTMAX,
  LP_PRICE_BCAST,   /* a product by a broadcast operand (a row's statistic, the weight, cos/sin) */
  LP_PRICE_STRIDED, /* on a strided half of the rows (rotate_half's neg and cat) */
  LP_PRICE_LOGSOFTMAX, /* the loss's log_softmax, forward; its backward: _BWD */
  LP_PRICE_LOGSOFTMAX_BWD
};

struct lp_op {
  uint8_t kind;     /* enum lp_kind */
  uint8_t in[2];    /* what it reads (tensor indices) */
  uint8_t cols, ob; /* its output: rows x cols, ob bytes an element */
  uint8_t in_cols;  /* LP_LINEAR: in_features (enum lp_cols) */
  uint8_t saved[2]; /* what its backward keeps, in autograd's order */
  uint8_t drop[3];  /* Python lets go of these after it, in order */
  uint8_t pass;     /* its gradient passes through (tape.h TAPE_ADD) */
  uint8_t price;    /* enum lp_price; a linear: its input's cast (autocast) */
  bool slice;       /* LP_VIEW: a slice (x[..., a:b]) or a transpose that a
                     * reshape copies, whose backward allocates a gradient
                     * of in[0]'s size (tape.h tape_slice) */
  bool piece;       /* LP_VIEW: a piece of a split or chunk, whose gradients
                     * SplitBackward joins (tape.h tape_piece); neither: a
                     * view whose gradient is copied into one of in[0]'s
                     * size as it arrives (tape_view) */
  bool save_out;    /* its backward keeps its own output (tanh, sigmoid, relu) */
  bool bias;        /* LP_LINEAR: with a bias */
  bool stop;        /* a checkpoint's recomputation ends before it */
  bool wsave;       /* what it saves is for a weight's gradient: nothing where
                     * the weight is frozen (LoRA) */
  uint8_t tmpb;     /* its backward's temporary: bytes an element of its output */
  bool tmp_first;   /* its backward makes the temporary before the gradients
                     * and frees it after them (tape.h) */
  uint8_t wideb;    /* in[0]'s gradient made first in wideb bytes an element of
                     * the output, then cast (tape.h wide_in; 0: none) */
  bool wsum;        /* the weight's gradient is that temporary summed over the
                     * rows: a CUDA reduction whose partials the replay makes
                     * while the temporary is held (cuda_reduce.c) */
  uint8_t maskb;    /* LP_DROPOUT: its mask's bytes an element of rows x pcols */
  uint8_t pcols;    /* the elements its price counts: rows x pcols (enum lp_cols) */
  uint8_t times;    /* kernels the time model prices on this line (0: one) */
  bool fwd_only;    /* priced in the forward alone */
  bool bwd_only;    /* priced in the backward alone, at its bytes (once): a kernel
                     * of the backward the forward has not; the replay makes no
                     * tensor of it */
  bool unmade;      /* priced, but the replay makes no tensor of it (where the
                     * consumers disagree: the line says why) */
  bool krows;       /* its rows are the keys' (cross-attention's k and v) */
  bool late;        /* the time model prices it (a run of alike lines: the run)
                     * after the line that follows */
  double bytes;     /* read + written, an element of rows x pcols, as the time
                     * model prices it (0: not priced there) */
};

struct lp {
  struct lp_op op[LP_MAX];
  uint8_t n;      /* the last op's index (ops: LP_FIRST..n) */
  uint8_t e;      /* the activations' bytes an element */
  uint8_t held;   /* a tensor the part's caller lets go of later (0: none) */
  uint8_t out[3]; /* tensors the caller takes beside the last (attention's q, k, v) */
  bool autocast;
};

/* the dense MLP of arch (plain, gated, GPT-2's Python GELU, gpt-oss's
 * clamped GLU for an expert) into *p; moe: a routed expert of
 * transformers 5 (one 3-D gate_up_proj); e: the activations' bytes an
 * element; autocast: under torch.autocast */
void vl__lp_mlp(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned e, bool moe);

/* the norm of arch over the last dimension of rows x h (LayerNorm,
 * RMSNorm: Llama's fp32 upcast, Gemma's (1 + w) in fp32, T5's product
 * of the half input) into *p; xb: its input's bytes an element, wb: the
 * weight's; its output's: p->op[p->n].ob */
void vl__lp_norm(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned xb, unsigned wb);
/* the same appended to p, over its tensor x (not let go of); its output */
uint8_t vl__lp_norm_of(struct lp *p, const struct vl_arch *arch, uint8_t x, unsigned xb,
                       unsigned wb);

/* eager attention's scaled scores (rows x h: rows = batch x heads x
 * queries, h = keys; e bytes an element) to the weights it returns:
 * soft cap, mask (masked: the sum in me bytes, T5's position bias its second
 * input; masked2: T5's decoder's causal mask after it), sink logits, softmax in
 * sm bytes, the cast to tb, dropout; p->held: gpt-oss's joined logits */
void vl__lp_scores(struct lp *p, const struct vl_arch *arch, bool masked, bool masked2, unsigned e,
                   unsigned me, unsigned sm, unsigned tb);

/* q, k and v of the part's input (rows x h), e bytes an element: the
 * fused projection's views (held: the fused output, a local until the
 * attention returns) or three linears (cross: k and v of the second
 * input, the keys' rows), q scaled (OPT), split: each made a
 * view as eager attention's matmul sees it (NeoX's fused projection is
 * first viewed heads first, a slice whose joined gradient a reshape
 * copies back to rows); transposed: q and k each
 * x.view(B, s, heads, d).transpose(1, 2) as rotary gets them, a slice
 * whose gradient (rotary's slices' zero tensors, heads first) a reshape
 * copies back to the projection's rows; p->out: q, k, v. Not
 * DeepSeek-V2's latent attention (the replay's mla_qkv) */
void vl__lp_qkv(struct lp *p, const struct vl_arch *arch, unsigned e, bool cross, bool split,
                bool transposed);

/* rotary (q * cos + rotate_half(q) * sin) on x, h elements of e bytes:
 * on all of them, or (part) on its first I, the rest concatenated back;
 * the products in w bytes (the wider of x's and the residual's dtype) */
void vl__lp_rope(struct lp *p, unsigned e, unsigned w, bool part);

/* ModernBERT's rotary: on x.float() (I elements of e bytes), two copies
 * of it made; its output in fp32. Not priced by the time model yet
 * (steptime.c prices vl__lp_rope's lines) */
void vl__lp_rope_upcast(struct lp *p, unsigned e);

/* the embeddings of arch (lp_embed.c): the words' lookup (rows x I, I the
 * table's width; r bytes an element, the residual stream's), an encoder's
 * lookups and sums and its norm (wb: its weight's bytes), dropout (its mask
 * a byte an element), the scaling; where the table trains, the
 * time model's lines for its backward (gb: the gradient's bytes; LP_COLS_V:
 * the table's elements). p->out[0]: the output, [1]: the words' lookup, let
 * go of at the embeddings' return unless held (an encoder-decoder's
 * decoder's, to its backward) */
void vl__lp_embed(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned r, unsigned wb,
                  unsigned gb, bool trained, bool held);

/* the head of arch (lp_head.c) from its input (xb bytes an element: the
 * final norm's output; a vision model's: its first row a sample, h its
 * width), the logits rows x V in e bytes an element: the linear (its
 * weight the caller's, struct lp_dims w), Gemma 2's final soft cap,
 * Granite's scaling, BART's final_logits_bias, then the loss
 * (cross_entropy: the upcast, log_softmax, nll_loss) and the lines the
 * time model prices for its backward; p->out[0]: the logits */
void vl__lp_head(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned e, unsigned xb);

/* for the emitters: p begun (its input rows x in_cols), an op appended
 * (its index), Python letting go of x after the last op */
static inline void vl__lp_begin(struct lp *p, unsigned e, bool autocast, uint8_t in_cols) {
  p->e = (uint8_t)e, p->autocast = autocast, p->n = LP_IN, p->held = 0;
  p->out[0] = p->out[1] = p->out[2] = 0;
  p->op[0] = (struct lp_op){0};
  p->op[LP_IN] = (struct lp_op){.kind = LP_INPUT, .cols = in_cols, .ob = (uint8_t)e};
}
static inline uint8_t vl__lp_emit(struct lp *p, struct lp_op o) {
  p->op[++p->n] = o;
  return p->n;
}
static inline void vl__lp_then_drop(struct lp *p, uint8_t x) {
  uint8_t *d = p->op[p->n].drop;
  for (int i = 0; i < 3; i++)
    if (!d[i]) {
      d[i] = x;
      return;
    }
}

/* a program's sizes: its rows (rows_k: the keys', for lines marked
 * krows) and the columns I, J and h name */
struct lp_dims {
  uint64_t rows, rows_k, I, J, h, V;
  uint32_t in2;  /* the part's second input (its LP_INPUT line; a tape tensor of
                  * the replay's): cross-attention's encoder output, T5's
                  * position bias */
  uint64_t in2b; /* its bytes an element */
  uint32_t w;    /* the weight of the part's linears where the caller made it (a
                  * tape tensor: the head's, a tied one the embedding's); 0:
                  * each its own (vl__tr_linear: LoRA's adapter on it) */
};

/* the columns c (enum lp_cols) of d */
static inline uint64_t vl__lp_cols(unsigned c, const struct lp_dims *d) {
  const uint64_t I = d->I, h = d->h;
  switch (c) {
  case LP_COLS_2I: return 2 * I;
  case LP_COLS_H: return h;
  case LP_COLS_ROW: return 1;
  case LP_COLS_H1: return h + 1;
  case LP_COLS_I2: return I / 2;
  case LP_COLS_HMI: return h - I;
  case LP_COLS_J: return d->J;
  case LP_COLS_IJJ: return I + 2 * d->J;
  case LP_COLS_V: return d->V;
  default: return I;
  }
}

/* an op's FLOPs on d's sizes: a linear's 2 rows in out, an elementwise
 * op's one an output element, views and references none (lp.c) */
double vl__lp_flops(const struct lp_op *o, const struct lp_dims *d);

/* the linears reading the part's input (autocast casts each one's input) */
unsigned vl__lp_input_linears(const struct lp *p);

#endif
