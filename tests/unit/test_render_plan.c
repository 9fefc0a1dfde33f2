/* lib/render/plan.c: a plan found by vl_plan_search (GPT-2, 10^6 tokens of
 * 1024 in global batches of 16, on an H100 and an L4, at most 2 GPUs)
 * rendered as JSON (every candidate's numbers the result's, the schema
 * `commit --plan` reads), text and Markdown (the rows asked for, the
 * header's arithmetic) and HTML (one closed page with its chart); a plan
 * where nothing fits says what to try. */
#include "render_capture.h"
#include "vramledger/catalog.h"
#include "vramledger/plan.h"
#include "vramledger/render.h"

struct fixture {
  struct vl_catalog cat;
  struct vl_gpu gpus[2];
  struct vl_arch a;
  struct vl_plan_query q;
  struct vl_plan_result r;
  struct vl_plan_view v;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f || tu_catalog(&f->cat)) return -1;
  f->gpus[0] = *vl_catalog_find(&f->cat, "h100-80gb");
  f->gpus[1] = *vl_catalog_find(&f->cat, "l4");
  tu_arch("data/models/gpt2.json", &f->a);
  vl_plan_query_init(&f->q);
  f->q.arch = &f->a;
  f->q.base.seq = 1024;
  f->q.tokens = 1000000;
  f->q.global_batch = 16;
  f->q.gpus = f->gpus;
  f->q.n_gpus = 2;
  f->q.max_gpus = 2;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  if (vl_plan_search(&f->q, &ov, &f->r, &err) != VL_OK) return -1;
  f->v = (struct vl_plan_view){
      .model_name = "gpt2", .q = &f->q, .r = &f->r, .top = 5, .prices_date = "2026-01-01"};
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  vl_plan_release(&f->r);
  vl_catalog_release(&f->cat);
  free(f);
  return 0;
}

static void json_holds_every_candidate(void **state) {
  struct fixture *f = *state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_JSON, &f->v));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.plan/1");
  assert_string_equal(rc_str(root, "model"), "gpt2");
  assert_string_equal(rc_str(root, "prices_date"), "2026-01-01");
  /* ceil(10^6 / (16 x 1024)) = 62 steps */
  assert_int_equal(rc_num(root, "steps"), 62);
  assert_int_equal(rc_num(root, "steps"), f->r.steps);
  assert_int_equal(rc_num(root, "evaluated"), f->r.evaluated);
  json_t *cands = json_object_get(root, "candidates");
  assert_true(f->r.n > 10);
  assert_int_equal(json_array_size(cands), f->r.n);
  for (size_t i = 0; i < f->r.n; i++) {
    const struct vl_plan_candidate *c = &f->r.c[i];
    json_t *o = json_array_get(cands, i);
    assert_string_equal(rc_str(o, "gpu"), c->gpu->name);
    assert_int_equal(rc_num(o, "count"), c->count);
    assert_int_equal(rc_num(o, "micro_batch"), c->micro_batch);
    assert_int_equal(rc_num(o, "grad_accum"), c->grad_accum);
    /* bytes are integers to the byte; reals keep 6 significant digits */
    assert_int_equal((uint64_t)json_integer_value(json_object_get(o, "peak_bytes_per_gpu")),
                     c->peak_bytes_per_gpu);
    assert_true(fabs(rc_num(o, "hours") - c->hours) <= 1e-5 * c->hours);
    assert_true(fabs(rc_num(o, "cost_usd") - c->cost_usd) <= 1e-5 * c->cost_usd);
    assert_true(json_is_boolean(json_object_get(o, "pareto")));
    assert_int_equal(json_is_true(json_object_get(o, "pareto")), c->pareto);
  }
  /* the best with the job it runs, which `commit --plan` reads */
  assert_true(f->r.have_best);
  json_t *best = json_object_get(root, "best");
  assert_string_equal(rc_str(best, "gpu"), f->r.c[0].gpu->name);
  json_t *settings = json_object_get(best, "settings");
  assert_true(json_is_object(settings));
  assert_int_equal(json_array_size(json_object_get(root, "trace")), f->r.n_trace);
  assert_true(f->r.n_trace > 0);
  json_decref(root);
  free(text);
}

