/* What the caching allocator reserves for a training loop: the allocations
 * of three steps of one GPU's loop (forward under autocast, backward,
 * optimizer step, zero_grad(set_to_none=True), the model output dropped),
 * as python/vramledger/measure.py runs it, replayed through the model of
 * PyTorch's caching allocator (caching.c).
 *
 * Why a replay and not a factor: the loss's large fp32 blocks of the first
 * step (the logits' upcast, log_softmax's output, their gradients: 4 x 8000
 * MiB on Gemma-2B at 8,192 tokens) are freed during the first backward and
 * carved up by the gradients and by the optimizer states that the first
 * step creates lazily, so the second step makes them anew; on the H200
 * reserved exceeded allocated by up to 17 GiB this way (bench/results/
 * 2026-11-29-h200x2-nccl-run/part3-train-histories: the allocator's own
 * histories, which the allocator model replays to the byte). Where those
 * states land depends on every free block of the right size, so each
 * layer is written op by op as transformers runs it (modeling_llama.py and
 * its copies, modeling_gpt2.py, modeling_gpt_neox.py, modeling_opt.py,
 * sdpa_attention.py), its tensors kept by the nodes that save them and its
 * backward made by the autograd model of tape.c: the histories of
 * bench/results/2026-11-29-h200x2-nccl-run/part9-histories show a
 * checkpointed layer's forward is the same sequence as prefill's (no
 * cache), its recomputation stops after the last tensor the backward
 * needs (non-reentrant checkpoint's early stop), and its backward
 * allocates its gradients in PyTorch's order (tape.h). Under DDP and
 * ZeRO-1 the loop is one rank's: its buckets, rebuilt in the second step,
 * and (ZeRO-1) the states of its share. Blocks of 1 MiB or less (the small
 * pool) are left out. */
#include "internal.h"
#include "vramledger/alloc.h"
#include "tape.h"

/* the first step creates the optimizer's states, the second makes anew
 * what they carved up, the third is the one measure.py measures (after two
 * warm-up steps; reserved memory keeps the peak of all three). Three
 * rather than two: the fifth set outside the calibration unchanged, nine
 * runs of the others move by 0.4 to 5 points, the two worst of them
 * -7.0 -> -1.9 % and -7.1 -> -3.5 % (
 * bench/results/2026-11-29-h200x2-replay-histories/validate-steps.txt) */
#define STEPS 3

/* blocks that live and die together */
struct list {
  uint32_t *h;
  size_t n, cap;
};

static void push(struct prog *p, struct list *l, uint32_t h) {
  if (h == NONE || p->failed) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    uint32_t *x = vl_realloc(l->h, cap * sizeof *x);
    if (!x) {
      p->failed = true;
      return;
    }
    l->h = x;
    l->cap = cap;
  }
  l->h[l->n++] = h;
}

/* free a list's blocks, the last made first */
static void drop(struct prog *p, struct list *l) {
  while (l->n) {
    uint32_t h = l->h[--l->n];
    F(p, &h);
  }
}

enum where { BEFORE = -1, AFTER = -2 }; /* outside the layers: embeddings; final norm, head */

/* how many tensors of inventory entry t belong to layer w (or, w < 0, to
 * the part outside the layers where t lies) */
static uint64_t count_in(const struct vl_arch *arch, const struct vl_tensor *t, int w) {
  /* spread evenly, the remainder over the layers so that they sum to the
   * count (tensors in some layers only: MoE beside dense layers) */
  if (t->per_layer)
    return w >= 0 && arch->layers
               ? t->count * (uint64_t)(w + 1) / arch->layers - t->count * (uint64_t)w / arch->layers
               : 0;
  return w == (t->kind == VL_T_EMBED ? BEFORE : AFTER) ? t->count : 0;
}

/* a block of `bytes` onto l, or (l NULL) made and freed at once */
static void block(struct prog *p, uint64_t bytes, struct list *l) {
  uint32_t h = A(p, bytes);
  if (l)
    push(p, l, h);
  else
    F(p, &h);
}

/* one block of elems * bytes per tensor, `times` over, for the tensors of
 * layer `w` (or outside the layers), in the inventory's order; onto l
 * (NULL: made and freed at once). A tied head is the embedding matrix: it
 * counts once, before the layers. */
static void per_tensor(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       int w, uint64_t bytes, unsigned times, struct list *l) {
  for (int i = 0; i < inv->n && !p->failed; i++) {
    const struct vl_tensor *t = &inv->t[i];
    for (uint64_t k = 0, n = count_in(arch, t, w); k < n; k++)
      for (unsigned j = 0; j < times; j++)
        block(p, t->rows * t->cols * bytes, l);
  }
}

/* every tensor of the model, in order */
static void model_wide(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       uint64_t bytes, unsigned times, struct list *l) {
  per_tensor(p, arch, inv, BEFORE, bytes, times, l);
  for (uint64_t k = 0; k < arch->layers; k++)
    per_tensor(p, arch, inv, (int)k, bytes, times, l);
  per_tensor(p, arch, inv, AFTER, bytes, times, l);
}

/* LoRA's adapters, layer by layer (lora_A, lora_B of each target), one
 * block of `bytes` an element each, `times` over; onto l (NULL: made and
 * freed at once) */
static void adapters(struct prog *p, const struct vl_arch *arch, const struct vl__train_sizes *z,
                     uint64_t bytes, unsigned times, struct list *l) {
  for (uint64_t k = 0; k < arch->layers && !p->failed; k++)
    for (unsigned i = 0; i < z->n_lin; i++)
      for (unsigned j = 0; z->lin[i].adapted && j < 2 * times; j++)
        block(p, z->lora_rank * (j % 2 ? z->lin[i].out : z->lin[i].in) * bytes, l);
}

/* what the optimizer updates: every parameter, or LoRA's adapters */
static void trained(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                    const struct vl__train_sizes *z, uint64_t bytes, unsigned times,
                    struct list *l) {
  if (z->lora_rank)
    adapters(p, arch, z, bytes, times, l);
  else
    model_wide(p, arch, inv, bytes, times, l);
}

/* ---- DDP ---- */

/* every parameter's elements, in the model's order */
static size_t param_elems(const struct vl_arch *arch, const struct vl_inventory *inv,
                          uint64_t **out) {
  size_t n = 0, cap = 0;
  uint64_t *v = NULL;
  for (int w = BEFORE; w < (int)arch->layers + 1; w++) {
    int where = w == (int)arch->layers ? AFTER : w;
    for (int i = 0; i < inv->n; i++) {
      const struct vl_tensor *t = &inv->t[i];
      for (uint64_t k = 0, c = count_in(arch, t, where); k < c; k++) {
        if (n == cap) {
          cap = cap ? 2 * cap : 256;
          uint64_t *x = vl_realloc(v, cap * sizeof *x);
          if (!x) {
            vl_free(v);
            *out = NULL;
            return 0;
          }
          v = x;
        }
        v[n++] = t->rows * t->cols;
      }
    }
  }
  *out = v;
  return n;
}

/* flat buffers of consecutive tensors (v elements, b bytes each), each
 * closed once it holds `cap` bytes or more (torch's bucketing), in the
 * given direction; onto l (NULL: made and freed at once) */
static void flat_groups(struct prog *p, const uint64_t *v, size_t n, uint64_t b, bool reverse,
                        uint64_t cap, struct list *l) {
  uint64_t at = 0;
  for (size_t k = 0; k < n; k++) {
    at += v[reverse ? n - 1 - k : k] * b;
    if (at >= cap || k + 1 == n) {
      block(p, at, l);
      at = 0;
    }
  }
}

/* DDP's construction: the module's states broadcast from rank 0 through
 * 250 MiB flat buffers, freed at once (_sync_module_states), then one
 * bucket for every gradient: not a static graph, so the first step's
 * bucket is unlimited (GPT-2 on 2 H200s: 270,938,112 and 226,821,120 B,
 * then 497,759,232 B, every rank's allocator history: bench/results/
 * 2026-11-29-h200x2-nccl-run/part7/) */
static void ddp_init(struct prog *p, const uint64_t *v, size_t n, const struct vl__train_sizes *z,
                     struct list *buckets) {
  flat_groups(p, v, n, z->wb, false, 250ull << 20, NULL);
  uint64_t all = 0;
  for (size_t k = 0; k < n; k++)
    all += v[k];
  block(p, all * z->gb, buckets);
}

/* ZeRO-1's share of rank 0 (torch's ZeroRedundancyOptimizer): the
 * parameters from the largest down (ties in the model's order), each to
 * the rank with the fewest elements so far; rank 0's, in that order, into
 * mine (indices into v). Returns how many. */
static size_t zero1_share(const uint64_t *v, size_t n, uint64_t ranks, size_t *mine) {
  size_t *order = vl_calloc(n + 1, sizeof *order);
  uint64_t *load = vl_calloc(ranks, sizeof *load);
  size_t m = 0;
  if (!order || !load) {
    vl_free(order);
    vl_free(load);
    return SIZE_MAX;
  }
  for (size_t k = 0; k < n; k++) { /* a stable insertion sort, largest first */
    size_t at = k;
    while (at > 0 && v[order[at - 1]] < v[k]) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = k;
  }
  for (size_t k = 0; k < n; k++) {
    uint64_t r = 0;
    for (uint64_t q = 1; q < ranks; q++)
      if (load[q] < load[r]) r = q;
    load[r] += v[order[k]];
    if (r == 0) mine[m++] = order[k];
  }
  vl_free(order);
  vl_free(load);
  return m;
}

/* the replay's state */
struct run {
  struct prog p;
  struct tape tp;
  const struct vl_arch *arch;
  const struct vl__train_sizes *z;
  uint64_t T, a, g, d; /* tokens, query and key/value heads, head size */
  uint64_t dv;         /* value head size (MLA: v_head_dim; else d) */
  uint64_t l;          /* the layer being run */
  bool causal;         /* the stack being run is a decoder (mask, KV cache) */
  uint32_t kv_src;     /* cross-attention: the encoder's output k and v come from (0: self) */
  uint64_t kv_srcb;    /* its bytes an element */
  struct list grads;   /* the parameters' .grad, until zero_grad */
  struct list cached;  /* autocast's cached weight copies (tape tensors) */
  struct list kv;      /* the KV cache the output holds (tape tensors) */
  uint32_t tied_leaf;  /* the tied head's weight (tape tensor) */
  uint32_t tied_grad;  /* its gradient, waiting for the embedding's (handle) */
  unsigned lin;        /* the layer's linears made so far (LoRA's targets) */
  uint32_t out32;      /* accelerate's fp32 copy of the output's logits (NONE: none) */
};

