/* The autograd model of tape.h. */
#include "internal.h"
#include "vramledger/alloc.h"
#include "tape.h"

static bool grow(struct prog *p, void **a, uint32_t *cap, uint32_t n, size_t size) {
  if (n < *cap) return true;
  uint32_t c = *cap ? 2 * *cap : 256;
  void *x = vl_realloc(*a, (size_t)c * size);
  if (!x) {
    p->failed = true;
    return false;
  }
  *a = x;
  *cap = c;
  return true;
}

static uint32_t make(struct tape *tp, uint64_t bytes, bool alloc) {
  if (tp->t == &tp->none) return 0; /* the first array could not be had */
  if (tp->nt == 0) {                /* 0 is no tensor */
    if (!grow(tp->p, (void **)&tp->t, &tp->capt, 1, sizeof *tp->t)) {
      tp->none = (struct tape_tensor){0};
      tp->t = tp->t ? tp->t : &tp->none;
      return 0;
    }
    tp->t[0] = (struct tape_tensor){0};
    tp->nt = 1;
  }
  if (!grow(tp->p, (void **)&tp->t, &tp->capt, tp->nt, sizeof *tp->t)) return 0;
  uint32_t x = tp->nt++;
  tp->t[x] = (struct tape_tensor){
      .h = alloc && !tp->no_alloc ? A(tp->p, bytes) : NONE, .bytes = bytes, .refs = 1, .rg = true};
  return x;
}

uint32_t tape_leaf(struct tape *tp, uint64_t bytes) {
  uint32_t x = make(tp, bytes, false);
  if (x) tp->t[x].leaf = true;
  return x;
}

uint32_t tape_again(struct tape *tp, uint32_t leaf) {
  const bool rg = tp->t[leaf].rg;
  uint32_t x = tape_leaf(tp, tp->t[leaf].bytes);
  if (x) tp->t[x].rg = rg, tp->t[x].again = true;
  return x;
}

uint32_t tape_frozen(struct tape *tp, uint64_t bytes) {
  uint32_t x = tape_leaf(tp, bytes);
  if (x) tp->t[x].rg = false;
  return x;
}

uint32_t tape_new(struct tape *tp, uint64_t bytes) { return make(tp, bytes, true); }

uint32_t tape_const(struct tape *tp, uint64_t bytes) {
  uint32_t x = make(tp, bytes, true);
  if (x) tp->t[x].rg = false;
  return x;
}

uint32_t tape_ref(struct tape *tp, uint32_t x) {
  if (x && x < tp->nt) tp->t[x].refs++;
  return x;
}

uint32_t tape_view(struct tape *tp, uint32_t base, uint64_t bytes) {
  const uint32_t up = base;
  while (base && base < tp->nt && tp->t[base].base) /* a view of a view shows the first's base */
    base = tp->t[base].base;
  uint32_t x = make(tp, bytes, false);
  if (x) {
    tp->t[x].base = tape_ref(tp, base);
    tp->t[x].up = up;
    tp->t[x].rg = tp->t[base].rg;
  }
  return x;
}

uint32_t tape_slice(struct tape *tp, uint32_t in, uint64_t bytes) {
  uint32_t x = tape_view(tp, in, bytes);
  if (!x || !tp->grad || !tp->t[in].rg) return x;
  if (!grow(tp->p, (void **)&tp->n, &tp->capn, tp->nn, sizeof *tp->n)) return x;
  tp->t[x].sliced = true;
  tp->n[tp->nn++] = (struct tape_node){.out = x, .in = {in}, .nin = 1};
  return x;
}

uint32_t tape_piece(struct tape *tp, uint32_t base, uint64_t bytes) {
  uint32_t x = tape_view(tp, base, bytes);
  if (!x || !tp->grad || !tp->t[x].rg) return x;
  struct tape_tensor *b = &tp->t[base]; /* (a view's pieces are the view's) */
  if (b->leaf) return x;
  tp->t[x].next = b->pieces;
  tp->t[x].piece = true;
  b->pieces = x;
  return x;
}

