/* lib/decide/catalog.c and fit.c: the GPU catalog, the fit, the search. */
#include "testutil.h"
#include "vramledger/catalog.h"

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

static void bundled_catalog(void **state) {
  (void)state;
  assert_true(cat.n >= 12);
  const char *need[] = {"a100-40gb", "a100-80gb", "h100-80gb", "h100-pcie", "h200",      "b200",
                        "l40s",      "l4",        "a10g",      "rtx-4090",  "v100-32gb", "mi300x"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    assert_non_null(vl_catalog_find(&cat, need[i]));
  const struct vl_gpu *h = vl_catalog_find(&cat, "H100"); /* alias, any case */
  assert_non_null(h);
  assert_string_equal(h->name, "h100-80gb");
  /* the H200 figure is the one measured on the lent machine */
  assert_int_equal(vl_catalog_find(&cat, "h200")->memory_bytes, 150109880320ull);
  assert_null(vl_catalog_find(&cat, "h300"));
}

/* A prices file overrides the cards it names, all or nothing. */
static void prices_override(void **state) {
  (void)state;
  struct vl_catalog c;
  size_t len = 0;
  char *text = tu_read("data/gpus.json", &len);
  struct vl_err err = {""};
  assert_int_equal(vl_catalog_parse(text, len, &c, &err), VL_OK);
  free(text);
  double l4 = vl_catalog_find(&c, "l4")->usd_per_hour;
  const char *bad = "{\"date\": \"2026-01-01\", \"usd_per_hour\": {\"h100\": 1, \"h900\": 2}}";
  assert_int_equal(vl_prices_apply(bad, strlen(bad), &c, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "h900"));
  assert_true(vl_catalog_find(&c, "h100-80gb")->usd_per_hour > 1); /* nothing changed */
  const char *neg = "{\"date\": \"2026-01-01\", \"usd_per_hour\": {\"h100\": -1}}";
  assert_int_equal(vl_prices_apply(neg, strlen(neg), &c, &err), VL_ERANGE);
  const char *nodate = "{\"usd_per_hour\": {\"h100\": 1}}";
  assert_int_equal(vl_prices_apply(nodate, strlen(nodate), &c, &err), VL_EKEY);
  assert_int_equal(vl_prices_apply("{", 1, &c, &err), VL_EPARSE);
  const char *ok = "{\"date\": \"2026-01-01\", \"usd_per_hour\": {\"H100\": 2.49}}";
  assert_int_equal(vl_prices_apply(ok, strlen(ok), &c, &err), VL_OK);
  assert_true(vl_catalog_find(&c, "h100-80gb")->usd_per_hour == 2.49);
  assert_true(vl_catalog_find(&c, "l4")->usd_per_hour == l4);
  assert_string_equal(c.prices_date, "2026-01-01");
  vl_catalog_release(&c);
}

static void bad_catalogs(void **state) {
  (void)state;
  struct vl_catalog c;
  struct vl_err err = {""};
  const char *bad[] = {
      "{\"gpus\": [",
      "{\"gpus\": []}",
      "{\"gpus\": [{\"name\": \"x\"}]}",
      "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 12}]}",
      "{\"gpus\": [{\"name\": \"\", \"memory_bytes\": 85899345920}]}",
      "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 85899345920, \"aliases\": 3}]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    vl_status s = vl_catalog_parse(bad[i], strlen(bad[i]), &c, &err);
    assert_int_not_equal(s, VL_OK);
    assert_null(c.gpus);
  }
}

static void fit_keeps_the_margin(void **state) {
  (void)state;
  struct vl_gpu g = {.name = "test", .memory_bytes = 100ull << 30};
  struct vl_fit f;
  vl_fit_check(90ull << 30, &g, 0.10, &f);
  assert_true(f.fits);
  assert_int_equal(f.headroom_bytes, 0);
  vl_fit_check((90ull << 30) + 1, &g, 0.10, &f);
  assert_false(f.fits);
  assert_int_equal(f.headroom_bytes, -1);
  vl_fit_check(50ull << 30, &g, 0.15, &f);
  assert_int_equal(f.usable_bytes, 85ull << 30);
}

static void search_finds_the_edge(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-3-8b.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.lora_rank = 16;
  const struct vl_gpu *g = vl_catalog_find(&cat, "h100-80gb");
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill b;
  struct vl_err err = {""};
  uint64_t best = 0;
  assert_int_equal(vl_search_max(&a, &j, &ov, g, 0.10, VL_SEARCH_BATCH, &best, &b, &err), VL_OK);
  assert_true(best >= 1);
  struct vl_fit f;
  j.batch = best;
  tu_bill(&a, &j, &b);
  vl_fit_check(b.total_bytes, g, 0.10, &f);
  assert_true(f.fits);
  j.batch = best + 1;
  tu_bill(&a, &j, &b);
  vl_fit_check(b.total_bytes, g, 0.10, &f);
  assert_false(f.fits);
  /* nothing fits: a 405B model on an L4 */
  tu_arch("data/models/llama-3.1-405b.json", &a);
  vl_job_init(&j);
  assert_int_equal(
      vl_search_max(&a, &j, &ov, vl_catalog_find(&cat, "l4"), 0.10, VL_SEARCH_SEQ, &best, &b, &err),
      VL_OK);
  assert_int_equal(best, 0);
}

/* dense FP16 and FP8 rates: FP8 twice the 16-bit rate where the card has
 * it, none on A100 */
static void tensor_rates(void **state) {
  (void)state;
  const struct vl_gpu *h = vl_catalog_find(&cat, "h200"), *a = vl_catalog_find(&cat, "a100-80gb");
  assert_true(h->fp16_tflops == h->bf16_tflops && h->fp8_tflops == 1979.0);
  assert_true(a->fp8_tflops == 0 && a->fp16_tflops == 312);
  for (size_t i = 0; i < cat.n; i++) {
    const struct vl_gpu *g = &cat.gpus[i];
    assert_true(g->fp8_tflops == 0 ||
                (g->fp8_tflops >= 1.9 * g->fp16_tflops && g->fp8_tflops <= 2.1 * g->fp16_tflops));
  }
}

/* the device names CUDA and NVML give, matched to catalog cards */
static void device_names(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"NVIDIA H200", "h200"},
      {"NVIDIA H100 80GB HBM3", "h100-80gb"},
      {"NVIDIA A100-SXM4-80GB", "a100-80gb"},
      {"NVIDIA A100-SXM4-40GB", "a100-40gb"},
      {"NVIDIA GeForce RTX 4090", "rtx-4090"},
      {"NVIDIA L4", "l4"},
      {"NVIDIA A10G", "a10g"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct vl_gpu *g = vl_catalog_match_device(&cat, cases[i][0]);
    assert_non_null(g);
    assert_string_equal(g->name, cases[i][1]);
  }
  assert_null(vl_catalog_match_device(&cat, "NVIDIA Quadro P400"));
  assert_null(vl_catalog_match_device(&cat, ""));
}

