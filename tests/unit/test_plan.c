/* lib/decide/plan.c and the catalog's compute capability: a card without
 * native bf16 (V100, compute capability 7.0) is not planned on for a bf16
 * precision, with the reason kept; it is for fp16; times and costs of a
 * short job come in minutes, seconds and cents; communication is priced in
 * the dtypes it travels in. */
#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/plan.h"

static void catalog_bf16(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  const struct vl_gpu *v100 = vl_catalog_find(&cat, "v100-32gb");
  const struct vl_gpu *h100 = vl_catalog_find(&cat, "h100-80gb");
  const struct vl_gpu *mi = vl_catalog_find(&cat, "mi300x");
  assert_non_null(v100);
  assert_string_equal(v100->compute_capability, "7.0");
  assert_true(v100->no_bf16);
  assert_string_equal(h100->compute_capability, "9.0");
  assert_false(h100->no_bf16);
  assert_string_equal(mi->compute_capability, "gfx942");
  assert_false(mi->no_bf16);
  for (size_t i = 0; i < cat.n; i++) /* every card of the catalog says */
    assert_true(cat.gpus[i].compute_capability[0] != '\0');
  vl_catalog_release(&cat);
  /* "bf16" overrides the capability; a card without either is not excluded */
  const char *text = "{\"gpus\": [{\"name\": \"a\", \"memory_bytes\": 17179869184, "
                     "\"compute_capability\": \"7.5\"}, {\"name\": \"b\", \"memory_bytes\": "
                     "17179869184, \"compute_capability\": \"7.5\", \"bf16\": true}, "
                     "{\"name\": \"c\", \"memory_bytes\": 17179869184}, {\"name\": \"d\", "
                     "\"memory_bytes\": 17179869184, \"compute_capability\": \"8.6\", "
                     "\"bf16\": false}]}";
  struct vl_err err = {""};
  assert_int_equal(vl_catalog_parse(text, strlen(text), &cat, &err), VL_OK);
  assert_true(cat.gpus[0].no_bf16);
  assert_false(cat.gpus[1].no_bf16);
  assert_false(cat.gpus[2].no_bf16);
  assert_true(cat.gpus[3].no_bf16);
  vl_catalog_release(&cat);
  const char *bad = "{\"gpus\": [{\"name\": \"a\", \"memory_bytes\": 17179869184, "
                    "\"compute_capability\": 8.0}]}";
  assert_int_equal(vl_catalog_parse(bad, strlen(bad), &cat, &err), VL_EKEY);
}

static size_t on_card(const struct vl_plan_result *r, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    n += !strcmp(r->c[i].gpu->name, name);
  return n;
}

/* GPT-2, 10^6 tokens of 1024 in global batches of 16, on n cards of gpus
 * and at most max of them */
static void gpt2_query(struct vl_plan_query *q, struct vl_arch *a, const struct vl_gpu *gpus,
                       size_t n, unsigned max) {
  tu_arch("data/models/gpt2.json", a);
  vl_plan_query_init(q);
  q->arch = a;
  q->base.seq = 1024;
  q->tokens = 1000000;
  q->global_batch = 16;
  q->gpus = gpus;
  q->n_gpus = n;
  q->max_gpus = max;
}

