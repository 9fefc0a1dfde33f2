/* lib/decide/regress.c: points, terms and the least squares. */
#include "testutil.h"
#include "vramledger/model.h"
#include "vramledger/regress.h"

static void recovers_a_known_formula(void **state) {
  (void)state;
  /* y = 5e9 + 2e6 b + 3e5 b s + 500 b s^2, no noise */
  char csv[4096] = "batch,seq,peak_bytes,status\n";
  size_t o = strlen(csv);
  for (int b = 1; b <= 8; b *= 2)
    for (int s = 256; s <= 2048; s *= 2) {
      double y = 5e9 + 2e6 * b + 3e5 * b * s + 500.0 * b * s * s;
      o += (size_t)snprintf(csv + o, sizeof csv - o, "%d,%d,%.0f,ok\n", b, s, y);
    }
  o += (size_t)snprintf(csv + o, sizeof csv - o, "16,4096,0,oom\n");
  struct vl_points p;
  struct vl_err err = {""};
  assert_int_equal(vl_points_parse(csv, o, NULL, 0, &p, &err), VL_OK);
  assert_int_equal(p.n, 16);
  assert_int_equal(p.skipped, 1);
  struct vl_term_spec t[VL_FIT_MAX_TERMS];
  size_t nt;
  assert_int_equal(vl_terms_parse("const,b,bs,batch*seq^2", &p, t, &nt, &err), VL_OK);
  assert_int_equal(nt, 4);
  struct vl_fit_result r;
  assert_int_equal(vl_fit_points(&p, t, nt, &r, &err), VL_OK);
  assert_close(r.coef[0], 5e9, 1e-6, "const");
  assert_close(r.coef[1], 2e6, 1e-5, "b");
  assert_close(r.coef[2], 3e5, 1e-6, "bs");
  assert_close(r.coef[3], 500, 1e-6, "bs2");
  assert_true(r.r2 > 0.999999);
  assert_true(r.loo_rel_max < 1e-6);
  /* curves along seq: one per batch (4 swept + 1 predicted), through the fit */
  struct vl_fit_prediction pr = {.x = {32, 4096}};
  static struct vl_fit_curve cv[VL_FIT_MAX_CURVES];
  assert_int_equal(vl_fit_curves(&p, &r, t, nt, &pr, 1, 1, cv, VL_FIT_MAX_CURVES), 5);
  assert_true(cv[4].fixed[0] == 32 && cv[0].x[0] == 256 && cv[0].x[VL_FIT_CURVE_N - 1] == 4096);
  assert_close(cv[2].y[0], 5e9 + 2e6 * 4 + 3e5 * 4 * 256 + 500.0 * 4 * 256 * 256, 1e-6, "curve");
  assert_int_equal(vl_fit_curves(&p, &r, t, nt, &pr, 1, 1, cv, 2), 2);
  double x[VL_FIT_MAX_VARS] = {32, 4096}, hw;
  double y = vl_fit_predict(&r, t, nt, x, &hw);
  assert_close(y, 5e9 + 2e6 * 32 + 3e5 * 32 * 4096 + 500.0 * 32 * 4096 * 4096, 1e-6, "prediction");
  assert_true(hw < 1e-3 * y);
  vl_points_release(&p);
}

/* Leave-one-out from the one fit (residual over 1 - leverage) equals
 * refitting without each point and predicting it, on noisy points. */
static void leave_one_out_equals_refits(void **state) {
  (void)state;
  char csv[8192] = "batch,seq,peak_bytes,status\n";
  size_t o = strlen(csv);
  unsigned seed = 7;
  for (int b = 1; b <= 16; b *= 2)
    for (int s = 128; s <= 4096; s *= 2) {
      seed = seed * 1103515245u + 12345u;
      double noise = ((double)(seed >> 8 & 0xffff) / 65535.0 - 0.5) * 0.04;
      double y = (1e9 + 3e5 * b * s + 40.0 * b * s * s) * (1 + noise);
      o += (size_t)snprintf(csv + o, sizeof csv - o, "%d,%d,%.0f,ok\n", b, s, y);
    }
  struct vl_points p;
  struct vl_err err = {""};
  assert_int_equal(vl_points_parse(csv, o, NULL, 0, &p, &err), VL_OK);
  struct vl_term_spec t[VL_FIT_MAX_TERMS];
  size_t nt;
  assert_int_equal(vl_terms_parse("const,bs,batch*seq^2", &p, t, &nt, &err), VL_OK);
  struct vl_fit_result r;
  assert_int_equal(vl_fit_points(&p, t, nt, &r, &err), VL_OK);
  double sum = 0, mx = 0;
  for (size_t i = 0; i < p.n; i++) { /* the refits, by hand */
    struct vl_points q = p;
    double xs[64 * VL_FIT_MAX_VARS], ys[64];
    size_t m = 0;
    for (size_t j = 0; j < p.n; j++) {
      if (j == i) continue;
      memcpy(&xs[m * VL_FIT_MAX_VARS], &p.x[j * VL_FIT_MAX_VARS], sizeof(double) * VL_FIT_MAX_VARS);
      ys[m++] = p.y[j];
    }
    q.x = xs;
    q.y = ys;
    q.n = m;
    struct vl_fit_result ri;
    assert_int_equal(vl_fit_points(&q, t, nt, &ri, &err), VL_OK);
    double yi = vl_fit_predict(&ri, t, nt, &p.x[i * VL_FIT_MAX_VARS], NULL);
    double e = fabs(yi - p.y[i]) / p.y[i];
    sum += e * e;
    mx = fmax(mx, e);
  }
  assert_true(mx > 1e-3); /* the noise shows */
  assert_close(r.loo_rel_max, mx, 1e-9, "worst");
  assert_close(r.loo_rel_rms, sqrt(sum / (double)p.n), 1e-9, "rms");
  vl_points_release(&p);
}