/* a parameter's gradient becomes .grad; with fp32 main gradients
 * (mixed-*) a hook copies autograd's half one to fp32 and drops it */
static void grad(struct run *R, uint32_t h, uint64_t bytes) {
  const struct vl__train_sizes *z = R->z;
  if (z->mb && z->gb > z->wb) { /* fp32 main gradients of half weights */
    uint32_t m = A(&R->p, bytes / z->wb * z->gb);
    F(&R->p, &h);
    push(&R->p, &R->grads, m);
  } else {
    push(&R->p, &R->grads, h);
  }
}

/* a leaf's gradient arrives; a tied head's waits in its AccumulateGrad
 * node's input buffer for the embedding's */
static void on_leaf(void *ctx, uint32_t leaf, uint32_t h, uint64_t bytes) {
  struct run *R = ctx;
  if (leaf && leaf == R->tied_leaf) {
    R->tied_grad = h;
    return;
  }
  grad(R, h, bytes);
}

static uint32_t op(struct run *R, struct tape_op o) { return tape_op(&R->tp, &o); }

/* the base model's parameters train, unless LoRA freezes them */
static bool base_trained(const struct run *R) { return !R->z->lora_rank; }

/* a parameter of the base model (its embedding, a linear, the head) */
static uint32_t base_param(struct run *R, uint64_t bytes) {
  return base_trained(R) ? tape_leaf(&R->tp, bytes) : tape_frozen(&R->tp, bytes);
}
static void rel(struct run *R, uint32_t x) { tape_drop(&R->tp, x); }

/* a and b joined into `bytes` (an add: TAPE_ADD; a cat: TAPE_SLICES);
 * Python lets go of both */
static uint32_t join(struct run *R, uint64_t bytes, uint32_t a, uint32_t b, uint8_t pass) {
  uint32_t y = op(R, (struct tape_op){.out_bytes = bytes, .in = {a, b}, .pass = pass});
  rel(R, a);
  rel(R, b);
  return y;
}

/* x (rows x in_f, xb bytes an element) through a linear of in_f -> out_f
 * whose weight is the parameter w: under autocast the weight's half copy
 * (a node: its backward copies the gradient to the fp32 parameter's;
 * cached for a trained leaf, made anew at each call for a frozen one:
 * autocast_mode.cpp caches leaves that require grad), then the input's
 * cast (each linear casts its own: not cached). The input is saved for
 * the weight's gradient, so only where the weight is trained; the weight
 * (its half copy) for the input's. The output has the weight's dtype
 * (autocast's without it). */
static uint32_t linear_w(struct run *R, uint32_t w, uint32_t x, uint64_t xb, uint64_t rows,
                         uint64_t in_f, uint64_t out_f, bool bias) {
  const bool trained = R->tp.t[w].rg;
  uint64_t e = R->tp.t[w].bytes / (in_f * out_f); /* the weight's dtype */
  uint32_t cast = 0, in = x, wc = 0;
  if (R->z->autocast) {
    e = R->z->e;
    wc = op(R, (struct tape_op){.out_bytes = in_f * out_f * 2, .in = {w}});
    if (trained) push(&R->p, &R->cached, wc);
    w = wc;
    if (xb != e) in = cast = op(R, (struct tape_op){.out_bytes = rows * in_f * e, .in = {x}});
  }
  /* mm's derivative makes the weight's gradient first, addmm's the input's */
  uint32_t y = op(R, (struct tape_op){.out_bytes = rows * out_f * e,
                                      .in = {bias ? in : w, bias ? w : in},
                                      .saved = {trained ? in : 0, R->z->autocast ? w : 0},
                                      .mm = true});
  rel(R, cast);
  if (!trained) rel(R, wc);
  return y;
}

/* PEFT's LoRA on a frozen linear's output y (rows x out_f) of x (rows x
 * in_f, xb bytes): x cast to the adapters' dtype (fp32), lora_B(lora_A(x))
 * * scaling added to y, the sum cast back to y's dtype (peft 0.21
 * tuners/lora/layer.py Linear.forward:
 * bench/results/2026-11-29-h200x2-replay-histories/part3-lora-histories/peft-sources.txt;
 * lora_dropout 0) */
static uint32_t lora(struct run *R, uint32_t y, uint32_t x, uint64_t xb, uint64_t rows,
                     uint64_t in_f, uint64_t out_f) {
  const uint64_t ab = R->z->ab, r = R->z->lora_rank;
  const uint64_t yb = R->tp.t[y].bytes / (rows * out_f);
  uint32_t xa = xb != ab ? op(R, (struct tape_op){.out_bytes = rows * in_f * ab, .in = {x}})
                         : tape_ref(&R->tp, x);
  uint32_t la = linear_w(R, tape_leaf(&R->tp, r * in_f * ab), xa, ab, rows, in_f, r, false);
  rel(R, xa);
  const uint64_t lb = R->tp.t[la].bytes / (rows * r);
  uint32_t b = linear_w(R, tape_leaf(&R->tp, out_f * r * ab), la, lb, rows, r, out_f, false);
  rel(R, la);
  uint32_t sc = op(R, (struct tape_op){.out_bytes = R->tp.t[b].bytes, .in = {b}}); /* * scaling */
  rel(R, b);
  const uint64_t sb = vl__max(yb, R->tp.t[sc].bytes / (rows * out_f)); /* type promotion */
  uint32_t sum = join(R, rows * out_f * sb, y, sc, TAPE_ADD);
  if (sb == yb) return sum;
  uint32_t out = op(R, (struct tape_op){.out_bytes = rows * out_f * yb, .in = {sum}});
  rel(R, sum);
  return out;
}

/* the same with a parameter of its own: a layer's next linear (frozen
 * under LoRA, with its adapter where it is a target) */
static uint32_t linear(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t in_f,
                       uint64_t out_f, bool bias) {
  const struct vl__train_sizes *z = R->z;
  const unsigned k = R->lin++;
  uint32_t y = linear_w(R, base_param(R, in_f * out_f * z->wb), x, xb, rows, in_f, out_f, bias);
  if (k < z->n_lin && z->lin[k].adapted) y = lora(R, y, x, xb, rows, in_f, out_f);
  return y;
}

/* autocast exits (or a recomputation ends): its cached copies go */
static void uncache(struct run *R) {
  for (size_t i = 0; i < R->cached.n; i++)
    rel(R, R->cached.h[i]);
  R->cached.n = 0;
}

/* a norm over `width` of x (rows x width, xb bytes an element); *ob: its
 * output's */
static uint32_t norm_w(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t width,
                       uint64_t *ob) {
  const uint64_t Th = rows * width, wb = R->z->wb;
  if (!R->arch->rms_norm) { /* F.layer_norm: fp32 under autocast */
    *ob = R->z->autocast ? 4 : xb;
    return op(R, (struct tape_op){.out_bytes = Th * *ob, .in = {x}, .saved = {x}});
  }
  /* RMSNorm: x.float(); pow(2).mean(-1); rsqrt; x * rsqrt; .to(dtype); weight * */
  uint32_t x32 =
      xb < 4 ? op(R, (struct tape_op){.out_bytes = Th * 4, .in = {x}}) : tape_ref(&R->tp, x);
  uint32_t sq = op(R, (struct tape_op){.out_bytes = Th * 4, .in = {x32}, .saved = {x32}});
  uint32_t var = op(R, (struct tape_op){.out_bytes = rows * 4, .in = {sq}});
  rel(R, sq);
  uint32_t rs = op(R, (struct tape_op){.out_bytes = rows * 4, .in = {var}, .save_out = true});
  rel(R, var);
  uint32_t y32 = op(
      R, (struct tape_op){.out_bytes = Th * 4, .in = {x32, rs}, .saved = {x32, rs}, .tmp = Th * 4});
  rel(R, x32);
  rel(R, rs);
  if (vl__norm_weight_fp32(R->arch)) {
    /* GemmaRMSNorm: (x * rsqrt) * (1 + weight.float()) in fp32, then
     * type_as(x) (transformers 5.17 modeling_gemma.py) */
    *ob = xb;
    uint32_t o32 = op(
        R,
        (struct tape_op){.out_bytes = Th * 4, .in = {y32}, .saved = {base_trained(R) ? y32 : 0}});
    rel(R, y32);
    if (xb == 4) return o32;
    uint32_t out = op(R, (struct tape_op){.out_bytes = Th * xb, .in = {o32}});
    rel(R, o32);
    return out;
  }
  uint32_t yh =
      xb < 4 ? op(R, (struct tape_op){.out_bytes = Th * xb, .in = {y32}}) : tape_ref(&R->tp, y32);
  *ob = vl__max(wb, xb);
  /* weight * x saves x for the weight's gradient: not where the weight
   * is frozen (LoRA; y-qwen05-bf16-lora16-adamw-b8s2048's history) */
  uint32_t out = op(R, (struct tape_op){.out_bytes = Th * *ob,
                                        .in = {yh},
                                        .saved = {base_trained(R) ? yh : 0},
                                        .tmp = Th * *ob});
  rel(R, yh);
  rel(R, y32);
  return out;
}

/* a norm of x (T x h) */
static uint32_t norm(struct run *R, uint32_t x, uint64_t xb, uint64_t *ob) {
  return norm_w(R, x, xb, R->T, R->z->h, ob);
}

/* q/k norms (Qwen3, Gemma 3 per head; OLMo 2, OLMoE over all heads) on
 * the projection x of `heads` heads, which it replaces */
static uint32_t qk_norm(struct run *R, uint32_t x, uint64_t heads) {
  if (!R->arch->qk_norm) return x;
  const uint64_t n = R->T * heads * R->d, xb = R->tp.t[x].bytes / n;
  uint64_t ob;
  uint32_t y = R->arch->qk_norm == 1 ? norm_w(R, x, xb, R->T * heads, R->d, &ob)
                                     : norm_w(R, x, xb, R->T, heads * R->d, &ob);
  rel(R, x);
  return y;
}

