/* lib/model/bill.c, activations.c, precision.c: the training bill. */
#include <jansson.h>

#include "testutil.h"
#include "vramledger/validate.h"

static struct vl_arch llama7b;
static struct vl_arch gpt2;

static int setup(void **state) {
  (void)state;
  tu_arch("data/models/llama-2-7b.json", &llama7b);
  tu_arch("data/models/gpt2.json", &gpt2);
  return 0;
}

static double states_per_param(const struct vl_bill *b) {
  uint64_t s = b->line_max[VL_LINE_PARAMETERS] + b->line_max[VL_LINE_MASTER] +
               b->line_max[VL_LINE_GRADIENTS] + b->line_max[VL_LINE_OPTIMIZER];
  return (double)s / (double)b->params;
}

static void bytes_per_parameter_by_precision(void **state) {
  (void)state;
  static const struct {
    enum vl_precision p;
    double want; /* weights + master + grads + Adam states */
  } cases[] = {
      {VL_PREC_FP32, 16},
      {VL_PREC_AMP_BF16, 16},
      {VL_PREC_BF16, 8},
      {VL_PREC_MIXED_BF16, 16},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.precision = cases[i].p;
    j.optimizer = VL_OPT_ADAM;
    struct vl_bill b;
    tu_bill(&llama7b, &j, &b);
    assert_close(states_per_param(&b), cases[i].want, 1e-9, vl_precision_name(cases[i].p));
  }
}

static void ledger_adds_up(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  uint64_t alloc = 0, all = 0;
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    all += b.lines[l];
    if (vl_line_in_allocated((enum vl_line)l)) alloc += b.lines[l];
  }
  assert_int_equal(alloc, b.peak_allocated_bytes);
  assert_int_equal(all, b.total_bytes);
  assert_true(b.peak_reserved_bytes >= b.peak_allocated_bytes);
  assert_int_equal(b.total_bytes, b.peak_reserved_bytes + b.cuda_context_bytes);
  assert_int_equal(b.phase_peak[b.peak_phase], b.peak_allocated_bytes);
  for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++)
    assert_true(b.phase_peak[p] <= b.peak_allocated_bytes);
}

static uint64_t activations(const struct vl_arch *a, struct vl_job *j) {
  struct vl_bill b;
  tu_bill(a, j, &b);
  return b.line_max[VL_LINE_ACTIVATIONS];
}

static void activations_respond_to_settings(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  uint64_t base = activations(&llama7b, &j);
  j.batch = 2;
  uint64_t twice = activations(&llama7b, &j);
  assert_close(twice, 2.0 * (double)base, 0.01, "double batch doubles activations");
  j.batch = 1;
  j.checkpointing = VL_CKPT_FULL;
  uint64_t ckpt = activations(&llama7b, &j);
  assert_true(ckpt * 4 < base);
  j.checkpointing = VL_CKPT_NONE;
  j.attention = VL_ATTN_EAGER;
  uint64_t eager = activations(&llama7b, &j);
  /* eager adds b*a*s^2*(4 + 2) bytes per layer under amp: 32 layers */
  uint64_t s2 = 1ull * 32 * 2048 * 2048;
  assert_true(eager > base);
  assert_true(eager - base >= 32 * s2 * 6 - 32 * 2048ull * 4096 * 4);
  j.attention = VL_ATTN_SDPA;
  j.seq = 4096;
  uint64_t longer = activations(&llama7b, &j);
  assert_close(longer, 2.0 * (double)base, 0.01, "sdpa activations are linear in seq");
}

static void lora_trains_only_adapters(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.lora_rank = 8;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  /* q_proj and v_proj: r * (4096 + 4096) each, 32 layers */
  assert_int_equal(b.trainable_params, 8ull * 8192 * 2 * 32);
  assert_int_equal(b.line_max[VL_LINE_OPTIMIZER], b.trainable_params * 8);
  j.lora_targets[0] = "o_proj";
  j.lora_targets[1] = "nonsense";
  j.n_lora_targets = 2;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_EINVAL);
  assert_non_null(strstr(err.msg, "nonsense"));
  assert_non_null(strstr(err.msg, "q_proj"));
  j.n_lora_targets = 1;
  j.lora_targets[0] = "all-linear";
  tu_bill(&llama7b, &j, &b);
  /* q,k,v,o: 4 * 8 * 8192; gate, up: 8 * (11008 + 4096) each; down the same */
  assert_int_equal(b.trainable_params, 32ull * (4 * 8 * 8192 + 3 * 8 * (11008 + 4096)));
}

static void qlora_stores_four_bits(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.lora_rank = 16;
  j.qlora = true;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  /* linears in 4 bits (+ quantisation constants), embeddings and head fp32 */
  double linear = 32.0 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008);
  double want = linear * (0.5 + 1.0 / 64 + 4.0 / (64 * 256)) + 2 * 32000.0 * 4096 * 4 +
                65.0 * 4096 * 4 + (double)b.trainable_params * 4;
  assert_close(b.line_max[VL_LINE_PARAMETERS], want, 1e-6, "QLoRA weights");
}

/* One linear weight at a time dequantised into the compute dtype: the
 * largest (an MLP projection, 4096 x 11008), 2 B an element under AMP
 * and half, 4 B under fp32 */
static void qlora_dequantises_into_the_compute_dtype(void **state) {
  (void)state;
  const enum vl_precision p[] = {VL_PREC_AMP_BF16, VL_PREC_BF16, VL_PREC_FP32};
  const uint64_t act[] = {2, 2, 4};
  for (int i = 0; i < 3; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.lora_rank = 16;
    j.qlora = true;
    j.precision = p[i];
    struct vl_bill b;
    tu_bill(&llama7b, &j, &b);
    const struct vl_term *t = NULL;
    for (int k = 0; k < b.n_terms; k++)
      if (strcmp(b.terms[k].name, "QLoRA dequantised weight") == 0) t = &b.terms[k];
    assert_non_null(t);
    assert_int_equal(t->line, VL_LINE_TRANSIENT);
    assert_int_equal(t->bytes, 4096ull * 11008 * act[i]);
  }
}

/* vl_bill_compute refuses j with status s, and vl_bill_check (what it
 * refuses before it bills, sensitivity's check of every draw) refuses it
 * alike, with the same message */
static void refused_alike(const struct vl_arch *a, const struct vl_job *j, vl_status s,
                          const char *says) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill b;
  struct vl_err e1 = {""}, e2 = {""};
  assert_int_equal(vl_bill_compute(a, j, &ov, &b, &e1), s);
  assert_int_equal(vl_bill_check(a, j, &e2), s);
  assert_string_equal(e1.msg, e2.msg);
  if (says) assert_non_null(strstr(e1.msg, says));
}

static void conflicts_are_refused(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  assert_int_equal(vl_bill_check(&llama7b, &j, NULL), VL_OK);
  j.zero = 3;
  refused_alike(&llama7b, &j, VL_ECONFLICT, "--dp");
  vl_job_init(&j);
  j.sp = true;
  refused_alike(&llama7b, &j, VL_ECONFLICT, NULL);
  vl_job_init(&j);
  j.tp = 3;
  refused_alike(&llama7b, &j, VL_ECONFLICT, NULL);
  vl_job_init(&j);
  j.pp = 64;
  refused_alike(&llama7b, &j, VL_ECONFLICT, NULL);
  vl_job_init(&j);
  j.seq = 1025; /* GPT-2 has 1024 learned positions */
  refused_alike(&gpt2, &j, VL_ECONFLICT, "1024");
  j.seq = 1024;
  assert_int_equal(vl_bill_check(&gpt2, &j, NULL), VL_OK);
  vl_job_init(&j);
  j.qlora = true;
  refused_alike(&llama7b, &j, VL_ECONFLICT, NULL);
  vl_job_init(&j);
  j.batch = 0;
  refused_alike(&llama7b, &j, VL_ERANGE, NULL);
  vl_job_init(&j);
  j.lora_rank = 8;
  j.lora_targets[0] = "nonsense";
  j.n_lora_targets = 1;
  refused_alike(&llama7b, &j, VL_EINVAL, "nonsense");
  vl_job_init(&j);
  j.task = VL_TASK_INFER;
  j.kv_layout = VL_KV_PAGED;
  j.kv_block_tokens = 0;
  refused_alike(&llama7b, &j, VL_ERANGE, "--kv-block");
}

static void overflow_is_an_error_not_a_number(void **state) {
  (void)state;
  struct vl_arch big;
  tu_arch("data/models/llama-3.1-405b.json", &big);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 1u << 20;
  j.seq = 1u << 24;
  j.attention = VL_ATTN_EAGER;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill b;
  struct vl_err err = {""};
  assert_int_equal(vl_bill_compute(&big, &j, &ov, &b, &err), VL_EOVERFLOW);
  assert_non_null(strstr(err.msg, "overflows"));
}

