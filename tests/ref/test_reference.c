/* Reference tests: every published number of training memory that the
 * estimator covers (papers and public write-ups, each named at its test), with its source, its
 * tolerance and the difference printed. GB = 1e9 bytes, GiB = 2^30 bytes, MiB = 2^20 bytes, as each
 * source states. */
#include "testutil.h" /* system headers first: internal.h bans functions */
#include "model/internal.h"

static uint64_t term(const struct vl_bill *b, const char *name) {
  for (int i = 0; i < b->n_terms; i++)
    if (strcmp(b->terms[i].name, name) == 0) return b->terms[i].bytes;
  fail_msg("no term '%s'", name);
  return 0;
}

static double states_per_param(const struct vl_bill *b) {
  return (double)(b->line_max[VL_LINE_PARAMETERS] + b->line_max[VL_LINE_MASTER] +
                  b->line_max[VL_LINE_GRADIENTS] + b->line_max[VL_LINE_OPTIMIZER]) /
         (double)b->params;
}

#define assert_abs(got, want, tol, what)                                                           \
  do {                                                                                             \
    double g_ = (got), w_ = (want);                                                                \
    printf("  %-58s got %.4f want %.4f diff %+.4f (tol %.4f)\n", what, g_, w_, g_ - w_, tol);      \
    assert_true(fabs(g_ - w_) <= (tol));                                                           \
  } while (0)

/* ZeRO (Rajbhandari et al., arXiv 1910.02054) Figure 1: Psi = 7.5B, K = 12,
 * N_d = 64, fp16 params and grads. Figures are printed to 3 digits, so the
 * tolerance is half a unit of the last digit shown. */
static void zero_paper_figure_1(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_MIXED_FP16;
  j.optimizer = VL_OPT_ADAM;
  j.dp = 64;
  const double psi = 7.5e9;
  const double want[4] = {120, 31.4, 16.6, 1.9};
  const double tol[4] = {0.5, 0.05, 0.05, 0.05};
  for (unsigned z = 0; z <= 3; z++) {
    j.zero = z;
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    char what[64];
    snprintf(what, sizeof what, "ZeRO stage %u, GB per GPU", z);
    assert_abs(states_per_param(&b) * psi / 1e9, want[z], tol[z], what);
  }
}

/* Published bill: 7B model state by optimizer, GB (mixed precision: 2 + 2 + 4
 * master + states). */
static void seed_bytes_per_parameter(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  static const struct {
    enum vl_optimizer o;
    double gb, tol;
  } cases[] = {
      {VL_OPT_SGD, 56, 0.001},   {VL_OPT_SGD_MOMENTUM, 84, 0.001}, {VL_OPT_LION, 84, 0.001},
      {VL_OPT_ADAM, 112, 0.001}, {VL_OPT_ADAM8BIT, 70, 0.001},     {VL_OPT_ADAFACTOR, 56, 0.01},
  };
  for (int prec = 0; prec < 2; prec++) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      struct vl_job j;
      vl_job_init(&j);
      j.precision = prec ? VL_PREC_FP32 : VL_PREC_MIXED_BF16; /* both give 8 B for p + g */
      j.optimizer = cases[i].o;
      struct vl_bill b;
      tu_bill(&a, &j, &b);
      char what[80];
      snprintf(what, sizeof what, "7B %s (%s), GB", vl_optimizer_name(cases[i].o),
               vl_precision_name(j.precision));
      assert_close(states_per_param(&b) * 7e9 / 1e9, cases[i].gb, cases[i].tol, what);
    }
  }
}

/* Published bill (model states) / Korthikanti: Llama-2-7B shape (L 32, h 4096, a 32), b 1, s 2048,
 * fp16, L x (34 s b h + 5 a s^2 b). The formula assumes the GPT MLP of 4h,
 * so the shape is given intermediate_size 16384. */
