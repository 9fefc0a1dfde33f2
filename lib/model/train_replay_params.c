/* The training replay's blocks outside autograd's tape (train_replay.h):
 * the model's tensors (and its master copy), LoRA's adapters, the
 * optimizer's states and its step's temporaries, one block per tensor in
 * the inventory's order; DDP's flat buffers and buckets, and the share of
 * the parameters whose states ZeRO-1 keeps on rank 0. */
#include <stdlib.h>
#include <string.h>

#include "train_replay.h"
#include "pytorch_constants.h"
#include "vramledger/alloc.h"

/* h onto l (NONE, or a failed program: nothing) */
void vl__tr_push(struct prog *p, struct list *l, uint32_t h) {
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
void vl__tr_drop(struct prog *p, struct list *l) {
  while (l->n) {
    uint32_t h = l->h[--l->n];
    F(p, &h);
  }
}

/* a block of `bytes` onto l, or (l NULL) made and freed at once */
void vl__tr_block(struct prog *p, uint64_t bytes, struct list *l) {
  uint32_t h = A(p, bytes);
  if (l)
    vl__tr_push(p, l, h);
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
    uint64_t fused = vl__expert_part(arch, t);
    if (fused == UINT64_MAX) continue; /* w3: in w1's gate_up_proj */
    if (fused) {                       /* a sparse layer's routed experts: one 3-D parameter */
      uint64_t sparse = arch->layers - arch->dense_layers;
      uint64_t n = w >= (int)arch->dense_layers && sparse ? t->count / sparse : 0;
      for (unsigned j = 0; n && j < times; j++)
        vl__tr_block(p, fused * n * t->rows * t->cols * bytes, l);
      continue;
    }
    for (uint64_t k = 0, n = vl__count_in(arch, t, w); k < n; k++)
      for (unsigned j = 0; j < times; j++)
        vl__tr_block(p, t->rows * t->cols * bytes, l);
  }
}

/* every tensor of the model, in order */
void vl__tr_model_wide(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       uint64_t bytes, unsigned times, struct list *l) {
  per_tensor(p, arch, inv, VL_BEFORE_LAYERS, bytes, times, l);
  for (uint64_t k = 0; k < arch->layers; k++)
    per_tensor(p, arch, inv, (int)k, bytes, times, l);
  per_tensor(p, arch, inv, VL_AFTER_LAYERS, bytes, times, l);
}

/* LoRA's adapters, layer by layer (lora_A, lora_B of each target), one
 * block of `bytes` an element each, `times` over; onto l (NULL: made and
 * freed at once). An encoder-decoder's linears come as often as the
 * inventory counts them (both stacks', cross-attention's) */
void vl__tr_adapters(struct prog *p, const struct vl_arch *arch, const struct vl__train_sizes *z,
                     uint64_t bytes, unsigned times, struct list *l) {
  uint64_t L = arch->layers;
  for (unsigned i = 0; arch->enc_layers && i < z->n_lin; i++)
    L = vl__max(L, z->lin[i].count);
  for (uint64_t k = 0; k < L && !p->failed; k++)
    for (unsigned i = 0; i < z->n_lin; i++)
      for (unsigned j = 0; z->lin[i].adapted && j < 2 * times; j++)
        if (!arch->enc_layers || k < z->lin[i].count)
          vl__tr_block(p, z->lora_rank * (j % 2 ? z->lin[i].out : z->lin[i].in) * bytes, l);
}

/* what the optimizer updates: every parameter, or LoRA's adapters */
void vl__tr_trained(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                    const struct vl__train_sizes *z, uint64_t bytes, unsigned times,
                    struct list *l) {
  if (z->lora_rank)
    vl__tr_adapters(p, arch, z, bytes, times, l);
  else
    vl__tr_model_wide(p, arch, inv, bytes, times, l);
}

/* ---- DDP ---- */

