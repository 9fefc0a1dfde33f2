/* lib/model/calibration.c: every measured constant is recomputed from the
 * dataset its row names where the dataset is in the repository, or pinned
 * beside the dataset's name where the dataset gives it by a fit; the
 * defaults read the table; docs/model.md §9 lists the table as it is; and
 * PyTorch's constants (lib/model/pytorch_constants.h) agree with the
 * allocator's measured rounding. Moving a constant fails here, by name,
 * not only in the golden outputs. */
#include <jansson.h>

#include "model/calibration.h"
#include "model/pytorch_constants.h"
#include "testutil.h"
#include "vramledger/caching.h"

static json_t *load(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", VL_SOURCE_DIR, rel);
  json_error_t e;
  json_t *j = json_load_file(path, 0, &e);
  if (!j) fprintf(stderr, "%s: %s\n", path, e.text);
  assert_non_null(j);
  return j;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* the median as Python's statistics.median takes it (the mean of the two
 * middle values of an even count) */
static double median(uint64_t *v, size_t n) {
  assert_true(n > 0);
  qsort(v, n, sizeof *v, cmp_u64);
  return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

/* NVML process memory - max_memory_reserved of one measured run, or 0 */
static uint64_t outside_pytorch(const json_t *run) {
  const json_t *m = json_object_get(run, "measured");
  const json_t *nv = json_object_get(m, "nvml_process"), *rs = json_object_get(m, "peak_reserved");
  if (!json_is_integer(nv) || !json_is_integer(rs)) return 0;
  return (uint64_t)json_integer_value(nv) - (uint64_t)json_integer_value(rs);
}

static bool is_infer(const json_t *run) {
  const char *task = json_string_value(json_object_get(run, "task"));
  return task && strcmp(task, "infer") == 0;
}

static void expect_row(enum vl__cal id, const char *name, double value, const char *dataset) {
  const struct vl__calibration *c = vl__calibration(id);
  assert_non_null(c);
  assert_string_equal(c->name, name);
  if (c->value != value)
    fprintf(stderr, "%s moved: %.17g in lib/model/calibration.c, %.17g from %s\n", name, c->value,
            value, dataset);
  assert_true(c->value == value);
  assert_string_equal(c->dataset, dataset);
}

static void context_is_the_median_of_the_training_runs(void **state) {
  (void)state;
  const char *ds = "data/reference/h200-torch-2.11/calibration.json";
  json_t *j = load(ds);
  uint64_t v[256];
  size_t n = 0, i;
  json_t *run;
  json_array_foreach(json_object_get(j, "runs"), i, run) {
    uint64_t c = outside_pytorch(run);
    if (c && !is_infer(run) && n < 256) v[n++] = c;
  }
  json_decref(j);
  assert_int_equal(n, 36);
  expect_row(VL_CAL_CUDA_CONTEXT, "cuda_context_bytes", median(v, n), ds);
}

/* every generate() run under the default allocator anywhere in j */
static void infer_runs(json_t *j, uint64_t *v, size_t *n, size_t cap) {
  if (json_is_array(j)) {
    size_t i;
    json_t *x;
    json_array_foreach(j, i, x) infer_runs(x, v, n, cap);
    return;
  }
  if (!json_is_object(j)) return;
  const char *alloc = json_string_value(json_object_get(j, "allocator"));
  uint64_t c = outside_pytorch(j);
  if (is_infer(j) && c && !(alloc && strcmp(alloc, "expandable") == 0) && *n < cap) v[(*n)++] = c;
  const char *k;
  json_t *x;
  json_object_foreach(j, k, x) infer_runs(x, v, n, cap);
}

static void infer_context_is_the_median_of_the_generate_runs(void **state) {
  (void)state;
  static const char *const files[] = {
      "data/reference/h200-torch-2.11/calibration.json",
      "data/reference/h200-torch-2.11/types-measured.json",
      "data/reference/h200-torch-2.11/infer-gpt2m-fp32-b8.json",
      "data/reference/h200-torch-2.11/infer-gpt2m-fp32-b16.json",
      "data/reference/h200-torch-2.11/infer-smollm3.json",
  };
  uint64_t v[64];
  size_t n = 0;
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    json_t *j = load(files[f]);
    infer_runs(j, v, &n, 64);
    json_decref(j);
  }
  assert_int_equal(n, 14);
  expect_row(VL_CAL_CUDA_CONTEXT_INFER, "cuda_context_infer_bytes", median(v, n),
             "data/reference/h200-torch-2.11/calibration.json, types-measured.json and "
             "infer-*.json");
}

