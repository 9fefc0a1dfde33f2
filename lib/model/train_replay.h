/* The training replay's internals, shared by its files (vl__tr_: the
 * training replay). The replay and why it is one: train_replay.c.
 *
 *   train_replay.c            the step: forward, head and loss, backward,
 *                             optimizer step, three times over
 *   train_replay_params.c     the blocks outside autograd: the model's
 *                             tensors, LoRA's adapters, optimizer states,
 *                             DDP's buckets, ZeRO-1's share
 *   train_replay_modules.c    the modules every family uses: linear (and
 *                             LoRA on it), dropout
 *   train_replay_lp.c         the layer programs' interpreter (lp.h); the
 *                             norms (lp_norm.c), the embeddings (lp_embed.c)
 *   train_replay_attention.c  attention: q/k/v (fused, MLA, cross), rotary,
 *                             the KV cache copies, eager, SDPA's kernels
 *   train_replay_decoder.c    the pre-norm layer, its MLP and MoE experts
 *   train_replay_encoder.c    BERT-like encoders: the post-norm
 *                             layer, the masked-LM head's transform
 *   train_replay_deberta.c    DeBERTa-v3's disentangled self-attention
 *   train_replay_seq2seq.c    T5 and BART: the encoder, then the decoder
 *                             with cross-attention
 *   train_replay_vision.c     ViT's patches, ResNet's convolutions */
#ifndef VRAMLEDGER_MODEL_TRAIN_REPLAY_H
#define VRAMLEDGER_MODEL_TRAIN_REPLAY_H
#include "internal.h"
#include "tape.h"

/* blocks that live and die together */
struct list {
  uint32_t *h;
  size_t n, cap;
};

/* the replay's state */
struct run {
  struct prog p;
  struct tape tp;
  const struct vl_arch *arch;
  const struct vl__train_sizes *z;
  uint64_t T, a, g, d; /* tokens, query and key/value heads, head size */
  uint64_t P, Pk;      /* query and key tokens a sequence (an encoder-decoder's
                          decoder: its own; cross-attention's keys: the encoder's) */
  uint64_t dv;         /* value head size (MLA: v_head_dim; else d) */
  uint64_t l;          /* the layer being run */
  bool causal;         /* the stack being run is a decoder (mask, KV cache) */
  uint32_t kv_src;     /* cross-attention: the encoder's output k and v come from (0: self) */
  uint64_t kv_srcb;    /* its bytes an element */
  struct list grads;   /* the parameters' .grad, until zero_grad */
  struct list cached;  /* autocast's cached weight copies (tape tensors) */
  struct list kv;      /* the KV cache the output holds (tape tensors) */
  uint32_t tied_leaf;  /* the tied head's weight (tape tensor) */
  uint32_t dec_leaf;   /* an encoder-decoder's shared embedding as its decoder looks it up
                          (tape tensor; 0: none) */
  uint32_t tied_grad;  /* its gradient, waiting for the embedding's (handle) */
  unsigned lin;        /* the layer's linears made so far (LoRA's targets) */
  bool stop_in_linear; /* a checkpoint's recomputation ends in the next linear */
  bool stop_at_mm;     /* ... at the next matmul's saving its inputs */
  uint32_t out32;      /* accelerate's fp32 copy of the output's logits (NONE: none) */
  bool accumulating;   /* a micro-batch after the first: gradients add into .grad */
  /* an encoder-decoder under checkpointing: the first node recorded
   * between its stacks, the encoder's last layer's output, the decoder's
   * cross-attention source (the checkpoints keep it) */
  uint32_t s2s_mid, enc_last, enc;
  uint64_t encb;
  /* T5's position biases (1 x heads x queries x keys): the encoder's, the
   * decoder's, its cross-attention's zeros (0: not made yet); bias_re: a
   * checkpoint's recomputation of a stack's first layer makes them again */
  uint32_t bias[3], bias_re[3];
  /* Python's references that outlive their use where no node saves the
   * tensor (LoRA's frozen linears save no input): */
  bool keep_act;    /* vl__tr_mlp hands its down projection's input to act */
  uint32_t act;     /* BERT's intermediate_output, held to the layer's end (tape tensor) */
  uint32_t enc_in;  /* an encoder's embedding output, held to its last layer (tape tensor) */
  uint32_t dec_in;  /* T5's decoder's embedding output, held to its stack's return (tape tensor) */
  uint32_t seq_out; /* a masked LM's sequence_output, held to its loss (tape tensor) */
  uint32_t mb_in;   /* ModernBERT's embedding output, held past the final norm (tape tensor) */
  /* the input embeddings' output made a leaf (vl__tr_inputs_leaf) and its
   * .grad, held by the graph until the loss goes (tape tensors; 0: none) */
  uint32_t in_leaf, in_grad;
};

