/* lib/decide/steptrace.c, what test_steptime's traced_step leaves out:
 * a trace with no optimizer step is priced as incomplete and says so; a
 * float16 GEMM makes the MFU's peak the card's fp16 one; the text need not
 * end in a newline nor in a NUL (read to len only); a step's phase counts
 * and kernels; recomputation read as its own pass. */
#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/steptime.h"

static struct vl_catalog cat;

static int setup(void **state) {
  (void)state;
  return tu_catalog(&cat);
}

static int teardown(void **state) {
  (void)state;
  vl_catalog_release(&cat);
  return 0;
}

static vl_status priced_on(const char *text, const struct vl_gpu *g, struct vl_trace_time *tt) {
  /* exactly strlen bytes, no NUL after them */
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, text, n);
  struct vl_err err = {""};
  vl_status s = vl_trace_step_time(copy, n, g, tt, &err);
  free(copy);
  return s;
}

static vl_status priced(const char *text, const char *card, struct vl_trace_time *tt) {
  return priced_on(text, vl_catalog_find(&cat, card), tt);
}

static const char *gemm_step = "# step 1 tokens=1024 samples=1 micro=1\n"
                               "# op 1 forward 4 gemm mm layout=fwd m=1024 n=4096 k=4096 batch=1 "
                               "dtype=%s bias=0\n"
                               "# op 1 forward 2 view t\n"
                               "# op 1 backward 8 gemm mm layout=dgrad m=1024 n=4096 k=4096 "
                               "batch=1 dtype=%s bias=0\n"
                               "# op 1 recompute 4 gemm mm layout=fwd m=1024 n=4096 k=4096 "
                               "batch=1 dtype=%s bias=0\n"
                               "%s";

static void without_an_optimizer_step(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, gemm_step, "bfloat16", "bfloat16", "bfloat16", "");
  struct vl_trace_time tt;
  assert_int_equal(priced(text, "h100-80gb", &tt), VL_OK);
  assert_int_equal(tt.step, 1);
  assert_false(tt.complete); /* a forward, no optimizer step */
  assert_true(tt.time.approximate);
  assert_string_equal(tt.time.note, "no optimizer step was traced: the step has no update");
  assert_string_equal(tt.optimizer, "");
  /* ops by phase: forward 4 + 2, backward 8, recompute 4; kernels: all but
   * the views */
  assert_close(tt.phase_ops[0], 6, 0, "forward ops");
  assert_close(tt.phase_ops[1], 8, 0, "backward ops");
  assert_close(tt.phase_ops[2], 4, 0, "recomputed ops");
  assert_close(tt.kernels, 16, 0, "kernels");
  assert_true(tt.time.recompute_s > 0);
  /* model FLOPs: forward and backward (2mnk each GEMM), recomputation not */
  double mm = 2.0 * 1024 * 4096 * 4096;
  assert_close(tt.time.model_flops, 12 * mm, 1e-12, "model FLOPs");
  assert_close(tt.time.executed_flops, 16 * mm, 1e-12, "executed FLOPs");
}

static void fp16_sets_the_peak(void **state) {
  (void)state;
  char bf[1024], fp[1024];
  const char *opt = "# optimizer 1 adamw foreach elems=1000 tensors=2 w=2 g=2 st=4 states=2";
  snprintf(bf, sizeof bf, gemm_step, "bfloat16", "bfloat16", "bfloat16", opt);
  snprintf(fp, sizeof fp, gemm_step, "float16", "float16", "float16", opt);
  struct vl_trace_time a, b;
  /* every card of the catalog has its fp16 peak equal to its bf16 one: an
   * H100 given twice the fp16 peak tells which the MFU is taken against */
  struct vl_gpu g = *vl_catalog_find(&cat, "h100-80gb");
  g.fp16_tflops = 2 * g.bf16_tflops;
  assert_int_equal(priced_on(bf, &g, &a), VL_OK);
  assert_int_equal(priced_on(fp, &g, &b), VL_OK);
  assert_true(a.complete && b.complete);
  assert_string_equal(a.optimizer, "adamw");
  assert_string_equal(a.optimizer_impl, "foreach");
  /* MFU = model FLOPs / step / the peak its dtype runs at */
  assert_close(a.time.mfu, a.time.model_flops / a.time.step_s / (g.bf16_tflops * 1e12), 1e-12,
               "bf16 MFU");
  assert_close(b.time.mfu, b.time.model_flops / b.time.step_s / (g.fp16_tflops * 1e12), 1e-12,
               "fp16 MFU");
}

static void refusals(void **state) {
  (void)state;
  struct vl_trace_time tt;
  struct vl_err err = {""};
  const char *none = "a 1 1024 cuda\nf 1\n# step 1 tokens=8";
  assert_int_equal(
      vl_trace_step_time(none, strlen(none), vl_catalog_find(&cat, "h100-80gb"), &tt, &err),
      VL_ENOTFOUND);
  assert_non_null(strstr(err.msg, "VRAMLEDGER_TRACE_OPS=0"));
  /* an op line cut before its step number is no op */
  const char *cut = "# op ";
  assert_int_equal(priced(cut, "h100-80gb", &tt), VL_ENOTFOUND);
  assert_int_equal(priced("", "h100-80gb", &tt), VL_ENOTFOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(without_an_optimizer_step),
      cmocka_unit_test(fp16_sets_the_peak),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