static void nccl_is_the_ddp_overhead_less_the_context(void **state) {
  (void)state;
  const char *ds = "data/reference/h200-torch-2.11/per-gpu-overhead.txt";
  size_t len;
  char *text = tu_read(ds, &len);
  assert_non_null(text);
  uint64_t v[16];
  size_t n = 0;
  for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    unsigned long long peak, reserved, overhead;
    if (strncmp(line, "ddp-run", 7) == 0 &&
        sscanf(line, "%*s %llu %llu %llu", &peak, &reserved, &overhead) == 3 && n < 16) {
      assert_int_equal(peak - reserved, overhead);
      v[n++] = overhead;
    }
  }
  free(text);
  assert_int_equal(n, 4);
  expect_row(VL_CAL_NCCL, "nccl_bytes", median(v, n) - vl__calibration(VL_CAL_CUDA_CONTEXT)->value,
             ds);
}

/* "132 SMs, 2,048 threads per SM": the card's, as the dataset's README
 * reports them */
static void card_is_the_one_the_reductions_ran_on(void **state) {
  (void)state;
  const char *ds = "bench/results/cuda-reduce/";
  size_t len;
  char *text = tu_read("bench/results/cuda-reduce/README.md", &len);
  assert_non_null(text);
  const char *at = strstr(text, " SMs, ");
  assert_non_null(at);
  const char *p = at;
  while (p > text && p[-1] >= '0' && p[-1] <= '9')
    p--;
  unsigned sms = 0, tps = 0;
  assert_int_equal(sscanf(p, "%u SMs, ", &sms), 1);
  for (p = at + 6; (*p >= '0' && *p <= '9') || *p == ','; p++)
    if (*p != ',') tps = tps * 10 + (unsigned)(*p - '0');
  assert_non_null(strstr(p, " threads per SM"));
  free(text);
  expect_row(VL_CAL_SM_COUNT, "sm_count", sms, ds);
  expect_row(VL_CAL_THREADS_PER_SM, "threads_per_sm", tps, ds);
}

/* the fractions come from fits over whole runs (bench/accuracy/compare.py):
 * pinned here with their datasets, so a change is a change of this file */
static void churn_fractions_are_pinned(void **state) {
  (void)state;
  expect_row(VL_CAL_CHURN, "allocator_churn", 0.05,
             "data/reference/h200-torch-2.11/calibration.json");
  expect_row(VL_CAL_CHURN_EXPANDABLE, "allocator_churn_expandable", 0.02,
             "data/reference/h200-torch-2.11/expandable-segments.json");
}

static void defaults_read_the_table(void **state) {
  (void)state;
  struct vl_overheads o;
  vl_overheads_default(&o);
  assert_true((double)o.cuda_context_bytes == vl__calibration(VL_CAL_CUDA_CONTEXT)->value);
  assert_true((double)o.cuda_context_infer_bytes ==
              vl__calibration(VL_CAL_CUDA_CONTEXT_INFER)->value);
  assert_true((double)o.nccl_bytes == vl__calibration(VL_CAL_NCCL)->value);
  assert_true((double)o.sm_count == vl__calibration(VL_CAL_SM_COUNT)->value);
  assert_true((double)o.threads_per_sm == vl__calibration(VL_CAL_THREADS_PER_SM)->value);
  assert_true(o.allocator_churn == vl__calibration(VL_CAL_CHURN)->value);
  assert_true(o.allocator_churn_expandable == vl__calibration(VL_CAL_CHURN_EXPANDABLE)->value);
  assert_int_equal(o.cublas_workspace_bytes, VL_PT_CUBLAS_WORKSPACE_SM90);
  for (int i = 0; i < VL_CAL_COUNT; i++) {
    const struct vl__calibration *c = vl__calibration((enum vl__cal)i);
    assert_non_null(c->name);
    /* a measured dataset (data/reference/) or the results folder of how it was
     * found (bench/results/) */
    assert_true(strncmp(c->dataset, "bench/results/", 14) == 0 ||
                strncmp(c->dataset, "data/reference/", 15) == 0);
    assert_true(strlen(c->how) > 0);
  }
  assert_null(vl__calibration(VL_CAL_COUNT));
}

