/* lib/model/infer_replay.c: generate()'s allocations replayed through the
 * caching allocator's model, checked against what the allocations are
 * (the weights, the KV cache of every token, transformers' torch.cat of
 * each layer's cache) rather than against a figure of the replay's own. */
#include "testutil.h"
#include "vramledger/caching.h"

#include "model/internal.h"

struct gen {
  struct vl_arch arch;
  struct vl_inventory inv;
  struct vl_job job;
};

static void gen_init(struct gen *g, const char *config, uint64_t batch, uint64_t seq,
                     uint64_t new_tokens) {
  tu_arch(config, &g->arch);
  struct vl_err err = {""};
  assert_int_equal(vl_inventory_build(&g->arch, &g->inv, &err), VL_OK);
  vl_job_init(&g->job);
  g->job.task = VL_TASK_INFER;
  g->job.precision = VL_PREC_BF16;
  g->job.batch = batch;
  g->job.seq = seq;
  g->job.new_tokens = new_tokens;
}

static struct vl_cache_stats replay(const struct gen *g, bool expandable) {
  struct vl_cache_stats st;
  struct vl_err err = {""};
  vl_status s =
      vl__infer_replay(&g->arch, &g->inv, &g->job, 2, 2, 2, 2, 32ull << 20, expandable, &st, &err);
  if (s != VL_OK) fail_msg("replay: %s", err.msg);
  return st;
}

/* bytes of the weights on one GPU, as the replay allocates them */
static uint64_t weights(const struct gen *g) {
  uint64_t tp = g->job.tp ? g->job.tp : 1, sum = 0;
  for (int i = 0; i < g->inv.n; i++) {
    const struct vl_tensor *w = &g->inv.t[i];
    sum += vl__tp_split(w, tp, w->rows * w->cols) * 2 * w->count;
  }
  return sum;
}

/* the KV cache of every token, prompt and generated, bf16 */
static uint64_t kv(const struct gen *g) {
  uint64_t tp = g->job.tp ? g->job.tp : 1;
  return 2 * g->arch.layers * g->job.batch * (g->job.seq + g->job.new_tokens) *
         ((g->arch.kv_heads + tp - 1) / tp) * g->arch.head_dim * 2;
}

/* the peak holds the weights and the whole cache; the books balance; the
 * same job replays to the same bytes */
static void peak_holds_weights_and_cache(void **state) {
  (void)state;
  struct gen g;
  gen_init(&g, "data/models/llama-2-7b.json", 8, 512, 128);
  struct vl_cache_stats a = replay(&g, false), b = replay(&g, false);
  assert_memory_equal(&a, &b, sizeof a);
  uint64_t floor = weights(&g) + kv(&g);
  printf("  weights + cache %.3f GiB, peak allocated %.3f GiB, reserved %.3f GiB, %llu segments\n",
         floor / GiB, a.peak_allocated / GiB, a.peak_reserved / GiB,
         (unsigned long long)a.segments);
  assert_true(a.peak_allocated >= floor);
  assert_true(a.peak_allocated < floor + (1ull << 30)); /* and the activations of a token or 512 */
  assert_true(a.peak_reserved >= a.peak_allocated);
  assert_true(a.allocated <= a.reserved);
  assert_int_equal(a.ooms, 0);
}

/* each new token's torch.cat asks for a block a little larger than any
 * freed: more tokens, a peak higher by their cache (a model whose cache,
 * not prefill's logits, sets the peak) and more cudaMallocs */
static void decode_grows_the_cache(void **state) {
  (void)state;
  struct gen g;
  gen_init(&g, "data/models/llama-2-7b.json", 8, 256, 16);
  struct vl_cache_stats few = replay(&g, false);
  uint64_t kv_few = kv(&g);
  g.job.new_tokens = 512;
  struct vl_cache_stats many = replay(&g, false);
  uint64_t more = kv(&g) - kv_few;
  printf("  16 -> 512 new tokens: cache +%.3f GiB, peak allocated +%.3f GiB\n", more / GiB,
         (many.peak_allocated - few.peak_allocated) / GiB);
  assert_true(many.peak_allocated > few.peak_allocated);
  assert_true(many.peak_allocated - few.peak_allocated >= more * 9 / 10);
  assert_true(many.cuda_mallocs > few.cuda_mallocs);
}

/* tensor parallelism: each GPU holds its split of the weights, the heads
 * and the cache */
static void tensor_parallel_splits(void **state) {
  (void)state;
  struct gen g;
  gen_init(&g, "data/models/llama-2-7b.json", 4, 512, 64);
  struct vl_cache_stats one = replay(&g, false);
  uint64_t w1 = weights(&g);
  g.job.tp = 2;
  struct vl_cache_stats two = replay(&g, false);
  uint64_t w2 = weights(&g);
  assert_true(w2 < w1 && w2 > w1 / 2); /* norms are not split */
  assert_true(two.peak_allocated < one.peak_allocated);
  assert_true(two.peak_allocated >= w2 + kv(&g));
}

/* expandable segments map pages onto one segment a pool: fewer segments
 * and no more reserved than separate cudaMallocs */
static void expandable_segments(void **state) {
  (void)state;
  struct gen g;
  gen_init(&g, "data/models/llama-2-7b.json", 8, 512, 128);
  struct vl_cache_stats plain = replay(&g, false), exp = replay(&g, true);
  printf("  reserved %.3f GiB in %llu segments; expandable %.3f GiB in %llu\n",
         plain.peak_reserved / GiB, (unsigned long long)plain.segments, exp.peak_reserved / GiB,
         (unsigned long long)exp.segments);
  assert_true(exp.segments < plain.segments);
  assert_true(exp.peak_reserved <= plain.peak_reserved);
  assert_true(exp.peak_allocated == plain.peak_allocated); /* the same blocks */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(peak_holds_weights_and_cache),
      cmocka_unit_test(decode_grows_the_cache),
      cmocka_unit_test(tensor_parallel_splits),
      cmocka_unit_test(expandable_segments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