static void refuses_what_it_cannot_fit(void **state) {
  (void)state;
  struct vl_points p;
  struct vl_err err = {""};
  const char *few = "batch,seq,peak_bytes\n1,256,10\n2,256,20\n";
  assert_int_equal(vl_points_parse(few, strlen(few), NULL, 0, &p, &err), VL_OK);
  struct vl_term_spec t[VL_FIT_MAX_TERMS];
  size_t nt;
  assert_int_equal(vl_terms_parse("const,b,bs", &p, t, &nt, &err), VL_OK);
  struct vl_fit_result r;
  assert_int_equal(vl_fit_points(&p, t, nt, &r, &err), VL_ERANGE);
  assert_non_null(strstr(err.msg, "points"));
  assert_int_equal(vl_terms_parse("const,h", &p, t, &nt, &err), VL_EINVAL);
  vl_points_release(&p);
  const char *same = "batch,seq,peak_bytes\n1,256,10\n1,256,11\n1,256,12\n1,256,9\n";
  assert_int_equal(vl_points_parse(same, strlen(same), NULL, 0, &p, &err), VL_OK);
  assert_int_equal(vl_terms_parse("const,b", &p, t, &nt, &err), VL_OK);
  assert_int_equal(vl_fit_points(&p, t, nt, &r, &err), VL_ERANGE); /* b never varies */
  vl_points_release(&p);
  const char *bad = "batch,seq,peak_bytes\n1,256,10\n1,x,11\n";
  assert_int_equal(vl_points_parse(bad, strlen(bad), NULL, 0, &p, &err), VL_EPARSE);
  assert_non_null(strstr(err.msg, "line 3 column 3"));
  const char *nopeak = "batch,seq\n1,2\n";
  assert_int_equal(vl_points_parse(nopeak, strlen(nopeak), NULL, 0, &p, &err), VL_EKEY);
}

/* The estimator at a point is the bill of the job with that point's batch
 * and seq, and the measure picks which of the bill's peaks. */
