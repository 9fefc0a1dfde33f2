/* lib/model/tape.c: the model of autograd the training replay runs on —
 * who keeps a tensor alive, what a backward allocates and frees, on small
 * graphs whose bytes are worked out by hand (torch/csrc/autograd/engine.cpp,
 * input_buffer.cpp). */
#include "testutil.h"
#include "model/tape.h"
#include "model/internal.h"
#include "model/train_replay.h"
#include "vramledger/catalog.h"

#include <jansson.h>

#define M (1ull << 20) /* bytes (testutil.h's MiB is a double) */

struct fix {
  struct prog p;
  struct tape tp;
  uint32_t leaf_grads;
  uint64_t leaf_bytes;
};

static void on_grad(void *ctx, uint32_t leaf, uint32_t h, uint64_t bytes) {
  struct fix *f = ctx;
  (void)leaf;
  f->leaf_grads++;
  f->leaf_bytes += bytes;
  F(&f->p, &h); /* .grad would keep it; the tests only count */
}

static void setup(struct fix *f, bool grad) {
  memset(f, 0, sizeof *f);
  struct vl_cache_conf conf = {0, 0, 0, false};
  assert_int_equal(vl_cache_new(&conf, &f->p.c), VL_OK);
  f->tp = (struct tape){.p = &f->p, .grad = grad, .ws = NONE, .on_grad = on_grad, .ctx = f};
}

static void teardown(struct fix *f) {
  tape_free(&f->tp);
  vl_cache_destroy(f->p.c);
}

static uint64_t allocated(struct fix *f) {
  struct vl_cache_stats s;
  vl_cache_stats(f->p.c, &s);
  return s.allocated;
}

static uint32_t op1(struct fix *f, uint64_t bytes, uint32_t in, uint32_t saved) {
  struct tape_op o = {.out_bytes = bytes, .in = {in}, .saved = {saved}};
  return tape_op(&f->tp, &o);
}

/* Python lets go of the outputs y1 and y2 (2 MiB each), a gradient of
 * their size arrives for each, and the backward runs */
static void backward_from(struct fix *f, uint32_t y1, uint32_t y2) {
  tape_drop(&f->tp, y1);
  tape_drop(&f->tp, y2);
  f->tp.t[y1].grad = tape_new(&f->tp, 2 * M);
  f->tp.t[y2].grad = tape_new(&f->tp, 2 * M);
  tape_backward(&f->tp, 0);
}

/* a tensor a node saves outlives Python's reference until the node's
 * backward; without autograd it goes with the reference */
static void saved_tensor_lives_until_its_backward(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  uint32_t y = op1(&f, 4 * M, x, x);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 12 * M); /* x kept by y's node */
  f.tp.t[y].grad = tape_new(&f.tp, 4 * M);
  tape_backward(&f.tp, 0);
  /* y's node made x's gradient (8), freed y's gradient (4) and x (8) */
  assert_int_equal(allocated(&f), 4 * M + 8 * M);
  assert_int_not_equal(f.tp.t[x].grad, 0);
  teardown(&f);

  setup(&f, false);
  x = tape_new(&f.tp, 8 * M);
  y = op1(&f, 4 * M, x, x);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 4 * M); /* nothing recorded, x gone */
  assert_int_equal(f.tp.nn, 0);
  teardown(&f);
}

/* a tensor used twice gets two gradients: the second is added into the
 * first in place where nothing else holds it (input_buffer.cpp
 * accumulate, can_accumulate_inplace), then one remains */
static void second_gradient_summed_in_place(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  uint32_t y1 = op1(&f, 2 * M, x, 0), y2 = op1(&f, 2 * M, x, 0);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 4 * M); /* x went: no node saved it */
  backward_from(&f, y1, y2);
  struct vl_cache_stats s;
  vl_cache_stats(f.p.c, &s);
  assert_int_equal(s.allocated, 8 * M); /* x's one gradient */
  /* y2's node: x's first gradient, then y2's goes; y1's: the second
   * beside it and y1's, which goes; the second is added and goes */
  assert_int_equal(s.peak_allocated, 2 * 8 * M + 2 * M);
  teardown(&f);
}

