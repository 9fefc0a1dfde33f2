/* lib/render/fit.c: points of a known formula, peak = 5e9 + 2e6 b +
 * 3e5 b s bytes at batch 1..8 and seq 256..2048 (16 points, one more out
 * of memory and skipped), fitted by vl_fit_points with one prediction at
 * batch 32 x seq 4096, rendered as JSON (the coefficients the formula's,
 * the prediction's bytes the formula's), text and Markdown (a row a term,
 * the points counted) and HTML (a closed page whose chart's JSON has the
 * curves). */
#include "render_capture.h"
#include "vramledger/regress.h"
#include "vramledger/render.h"

static struct vl_points pts;
static struct vl_term_spec terms[VL_FIT_MAX_TERMS];
static size_t nt;
static struct vl_fit_result fit;
static struct vl_fit_prediction pred;
static struct vl_fit_curve curves[VL_FIT_MAX_CURVES];
static struct vl_fit_view view;

static double formula(double b, double s) { return 5e9 + 2e6 * b + 3e5 * b * s; }

static int setup(void **state) {
  (void)state;
  char csv[4096] = "batch,seq,peak_bytes,status\n";
  size_t o = strlen(csv);
  for (int b = 1; b <= 8; b *= 2)
    for (int s = 256; s <= 2048; s *= 2)
      o += (size_t)snprintf(csv + o, sizeof csv - o, "%d,%d,%.0f,ok\n", b, s, formula(b, s));
  o += (size_t)snprintf(csv + o, sizeof csv - o, "16,4096,0,oom\n");
  struct vl_err err = {""};
  if (vl_points_parse(csv, o, NULL, 0, &pts, &err) != VL_OK) return -1;
  if (vl_terms_parse("const,b,bs", &pts, terms, &nt, &err) != VL_OK) return -1;
  if (vl_fit_points(&pts, terms, nt, &fit, &err) != VL_OK) return -1;
  pred = (struct vl_fit_prediction){.x = {32, 4096}, .estimate = NAN};
  pred.y = vl_fit_predict(&fit, terms, nt, pred.x, &pred.half_width);
  size_t nc = vl_fit_curves(&pts, &fit, terms, nt, &pred, 1, 1, curves, VL_FIT_MAX_CURVES);
  view = (struct vl_fit_view){.pts = &pts,
                              .terms = terms,
                              .n_terms = nt,
                              .fit = &fit,
                              .predictions = &pred,
                              .n_predict = 1,
                              .source = "points.csv",
                              .measure = "total",
                              .curves = curves,
                              .n_curves = nc,
                              .axis = 1};
  return 0;
}

static int teardown(void **state) {
  (void)state;
  vl_points_release(&pts);
  return 0;
}

static void json_coefficients_and_prediction(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_fit(rc_f, VL_FMT_JSON, &view));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.fit/1");
  assert_string_equal(rc_str(root, "source"), "points.csv");
  assert_int_equal(rc_num(root, "points"), 16);
  assert_int_equal(rc_num(root, "skipped"), 1);
  json_t *terms_j = json_object_get(root, "terms");
  assert_int_equal(json_array_size(terms_j), 3);
  json_t *coef = json_object_get(root, "coefficients");
  const double want[] = {5e9, 2e6, 3e5};
  for (size_t k = 0; k < 3; k++) {
    const char *name = json_string_value(json_array_get(terms_j, k));
    assert_close(rc_num(coef, name), want[k], 1e-6, name);
  }
  assert_true(rc_num(root, "r2") > 0.999999);
  json_t *p = json_array_get(json_object_get(root, "predictions"), 0);
  assert_int_equal(rc_num(p, "batch"), 32);
  assert_int_equal(rc_num(p, "seq"), 4096);
  assert_close(rc_num(p, "peak_bytes"), formula(32, 4096), 1e-6, "prediction at 32 x 4096");
  assert_true(rc_num(p, "low_bytes") <= rc_num(p, "peak_bytes"));
  assert_true(rc_num(p, "high_bytes") >= rc_num(p, "peak_bytes"));
  /* no square among the terms: everything is constant + linear */
  assert_int_equal(rc_num(p, "quadratic_bytes"), 0);
  assert_null(json_object_get(root, "estimator")); /* none asked */
  json_decref(root);
  free(text);
}

static void text_and_markdown(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_fit(rc_f, VL_FMT_TEXT, &view));
  assert_non_null(
      strstr(text, "fit: peak_bytes fitted on 16 points of points.csv (1 not ok, skipped)"));
  assert_non_null(strstr(text, "R² 1.00000"));
  /* 5e9 + 2e6 x 32 + 3e5 x 32 x 4096 = 44.387e9 bytes = 41.34 GiB */
  char want[32];
  snprintf(want, sizeof want, "%9.2f", formula(32, 4096) / GiB);
  assert_string_equal(want, "    41.34");
  assert_non_null(strstr(text, want));
  free(text);
  RC_CAPTURE(text, vl_render_fit(rc_f, VL_FMT_MD, &view));
  assert_int_equal(strncmp(text, "## Fit: peak_bytes fitted on 16 points", 38), 0);
  assert_non_null(
      strstr(text, "| term | coefficient (bytes) | 95 % interval |\n|---|---:|---:|\n"));
  free(text);
}

static void html_page_with_curves(void **state) {
  (void)state;
  assert_int_equal(view.n_curves, 5); /* a curve per swept batch, and the predicted one */
  char *text = NULL;
  RC_CAPTURE(text, vl_render_fit_html(rc_f, &view));
  assert_int_equal(strncmp(text, "<!DOCTYPE html>", 15), 0);
  size_t n = strlen(text);
  assert_true(n > 20 && strstr(text + n - 20, "</html>"));
  const char *spec = strstr(text, "class=\"vl-spec\">");
  assert_non_null(spec);
  spec += strlen("class=\"vl-spec\">");
  char *js = strndup(spec, (size_t)(strstr(spec, "</script>") - spec));
  json_t *chart = rc_json(js);
  assert_true(json_array_size(json_object_get(chart, "series")) >= view.n_curves);
  json_decref(chart);
  free(js);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_coefficients_and_prediction),
      cmocka_unit_test(text_and_markdown),
      cmocka_unit_test(html_page_with_curves),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