static void bf16_excludes_v100(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_gpu gpus[2] = {*vl_catalog_find(&cat, "h100-80gb"),
                           *vl_catalog_find(&cat, "v100-32gb")};
  struct vl_arch a;
  struct vl_plan_query q;
  gpt2_query(&q, &a, gpus, 2, 2);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  const enum vl_precision bf16[] = {VL_PREC_BF16, VL_PREC_AMP_BF16, VL_PREC_MIXED_BF16};
  for (int p = 0; p < 3; p++) {
    q.base.precision = bf16[p];
    struct vl_plan_result r;
    assert_int_equal(vl_plan_search(&q, &ov, &r, &err), VL_OK);
    assert_int_equal(r.n_excluded, 1);
    assert_string_equal(r.excluded[0].gpu->name, "v100-32gb");
    assert_non_null(strstr(r.excluded[0].why, "compute capability 7.0"));
    assert_non_null(strstr(r.excluded[0].why, vl_precision_name(bf16[p])));
    assert_int_equal(on_card(&r, "v100-32gb"), 0);
    assert_true(on_card(&r, "h100-80gb") > 0);
    vl_plan_release(&r);
  }
  q.base.precision = VL_PREC_AMP_FP16; /* fp16 tensor cores: planned on */
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&q, &ov, &r, &err), VL_OK);
  assert_int_equal(r.n_excluded, 0);
  assert_true(on_card(&r, "v100-32gb") > 0);
  /* 62 steps of GPT-2 on one H100: seconds and cents, not "0.0 h", "$0.00" */
  const struct vl_plan_candidate *b = &r.c[0];
  assert_true(b->hours < 1.0 / 60 && b->cost_usd < 0.01);
  char h[32], usd[32], want[32];
  vl_plan_hours_text(b->hours, h, sizeof h);
  snprintf(want, sizeof want, b->hours * 3600 >= 10 ? "%.0f s" : "%.1f s", b->hours * 3600);
  assert_string_equal(h, want);
  vl_plan_usd_text(b->cost_usd, usd, sizeof usd);
  snprintf(want, sizeof want, "%.2g cents", 100 * b->cost_usd);
  assert_string_equal(usd, want);
  vl_plan_release(&r);
  vl_catalog_release(&cat);
}

static void units_that_fit(void **state) {
  (void)state;
  char b[32];
  assert_string_equal(vl_plan_hours_text(4.5, b, sizeof b), "4.5 h");
  assert_string_equal(vl_plan_hours_text(250.26, b, sizeof b), "250 h");
  assert_string_equal(vl_plan_hours_text(0.5, b, sizeof b), "30 min");
  assert_string_equal(vl_plan_hours_text(3.1 / 60, b, sizeof b), "3.1 min");
  assert_string_equal(vl_plan_hours_text(42.0 / 3600, b, sizeof b), "42 s");
  assert_string_equal(vl_plan_hours_text(1.9 / 3600, b, sizeof b), "1.9 s");
  assert_string_equal(vl_plan_usd_text(13.534, b, sizeof b), "$13.53");
  assert_string_equal(vl_plan_usd_text(0.157, b, sizeof b), "15.7 cents");
  assert_string_equal(vl_plan_usd_text(0.0016, b, sizeof b), "0.16 cents");
  assert_string_equal(vl_plan_usd_text(0, b, sizeof b), "$0");
}

/* A plan row whose headroom is within the CUDA context's range on its card
 * (200 MiB either way, carried over from the H200 to another architecture)
 * is marked; on a card of the H200's architecture none is. The card's
 * memory is set so that the largest peak planned leaves 100 MiB. */
static void marks_the_context_edge(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  const char *names[] = {"a100-80gb", "h200"};
  for (int k = 0; k < 2; k++) {
    struct vl_gpu card = *vl_catalog_find(&cat, names[k]);
    struct vl_arch a;
    struct vl_plan_query q;
    gpt2_query(&q, &a, &card, 1, 1);
    struct vl_overheads ov;
    vl_overheads_default(&ov);
    struct vl_err err = {""};
    struct vl_plan_result r;
    assert_int_equal(vl_plan_search(&q, &ov, &r, &err), VL_OK);
    assert_true(r.n > 0);
    uint64_t top = 0;
    for (size_t i = 0; i < r.n; i++)
      if (r.c[i].peak_bytes_per_gpu > top) top = r.c[i].peak_bytes_per_gpu;
    vl_plan_release(&r);
    card.memory_bytes = (uint64_t)((double)(top + (100ull << 20)) / (1.0 - q.margin)) + 1;
    assert_int_equal(vl_plan_search(&q, &ov, &r, &err), VL_OK);
    uint64_t range = k == 0 ? 200ull << 20 : 0;
    size_t marked = 0;
    for (size_t i = 0; i < r.n; i++) {
      const struct vl_plan_candidate *c = &r.c[i];
      assert_int_equal(c->context_range_bytes, range);
      assert_true(c->headroom_bytes >= 0);
      assert_int_equal(c->context_edge, (uint64_t)c->headroom_bytes < range);
      marked += c->context_edge;
      if (c->peak_bytes_per_gpu == top)
        assert_true(llabs(c->headroom_bytes - (100ll << 20)) < (1 << 20));
    }
    assert_true(k == 0 ? marked > 0 : marked == 0);
    vl_plan_release(&r);
  }
  vl_catalog_release(&cat);
}