static void zero_stages_shard(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_MIXED_BF16;
  j.optimizer = VL_OPT_ADAM;
  j.dp = 8;
  struct vl_bill b0, b1, b2, b3;
  tu_bill(&llama7b, &j, &b0);
  j.zero = 1;
  tu_bill(&llama7b, &j, &b1);
  j.zero = 2;
  tu_bill(&llama7b, &j, &b2);
  j.zero = 3;
  tu_bill(&llama7b, &j, &b3);
  assert_close(states_per_param(&b0), 16, 1e-9, "DP: 2 + 2 + 12");
  assert_close(states_per_param(&b1), 4 + 12.0 / 8, 1e-6, "ZeRO-1: 2 + 2 + 12/8");
  assert_close(states_per_param(&b2), 2 + 14.0 / 8, 1e-6, "ZeRO-2: 2 + 14/8");
  assert_close(states_per_param(&b3), 16.0 / 8, 1e-6, "ZeRO-3: 16/8");
  /* plain DDP keeps bucket copies of the gradients */
  assert_int_equal(b0.line_max[VL_LINE_COMM], b0.line_max[VL_LINE_GRADIENTS]);
  assert_true(b0.lines[VL_LINE_CONTEXT] > b3.lines[VL_LINE_CONTEXT] - 1); /* NCCL in both */
}

/* SDPA falls back to its math backend (the s x s probabilities kept, as
 * eager) for fp32 inputs with grouped key/value heads; not for half inputs
 * and not without GQA (bench/results/parallel-calibration/). */
static void sdpa_math_backend_for_fp32_gqa(void **state) {
  (void)state;
  struct vl_arch llama3;
  tu_arch("data/models/llama-3-8b.json", &llama3);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_FP32;
  j.seq = 1024;
  uint64_t sdpa = activations(&llama3, &j);
  j.attention = VL_ATTN_EAGER;
  uint64_t eager = activations(&llama3, &j);
  assert_int_equal(sdpa, eager);
  j.precision = VL_PREC_AMP_BF16; /* half q/k/v: flash takes GQA */
  uint64_t eager_half = activations(&llama3, &j);
  j.attention = VL_ATTN_SDPA;
  assert_true(activations(&llama3, &j) + 32ull * 32 * 1024 * 1024 * 4 < eager_half);
  j.precision = VL_PREC_FP32; /* no GQA: memory-efficient attention */
  uint64_t mha_sdpa = activations(&llama7b, &j);
  j.attention = VL_ATTN_EAGER;
  assert_true(mha_sdpa + 32ull * 32 * 1024 * 1024 * 2 < activations(&llama7b, &j));
}

/* FSDP's shard-grad-op keeps the weights sharded and a gathered copy through
 * forward and backward; DeepSpeed's ZeRO-2 keeps whole weights only; under
 * FSDP full-shard autocast's copies are the whole model's. */
static void fsdp_gathers_what_it_shards(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.dp = 4;
  j.zero = 2;
  struct vl_bill fsdp, ds, z3, z3ds, dp;
  tu_bill(&llama7b, &j, &fsdp);
  j.framework = VL_FW_DEEPSPEED;
  tu_bill(&llama7b, &j, &ds);
  j.zero = 3;
  tu_bill(&llama7b, &j, &z3ds);
  j.framework = VL_FW_HF;
  tu_bill(&llama7b, &j, &z3);
  j.zero = 0;
  tu_bill(&llama7b, &j, &dp);
  uint64_t W = dp.line_max[VL_LINE_PARAMETERS]; /* fp32 weights, whole */
  assert_int_equal(fsdp.line_max[VL_LINE_PARAMETERS], (W + 3) / 4);
  assert_true(fsdp.line_max[VL_LINE_TRANSIENT] >= W);
  assert_int_equal(ds.line_max[VL_LINE_PARAMETERS], W);
  assert_int_equal(z3.line_max[VL_LINE_AUTOCAST], dp.line_max[VL_LINE_AUTOCAST]);
  assert_true(z3ds.line_max[VL_LINE_AUTOCAST] * 8 < dp.line_max[VL_LINE_AUTOCAST]);
}

/* The GPT-2 DDP job measured on 2 H200s (bench/gpu/jobs/parallel_jobs.py data: AMP,
 * AdamW, 4 x 512, a loop that keeps only the loss). */
static void gpt2_ddp_job(struct vl_job *j) {
  vl_job_init(j);
  j->dp = 2;
  j->precision = VL_PREC_AMP_BF16;
  j->optimizer = VL_OPT_ADAMW;
  j->batch = 4;
  j->seq = 512;
  j->drop_outputs = true;
}

/* DDP's first buckets may outlive the rebuild into the second step: a
 * detail term the size of the buckets, not summed into the bill, and the
 * job's other outcome (bill.other) with them counted; static_graph=True
 * swaps the two. The fit budget is the larger. */
static void ddp_second_bucket_copy_other_outcome(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.dp = 2;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  const struct vl_term *second = NULL;
  uint64_t summed = 0;
  for (int i = 0; i < b.n_terms; i++) {
    const struct vl_term *t = &b.terms[i];
    if (t->line != VL_LINE_COMM) continue;
    if (t->detail)
      second = t;
    else
      summed += t->bytes;
  }
  assert_non_null(second);
  assert_int_equal(second->bytes, b.line_max[VL_LINE_COMM]);
  assert_int_equal(summed, b.line_max[VL_LINE_COMM]);
  assert_true(b.other.peak_allocated_bytes > b.peak_allocated_bytes);
  assert_int_equal(vl_bill_budget_bytes(&b), b.other.total_bytes);
  assert_non_null(b.other.why);

  gpt2_ddp_job(&j);
  struct vl_bill d, s;
  tu_bill(&gpt2, &j, &d);
  j.ddp_static_graph = true;
  tu_bill(&gpt2, &j, &s);
  assert_int_equal(s.line_max[VL_LINE_COMM], 2 * d.line_max[VL_LINE_COMM]);
  /* the two outcomes, swapped by static_graph */
  assert_int_equal(d.other.peak_allocated_bytes, s.peak_allocated_bytes);
  assert_int_equal(s.other.peak_allocated_bytes, d.peak_allocated_bytes);
  assert_int_equal(d.other.total_bytes, s.total_bytes);
  assert_int_equal(vl_bill_budget_bytes(&d), vl_bill_budget_bytes(&s));
  /* the measured peaks of both (every rank of 4 static runs 5,776,707,072
   * B: unseen-sets/ddp-two-peaks/ddp8.jsonl; freed: 5,279,681,024 B) */
  assert_close(s.peak_allocated_bytes, 5776707072.0, 0.02, "gpt2 ddp static_graph");
  assert_close(d.peak_allocated_bytes, 5279681024.0, 0.02, "gpt2 ddp, buckets freed");

  /* one GPU, FSDP: no rebuild, no other outcome; budget = total */
  j.dp = 1;
  j.ddp_static_graph = false;
  tu_bill(&gpt2, &j, &d);
  assert_int_equal(d.other.total_bytes, 0);
  assert_int_equal(vl_bill_budget_bytes(&d), d.total_bytes);
  j.dp = 2;
  j.zero = 3;
  tu_bill(&gpt2, &j, &d);
  assert_int_equal(d.other.total_bytes, 0);
}

/* Every whole-job DDP rank peak measured on 2 H200s (GPT-2 and
 * Qwen2-0.5B; synchronising, pausing and asynchronous loops;
 * static_graph; ZeRO-1; GPT-2 medium and TinyLlama written down before
 * they were measured; 2026-11-29 and 2026-11-30: 106 ranks,
 * bench/accuracy/ddp_outcomes.py measured) lies
 * within 1 % of one of the estimate's two outcomes, as validate judges it;
 * both outcomes occur, and the larger outcome's reservation covers every
 * rank's within 2 %. */
/* The estimate of a run of a committed results file (in folder dir), its
 * job as validate builds it. */
static void measured_bill(const char *dir, const struct vl_measured_run *run, struct vl_bill *b) {
  char model[256];
  int n;
  if (strchr(run->model, '/')) /* a config file, from the results file's folder */
    n = snprintf(model, sizeof model, "%s/%s", dir, run->model);
  else
    n = snprintf(model, sizeof model, "data/models/%s.json", run->model);
  /* a truncated path would open some other file, or none */
  assert_true(n >= 0 && (size_t)n < sizeof model);
  struct vl_arch a;
  tu_arch(model, &a);
  tu_bill(&a, &run->job, b);
}

static void ddp_whole_jobs_either_outcome(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("data/reference/h200-torch-2.11/ddp-measured.json", &len);
  struct vl_measured m;
  struct vl_err err = {""};
  assert_int_equal(vl_measured_parse(text, len, &m, &err), VL_OK);
  free(text);
  assert_int_equal(m.n, 106);
  int other = 0;
  for (size_t k = 0; k < m.n; k++) {
    const struct vl_measured_run *run = &m.runs[k];
    assert_true(run->ok);
    assert_int_equal(run->job.dp, 2);
    struct vl_bill b;
    measured_bill("bench/results/ddp-rebuild", run, &b);
    struct vl_compare_row row = {.run = run};
    vl_compare_fill(&row, &b);
    other += row.other_outcome;
    assert_close(row.est_allocated, (double)run->peak_allocated, 0.02, run->name);
    /* DDP's buckets and ZeRO-1's share replayed: allocated within 0.4 %,
     * reserved within 2.3 % (the churn factor: -8.6 to +1.4 %; with the
     * small pool replayed, Qwen2-0.5B static-graph's rank 0 reserves
     * +2.2 %, over) */
    assert_close(row.est_allocated, (double)run->peak_allocated, 0.01, run->name);
    assert_close(row.est_reserved, (double)run->peak_reserved, 0.025, run->name);
    uint64_t larger = b.other.peak_reserved_bytes > b.peak_reserved_bytes
                          ? b.other.peak_reserved_bytes
                          : b.peak_reserved_bytes;
    assert_true((double)larger >= 0.98 * (double)run->peak_reserved);
  }
  assert_int_equal(other, 28);
  vl_measured_release(&m);
}

