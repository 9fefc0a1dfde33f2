/* What the caching allocator reserves for a training loop: the allocations
 * of two steps of one GPU's loop (forward under autocast, backward,
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
 * 2026-11-29-h200x2-session7/part3-train-histories: the allocator's own
 * histories, which the allocator model replays to the byte). The sequence
 * is the skeleton of those histories: parameters, gradients, states and the
 * optimizer's temporaries tensor by tensor; each layer's saved activations
 * in blocks of its natural sizes (fp32 norm tensors T*h*4, attention
 * tensors T*h*e, MLP tensors T*I*e); the loss's blocks as transformers'
 * ForCausalLMLoss makes them. Blocks of 1 MiB or less (the small pool) are
 * left out. */
#include "internal.h"
#include "vramledger/alloc.h"
#include "prog.h"

/* the first step creates the optimizer's states, the second makes anew
 * what they carved up; a third moves six of the 84 measured runs by 0.2 to
 * 5.5 points, all within tolerance (bench/results/2026-11-29-h200x2-
 * session7/replay-steps.txt) */
#define STEPS 2

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

/* `bytes` as blocks of `unit` (the last one the remainder) */
static void blocks(struct prog *p, struct list *l, uint64_t bytes, uint64_t unit) {
  if (!unit) unit = bytes ? bytes : 1;
  while (bytes && !p->failed) {
    uint64_t b = bytes < unit ? bytes : unit;
    push(p, l, A(p, b));
    bytes -= b;
  }
}

/* one layer's saved activations: two norms (fp32 tensors of T*h), the
 * attention's (T*h*e), the MLP's (T*I*e, the rest T*h*e) */
static void layer_saved(struct prog *p, struct list *l, const struct vl__act *act,
                        const struct vl__train_sizes *z) {
  uint64_t Th = z->T * z->h, TI = z->T * z->I;
  uint64_t mlp_I = TI ? act->mlp / (TI * z->e) * (TI * z->e) : 0;
  blocks(p, l, act->norm, Th * 4);
  blocks(p, l, act->attn, Th * z->e);
  blocks(p, l, act->norm, Th * 4);
  blocks(p, l, mlp_I, TI * z->e);
  blocks(p, l, act->mlp - mlp_I, Th * z->e);
}

enum where { BEFORE = -1, AFTER = -2 }; /* outside the layers: embeddings; final norm, head */

/* how many tensors of inventory entry t belong to layer w (or, w < 0, to
 * the part outside the layers where t lies) */
static uint64_t count_in(const struct vl_arch *arch, const struct vl_tensor *t, int w) {
  if (t->per_layer) return w >= 0 && arch->layers ? t->count / arch->layers : 0;
  return w == (t->kind == VL_T_EMBED ? BEFORE : AFTER) ? t->count : 0;
}

/* one block of elems * bytes per tensor, `times` over, for the tensors of
 * layer `w` (or outside the layers), in the inventory's order; matmul
 * weights only with `linear`; onto l (NULL: made and freed at once). A
 * tied head is the embedding matrix: it counts once, before the layers. */
static void per_tensor(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       int w, bool linear, uint64_t bytes, unsigned times, struct list *l) {
  for (int i = 0; i < inv->n && !p->failed; i++) {
    const struct vl_tensor *t = &inv->t[i];
    if (linear && t->kind != VL_T_LINEAR && t->kind != VL_T_HEAD) continue;
    for (uint64_t k = 0, n = count_in(arch, t, w); k < n; k++)
      for (unsigned j = 0; j < times; j++) {
        uint32_t h = A(p, t->rows * t->cols * bytes);
        if (l)
          push(p, l, h);
        else
          F(p, &h);
      }
  }
}

/* every tensor of the model, in order */
static void model_wide(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       uint64_t bytes, unsigned times, struct list *l) {
  per_tensor(p, arch, inv, BEFORE, false, bytes, times, l);
  for (uint64_t k = 0; k < arch->layers; k++)
    per_tensor(p, arch, inv, (int)k, false, bytes, times, l);
  per_tensor(p, arch, inv, AFTER, false, bytes, times, l);
}

/* a gradient of elems; with fp32 main gradients (mixed-*) a hook copies
 * autograd's half one to fp32 and drops it */
static void grad(struct prog *p, const struct vl__train_sizes *z, uint64_t elems,
                 struct list *grads) {
  if (z->mb && z->gb > z->wb) { /* fp32 main gradients of half weights */
    uint32_t g = A(p, elems * z->wb), m = A(p, elems * z->gb);
    F(p, &g);
    push(p, grads, m);
    return;
  }
  push(p, grads, A(p, elems * z->gb));
}

static void grads_of(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                     const struct vl__train_sizes *z, int w, struct list *grads) {
  for (int i = 0; i < inv->n && !p->failed; i++) {
    const struct vl_tensor *t = &inv->t[i];
    for (uint64_t k = 0, n = count_in(arch, t, w); k < n; k++)
      grad(p, z, t->rows * t->cols, grads);
  }
}