/* the candidate of r on `count` GPUs laid out dp x tp x pp under ZeRO-`zero`, one
 * sequence a micro-batch, nothing recomputed or offloaded */
static const struct vl_plan_candidate *layout_tp(const struct vl_plan_result *r, unsigned dp,
                                                 unsigned tp, unsigned pp, unsigned zero) {
  for (size_t i = 0; i < r->n; i++) {
    const struct vl_plan_candidate *c = &r->c[i];
    if (c->dp == dp && c->tp == tp && c->pp == pp && c->zero == zero && c->micro_batch == 1 &&
        c->checkpointing == VL_CKPT_NONE && c->offload == VL_OFFLOAD_NONE)
      return c;
  }
  return NULL;
}

static const struct vl_plan_candidate *layout(const struct vl_plan_result *r, unsigned dp,
                                              unsigned pp, unsigned zero) {
  return layout_tp(r, dp, 1, pp, zero);
}

/* Traffic is priced in the dtype it travels in, as the bill counts it: DDP
 * all-reduces gradients in the parameters' dtype (torch/csrc/distributed/c10d/
 * reducer.cpp), so fp32 and autocast (fp32 weights) send 4 bytes a gradient and
 * bf16 weights 2; ZeRO-3 gathers the weights as stored; a pipeline sends the
 * residual stream, fp32 under autocast. GPT-2 on two H200s: fp32 and amp-bf16
 * pay twice bf16's data-parallel and pipeline traffic. */
static void comm_in_the_dtypes_it_travels_in(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_arch a;
  struct vl_plan_query q;
  gpt2_query(&q, &a, vl_catalog_find(&cat, "h200"), 1, 2);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  const enum vl_precision prec[3] = {VL_PREC_BF16, VL_PREC_FP32, VL_PREC_AMP_BF16};
  double ddp[3], zero3[3], pipe[3], tp[3];
  for (int p = 0; p < 3; p++) {
    q.base.precision = prec[p];
    struct vl_plan_result r;
    assert_int_equal(vl_plan_search(&q, &ov, &r, &err), VL_OK);
    const struct vl_plan_candidate *d = layout(&r, 2, 1, 0), *z = layout(&r, 2, 1, 3),
                                   *pp = layout(&r, 1, 2, 0), *t = layout_tp(&r, 1, 2, 1, 0);
    assert_non_null(t);
    tp[p] = t->tp_comm_s;
    assert_non_null(d);
    assert_non_null(z);
    assert_non_null(pp);
    ddp[p] = d->dp_comm_s;
    zero3[p] = z->dp_comm_s;
    assert_true(pp->tp_comm_s == 0 && pp->dp_comm_s == 0);
    pipe[p] = pp->comm_s; /* the pipeline's sends alone */
    vl_plan_release(&r);
  }
  assert_true(ddp[0] > 0 && zero3[0] > ddp[0] && pipe[0] > 0);
  for (int p = 1; p < 3; p++) {
    assert_close(ddp[p], 2 * ddp[0], 1e-12, "gradients all-reduced in 4 bytes, not 2");
    assert_close(zero3[p], 2 * zero3[0], 1e-12, "ZeRO-3: and the weights gathered in 4");
    assert_close(pipe[p], 2 * pipe[0], 1e-12, "pipeline: the residual stream in 4 bytes");
  }
  /* tensor parallelism: forward's two all-reduces a layer in the compute dtype,
   * backward's two in the norms' output dtype (fp32 under autocast) */
  assert_close(tp[1], 2 * tp[0], 1e-12, "fp32: every all-reduce in 4 bytes");
  assert_close(tp[2], 1.5 * tp[0], 1e-12, "AMP: forward's in 2 bytes, backward's in 4");
  /* b x s x h, forward and backward, over one boundary, 16 micro-batches in bf16 */
  double link = q.gpus->link_gb_s * 1e9;
  assert_close(pipe[0], 2.0 * 16 * 1024 * 768 * 2 / link, 1e-12, "bf16 pipeline sends");
  vl_catalog_release(&cat);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(catalog_bf16), cmocka_unit_test(bf16_excludes_v100),
      cmocka_unit_test(units_that_fit), cmocka_unit_test(marks_the_context_edge),
      cmocka_unit_test(comm_in_the_dtypes_it_travels_in)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