/* A rank's process total against NVML's per-GPU peak under `vramledger
 * run` (GPT-2 DDP, AMP, AdamW, 4 x 512, 2 H200s:
 * data/reference/h200-torch-2.11/per-gpu-overhead.txt, ddp-under-run): runs 3 and 4
 * freed DDP's first buckets, 7,428,112,384 B; runs 1 and 2 kept them,
 * 7,751,073,792 B. Both outcomes within 1 % (with 256 MiB for NCCL both
 * were 7.9 and 8.4 % short). */
static void ddp_rank_total_against_nvml(void **state) {
  (void)state;
  struct vl_job j;
  gpt2_ddp_job(&j);
  struct vl_bill b;
  tu_bill(&gpt2, &j, &b);
  assert_close(b.total_bytes, 7428112384.0, 0.01, "gpt2 ddp, first buckets freed");
  assert_close(b.other.total_bytes, 7751073792.0, 0.01, "gpt2 ddp, first buckets kept");
}

/* Every rank of the 2-GPU runs on the H200 (
 * bench/results/parallel-calibration/: tp/tp.jsonl, dp-fsdp/dp.jsonl;
 * nccl-run/tp-sp; max_memory_allocated in bytes) against the estimate of the
 * same job: within 7 % (all agree within 4.3 %; the ranks of one run read the same). */
static void two_h200_runs_within_seven_percent(void **state) {
  (void)state;
  struct vl_arch archs[3];
  tu_arch("bench/configs/tinyllama-1.1b.json", &archs[0]);
  tu_arch("data/models/qwen2-0.5b.json", &archs[1]);
  tu_arch("bench/configs/qwen2-0.5b-untied.json", &archs[2]);
  static const struct {
    const char *what;
    int model; /* 0 TinyLlama, 1 Qwen2-0.5B, 2 the same untied */
    enum vl_precision prec;
    enum vl_attention attn;
    enum vl_ckpt ckpt;
    unsigned batch, tp, zero, dp;
    double measured;
    bool sp;
  } runs[] = {
      {"TP2 amp sdpa b4", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 2, 0, 1,
       16289633792.0, false},
      {"TP2 amp eager b2", 0, VL_PREC_AMP_BF16, VL_ATTN_EAGER, VL_CKPT_NONE, 2, 2, 0, 1,
       16611563008.0, false},
      {"TP2 amp ckpt b8", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_FULL, 8, 2, 0, 1,
       11533847040.0, false},
      {"Qwen untied TP2 amp b4", 2, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 2, 0, 1,
       14483695616.0, false},
      {"TP2 bf16 b4", 0, VL_PREC_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 2, 0, 1, 10066568704.0,
       false},
      {"TP2 fp32 b2", 0, VL_PREC_FP32, VL_ATTN_SDPA, VL_CKPT_NONE, 2, 2, 0, 1, 15318668800.0,
       false},
      {"DDP b4", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 0, 2, 31095169536.0, false},
      {"FSDP full b4", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 3, 2, 20796207616.0,
       false},
      {"FSDP grad-op b4", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 2, 2,
       24495927808.0, false},
      {"Qwen DDP b4", 1, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 0, 2, 23023125504.0,
       false},
      {"Qwen FSDP full b4", 1, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 3, 2,
       18662435840.0, false},
      {"Qwen FSDP grad-op b4", 1, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 1, 2, 2,
       20034375168.0, false},
      /* sequence parallelism (nccl-run, tp-sp/sp.jsonl) */
      {"TP2+SP amp b4", 0, VL_PREC_AMP_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 2, 0, 1, 14753633792.0,
       true},
      {"TP2+SP bf16 b4", 0, VL_PREC_BF16, VL_ATTN_SDPA, VL_CKPT_NONE, 4, 2, 0, 1, 8961009152.0,
       true},
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.precision = runs[i].prec;
    j.attention = runs[i].attn;
    j.checkpointing = runs[i].ckpt;
    j.batch = runs[i].batch;
    j.seq = 1024;
    j.tp = runs[i].tp;
    j.dp = runs[i].dp;
    j.zero = runs[i].zero;
    j.sp = runs[i].sp;
    /* bench/gpu/jobs/parallel_jobs.py data keeps only the loss; parallel_jobs.py tensor
     * the logits */
    j.drop_outputs = runs[i].dp > 1;
    struct vl_bill b;
    tu_bill(&archs[runs[i].model], &j, &b);
    assert_close(b.peak_allocated_bytes, runs[i].measured, 0.07, runs[i].what);
  }
}

/* Pipeline parallelism on 2 H200s (bench/gpu/jobs/parallel_jobs.py pipeline: GPT-2 and GPT-2
 * medium split into two stages by torch.distributed.pipelining, bf16,
 * AdamW, 512 tokens a sequence; bench/results/unseen-sets/
 * pp-stages/pp8.jsonl): each stage's max_memory_allocated() in bytes against
 * the bill's first and last stage, the bill itself the heavier (the last). */
static void pipeline_stages_on_two_h200s(void **state) {
  (void)state;
  static const struct {
    const char *what, *model;
    unsigned micro_batch, micro_batches;
    bool gpipe;
    double first, last; /* each stage's max_memory_allocated() */
  } runs[] = {
      {"gpt2 1f1b", "data/models/gpt2.json", 2, 4, false, 1326458880.0, 2041814016.0},
      {"gpt2 gpipe", "data/models/gpt2.json", 2, 4, true, 1724032000.0, 3329245696.0},
      {"gpt2-medium 1f1b", "data/models/gpt2-medium.json", 2, 8, false, 3208456704.0, 3880803840.0},
      {"gpt2-medium gpipe", "data/models/gpt2-medium.json", 2, 8, true, 7204848128.0,
       10042470912.0},
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    struct vl_arch a;
    tu_arch(runs[i].model, &a);
    struct vl_job j;
    vl_job_init(&j);
    j.precision = VL_PREC_BF16;
    j.optimizer = VL_OPT_ADAMW;
    j.batch = runs[i].micro_batch;
    j.grad_accum = runs[i].micro_batches;
    j.seq = 512;
    j.pp = 2;
    j.pp_gpipe = runs[i].gpipe;
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    assert_int_equal(b.pp_stage, 1); /* the last stage: the head, the outputs */
    assert_int_equal(b.peak_allocated_bytes, b.pp_last.peak_allocated_bytes);
    /* every stage within 3 % (GPipe was +9.0 / +5.4 % and +8.0 / +6.1 %
     * with gradients through its forwards and the embeddings' gradient at
     * the first stage's top layer) */
    assert_close(b.pp_first.peak_allocated_bytes, runs[i].first, 0.03, runs[i].what);
    assert_close(b.pp_last.peak_allocated_bytes, runs[i].last, 0.03, runs[i].what);
  }
}

/* Measured runs whose allocator reserve the training replay must get (the
 * calibration's fragment most: 8-21 % low with a churn factor; one control
 * does not), read from the committed results files (each run's settings as
 * `validate` reads them): process total and reserved within 7 % of the
 * H200's, peak allocated within 2 %, and the replay's peak allocated is
 * the estimate's */