void tape_drop(struct tape *tp, uint32_t x) {
  while (x && x < tp->nt && tp->t[x].refs) {
    if (--tp->t[x].refs) return;
    F(tp->p, &tp->t[x].h);
    x = tp->t[x].base; /* a view lets go of its base */
  }
}

void tape_forward_workspace(struct tape *tp) {
  if (tp->fws == NONE && tp->ws_bytes && !tp->no_alloc) tp->fws = A(tp->p, tp->ws_bytes);
}

uint32_t tape_op(struct tape *tp, const struct tape_op *op) {
  uint32_t out = tape_new(tp, op->out_bytes);
  if (!out) return out;
  /* at::mm allocates the output, then the thread's cuBLAS handle, made at
   * its first use, takes its workspace (CUDABlas.cpp, getCurrentCUDABlasHandle):
   * OPT-1.3B's history has q_proj's output, then the 32 MiB block */
  if (op->mm && !op->conv) tape_forward_workspace(tp);
  bool rg = false;
  for (int i = 0; i < TAPE_IN; i++)
    rg = rg || (op->in[i] && tp->t[op->in[i]].rg);
  tp->t[out].rg = rg;
  if (!tp->grad || !rg) return out;
  if (!grow(tp->p, (void **)&tp->n, &tp->capn, tp->nn, sizeof *tp->n)) return out;
  struct tape_node *n = &tp->n[tp->nn++];
  *n = (struct tape_node){.out = out,
                          .tmp = op->tmp,
                          .tmp2 = op->tmp2,
                          .pass = op->pass,
                          .mm = op->mm,
                          .conv = op->conv,
                          .tmp_first = op->tmp_first,
                          .cast = op->cast};
  for (int i = 0; i < TAPE_IN; i++)
    if (op->in[i] && tp->t[op->in[i]].rg)
      n->tmp_in[n->nin] = op->tmp_in[i], n->wide_in[n->nin] = op->wide_in[i],
      n->in[n->nin++] = op->in[i];
  for (int i = 0; i < TAPE_SAVED; i++)
    if (op->saved[i]) n->saved[n->nsaved++] = tape_ref(tp, op->saved[i]);
  if (op->save_out && n->nsaved < TAPE_SAVED) n->saved[n->nsaved++] = tape_ref(tp, out);
  return out;
}

static void arrive(struct tape *tp, uint32_t x, uint32_t g);

/* SplitBackward on base's pieces' gradients: their cat, of base's size,
 * then they go; the cat arrives at base */
static void join(struct tape *tp, uint32_t base) {
  bool any = false;
  for (uint32_t x = tp->t[base].pieces; x; x = tp->t[x].next)
    any = any || tp->t[x].grad;
  const uint32_t bg = any ? tape_new(tp, tp->t[base].bytes) : 0;
  for (uint32_t x = tp->t[base].pieces; x; x = tp->t[x].next) {
    tape_drop(tp, tp->t[x].grad);
    tp->t[x].grad = 0;
  }
  tp->t[base].pieces = 0;
  if (bg) arrive(tp, base, bg);
}

/* a gradient g arrives for x: the first is kept; a second is summed into
 * it in place where nothing else holds it, neither a view nor a gradient
 * that keeps a base, else out of place (input_buffer.cpp accumulate and
 * can_accumulate_inplace: use_count and storage use_count both one); a
 * view's (but a slice's, which has a node of its own) goes into its
 * base's gradient (one base-sized buffer) */