static void estimates_at_the_points(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  const char *csv = "seq,batch,peak_bytes\n512,2,1\n1024,4,2\n";
  struct vl_points p;
  struct vl_err err = {""};
  assert_int_equal(vl_points_parse(csv, strlen(csv), NULL, 0, &p, &err), VL_OK);
  assert_int_equal(vl_fit_check_vars(&p, &err), VL_OK);
  static struct vl_bill b;
  for (size_t i = 0; i < p.n; i++) {
    struct vl_job k = j;
    k.seq = (uint64_t)p.x[i * VL_FIT_MAX_VARS];
    k.batch = (uint64_t)p.x[i * VL_FIT_MAX_VARS + 1];
    assert_int_equal(vl_bill_compute(&a, &k, &ov, &b, &err), VL_OK);
    double t, r, al;
    const double *x = p.x + i * VL_FIT_MAX_VARS;
    assert_int_equal(vl_fit_estimate_at(&p, x, &a, &j, &ov, VL_FIT_TOTAL, &t, &err), VL_OK);
    assert_int_equal(vl_fit_estimate_at(&p, x, &a, &j, &ov, VL_FIT_RESERVED, &r, &err), VL_OK);
    assert_int_equal(vl_fit_estimate_at(&p, x, &a, &j, &ov, VL_FIT_ALLOCATED, &al, &err), VL_OK);
    assert_true(t == (double)b.total_bytes);
    assert_true(r == (double)b.peak_reserved_bytes);
    assert_true(al == (double)b.peak_allocated_bytes);
    assert_true(al <= r && r < t);
  }
  double bad[VL_FIT_MAX_VARS] = {512.5, 2}, y;
  assert_int_equal(vl_fit_estimate_at(&p, bad, &a, &j, &ov, VL_FIT_TOTAL, &y, &err), VL_ERANGE);
  assert_non_null(strstr(err.msg, "seq=512.5"));
  vl_points_release(&p);
  const char *other = "batch,accum,peak_bytes\n1,1,1\n";
  assert_int_equal(vl_points_parse(other, strlen(other), NULL, 0, &p, &err), VL_OK);
  assert_int_equal(vl_fit_check_vars(&p, &err), VL_EINVAL);
  assert_non_null(strstr(err.msg, "'accum'"));
  vl_points_release(&p);
  /* apart by more than 10 % of the fit and more than its interval */
  assert_false(vl_fit_disagrees(100, 5, 109));
  assert_true(vl_fit_disagrees(100, 5, 111));
  assert_false(vl_fit_disagrees(100, 20, 115));
  assert_true(vl_fit_disagrees(100, 5, 85));
  assert_false(vl_fit_disagrees(100, 5, NAN));
  /* the estimator against measured points: mean |error|, signed worst, beyond 10 % */
  const char *two = "batch,peak_bytes\n1,100\n2,200\n";
  assert_int_equal(vl_points_parse(two, strlen(two), NULL, 0, &p, &err), VL_OK);
  const double e2[] = {110, 150};
  struct vl_fit_est_summary su;
  vl_fit_est_summarize(&p, e2, &su);
  assert_close(su.mean_abs_rel, 0.175, 1e-12, "mean");
  assert_close(su.worst_rel, -0.25, 1e-12, "worst");
  assert_int_equal(su.worst, 1);
  assert_int_equal(su.beyond, 1);
  vl_points_release(&p);
}

/* Two sweeps with their columns in another order make one set of points. */
static void merges_points_by_name(void **state) {
  (void)state;
  const char *a = "batch,seq,peak_bytes\n1,256,10\n2,256,20\n";
  const char *b = "seq,batch,peak_bytes,status\n512,4,80,ok\n1024,8,0,oom\n";
  const char *c = "batch,accum,peak_bytes\n1,1,1\n";
  struct vl_points p, q;
  struct vl_err err = {""};
  assert_int_equal(vl_points_parse(a, strlen(a), NULL, 0, &p, &err), VL_OK);
  assert_int_equal(vl_points_parse(b, strlen(b), NULL, 0, &q, &err), VL_OK);
  assert_int_equal(vl_points_append(&p, &q, &err), VL_OK);
  vl_points_release(&q);
  assert_int_equal(p.n, 3);
  assert_int_equal(p.skipped, 1);
  assert_true(p.x[2 * VL_FIT_MAX_VARS] == 4 && p.x[2 * VL_FIT_MAX_VARS + 1] == 512);
  assert_true(p.y[2] == 80);
  assert_int_equal(vl_points_parse(c, strlen(c), NULL, 0, &q, &err), VL_OK);
  assert_int_equal(vl_points_append(&p, &q, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "batch,accum against batch,seq"));
  assert_int_equal(p.n, 3);
  vl_points_release(&q);
  vl_points_release(&p);
}

/* A fit read back from its JSON evaluates as the fit itself. */
static void reads_a_fit_back(void **state) {
  (void)state;
  const char *json = "{\"schema\": \"vramledger.fit/1\", \"variables\": [\"batch\", \"seq\"],"
                     " \"terms\": [\"const\", \"bs\", \"bs2\"],"
                     " \"coefficients\": {\"const\": 1e9, \"bs\": 2e5, \"bs2\": 100}}";
  struct vl_fitted f;
  struct vl_err err = {""};
  assert_int_equal(vl_fitted_parse(json, strlen(json), &f, &err), VL_OK);
  assert_int_equal(f.nt, 3);
  double x[VL_FIT_MAX_VARS] = {4, 1024};
  assert_close(vl_fitted_eval(&f, x), 1e9 + 2e5 * 4 * 1024 + 100.0 * 4 * 1024 * 1024, 1e-12,
               "eval");
  const char *old = "{\"schema\": \"vramledger.fit/1\", \"coefficients\": {\"const\": 1}}";
  assert_int_equal(vl_fitted_parse(old, strlen(old), &f, &err), VL_EKEY);
  const char *nan = "{\"schema\": \"vramledger.fit/1\", \"variables\": [\"seq\"],"
                    " \"terms\": [\"const\", \"s2\"], \"coefficients\": {\"const\": 1}}";
  assert_int_equal(vl_fitted_parse(nan, strlen(nan), &f, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "terms[1]"));
  assert_int_equal(vl_fitted_parse("{", 1, &f, &err), VL_EPARSE);
  assert_non_null(strstr(err.msg, "line 1"));
}