static inline uint32_t op(struct run *R, struct tape_op o) { return tape_op(&R->tp, &o); }

/* the base model's parameters train, unless LoRA freezes them */
static inline bool base_trained(const struct run *R) { return !R->z->lora_rank; }

/* a parameter of the base model (its embedding, a linear, the head) */
static inline uint32_t base_param(struct run *R, uint64_t bytes) {
  return base_trained(R) ? tape_leaf(&R->tp, bytes) : tape_frozen(&R->tp, bytes);
}
static inline void rel(struct run *R, uint32_t x) { tape_drop(&R->tp, x); }

/* a checkpointed layer's backward: its recomputed output y takes the
 * gradient pending on the checkpoint's output `next`, the nodes recorded
 * since `from` run and are dropped, y goes */
static inline void vl__tr_layer_backward(struct run *R, uint32_t y, uint32_t next, uint32_t from) {
  R->tp.t[y].grad = R->tp.t[next].grad;
  R->tp.t[next].grad = 0;
  tape_backward(&R->tp, from);
  tape_truncate(&R->tp, from);
  rel(R, y);
}

/* a and b joined into `bytes` (an add: TAPE_ADD; a cat: TAPE_SLICES);
 * Python lets go of both */
static inline uint32_t join(struct run *R, uint64_t bytes, uint32_t a, uint32_t b, uint8_t pass) {
  uint32_t y = op(R, (struct tape_op){.out_bytes = bytes, .in = {a, b}, .pass = pass});
  rel(R, a);
  rel(R, b);
  return y;
}

/* ---- train_replay_params.c: blocks outside the tape ---- */

/* h (NONE: nothing) onto l; failing to grow l fails the program */
void vl__tr_push(struct prog *p, struct list *l, uint32_t h);
/* free a list's blocks, the last made first */
void vl__tr_drop(struct prog *p, struct list *l);
/* a block of `bytes` onto l, or (l NULL) made and freed at once */
void vl__tr_block(struct prog *p, uint64_t bytes, struct list *l);
/* every tensor of the model, in order, one block of elems * bytes each,
 * `times` over; onto l (NULL: made and freed at once) */
void vl__tr_model_wide(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                       uint64_t bytes, unsigned times, struct list *l);
/* LoRA's adapters, layer by layer, likewise */
void vl__tr_adapters(struct prog *p, const struct vl_arch *arch, const struct vl__train_sizes *z,
                     uint64_t bytes, unsigned times, struct list *l);
/* what the optimizer updates, likewise: every parameter, or LoRA's adapters */
void vl__tr_trained(struct prog *p, const struct vl_arch *arch, const struct vl_inventory *inv,
                    const struct vl__train_sizes *z, uint64_t bytes, unsigned times,
                    struct list *l);
/* every parameter's elements, in the model's order, into *out (the
 * caller frees it; NULL: out of memory); returns how many */
size_t vl__tr_param_elems(const struct vl_arch *arch, const struct vl_inventory *inv,
                          uint64_t **out);
/* flat buffers of the n tensors of v (elements, b bytes each), each closed
 * at `cap` bytes or more, in the given direction; onto l (NULL: made and
 * freed at once) */
void vl__tr_flat_groups(struct prog *p, const uint64_t *v, size_t n, uint64_t b, bool reverse,
                        uint64_t cap, struct list *l);
/* DDP's construction: its broadcast buffers, its first bucket onto buckets */
void vl__tr_ddp_init(struct prog *p, const uint64_t *v, size_t n, const struct vl__train_sizes *z,
                     struct list *buckets);
/* ZeRO-1's share of rank 0 (indices into v, into mine: n of them at most);
 * returns how many, SIZE_MAX when out of memory */
size_t vl__tr_zero1_share(const uint64_t *v, size_t n, uint64_t ranks, size_t *mine);

/* ---- train_replay_modules.c: linear, dropout ---- */

/* x (rows x in_f, xb bytes an element) through a linear whose weight is
 * the parameter w; its output */
uint32_t vl__tr_linear_w(struct run *R, uint32_t w, uint32_t x, uint64_t xb, uint64_t rows,
                         uint64_t in_f, uint64_t out_f, bool bias);
/* the same with a parameter of its own: a layer's next linear (LoRA's
 * adapter on it where it is a target) */
uint32_t vl__tr_linear(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t in_f,
                       uint64_t out_f, bool bias);