static void arrive(struct tape *tp, uint32_t x, uint32_t g) {
  if (tp->t[x].leaf && tp->t[x].again) { /* summed into the other use's */
    tape_drop(tp, g);
    return;
  }
  if (tp->t[x].leaf) { /* AccumulateGrad: .grad takes the block */
    uint32_t h = tp->t[g].h;
    tp->t[g].h = NONE;
    tape_drop(tp, g);
    if (tp->on_grad) tp->on_grad(tp->ctx, x, h, tp->t[g].bytes);
    return;
  }
  uint32_t base = tp->t[x].base;
  if (base && !tp->t[x].sliced && !tp->t[x].piece) {
    if (tp->t[tp->t[x].up].piece) base = tp->t[x].up; /* a view of a piece: the piece's */
    if (!tp->t[base].grad) { /* tape_new may move tp->t: its result first */
      uint32_t bg = tape_new(tp, tp->t[base].bytes);
      tp->t[base].grad = bg;
    }
    tape_drop(tp, g); /* copied into it */
    return;
  }
  if (!tp->t[x].grad) {
    tp->t[x].grad = g;
    return;
  }
  const struct tape_tensor *old = &tp->t[tp->t[x].grad];
  if (old->refs == 1 && !old->base && !old->reshaped) { /* old_var.add_(var) */
    tape_drop(tp, g);
    return;
  }
  uint32_t sum = tape_new(tp, tp->t[x].bytes); /* old_var + var */
  tape_drop(tp, tp->t[x].grad);
  tape_drop(tp, g);
  tp->t[x].grad = sum;
}

void tape_also_saves(struct tape *tp, uint32_t out, uint32_t x) {
  struct tape_node *n = tp->nn ? &tp->n[tp->nn - 1] : NULL;
  if (n && out && n->out == out && n->nsaved < TAPE_SAVED) n->saved[n->nsaved++] = tape_ref(tp, x);
}

void tape_backward(struct tape *tp, uint32_t from) {
  for (uint32_t k = tp->nn; k-- > from && !tp->p->failed;) {
    struct tape_node n = tp->n[k]; /* tape_new may move tp->t, not tp->n */
    if (tp->t[n.out].pieces) join(tp, n.out);
    uint32_t g = tp->t[n.out].grad;
    if (!g) continue; /* nothing flowed back to it */
    tp->t[n.out].grad = 0;
    uint32_t gin[TAPE_IN] = {0}, early = NONE;
    if (n.tmp && n.tmp_first) early = A(tp->p, n.tmp);
    for (int i = 0; i < n.nin; i++) {
      uint64_t b = tp->t[n.in[i]].bytes;
      uint32_t wide = n.wide_in[i] ? A(tp->p, n.wide_in[i]) : NONE;
      if (n.pass == TAPE_SLICES)
        gin[i] = tape_view(tp, g, b);
      else if (n.pass == TAPE_ADD && b == tp->t[g].bytes)
        gin[i] = tape_ref(tp, g);
      else if ((gin[i] = tape_new(tp, b)) && n.mm && !n.conv && !n.cast && !n.wide_in[i])
        tp->t[gin[i]].reshaped = true;
      F(tp->p, &wide);
      if (n.mm && tp->ws == NONE && tp->ws_bytes) tp->ws = A(tp->p, tp->ws_bytes);
      if (n.tmp_in[i]) {
        uint32_t t = A(tp->p, n.tmp_in[i]);
        F(tp->p, &t);
      }
    }
    if (n.tmp && n.tmp_first) {
      F(tp->p, &early);
    } else if (n.tmp) {
      uint32_t t = A(tp->p, n.tmp);
      if (n.tmp2) {
        uint32_t t2 = A(tp->p, n.tmp2);
        F(tp->p, &t2);
      }
      F(tp->p, &t);
    }
    for (int i = 0; i < n.nsaved; i++)
      tape_drop(tp, n.saved[i]);
    tape_drop(tp, g);
    for (int i = 0; i < n.nin; i++)
      arrive(tp, n.in[i], gin[i]);
  }
}

void tape_truncate(struct tape *tp, uint32_t from) {
  if (from < tp->nn) tp->nn = from;
}

void tape_reset(struct tape *tp) { tp->nt = tp->nn = 0; }

void tape_free(struct tape *tp) {
  if (tp->t != &tp->none) vl_free(tp->t);
  vl_free(tp->n);
  tp->t = NULL;
  tp->n = NULL;
  tp->nt = tp->capt = tp->nn = tp->capn = 0;
}