/* dropout in training: a bool mask (saved) and the output */
static uint32_t dropout(struct run *R, uint32_t x, double prob) {
  if (prob <= 0) return x;
  uint64_t n = R->tp.t[x].bytes; /* of the activations' dtype; the mask a byte an element */
  uint32_t mask = tape_new(&R->tp, n / R->z->e);
  uint32_t y = op(R, (struct tape_op){.out_bytes = n, .in = {x}, .saved = {mask}});
  rel(R, mask);
  rel(R, x);
  return y;
}

/* q * cos + rotate_half(q) * sin (rotate_half: cat(-x2, x1)) on n elements
 * of x (the activations' dtype); cos and sin have the residual stream's
 * dtype (the rotary embedding's output is cast to its input's, the
 * hidden states: fp32 under autocast), so the products and the sum are in
 * the wider of the two (the AMP histories: qwen05-amp-adamw-sdpa,
 * pythia160-ampfp16-adamw) */
static uint32_t rotary(struct run *R, uint32_t x, uint64_t n) {
  const uint64_t e = R->tp.t[x].bytes / n, w = vl__max(R->z->r, e);
  uint32_t t1 = op(R, (struct tape_op){.out_bytes = n * w, .in = {x}});
  uint32_t x1 = tape_view(&R->tp, x, n / 2 * e), x2 = tape_view(&R->tp, x, n / 2 * e);
  uint32_t neg = op(R, (struct tape_op){.out_bytes = n / 2 * e, .in = {x2}});
  rel(R, x2);
  uint32_t cat = join(R, n * e, neg, x1, TAPE_SLICES);
  uint32_t t3 = op(R, (struct tape_op){.out_bytes = n * w, .in = {cat}});
  rel(R, cat);
  return join(R, n * w, t1, t3, TAPE_ADD);
}

/* rotary on the first rotary_pct of each head (GPT-NeoX), the rest
 * concatenated back (in the wider dtype); n elements */
static uint32_t rope(struct run *R, uint32_t x, uint64_t n) {
  double pct = R->arch->rotary_pct;
  if (pct >= 1) return rotary(R, x, n);
  const uint64_t e = R->tp.t[x].bytes / n, w = vl__max(R->z->r, e);
  uint64_t nr = (uint64_t)((double)n * pct) / 2 * 2;
  uint32_t xr = tape_view(&R->tp, x, nr * e), xp = tape_view(&R->tp, x, (n - nr) * e);
  uint32_t r = rotary(R, xr, nr);
  rel(R, xr);
  return join(R, n * w, r, xp, TAPE_SLICES);
}

/* autocast's cast of an attention input to the activations' dtype (a new
 * tensor) where it is wider, else another reference to x */
static uint32_t to_act(struct run *R, uint32_t x, uint64_t elems) {
  if (!R->z->autocast || R->tp.t[x].bytes == elems * R->z->e) return tape_ref(&R->tp, x);
  return op(R, (struct tape_op){.out_bytes = elems * R->z->e, .in = {x}});
}

/* a new reference to x, or for a view a contiguous copy of it: what an op
 * that must reshape x makes and saves */
static uint32_t contiguous(struct run *R, uint32_t x) {
  if (!R->tp.t[x].base) return tape_ref(&R->tp, x);
  return op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
}

/* *x replaced by contiguous(*x) */
static void make_contiguous(struct run *R, uint32_t *x) {
  uint32_t c = contiguous(R, *x);
  rel(R, *x);
  *x = c;
}

/* the attention on n1 (T x h, nb bytes an element): its o_proj's output;
 * *held: what it returns beside it (eager's weights, 0 for SDPA) */
/* DeepSeek-V2's multi-head latent attention, q, k and v: q_proj (or its
 * low rank q_a, norm, q_b), the compressed kv_a_proj_with_mqa, its norm,
 * kv_b_proj to every head's k_nope and v; rotary on q's and the shared
 * k's rope parts; q and k concatenated from their parts (k_rot expanded
 * to every head) (modeling_deepseek_v2.py DeepseekV2Attention.forward) */
static void mla_qkv(struct run *R, uint32_t n1, uint64_t nb, uint32_t *q, uint32_t *k,
                    uint32_t *v) {
  const struct vl_arch *A = R->arch;
  const uint64_t T = R->T, a = R->a, h = R->z->h, e = R->z->e, d = R->d, dv = R->dv;
  const uint64_t rope_d = A->qk_rope_dim, nope = A->qk_nope_dim, c = A->kv_lora_rank;
  uint64_t ob;
  uint32_t qf;
  if (A->q_lora_rank) {
    uint32_t qa = linear(R, n1, nb, T, h, A->q_lora_rank, A->qkv_bias);
    uint32_t qn = norm_w(R, qa, e, T, A->q_lora_rank, &ob);
    rel(R, qa);
    qf = linear(R, qn, ob, T, A->q_lora_rank, a * d, false);
    rel(R, qn);
  } else {
    qf = linear(R, n1, nb, T, h, a * d, false);
  }
  uint32_t kva = linear(R, n1, nb, T, h, c + rope_d, A->qkv_bias);
  uint32_t kvc = tape_view(&R->tp, kva, T * c * e), kr = tape_view(&R->tp, kva, T * rope_d * e);
  uint32_t kvn = norm_w(R, kvc, e, T, c, &ob);
  rel(R, kvc);
  uint32_t kvb = linear(R, kvn, ob, T, c, a * (nope + dv), false);
  rel(R, kvn);
  uint32_t kp = tape_view(&R->tp, kvb, T * a * nope * e);
  *v = tape_view(&R->tp, kvb, T * a * dv * e);
  rel(R, kvb);
  uint32_t qp = tape_view(&R->tp, qf, T * a * nope * e),
           qr = tape_view(&R->tp, qf, T * a * rope_d * e);
  rel(R, qf);
  uint32_t qr2 = rotary(R, qr, T * a * rope_d), kr2 = rotary(R, kr, T * rope_d);
  rel(R, qr);
  rel(R, kr);
  rel(R, kva);
  uint32_t krx = op(R, (struct tape_op){.out_bytes = R->tp.t[kr2].bytes * a, .in = {kr2}});
  rel(R, kr2);
  *q = join(R, T * a * d * vl__max(e, R->tp.t[qr2].bytes / (T * a * rope_d)), qp, qr2, TAPE_SLICES);
  *k = join(R, T * a * d * vl__max(e, R->tp.t[krx].bytes / (T * a * rope_d)), kp, krx, TAPE_SLICES);
}

/* DeBERTa-v2's disentangled attention adds to the scores s (taken over)
 * its content-to-position and position-to-content terms: each a bmm of q
 * with the relative embeddings' projection (B*a x s x 2*span, kept by the
 * gather that follows, which saves its input), gathered to s x s and
 * scaled; then the attention mask's masked_fill, a new tensor
 * (modeling_deberta_v2.py DisentangledSelfAttention; deberta3-amp-adamw-
 * eager's peak, bench/results/model-types-unseen/type-peaks-more.json) */
static uint32_t disentangled(struct run *R, uint32_t s, uint32_t q) {
  const struct vl_arch *A = R->arch;
  if (!A->rel_att) return s;
  const uint64_t e = R->z->e, sc = R->tp.t[s].bytes;
  const uint64_t rb = R->z->B * R->a * R->z->P * A->rel_embed_rows * e;
  for (unsigned bit = 1; bit <= 2; bit <<= 1) {
    if (!(A->rel_att & bit)) continue;
    /* the relative embeddings' projection repeated over the batch */
    uint32_t pos = tape_new(&R->tp, R->z->B * R->a * A->rel_embed_rows * R->d * e);
    uint32_t c = op(R, (struct tape_op){.out_bytes = rb, .in = {q, pos}, .saved = {q, pos}});
    rel(R, pos);
    uint32_t idx = tape_new(&R->tp, R->z->P * R->z->P * 8); /* the int64 gather index */
    uint32_t gth = op(R, (struct tape_op){.out_bytes = sc, .in = {c}, .saved = {c, idx}});
    rel(R, c);
    rel(R, idx);
    uint32_t dv = op(R, (struct tape_op){.out_bytes = sc, .in = {gth}});
    rel(R, gth);
    s = join(R, sc, s, dv, TAPE_ADD);
  }
  uint32_t mask = tape_new(&R->tp, R->z->B * R->z->P * R->z->P); /* attention_mask.bool() */
  uint32_t m = op(R, (struct tape_op){.out_bytes = sc, .in = {s}, .saved = {mask}});
  rel(R, mask);
  rel(R, s);
  return m;
}