/* The CUDA context the bill holds was measured on the H200: a Hopper card
 * shares it, a card of another architecture carries it over with a range
 * of 200 MiB either way. Its cuBLAS workspace is PyTorch's default for it
 * (CublasHandlePool.cpp, parseChosenWorkspaceSize: 32 MiB on Hopper and,
 * since PyTorch's pull request 175344, Blackwell; 4096 KiB x 2 + 16 KiB x 8
 * on other CUDA cards, 128 MiB on gfx94x), with ROCm's separate hipBLASLt
 * workspace (parseCUDABlasLtWorkspaceSize: 76 MiB), and the bill takes
 * the card's (vl_overheads_for_gpu). */
static void context_carried_over(void **state) {
  (void)state;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_job train, infer;
  vl_job_init(&train);
  vl_job_init(&infer);
  infer.task = VL_TASK_INFER;
  static const struct {
    const char *gpu, *arch;
    bool carried;
    uint64_t workspace, lt;
  } rows[] = {{"h200", "Hopper", false, 32ull << 20, 0},
              {"h100-80gb", "Hopper", false, 32ull << 20, 0},
              {"h100-pcie", "Hopper", false, 32ull << 20, 0},
              {"a100-80gb", "Ampere", true, 4096 * 1024 * 2 + 16 * 1024 * 8, 0},
              {"a10g", "Ampere", true, 8519680, 0},
              {"l4", "Ada", true, 8519680, 0},
              {"rtx-4090", "Ada", true, 8519680, 0},
              {"b200", "Blackwell", true, 32ull << 20, 0},
              {"v100-32gb", "Volta", true, 8519680, 0},
              {"mi300x", "CDNA 3", true, 128ull << 20, 76ull << 20}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct vl_gpu *g = vl_catalog_find(&cat, rows[i].gpu);
    assert_non_null(g);
    assert_string_equal(vl_gpu_architecture(g), rows[i].arch);
    assert_int_equal(g->context_measured, !strcmp(rows[i].gpu, "h200"));
    assert_int_equal(g->cublas_workspace_bytes, rows[i].workspace);
    assert_int_equal(g->cublaslt_workspace_bytes, rows[i].lt);
    assert_int_equal(vl_context_range_bytes(g), rows[i].carried ? 200ull << 20 : 0);
    struct vl_overheads og = ov;
    vl_overheads_for_gpu(&og, g);
    assert_int_equal(og.cublas_workspace_bytes, rows[i].workspace);
    assert_int_equal(og.cublaslt_workspace_bytes, rows[i].lt);
    assert_int_equal(og.cuda_context_bytes, ov.cuda_context_bytes); /* carried over */
    struct vl_context_carry c;
    vl_context_carry(g, &og, &train, &c);
    assert_int_equal(c.carried, rows[i].carried);
    assert_int_equal(c.range_bytes, rows[i].carried ? 200ull << 20 : 0);
    assert_int_equal(c.context_bytes, ov.cuda_context_bytes);
    assert_int_equal(c.workspace_billed_bytes, rows[i].workspace + rows[i].lt);
    assert_int_equal(c.workspace_card_bytes, rows[i].workspace);
    assert_int_equal(c.lt_workspace_bytes, rows[i].lt);
    assert_int_equal(c.workspaces, 2);
    vl_context_carry(g, &og, &infer, &c);
    assert_int_equal(c.context_bytes, ov.cuda_context_infer_bytes);
    assert_int_equal(c.workspaces, 1);
    vl_context_carry(g, &ov, &train, &c); /* the H200's overheads given: the card's */
    assert_int_equal(c.workspace_billed_bytes, rows[i].workspace + rows[i].lt);
  }
  /* a catalog of its own: no figures, no claim of a measurement */
  static const char one[] =
      "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 17179869184, \"compute_capability\": "
      "\"8.6\"}]}";
  struct vl_catalog c1;
  struct vl_err err = {""};
  assert_int_equal(vl_catalog_parse(one, sizeof one - 1, &c1, &err), VL_OK);
  assert_false(c1.gpus[0].context_measured);
  assert_int_equal(c1.gpus[0].cublas_workspace_bytes, 0);
  struct vl_overheads keep = ov; /* no figure: the bill keeps the H200's */
  vl_overheads_for_gpu(&keep, &c1.gpus[0]);
  assert_int_equal(keep.cublas_workspace_bytes, ov.cublas_workspace_bytes);
  assert_int_equal(keep.cublaslt_workspace_bytes, 0);
  vl_catalog_release(&c1);
  static const char bad_lt[] = "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 17179869184, "
                               "\"cublaslt_workspace_bytes\": -1}]}";
  assert_int_equal(vl_catalog_parse(bad_lt, sizeof bad_lt - 1, &c1, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "cublaslt_workspace_bytes"));
  static const char bad[] = "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 17179869184, "
                            "\"cublas_workspace_bytes\": \"big\"}]}";
  assert_int_equal(vl_catalog_parse(bad, sizeof bad - 1, &c1, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "cublas_workspace_bytes"));
}

