/* lib/model/bill.c, activations.c, precision.c: the training bill. */
#include "testutil.h"

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

static void conflicts_are_refused(void **state) {
  (void)state;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill b;
  struct vl_err err = {""};
  struct vl_job j;
  vl_job_init(&j);
  j.zero = 3;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ECONFLICT);
  assert_non_null(strstr(err.msg, "--dp"));
  vl_job_init(&j);
  j.sp = true;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ECONFLICT);
  vl_job_init(&j);
  j.tp = 3;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ECONFLICT);
  vl_job_init(&j);
  j.pp = 64;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ECONFLICT);
  vl_job_init(&j);
  j.seq = 1025; /* GPT-2 has 1024 learned positions */
  assert_int_equal(vl_bill_compute(&gpt2, &j, &ov, &b, &err), VL_ECONFLICT);
  vl_job_init(&j);
  j.qlora = true;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ECONFLICT);
  vl_job_init(&j);
  j.batch = 0;
  assert_int_equal(vl_bill_compute(&llama7b, &j, &ov, &b, &err), VL_ERANGE);
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

static void optimizers_by_the_seed(void **state) {
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bytes_per_parameter_by_precision),
      cmocka_unit_test(ledger_adds_up),
      cmocka_unit_test(activations_respond_to_settings),
      cmocka_unit_test(lora_trains_only_adapters),
      cmocka_unit_test(qlora_stores_four_bits),
      cmocka_unit_test(conflicts_are_refused),
      cmocka_unit_test(overflow_is_an_error_not_a_number),
      cmocka_unit_test(zero_stages_shard),
      cmocka_unit_test(optimizers_by_the_seed),
      cmocka_unit_test(phases_move_with_the_job),
      cmocka_unit_test(offload_moves_states_to_host),
      cmocka_unit_test(pipeline_reports_the_heavier_stage),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