/* a matmul's gradient of its input is a reshape of the folded product,
 * a view that keeps its base: the second is summed out of place (one more
 * block while both live) */
static void reshaped_gradient_summed_out_of_place(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  struct tape_op mm = {.out_bytes = 2 * M, .in = {x}, .mm = true};
  uint32_t y1 = tape_op(&f.tp, &mm), y2 = tape_op(&f.tp, &mm);
  tape_drop(&f.tp, x);
  backward_from(&f, y1, y2);
  struct vl_cache_stats s;
  vl_cache_stats(f.p.c, &s);
  assert_int_equal(s.allocated, 8 * M);
  /* the two gradients and their sum: three of x's size at once */
  assert_int_equal(s.peak_allocated, 3 * 8 * M);
  teardown(&f);
}

/* two slices of x (x[..., :h], x[..., h:]): each slice's backward makes a
 * zero tensor of x's size (slice_backward), the second added into the
 * first in place */
static void slices_each_make_a_gradient_of_the_input(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  uint32_t s1 = tape_slice(&f.tp, x, 4 * M), s2 = tape_slice(&f.tp, x, 4 * M);
  uint32_t y1 = op1(&f, 2 * M, s1, 0), y2 = op1(&f, 2 * M, s2, 0);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 12 * M); /* the slices keep x's storage */
  tape_drop(&f.tp, s1);
  tape_drop(&f.tp, s2);
  assert_int_equal(allocated(&f), 4 * M); /* y1 and y2 */
  backward_from(&f, y1, y2);
  struct vl_cache_stats s;
  vl_cache_stats(f.p.c, &s);
  assert_int_equal(s.allocated, 8 * M); /* x's one gradient */
  /* the slices' gradients (4 + 4), then s2's node makes x's first (8) and
   * s2's goes; s1's makes the second (8) beside s1's (4): 20 */
  assert_int_equal(s.peak_allocated, 20 * M);
  teardown(&f);
}

/* x.split(2): the pieces take their gradients as any tensor; their join
 * (SplitBackward's cat, x's size) is made right before x's own node, and
 * then they go */
static void pieces_join_before_their_base_node(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t w = tape_new(&f.tp, 8 * M);
  uint32_t x = op1(&f, 8 * M, w, 0);
  uint32_t p1 = tape_piece(&f.tp, x, 4 * M), p2 = tape_piece(&f.tp, x, 4 * M);
  uint32_t y1 = op1(&f, 2 * M, p1, 0), y2 = op1(&f, 2 * M, p2, 0);
  tape_drop(&f.tp, w);
  tape_drop(&f.tp, x);
  tape_drop(&f.tp, p1);
  tape_drop(&f.tp, p2);
  tape_drop(&f.tp, y1);
  tape_drop(&f.tp, y2);
  f.tp.t[y1].grad = tape_new(&f.tp, 2 * M);
  f.tp.t[y2].grad = tape_new(&f.tp, 2 * M);
  tape_backward(&f.tp, 1);                /* y2's and y1's nodes */
  assert_int_equal(allocated(&f), 8 * M); /* the pieces' two gradients */
  assert_int_not_equal(f.tp.t[p1].grad, 0);
  assert_int_equal(f.tp.t[x].grad, 0);
  vl_cache_reset_peaks(f.p.c);
  tape_backward(&f.tp, 0); /* the join, then x's node */
  struct vl_cache_stats s;
  vl_cache_stats(f.p.c, &s);
  assert_int_equal(s.allocated, 8 * M); /* w's gradient */
  /* the join (8) beside the pieces' (4 + 4); then w's (8) beside x's */
  assert_int_equal(s.peak_allocated, 16 * M);
  assert_int_equal(f.tp.t[p1].grad, 0);
  teardown(&f);
}

