/* lib/measure: the reader of measured runs and the comparison. */
#include <math.h>

#include "testutil.h"
#include "vramledger/validate.h"

static struct vl_measured m;

static int setup(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/measured/h200-subset.json", &len);
  struct vl_err err = {""};
  vl_status s = vl_measured_parse(text, len, &m, &err);
  free(text);
  return s == VL_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  vl_measured_release(&m);
  return 0;
}

static const struct vl_measured_run *find(const char *name) {
  for (size_t i = 0; i < m.n; i++)
    if (strcmp(m.runs[i].name, name) == 0) return &m.runs[i];
  return NULL;
}

static void runs_become_jobs(void **state) {
  (void)state;
  assert_int_equal(m.n, 6);
  assert_string_equal(m.device, "NVIDIA H200");
  const struct vl_measured_run *r = find("gpt2m-mixed-adam-fused");
  assert_non_null(r);
  assert_true(r->ok);
  assert_true(r->holdout);
  assert_int_equal(r->job.precision, VL_PREC_MIXED_BF16);
  assert_true(r->job.master_grads_fp32); /* the suite keeps fp32 main grads */
  assert_int_equal(r->job.opt_impl, VL_IMPL_FUSED);
  assert_int_equal(r->job.batch, 4);
  r = find("llama7b-amp-lora8-alllinear-ckpt");
  assert_int_equal(r->job.lora_rank, 8);
  assert_int_equal(r->job.n_lora_targets, 1);
  assert_string_equal(r->job.lora_targets[0], "all-linear");
  assert_int_equal(r->job.checkpointing, VL_CKPT_FULL);
  r = find("qwen05-bf16-adam8bit"); /* measured with an error */
  assert_false(r->ok);
  assert_non_null(strstr(r->error, "bitsandbytes"));
  r = find("qwen05-infer");
  assert_int_equal(r->job.task, VL_TASK_INFER);
  assert_int_equal(r->job.new_tokens, 256);
  assert_true(r->peak_allocated > 0 && r->nvml_process > r->peak_reserved);
}

static void bad_files(void **state) {
  (void)state;
  struct vl_measured x;
  struct vl_err err = {""};
  const char *bad[] = {"{\"runs\": 3}", "[", "{\"runs\": [{\"name\": 1, \"model\": \"gpt2\"}]}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_not_equal(vl_measured_parse(bad[i], strlen(bad[i]), &x, &err), VL_OK);
    assert_null(x.runs);
  }
  /* an unknown setting makes the run not comparable, not the file unreadable */
  const char *odd = "{\"runs\": [{\"name\": \"a\", \"model\": \"gpt2\", \"task\": \"train\", "
                    "\"precision\": \"fp8\", \"attention\": \"sdpa\", \"batch\": 1, \"seq\": 8, "
                    "\"measured\": {\"peak_allocated\": 5}}]}";
  assert_int_equal(vl_measured_parse(odd, strlen(odd), &x, &err), VL_OK);
  assert_false(x.runs[0].ok);
  assert_non_null(strstr(x.runs[0].error, "fp8"));
  vl_measured_release(&x);
}

/* a run whose lora_targets the estimate cannot take whole is not
 * comparable: its names are never cut nor dropped */
static void lora_targets_whole(void **state) {
  (void)state;
  struct vl_measured x;
  struct vl_err err = {""};
  char text[1024], names[400];
  const char *fmt = "{\"runs\": [{\"name\": \"a\", \"model\": \"gpt2\", \"task\": \"train\", "
                    "\"precision\": \"fp32\", \"attention\": \"sdpa\", \"optimizer\": "
                    "\"adamw\", \"optimizer_impl\": \"foreach\", \"checkpointing\": \"none\", "
                    "\"batch\": 1, \"seq\": 8, \"lora\": 8, \"lora_targets\": \"%s\", "
                    "\"measured\": {\"peak_allocated\": 5}}]}";
  const char *cases[] = {"q_proj,v_proj", NULL, NULL};
  char many[200] = "";
  size_t k = 0;
  for (int i = 0; i <= VL_MAX_LORA_TARGETS; i++)
    k += (size_t)snprintf(many + k, sizeof many - k, "%sm%d", i ? "," : "", i);
  memset(names, 'x', 200);
  names[200] = '\0';
  cases[1] = names, cases[2] = many;
  for (int c = 0; c < 3; c++) {
    snprintf(text, sizeof text, fmt, cases[c]);
    assert_int_equal(vl_measured_parse(text, strlen(text), &x, &err), VL_OK);
    if (c == 0) {
      assert_true(x.runs[0].ok);
      assert_int_equal(x.runs[0].job.n_lora_targets, 2);
      assert_string_equal(x.runs[0].job.lora_targets[1], "v_proj");
    } else {
      assert_false(x.runs[0].ok);
      assert_non_null(strstr(x.runs[0].error, "lora_targets"));
    }
    vl_measured_release(&x);
  }
}