static const struct {
  const char *file, *name;
} replayed[] = {
#define CAL "data/reference/h200-torch-2.11/calibration-isolated.json"
#define UNSEEN "data/reference/h200-torch-2.11/unseen-measured.json"
    {CAL, "gemma2b-amp-adamw-ckpt"},
    {CAL, "pythia14-amp-adamw-sdpa"},
    {CAL, "gpt2l-amp-adamw-ckpt"},
    {CAL, "phi3-amp-sgd-ckpt"},
    {CAL, "phi3-mixed-adamw-fused"},
    {CAL, "qwen05-fp16-sgd"},
    {CAL, "pythia160-ampfp16-adamw"},
    {CAL, "qwen05-amp-adamw-sdpa"},
    /* outside the calibration set, where the first replay (layers as
     * blocks) missed by -20.4 % (nccl-run) */
    {UNSEEN, "v-qwen05-bf16-sgdm-ckpt-b32s1024"},
    /* Gemma-7B's loss block, found once Gemma's scaled embeddings were
     * replayed (-9.5 -> -0.4 %; replay-histories unseen6/embed-probe.txt)
     */
    {UNSEEN, "w-gemma7b-bf16-sgd-ckpt-b2s2048"},
    {UNSEEN, "w-gpt2-ampfp16-sgd-b32s1024"},
    /* the fourth set's two misses (-18.4, -14.7 %), found in their
     * histories: eager's weights held by the layer, the gate's output
     * freed early (unseen-sets unseen4, unseen4-miss-histories) */
    {UNSEEN, "x-qwen05-amp-adamw-eager-ckpt-b8s2048"},
    {UNSEEN, "x-gemma2b-bf16-sgdm-ckpt-b8s1024"},
    /* the fifth set's GPT-2 in bf16 eager, +17.4 % while every softmax
     * was fp32: GPT-2's is in the scores' dtype (replay-histories
     * unseen5-worst-histories) */
    {UNSEEN, "y-gpt2m-bf16-adamw-eager-b8s1024"},
    /* fp32 with grouped KV heads: SDPA's math backend replayed (+5.6 %
     * when it ran as memory-efficient attention) */
    {UNSEEN, "z-qwen05-fp32-adamw-b4s2048"},
    /* Gemma-2B bf16 SGD: -1.3 % with Llama's RMSNorm and in-order
     * segment addresses, +12.2 % with Gemma's scaled embeddings, -0.2 %
     * with addresses numbered downward and Gemma's own RMSNorm (its
     * 32 and 64 MiB blocks decide where the last layer's MLP lands) */
    {UNSEEN, "u-gemma2b-bf16-sgd-b4s2048"},
    /* LoRA replayed (a frozen base; PEFT's adapters): -12.7 % when LoRA
     * took the churn factor */
    {UNSEEN, "y-qwen05-bf16-lora16-adamw-b8s2048"},
#undef CAL
#undef UNSEEN
};

static void training_reserve_replayed(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof replayed / sizeof replayed[0]; i++) {
    size_t len = 0;
    char *text = tu_read(replayed[i].file, &len);
    struct vl_measured m;
    struct vl_err err = {""};
    assert_int_equal(vl_measured_parse(text, len, &m, &err), VL_OK);
    free(text);
    const struct vl_measured_run *run = NULL;
    for (size_t k = 0; k < m.n && !run; k++)
      if (strcmp(m.runs[k].name, replayed[i].name) == 0) run = &m.runs[k];
    assert_non_null(run);
    assert_true(run->ok && run->nvml_process);
    struct vl_bill b;
    char dir[256];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(replayed[i].file, '/') - replayed[i].file),
             replayed[i].file);
    measured_bill(dir, run, &b);
    assert_close(b.total_bytes, (double)run->nvml_process, 0.07, run->name);
    assert_close(b.peak_reserved_bytes, (double)run->peak_reserved, 0.07, run->name);
    const struct vl_term *r = NULL;
    for (int k = 0; k < b.n_terms; k++)
      if (b.terms[k].line == VL_LINE_RESERVE) r = &b.terms[k];
    assert_non_null(r);
    assert_int_equal(r->n_in, 2);
    assert_string_equal(r->in[1].name, "replay_allocated");
    /* the replay's peak allocated is the estimate's, and the H200's */
    assert_int_equal((uint64_t)r->in[1].value, b.peak_allocated_bytes);
    assert_close(b.peak_allocated_bytes, (double)run->peak_allocated, 0.02, run->name);
    vl_measured_release(&m);
  }
}

/* The model types measured on one H200 (bench/results/model-types/: the
 * types suite, and other shapes of the types, written down before they
 * were measured): peak allocated within 2 % and the process total within
 * 5 % for every run but the ones listed with the bound they are known to
 * miss by; T5's generate() is refused (not modelled): not judged.
 * StarCoder2-3B's total was -5.5 % before the scratch of its bias
 * gradients' column sums was billed (cuda_reduce.c), ViT's allocated
 * -2.1 %. */
static const struct {
  const char *name;
  double alloc_tol, total_tol;
  const char *why;
} known_misses[] = {
    {"starcoderbase1b-infer-fp32", 0.03, 0.05, "generate() fp32 -2.1 %"},
    {"phi2-bf16-adamw-fused-ckpt", 0.02, 0.07,
     "total +6.0 %: in the replay the recomputation's attention-output copies split the cached "
     "segment of the fp32 logits, two more are made; the dry run of the same job is +3.3 %"},
};

/* The loops people run (bench/results/loops/, bench/gpu/jobs/workloads.py loops-measure on
 * one H200: GPT-2 and Qwen2-0.5B, bf16 autocast, three steps): each
 * --loop within 2 % of max_memory_allocated; they differ by up to 12 %. */
static void loops_against_the_h200(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("data/reference/h200-torch-2.11/loops-measured.json", &len);
  json_t *root = json_loadb(text, len, 0, NULL);
  assert_non_null(root);
  free(text);
  size_t i;
  json_t *r;
  int n = 0;
  json_array_foreach(json_object_get(root, "runs"), i, r) {
    char model[128], what[96];
    const char *loop = json_string_value(json_object_get(r, "loop"));
    snprintf(model, sizeof model, "data/models/%s.json",
             json_string_value(json_object_get(r, "model")));
    struct vl_arch a;
    tu_arch(model, &a);
    struct vl_job j;
    vl_job_init(&j); /* AdamW (foreach), SDPA, amp-bf16: the script's settings */
    j.batch = (uint64_t)json_integer_value(json_object_get(r, "batch"));
    j.seq = (uint64_t)json_integer_value(json_object_get(r, "seq"));
    j.precision = VL_PREC_AMP_BF16;
    j.optimizer = VL_OPT_ADAMW;
    assert_true(vl_loop_parse(loop, &j.loop));
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    snprintf(what, sizeof what, "%s --loop %s", json_string_value(json_object_get(r, "model")),
             loop);
    assert_close(b.peak_allocated_bytes,
                 (double)json_integer_value(json_object_get(r, "max_memory_allocated")), 0.02,
                 what);
    n++;
  }
  assert_int_equal(n, 8);
  json_decref(root);
}

static void model_types_against_the_h200(void **state) {
  (void)state;
  static const char *const files[] = {"data/reference/h200-torch-2.11/types-measured.json",
                                      "data/reference/h200-torch-2.11/types-unseen-measured.json"};
  int judged = 0, approximate = 0;
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    size_t len = 0;
    char *text = tu_read(files[f], &len);
    struct vl_measured m;
    struct vl_err err = {""};
    assert_int_equal(vl_measured_parse(text, len, &m, &err), VL_OK);
    free(text);
    for (size_t k = 0; k < m.n; k++) {
      const struct vl_measured_run *run = &m.runs[k];
      assert_true(run->ok && run->nvml_process);
      char model[256];
      snprintf(model, sizeof model, "data/models/%s.json", run->model);
      struct vl_arch a;
      tu_arch(model, &a);
      if (vl_arch_approximate(&a)) {
        approximate++;
        continue;
      }
      if (a.enc_layers && run->job.task == VL_TASK_INFER) { /* generate() not modelled: refused */
        struct vl_bill nb;
        struct vl_overheads ov;
        vl_overheads_default(&ov);
        assert_int_equal(vl_bill_compute(&a, &run->job, &ov, &nb, &err), VL_ECONFLICT);
        assert_non_null(strstr(err.msg, "encoder-decoder"));
        approximate++;
        continue;
      }
      double at = 0.02, tt = 0.05;
      for (size_t i = 0; i < sizeof known_misses / sizeof known_misses[0]; i++)
        if (strcmp(known_misses[i].name, run->name) == 0)
          at = known_misses[i].alloc_tol, tt = known_misses[i].total_tol;
      struct vl_bill b;
      tu_bill(&a, &run->job, &b);
      assert_close(b.peak_allocated_bytes, (double)run->peak_allocated, at, run->name);
      assert_close(b.total_bytes, (double)run->nvml_process, tt, run->name);
      judged++;
    }
    vl_measured_release(&m);
  }
  assert_int_equal(judged, 46);
  assert_int_equal(approximate, 1);
}

static void optimizers_by_the_published_bills(void **state) {
  (void)state;
  static const struct {
    enum vl_optimizer o;
    double want, tol;
  } cases[] = {
      {VL_OPT_SGD, 8, 1e-9},    {VL_OPT_SGD_MOMENTUM, 12, 1e-9}, {VL_OPT_LION, 12, 1e-9},
      {VL_OPT_ADAMW, 16, 1e-9}, {VL_OPT_ADAM8BIT, 10, 0.001},    {VL_OPT_ADAFACTOR, 8, 0.01},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct vl_job j;
    vl_job_init(&j);
    j.precision = VL_PREC_MIXED_BF16;
    j.optimizer = cases[i].o;
    struct vl_bill b;
    tu_bill(&llama7b, &j, &b);
    assert_close(states_per_param(&b), cases[i].want, cases[i].tol, vl_optimizer_name(cases[i].o));
  }
}

