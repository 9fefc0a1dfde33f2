/* The modules of the training replay that every family uses
 * (train_replay.h): a linear under autocast and PEFT's LoRA on it,
 * dropout (the norms: lp_norm.c's program, run by train_replay_lp.c). */
#include "train_replay.h"

/* x (rows x in_f, xb bytes an element) through a linear of in_f -> out_f
 * whose weight is the parameter w: under autocast the weight's half copy
 * (a node: its backward copies the gradient to the fp32 parameter's;
 * cached for a trained leaf, made anew at each call for a frozen one:
 * autocast_mode.cpp caches leaves that require grad), then the input's
 * cast (each linear casts its own: not cached; its gradient, a fresh
 * copy, takes the other casts' in place: tape.h). The input is saved for
 * the weight's gradient, so only where the weight is trained; the weight
 * (its half copy) for the input's. The output has the weight's dtype
 * (autocast's without it). A trained bias's gradient is the output
 * gradient summed over the rows, a CUDA reduction whose scratch is the
 * backward's temporary (cuda_reduce.c). */
uint32_t vl__tr_linear_w(struct run *R, uint32_t w, uint32_t x, uint64_t xb, uint64_t rows,
                         uint64_t in_f, uint64_t out_f, bool bias) {
  const bool trained = R->tp.t[w].rg;
  uint64_t e = R->tp.t[w].bytes / (in_f * out_f); /* the weight's dtype */
  uint32_t cast = 0, in = x, wc = 0;
  if (R->z->autocast) {
    e = R->z->e;
    wc = op(R, (struct tape_op){.out_bytes = in_f * out_f * 2, .in = {w}});
    if (trained) vl__tr_push(&R->p, &R->cached, wc);
    w = wc;
    if (xb != e)
      in = cast = op(R, (struct tape_op){.out_bytes = rows * in_f * e, .in = {x}, .cast = true});
  }
  /* a checkpoint's recomputation ends as the matmul saves its inputs
   * (autograd packs them before the kernel runs: the casts above are
   * made, the output is not) */
  if (R->stop_at_mm) R->stop_at_mm = false, R->tp.no_alloc = true;
  /* mm's derivative makes the weight's gradient first, addmm's the input's */
  const uint64_t scratch =
      bias && trained ? vl__column_sum_scratch(rows, out_f, e, 4, R->z->sms, R->z->tps) : 0;
  uint32_t y = op(R, (struct tape_op){.out_bytes = rows * out_f * e,
                                      .in = {bias ? in : w, bias ? w : in},
                                      .saved = {trained ? in : 0, R->z->autocast ? w : 0},
                                      .tmp = scratch,
                                      .mm = true});
  rel(R, cast);
  if (!trained) rel(R, wc);
  return y;
}

/* PEFT's LoRA on a frozen linear's output y (rows x out_f) of x (rows x
 * in_f, xb bytes): x cast to the adapters' dtype (fp32), lora_B(lora_A(x))
 * * scaling added to y, the sum cast back to y's dtype (peft 0.21
 * tuners/lora/layer.py Linear.forward:
 * bench/results/replay-histories/raw.jsonl:lora-histories/peft-sources.txt;
 * lora_dropout 0) */
static uint32_t lora(struct run *R, uint32_t y, uint32_t x, uint64_t xb, uint64_t rows,
                     uint64_t in_f, uint64_t out_f) {
  const uint64_t ab = R->z->ab, r = R->z->lora_rank;
  const uint64_t yb = R->tp.t[y].bytes / (rows * out_f);
  uint32_t xa = xb != ab ? op(R, (struct tape_op){.out_bytes = rows * in_f * ab, .in = {x}})
                         : tape_ref(&R->tp, x);
  const bool stop = R->stop_at_mm; /* at lora_B's, the layer's last saved tensors */
  R->stop_at_mm = false;
  uint32_t la = vl__tr_linear_w(R, tape_leaf(&R->tp, r * in_f * ab), xa, ab, rows, in_f, r, false);
  const uint64_t lb = R->tp.t[la].bytes / (rows * r);
  R->stop_at_mm = stop;
  uint32_t b = vl__tr_linear_w(R, tape_leaf(&R->tp, out_f * r * ab), la, lb, rows, r, out_f, false);
  rel(R, la);
  uint32_t sc = op(R, (struct tape_op){.out_bytes = R->tp.t[b].bytes, .in = {b}}); /* * scaling */
  rel(R, b);
  const uint64_t sb = vl__max(yb, R->tp.t[sc].bytes / (rows * out_f)); /* type promotion */
  uint32_t sum = join(R, rows * out_f * sb, y, sc, TAPE_ADD);
  uint32_t out = sum;
  if (sb != yb) {
    out = op(R, (struct tape_op){.out_bytes = rows * out_f * yb, .in = {sum}});
    rel(R, sum);
  }
  rel(R, xa); /* forward's local x, the cast input: held to its return */
  return out;
}

/* the same with a parameter of its own: a layer's next linear (frozen
 * under LoRA, with its adapter where it is a target) */
uint32_t vl__tr_linear(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t in_f,
                       uint64_t out_f, bool bias) {
  const unsigned k = R->lin++;
  return vl__tr_linear_k(R, base_param(R, in_f * out_f * R->z->wb), k, x, xb, rows, in_f, out_f,
                         bias);
}

/* a layer's k-th linear, its weight w, on x: its adapter where it is a
 * target (a module run on a second input: DeBERTa's query_proj and
 * key_proj on the relative embeddings, whose PEFT adapter runs there too) */
uint32_t vl__tr_linear_k(struct run *R, uint32_t w, unsigned k, uint32_t x, uint64_t xb,
                         uint64_t rows, uint64_t in_f, uint64_t out_f, bool bias) {
  const struct vl__train_sizes *z = R->z;
  const bool adapted = k < z->n_lin && z->lin[k].adapted;
  /* a checkpoint's recomputation that ends in this linear ends as its
   * last matmul saves its inputs: the base's, or its adapter's lora_B
   * (torch/utils/checkpoint.py: non-reentrant checkpoint's early stop
   * raises once the recomputation has packed as many tensors as the
   * forward did) */
  R->stop_at_mm = R->stop_in_linear && !adapted;
  uint32_t y = vl__tr_linear_w(R, w, x, xb, rows, in_f, out_f, bias);
  R->stop_at_mm = R->stop_in_linear && adapted;
  R->stop_in_linear = false;
  if (adapted) y = lora(R, y, x, xb, rows, in_f, out_f);
  R->stop_at_mm = false;
  return y;
}

/* autocast exits (or a recomputation ends): its cached copies go */
void vl__tr_uncache(struct run *R) {
  for (size_t i = 0; i < R->cached.n; i++)
    rel(R, R->cached.h[i]);
  R->cached.n = 0;
}

/* dropout in training: a bool mask (saved) and the output */
uint32_t vl__tr_dropout_of(struct run *R, uint32_t x, double prob, uint64_t xb) {
  if (prob <= 0) return x;
  uint64_t n = R->tp.t[x].bytes; /* the mask a byte (bool) an element */
  uint32_t mask = tape_new(&R->tp, n / xb);
  uint32_t y = op(R, (struct tape_op){.out_bytes = n, .in = {x}, .saved = {mask}});
  rel(R, mask);
  rel(R, x);
  return y;
}

uint32_t vl__tr_dropout(struct run *R, uint32_t x, double prob) {
  return vl__tr_dropout_of(R, x, prob, R->z->e);
}