/* an fp32 tensor cast twice (autocast: each linear casts its own input):
 * the first cast's gradient is a fresh fp32 copy nothing else holds, so
 * the second is added into it in place (input_buffer.cpp accumulate,
 * can_accumulate_inplace): two of x's size at most, never a third */
static void cast_gradient_takes_the_second_in_place(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  struct tape_op c = {.out_bytes = 4 * M, .in = {x}, .cast = true};
  uint32_t y1 = tape_op(&f.tp, &c), y2 = tape_op(&f.tp, &c);
  tape_drop(&f.tp, x);
  f.tp.t[y1].grad = tape_new(&f.tp, 4 * M);
  f.tp.t[y2].grad = tape_new(&f.tp, 4 * M);
  tape_drop(&f.tp, y1);
  tape_drop(&f.tp, y2);
  tape_backward(&f.tp, 0);
  struct vl_cache_stats s;
  vl_cache_stats(f.p.c, &s);
  assert_int_equal(s.allocated, 8 * M); /* x's one gradient */
  /* x with the casts' outputs, or their two gradients: 16 MiB; then y2's
   * copy (8) beside them: 20; out of place, y1's copy beside y2's and
   * the sum beside both: 24 */
  assert_int_equal(s.peak_allocated, 20 * M);
  teardown(&f);
}

/* a second output the node keeps (SDPA's log-sum-exp, made after its
 * output) lives past Python's reference until the node's backward */
static void second_output_kept_to_the_backward(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t x = tape_new(&f.tp, 8 * M);
  uint32_t y = op1(&f, 4 * M, x, 0);
  uint32_t lse = tape_new(&f.tp, 2 * M);
  tape_also_saves(&f.tp, y, lse);
  tape_drop(&f.tp, lse);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 6 * M); /* y and its kept second output */
  tape_drop(&f.tp, y);
  f.tp.t[y].grad = tape_new(&f.tp, 4 * M);
  tape_backward(&f.tp, 0);
  assert_int_equal(allocated(&f), 8 * M); /* x's gradient alone */
  teardown(&f);
}

/* gradients of views land in one buffer of the base's size, views of a
 * view in the first view's base */
static void views_fill_one_base_sized_gradient(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t b = tape_new(&f.tp, 16 * M);
  uint32_t v = tape_view(&f.tp, b, 8 * M), vv = tape_view(&f.tp, v, 4 * M);
  uint32_t w = tape_view(&f.tp, b, 8 * M);
  uint32_t y1 = op1(&f, 2 * M, vv, 0), y2 = op1(&f, 2 * M, w, 0);
  tape_drop(&f.tp, v);
  tape_drop(&f.tp, vv);
  tape_drop(&f.tp, w);
  assert_int_equal(allocated(&f), 16 * M + 4 * M); /* the views keep b */
  tape_drop(&f.tp, b);
  assert_int_equal(allocated(&f), 4 * M); /* only the outputs */
  backward_from(&f, y1, y2);
  assert_int_equal(allocated(&f), 16 * M); /* b's gradient only */
  assert_int_not_equal(f.tp.t[b].grad, 0);
  assert_int_equal(f.tp.t[vv].grad, 0);
  teardown(&f);
}

/* a parameter's gradient is handed over (AccumulateGrad); a matmul node
 * makes autograd's cuBLAS workspace once, after its first gradient; mm
 * allocates the weight's gradient first when listed first */
