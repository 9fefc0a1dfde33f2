/* lib/render/validate.c: three runs built by hand (one compared and
 * within, one beyond the tolerance without an NVML figure, one not
 * compared) rendered as JSON (each row's numbers as given, NaN as null,
 * the verdict), text and Markdown (the rows in GiB, the summaries, the
 * verdict's words). */
#include "render_capture.h"
#include "vramledger/render.h"
#include "vramledger/validate.h"

#define G (1ull << 30)

static struct vl_measured_run runs[3];
static struct vl_measured m;
static struct vl_compare_row rows[3];
static struct vl_compare_summary cal, hold;
static struct vl_validate_view view;
static struct vl_compare_tally tally;

static int setup(void **state) {
  (void)state;
  snprintf(m.device, sizeof m.device, "NVIDIA H200");
  snprintf(m.torch, sizeof m.torch, "2.11.0");
  snprintf(m.cuda, sizeof m.cuda, "13.0");
  snprintf(m.transformers, sizeof m.transformers, "5.17.0");
  snprintf(m.date, sizeof m.date, "2026-11-30T10:00:00Z");
  m.runs = runs;
  m.n = 3;
  snprintf(runs[0].name, sizeof runs[0].name, "gpt2-within");
  runs[0].ok = true;
  runs[0].peak_allocated = 4 * G, runs[0].peak_reserved = 5 * G, runs[0].nvml_process = 6 * G;
  /* estimate 3 % over allocated, 2 % under reserved, 1 % over the process */
  rows[0] = (struct vl_compare_row){.run = &runs[0],
                                    .estimated = true,
                                    .est_allocated = 4 * G + 4 * G * 3 / 100,
                                    .est_reserved = 5 * G - 5 * G * 2 / 100,
                                    .est_total = 6 * G + 6 * G / 100,
                                    .err_allocated = 3.0,
                                    .err_reserved = -2.0,
                                    .err_total = 1.0,
                                    .err_step = NAN};
  snprintf(runs[1].name, sizeof runs[1].name, "llama-beyond");
  runs[1].ok = true, runs[1].holdout = true;
  runs[1].peak_allocated = 10 * G, runs[1].peak_reserved = 12 * G;
  rows[1] = (struct vl_compare_row){.run = &runs[1],
                                    .estimated = true,
                                    .est_allocated = 12 * G,
                                    .est_reserved = 12 * G,
                                    .est_total = 14 * G,
                                    .err_allocated = 20.0,
                                    .err_reserved = 0.0,
                                    .err_total = NAN, /* no NVML */
                                    .err_step = NAN};
  snprintf(runs[2].name, sizeof runs[2].name, "fp8-run");
  rows[2] = (struct vl_compare_row){.run = &runs[2], .estimated = false, .err_step = NAN};
  snprintf(rows[2].why, sizeof rows[2].why, "precision 'fp8' is not one the estimate takes");
  assert_int_equal(vl_compare_summarize(rows, 3, false, 5.0, 7.0, &cal), VL_OK);
  assert_int_equal(vl_compare_summarize(rows, 3, true, 5.0, 7.0, &hold), VL_OK);
  view = (struct vl_validate_view){.measured = &m,
                                   .rows = rows,
                                   .n = 3,
                                   .calibration = &cal,
                                   .holdout = &hold,
                                   .tol_allocated = 5.0,
                                   .tol_total = 7.0,
                                   .source = "results/h200.json",
                                   .tally = &tally};
  vl_compare_tally(rows, 3, 5.0, 7.0, 10.0, false, &tally);
  return 0;
}

