/* lib/decide/commitment.c: reading a commitment, a job's settings, drift. */
#include "testutil.h"
#include "vramledger/commitment.h"

static void reads_and_compares(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/llama3-8b-lora.json", &len);
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  free(text);
  assert_string_equal(c.model, "llama-3-8b");
  assert_string_equal(c.gpu, "h100-80gb");
  assert_int_equal(c.gpus, 1);
  assert_int_equal(c.job.lora_rank, 16);
  assert_int_equal(c.job.checkpointing, VL_CKPT_FULL);
  assert_int_equal(c.job.precision, VL_PREC_BF16);
  assert_true(c.gpu_hours > 99.9 && c.gpu_hours < 100.1);
  assert_true(c.peak_trigger > 1.049 && c.peak_trigger < 1.051);
  struct vl_drift d[8];
  assert_int_equal(vl_commitment_diff(&c, &c.job, d, 8), 0); /* itself: no drift */
  struct vl_job j = c.job;
  j.batch = 8;
  j.attention = VL_ATTN_EAGER;
  j.lora_targets[0] = "all-linear";
  j.n_lora_targets = 1;
  assert_int_equal(vl_commitment_diff(&c, &j, d, 8), 3);
  assert_string_equal(d[0].field, "batch");
  assert_string_equal(d[0].committed, "2");
  assert_string_equal(d[0].now, "8");
  assert_string_equal(d[1].field, "attention");
  assert_string_equal(d[2].field, "lora-targets");
  assert_int_equal(vl_commitment_diff(&c, &j, d, 1), 3); /* counts past the cap */
  /* the runtime guard: 105 % of the estimated total, or of a measured peak */
  assert_int_equal(vl_commitment_peak_threshold(&c), 27270630482ull); /* 25972029030 x 1.05 */
  c.measured = true;
  c.measured_process_bytes = 20000000000ull;
  assert_int_equal(vl_commitment_peak_threshold(&c), 21000000000ull);
  /* where timing decides between two outcomes (DDP's bucket rebuild), the
   * larger total is the budget and the guard's reference */
  c.measured = false;
  assert_int_equal(c.est_other_total_bytes, 0);
  assert_int_equal(vl_commitment_budget_bytes(&c), c.est_total_bytes);
  c.est_other_total_bytes = 30000000000ull;
  assert_int_equal(vl_commitment_budget_bytes(&c), 30000000000ull);
  assert_int_equal(vl_commitment_peak_threshold(&c), 31500000000ull);
  c.est_other_total_bytes = 20000000000ull; /* below the bill: the bill */
  assert_int_equal(vl_commitment_budget_bytes(&c), c.est_total_bytes);
}

/* a DDP job's commitment carries its other outcome's total */
static void ddp_other_outcome(void **state) {
  (void)state;
  static const char doc[] =
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", \"hardware\": {\"gpu\": "
      "\"h200\", \"gpu_memory_bytes\": 150109880320, \"count\": 2}, \"baseline\": {\"task\": "
      "\"train\", \"batch\": 4, \"seq\": 512, \"dp\": 2}, \"estimate\": "
      "{\"peak_allocated_bytes\": 5279100416, \"peak_reserved_bytes\": 5729419264, "
      "\"total_bytes\": 6803161088, \"other_total_bytes\": 7138705408}}";
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(doc, strlen(doc), &c, &err), VL_OK);
  assert_int_equal(c.est_other_total_bytes, 7138705408ull);
  assert_int_equal(vl_commitment_budget_bytes(&c), 7138705408ull);
  /* audit holds a run to the nearer of the committed outcomes: a peak
   * below the bill's total to the bill, one past the other's to it */
  bool other = true;
  assert_int_equal(vl_commitment_reference_bytes(&c, 6900000000ull, &other), 6803161088ull);
  assert_false(other);
  assert_int_equal(vl_commitment_reference_bytes(&c, 7751073792ull, &other), 7138705408ull);
  assert_true(other);
  c.est_other_total_bytes = 0; /* one outcome: always the total */
  assert_int_equal(vl_commitment_reference_bytes(&c, 7751073792ull, &other), 6803161088ull);
  assert_false(other);
  /* a broken one is refused with the key's name */
  static const char bad[] =
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", \"hardware\": {\"gpu\": "
      "\"h200\", \"gpu_memory_bytes\": 150109880320, \"count\": 2}, \"baseline\": {\"task\": "
      "\"train\", \"batch\": 4, \"seq\": 512, \"dp\": 2}, \"estimate\": {\"peak_allocated_bytes\": "
      "1, \"peak_reserved_bytes\": 1, "
      "\"total_bytes\": 1, \"other_total_bytes\": \"many\"}}";
  assert_int_not_equal(vl_commitment_parse(bad, strlen(bad), &c, &err), VL_OK);
  assert_non_null(strstr(err.msg, "other_total_bytes"));
}