static void leaf_gradients_and_the_workspace(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  f.tp.ws_bytes = 32 * M;
  uint32_t w = tape_leaf(&f.tp, 6 * M), x = tape_new(&f.tp, 4 * M);
  struct tape_op o = {.out_bytes = 2 * M, .in = {w, x}, .saved = {x}, .mm = true};
  uint32_t y = tape_op(&f.tp, &o);
  struct tape_op o2 = {.out_bytes = 2 * M, .in = {y, w}, .mm = true};
  uint32_t z = tape_op(&f.tp, &o2);
  tape_drop(&f.tp, x);
  f.tp.t[z].grad = tape_new(&f.tp, 2 * M);
  tape_backward(&f.tp, 0);
  assert_int_equal(f.leaf_grads, 2); /* w used twice: two AccumulateGrad calls */
  assert_int_equal(f.leaf_bytes, 12 * M);
  assert_int_not_equal(f.tp.ws, NONE);
  /* left: the workspace, y and z (Python holds them), x's gradient */
  assert_int_equal(allocated(&f), 32 * M + 2 * M + 2 * M + 4 * M);
  teardown(&f);
}

/* a parameter's second use (tape_again: DeBERTa's query_proj and key_proj
 * on the relative embeddings) hands no gradient of its own: autograd sums
 * it into the first use's (InputBuffer::accumulate) before AccumulateGrad
 * takes one; the second use's goes as it arrives */
static void second_use_of_a_parameter(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t w = tape_leaf(&f.tp, 6 * M), x = tape_new(&f.tp, 4 * M);
  struct tape_op o = {.out_bytes = 2 * M, .in = {w, x}, .saved = {x}, .mm = true};
  uint32_t y = tape_op(&f.tp, &o);
  uint32_t w2 = tape_again(&f.tp, w);
  assert_true(f.tp.t[w2].rg && f.tp.t[w2].leaf);
  struct tape_op o2 = {.out_bytes = 2 * M, .in = {y, w2}, .saved = {y}, .mm = true};
  uint32_t z = tape_op(&f.tp, &o2);
  tape_drop(&f.tp, x);
  f.tp.t[z].grad = tape_new(&f.tp, 2 * M);
  tape_backward(&f.tp, 0);
  assert_int_equal(f.leaf_grads, 1);
  assert_int_equal(f.leaf_bytes, 6 * M);
  /* left: y and z (Python holds them), x's gradient */
  assert_int_equal(allocated(&f), 2 * M + 2 * M + 4 * M);
  teardown(&f);
}

/* LoRA's frozen base: an op none of whose inputs requires grad records no
 * node and keeps nothing it would save; where one input does, the node
 * lists only that one, and the backward makes no gradient for the rest */
static void frozen_inputs_take_no_gradient(void **state) {
  (void)state;
  struct fix f;
  setup(&f, true);
  uint32_t w = tape_frozen(&f.tp, 6 * M), x = tape_const(&f.tp, 4 * M);
  uint32_t a = tape_leaf(&f.tp, 1 * M);
  struct tape_op o = {.out_bytes = 2 * M, .in = {w, x}, .saved = {x}, .mm = true};
  uint32_t y = tape_op(&f.tp, &o);
  assert_int_equal(f.tp.nn, 0);
  assert_false(f.tp.t[y].rg);
  uint32_t v = tape_view(&f.tp, x, 2 * M);
  assert_false(f.tp.t[v].rg); /* a view has its base's */
  tape_drop(&f.tp, v);
  tape_drop(&f.tp, x);
  assert_int_equal(allocated(&f), 2 * M); /* x is not kept: nothing saved it */
  struct tape_op o2 = {.out_bytes = 2 * M, .in = {y, a}, .saved = {y}};
  uint32_t z = tape_op(&f.tp, &o2);
  assert_true(f.tp.t[z].rg);
  assert_int_equal(f.tp.nn, 1);
  assert_int_equal(f.tp.n[0].nin, 1);
  assert_int_equal(f.tp.n[0].in[0], a);
  tape_drop(&f.tp, z);
  f.tp.t[z].grad = tape_new(&f.tp, 2 * M);
  tape_backward(&f.tp, 0);
  assert_int_equal(f.leaf_grads, 1); /* a's; y and the frozen w get none */
  assert_int_equal(f.leaf_bytes, 1 * M);
  assert_int_equal(f.tp.t[y].grad, 0);
  /* left: y (Python's) */
  assert_int_equal(allocated(&f), 2 * M);
  teardown(&f);
}