/* The SMs and threads per SM of ATen's reduction scratch: each CUDA card
 * has them, threads per SM as the CUDA C++ Programming Guide gives them
 * per compute capability, and the model's figures are the reference
 * card's entry (the build reads them from data/gpus.json). */
static void sm_figures(void **state) {
  (void)state;
  for (size_t i = 0; i < cat.n; i++) {
    const struct vl_gpu *g = &cat.gpus[i];
    if (!strncmp(g->compute_capability, "gfx", 3)) continue;
    bool ga10x_ada = !strcmp(g->compute_capability, "8.6") || !strcmp(g->compute_capability, "8.9");
    assert_true(g->sm_count > 0);
    assert_int_equal(g->max_threads_per_sm, ga10x_ada ? 1536 : 2048);
  }
  assert_int_equal(vl_catalog_find(&cat, "a100-80gb")->sm_count, 108);
  const struct vl_gpu *ref = vl_catalog_find(&cat, "h200");
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  assert_int_equal(ov.sm_count, ref->sm_count);
  assert_int_equal(ov.threads_per_sm, ref->max_threads_per_sm);
  assert_int_equal(ov.sm_count, 132); /* the H200's, unchanged */
  struct vl_catalog c;
  struct vl_err err = {""};
  static const char bad[] = "{\"gpus\": [{\"name\": \"x\", \"memory_bytes\": 17179869184, "
                            "\"sm_count\": 0}]}";
  assert_int_equal(vl_catalog_parse(bad, sizeof bad - 1, &c, &err), VL_EKEY);
  assert_string_equal(err.msg, "gpus[0].sm_count: expected a whole number, 1 to 65536");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bundled_catalog),
      cmocka_unit_test(bad_catalogs),
      cmocka_unit_test(prices_override),
      cmocka_unit_test(fit_keeps_the_margin),
      cmocka_unit_test(search_finds_the_edge),
      cmocka_unit_test(device_names),
      cmocka_unit_test(tensor_rates),
      cmocka_unit_test(context_carried_over),
      cmocka_unit_test(sm_figures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