static void never_a_pass_by_accident(void **state) {
  (void)state;
  struct vl_commitment c;
  struct vl_err err = {""};
  const char *bad[] = {
      "{}", "[]", "{\"schema\": \"vramledger.commitment/1\"}",
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", "
      "\"hardware\": {}, \"estimate\": {}, \"baseline\": {\"batch\": 1, \"seq\": 8}}",
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", "
      "\"hardware\": {\"gpu\": \"l4\", \"gpu_memory_bytes\": 5, \"count\": 1}, "
      "\"estimate\": {\"peak_allocated_bytes\": 1, \"peak_reserved_bytes\": 1, "
      "\"total_bytes\": 1}, \"baseline\": {\"batch\": 1, \"seq\": 8, \"precision\": \"fp8\"}}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_not_equal(vl_commitment_parse(bad[i], strlen(bad[i]), &c, &err), VL_OK);
  struct vl_job j;
  char t[64];
  const char *s =
      "{\"settings\": {\"batch\": 4, \"seq\": 128, \"zero\": 2, \"dp\": 8, \"sp\": false, "
      "\"lora_rank\": 8, \"lora_targets\": \"q_proj,v_proj\", \"offload\": \"optimizer\"}}";
  assert_int_equal(vl_job_from_settings(s, strlen(s), &j, t, sizeof t, &err), VL_OK);
  assert_int_equal(j.zero, 2);
  assert_int_equal(j.dp, 8);
  assert_int_equal(j.offload, VL_OFFLOAD_OPTIMIZER);
  assert_int_equal(j.n_lora_targets, 2);
  assert_string_equal(j.lora_targets[1], "v_proj");
  const char *z = "{\"batch\": 4, \"seq\": 128, \"zero\": 7}";
  assert_int_equal(vl_job_from_settings(z, strlen(z), &j, t, sizeof t, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "zero"));
}

/* A DeepSpeed configuration as the settings it controls. */
static vl_status ds(const char *text, struct vl_job *j, char *autos) {
  vl_job_init(j);
  j->batch = 7;
  j->grad_accum = 3;
  struct vl_err err = {""};
  return vl_job_apply_deepspeed(text, strlen(text), j, autos, 256, &err);
}

static void deepspeed_settings(void **state) {
  (void)state;
  struct vl_job j;
  char autos[256];
  size_t len = 0;
  char *text = tu_read("tests/data/deepspeed/zero3-offload.json", &len);
  struct vl_err err = {""};
  vl_job_init(&j);
  assert_int_equal(vl_job_apply_deepspeed(text, len, &j, autos, sizeof autos, &err), VL_OK);
  free(text);
  assert_int_equal(j.batch, 2);
  assert_int_equal(j.grad_accum, 4);
  assert_int_equal(j.dp, 8); /* 64 = 2 x 4 x 8 ranks */
  assert_int_equal(j.zero, 3);
  assert_int_equal(j.offload, VL_OFFLOAD_OPTIMIZER);
  assert_int_equal(j.precision, VL_PREC_MIXED_BF16);
  assert_int_equal(j.optimizer, VL_OPT_ADAMW);
  assert_int_equal(j.framework, VL_FW_DEEPSPEED);
  assert_string_equal(autos, "");
  /* "auto": left as it was, and named */
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": \"auto\", \"fp16\": {\"enabled\": "
                      "true}, \"zero_optimization\": {\"stage\": 1, \"offload_param\": "
                      "{\"device\": \"nvme\"}}, \"optimizer\": {\"type\": \"SGD\", "
                      "\"params\": {\"momentum\": 0.9}}}",
                      &j, autos),
                   VL_OK);
  assert_int_equal(j.batch, 7);
  assert_int_equal(j.grad_accum, 3);
  assert_string_equal(autos, "train_micro_batch_size_per_gpu");
  assert_int_equal(j.precision, VL_PREC_MIXED_FP16);
  assert_int_equal(j.zero, 1);
  assert_int_equal(j.offload, VL_OFFLOAD_FULL);
  assert_int_equal(j.optimizer, VL_OPT_SGD_MOMENTUM);
  /* no precision section: fp32; no zero section: stage 0 */
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": 4}", &j, autos), VL_OK);
  assert_int_equal(j.precision, VL_PREC_FP32);
  assert_int_equal(j.zero, 0);
  assert_int_equal(j.batch, 4);
  /* refusals: never a silent pass */
  assert_int_equal(ds("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}", &j, autos),
                   VL_EKEY);
  assert_int_equal(ds("{\"zero_optimization\": {\"stage\": 4}}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"zero_optimization\": 2}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"optimizer\": {\"type\": \"Shampoo\"}}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4, "
                      "\"gradient_accumulation_steps\": 1}",
                      &j, autos),
                   VL_EKEY);
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": 0}", &j, autos), VL_EKEY);
  assert_int_equal(ds("[1, 2]", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": ", &j, autos), VL_EPARSE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_and_compares), cmocka_unit_test(ddp_other_outcome),
      cmocka_unit_test(never_a_pass_by_accident), cmocka_unit_test(deepspeed_settings)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