/* the scratch of a column sum (a bias gradient) against the caching
 * allocator's own history on an H200: every contiguous 2-D sum over rows
 * of data/reference/h200-torch-2.11/cuda-reduce-check.jsonl (132 SMs, 2048 threads each) */
static void column_sum_scratch_as_on_the_h200(void **state) {
  (void)state;
  /* StarCoder2-3B's c_fc, c_proj and k_proj over 2048 rows */
  assert_int_equal(vl__column_sum_scratch(2048, 12288, 2, 4, 132, 2048), 138412032);
  assert_int_equal(vl__column_sum_scratch(2048, 3072, 2, 4, 132, 2048), 50331648);
  assert_int_equal(vl__column_sum_scratch(2048, 256, 2, 4, 132, 2048), 4194304);
  assert_int_equal(vl__column_sum_scratch(64, 3072, 2, 4, 132, 2048), 0);
  size_t len = 0;
  char *text = tu_read("data/reference/h200-torch-2.11/cuda-reduce-check.jsonl", &len);
  int judged = 0;
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n');
    json_t *r = json_loadb(line, end ? (size_t)(end - line) : strlen(line), 0, NULL);
    line = end ? end + 1 : NULL;
    assert_non_null(r);
    json_t *shape = json_object_get(r, "shape"), *dims = json_object_get(r, "dims");
    const char *op = json_string_value(json_object_get(r, "op"));
    json_t *stride = json_object_get(r, "stride");
    if (op && strcmp(op, "sum") == 0 && json_array_size(shape) == 2 && json_array_size(dims) == 1 &&
        json_integer_value(json_array_get(dims, 0)) == 0 &&
        json_integer_value(json_array_get(stride, 1)) == 1) {
      uint64_t rows = (uint64_t)json_integer_value(json_array_get(shape, 0));
      uint64_t cols = (uint64_t)json_integer_value(json_array_get(shape, 1));
      const char *dt = json_string_value(json_object_get(r, "dtype"));
      uint64_t eb = strcmp(dt, "fp32") == 0 ? 4 : 2;
      json_t *seen = json_object_get(r, "seen");
      uint64_t want =
          json_array_size(seen) ? (uint64_t)json_integer_value(json_array_get(seen, 0)) : 0;
      uint64_t got = vl__column_sum_scratch(rows, cols, eb, 4, 132, 2048);
      if (got != want)
        fail_msg("%s %llu x %llu: %llu, the H200 %llu", dt, (unsigned long long)rows,
                 (unsigned long long)cols, (unsigned long long)got, (unsigned long long)want);
      judged++;
    }
    json_decref(r);
  }
  free(text);
  assert_true(judged >= 100);
}

/* The scratch the training replay bills for a trained bias's gradient
 * (train_replay_modules.c, the linear's backward temporary) is the column
 * sum's on the named card: the card's SMs and threads per SM reach it
 * through vl_overheads_for_gpu, as they reach the bill. StarCoder2-3B's
 * c_fc over 2048 rows splits into 22 blocks on the H200's 132 SMs (the
 * allocator's history: 138,412,032 B) and 18 on the A100's 108. */
static uint64_t bias_scratch_on(const struct vl_gpu *g, uint64_t rows, uint64_t in_f,
                                uint64_t out_f) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  vl_overheads_for_gpu(&ov, g);
  struct vl__train_sizes z = {.e = 2, .sms = ov.sm_count, .tps = ov.threads_per_sm};
  struct run R;
  memset(&R, 0, sizeof R);
  struct vl_cache_conf conf = {0, 0, 0, false};
  assert_int_equal(vl_cache_new(&conf, &R.p.c), VL_OK);
  R.tp = (struct tape){.p = &R.p, .grad = true, .ws = NONE};
  R.z = &z;
  uint32_t w = tape_leaf(&R.tp, in_f * out_f * 2), x = tape_new(&R.tp, rows * in_f * 2);
  uint32_t y = vl__tr_linear_w(&R, w, x, 2, rows, in_f, out_f, true);
  assert_int_equal(R.tp.nn, 1);
  assert_int_equal(R.tp.n[0].out, y);
  uint64_t tmp = R.tp.n[0].tmp;
  tape_free(&R.tp);
  vl_cache_destroy(R.p.c);
  return tmp;
}