static const char *llama_4h =
    "{\"model_type\":\"llama\",\"hidden_size\":4096,\"num_hidden_layers\":32,"
    "\"num_attention_heads\":32,\"intermediate_size\":16384,\"vocab_size\":32000,"
    "\"max_position_embeddings\":4096}";

static void seed_activations_7b(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch_text(llama_4h, &a);
  struct vl_job j;
  vl_job_init(&j);
  j.framework = VL_FW_MEGATRON;
  j.precision = VL_PREC_MIXED_FP16;
  j.attention = VL_ATTN_EAGER;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  double per_layer = (double)term(&b, "one layer (Korthikanti Table 2)");
  assert_close(per_layer * 32 / GiB, 28.5, 0.005, "eager, 32 layers, GiB (8.5 + 20)");
  j.attention = VL_ATTN_SDPA;
  tu_bill(&a, &j, &b);
  assert_close((double)term(&b, "one layer (Korthikanti Table 2)") * 32 / GiB, 8.5, 0.005,
               "FlashAttention removes the quadratic term, GiB");
  j.checkpointing = VL_CKPT_FULL;
  tu_bill(&a, &j, &b);
  assert_close((double)term(&b, "kept per layer (full recomputation)") * 32 / GiB, 0.5, 0.001,
               "full recomputation keeps 2sbh per layer, GiB");
}

/* Korthikanti et al. 2022 Table 2, GPT-3 175B (h 12288, a 96, s 2048, b 1,
 * t 8), GiB per layer, printed to 3 decimals. */
static void korthikanti_table_2(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch_text("{\"model_type\":\"gpt2\",\"n_embd\":12288,\"n_layer\":96,\"n_head\":96,"
               "\"n_positions\":2048,\"vocab_size\":51200}",
               &a);
  static const struct {
    const char *what;
    uint64_t tp;
    bool sp;
    enum vl_ckpt ck;
    double gib;
  } rows[] = {
      {"no parallelism", 1, false, VL_CKPT_NONE, 2.672},
      {"tensor parallel (t 8)", 8, false, VL_CKPT_NONE, 0.539},
      {"tensor + sequence parallel", 8, true, VL_CKPT_NONE, 0.334},
      {"tensor parallel + selective recompute", 8, false, VL_CKPT_SELECTIVE, 0.305},
      {"tensor + sequence parallel + selective", 8, true, VL_CKPT_SELECTIVE, 0.100},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.framework = VL_FW_MEGATRON;
    j.precision = VL_PREC_MIXED_FP16;
    j.attention = VL_ATTN_EAGER;
    j.tp = rows[i].tp;
    j.sp = rows[i].sp;
    j.checkpointing = rows[i].ck;
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    assert_abs((double)term(&b, "one layer (Korthikanti Table 2)") / GiB, rows[i].gib, 0.0005,
               rows[i].what);
  }
  struct vl_job j;
  vl_job_init(&j);
  j.framework = VL_FW_MEGATRON;
  j.precision = VL_PREC_MIXED_FP16;
  j.checkpointing = VL_CKPT_FULL;
  j.tp = 8;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  assert_abs((double)term(&b, "kept per layer (full recomputation)") / GiB, 0.047, 0.0005,
             "full recomputation (2sbh)");
}

/* Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter without the
 * distributed optimizer, 6 + 12/DP with it; Llama-2-7B, seq 4096, TP1 PP1
 * DP8: weights+optimizer 115,672.57 MiB, activations 18,591.33 MiB. Its
 * activation path without sequence parallelism assumes a 4h MLP (its own
 * TODO), so activations use the 4h shape. */