static uint32_t attention(struct run *R, uint32_t n1, uint64_t nb, uint32_t *held) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, a = R->a, g = R->g, d = R->d, e = R->z->e, h = R->z->h;
  uint32_t q, k, v, q32 = 0, k32 = 0, qkv = 0; /* q32, k32: rotary's (wider) outputs */
  if (arch->fused_qkv) { /* the fused output stays a local until the attention returns */
    qkv = linear(R, n1, nb, T, h, (a + 2 * g) * d, arch->qkv_bias);
    q = tape_view(&R->tp, qkv, T * a * d * e);
    k = tape_view(&R->tp, qkv, T * g * d * e);
    v = tape_view(&R->tp, qkv, T * g * d * e);
  } else if (arch->mla) {
    mla_qkv(R, n1, nb, &q, &k, &v);
  } else {
    /* cross-attention: k and v of the encoder's output (the same number of
     * tokens: --seq is both lengths) */
    const uint32_t src = R->kv_src ? R->kv_src : n1;
    const uint64_t sb = R->kv_src ? R->kv_srcb : nb;
    q = linear(R, n1, nb, T, h, a * d, arch->qkv_bias);
    k = linear(R, src, sb, T, h, g * d, arch->qkv_bias);
    v = linear(R, src, sb, T, h, g * d, arch->qkv_bias);
  }
  q = qk_norm(R, q, a);
  k = qk_norm(R, k, g);
  if (arch->rotary_pct > 0 && !arch->mla && !R->kv_src) {
    q32 = rope(R, q, T * a * d);
    k32 = rope(R, k, T * g * d);
    if (arch->family == VL_FAM_OLMO2) {
      /* OLMo 2's apply_rotary_pos_emb casts back to q's and k's dtype
       * (modeling_olmo2.py: q_embed.to(q_type)): the cache copies and the
       * attention get them in that dtype (olmo2-1b-amp-adamw's peak,
       * bench/results/model-types-unseen/type-peaks-more.json) */
      uint32_t qc = op(R, (struct tape_op){.out_bytes = R->tp.t[q].bytes, .in = {q32}});
      uint32_t kc = op(R, (struct tape_op){.out_bytes = R->tp.t[k].bytes, .in = {k32}});
      rel(R, q32);
      rel(R, k32);
      q32 = qc;
      k32 = kc;
    }
    rel(R, q);
    rel(R, k);
    q = to_act(R, q32, T * a * d);
    k = to_act(R, k32, T * g * d);
  }
  if (!R->z->ckpt && R->causal) {
    /* use_cache (the config's default; measure.py, like transformers'
     * gradient_checkpointing_enable, turns it off only with
     * checkpointing): DynamicLayer.update copies the key and the value
     * into the cache (torch.cat onto an empty tensor), the attention uses
     * the cache's, which the model's output holds until it is dropped
     * (pythia160-fp32-sgd-forloop-eager's history: cache_utils.py:146-147) */
    uint64_t kb = R->tp.t[k32 ? k32 : k].bytes; /* the key's; the cache is made in its dtype, */
    uint32_t kc = op(R, (struct tape_op){.out_bytes = kb, .in = {k32 ? k32 : k}});
    /* so the value is promoted to it (fp32 under autocast: cat onto an
     * empty fp32 tensor; pythia14-amp-adamw-sdpa's history) */
    uint32_t vc = op(R, (struct tape_op){.out_bytes = kb / d * R->dv, .in = {v}});
    push(&R->p, &R->kv, tape_ref(&R->tp, kc));
    push(&R->p, &R->kv, tape_ref(&R->tp, vc));
    rel(R, k);
    rel(R, k32);
    rel(R, v);
    k32 = 0;
    k = to_act(R, kc, T * g * d);
    v = to_act(R, vc, T * g * R->dv);
    rel(R, kc);
    rel(R, vc);
  }
  uint32_t o;
  if (arch->rel_att) {
    /* DeBERTa's transpose_for_scores: contiguous copies of q, k and v; the
     * key divided by the scale (modeling_deberta_v2.py) */
    uint32_t *qkv3[3] = {&q, &k, &v};
    for (int i = 0; i < 3; i++) {
      uint32_t c = op(R, (struct tape_op){.out_bytes = R->tp.t[*qkv3[i]].bytes, .in = {*qkv3[i]}});
      rel(R, *qkv3[i]);
      *qkv3[i] = c;
    }
    uint32_t ks = op(R, (struct tape_op){.out_bytes = R->tp.t[k].bytes, .in = {k}});
    rel(R, k);
    k = ks;
  }
  if (R->z->eager) {
    const uint64_t sc = R->z->B * a * R->z->P * R->z->P;
    uint32_t rk = tape_ref(&R->tp, k), rv = tape_ref(&R->tp, v);
    if (g < a) { /* repeat_kv */
      rel(R, rk);
      rel(R, rv);
      rk = op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {k}});
      rv = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e, .in = {v}});
    }
    /* matmul(q, k^T) * scaling + causal mask: three score-sized tensors.
     * matmul reshapes its operands for bmm: a head-transposed view of the
     * fused projection (GPT-2's query; its key and value where no cache
     * copied them) becomes a contiguous copy, which is what it saves, so
     * the fused output is freed when the attention returns
     * (y-gpt2m-bf16-adamw-eager-b8s1024's history: modeling_gpt2.py:58) */
    uint32_t rq = contiguous(R, q);
    make_contiguous(R, &rk);
    make_contiguous(R, &rv);
    uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {rq, rk}, .saved = {rq, rk}});
    rel(R, rq);
    uint32_t s1 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {s0}});
    s1 = disentangled(R, s1, q);
    rel(R, s0);
    if (arch->attn_softcap > 0) {
      /* Gemma 2: scores / cap, tanh (saves its output), * cap
       * (modeling_gemma2.py eager_attention_forward) */
      uint32_t c0 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {s1}});
      rel(R, s1);
      uint32_t c1 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {c0}, .save_out = true});
      rel(R, c0);
      s1 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {c1}});
      rel(R, c1);
    }
    /* the 4-D mask has the model's dtype: fp32 under autocast, so the sum
     * is fp32 (x-qwen05-amp-adamw-eager-ckpt-b8s2048's history) */
    const uint64_t me = vl__max(R->z->wb, e);
    uint32_t s2 = s1;                  /* encoders without padding get no mask */
    if (R->causal || arch->rel_bias) { /* the causal mask; T5's position bias */
      s2 = op(R, (struct tape_op){.out_bytes = sc * me, .in = {s1}, .pass = TAPE_ADD});
      rel(R, s1);
    }
    const uint64_t sm = vl__softmax_bytes(arch, R->z->autocast, e);
    uint32_t s32 = op(R, (struct tape_op){.out_bytes = sc * sm, .in = {s2}, .save_out = true});
    rel(R, s2);
    /* .to(query.dtype) (GPT-2: .type(value.dtype)): a no-op where that is
     * the probabilities' dtype (rotary's fp32 query under autocast; GPT-2's
     * half softmax without autocast) */
    const uint64_t tb = arch->softmax_native ? R->tp.t[v].bytes / (T * g * R->dv)
                        : q32                ? R->tp.t[q32].bytes / (T * a * d)
                                             : e;
    uint32_t sh = tb < sm ? op(R, (struct tape_op){.out_bytes = sc * tb, .in = {s32}})
                          : tape_ref(&R->tp, s32);
    rel(R, s32);
    if (arch->attn_dropout > 0) {
      uint32_t mask = tape_new(&R->tp, sc);
      uint32_t dr =
          op(R, (struct tape_op){.out_bytes = R->tp.t[sh].bytes, .in = {sh}, .saved = {mask}});
      rel(R, mask);
      rel(R, sh);
      sh = dr;
    }
    /* the weights are returned with the output: the decoder layer holds
     * them until it returns (Qwen2's eager history: the fp32 scores live
     * through the MLP); under autocast the matmul casts them */
    *held = sh;
    uint32_t shc = to_act(R, sh, sc);
    uint32_t o4 = op(
        R, (struct tape_op){.out_bytes = T * a * R->dv * e, .in = {shc, rv}, .saved = {shc, rv}});
    rel(R, shc);
    rel(R, rk);
    rel(R, rv);
    o = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e,
                               .in = {o4}}); /* transpose().contiguous() */
    rel(R, o4);
  } else if (e == 4 && g < a) {
    /* SDPA's math backend (fp32 with grouped key/value heads: neither
     * flash nor memory-efficient attention takes them, activations.c):
     * q and k scaled by the scale's square root, k and v repeated to every
     * head (enable_gqa), the scores, softmax's output (saved), its product
     * with v; transformers' transpose(1, 2).contiguous() copies it
     * (aten/src/ATen/native/transformers/attention.cpp
     * _scaled_dot_product_attention_math) */
    const uint64_t sc = R->z->B * a * R->z->P * R->z->P, Tad = T * a * d * e;
    uint32_t qs = op(R, (struct tape_op){.out_bytes = Tad, .in = {q}});
    uint32_t kr = op(R, (struct tape_op){.out_bytes = Tad, .in = {k}});
    uint32_t vr = op(R, (struct tape_op){.out_bytes = Tad, .in = {v}});
    uint32_t ks = op(R, (struct tape_op){.out_bytes = Tad, .in = {kr}});
    rel(R, kr);
    uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * e, .in = {qs, ks}, .saved = {qs, ks}});
    rel(R, qs);
    rel(R, ks);
    uint32_t pr = op(R, (struct tape_op){.out_bytes = sc * e, .in = {s0}, .save_out = true});
    rel(R, s0);
    uint32_t o4 = op(R, (struct tape_op){.out_bytes = Tad, .in = {pr, vr}, .saved = {pr, vr}});
    rel(R, pr);
    rel(R, vr);
    o = op(R, (struct tape_op){.out_bytes = Tad, .in = {o4}});
    rel(R, o4);
  } else if (arch->family == VL_FAM_FALCON && g < a && g == 1) {
    /* Falcon's multi-query SDPA call: one key/value head against every
     * query head without enable_gqa, which neither flash nor memory-
     * efficient attention takes, so the math backend runs; it upcasts half
     * inputs to fp32 (allowFP16BF16ReductionMathSDP is off by default) and
     * broadcasts the single head (aten/src/ATen/native/transformers/
     * attention.cpp _scaled_dot_product_attention_math; modeling_falcon.py
     * FalconAttention.forward) */
    const uint64_t sc = R->z->B * a * R->z->P * R->z->P, Tad4 = T * a * d * 4, Td4 = T * g * d * 4;
    uint32_t qf =
        e < 4 ? op(R, (struct tape_op){.out_bytes = Tad4, .in = {q}}) : tape_ref(&R->tp, q);
    uint32_t kf =
        e < 4 ? op(R, (struct tape_op){.out_bytes = Td4, .in = {k}}) : tape_ref(&R->tp, k);
    uint32_t vf =
        e < 4 ? op(R, (struct tape_op){.out_bytes = Td4, .in = {v}}) : tape_ref(&R->tp, v);
    uint32_t qs = op(R, (struct tape_op){.out_bytes = Tad4, .in = {qf}});
    uint32_t ks = op(R, (struct tape_op){.out_bytes = Td4, .in = {kf}});
    rel(R, qf);
    rel(R, kf);
    /* matmul broadcasts the single head: expand + reshape copy it to
     * every head for bmm, which saves the copies */
    uint32_t kx = op(R, (struct tape_op){.out_bytes = Tad4, .in = {ks}});
    rel(R, ks);
    uint32_t s0 = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {qs, kx}, .saved = {qs, kx}});
    rel(R, qs);
    rel(R, kx);
    uint32_t pr = op(R, (struct tape_op){.out_bytes = sc * 4, .in = {s0}, .save_out = true});
    rel(R, s0);
    uint32_t vx = op(R, (struct tape_op){.out_bytes = Tad4, .in = {vf}});
    rel(R, vf);
    uint32_t o4 = op(R, (struct tape_op){.out_bytes = Tad4, .in = {pr, vx}, .saved = {pr, vx}});
    rel(R, pr);
    rel(R, vx);
    uint32_t oh = e < 4 ? op(R, (struct tape_op){.out_bytes = T * a * d * e, .in = {o4}})
                        : tape_ref(&R->tp, o4);
    rel(R, o4);
    o = op(R,
           (struct tape_op){.out_bytes = T * a * d * e, .in = {oh}}); /* reshape of the permute */
    rel(R, oh);
  } else { /* SDPA (flash / memory-efficient): saves q, k, v, its output */
    /* an encoder's sliding-window layer passes a B x 1 x s x s mask: the
     * memory-efficient kernel takes it (in q's dtype) and saves it
     * (ModernBERT: 14 such blocks live at the peak of modernbert-bf16-
     * adamw, bench/results/model-types-unseen/type-peaks.json) */
    uint32_t m = 0;
    if (!arch->causal && arch->global_every && R->l % arch->global_every)
      m = tape_new(&R->tp, R->z->B * R->z->P * R->z->P * e);
    o = op(R, (struct tape_op){.out_bytes = T * a * R->dv * e,
                               .in = {q, k, v},
                               .saved = {q, k, v, m},
                               .save_out = true,
                               .tmp = 2 * T * a * d * 4 + T * a * 4});
    rel(R, m);
  }
  uint32_t y = linear(R, o, e, T, a * R->dv, h, arch->o_bias);
  rel(R, o);
  rel(R, q);
  rel(R, k);
  rel(R, v);
  rel(R, q32);
  rel(R, k32);
  rel(R, qkv);
  return y;
}