vl_status vl__train_replay(const struct vl_arch *arch, const struct vl_inventory *inv,
                           const struct vl__act *act, const struct vl__train_sizes *z,
                           struct vl_cache_stats *out, struct vl_err *err) {
  struct vl_cache_conf conf = {0, 0, 0, z->expandable};
  struct prog p = {NULL, false};
  if (vl_cache_new(&conf, &p.c) != VL_OK) return vl__fail(err, VL_ENOMEM, "out of memory");
  const uint64_t L = arch->layers, Th = z->T * z->h, TV = z->T * z->V, e = z->e;
  const bool tied = arch->tie_embeddings && arch->causal;
  const uint64_t TIe = z->T * z->I * e, bwd_mlp = TIe ? act->layer_bwd_tmp / TIe * TIe : 0;
  struct list *layer = vl_calloc(L + 1, sizeof *layer); /* [L]: the head's */
  struct list model = {0}, states = {0}, casts = {0}, grads = {0}, tmp = {0};
  if (!layer) {
    vl_cache_destroy(p.c);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }

  /* the model, tensor by tensor, then the fp32 master copy (mixed-*) */
  model_wide(&p, arch, inv, z->wb, 1, &model);
  if (z->mb) model_wide(&p, arch, inv, z->mb, 1, &model);
  uint32_t ws1 = NONE, ws2 = NONE;

  for (int step = 0; step < STEPS && !p.failed; step++) {
    /* ---- forward (under autocast) ---- */
    uint32_t hs = A(&p, Th * z->r); /* the embeddings' output */
    if (ws1 == NONE) ws1 = A(&p, z->workspace);
    for (uint64_t l = 0; l < L && !p.failed; l++) {
      /* autocast's copies of the layer's weights: saved by the linears, or
       * (recomputed) only cached until autocast exits */
      if (z->autocast) per_tensor(&p, arch, inv, (int)l, true, 2, 1, z->ckpt ? &casts : &layer[l]);
      layer_saved(&p, &layer[l], act, z);
      uint32_t t = A(&p, act->layer_fwd_tmp);
      F(&p, &t);
      if (z->ckpt) { /* only the checkpoint's input stays */
        drop(&p, &layer[l]);
        push(&p, &layer[l], A(&p, act->layer_kept));
      }
    }
    /* the head: its cast (a tied head casts the embedding matrix), the final
     * norm, the head's input, the logits (held by the output), the loss:
     * ForCausalLMLoss's fp32 upcast, log_softmax's output */
    struct list *hd = &layer[L];
    if (z->autocast && tied) push(&p, hd, A(&p, z->V * z->h * 2));
    if (z->autocast) per_tensor(&p, arch, inv, AFTER, true, 2, 1, hd);
    blocks(&p, hd, act->norm, Th * 4);
    push(&p, hd, A(&p, Th * e));
    uint32_t logits = A(&p, TV * e);
    uint32_t up = e < 4 ? A(&p, TV * 4) : NONE;
    uint32_t logp = A(&p, TV * 4);
    F(&p, &up);
    drop(&p, &casts); /* autocast exits: its cache goes */
    F(&p, &hs);

    /* ---- backward ---- */
    /* nll's dense gradient and log_softmax's, both fp32, then the cast of
     * the latter to the logits' dtype */
    uint32_t g1 = A(&p, TV * 4), g2 = A(&p, TV * 4);
    F(&p, &g1);
    F(&p, &logp);
    uint32_t gl = e < 4 ? A(&p, TV * e) : NONE;
    F(&p, &g2);
    if (tied) grad(&p, z, z->V * z->h, &grads); /* lands on the embedding */
    /* autograd's thread makes its cuBLAS workspace at its first matmul, the
     * head's, after the head's weight gradient (Gemma-2B's histories, bf16
     * and AMP: bench/results/2026-11-29-h200x2-session7/part9-histories) */
    if (ws2 == NONE) ws2 = A(&p, z->workspace);
    grads_of(&p, arch, inv, z, AFTER, &grads);
    uint32_t gh = A(&p, Th * z->r);
    F(&p, &gl);
    drop(&p, hd);
    for (uint64_t l = L; l-- > 0 && !p.failed;) {
      if (z->ckpt) { /* the layer's forward again, its casts saved this time */
        if (z->autocast) per_tensor(&p, arch, inv, (int)l, true, 2, 1, &layer[l]);
        layer_saved(&p, &layer[l], act, z);
      }
      /* the backward's temporaries, in the MLP's and the norms' sizes */
      blocks(&p, &tmp, bwd_mlp, TIe);
      blocks(&p, &tmp, act->layer_bwd_tmp - bwd_mlp, Th * 4);
      grads_of(&p, arch, inv, z, (int)l, &grads);
      uint32_t ngh = A(&p, Th * z->r);
      F(&p, &gh);
      gh = ngh;
      drop(&p, &tmp);
      drop(&p, &layer[l]);
    }
    F(&p, &gh);
    /* the embeddings' gradients (a tied matrix: computed, then accumulated) */
    for (int i = 0; i < inv->n && !p.failed; i++) {
      const struct vl_tensor *t = &inv->t[i];
      if (t->kind != VL_T_EMBED) continue;
      if (tied && t->rows == z->V) {
        uint32_t s = A(&p, t->rows * t->cols * z->gb);
        F(&p, &s);
      } else {
        for (uint64_t k = 0; k < t->count; k++)
          grad(&p, z, t->rows * t->cols, &grads);
      }
    }

    /* ---- optimizer step ---- */
    if (step == 0 && z->states) model_wide(&p, arch, inv, z->sb, z->states, &states);
    if (z->step_temp) { /* foreach: a state-sized list; for-loop: one at a time */
      model_wide(&p, arch, inv, z->sb, 1, z->impl == VL_IMPL_FOREACH ? &tmp : NULL);
      drop(&p, &tmp);
    }
    drop(&p, &grads); /* zero_grad(set_to_none=True) */
    F(&p, &logits);   /* del out */
  }
  vl_cache_stats(p.c, out);
  bool failed = p.failed;
  for (uint64_t l = 0; l <= L; l++)
    vl_free(layer[l].h);
  vl_free(layer);
  vl_free(model.h);
  vl_free(states.h);
  vl_free(casts.h);
  vl_free(grads.h);
  vl_free(tmp.h);
  vl_cache_destroy(p.c);
  if (failed)
    return vl__fail(err, VL_ENOMEM, "out of memory replaying a training step's allocations");
  return VL_OK;
}