static void megatron_theoretical_memory(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.framework = VL_FW_MEGATRON;
  j.precision = VL_PREC_MIXED_BF16;
  j.optimizer = VL_OPT_ADAM;
  j.seq = 4096;
  j.dp = 8;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  assert_close(states_per_param(&b), 18, 1e-12, "bytes per parameter");
  assert_close(states_per_param(&b) * (double)b.params / MiB, 115672.57, 1e-6,
               "weights + optimizer, MiB");
  j.zero = 1; /* the distributed optimizer */
  tu_bill(&a, &j, &b);
  assert_close(states_per_param(&b), 6 + 12.0 / 8, 1e-6, "distributed optimizer, 6 + 12/DP");

  tu_arch_text(llama_4h, &a);
  j.zero = 0;
  tu_bill(&a, &j, &b);
  double act =
      (double)b.line_max[VL_LINE_ACTIVATIONS] + (double)term(&b, "miscellaneous temporaries");
  assert_close(act / MiB, 18591.33, 1e-6, "activations (with 5 % temporaries), MiB");
}

/* Published bill (model states) KV cache: Llama-2-7B bf16 524,288 B/token, 4096 tokens 2 GiB, 32
 * sequences 64 GiB; Llama-3-70B (8 of 64 heads) needs 1/8 of MHA; vLLM
 * paper: OPT-13B 800 KB per token (2 x 5120 x 40 x 2 B), 2048 tokens ~ 1.6 GB. */
static uint64_t kv(const struct vl_arch *a, uint64_t batch, uint64_t tokens) {
  struct vl_job j;
  vl_job_init(&j);
  j.task = VL_TASK_INFER;
  j.precision = VL_PREC_BF16;
  j.batch = batch;
  j.seq = tokens;
  struct vl_bill b;
  tu_bill(a, &j, &b);
  return b.line_max[VL_LINE_KV_CACHE];
}

static void kv_cache(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  assert_close(kv(&a, 1, 1), 524288, 0, "Llama-2-7B bytes per token");
  assert_close(kv(&a, 1, 4096) / GiB, 2, 0, "4096 tokens, GiB");
  assert_close(kv(&a, 32, 4096) / GiB, 64, 0, "32 x 4096 tokens, GiB");
  tu_arch("data/models/llama-3-70b.json", &a);
  uint64_t gqa = kv(&a, 1, 1000);
  a.kv_heads = a.heads;
  assert_close((double)kv(&a, 1, 1000) / (double)gqa, 8, 0, "Llama-3-70B MHA / GQA");
  tu_arch_text("{\"model_type\":\"opt\",\"hidden_size\":5120,\"num_hidden_layers\":40,"
               "\"num_attention_heads\":40,\"ffn_dim\":20480}",
               &a);
  assert_close(kv(&a, 1, 1), 819200, 0, "OPT-13B bytes per token (800 KB)");
  assert_close(kv(&a, 1, 2048) / 1e9, 1.6, 0.05, "OPT-13B 2048 tokens, GB (~1.6)");
}

/* DeepSpeed estimate_zero{2,3}_model_states_mem_needs, t5-3b (P 2851 M,
 * largest layer 32 M, 8 GPUs), GiB. The per-parameter accounting is checked
 * on a real model, then applied to t5-3b's P and largest layer. */
static void deepspeed_estimators(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2-xl.json", &a);
  const double P = 2851e6, largest = 32e6;
  static const struct {
    const char *what;
    unsigned zero;
    enum vl_offload off;
    double gib;
  } rows[] = {
      {"ZeRO-2, no offload (2P + 18P/N)", 2, VL_OFFLOAD_NONE, 11.28},
      {"ZeRO-2, optimizer offload (2P)", 2, VL_OFFLOAD_OPTIMIZER, 5.31},
      {"ZeRO-3, no offload (4L + 18P/N)", 3, VL_OFFLOAD_NONE, 6.09},
      {"ZeRO-3, optimizer offload (4L + 2P/N)", 3, VL_OFFLOAD_OPTIMIZER, 0.78},
      {"ZeRO-3, full offload (4L)", 3, VL_OFFLOAD_FULL, 0.12},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.framework = VL_FW_DEEPSPEED;
    j.seq = 1024; /* GPT-2's positions; activations do not enter the figures */
    j.precision = VL_PREC_MIXED_FP16;
    j.optimizer = VL_OPT_ADAM;
    j.dp = 8;
    j.zero = rows[i].zero;
    j.offload = rows[i].off;
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    double per_param = states_per_param(&b);
    double gathered = 0;
    if (rows[i].zero == 3) {
      struct vl_inventory inv;
      struct vl_err err = {""};
      assert_int_equal(vl_inventory_build(&a, &inv, &err), VL_OK);
      assert_int_equal(term(&b, "ZeRO-3 gathered parameters"), 4 * inv.largest);
      gathered = 4 * largest;
    }
    assert_abs((per_param * P + gathered) / GiB, rows[i].gib, 0.005, rows[i].what);
  }
}