static void json_rows_as_given(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_validate(rc_f, VL_FMT_JSON, &view));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.validate/1");
  assert_string_equal(rc_str(root, "device"), "NVIDIA H200");
  assert_string_equal(rc_str(root, "source"), "results/h200.json");
  assert_string_equal(rc_str(root, "verdict"), "fail");
  assert_int_equal(rc_num(root, "beyond"), 1);
  json_t *rs = json_object_get(root, "runs");
  assert_int_equal(json_array_size(rs), 3);
  json_t *r0 = json_array_get(rs, 0), *r1 = json_array_get(rs, 1), *r2 = json_array_get(rs, 2);
  assert_string_equal(rc_str(r0, "name"), "gpt2-within");
  assert_true(json_is_true(json_object_get(r0, "compared")));
  assert_false(json_is_true(json_object_get(r0, "holdout")));
  assert_int_equal(rc_num(r0, "measured_allocated_bytes"), 4 * G);
  assert_int_equal((uint64_t)json_integer_value(json_object_get(r0, "estimate_allocated_bytes")),
                   rows[0].est_allocated);
  assert_true(fabs(rc_num(r0, "error_allocated_pct") - 3.0) < 1e-9);
  assert_true(fabs(rc_num(r0, "error_reserved_pct") + 2.0) < 1e-9);
  assert_true(json_is_true(json_object_get(r1, "holdout")));
  assert_true(json_is_null(json_object_get(r1, "error_total_pct"))); /* NaN is no number */
  assert_false(json_is_true(json_object_get(r2, "compared")));
  assert_string_equal(rc_str(r2, "why"), rows[2].why);
  /* the summaries: one compared run in each set */
  json_t *c = json_object_get(root, "calibration"), *h = json_object_get(root, "holdout");
  assert_int_equal(rc_num(c, "runs"), 1);
  assert_int_equal(rc_num(c, "within_allocated"), 1);
  assert_int_equal(rc_num(h, "runs"), 1);
  assert_int_equal(rc_num(h, "within_allocated"), 0);
  assert_true(fabs(rc_num(h, "max_abs_error_allocated_pct") - 20.0) < 1e-9);
  json_decref(root);
  free(text);
}

static void text_rows_and_verdict(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_validate(rc_f, VL_FMT_TEXT, &view));
  assert_non_null(strstr(text, "estimate vs measured on NVIDIA H200 (torch 2.11.0, CUDA 13.0, "
                               "transformers 5.17.0, 2026-11-30)"));
  /* GiB with two decimals, the errors signed */
  assert_non_null(strstr(text, "    4.12 /     4.00   +3.0 %"));
  assert_non_null(strstr(text, "   12.00 /    10.00  +20.0 %"));
  assert_non_null(strstr(text, "     n/a"));
  assert_non_null(
      strstr(text, "cal   not compared: precision 'fp8' is not one the estimate takes"));
  assert_non_null(strstr(text, "calibration set: 1 run; peak allocated |error| median 3.0 %, "
                               "max 3.0 %, 1/1 within 5 %"));
  assert_non_null(strstr(text, "1 run beyond tolerance (peak allocated 5 %, process total 7 %)"));
  free(text);
  struct vl_validate_view pass = view;
  struct vl_compare_tally none = {0};
  pass.tally = &none;
  RC_CAPTURE(text, vl_render_validate(rc_f, VL_FMT_MD, &pass));
  assert_int_equal(strncmp(text, "## estimate vs measured on NVIDIA H200", 38), 0);
  assert_int_equal(rc_lines_starting(text, "| "), 1 + 3);
  assert_non_null(
      strstr(text, "every run within tolerance (peak allocated 5 %, process total 7 %)"));
  free(text);
}

/* the tally counts estimated rows only; a step time beyond its tolerance
 * counts under the time gate alone; what was not compared is said */
static void tally_of_the_rows(void **state) {
  (void)state;
  assert_int_equal(tally.beyond, 1);
  assert_int_equal(tally.shared_process + tally.host_shared, 0);
  struct vl_measured_run r[3];
  struct vl_compare_row w[3];
  memcpy(r, runs, sizeof r);
  memcpy(w, rows, sizeof w);
  for (int i = 0; i < 3; i++)
    w[i].run = &r[i];
  r[0].shared_process = true;
  r[1].host_shared = true, r[1].step_s = 0.5;
  r[2].shared_process = r[2].host_shared = true, r[2].step_s = 0.5; /* not estimated */
  w[0].err_step = 30.0;
  struct vl_compare_tally t;
  vl_compare_tally(w, 3, 5.0, 7.0, 10.0, false, &t);
  assert_int_equal(t.beyond, 1);
  assert_int_equal(t.shared_process, 1);
  assert_int_equal(t.host_shared, 1);
  vl_compare_tally(w, 3, 5.0, 7.0, 10.0, true, &t);
  assert_int_equal(t.beyond, 2);
  vl_compare_tally(w, 3, 25.0, 7.0, 10.0, false, &t);
  assert_int_equal(t.beyond, 0);
  struct vl_validate_view v = view;
  v.rows = w, v.tally = &t;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_validate(rc_f, VL_FMT_TEXT, &v));
  assert_non_null(strstr(text, "reserved and process memory not compared for 1 run measured"));
  assert_non_null(strstr(text, "step time not compared for 1 run timed while other work ran"));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_rows_as_given),
      cmocka_unit_test(text_rows_and_verdict),
      cmocka_unit_test(tally_of_the_rows),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