#define DOC_BEGIN "<!-- the measured constants: lib/model/calibration.c -->\n"
#define DOC_END "<!-- end of the measured constants -->\n"

/* the table as docs/model.md shows it, from calibration.c's rows */
static void doc_table(char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n,
                               "| constant | value | unit | dataset | how |\n"
                               "|---|---|---|---|---|\n");
  for (int i = 0; i < VL_CAL_COUNT && at < n; i++) {
    const struct vl__calibration *c = vl__calibration((enum vl__cal)i);
    at += (size_t)snprintf(buf + at, n - at, "| `%s` | %.15g | %s | `%s` | %s |\n", c->name,
                           c->value, *c->unit ? c->unit : "count", c->dataset, c->how);
  }
}

static void docs_list_the_table(void **state) {
  (void)state;
  size_t len;
  char *doc = tu_read("docs/model.md", &len);
  assert_non_null(doc);
  char want[8192];
  doc_table(want, sizeof want);
  const char *b = strstr(doc, DOC_BEGIN), *e = b ? strstr(b, DOC_END) : NULL;
  assert_non_null(b);
  assert_non_null(e);
  b += strlen(DOC_BEGIN);
  if ((size_t)(e - b) != strlen(want) || memcmp(b, want, strlen(want)) != 0)
    fprintf(stderr, "docs/model.md §9 should list, between its markers:\n%s", want);
  assert_int_equal((size_t)(e - b), strlen(want));
  assert_memory_equal(b, want, strlen(want));
  free(doc);
}

/* PyTorch's rounding against the allocator's own numbers on the H200:
 * allocated_delta of a tensor of n bytes is its block, and the 100 MiB one
 * got a segment of its own (data/reference/h200-torch-2.11/basics.json) */
static void allocator_constants_match_the_measured_rounding(void **state) {
  (void)state;
  json_t *j = load("data/reference/h200-torch-2.11/basics.json");
  const char *k;
  json_t *x;
  int seen = 0;
  json_object_foreach(json_object_get(j, "rounding"), k, x) {
    uint64_t bytes = strtoull(k, NULL, 10);
    assert_int_equal(vl_cache_round(bytes),
                     (uint64_t)json_integer_value(json_object_get(x, "allocated_delta")));
    uint64_t reserved = (uint64_t)json_integer_value(json_object_get(x, "reserved_delta"));
    if (reserved) assert_int_equal(vl_cache_segment_for(vl_cache_round(bytes)), reserved);
    seen++;
  }
  assert_true(seen >= 8);
  json_t *mm = json_object_get(j, "after_first_bf16_matmul");
  assert_int_equal(json_integer_value(json_object_get(mm, "allocated_delta")),
                   VL_PT_CUBLAS_WORKSPACE_SM90);
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(context_is_the_median_of_the_training_runs),
      cmocka_unit_test(infer_context_is_the_median_of_the_generate_runs),
      cmocka_unit_test(nccl_is_the_ddp_overhead_less_the_context),
      cmocka_unit_test(card_is_the_one_the_reductions_ran_on),
      cmocka_unit_test(churn_fractions_are_pinned),
      cmocka_unit_test(defaults_read_the_table),
      cmocka_unit_test(docs_list_the_table),
      cmocka_unit_test(allocator_constants_match_the_measured_rounding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