static void text_and_markdown_show_the_top_rows(void **state) {
  struct fixture *f = *state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_TEXT, &f->v));
  assert_int_equal(
      strncmp(text, "plan: gpt2: 1e+06 tokens, seq 1024, global batch 16 -> 62 steps",
              strlen("plan: gpt2: 1e+06 tokens, seq 1024, global batch 16 -> 62 steps")),
      0);
  char said[128];
  snprintf(said, sizeof said, "  %zu configurations estimated, %zu fit with %.0f %% kept free",
           f->r.evaluated, f->r.n, 100 * f->q.margin);
  if (!strstr(text, said)) fail_msg("no '%s' in:\n%s", said, text);
  /* rows "    1 1xh100-80gb ...": the top 5 of them, ranked */
  char row[64];
  for (int i = 1; i <= 5; i++) {
    snprintf(row, sizeof row, "  %3d %ux%s", i, f->r.c[i - 1].count, f->r.c[i - 1].gpu->name);
    if (!strstr(text, row)) fail_msg("no row '%s' in:\n%s", row, text);
  }
  snprintf(row, sizeof row, "  %3d ", 6);
  assert_int_equal(rc_lines_starting(text, row), 0);
  free(text);
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_MD, &f->v));
  assert_int_equal(strncmp(text, "## Plan: gpt2", 13), 0);
  /* the header, its rule, then the 5 rows */
  assert_int_equal(rc_lines_starting(text, "| "), 1 + 5);
  assert_int_equal(rc_lines_starting(text, "|---:|"), 1);
  free(text);
}

static void html_is_one_closed_page(void **state) {
  struct fixture *f = *state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_plan_html(rc_f, &f->v));
  assert_int_equal(strncmp(text, "<!DOCTYPE html>", 15), 0);
  size_t n = strlen(text);
  assert_true(n > 20 && strstr(text + n - 20, "</html>"));
  /* the chart's data, JSON in its <script>: a point for every plan that
   * fits (under 5000 of them: none thinned out) */
  const char *spec = strstr(text, "class=\"vl-spec\">");
  assert_non_null(spec);
  spec += strlen("class=\"vl-spec\">");
  const char *end = strstr(spec, "</script>");
  assert_non_null(end);
  char *js = strndup(spec, (size_t)(end - spec));
  json_t *chart = rc_json(js);
  assert_int_equal(json_array_size(json_object_get(chart, "meta")), f->r.n);
  json_decref(chart);
  free(js);
  free(text);
}

/* a name with characters JSON and Markdown must escape, and no candidate */
static void nothing_fits_and_a_name_to_escape(void **state) {
  struct fixture *f = *state;
  struct vl_plan_result none = f->r;
  none.n = 0;
  none.have_best = false;
  none.n_trace = 0;
  struct vl_plan_view v = f->v;
  v.r = &none;
  v.model_name = "my \"model\" | 1";
  char *text = NULL;
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_JSON, &v));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "model"), "my \"model\" | 1");
  assert_int_equal(json_array_size(json_object_get(root, "candidates")), 0);
  assert_true(json_is_null(json_object_get(root, "best")));
  json_decref(root);
  free(text);
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_TEXT, &v));
  assert_non_null(strstr(text, "nothing fits: try more GPUs (--max-gpus), LoRA, or a shorter "
                               "sequence"));
  free(text);
  RC_CAPTURE(text, vl_render_plan(rc_f, VL_FMT_MD, &v));
  assert_null(strstr(text, "\"model\" |")); /* the pipe escaped in Markdown */
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_holds_every_candidate),
      cmocka_unit_test(text_and_markdown_show_the_top_rows),
      cmocka_unit_test(html_is_one_closed_page),
      cmocka_unit_test(nothing_fits_and_a_name_to_escape),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