static void phases_move_with_the_job(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 1;
  j.seq = 128; /* tiny activations: the foreach optimizer step is the peak */
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  assert_int_equal(b.peak_phase, VL_PH_OPTIMIZER);
  assert_true(b.lines[VL_LINE_TRANSIENT] > 0);
  j.opt_impl = VL_IMPL_FUSED;
  tu_bill(&llama7b, &j, &b);
  assert_int_equal(b.line_max[VL_LINE_TRANSIENT] < 1ull << 30, 1);
  vl_job_init(&j);
  j.batch = 16; /* large activations: the backward is the peak */
  tu_bill(&llama7b, &j, &b);
  assert_int_equal(b.peak_phase, VL_PH_BACKWARD);
  /* accumulation keeps gradients through the next forward */
  vl_job_init(&j);
  j.grad_accum = 4;
  tu_bill(&llama7b, &j, &b);
  assert_true(b.live[VL_LINE_GRADIENTS] & (1u << VL_PH_FORWARD));
}

static void offload_moves_states_to_host(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_MIXED_BF16;
  j.dp = 4;
  j.zero = 2;
  j.offload = VL_OFFLOAD_OPTIMIZER;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  assert_int_equal(b.line_max[VL_LINE_OPTIMIZER], 0);
  assert_int_equal(b.line_max[VL_LINE_MASTER], 0);
  assert_int_equal(b.host_bytes, (uint64_t)(b.params + 3) / 4 * 12);
}

static void pipeline_reports_the_heavier_stage(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.pp = 4;
  j.grad_accum = 8;
  struct vl_bill b;
  tu_bill(&llama7b, &j, &b);
  assert_true(b.params_per_gpu < b.params / 3);
  assert_true(b.pp_stage == 0 || b.pp_stage == 3);
}

/* The cuBLAS workspaces are the card's: one handle a thread that runs
 * matmuls (two in training: the forward's and autograd's backward thread;
 * one in generate()), each with PyTorch's default workspace on that card
 * from the catalog, plus ROCm's separate hipBLASLt one. */
static void workspaces_are_the_cards(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  static const struct {
    const char *gpu;
    uint64_t per_thread; /* PyTorch's defaults, from CublasHandlePool.cpp */
  } cards[] = {{"a100-80gb", 4096 * 1024 * 2 + 16 * 1024 * 8}, /* :4096:2:16:8 */
               {"h100-80gb", 4096ull * 8 * 1024},              /* 32 MiB on Hopper */
               {"mi300x", (128ull << 20) + (76ull << 20)}};    /* hipBLAS + hipBLASLt */
  for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++) {
    const struct vl_gpu *g = vl_catalog_find(&cat, cards[i].gpu);
    assert_non_null(g);
    struct vl_overheads ov;
    vl_overheads_default(&ov);
    vl_overheads_for_gpu(&ov, g);
    uint64_t catalog = g->cublas_workspace_bytes + g->cublaslt_workspace_bytes;
    assert_int_equal(catalog, cards[i].per_thread);
    struct vl_job j;
    vl_job_init(&j);
    j.batch = 2;
    j.seq = 512;
    struct vl_bill b;
    struct vl_err err = {""};
    assert_int_equal(vl_bill_compute(&gpt2, &j, &ov, &b, &err), VL_OK);
    assert_int_equal(b.line_max[VL_LINE_WORKSPACE], VL_WORKSPACE_THREADS_TRAIN * catalog);
    assert_int_equal(VL_WORKSPACE_THREADS_TRAIN, 2);
    j.task = VL_TASK_INFER;
    assert_int_equal(vl_bill_compute(&gpt2, &j, &ov, &b, &err), VL_OK);
    assert_int_equal(b.line_max[VL_LINE_WORKSPACE], VL_WORKSPACE_THREADS_INFER * catalog);
    assert_int_equal(VL_WORKSPACE_THREADS_INFER, 1);
  }
  vl_catalog_release(&cat);
}

/* The H200's figures are the calibration's: its catalog row gives the bill
 * the overheads it had before cards had their own, byte for byte. */
static void h200_bill_unchanged(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_overheads def, h200;
  vl_overheads_default(&def);
  h200 = def;
  vl_overheads_for_gpu(&h200, vl_catalog_find(&cat, "h200"));
  assert_int_equal(h200.cublas_workspace_bytes, 32ull << 20);
  assert_int_equal(h200.cublaslt_workspace_bytes, 0);
  assert_int_equal(memcmp(&def, &h200, sizeof def), 0);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 4;
  j.seq = 1024;
  struct vl_bill a, b;
  struct vl_err err = {""};
  assert_int_equal(vl_bill_compute(&llama7b, &j, &def, &a, &err), VL_OK);
  assert_int_equal(vl_bill_compute(&llama7b, &j, &h200, &b, &err), VL_OK);
  assert_int_equal(a.total_bytes, b.total_bytes);
  assert_int_equal(a.peak_reserved_bytes, b.peak_reserved_bytes);
  assert_int_equal(memcmp(a.lines, b.lines, sizeof a.lines), 0);
  assert_int_equal(a.line_max[VL_LINE_WORKSPACE], 2 * (32ull << 20));
  vl_catalog_release(&cat);
}

/* The card's SMs reach the bill (vl_overheads_for_gpu): StarCoder2-3B at
 * 2 x 2048 has trained biases whose column sums split over 18 blocks on
 * the A100's 108 SMs and 22 on the H200's 132 (test_tape.c
 * bias_scratch_is_the_cards), so its replayed reserve moves with them. */
static void sm_count_is_the_cards(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_arch sc2;
  tu_arch("data/models/starcoder2-3b.json", &sc2);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 2048;
  struct vl_overheads card, by_hand;
  vl_overheads_default(&card);
  vl_overheads_for_gpu(&card, vl_catalog_find(&cat, "a100-80gb"));
  assert_int_equal(card.sm_count, 108);
  assert_int_equal(card.threads_per_sm, 2048);
  by_hand = card;
  by_hand.sm_count = 132; /* the H200's SMs with the A100's workspaces */
  static struct vl_bill a, b;
  struct vl_err err = {""};
  assert_int_equal(vl_bill_compute(&sc2, &j, &card, &a, &err), VL_OK);
  assert_int_equal(vl_bill_compute(&sc2, &j, &by_hand, &b, &err), VL_OK);
  assert_true(a.peak_reserved_bytes != b.peak_reserved_bytes);
  by_hand.sm_count = 108;
  assert_int_equal(vl_bill_compute(&sc2, &j, &by_hand, &b, &err), VL_OK);
  assert_int_equal(a.peak_reserved_bytes, b.peak_reserved_bytes);
  assert_int_equal(memcmp(a.lines, b.lines, sizeof a.lines), 0);
  vl_catalog_release(&cat);
}

/* LoRA without target_modules takes PEFT's default for the type (peft 0.21
 * utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING):
 * Phi's q_proj, v_proj, fc1, fc2; Falcon's fused query_key_value; Phi-3
 * has none in PEFT (LoraConfig asks), its fused qkv_proj assumed. A target
 * given by transformers' own module name finds the linear this inventory
 * names as BERT's (DeBERTa-v2's query_proj, DistilBERT's q_lin, ffn.lin1). */
static void lora_default_targets_are_peft_s(void **state) {
  (void)state;
  struct vl_arch a;
  const char *names[4];
  bool peft;
  tu_arch("data/models/phi-2.json", &a);
  assert_int_equal(vl_lora_default_targets(&a, names, &peft), 4);
  assert_true(peft);
  assert_string_equal(names[2], "fc1");
  struct vl_job j;
  vl_job_init(&j);
  j.lora_rank = 8;
  j.seq = 512; /* within every model's positions */
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  /* q, v: 8 x (2560 + 2560); fc1, fc2: 8 x (2560 + 10240), 32 layers */
  assert_int_equal(b.trainable_params, 32ull * 8 * (2 * 5120 + 2 * 12800));
  tu_arch("data/models/falcon-7b.json", &a);
  assert_int_equal(vl_lora_default_targets(&a, names, &peft), 1);
  assert_string_equal(names[0], "query_key_value");
  tu_bill(&a, &j, &b); /* was refused: Falcon has no q_proj */
  /* query_key_value: 4544 -> 71 x 64 + 2 x 64 = 4672; 8 x (4544 + 4672) */
  assert_int_equal(b.trainable_params, 32ull * 8 * (4544 + 4672));
  tu_arch("data/models/phi-3-mini.json", &a);
  assert_int_equal(vl_lora_default_targets(&a, names, &peft), 1);
  assert_false(peft);
  assert_string_equal(names[0], "qkv_proj");
  struct vl_bill hf, ours;
  tu_arch("data/models/deberta-v3-base.json", &a);
  j.lora_targets[0] = "query_proj";
  j.lora_targets[1] = "value_proj";
  j.n_lora_targets = 2;
  tu_bill(&a, &j, &hf);
  j.lora_targets[0] = "query";
  j.lora_targets[1] = "value";
  tu_bill(&a, &j, &ours);
  assert_int_equal(hf.trainable_params, ours.trainable_params);
  assert_int_equal(hf.peak_allocated_bytes, ours.peak_allocated_bytes);
  /* DeBERTa-v2's LoRA job under autocast is not replayed: approximate,
   * and it says by how much (in bf16 it is: deberta_disentangled) */
  assert_non_null(hf.approximate);
  assert_non_null(strstr(hf.approximate, "12 to 20 %"));
  tu_arch("data/models/distilbert-base-uncased.json", &a);
  j.lora_targets[0] = "lin1";
  j.n_lora_targets = 1;
  tu_bill(&a, &j, &hf);
  /* an encoder's LoRA job is replayed (encoder_lora_replayed) */
  assert_null(hf.approximate);
  /* intermediate.dense: 8 x (768 + 3072), 6 layers */
  assert_int_equal(hf.trainable_params, 6ull * 8 * (768 + 3072));
  /* the name a LoraConfig (and so the dry run) gives PEFT */
  assert_string_equal(vl_lora_module_name(&a, "query"), "q_lin");
  assert_string_equal(vl_lora_module_name(&a, "lin1"), "lin1");
  tu_arch("data/models/modernbert-base.json", &a);
  assert_int_equal(vl_lora_default_targets(&a, names, &peft), 1);
  assert_string_equal(names[0], "Wqkv"); /* fused; PEFT has no default */
}

