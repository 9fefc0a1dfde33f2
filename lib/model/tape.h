/* A small model of autograd for the training replay (train_replay.c): the
 * tensors a forward makes, who keeps them (Python's variables and the
 * nodes that save them for backward), and what a node's backward
 * allocates and lets go, in the order PyTorch's engine does it
 * (torch/csrc/autograd/engine.cpp, input_buffer.cpp): the nodes in
 * reverse order of creation (the engine runs the ready node of the highest
 * sequence number first); a node allocates its inputs' gradients in their
 * order (a linear without bias: the weight's first, mm's derivative; with
 * bias, addmm's: the input's first), then its backward's temporary; then
 * its saved tensors and its output's gradient are released; an input's
 * second gradient is summed into the first in place where nothing else
 * holds that, else out of place (InputBuffer::accumulate); a
 * parameter's (a leaf's) gradient is handed over (AccumulateGrad steals
 * it as .grad). The allocations go through the caching-allocator model
 * (prog.h). */
#ifndef VRAMLEDGER_MODEL_TAPE_H
#define VRAMLEDGER_MODEL_TAPE_H
#include "prog.h"

#define TAPE_IN 3
#define TAPE_SAVED 6

struct tape_tensor {
  uint32_t h;     /* the allocator model's handle (NONE: small pool or none) */
  uint64_t bytes; /* its size */
  uint32_t refs;  /* Python's reference + the nodes that saved it */
  uint32_t grad;  /* the tensor of its pending gradient, or 0 */
  uint32_t base;  /* a view: the tensor whose storage it shows (0: none) */
  bool leaf;      /* a parameter: its gradient is handed to on_grad */
  bool rg;        /* requires grad: a trained parameter or what one made */
  bool again;     /* a parameter's second use (tape_again) */
  /* a matmul's gradient of its input: the folded 2-d gradient reshaped
   * back, a view that keeps its base (LinearAlgebra.cpp _matmul_impl;
   * ViewBackward), so a second gradient is summed out of place */
  bool reshaped;
  bool sliced; /* a view with a backward node of its own (tape_slice) */
  /* a base split into pieces (tape_piece): its first piece, each piece
   * the next; a piece takes its gradients as any tensor does, and
   * SplitBackward joins them in one of the base's size */
  uint32_t pieces, next;
  bool piece;  /* one of those pieces */
  uint32_t up; /* a view: the tensor it was made of (base: that one's base) */
};

struct tape_node {
  uint32_t out;
  uint32_t in[TAPE_IN];       /* inputs that need a gradient */
  uint32_t saved[TAPE_SAVED]; /* tensors saved for backward */
  uint64_t tmp;               /* one backward temporary, bytes (0: none) */
  uint64_t tmp2;              /* a scratch made and freed while tmp is held */
  uint64_t tmp_in[TAPE_IN];   /* a scratch made and freed after each gradient */
  uint64_t wide_in[TAPE_IN];  /* each gradient first made wider, then cast */
  uint8_t nin, nsaved;
  uint8_t pass; /* TAPE_ADD, TAPE_SLICES or 0 (tape_op) */
  bool mm;
  bool conv;      /* a convolution: its input's gradient is cuDNN's own */
  bool tmp_first; /* the temporary is made before the inputs' gradients */
  bool cast;      /* a dtype cast: its input's gradient is a copy */
};

/* the gradient of parameter `leaf` (the allocator model's handle, `bytes`)
 * arrives: the callee keeps the block (train_replay.c's on_leaf()) */
typedef void (*tape_grad_fn)(void *ctx, uint32_t leaf, uint32_t handle, uint64_t bytes);

/* how a node's inputs get their gradients: allocated (0); the output's
 * gradient itself where the sizes agree (TAPE_ADD: add, no-op casts);
 * views of it (TAPE_SLICES: cat) */
enum { TAPE_ADD = 1, TAPE_SLICES = 2 };

struct tape {
  struct prog *p;
  bool grad;     /* autograd records (torch.is_grad_enabled()) */
  bool no_alloc; /* a checkpoint's recomputation stopped early: record only */
  /* autograd's thread makes a cuBLAS workspace of ws_bytes at its first
   * matmul (after the first gradient of the first matmul node) */
  uint64_t ws_bytes;
  uint32_t ws;
  /* the forward's thread makes its own, of ws_bytes too, at its first
   * matmul, after that matmul's output (tape_forward_workspace) */
  uint32_t fws;
  struct tape_tensor *t; /* t[0] is no tensor: all zero */
  /* t while the first array cannot be had (the replay has failed): the
   * readers of t[x] then see no tensor, never a null array */
  struct tape_tensor none;
  uint32_t nt, capt;
  struct tape_node *n;
  uint32_t nn, capn;
  tape_grad_fn on_grad;
  void *ctx;
};