/* the layer's k-th linear (z->lin[k]) with its weight w on x (rows x
 * in_f, xb bytes): LoRA's adapter where it is a target */
uint32_t vl__tr_linear_k(struct run *R, uint32_t w, unsigned k, uint32_t x, uint64_t xb,
                         uint64_t rows, uint64_t in_f, uint64_t out_f, bool bias);
/* autocast exits (or a recomputation ends): its cached copies go */
void vl__tr_uncache(struct run *R);
/* dropout of x (taken over, in the activations' dtype) with probability
 * prob (0: x itself) */
uint32_t vl__tr_dropout(struct run *R, uint32_t x, double prob);
/* the same on x of xb bytes an element (the mask a byte an element) */
uint32_t vl__tr_dropout_of(struct run *R, uint32_t x, double prob, uint64_t xb);

/* ---- train_replay_lp.c: layer programs ---- */

struct lp;
struct lp_dims;
/* p (lp.h) over x (rows x its input's columns, xb bytes an element), d its
 * sizes; stop: a checkpoint's recomputation ends at the line marked so;
 * its last tensor; tensors (NULL: not wanted, else LP_MAX of them) each
 * of its tensors, for the caller to take those p->out and p->held name */
uint32_t vl__tr_lp(struct run *R, const struct lp *p, uint32_t x, uint64_t xb,
                   const struct lp_dims *d, bool stop, uint32_t *tensors);
/* the backward of p's loss lines (lp.h LP_LOSS), t its tensors from
 * vl__tr_lp: their gradients; returns the logits' (pending) */
uint32_t vl__tr_lp_loss_backward(struct run *R, const struct lp *p, const uint32_t *t);
/* the token embeddings of R->T tokens (lp_embed.c), the words' table
 * `width` wide, their lookup a node of w (0: none; an encoder-decoder's
 * decoder's: the shared matrix); held: the caller keeps the words' lookup
 * (*x0) past their return; the output */
uint32_t vl__tr_embed(struct run *R, uint32_t w, bool held, uint64_t width, uint32_t *x0);
/* a norm over `width` of x (rows x width, xb bytes an element); *ob: its
 * output's bytes an element */
uint32_t vl__tr_norm_w(struct run *R, uint32_t x, uint64_t xb, uint64_t rows, uint64_t width,
                       uint64_t *ob);
/* a norm of x (T x h) */
uint32_t vl__tr_norm(struct run *R, uint32_t x, uint64_t xb, uint64_t *ob);

/* ---- train_replay_attention.c ---- */

/* the attention on n1 (T x h, nb bytes an element): its o_proj's output;
 * *held: what it returns beside it (eager's weights, 0 for SDPA) */
uint32_t vl__tr_attention(struct run *R, uint32_t n1, uint64_t nb, uint32_t *held);
/* train_replay_deberta.c: DeBERTa-v3's self-attention on x (T x h, xb
 * bytes an element); its context (T x h), before attention.output */
uint32_t vl__tr_deberta_self(struct run *R, uint32_t x, uint64_t xb);
/* whether the job's DeBERTa attention is that: DeBERTa-v3's
 * (share_att_key), not under autocast. Under autocast the earlier
 * description stays (disentangled() in train_replay_attention.c): with
 * this one deberta3-amp-adamw-eager (8 x 512) went from -2.2 to -12.5 %
 * reserved (allocated +1.4 to +0.2 %): the H200 held 2.9 GB of inactive
 * split blocks at its peak, which neither replays, though this one
 * agrees with the CPU dry runs at 2 x 384, 2 x 512 and 4 x 256 within
 * 0.2 % reserved (the earlier one: -1.8 to +7 %) and moves
 * du-deberta3-amp-adamw-eager-b4s384 from +3.7 to +0.1 % */
static inline bool vl__tr_deberta_replayed(const struct run *R) {
  return R->arch->rel_att && !R->arch->rel_pos_proj && !R->z->autocast;
}

/* ---- train_replay_decoder.c ---- */

/* the MLP of width I on rows x h (n2, nb bytes an element); moe: an
 * expert; stop: a checkpoint's recomputation ends at its down projection */
uint32_t vl__tr_mlp(struct run *R, uint32_t n2, uint64_t nb, uint64_t rows, uint64_t I, bool moe,
                    bool stop);
/* one pre-norm (decoder) layer on x, taken over; its output */
uint32_t vl__tr_layer(struct run *R, uint32_t x, bool stop);

/* ---- train_replay_encoder.c ---- */