/* fit --by-phase: a flat optimizer peak and a growing backward one, fitted
 * apart from their own columns; the larger of the two reproduces the
 * measured peak (their maximum) exactly, and names the phase. */
/* --predict names the variables as the terms do: b and s are batch and seq. */
static void points_take_the_terms_names(void **state) {
  (void)state;
  struct vl_points p = {.nvars = 2, .var = {"batch", "seq"}};
  double x[VL_FIT_MAX_VARS] = {0};
  struct vl_err err = {""};
  assert_int_equal(vl_point_parse("b=32,s=4096", &p, x, &err), VL_OK);
  assert_true(x[0] == 32 && x[1] == 4096);
  assert_int_equal(vl_point_parse("seq=8,batch=2", &p, x, &err), VL_OK);
  assert_true(x[0] == 2 && x[1] == 8);
  assert_int_equal(vl_point_parse("b=32", &p, x, &err), VL_EINVAL); /* seq missing */
  assert_int_equal(vl_point_parse("q=1,b=2,s=3", &p, x, &err), VL_EINVAL);
}

static void the_larger_of_two_phases(void **state) {
  (void)state;
  char csv[4096] =
      "batch,seq,peak_allocated_bytes,peak_fwd_bwd_bytes,peak_optimizer_bytes,status\n";
  size_t o = strlen(csv);
  for (int b = 1; b <= 8; b *= 2)
    for (int s = 256; s <= 1024; s *= 2) {
      double fb = 1e9 + 1e5 * b * s + 20.0 * b * s * s, opt = 3e9;
      o += (size_t)snprintf(csv + o, sizeof csv - o, "%d,%d,%.0f,%.0f,%.0f,ok\n", b, s,
                            fb > opt ? fb : opt, fb, opt);
    }
  struct vl_points all, act, opt;
  struct vl_err err = {""};
  assert_int_equal(vl_points_parse_y(csv, o, NULL, 0, "peak_allocated_bytes", &all, &err), VL_OK);
  assert_int_equal(vl_points_parse_y(csv, o, NULL, 0, "peak_fwd_bwd_bytes", &act, &err), VL_OK);
  assert_int_equal(vl_points_parse_y(csv, o, NULL, 0, "peak_optimizer_bytes", &opt, &err), VL_OK);
  struct vl_points none;
  assert_int_equal(vl_points_parse_y(csv, o, NULL, 0, "peak_bytes", &none, &err), VL_EKEY);
  struct vl_term_spec t[VL_FIT_MAX_TERMS], to[VL_FIT_MAX_TERMS];
  size_t nt;
  assert_int_equal(vl_terms_parse("const,b,bs,bs2", &all, t, &nt, &err), VL_OK);
  size_t nto = vl_terms_without_squares(t, nt, to);
  assert_int_equal(nto, 3); /* bs2 has a square */
  assert_string_equal(to[2].name, "bs");
  struct vl_fit_result r, ro;
  assert_int_equal(vl_fit_points(&act, t, nt, &r, &err), VL_OK);
  assert_int_equal(vl_fit_points(&opt, to, nto, &ro, &err), VL_OK);
  assert_true(vl_fit_larger_max_rel(&all, &r, t, nt, &ro, to, nto) < 1e-6);
  struct vl_fit_prediction q = {.x = {1, 128}};
  vl_fit_predict_parts(&r, t, nt, &q);
  assert_string_equal(vl_fit_take_larger(&ro, to, nto, &q), "optimizer");
  assert_close(q.y, 3e9, 1e-6, "the flat optimizer peak");
  struct vl_fit_prediction big = {.x = {16, 2048}};
  vl_fit_predict_parts(&r, t, nt, &big);
  assert_string_equal(vl_fit_take_larger(&ro, to, nto, &big), "forward/backward");
  assert_close(big.y, 1e9 + 1e5 * 16 * 2048 + 20.0 * 16 * 2048 * 2048, 1e-6, "backward");
  vl_points_release(&all);
  vl_points_release(&act);
  vl_points_release(&opt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(recovers_a_known_formula),   cmocka_unit_test(leave_one_out_equals_refits),
      cmocka_unit_test(refuses_what_it_cannot_fit), cmocka_unit_test(estimates_at_the_points),
      cmocka_unit_test(merges_points_by_name),      cmocka_unit_test(reads_a_fit_back),
      cmocka_unit_test(the_larger_of_two_phases),   cmocka_unit_test(points_take_the_terms_names)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