/* the MLP of width I on rows x h (n2, nb bytes an element); moe: an
 * expert of transformers 5 (one 3-D gate_up_proj) */
static uint32_t mlp(struct run *R, uint32_t n2, uint64_t nb, uint64_t rows, uint64_t I, bool moe,
                    bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t e = R->z->e, h = R->z->h, TI = rows * I * e;
  uint32_t act;
  uint64_t ab = e; /* the activation's bytes an element */
  if (arch->gated_mlp &&
      (arch->fused_gate_up ||
       moe)) { /* Phi-3, GLM, transformers 5's experts: gate_up_proj, then chunk(2) */
    uint32_t gu = linear(R, n2, nb, rows, h, 2 * I, arch->mlp_bias);
    uint32_t gate = tape_view(&R->tp, gu, TI), up = tape_view(&R->tp, gu, TI);
    rel(R, gu);
    uint32_t ag = op(R, (struct tape_op){.out_bytes = TI, .in = {gate}, .saved = {gate}});
    act = op(R, (struct tape_op){.out_bytes = TI, .in = {up, ag}, .saved = {up, ag}});
    rel(R, gate);
    rel(R, ag);
    rel(R, up);
  } else if (arch->gated_mlp) {
    /* down(act(gate(x)) * up(x)): the gate's output is a temporary gone
     * once act has it (Gemma-2B's history) */
    uint32_t gate = linear(R, n2, nb, rows, h, I, arch->mlp_bias);
    uint32_t ag = op(R, (struct tape_op){.out_bytes = TI, .in = {gate}, .saved = {gate}});
    rel(R, gate);
    uint32_t up = linear(R, n2, nb, rows, h, I, arch->mlp_bias);
    act = op(R, (struct tape_op){.out_bytes = TI, .in = {ag, up}, .saved = {ag, up}});
    rel(R, ag);
    rel(R, up);
  } else {
    uint32_t fc = linear(R, n2, nb, rows, h, I, arch->mlp_bias);
    if (arch->relu_act) {
      act = op(R, (struct tape_op){.out_bytes = TI, .in = {fc}, .save_out = true});
    } else if (arch->gelu_python) {
      /* 0.5*x*(1+tanh(c*(x+0.044715*x^3))): autocast runs pow in fp32, so
       * everything after it is fp32 (w-gpt2-ampfp16-sgd-b32s1024's history) */
      const uint64_t TIw = rows * I * (R->z->autocast ? 4 : e);
      ab = R->z->autocast ? 4 : e;
      uint32_t half = op(R, (struct tape_op){.out_bytes = TI, .in = {fc}});
      /* pow casts its input to fp32 first and saves the copy */
      uint32_t x = R->z->autocast && e < 4 ? op(R, (struct tape_op){.out_bytes = TIw, .in = {fc}})
                                           : tape_ref(&R->tp, fc);
      uint32_t cube = op(R, (struct tape_op){.out_bytes = TIw, .in = {x}, .saved = {x}});
      rel(R, x);
      uint32_t sc = op(R, (struct tape_op){.out_bytes = TIw, .in = {cube}});
      rel(R, cube);
      uint32_t s = op(R, (struct tape_op){.out_bytes = TIw, .in = {fc, sc}, .pass = TAPE_ADD});
      rel(R, sc);
      uint32_t c = op(R, (struct tape_op){.out_bytes = TIw, .in = {s}});
      rel(R, s);
      uint32_t th = op(R, (struct tape_op){.out_bytes = TIw, .in = {c}, .save_out = true});
      rel(R, c);
      uint32_t one = op(R, (struct tape_op){.out_bytes = TIw, .in = {th}, .pass = TAPE_ADD});
      rel(R, th);
      act = op(R, (struct tape_op){.out_bytes = TIw, .in = {half, one}, .saved = {half, one}});
      rel(R, half);
      rel(R, one);
    } else {
      act = op(R, (struct tape_op){.out_bytes = TI, .in = {fc}, .saved = {fc}});
    }
    rel(R, fc);
  }
  if (arch->act_dropout > 0) act = dropout(R, act, arch->act_dropout);
  if (arch->family == VL_FAM_T5 && R->z->autocast && ab < 4) {
    /* T5DenseActDense casts to wo's dtype, fp32 under autocast, and wo's
     * autocast casts back (its copy saved) */
    uint32_t c = op(R, (struct tape_op){.out_bytes = R->tp.t[act].bytes / ab * 4, .in = {act}});
    rel(R, act);
    act = c;
    ab = 4;
  }
  /* a checkpoint's recomputation stops here: the last tensor its backward
   * needs is the down projection's input */
  if (stop) R->tp.no_alloc = true;
  uint32_t y = linear(R, act, ab, rows, I, h, arch->mlp_bias);
  rel(R, act);
  return y;
}

/* a residual branch's output y before the add: Gemma 2/3's and OLMo 2's
 * norm after it, Granite's residual_multiplier (a new tensor) */
static uint32_t branch_out(struct run *R, uint32_t y) {
  const struct vl_arch *arch = R->arch;
  if (arch->sandwich_norm || arch->post_norm) {
    uint64_t ob, yb = R->tp.t[y].bytes / (R->T * R->z->h);
    uint32_t n = norm(R, y, yb, &ob);
    rel(R, y);
    return n;
  }
  if (arch->resid_scaled) {
    uint32_t m = op(R, (struct tape_op){.out_bytes = R->tp.t[y].bytes, .in = {y}});
    rel(R, y);
    return m;
  }
  return y;
}

/* the MoE block on n2 (T x h): the shared expert(s) on every token (and
 * Qwen2-MoE's sigmoid gate), then each routed expert on its share of the
 * tokens: the rows gathered (hidden_states[token_idx]), its MLP, the
 * product with the routing weights (saved: the weights need its gradient),
 * index_add_ into the output (modeling_qwen3_moe.py Qwen3MoeExperts) */
static uint32_t experts(struct run *R, uint32_t n2, uint64_t nb, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e;
  uint64_t k = arch->experts_per_token ? arch->experts_per_token : 1;
  uint64_t Te = vl__div_ceil(T * k, arch->experts);
  uint32_t mo = tape_new(&R->tp, T * h * e);
  if (arch->shared_intermediate) {
    uint32_t sh = mlp(R, n2, nb, T, arch->shared_intermediate, false, false);
    if (arch->shared_gate) {
      uint32_t g = linear(R, n2, nb, T, h, 1, false);
      uint32_t sg = op(R, (struct tape_op){.out_bytes = T * e, .in = {g}, .save_out = true});
      rel(R, g);
      uint32_t p =
          op(R, (struct tape_op){.out_bytes = T * h * e, .in = {sg, sh}, .saved = {sg, sh}});
      rel(R, sg);
      rel(R, sh);
      sh = p;
    }
    rel(R, mo);
    mo = sh;
  }
  for (uint64_t i = 0; i < arch->experts && !R->p.failed; i++) {
    uint32_t cur = op(R, (struct tape_op){.out_bytes = Te * h * nb, .in = {n2}});
    uint32_t y = mlp(R, cur, nb, Te, arch->moe_intermediate, true, false);
    rel(R, cur);
    uint32_t yw = op(R, (struct tape_op){.out_bytes = Te * h * e, .in = {y}, .saved = {y}});
    rel(R, y);
    uint32_t acc =
        op(R, (struct tape_op){.out_bytes = T * h * e, .in = {mo, yw}, .pass = TAPE_ADD});
    rel(R, yw);
    rel(R, mo);
    mo = acc;
  }
  if (stop) R->tp.no_alloc = true;
  return mo;
}

/* one decoder layer on x (T x h, the residual stream's dtype); Python's
 * reference to x is taken over. `stop`: a checkpoint's recomputation (no
 * allocation after the MLP's last saved tensor). GPT-NeoX's parallel
 * residual: mlp(ln2(x)) + attn(ln1(x)) + x. */