/* Tensors are numbered from 1; 0 is no tensor (and ends the lists below). */
/* a new tensor of `bytes` held by Python (one reference) */
uint32_t tape_new(struct tape *tp, uint64_t bytes);
/* a parameter of `bytes` (its storage is not the tape's) */
uint32_t tape_leaf(struct tape *tp, uint64_t bytes);
/* parameter `leaf` used a second time (DeBERTa's query_proj on the
 * relative embeddings): its gradient there is summed into the other
 * use's before AccumulateGrad takes one (InputBuffer::accumulate), so it
 * goes as it arrives */
uint32_t tape_again(struct tape *tp, uint32_t leaf);
/* a frozen parameter (requires_grad=False: LoRA's base) */
uint32_t tape_frozen(struct tape *tp, uint64_t bytes);
/* a new tensor that needs no gradient (a frozen embedding's output) */
uint32_t tape_const(struct tape *tp, uint64_t bytes);
/* a view of `base` (no storage of its own; it keeps base alive): a
 * reshape, or what a backward hands on (cat's pieces); its gradient lands
 * in one base-sized gradient of base (a piece's view: the piece's). Slices
 * and a split's pieces: tape_slice, tape_piece */
uint32_t tape_view(struct tape *tp, uint32_t base, uint64_t bytes);
/* a slice of `in` (x[..., a:b], or a transpose that a reshape will copy):
 * a view of it whose backward is a node of its own, SliceBackward's: a
 * zero tensor of in's size the gradient is copied into, which arrives at
 * in (FunctionsManual.cpp slice_backward; a copy of the same size for the
 * transpose) */
uint32_t tape_slice(struct tape *tp, uint32_t in, uint64_t bytes);
/* a piece of `base` (split, chunk, unbind: x.split(n, -1)): a view that
 * takes its gradients as any tensor does; they are joined in one of
 * base's size (SplitBackward's cat, then the pieces' go) right before
 * base's own node, where the engine runs SplitBackward once every piece's
 * gradient is in (a piece of a parameter: the view's way of tape_view) */
uint32_t tape_piece(struct tape *tp, uint32_t base, uint64_t bytes);
/* Python takes another reference to x (a no-op cast returns x itself) */
uint32_t tape_ref(struct tape *tp, uint32_t x);
/* Python lets go of x (0: nothing) */
void tape_drop(struct tape *tp, uint32_t x);
/* an operation: its output of out_bytes; `in` need gradients (in this
 * order; those that require none are left out); `saved` are kept for its
 * backward; `tmp`: a temporary of its backward; `pass`: how its inputs'
 * gradients are made; `mm`: a matmul. Returns the output, which requires
 * grad when an input does; the node is recorded only while grad is on and
 * some input requires grad. */
struct tape_op {
  uint64_t out_bytes;
  uint32_t in[TAPE_IN];
  uint32_t saved[TAPE_SAVED];
  uint64_t tmp;
  /* a scratch made and freed while tmp is held: the partials of tmp's
   * reduction (a weight's gradient summed over the rows, cuda_reduce.c) */
  uint64_t tmp2;
  /* a scratch made and freed right after in[i]'s gradient (cuDNN's
   * workspaces of a convolution's input and weight gradients) */
  uint64_t tmp_in[TAPE_IN];
  /* in[i]'s gradient made first in `wide_in[i]` bytes (the op's dtype,
   * or a factor of it), then cast to in[i]'s: the wide one goes once the
   * cast exists, which is a fresh copy a second gradient is summed into
   * in place (engine.cpp validate_outputs, input_buffer.cpp accumulate) */
  uint64_t wide_in[TAPE_IN];
  uint8_t pass;
  bool save_out; /* it saves its own output (softmax, SDPA, tanh) */
  bool mm;
  bool conv;      /* the matmul is cuDNN's convolution: no cuBLAS workspace */
  bool tmp_first; /* its backward makes tmp first and frees it after the
                   * gradients (index's zeros, then index_put_'s result) */
  bool cast;      /* a dtype cast (autocast's, .to()): ToCopyBackward0 */
};
uint32_t tape_op(struct tape *tp, const struct tape_op *op);
/* the forward's thread's cuBLAS workspace, made at its first matmul (once) */
void tape_forward_workspace(struct tape *tp);
/* the last node, the one that made out, also saves x: a second output it
 * keeps for its backward (SDPA's log-sum-exp, made after its output) */
void tape_also_saves(struct tape *tp, uint32_t out, uint32_t x);
/* back-propagate the nodes recorded from `from` on, the last first; the
 * gradient of each node's output must be pending on it */
void tape_backward(struct tape *tp, uint32_t from);
/* forget the nodes from `from` on (after their backward) */
void tape_truncate(struct tape *tp, uint32_t from);
/* forget every tensor and node (their storage stays for the next step) */
void tape_reset(struct tape *tp);
void tape_free(struct tape *tp);

#endif