static void summary_statistics(void **state) {
  (void)state;
  struct vl_measured_run runs[4];
  memset(runs, 0, sizeof runs);
  runs[3].holdout = true;
  struct vl_compare_row rows[4];
  memset(rows, 0, sizeof rows);
  const double err[4] = {-1.0, 2.0, -6.0, 9.0};
  for (int i = 0; i < 4; i++) {
    rows[i].run = &runs[i];
    rows[i].estimated = true;
    rows[i].err_allocated = err[i];
    rows[i].err_total = i == 1 ? NAN : err[i] * 2;
  }
  struct vl_compare_summary s;
  assert_int_equal(vl_compare_summarize(rows, 4, false, 5.0, 7.0, &s), VL_OK);
  assert_int_equal(s.n, 3);
  assert_true(fabs(s.median_allocated - 2.0) < 1e-12);
  assert_true(fabs(s.max_allocated - 6.0) < 1e-12);
  assert_int_equal(s.within_allocated, 2);
  assert_int_equal(s.n_total, 2);                  /* one run had no NVML figure */
  assert_true(fabs(s.median_total - 7.0) < 1e-12); /* |-2|, |-12| */
  assert_int_equal(s.within_total, 1);
  assert_int_equal(vl_compare_summarize(rows, 4, true, 5.0, 7.0, &s), VL_OK);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.within_allocated, 0);
}

/* runs measured one after another in one process ("in_process"): from the
 * second on, reserved and process memory hold what earlier runs left
 * cached, so they are not compared; peak allocated still is */
static void shared_process_not_compared(void **state) {
  (void)state;
  struct vl_measured x;
  struct vl_err err = {""};
  const char *run = "{\"name\": \"%s\", \"model\": \"gpt2\", \"task\": \"train\", "
                    "\"precision\": \"fp32\", \"attention\": \"sdpa\", \"optimizer\": "
                    "\"adamw\", \"optimizer_impl\": \"foreach\", \"checkpointing\": "
                    "\"none\", \"batch\": 1, \"seq\": 8, \"measured\": {\"peak_allocated\": 100, "
                    "\"peak_reserved\": 200, \"nvml_process\": 300}}";
  char a[400], b[400], text[1024];
  snprintf(a, sizeof a, run, "first");
  snprintf(b, sizeof b, run, "second");
  for (int shared = 0; shared < 2; shared++) {
    snprintf(text, sizeof text, "{\"in_process\": %s, \"runs\": [%s, %s]}",
             shared ? "true" : "false", a, b);
    assert_int_equal(vl_measured_parse(text, strlen(text), &x, &err), VL_OK);
    assert_true(x.runs[1].ok);
    assert_false(x.runs[0].shared_process);
    assert_int_equal(x.runs[1].shared_process, shared);
    struct vl_bill bill = {
        .peak_allocated_bytes = 110, .peak_reserved_bytes = 220, .total_bytes = 330};
    struct vl_compare_row row = {.run = &x.runs[1]};
    vl_compare_fill(&row, &bill);
    assert_float_equal(row.err_allocated, 10.0, 1e-9);
    assert_int_equal(!!isnan(row.err_reserved), shared);
    assert_int_equal(!!isnan(row.err_total), shared);
    vl_measured_release(&x);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(runs_become_jobs),
      cmocka_unit_test(bad_files),
      cmocka_unit_test(summary_statistics),
      cmocka_unit_test(lora_targets_whole),
      cmocka_unit_test(shared_process_not_compared),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