static uint32_t layer(struct run *R, uint32_t x, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, r = R->z->r, e = R->z->e;
  uint64_t nb;
  R->lin = 0;
  uint32_t n1 = arch->post_norm ? tape_ref(&R->tp, x) : norm(R, x, r, &nb), held = 0;
  if (arch->post_norm) nb = r;
  const uint64_t n1b = nb;
  uint32_t at = dropout(R, attention(R, n1, nb, &held), arch->hidden_dropout);
  at = branch_out(R, at); /* Gemma 2/3, OLMo 2 post-norm; Granite's multiplier */
  if (!arch->shared_norm) rel(R, n1);
  uint32_t h1 = x;
  if (!arch->parallel_residual) {
    h1 = op(R, (struct tape_op){.out_bytes = T * h * r, .in = {x, at}, .pass = TAPE_ADD});
    rel(R, at);
    rel(R, x);
  }
  uint32_t n2, mo;
  if (arch->shared_norm) { /* Phi, Falcon: one norm feeds both */
    n2 = n1;
    nb = n1b;
  } else if (arch->post_norm) {
    n2 = tape_ref(&R->tp, h1);
    nb = r;
  } else {
    n2 = norm(R, h1, r, &nb);
  }
  const bool sparse = arch->experts && R->l >= arch->dense_layers;
  if (sparse) {
    mo = experts(R, n2, nb, stop);
  } else {
    mo = mlp(R, n2, nb, T, R->z->I, false, stop);
  }
  rel(R, n2);
  mo = branch_out(R, dropout(R, mo, arch->hidden_dropout));
  uint32_t sum = 0; /* parallel: (mlp + attn) + x, the temporaries go after */
  if (arch->parallel_residual)
    sum = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {mo, at}, .pass = TAPE_ADD});
  uint32_t out =
      op(R, (struct tape_op){.out_bytes = T * h * r, .in = {h1, sum ? sum : mo}, .pass = TAPE_ADD});
  rel(R, sum);
  rel(R, mo);
  if (arch->parallel_residual) rel(R, at);
  rel(R, h1);
  rel(R, held); /* the layer returns */
  R->tp.no_alloc = false;
  return out;
}

/* a BERT-style encoder layer, the norms after the residual adds:
 * LN(x + dropout(attn(x))), then LN(h + dropout(mlp(h))) (modeling_bert.py
 * BertSelfOutput, BertOutput; DistilBERT's sa_layer_norm and
 * output_layer_norm); Python's reference to x is taken over */
static uint32_t post_ln_layer(struct run *R, uint32_t x, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, r = R->z->r;
  uint64_t nb;
  uint32_t held = 0;
  R->lin = 0;
  uint32_t at = dropout(R, attention(R, x, r, &held), arch->hidden_dropout);
  uint32_t s1 = join(R, T * h * r, x, at, TAPE_ADD);
  uint32_t h1 = norm(R, s1, r, &nb);
  rel(R, s1);
  uint32_t mo = dropout(R, mlp(R, h1, nb, T, R->z->I, false, stop), arch->hidden_dropout);
  uint32_t s2 = join(R, T * h * vl__max(nb, r), h1, mo, TAPE_ADD);
  uint64_t ob;
  uint32_t out = norm(R, s2, vl__max(nb, r), &ob);
  rel(R, s2);
  rel(R, held);
  R->tp.no_alloc = false;
  return out;
}

/* a convolution (autocast: in its dtype) of x into out_elems elements,
 * its batch norm (saves its input: the convolution's output; its own
 * output goes on), and a ReLU that saves its output, or none (relu false:
 * the output returned as the norm's) (modeling_resnet.py ResNetConvLayer) */
static uint32_t conv_bn(struct run *R, uint32_t x, uint64_t xb, uint64_t out_elems, uint64_t in_ch,
                        uint64_t out_ch, uint64_t k, bool relu) {
  const uint64_t e = R->z->e, wb = R->z->wb;
  uint32_t w = base_param(R, out_ch * in_ch * k * k * wb);
  const bool trained = R->tp.t[w].rg;
  uint32_t cast = 0, in = x, wc = 0;
  if (R->z->autocast) {
    wc = op(R, (struct tape_op){.out_bytes = out_ch * in_ch * k * k * 2, .in = {w}});
    if (trained) push(&R->p, &R->cached, wc);
    w = wc;
    if (xb != e)
      in = cast = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes / xb * e, .in = {x}});
  }
  uint32_t c = op(R, (struct tape_op){.out_bytes = out_elems * e,
                                      .in = {in, w},
                                      .saved = {in, R->z->autocast ? w : 0},
                                      .mm = true});
  rel(R, cast);
  if (!trained) rel(R, wc);
  uint32_t bn = op(R, (struct tape_op){.out_bytes = out_elems * e, .in = {c}, .saved = {c}});
  rel(R, c);
  if (!relu) return bn;
  uint32_t y = op(R, (struct tape_op){.out_bytes = out_elems * e, .in = {bn}, .save_out = true});
  rel(R, bn);
  return y;
}

/* ResNet on the pixels: the stem (7x7 convolution of stride 2, max pool
 * of stride 2 saving its int64 indices), the stages of blocks (a
 * bottleneck's 1x1, 3x3 with the stage's stride, 1x1; a basic block's two
 * 3x3), the shortcut where the width or the stride changes, the residual
 * added in place, the ReLU after it; the average pool: B x width
 * (modeling_resnet.py ResNetEmbeddings, ResNetBottleNeckLayer,
 * ResNetBasicLayer) */
static uint32_t resnet(struct run *R, uint32_t px, uint64_t pxb) {
  const struct vl_arch *A = R->arch;
  const uint64_t B = R->z->B, e = R->z->e;
  uint64_t side = A->image_size / 2;
  uint32_t x =
      conv_bn(R, px, pxb, B * A->stem_width * side * side, A->channels, A->stem_width, 7, true);
  side /= 2;
  uint32_t idx = tape_new(&R->tp, B * A->stem_width * side * side * 8);
  uint32_t mp =
      op(R, (struct tape_op){
                .out_bytes = B * A->stem_width * side * side * e, .in = {x}, .saved = {x, idx}});
  rel(R, idx);
  rel(R, x);
  x = mp;
  uint64_t in = A->stem_width;
  for (uint64_t s = 0; s < A->stages && !R->p.failed; s++) {
    const uint64_t out = A->stage_width[s], st = s > 0 || A->stride_first ? 2 : 1;
    for (uint64_t l = 0; l < A->stage_depth[s] && !R->p.failed; l++) {
      const uint64_t cin = l ? out : in, str = l ? 1 : st, so = side / str;
      uint32_t res = tape_ref(&R->tp, x);
      if (!l && (cin != out || str != 1)) {
        rel(R, res);
        res = conv_bn(R, x, e, B * out * so * so, cin, out, 1, false);
      }
      uint32_t y;
      if (A->bottleneck) {
        const uint64_t red = out / 4;
        uint32_t a = conv_bn(R, x, e, B * red * side * side, cin, red, 1, true);
        uint32_t b = conv_bn(R, a, e, B * red * so * so, red, red, 3, true);
        rel(R, a);
        y = conv_bn(R, b, e, B * out * so * so, red, out, 1, false);
        rel(R, b);
      } else {
        uint32_t a = conv_bn(R, x, e, B * out * so * so, cin, out, 3, true);
        y = conv_bn(R, a, e, B * out * so * so, out, out, 3, false);
        rel(R, a);
      }
      rel(R, x);
      uint32_t sum = join(R, B * out * so * so * e, y, res, TAPE_ADD);
      x = op(R,
             (struct tape_op){.out_bytes = B * out * so * so * e, .in = {sum}, .save_out = true});
      rel(R, sum);
      if (!l) side = so;
    }
    in = out;
  }
  uint32_t pooled = op(R, (struct tape_op){.out_bytes = B * in * e, .in = {x}});
  rel(R, x);
  return pooled;
}

/* what an encoder's embeddings add to the word embeddings x (T x h): the
 * token types' and the learned positions' sums, then a LayerNorm
 * (BertEmbeddings, DistilBERT's, ModernBERT's norm); ViT's patches are a
 * convolution of the pixels, the [CLS] token concatenated, the positions
 * added (ViTEmbeddings). Decoders: x itself. */
static uint32_t encoder_embeddings(struct run *R, uint32_t x) {
  const struct vl_arch *arch = R->arch;
  if (arch->causal || arch->family == VL_FAM_T5) return x;
  const uint64_t Th = R->T * R->z->h, r = R->z->r;
  if (arch->family == VL_FAM_RESNET) {
    const uint64_t pix = R->z->B * arch->channels * arch->image_size * arch->image_size;
    uint32_t px = tape_frozen(&R->tp, pix * R->z->wb); /* the loop's pixel_values */
    rel(R, x);
    uint32_t y = resnet(R, px, R->z->wb);
    rel(R, px);
    return y;
  }
  if (arch->family == VL_FAM_VIT) {
    const uint64_t pix = R->z->B * arch->channels * arch->image_size * arch->image_size;
    uint32_t px = tape_frozen(&R->tp, pix * R->z->wb); /* the loop's pixel_values */
    uint32_t pe =
        linear_w(R,
                 base_param(R, arch->hidden * arch->channels * arch->patch_size * arch->patch_size *
                                   R->z->wb),
                 px, R->z->wb, R->T - R->z->B, arch->channels * arch->patch_size * arch->patch_size,
                 arch->hidden, true);
    rel(R, px);
    rel(R, x);
    uint32_t cat = op(R, (struct tape_op){.out_bytes = Th * r, .in = {pe}});
    rel(R, pe);
    uint32_t y = op(R, (struct tape_op){.out_bytes = Th * r, .in = {cat}, .pass = TAPE_ADD});
    rel(R, cat);
    return y;
  }
  int adds = (arch->type_vocab > 0) + (arch->learned_pos && arch->family != VL_FAM_MODERNBERT);
  for (int i = 0; i < adds; i++) {
    uint32_t y = op(R, (struct tape_op){.out_bytes = Th * r, .in = {x}, .pass = TAPE_ADD});
    rel(R, x);
    x = y;
  }
  uint64_t ob;
  uint32_t n = norm(R, x, r, &ob);
  rel(R, x);
  if (arch->family == VL_FAM_DEBERTA_V2) { /* DebertaV2Embeddings: * mask */
    uint32_t m = op(R, (struct tape_op){.out_bytes = R->tp.t[n].bytes, .in = {n}});
    rel(R, n);
    n = m;
  }
  return n;
}

/* the masked-LM head's transform before the decoder: dense, GELU (saves
 * its input), LayerNorm (BertPredictionHeadTransform, RobertaLMHead,
 * DistilBERT's vocab_transform, ModernBertPredictionHead); x taken over */
