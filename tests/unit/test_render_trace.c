/* lib/render/trace.c and trace_time.c: tests/data/traces/batch.trace (12
 * MiB of a forward, 4 MiB more in backward, 8 MiB freed, 8 MiB made for
 * the optimizer) replayed by the caching allocator and as expandable
 * segments and rendered: the peaks are the replay's and, worked by hand,
 * 16 MiB allocated first reached by model.w's second block in mark
 * 'backward 1'; the
 * default allocator reserves one 20 MiB segment (kLargeBuffer, for blocks
 * under kMinLargeAlloc 10 MiB, c10/cuda/CUDACachingAllocator.cpp) that
 * every block fits in. With a step priced (trace --gpu, custom-ops.trace
 * on the H100), its time is shown in text, Markdown and JSON. */
#include "render_capture.h"
#include "vramledger/caching.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"
#include "vramledger/steptime.h"

#define M (1ull << 20)

static struct vl_trace tr;
static struct vl_replay rep[2];
static const char *names[2] = {"default", "expandable_segments"};
static struct vl_trace_view view;

static int setup(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/traces/batch.trace", &len);
  struct vl_err err = {""};
  if (!text || vl_trace_parse(text, len, &tr, &err) != VL_OK) return -1;
  free(text);
  struct vl_cache_conf conf = {0, 0, 0, false}, exp = {0, 0, 0, true};
  if (vl_trace_replay(&tr, -1, &conf, &rep[0]) != VL_OK) return -1;
  if (vl_trace_replay(&tr, -1, &exp, &rep[1]) != VL_OK) return -1;
  view = (struct vl_trace_view){
      .trace = "batch.trace", .device = "cuda", .tr = &tr, .names = names, .replays = rep, .n = 2};
  return 0;
}

static int teardown(void **state) {
  (void)state;
  vl_trace_release(&tr);
  return 0;
}

static void json_replays(void **state) {
  (void)state;
  assert_int_equal(rep[0].peak_allocated, 16 * M);
  assert_int_equal(rep[0].peak_reserved, 20 * M);
  char *text = NULL;
  RC_CAPTURE(text, vl_render_trace(rc_f, true, &view));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.trace/1");
  assert_string_equal(rc_str(root, "trace"), "batch.trace");
  assert_int_equal(rc_num(root, "events"), tr.n);
  assert_int_equal(rc_num(root, "allocations"), 5);
  assert_int_equal(rc_num(root, "frees"), 2);
  assert_int_equal(rc_num(root, "batch"), 2); /* "# batch 2" */
  assert_true(json_is_true(json_object_get(root, "complete")));
  assert_string_equal(rc_str(root, "peak_mark"), "backward 1");
  json_t *rs = json_object_get(root, "replays");
  assert_int_equal(json_array_size(rs), 2);
  for (size_t i = 0; i < 2; i++) {
    json_t *r = json_array_get(rs, i);
    assert_string_equal(rc_str(r, "allocator"), names[i]);
    assert_int_equal(rc_num(r, "peak_allocated_bytes"), rep[i].peak_allocated);
    assert_int_equal(rc_num(r, "peak_reserved_bytes"), rep[i].peak_reserved);
    assert_false(json_is_true(json_object_get(r, "oom")));
    assert_true(json_is_null(json_object_get(r, "oom_event")));
  }
  /* no step priced, no ops to price: no step time */
  assert_null(json_object_get(root, "time"));
  assert_null(json_object_get(root, "step_seconds"));
  json_decref(root);
  free(text);
}

static void text_and_markdown(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_trace(rc_f, false, &view));
  assert_int_equal(strncmp(text, "trace: batch.trace", 18), 0);
  assert_non_null(strstr(text, "5 allocations and 2 frees replayed (device cuda)"));
  /* events count the marks: the peak's allocation is the 6th of 10 */
  assert_non_null(strstr(text, "the peak: event 6 of 10, in 'backward 1', allocated by model.w"));
  /* 16 MiB = 0.016 GiB allocated, 20 MiB = 0.020 reserved */
  assert_non_null(strstr(text, "default                         0.016 GiB      0.020 GiB"));
  free(text);
  RC_CAPTURE(text, vl_render_trace_md(rc_f, &view));
  assert_int_equal(strncmp(text, "# Trace\n\n`batch.trace`: 5 allocations and 2 frees", 48), 0);
  free(text);
}

static void with_the_step_priced(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  size_t len = 0;
  char *ops = tu_read("tests/data/traces/custom-ops.trace", &len);
  struct vl_trace_time tt;
  struct vl_err err = {""};
  assert_int_equal(vl_trace_step_time(ops, len, vl_catalog_find(&cat, "h100-80gb"), &tt, &err),
                   VL_OK);
  free(ops);
  struct vl_trace_view v = view;
  v.time = &tt;
  v.gpu = "h100-80gb";
  char *text = NULL;
  RC_CAPTURE(text, vl_render_trace(rc_f, true, &v));
  json_t *root = rc_json(text);
  /* the step's seconds at the top, the trace's own beside the estimate's
   * under "time" */
  assert_true(fabs(rc_num(root, "step_seconds") - tt.time.step_s) <= 1e-9 + 1e-6 * tt.time.step_s);
  json_t *st = json_object_get(root, "time");
  assert_true(json_is_object(st));
  assert_string_equal(rc_str(st, "gpu"), "h100-80gb");
  assert_int_equal(rc_num(st, "step"), tt.step);
  assert_int_equal(rc_num(st, "steps"), tt.steps);
  json_decref(root);
  free(text);
  RC_CAPTURE(text, vl_render_trace(rc_f, false, &v));
  char want[128];
  snprintf(want, sizeof want, "step time on h100-80gb (step %llu of %llu traced",
           (unsigned long long)tt.step, (unsigned long long)tt.steps);
  if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
  snprintf(want, sizeof want, "): %.4f s (forward %.4f", tt.time.step_s, tt.time.forward_s);
  if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
  free(text);
  RC_CAPTURE(text, vl_render_trace_md(rc_f, &v));
  assert_non_null(strstr(text, "\n## Step time on "));
  assert_non_null(strstr(text, "| op kind | seconds | share |"));
  free(text);
  vl_catalog_release(&cat);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_replays),
      cmocka_unit_test(text_and_markdown),
      cmocka_unit_test(with_the_step_priced),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