/* every parameter's elements, in the model's order */
size_t vl__tr_param_elems(const struct vl_arch *arch, const struct vl_inventory *inv,
                          uint64_t **out) {
  size_t n = 0, cap = 0;
  uint64_t *v = NULL;
  for (int w = VL_BEFORE_LAYERS; w < (int)arch->layers + 1; w++) {
    int where = w == (int)arch->layers ? VL_AFTER_LAYERS : w;
    for (int i = 0; i < inv->n; i++) {
      const struct vl_tensor *t = &inv->t[i];
      for (uint64_t k = 0, c = vl__count_in(arch, t, where); k < c; k++) {
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
void vl__tr_flat_groups(struct prog *p, const uint64_t *v, size_t n, uint64_t b, bool reverse,
                        uint64_t cap, struct list *l) {
  uint64_t at = 0;
  for (size_t k = 0; k < n; k++) {
    at += v[reverse ? n - 1 - k : k] * b;
    if (at >= cap || k + 1 == n) {
      vl__tr_block(p, at, l);
      at = 0;
    }
  }
}

/* DDP's construction: the module's states broadcast from rank 0 through
 * 250 MiB flat buffers, freed at once (_sync_module_states), then one
 * bucket for every gradient: not a static graph, so the first step's
 * bucket is unlimited (GPT-2 on 2 H200s: 270,938,112 and 226,821,120 B,
 * then 497,759,232 B, every rank's allocator history: bench/results/
 * nccl-run/probe-tp-ddp/) */
void vl__tr_ddp_init(struct prog *p, const uint64_t *v, size_t n, const struct vl__train_sizes *z,
                     struct list *buckets) {
  vl__tr_flat_groups(p, v, n, z->wb, false, VL_PT_DDP_BROADCAST_BUCKET, NULL);
  uint64_t all = 0;
  for (size_t k = 0; k < n; k++)
    all += v[k];
  vl__tr_block(p, all * z->gb, buckets);
}

/* ZeRO-1's share of rank 0 (torch's ZeroRedundancyOptimizer): the
 * parameters from the largest down (ties in the model's order), each to
 * the rank with the fewest elements so far (ties: the lowest rank); rank
 * 0's, in that order, into mine (indices into v). Returns how many.
 * The ranks wait in a heap by (load, rank): only the first min(ranks, n)
 * can ever get one (all start empty and the lowest takes the tie). */
struct rank_load {
  uint64_t load, rank;
};

static bool lighter(const struct rank_load *a, const struct rank_load *b) {
  return a->load < b->load || (a->load == b->load && a->rank < b->rank);
}

static void sift_down(struct rank_load *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && lighter(&h[l], &h[m])) m = l;
    if (r < n && lighter(&h[r], &h[m])) m = r;
    if (m == i) return;
    struct rank_load t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

struct sized {
  uint64_t v;
  size_t k;
};

static int largest_first(const void *a, const void *b) {
  const struct sized *x = a, *y = b;
  if (x->v != y->v) return x->v < y->v ? 1 : -1;
  return x->k < y->k ? -1 : x->k > y->k;
}

size_t vl__tr_zero1_share(const uint64_t *v, size_t n, uint64_t ranks, size_t *mine) {
  size_t h = ranks < n ? (size_t)ranks : n;
  struct sized *order = vl_calloc(n + 1, sizeof *order);
  struct rank_load *heap = vl_calloc(h + 1, sizeof *heap);
  size_t m = 0;
  if (!order || !heap) {
    vl_free(order);
    vl_free(heap);
    return SIZE_MAX;
  }
  for (size_t k = 0; k < n; k++)
    order[k] = (struct sized){v[k], k};
  qsort(order, n, sizeof *order, largest_first);
  for (size_t r = 0; r < h; r++) /* in rank order: a heap already */
    heap[r] = (struct rank_load){0, r};
  for (size_t k = 0; k < n; k++) {
    if (heap[0].rank == 0) mine[m++] = order[k].k;
    heap[0].load += order[k].v;
    sift_down(heap, h, 0);
  }
  vl_free(order);
  vl_free(heap);
  return m;
}