static uint32_t mlm_transform(struct run *R, uint32_t x, uint64_t *xb) {
  if (R->arch->causal || R->arch->family == VL_FAM_VIT || R->arch->stages) return x;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e;
  if (R->arch->enc_layers) {
    if (R->arch->family != VL_FAM_T5 || !R->arch->tie_embeddings) return x;
    /* T5 with tied embeddings: sequence_output * d_model^-0.5 */
    uint32_t sc = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
    rel(R, x);
    return sc;
  }
  R->lin = 1u << 30; /* no LoRA adapter on the head */
  uint32_t d = linear(R, x, *xb, T, h, h, true);
  rel(R, x);
  uint32_t g = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {d}, .saved = {d}});
  rel(R, d);
  uint32_t n = norm(R, g, e, xb);
  rel(R, g);
  return n;
}

/* what the head does to its logits: Gemma 2's final softcapping (/ cap,
 * tanh saving its output, * cap; modeling_gemma2.py Gemma2ForCausalLM),
 * Granite's / logits_scaling: new tensors of the logits' size */
static uint32_t logits_out(struct run *R, uint32_t lg) {
  const uint64_t n = R->tp.t[lg].bytes;
  if (R->arch->final_softcap > 0) {
    uint32_t c0 = op(R, (struct tape_op){.out_bytes = n, .in = {lg}});
    rel(R, lg);
    uint32_t c1 = op(R, (struct tape_op){.out_bytes = n, .in = {c0}, .save_out = true});
    rel(R, c0);
    lg = op(R, (struct tape_op){.out_bytes = n, .in = {c1}});
    rel(R, c1);
  } else if (R->arch->logits_scaled || R->arch->family == VL_FAM_BART) {
    /* (BART: + final_logits_bias) */
    uint32_t c = op(R, (struct tape_op){.out_bytes = n, .in = {lg}});
    rel(R, lg);
    lg = c;
  }
  return lg;
}

/* the residual add of a branch y to x (taken over), then, post-norm, its
 * norm (BART) */
static uint32_t add_branch(struct run *R, uint32_t x, uint32_t y, bool post, uint64_t *nb) {
  const uint64_t Thr = R->T * R->z->h * R->z->r;
  uint32_t s = join(R, Thr, x, dropout(R, y, R->arch->hidden_dropout), TAPE_ADD);
  *nb = R->z->r;
  if (!post) return s;
  uint32_t n = norm(R, s, R->z->r, nb);
  rel(R, s);
  return n;
}

/* the input of a pre-norm branch (its norm) or of a post-norm one (x) */
static uint32_t branch_in(struct run *R, uint32_t x, bool post, uint64_t *nb) {
  if (post) {
    *nb = R->z->r;
    return tape_ref(&R->tp, x);
  }
  return norm(R, x, R->z->r, nb);
}

/* a decoder layer of an encoder-decoder: self-attention, cross-attention
 * to the encoder's output enc, the MLP, each a residual branch (T5:
 * T5LayerSelfAttention, T5LayerCrossAttention, T5LayerFF, pre-norm; BART:
 * self_attn, encoder_attn, fc1/fc2, each followed by its LayerNorm) */
static uint32_t xdec_layer(struct run *R, uint32_t x, uint32_t enc, uint64_t encb) {
  const bool post = R->arch->family == VL_FAM_BART;
  uint32_t held = 0, held2 = 0;
  uint64_t nb;
  R->lin = 0;
  uint32_t n1 = branch_in(R, x, post, &nb);
  uint32_t at = attention(R, n1, nb, &held);
  rel(R, n1);
  uint32_t h1 = add_branch(R, x, at, post, &nb);
  uint32_t n2 = branch_in(R, h1, post, &nb);
  R->kv_src = enc, R->kv_srcb = encb;
  uint32_t ct = attention(R, n2, nb, &held2);
  R->kv_src = 0;
  rel(R, n2);
  uint32_t h2 = add_branch(R, h1, ct, post, &nb);
  uint32_t n3 = branch_in(R, h2, post, &nb);
  uint32_t mo = mlp(R, n3, nb, R->T, R->z->I, false, false);
  rel(R, n3);
  uint32_t out = add_branch(R, h2, mo, post, &nb);
  rel(R, held);
  rel(R, held2);
  return out;
}

/* an encoder-decoder's encoder on x (its embeddings, taken over), then its
 * decoder's embeddings and layers: the decoder's output; *x0d: the
 * decoder's embedding output (its gradient is dropped as the encoder's) */
static uint32_t seq2seq(struct run *R, uint32_t x, uint32_t *x0d) {
  const struct vl_arch *arch = R->arch;
  const uint64_t Thr = R->T * R->z->h * R->z->r;
  R->causal = false;
  for (uint64_t l = 0; l < arch->enc_layers && !R->p.failed; l++) {
    R->l = l;
    x = arch->family == VL_FAM_BART ? post_ln_layer(R, x, false) : layer(R, x, false);
  }
  uint64_t encb = R->z->r;
  uint32_t enc = x;
  if (arch->family == VL_FAM_T5) { /* the encoder's final_layer_norm and its dropout */
    uint32_t n = norm(R, x, R->z->r, &encb);
    rel(R, x);
    enc = dropout(R, n, arch->hidden_dropout);
  }
  *x0d = base_trained(R) ? tape_new(&R->tp, Thr) : tape_const(&R->tp, Thr);
  uint32_t y = dropout(R, encoder_embeddings(R, tape_ref(&R->tp, *x0d)), arch->embed_dropout);
  R->causal = true;
  for (uint64_t l = 0; l < arch->layers && !R->p.failed; l++) {
    R->l = l;
    y = xdec_layer(R, y, enc, encb);
  }
  rel(R, enc);
  return y;
}

/* the model output goes: its logits and the KV cache it holds */
static void drop_output(struct run *R, uint32_t logits) {
  if (R->out32 != NONE)
    F(&R->p, &R->out32); /* accelerate: the output holds an fp32 copy instead */
  else
    rel(R, logits);
  for (size_t i = 0; i < R->kv.n; i++)
    rel(R, R->kv.h[i]);
  R->kv.n = 0;
}