/* the bill of config's job under SDPA and under eager attention */
static void sdpa_and_eager(const char *config, enum vl_precision prec, uint64_t batch, uint64_t seq,
                           struct vl_bill *sdpa, struct vl_bill *eager) {
  struct vl_arch a;
  tu_arch(config, &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = prec;
  j.batch = batch;
  j.seq = seq;
  tu_bill(&a, &j, sdpa);
  j.attention = VL_ATTN_EAGER;
  tu_bill(&a, &j, eager);
}

/* DeBERTa-v2 has no SDPA path in transformers 5.17 (modeling_deberta_v2.py
 * sets no _supports_sdpa: PreTrainedModel's False), so from_pretrained
 * runs it eagerly whatever is asked: the bill of an SDPA job is the eager
 * one's (its scores and probabilities held), not 35 % less */
static void deberta_runs_eager(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/deberta-v3-base.json", &a);
  assert_true(vl_arch_eager_only(&a));
  struct vl_bill sdpa, eager;
  sdpa_and_eager("data/models/deberta-v3-base.json", VL_PREC_AMP_BF16, 16, 512, &sdpa, &eager);
  assert_int_equal(sdpa.peak_allocated_bytes, eager.peak_allocated_bytes);
  tu_arch("data/models/bert-base-uncased.json", &a);
  assert_false(vl_arch_eager_only(&a));
}

/* T5 under SDPA: the position bias is the mask, which with half inputs
 * sends PyTorch to its math path (fp32 scores, softmax's output saved, no
 * half copy of the probabilities as eager keeps), and in training the math
 * path's own dropout of the probabilities (its mask and fp32 output
 * saved). An H200 ran t5-base bf16 8 x 512 with 128 target tokens at
 * 7,705,196,544 B peak allocated (bench/results/reserved/lora-seq2seq-h200/);
 * without that dropout the replay was 21 % under it, replayed as eager
 * attention 4 to 15 % over the dry run on meta, read as an encoder's
 * activations 54 % under */
static void t5_sdpa_math_path(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/t5-base.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_BF16;
  j.batch = 8;
  j.seq = 512;
  j.target_seq = 128;
  struct vl_bill sdpa, eager;
  tu_bill(&a, &j, &sdpa);
  j.attention = VL_ATTN_EAGER;
  tu_bill(&a, &j, &eager);
  assert_close((double)sdpa.peak_allocated_bytes, 7705196544.0, 0.01, "t5-base bf16 SDPA, H200");
  assert_null(sdpa.approximate);
  assert_null(eager.approximate);
}

/* an encoder-decoder's bill, bf16 AdamW, batch x seq source tokens and
 * target decoder tokens */
static void seq2seq_bill(const char *config, uint64_t batch, uint64_t seq, uint64_t target,
                         enum vl_attention attn, enum vl_ckpt ckpt, uint64_t lora,
                         struct vl_bill *b) {
  struct vl_arch a;
  tu_arch(config, &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_BF16;
  j.batch = batch;
  j.seq = seq;
  j.target_seq = target;
  j.attention = attn;
  j.checkpointing = ckpt;
  j.lora_rank = lora;
  tu_bill(&a, &j, b);
}

/* T5 under SDPA, checkpointed: the math path's _safe_softmax makes a bool
 * isneginf() and a row mask beside its output, and its backward on CUDA
 * a second block of the scores' size (tmp = grad * output); without them
 * the replay was 6.4 % under allocated and 9.0 % under reserved of an
 * H100's t5-base bf16 8 x 1,024 / 256 (3,892,289,536 and 4,466,933,760 B:
 * bench/results/reserved/raw.jsonl:history-t5-sdpa/) */
static void t5_sdpa_checkpointed_softmax_temporaries(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/t5-base.json", 8, 1024, 256, VL_ATTN_SDPA, VL_CKPT_FULL, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 3892289536.0, 0.005, "allocated, H100");
  assert_close((double)b.peak_reserved_bytes, 4466933760.0, 0.01, "reserved, H100");
  assert_null(b.approximate);
}

/* T5 and BART under gradient checkpointing: each T5Block, BartEncoderLayer
 * and BartDecoderLayer a non-reentrant checkpoint (transformers 5
 * modeling_layers.py GradientCheckpointingLayer), replayed with its
 * recomputation; read analytically the bill was 23 % (T5) and 44 % (BART)
 * above the dry runs on meta tensors. The peaks below are those dry runs'
 * (`estimate --dry-run`, eager, bf16, 8 x 512 source and 128 target
 * tokens; T5's of PyTorch 2.13 + transformers 5.x: 2,499,022,336 and
 * 2,644,508,672 B). T5's reserved within 1 %: with T5's lifetimes
 * (T5LayerNorm's temporaries, the residual sums made before the
 * branches go, inputs_embeds to the stack's return, matmul's copies, the
 * norms' weight-gradient reductions) it was -2.4 %, before them -5.2 %;
 * with bmm's backward making its second operand's gradient first (k's
 * before q's, v's before the weights', as mm makes the weight's first)
 * -0.5 % (the rest is softmax's CUDA temporary, which a meta trace cannot
 * see); the H200's run of the same job (lora-seq2seq.json) 0.00 %, and
 * -4.5 % with the operands' order the other way */
static void seq2seq_checkpointing_replayed(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/t5-base.json", 8, 512, 128, VL_ATTN_EAGER, VL_CKPT_FULL, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 2499022336.0, 0.01, "t5-base checkpointed");
  assert_close((double)b.peak_reserved_bytes, 2644508672.0, 0.01, "t5-base checkpointed");
  assert_null(b.approximate);
  seq2seq_bill("data/models/bart-base.json", 8, 512, 128, VL_ATTN_EAGER, VL_CKPT_FULL, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 1648222208.0, 0.015, "bart-base checkpointed");
  assert_close((double)b.peak_reserved_bytes, 1952448512.0, 0.01, "bart-base checkpointed");
  assert_null(b.approximate);
}

/* T5's position bias (T5Attention.compute_bias: 1 x heads x s x s, made by
 * each stack's first layer, added to every layer's scores, its gradient
 * summed over them) is held through the step: at 4 x 1,024 tokens the
 * checkpointed replay was 1.1 % under its dry run (2,427,314,176 B) without
 * it. The replay also makes softmax's CUDA temporary (SoftMax.cu: grad *
 * output, the fp32 scores' size), which the dry run on meta cannot see: it
 * may stand above the dry run by at most that block */
static void t5_position_bias_held(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/t5-base.json", 4, 1024, 64, VL_ATTN_EAGER, VL_CKPT_FULL, 0, &b);
  const double traced = 2427314176.0, scores = 4.0 * 12 * 1024 * 1024 * 4;
  printf("  t5-base 4 x 1024: allocated %llu (dry run %.0f)\n",
         (unsigned long long)b.peak_allocated_bytes, traced);
  assert_true((double)b.peak_allocated_bytes > traced * (1 - 0.008));
  assert_true((double)b.peak_allocated_bytes < traced + scores);
}

/* LoRA on T5 and BART (PEFT's default targets: q, v; q_proj, v_proj, which
 * is BART's q and v here), replayed: the decoder's adapters on both its
 * attentions; the analytic reading was 11.6 % above T5's dry run, and
 * BART's default targets were refused. Dry runs on meta, bf16 eager,
 * 8 x 512 / 128, rank 16 */
static void seq2seq_lora_replayed(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/t5-base.json", 8, 512, 128, VL_ATTN_EAGER, VL_CKPT_NONE, 16, &b);
  assert_close((double)b.peak_allocated_bytes, 5144338432.0, 0.01, "t5-base LoRA");
  seq2seq_bill("data/models/bart-base.json", 8, 512, 128, VL_ATTN_EAGER, VL_CKPT_NONE, 16, &b);
  assert_close((double)b.peak_allocated_bytes, 2727749120.0, 0.01, "bart-base LoRA");
  assert_close((double)b.peak_reserved_bytes, 2831155200.0, 0.01, "bart-base LoRA");
}

/* BartForConditionalGeneration turns use_cache off when given labels
 * (modeling_bart.py): no KV cache is held through the step. With one the
 * bill was 2.2 % above the dry run (bf16 SDPA 4 x 512 / 32: 1,679,226,368
 * B) and the measured H100 runs */
static void bart_keeps_no_cache(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/bart-base.json", 4, 512, 32, VL_ATTN_SDPA, VL_CKPT_NONE, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 1679226368.0, 0.01, "bart-base no cache");
}

/* transformers 5's gradient_checkpointing_enable makes the input
 * embeddings' output require grad (modeling_utils.py
 * enable_input_require_grads), so under LoRA with checkpointing BART's
 * embeddings' LayerNorm and dropout keep their tensors and the gradient
 * reaches both lookups: bart-base bf16 SDPA 8 x 512 / 128 rank 16 was
 * 2.2 % under its dry run (850,429,440 B) without it */
static void checkpointing_inputs_require_grad(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/bart-base.json", 8, 512, 128, VL_ATTN_SDPA, VL_CKPT_FULL, 16, &b);
  assert_close((double)b.peak_allocated_bytes, 850429440.0, 0.012, "bart-base LoRA checkpointed");
}

/* ... and a decoder's or an encoder's frozen embeddings then give a leaf
 * that requires grad: its AccumulateGrad node holds it, and the first
 * layer's input gradient as its .grad, until the loop lets go of the
 * loss. Gemma-2B AMP LoRA on every linear, checkpointed, 4 x 2,048 on an
 * H100: the two 64 MiB blocks are the 134,217,728 B the replay lacked
 * after the backward and through the optimizer step (its history:
 * bench/results/reserved/raw.jsonl:history-h100/). On bert-large-uncased
 * AMP LoRA 16 checkpointed, 32 x 512, the H200's peaks (lora-seq2seq.json)
 * were 2.0 % (allocated) and 1.1 % (reserved) above the replay without it */
static void checkpointing_frozen_embeddings_leaf(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/bert-large-uncased.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 32;
  j.seq = 512;
  j.lora_rank = 16;
  j.checkpointing = VL_CKPT_FULL;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  assert_close((double)b.peak_allocated_bytes, 9358918656.0, 0.012, "bert-large LoRA allocated");
  assert_close((double)b.peak_reserved_bytes, 9695133696.0, 0.008, "bert-large LoRA reserved");
}

/* an AMP (bf16) LoRA job of rank 8 on `model`: PEFT's default targets, or
 * every linear; checkpointed or not */
static void amp_lora8_bill(const char *model, uint64_t batch, uint64_t seq, bool all_linear,
                           bool ckpt, struct vl_bill *b) {
  struct vl_arch a;
  tu_arch(model, &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_AMP_BF16;
  j.batch = batch;
  j.seq = seq;
  j.lora_rank = 8;
  if (all_linear) j.n_lora_targets = 1, j.lora_targets[0] = "all-linear";
  if (ckpt) j.checkpointing = VL_CKPT_FULL;
  tu_bill(&a, &j, b);
}

/* The rotary embedding's cos and sin: 2 MiB fp32 blocks of the large pool
 * (1 x 2,048 x 256 each under autocast), made before the first layer and
 * held by every checkpoint to the backward's end. Small, but they sit
 * between the first layer's tensors, and where everything after them
 * lands follows from where they do. Gemma-2B AMP LoRA 8 on every linear,
 * checkpointed, 4 x 2,048: the H100 and the H200 each reserved
 * 50,604,277,760 B at the peak (bench/results/reserved/raw.jsonl:
 * histories-addr-h100/), the second step's tied-head cast (1,000 MiB)
 * pushing its logits into an 8,000 MiB segment and the fp32 logits into a
 * fourth; without the tables the replay found the cast another place and
 * reserved 16.6 % less */
static void rotary_tables_place_the_second_step(void **state) {
  (void)state;
  struct vl_bill b;
  amp_lora8_bill("data/models/gemma-2b.json", 4, 2048, true, true, &b);
  assert_close((double)b.peak_allocated_bytes, 41897561088.0, 0.001, "gemma-2b LoRA allocated");
  assert_close((double)b.peak_reserved_bytes, 50604277760.0, 0.005, "gemma-2b LoRA reserved");
}

/* The forward's cuBLAS workspace (32 MiB on Hopper) is taken at the
 * step's first matmul, after its output: in OPT, which has no rotary
 * tables, that is the first layer's q_proj, among the first layer's
 * tensors, not beside the embeddings. OPT-1.3B AMP LoRA 8, 8 x 1,024: the
 * H100 reserved 27,724,349,440 B (bench/results/reserved/breadth/; its
 * allocator history, bench/results/reserved/raw.jsonl:histories-addr-h100/,
 * has q_proj's output, then the workspace); with the workspace after the
 * embeddings the replay reserved 5.6 % less */
static void forward_workspace_at_first_matmul(void **state) {
  (void)state;
  struct vl_bill b;
  amp_lora8_bill("data/models/opt-1.3b.json", 8, 1024, false, false, &b);
  assert_close((double)b.peak_allocated_bytes, 25832842240.0, 0.006, "opt-1.3b LoRA allocated");
  assert_close((double)b.peak_reserved_bytes, 27724349440.0, 0.01, "opt-1.3b LoRA reserved");
}

/* T5's encoder hands SDPA its position bias as the mask, and that bias is
 * relative_attention_bias(...).permute([2, 0, 1]): its last dimension is
 * not contiguous, which no fused kernel takes (sdp_utils.cpp
 * check_last_dim_stride_equals_1_dense), so even under LoRA (the bias
 * frozen) the encoder runs the math path. t5-base bf16 4 x 1,024 / 64 rank
 * 16: the dry run on meta, which takes the kernel CUDA's select_sdp_backend
 * would, peaks at 8,282,376,192 B allocated; replayed with a fused kernel
 * the estimate was 68 % under it */
static void t5_lora_sdpa_encoder_math(void **state) {
  (void)state;
  struct vl_bill b;
  seq2seq_bill("data/models/t5-base.json", 4, 1024, 64, VL_ATTN_SDPA, VL_CKPT_NONE, 16, &b);
  assert_close((double)b.peak_allocated_bytes, 8282376192.0, 0.01, "t5-base LoRA SDPA");
}

/* T5Stack makes its own embed_tokens (encoder and decoder), tied to the
 * shared matrix after the head is made: four V x h blocks at load, three
 * freed, whose cached segments the step reuses. flan-t5-base fp32 8 x 512
 * / 128 checkpointed: peak reserved 5.5 % under its dry run without them;
 * 5,203,034,112 B the dry run that takes SDPA's kernel as CUDA would (the
 * math path for T5's self-attention in fp32 too) */
static void seq2seq_stack_embeddings_at_load(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("bench/configs/flan-t5-base.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = VL_PREC_FP32;
  j.batch = 8;
  j.seq = 512;
  j.target_seq = 128;
  j.checkpointing = VL_CKPT_FULL;
  struct vl_bill b;
  tu_bill(&a, &j, &b);
  assert_close((double)b.peak_reserved_bytes, 5203034112.0, 0.035, "flan-t5-base fp32 reserved");
}

/* the bill of config's job of batch x seq in precision prec, attention
 * attn, LoRA of rank lora (0: full training), AdamW, no checkpointing */
static void encoder_bill(const char *config, enum vl_precision prec, enum vl_attention attn,
                         uint64_t batch, uint64_t seq, uint64_t lora, struct vl_bill *b) {
  struct vl_arch a;
  tu_arch(config, &a);
  struct vl_job j;
  vl_job_init(&j);
  j.precision = prec;
  j.attention = attn;
  j.batch = batch;
  j.seq = seq;
  j.lora_rank = lora;
  tu_bill(&a, &j, b);
}

/* BERT's eager attention (transformers 5.17 modeling_bert.py
 * eager_attention_forward) calls softmax in the scores' dtype, as RoBERTa's
 * does: under pure bf16 every layer keeps half probabilities, not fp32
 * ones (fp32 only under autocast, whose list has softmax). bert-base bf16
 * eager 16 x 512 peaks at 8,411,492,864 B in `vramledger trace` of that job
 * on meta tensors (python/vramledger/measure.py --device meta); with fp32
 * probabilities the bill said 14 % more. */
static void bert_softmax_in_half(void **state) {
  (void)state;
  struct vl_bill b;
  encoder_bill("data/models/bert-base-uncased.json", VL_PREC_BF16, VL_ATTN_EAGER, 16, 512, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 8411492864.0, 0.005, "bert-base bf16 eager");
}

/* An encoder's LoRA job is replayed: its frozen linears save no input,
 * so Python's references decide when tensors go (BertLayer holds its
 * argument, attention_output and intermediate_output to its return,
 * BertModel.forward its embedding_output through the layers,
 * BertForMaskedLM.forward its sequence_output to the loss; a dropout's
 * output goes once the LayerNorm of its sum returns; modeling_bert.py,
 * transformers 5.17). The figures are `vramledger estimate --dry-run` of
 * each job on meta tensors (PyTorch 2.13, peft 0.21, AdamW, SDPA); the
 * analytic path said +17 % (bert-large) and the replay without these
 * lifetimes put peak reserved 7 and 13 % under (bert-large, roberta-base). */
static void encoder_lora_replayed(void **state) {
  (void)state;
  static const struct {
    const char *config;
    double allocated, reserved;
  } dry[] = {
      {"data/models/roberta-base.json", 5937216000.0, 6830424064.0},
      {"data/models/bert-large-uncased.json", 8871504896.0, 9577693184.0},
  };
  for (size_t i = 0; i < sizeof dry / sizeof dry[0]; i++) {
    struct vl_bill b;
    encoder_bill(dry[i].config, VL_PREC_BF16, VL_ATTN_SDPA, 16, 512, 16, &b);
    assert_null(b.approximate);
    assert_close((double)b.peak_allocated_bytes, dry[i].allocated, 0.01, dry[i].config);
    assert_close((double)b.peak_reserved_bytes, dry[i].reserved, 0.01, dry[i].config);
  }
}

/* A masked LM's decoder is nn.Linear(h, V) with a bias: addmm, whose
 * backward makes the input's gradient first, then autograd's cuBLAS
 * workspace, then the weight's (BertLMPredictionHead, RobertaLMHead,
 * DistilBERT's vocab_projector, DeBERTa-v2's decoder). With the weight's
 * first, roberta-base AMP 8 x 256's head gradient took the loss's fp32
 * segment the optimizer's states then missed: a 207 MB segment more,
 * reserved 5.1 % over the CPU dry run, which is what an H200 measured to
 * the byte (du-roberta-amp-adamw-b8s256: 3,944,742,912 B) */
static void mlm_decoder_has_a_bias(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/roberta-base.json", &a);
  assert_true(a.head_bias);
  struct vl_bill b;
  encoder_bill("data/models/roberta-base.json", VL_PREC_AMP_BF16, VL_ATTN_SDPA, 8, 256, 0, &b);
  assert_close((double)b.peak_allocated_bytes, 3908095488.0, 0.005, "roberta amp allocated");
  assert_close((double)b.peak_reserved_bytes, 3944742912.0, 0.005, "roberta amp reserved");
}

/* DeBERTa-v3's attention as DisentangledSelfAttention runs it
 * (train_replay_deberta.c): q, k and v each projected then copied, k /
 * scale, the relative embeddings projected by query_proj and key_proj
 * (their LoRA adapters with them) and repeated over the batch, c2p and
 * p2c each a bmm saved by its gather, c2p_att and p2c_att held to
 * disentangled_attention_bias's return, rel_att and the masked scores to
 * the attention's, the context to DebertaV2Attention's. Dry runs on meta
 * tensors of deberta-v3-base in bf16: the LoRA job (q, v) was read
 * analytically, 19 % over at 16 x 256 (an H200: 7,537 MiB measured, the
 * dry run's); full training's replay 5.5 % over allocated, 10.2 %
 * reserved */
static void deberta_disentangled(void **state) {
  (void)state;
  static const struct {
    uint64_t batch, seq, rank;
    double allocated, reserved;
  } dry[] = {
      {16, 256, 16, 8092733440.0, 9242148864.0},
      {16, 512, 16, 16991178752.0, 17270046720.0},
      {16, 256, 0, 9093916672.0, 9428795392.0},
  };
  for (size_t i = 0; i < sizeof dry / sizeof dry[0]; i++) {
    struct vl_bill b;
    encoder_bill("data/models/deberta-v3-base.json", VL_PREC_BF16, VL_ATTN_EAGER, dry[i].batch,
                 dry[i].seq, dry[i].rank, &b);
    assert_null(b.approximate);
    assert_close((double)b.peak_allocated_bytes, dry[i].allocated, 0.01, "deberta allocated");
    assert_close((double)b.peak_reserved_bytes, dry[i].reserved, 0.01, "deberta reserved");
  }
}

/* ModernBERT's layers as modeling_modernbert.py runs them: the first
 * layer's attn_norm an nn.Identity, attn_output and the layer's argument
 * held to its return, the embeddings' output held past the final norm
 * (ModernBertModel.forward's mask_kwargs), rotary on two fp32 copies of q
 * and of k cast back (apply_rotary_pos_emb; in fp32, q itself). Dry runs
 * on meta tensors (modernbert-base): without these the LoRA job's reserve
 * was 14 to 15 % over at 8,192 tokens (the loss's fp32 blocks took a
 * segment more; an H200 measured the dry run's 21,179,138,048 B at
 * 16 x 1,024), full training's 1.0 % under in bf16 and, with the upcast
 * in fp32, 7.8 % under */
static void modernbert_layers(void **state) {
  (void)state;
  static const struct {
    enum vl_precision prec;
    uint64_t batch, seq, rank;
    double allocated, reserved;
  } dry[] = {
      {VL_PREC_BF16, 16, 1024, 16, 20537999872.0, 21179138048.0},
      {VL_PREC_BF16, 16, 512, 16, 10347479552.0, 10527703040.0},
      {VL_PREC_BF16, 16, 512, 0, 11392073216.0, 12593397760.0},
      {VL_PREC_FP32, 8, 512, 0, 9822803968.0, 11127488512.0},
  };
  for (size_t i = 0; i < sizeof dry / sizeof dry[0]; i++) {
    struct vl_bill b;
    encoder_bill("data/models/modernbert-base.json", dry[i].prec, VL_ATTN_SDPA, dry[i].batch,
                 dry[i].seq, dry[i].rank, &b);
    assert_null(b.approximate);
    assert_close((double)b.peak_allocated_bytes, dry[i].allocated, 0.005, "modernbert allocated");
    assert_close((double)b.peak_reserved_bytes, dry[i].reserved, 0.005, "modernbert reserved");
  }
}

/* DistilBERT's attention ends at out_lin, no dropout on its output
 * (modeling_distilbert.py DistilBertSelfAttention, TransformerBlock): with
 * one, each layer saved a 1-byte mask more and the bill of distilbert-base,
 * bf16, 16 x 512, AdamW, said 0.9 % more than the dry run's 3,801,713,152 B
 * (meta tensors) */
static void distilbert_attention_output_without_dropout(void **state) {
  (void)state;
  struct vl_bill b;
  encoder_bill("data/models/distilbert-base-uncased.json", VL_PREC_BF16, VL_ATTN_SDPA, 16, 512, 0,
               &b);
  assert_close((double)b.peak_allocated_bytes, 3801713152.0, 0.003, "distilbert-base bf16");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encoder_lora_replayed),
      cmocka_unit_test(modernbert_layers),
      cmocka_unit_test(deberta_disentangled),
      cmocka_unit_test(mlm_decoder_has_a_bias),
      cmocka_unit_test(distilbert_attention_output_without_dropout),
      cmocka_unit_test(bytes_per_parameter_by_precision),
      cmocka_unit_test(ledger_adds_up),
      cmocka_unit_test(activations_respond_to_settings),
      cmocka_unit_test(lora_trains_only_adapters),
      cmocka_unit_test(lora_default_targets_are_peft_s),
      cmocka_unit_test(deberta_runs_eager),
      cmocka_unit_test(t5_sdpa_math_path),
      cmocka_unit_test(t5_sdpa_checkpointed_softmax_temporaries),
      cmocka_unit_test(seq2seq_checkpointing_replayed),
      cmocka_unit_test(t5_position_bias_held),
      cmocka_unit_test(seq2seq_lora_replayed),
      cmocka_unit_test(bart_keeps_no_cache),
      cmocka_unit_test(checkpointing_inputs_require_grad),
      cmocka_unit_test(checkpointing_frozen_embeddings_leaf),
      cmocka_unit_test(rotary_tables_place_the_second_step),
      cmocka_unit_test(forward_workspace_at_first_matmul),
      cmocka_unit_test(t5_lora_sdpa_encoder_math),
      cmocka_unit_test(seq2seq_stack_embeddings_at_load),
      cmocka_unit_test(bert_softmax_in_half),
      cmocka_unit_test(qlora_stores_four_bits),
      cmocka_unit_test(qlora_dequantises_into_the_compute_dtype),
      cmocka_unit_test(conflicts_are_refused),
      cmocka_unit_test(overflow_is_an_error_not_a_number),
      cmocka_unit_test(zero_stages_shard),
      cmocka_unit_test(sdpa_math_backend_for_fp32_gqa),
      cmocka_unit_test(fsdp_gathers_what_it_shards),
      cmocka_unit_test(ddp_second_bucket_copy_other_outcome),
      cmocka_unit_test(ddp_whole_jobs_either_outcome),
      cmocka_unit_test(ddp_rank_total_against_nvml),
      cmocka_unit_test(pipeline_stages_on_two_h200s),
      cmocka_unit_test(training_reserve_replayed),
      cmocka_unit_test(model_types_against_the_h200),
      cmocka_unit_test(loops_against_the_h200),
      cmocka_unit_test(two_h200_runs_within_seven_percent),
      cmocka_unit_test(optimizers_by_the_published_bills),
      cmocka_unit_test(phases_move_with_the_job),
      cmocka_unit_test(offload_moves_states_to_host),
      cmocka_unit_test(pipeline_reports_the_heavier_stage),
      cmocka_unit_test(workspaces_are_the_cards),
      cmocka_unit_test(h200_bill_unchanged),
      cmocka_unit_test(sm_count_is_the_cards),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