/* a BERT-style post-norm layer on x, taken over; its output */
uint32_t vl__tr_post_ln_layer(struct run *R, uint32_t x, bool stop);
/* the masked-LM head's transform of x (taken over; *xb its bytes an
 * element, updated); other heads: x itself */
uint32_t vl__tr_mlm_transform(struct run *R, uint32_t x, uint64_t *xb);

/* ---- train_replay_seq2seq.c ---- */

/* an encoder-decoder's encoder on x (taken over), then its decoder: the
 * decoder's output; *x0d: the decoder's embedding output; kept (under
 * checkpointing): each layer's input, the encoder's first */
uint32_t vl__tr_seq2seq(struct run *R, uint32_t x, uint32_t *x0d, uint32_t *kept);
/* under checkpointing, the backward of both stacks from the decoder's
 * output out: each decoder layer recomputed, then the nodes between the
 * stacks, then each encoder layer; the encoder's first input's gradient is
 * left pending */
void vl__tr_seq2seq_backward(struct run *R, uint32_t *kept, uint32_t out);

/* ---- train_replay_t5.c ---- */

/* T5's position bias of the attention being run: made by each stack's
 * first layer (again by its recomputation); 0 elsewhere */
void vl__tr_t5_bias(struct run *R);
static inline uint32_t t5_bias(const struct run *R) {
  return R->arch->rel_bias ? R->bias[R->kv_src ? 2 : R->causal] : 0;
}
/* transformers 5's gradient_checkpointing_enable makes the input
 * embeddings' output require grad (enable_input_require_grads,
 * modeling_utils.py, for every model whose main input is input_ids; PEFT's
 * _prepare_model_for_gradient_checkpointing does the same), which matters
 * where the embeddings are frozen (LoRA): the output is then a leaf that
 * requires grad, what follows it outside the checkpoints is recorded, and
 * the first layer's backward makes its input's gradient. An
 * encoder-decoder's lookups are replayed so under any training */
static inline bool vl__tr_inputs_grad(const struct run *R) {
  return R->z->ckpt && (R->arch->enc_layers || (!base_trained(R) && !vl_arch_is_vision(R->arch)));
}
/* ... and where that output is a leaf of a decoder or an encoder, its
 * AccumulateGrad node holds it, and its gradient as .grad, until the loop
 * lets go of the loss (vl__tr_embed: R->in_leaf, R->in_grad) */
static inline bool vl__tr_inputs_leaf(const struct run *R) {
  return vl__tr_inputs_grad(R) && !R->arch->enc_layers;
}
/* T5 under SDPA: its self-attention's mask is its position bias,
 * relative_attention_bias(...).permute([2, 0, 1]) (the decoder's passed
 * through torch.where with the causal pattern, which keeps that layout),
 * whose last dimension is not contiguous: no fused kernel takes it
 * (sdp_utils.cpp check_last_dim_stride_equals_1_dense) and the math
 * backend runs, in any dtype, trained or frozen. The cross-attention's
 * mask (zeros) is contiguous: the memory-efficient kernel, which takes a
 * mask that requires grad */
static inline bool vl__tr_t5_math(const struct run *R) { return R->arch->rel_bias && !R->kv_src; }
/* T5's attention under SDPA, on its position bias as the mask: PyTorch's
 * math backend; its output (B x s x heads x d, contiguous) */
uint32_t vl__tr_t5_sdpa(struct run *R, uint32_t q, uint32_t k, uint32_t v);
/* The math backend's softmax is _safe_softmax (rows wholly masked give 0,
 * not NaN): beside softmax's output it makes scores.eq(-inf), a bool per
 * score, and its all() over each row, both freed before the op goes on
 * (aten/src/ATen/native/SoftMax.cpp _safe_softmax; measured on an H100:
 * Falcon-7B's 142 MiB mask per layer at batch 2 x 1024, 71 heads,
 * bench/results/reserved/history). Its backward allocates the scores'
 * gradient and one temporary of the same size (.tmp at the call). */
static inline void vl__tr_safe_softmax_masks(struct run *R, uint32_t scores, uint64_t sc) {
  uint32_t masked = op(R, (struct tape_op){.out_bytes = sc, .in = {scores}});
  uint32_t rows = op(R, (struct tape_op){.out_bytes = sc / R->Pk, .in = {masked}});
  rel(R, rows);
  rel(R, masked);
}

/* ---- train_replay_vision.c ---- */

/* a ViT's or ResNet's embeddings of the pixels in place of x (taken over) */
uint32_t vl__tr_vision_embeddings(struct run *R, uint32_t x);

#endif