/* PyTorch caching allocator (c10/cuda/CUDACachingAllocator.cpp), as measured
 * on the H200: data/reference/h200-torch-2.11/basics.json. */
static void allocator_rounding(void **state) {
  (void)state;
  assert_int_equal(vl__alloc_block_bytes(1), 512);
  assert_int_equal(vl__alloc_block_bytes(511), 512);
  assert_int_equal(vl__alloc_block_bytes(513), 1024);
  assert_int_equal(vl__alloc_block_bytes((1 << 20) + 1), (1 << 20) + 512);
  assert_int_equal(vl__alloc_segment_bytes(100ull << 20), 100ull << 20);
  assert_int_equal(vl__alloc_segment_bytes((11ull << 20) + 1), 12ull << 20);
  assert_int_equal(vl__alloc_segment_bytes(5ull << 20), 5ull << 20);
}

/* Published bill (attention scores): attention scores are b x heads x s x s per layer; s 2048 costs
 * 16 x s 512. */
static void attention_scores_quadratic(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.attention = VL_ATTN_EAGER;
  j.seq = 512;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  double s512 = (double)term(&b, "attention scores (eager, per layer)");
  j.seq = 2048;
  tu_bill(&a, &j, &b);
  double s2048 = (double)term(&b, "attention scores (eager, per layer)");
  assert_close(s2048 / s512, 16, 0, "scores at s 2048 / s 512");
}

/* SDPA's math path as it runs for Falcon's multi-query attention, against
 * the allocator's own record of two runs on an H100 (PyTorch 2.11,
 * bench/results/reserved/history/, and the H200 hold-out run
 * tu-falcon7b-bf16-lora8-b1s2048 of
 * data/reference/h200-torch-2.11/types-unseen-measured.json): peak
 * allocated and reserved to 0.1 %. Two sequences fold batch and heads by
 * copies, one by views (train_replay_attention.c sdpa_math_mqa). */
static void falcon_math_path_measured(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/falcon-7b.json", &a);
  static const struct {
    uint64_t batch, seq, rank, allocated, reserved;
  } runs[] = {{2, 1024, 16, 42734047232ull, 45290094592ull},
              {1, 2048, 8, 61238006272ull, 62205722624ull}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.precision = VL_PREC_BF16;
    j.batch = runs[i].batch;
    j.seq = runs[i].seq;
    j.lora_rank = runs[i].rank;
    j.lora_targets[0] = "query_key_value";
    j.n_lora_targets = 1;
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    assert_close((double)b.peak_allocated_bytes, (double)runs[i].allocated, 0.001,
                 "Falcon-7B peak allocated");
    assert_close((double)b.peak_reserved_bytes, (double)runs[i].reserved, 0.001,
                 "Falcon-7B peak reserved");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(zero_paper_figure_1),         cmocka_unit_test(seed_bytes_per_parameter),
      cmocka_unit_test(seed_activations_7b),         cmocka_unit_test(korthikanti_table_2),
      cmocka_unit_test(megatron_theoretical_memory), cmocka_unit_test(kv_cache),
      cmocka_unit_test(deepspeed_estimators),        cmocka_unit_test(allocator_rounding),
      cmocka_unit_test(attention_scores_quadratic),  cmocka_unit_test(falcon_math_path_measured),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
