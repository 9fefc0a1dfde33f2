/* lib/render/audit.c: an audit computed by vl_audit_compute from the
 * commitment of tests/data/commitments/matches-sample-run.json (2 x h200,
 * 25,700,000,000 bytes, 5000 tokens/s) and a run 10 % over its peak,
 * rendered as JSON (the clauses in order with the numbers judged, the
 * verdict) and text (the rows, the review line). */
#include "render_capture.h"
#include "vramledger/audit.h"
#include "vramledger/commitment.h"
#include "vramledger/render.h"

static void audit_of(double peak_factor, struct vl_audit *a) {
  static struct vl_commitment c;
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/matches-sample-run.json", &len);
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  free(text);
  struct vl_audit_run r;
  memset(&r, 0, sizeof r);
  r.hw.count = (unsigned)c.gpus;
  r.hw.used = true;
  r.hw.memory_bytes = c.gpu_memory_bytes;
  r.peak_bytes = (uint64_t)((double)c.est_total_bytes * peak_factor);
  r.seconds = c.gpu_hours * 3600.0 / (double)c.gpus;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, a);
  a->commitment = "commitment.json";
  a->record = "run.jsonl";
}

static void json_clauses_and_verdict(void **state) {
  (void)state;
  struct vl_audit a;
  audit_of(1.10, &a);
  assert_int_equal(a.review, 1); /* the peak, 10 % over a 5 % tolerance */
  char *text = NULL;
  RC_CAPTURE(text, vl_render_audit(rc_f, VL_FMT_JSON, &a));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.audit/1");
  assert_string_equal(rc_str(root, "commitment"), "commitment.json");
  assert_string_equal(rc_str(root, "record"), "run.jsonl");
  assert_string_equal(rc_str(root, "verdict"), "fail");
  assert_true(fabs(rc_num(root, "tolerance") - 0.05) < 1e-12);
  json_t *cl = json_object_get(root, "clauses");
  assert_int_equal(json_array_size(cl), VL_AUDIT_LINES);
  static const char *const ids[] = {"gpus", "parameters_bytes", "peak_bytes", "gpu_hours",
                                    "tokens_per_s"};
  for (int i = 0; i < VL_AUDIT_LINES; i++)
    assert_string_equal(rc_str(json_array_get(cl, (size_t)i), "clause"), ids[i]);
  json_t *peak = json_array_get(cl, VL_AUDIT_PEAK);
  assert_int_equal(rc_num(peak, "committed"), 25700000000.0);
  assert_int_equal(rc_num(peak, "measured"), a.line[VL_AUDIT_PEAK].measured);
  assert_true(fabs(rc_num(peak, "off") - 0.10) < 1e-6);
  assert_string_equal(rc_str(peak, "result"), "fail");
  json_t *gpus = json_array_get(cl, VL_AUDIT_GPUS);
  assert_string_equal(rc_str(gpus, "committed"), "2 x h200");
  assert_string_equal(rc_str(gpus, "measured"), a.ran);
  assert_string_equal(rc_str(gpus, "result"), "pass");
  json_decref(root);
  free(text);
}

static void text_rows_and_review(void **state) {
  (void)state;
  struct vl_audit a;
  audit_of(1.10, &a);
  char *text = NULL;
  RC_CAPTURE(text, vl_render_audit(rc_f, VL_FMT_TEXT, &a));
  assert_non_null(strstr(text, "audit of run.jsonl against commitment.json (tolerance 5 %)"));
  /* 25.7e9 bytes = 23.93 GiB committed, 26.33 measured */
  assert_non_null(strstr(text, "peak memory per GPU"));
  assert_non_null(strstr(text, "23.93 GiB      26.33 GiB    +10.0%  <- review"));
  assert_non_null(strstr(text, "review: 1 line more than 5 % off the commitment"));
  free(text);
  audit_of(1.0, &a);
  RC_CAPTURE(text, vl_render_audit(rc_f, VL_FMT_TEXT, &a));
  assert_null(strstr(text, "<- review"));
  assert_non_null(strstr(text, "\nwithin the commitment\n"));
  free(text);
  RC_CAPTURE(text, vl_render_audit(rc_f, VL_FMT_JSON, &a));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "verdict"), "pass");
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_clauses_and_verdict),
      cmocka_unit_test(text_rows_and_review),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