vl_status vl__train_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl__train_sizes *z, struct vl_cache_stats *out,
                           struct vl_err *err) {
  struct vl_cache_conf conf = {0, 0, 0, z->expandable};
  struct run R = {.p = {NULL, false}, .arch = arch, .z = z, .out32 = NONE};
  if (vl_cache_new(&conf, &R.p.c) != VL_OK) return vl__fail(err, VL_ENOMEM, "out of memory");
  /* autograd's thread makes its cuBLAS workspace at its first matmul, the
   * head's, after the head's weight gradient (Gemma-2B's and Pythia-1.4B's
   * histories: bench/results/2026-11-29-h200x2-nccl-run/part9-histories,
   * part3-train-histories) */
  R.tp =
      (struct tape){.p = &R.p, .ws_bytes = z->workspace, .ws = NONE, .on_grad = on_leaf, .ctx = &R};
  R.T = z->T;
  R.a = arch->heads;
  R.g = arch->kv_heads ? arch->kv_heads : arch->heads;
  R.d = arch->head_dim ? arch->head_dim : arch->hidden / (arch->heads ? arch->heads : 1);
  R.dv = arch->mla ? arch->v_head_dim : R.d;
  R.causal = arch->causal;
  /* the logits: every token's, a ViT's [CLS] token's only */
  const bool vision = arch->family == VL_FAM_VIT || arch->family == VL_FAM_RESNET;
  const uint64_t rows_out = vision ? z->B : z->T;
  const uint64_t L = arch->layers, Th = z->T * z->h, TV = rows_out * z->V, e = z->e;
  const bool tied = arch->tie_embeddings && (arch->causal || !vision);
  struct list model = {0}, states = {0}, tmp = {0};
  uint32_t *kept = vl_calloc(L + 1, sizeof *kept); /* checkpoints' inputs */
  if (!kept) {
    vl_cache_destroy(R.p.c);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }

  /* the model, tensor by tensor, then the fp32 master copy (mixed-*). A
   * tied head is built as a matrix of its own and dropped when transformers
   * ties it to the embedding (a model built on the GPU, as measure.py
   * does: its block stays cached; Qwen2's and Gemma's histories) */
  model_wide(&R.p, arch, inv, z->wb, 1, &model);
  /* a vision model's pixel_values, held by the loop (in the weights'
   * dtype, as measure.py makes them) */
  uint32_t pixels =
      vision ? A(&R.p, z->B * arch->channels * arch->image_size * arch->image_size * z->wb) : NONE;
  if (tied) {
    uint32_t untied = A(&R.p, z->V * z->h * z->wb);
    F(&R.p, &untied);
  }
  if (z->mb) model_wide(&R.p, arch, inv, z->mb, 1, &model);
  if (z->lora_rank) adapters(&R.p, arch, z, z->ab, 1, &model); /* get_peft_model */
  uint32_t ws1 = NONE;
  /* DDP and ZeRO-1: every parameter's elements, in the model's order */
  uint64_t *esz = NULL;
  size_t np = 0, *mine = NULL, nmine = 0;
  struct list buckets = {0}, old = {0};
  if (z->ddp) {
    np = param_elems(arch, inv, &esz);
    if (!esz) R.p.failed = true;
    if (!R.p.failed) ddp_init(&R.p, esz, np, z, &buckets);
  }
  if (z->zero1_ranks && !R.p.failed) {
    mine = vl_calloc(np + 1, sizeof *mine);
    nmine = mine ? zero1_share(esz, np, z->zero1_ranks, mine) : SIZE_MAX;
    if (nmine == SIZE_MAX) {
      R.p.failed = true;
      nmine = 0;
    }
  }

  for (int step = 0; step < STEPS && !R.p.failed; step++) {
    if (z->ddp && step == 1) {
      /* _rebuild_buckets in the second forward: buckets of 25 MiB in the
       * order the gradients arrived (the parameters' reverse). The first
       * ones are freed there, or (kept) at the second step's first
       * all-reduce, in its backward (docs/model.md, DDP's two outcomes) */
      old = buckets;
      buckets = (struct list){0};
      if (!z->ddp_kept) drop(&R.p, &old);
      flat_groups(&R.p, esz, np, z->gb, true, 25ull << 20, &buckets);
    }
    /* ---- forward (under autocast) ---- */
    R.tp.grad = !z->ckpt;
    /* the embeddings' output (frozen under LoRA: it needs no gradient) */
    /* (vision: the pixels, which the loop holds, instead) */
    const uint64_t eb = vision ? 0 : Th * z->r;
    const uint32_t x0 = base_trained(&R) ? tape_new(&R.tp, eb) : tape_const(&R.tp, eb);
    uint32_t x = encoder_embeddings(&R, tape_ref(&R.tp, x0));
    x = dropout(&R, x, arch->embed_dropout);
    rel(&R, x0);
    if (arch->embed_scaled) {
      /* Gemma scales the embeddings by sqrt(h) (Granite by
       * embedding_multiplier): a new tensor, the
       * unscaled one freed at once (
       * bench/results/2026-11-29-h200x2-replay-histories/part4-unseen6/embed-probe.txt: allocations
       * #0, #1, #3) */
      uint32_t xs = op(&R, (struct tape_op){.out_bytes = Th * z->r, .in = {x}});
      rel(&R, x);
      x = xs;
    }
    if (ws1 == NONE) ws1 = A(&R.p, z->workspace);
    /* the 4-D causal mask, in the model's dtype */
    uint32_t mask =
        z->eager && arch->causal ? A(&R.p, z->B * z->P * z->P * vl__max(z->wb, e)) : NONE;
    uint32_t x0d = 0; /* an encoder-decoder's decoder embeddings */
    if (arch->enc_layers) x = seq2seq(&R, x, &x0d);
    for (uint64_t l = 0; l < L && !arch->enc_layers && !arch->stages && !R.p.failed; l++) {
      if (z->ckpt) kept[l] = tape_ref(&R.tp, x); /* the checkpoint keeps its input */
      R.l = l;
      x = vl_arch_post_ln(arch) ? post_ln_layer(&R, x, false) : layer(&R, x, false);
    }
    /* the head: the final norm, the head (a tied one is the embedding
     * matrix), the logits (held by the output), the loss: ForCausalLMLoss's
     * fp32 upcast, log_softmax's output */
    R.tp.grad = true;
    uint32_t head_from = R.tp.nn;
    uint64_t nb = z->r;
    uint32_t fn = x;
    if (arch->final_norm) {
      fn = norm(&R, x, z->r, &nb);
      rel(&R, x);
    }
    fn = mlm_transform(&R, fn, &nb);
    uint32_t head = base_param(&R, z->V * z->h * z->wb);
    R.tied_leaf = tied && base_trained(&R) ? head : 0;
    R.tied_grad = NONE;
    uint32_t cls = vision ? tape_view(&R.tp, fn, rows_out * z->h * nb) : tape_ref(&R.tp, fn);
    rel(&R, fn);
    uint32_t logits = linear_w(&R, head, cls, nb, rows_out, z->h, z->V, arch->head_bias || vision);
    rel(&R, cls);
    logits = logits_out(&R, logits);
    /* the loss. ForCausalLMLoss upcasts the logits (logits.float()):
     * log_softmax and nll_loss in fp32, log_softmax's output saved. An
     * encoder's CrossEntropyLoss runs log_softmax in the logits' dtype
     * (saved) and, under autocast, nll_loss on its fp32 list casts that to
     * fp32 (the copy saved by nll_loss); backward: nll's dense gradient, its
     * cast back, log_softmax's backward in the logits' dtype (RoBERTa AMP's
     * allocator history, bench/results/model-types-unseen/
     * type-peaks-large.json: events 10642-10817) */
    /* (ModernBERT's masked LM calls transformers' ForMaskedLMLoss, which
     * upcasts as the causal loss does: loss_utils.py) */
    const bool upcast = arch->causal || arch->family == VL_FAM_MODERNBERT;
    const bool mlm_amp = !upcast && z->autocast && e < 4;
    const uint64_t lb = upcast || z->autocast ? 4 : e;
    uint32_t up = NONE, logp, n32 = NONE;
    if (mlm_amp) {
      logp = A(&R.p, TV * e);
      n32 = A(&R.p, TV * 4);
    } else {
      up = e < lb ? A(&R.p, TV * lb) : NONE;
      logp = A(&R.p, TV * lb);
      F(&R.p, &up);
    }
    if (z->outputs_fp32 && e < 4) {
      /* accelerate's convert_outputs_to_fp32 (mixed precision): the model's
       * output carries an fp32 copy of the logits; the half ones, saved by
       * nothing, go (bench/results/loops/) */
      R.out32 = A(&R.p, TV * 4);
      rel(&R, logits);
    }
    uncache(&R); /* autocast exits: its cache goes (saved copies stay) */
    F(&R.p, &mask);
    if (z->drop_outputs) drop_output(&R, logits); /* the loop keeps only the loss */

    /* ---- backward ---- */
    if (z->grads_late) drop(&R.p, &R.grads); /* Lightning's closure: zero_grad() */
    uint32_t gl;
    if (mlm_amp) {
      uint32_t g1 = A(&R.p, TV * 4);
      F(&R.p, &n32);
      uint32_t gh = A(&R.p, TV * e);
      F(&R.p, &g1);
      gl = tape_new(&R.tp, TV * e);
      F(&R.p, &gh);
      F(&R.p, &logp);
    } else {
      /* nll's dense gradient and log_softmax's, both fp32, then the cast
       * of the latter to the logits' dtype */
      uint32_t g1 = A(&R.p, TV * lb), g2 = tape_new(&R.tp, TV * lb);
      F(&R.p, &g1);
      F(&R.p, &logp);
      gl = g2;
      if (e < lb) {
        gl = tape_new(&R.tp, TV * e);
        rel(&R, g2);
      }
    }
    R.tp.t[logits].grad = gl;
    tape_backward(&R.tp, head_from);
    tape_truncate(&R.tp, head_from);
    drop(&R.p, &old); /* the first all-reduce: kept first buckets go */
    for (uint64_t l = L; z->ckpt && l-- > 0 && !R.p.failed;) {
      /* the layer's forward again, with autograd, then its backward; the
       * gradient of its output is the next layer's input's */
      uint32_t next = l + 1 < L ? kept[l + 1] : x;
      uint32_t from = R.tp.nn;
      R.l = l;
      uint32_t y = vl_arch_post_ln(arch) ? post_ln_layer(&R, tape_ref(&R.tp, kept[l]), true)
                                         : layer(&R, tape_ref(&R.tp, kept[l]), true);
      uncache(&R);
      R.tp.t[y].grad = R.tp.t[next].grad;
      R.tp.t[next].grad = 0;
      tape_backward(&R.tp, from);
      tape_truncate(&R.tp, from);
      rel(&R, y);
      if (l + 1 < L) rel(&R, kept[l + 1]);
    }
    if (z->ckpt) { /* the first checkpoint's input holds the last gradient */
      uint32_t gk = R.tp.t[kept[0]].grad;
      R.tp.t[kept[0]].grad = 0;
      rel(&R, kept[0]);
      rel(&R, gk);
    } else {
      tape_backward(&R.tp, 0);
    }
    /* the embeddings' output's gradient (without checkpointing), once they
     * have used it */
    uint32_t g0 = R.tp.t[x0].grad, g0d = x0d ? R.tp.t[x0d].grad : 0;
    R.tp.t[x0].grad = 0;
    if (x0d) R.tp.t[x0d].grad = 0;
    /* the embeddings' gradients. A tied matrix's two meet at its
     * AccumulateGrad node: the head's waited in its input buffer, the sum
     * (out of place) becomes .grad (torch/csrc/autograd/input_buffer.cpp) */
    for (int i = 0; i < inv->n && !R.p.failed && base_trained(&R); i++) {
      const struct vl_tensor *t = &inv->t[i];
      if (t->kind != VL_T_EMBED) continue;
      if (tied && t->rows == z->V) {
        uint64_t b = t->rows * t->cols * z->wb;
        uint32_t g = A(&R.p, b), s = A(&R.p, b);
        F(&R.p, &g);
        F(&R.p, &R.tied_grad);
        grad(&R, s, b);
      } else {
        for (uint64_t k = 0; k < t->count; k++)
          grad(&R, A(&R.p, t->rows * t->cols * z->wb), t->rows * t->cols * z->wb);
      }
    }

    rel(&R, g0);
    rel(&R, g0d);
    rel(&R, x0d);

    /* ---- optimizer step ---- */
    if (z->zero1_ranks) { /* the states and the step of rank 0's share only */
      for (size_t k = 0; step == 0 && k < nmine; k++)
        for (unsigned j = 0; j < z->states; j++)
          block(&R.p, esz[mine[k]] * z->sb, &states);
      for (size_t k = 0; z->step_temp && k < nmine; k++)
        block(&R.p, esz[mine[k]] * z->sb, z->impl == VL_IMPL_FOREACH ? &tmp : NULL);
      drop(&R.p, &tmp);
    } else {
      if (step == 0 && z->states) trained(&R.p, arch, inv, z, z->sb, z->states, &states);
      if (z->step_temp) { /* foreach: a state-sized list; for-loop: one at a time */
        trained(&R.p, arch, inv, z, z->sb, 1, z->impl == VL_IMPL_FOREACH ? &tmp : NULL);
        drop(&R.p, &tmp);
      }
    }
    if (!z->grads_late) drop(&R.p, &R.grads);      /* zero_grad(set_to_none=True) */
    if (!z->drop_outputs) drop_output(&R, logits); /* del out */
    tape_reset(&R.tp);                             /* every tensor of the step is gone */
  }
  F(&R.p, &pixels);
  vl_cache_stats(R.p.c, out);
  bool failed = R.p.failed;
  vl_free(kept);
  vl_free(esz);
  vl_free(mine);
  vl_free(buckets.h);
  vl_free(old.h);
  vl_free(model.h);
  vl_free(states.h);
  vl_free(tmp.h);
  vl_free(R.grads.h);
  vl_free(R.cached.h);
  vl_free(R.kv.h);
  tape_free(&R.tp);
  vl_cache_destroy(R.p.c);
  if (failed)
    return vl__fail(err, VL_ENOMEM, "out of memory replaying a training step's allocations");
  return VL_OK;
}