static void bias_scratch_is_the_cards(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  const uint64_t rows = 2048, in_f = 3072, out_f = 12288;
  const struct vl_gpu *a100 = vl_catalog_find(&cat, "a100-80gb"),
                      *h200 = vl_catalog_find(&cat, "h200");
  assert_int_equal(a100->sm_count, 108);
  uint64_t on_a100 = vl__column_sum_scratch(rows, out_f, 2, 4, 108, 2048);
  uint64_t on_h200 = vl__column_sum_scratch(rows, out_f, 2, 4, 132, 2048);
  assert_int_equal(on_a100, 4ull * out_f * 18 * 32 * 4); /* acc x cols x ctas x block.x x vec */
  assert_int_equal(on_h200, 4ull * out_f * 22 * 32 * 4);
  assert_int_equal(on_h200, 138412032);
  assert_int_equal(bias_scratch_on(a100, rows, in_f, out_f), on_a100);
  assert_int_equal(bias_scratch_on(h200, rows, in_f, out_f), on_h200);
  /* a card the catalog gives no SMs (ROCm's) keeps the H200's */
  const struct vl_gpu *mi300x = vl_catalog_find(&cat, "mi300x");
  assert_int_equal(mi300x->sm_count, 0);
  assert_int_equal(bias_scratch_on(mi300x, rows, in_f, out_f), on_h200);
  vl_catalog_release(&cat);
}

/* ZeRO-1's share of rank 0 against the rule written out plainly (torch's
 * ZeroRedundancyOptimizer: largest first, ties in the model's order, each
 * to the least-loaded rank, ties to the lowest): random sizes with many
 * ties, ranks below, at and above the number of parameters. */
static size_t zero1_plain(const uint64_t *v, size_t n, uint64_t ranks, size_t *mine) {
  size_t order[64], m = 0;
  uint64_t load[128] = {0};
  for (size_t k = 0; k < n; k++) {
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
  return m;
}

static void zero1_share_is_the_greedy_rule(void **state) {
  (void)state;
  uint64_t x = 88172645463325252ull, v[64];
  for (int trial = 0; trial < 2000; trial++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = 1 + (size_t)(x % 64);
    uint64_t ranks = 1 + (x >> 8) % 100;
    for (size_t k = 0; k < n; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v[k] = 1 + x % (trial % 3 ? 5 : 100000); /* few sizes: many ties */
    }
    size_t a[64], b[64];
    size_t ma = vl__tr_zero1_share(v, n, ranks, a), mb = zero1_plain(v, n, ranks, b);
    assert_int_equal(ma, mb);
    assert_memory_equal(a, b, ma * sizeof *a);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frozen_inputs_take_no_gradient),
      cmocka_unit_test(saved_tensor_lives_until_its_backward),
      cmocka_unit_test(second_gradient_summed_in_place),
      cmocka_unit_test(reshaped_gradient_summed_out_of_place),
      cmocka_unit_test(slices_each_make_a_gradient_of_the_input),
      cmocka_unit_test(pieces_join_before_their_base_node),
      cmocka_unit_test(cast_gradient_takes_the_second_in_place),
      cmocka_unit_test(second_output_kept_to_the_backward),
      cmocka_unit_test(views_fill_one_base_sized_gradient),
      cmocka_unit_test(leaf_gradients_and_the_workspace),
      cmocka_unit_test(second_use_of_a_parameter),
      cmocka_unit_test(column_sum_scratch_as_on_the_h200),
      cmocka_unit_test(bias_scratch_is_the_cards),
      cmocka_unit_test(zero1_share_is_the_greedy_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
