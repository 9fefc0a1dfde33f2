/* Planner reference tests: Llama-2 pretraining GPU-hours (model card:
 * 184,320 / 368,640 / 1,720,320 A100-80GB hours for 7B / 13B / 70B on 2 T
 * tokens) within 10 / 10 / 15 % with the default MFU, and what makes up the
 * difference (llama2_gpu_hours); every feasible plan fits by
 * `estimate`; a published cost table's arithmetic. */
#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/plan.h"
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

/* What each test searches with: an architecture, a query over it, the
 * default overheads, and where an error goes. */
struct fixture {
  struct vl_arch arch;
  struct vl_plan_query q;
  struct vl_overheads ov;
  struct vl_err err;
};

/* *f for the model of CONFIG trained in PRECISION at SEQ tokens a sequence:
 * TOKENS tokens in steps of GLOBAL_BATCH sequences, on up to MAX_GPUS cards
 * of GPU (a catalog name). A test sets what else differs in f->q. */
static void fixture_init(struct fixture *f, const char *config, enum vl_precision precision,
                         uint64_t seq, uint64_t tokens, uint64_t global_batch, const char *gpu,
                         unsigned max_gpus) {
  tu_arch(config, &f->arch);
  vl_plan_query_init(&f->q);
  f->q.arch = &f->arch;
  f->q.base.precision = precision;
  f->q.base.seq = seq;
  f->q.tokens = tokens;
  f->q.global_batch = global_batch;
  f->q.gpus = vl_catalog_find(&cat, gpu);
  f->q.n_gpus = 1;
  f->q.max_gpus = max_gpus;
  f->q.mfu_given = true; /* the tests of the 6ND rule at an MFU; priced_steps: the default */
  vl_overheads_default(&f->ov);
  f->err = (struct vl_err){""};
}

static void llama2_gpu_hours(void **state) {
  (void)state;
  /* What the model card counts and what plan bills differ in one way: the
   * card's GPU-hours are wall-clock x GPUs, so the MFU they imply (6ND over
   * hours x 312 TFLOP/s, A100 bf16 dense: 0.39 / 0.38 / 0.43 to two
   * digits) is end to end and holds whatever communication Meta's jobs did
   * not hide; plan applies one default MFU (0.40) to compute alone and adds
   * the communication it models (TP all-reduces on the critical path,
   * data-parallel traffic beyond the last backward). So
   *   plan / card = (card's MFU / 0.40) / (1 - plan's communication share)
   * and each factor is checked on its own: compute alone, re-expressed at
   * the card's MFU, equals the card within the rounding of the printed MFU
   * (0.005 / MFU; this checks the parameter count and the 6ND rule against
   * the published hours), and the communication plan adds is under 5 % of
   * a step. The end-to-end tolerance is what those allow, derived:
   * 7B 4.0 %, 13B 6.3 % (plan below the card: their MFU is under 0.40),
   * 70B 14.5 % (0.43 / 0.40 is +7.5 %, and TP4 with ZeRO-3 across nodes
   * puts 4.7 % of the step in all-reduces): 10 % cannot hold for 70B with
   * one MFU for all three, and the 15 % it had is this bound rounded up. */
  static const struct {
    const char *model;
    double hours, mfu;
  } rows[] = {{"data/models/llama-2-7b.json", 184320, 0.39},
              {"data/models/llama-2-13b.json", 368640, 0.38},
              {"data/models/llama-2-70b.json", 1720320, 0.43}};
  const double comm_most = 0.05;
  for (size_t i = 0; i < 3; i++) {
    struct fixture f; /* steps of 1024 x 4096: 4 M tokens, as Llama 2 */
    fixture_init(&f, rows[i].model, VL_PREC_MIXED_BF16, 4096, 2000000000000ull, 1024, "a100-80gb",
                 2048);
    f.q.base.optimizer = VL_OPT_ADAM;
    struct vl_plan_result r;
    assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
    assert_true(r.n > 0);
    const struct vl_plan_candidate *best = &r.c[0];
    double rounding = 0.005 / rows[i].mfu, ratio = rows[i].mfu / f.q.mfu;
    double compute_hours = best->compute_s * (double)r.steps * best->count / 3600.0;
    assert_close(compute_hours / ratio, rows[i].hours, rounding,
                 "  compute alone at the card's MFU");
    double comm = 1.0 - best->compute_s / best->step_s;
    printf("  communication plan adds: %.1f %% of a step (under %.0f %%)\n", 100 * comm,
           100 * comm_most);
    assert_true(comm >= 0 && comm < comm_most);
    double lo = (1 - rounding) * ratio - 1, hi = (1 + rounding) * ratio / (1 - comm_most) - 1;
    assert_close(best->hours * best->count, rows[i].hours, fmax(fabs(lo), fabs(hi)), rows[i].model);
    /* every feasible candidate fits by the estimator on its card (the
     * card's cuBLAS workspaces, as `estimate --gpu` bills them), with the
     * margin, in either outcome of DDP's bucket rebuild */
    for (size_t k = 0; k < r.n; k += 1 + r.n / 50) {
      struct vl_job j;
      vl_plan_candidate_job(&f.q, &r.c[k], &j);
      struct vl_overheads ov = f.ov;
      vl_overheads_for_gpu(&ov, r.c[k].gpu);
      struct vl_bill b;
      assert_int_equal(vl_bill_compute(&f.arch, &j, &ov, &b, &f.err), VL_OK);
      assert_int_equal(vl_bill_budget_bytes(&b), r.c[k].peak_bytes_per_gpu);
      assert_true((double)vl_bill_budget_bytes(&b) <= 0.9 * (double)r.c[k].gpu->memory_bytes);
    }
    vl_plan_release(&r);
  }
}

static void more_gpus_cost_communication(void **state) {
  (void)state;
  /* small steps (8 sequences): the all-reduce shows; L40S: PCIe */
  struct fixture f;
  fixture_init(&f, "data/models/llama-2-7b.json", VL_PREC_BF16, 2048, 1000000000, 8, "l40s", 8);
  f.q.base.checkpointing = VL_CKPT_NONE;
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  double best2 = 0, best8 = 0;
  for (size_t i = 0; i < r.n; i++) { /* the same strategy at 2 and at 8 GPUs */
    const struct vl_plan_candidate *c = &r.c[i];
    if (c->tp != 1 || c->zero != 3 || c->checkpointing != VL_CKPT_FULL || c->micro_batch != 1)
      continue;
    if (c->count == 2) best2 = c->hours;
    if (c->count == 8) best8 = c->hours;
  }
  assert_true(best2 > 0 && best8 > 0);
  /* 4x the GPUs, less than 4x faster: diminishing returns over PCIe */
  printf("  l40s: 2 GPUs %.1f h, 8 GPUs %.1f h, speed-up %.2f\n", best2, best8, best2 / best8);
  assert_true(best2 / best8 < 4.0);
  vl_plan_release(&r);
}

/* With LoRA the planner tries a 4-bit base too: a 70B model fits one 80 GB
 * card only as QLoRA (its paper's point: 65B on one 48 GB GPU); a QLoRA
 * step is the LoRA step plus the dequantisation traffic (2.5 B a 4-bit
 * weight a pass at HBM bandwidth), or the LoRA step x --qlora-slowdown. */
static void qlora_beside_lora(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/llama-2-70b.json", VL_PREC_BF16, 2048, 10000000, 16, "h100-80gb",
               1);
  f.q.base.lora_rank = 16;
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.n > 0);
  for (size_t i = 0; i < r.n; i++) {
    assert_true(r.c[i].qlora); /* 16-bit LoRA needs 129 GiB of states */
    struct vl_job j;
    vl_plan_candidate_job(&f.q, &r.c[i], &j);
    struct vl_bill b;
    tu_bill(&f.arch, &j, &b);
    assert_int_equal(b.total_bytes, r.c[i].peak_bytes_per_gpu);
  }
  vl_plan_release(&r);

  /* 7B: both fit; pair each QLoRA candidate with its LoRA twin */
  tu_arch("data/models/llama-2-7b.json", &f.arch);
  /* the layers' linear weights: 32 x (4 x 4096^2 + 3 x 4096 x 11008) */
  double pq = 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008);
  for (int slow = 0; slow < 2; slow++) {
    f.q.qlora_slowdown = slow ? 2.0 : 0.0;
    assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
    int pairs = 0;
    for (size_t i = 0; i < r.n; i++) {
      const struct vl_plan_candidate *ql = &r.c[i];
      if (!ql->qlora) continue;
      for (size_t k = 0; k < r.n; k++) {
        const struct vl_plan_candidate *lo = &r.c[k];
        if (lo->qlora || lo->micro_batch != ql->micro_batch ||
            lo->checkpointing != ql->checkpointing || lo->offload != ql->offload)
          continue;
        double passes = ql->checkpointing == VL_CKPT_FULL ? 3 : 2;
        double deq = (double)ql->grad_accum * passes * pq * 2.5 / (f.q.gpus->hbm_gb_s * 1e9);
        assert_close(ql->dequant_s, deq, 1e-9, "dequantisation traffic");
        assert_close(ql->step_s, slow ? 2.0 * lo->step_s : lo->step_s + deq, 1e-9,
                     "QLoRA step = LoRA step + dequantisation, or x the slowdown");
        assert_true(ql->peak_bytes_per_gpu < lo->peak_bytes_per_gpu);
        pairs++;
      }
    }
    assert_true(pairs >= 4);
    vl_plan_release(&r);
  }
}

/* Equal costs (GPT-2's gradients hide behind compute at every count) go to
 * the faster plan (a budget owner pays the same for the hours saved), and
 * the best is on its own time/cost front; the FLOPs header follows the
 * best's job (4N a token with LoRA, as its time). */
static void ties_to_faster(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/gpt2.json", VL_PREC_BF16, 1024, 1000000000, 64, "h200", 8);
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.n > 1);
  assert_int_equal(r.c[0].count, 8);
  for (size_t i = 1; i < r.n; i++)
    if (r.c[i].cost_usd <= r.c[0].cost_usd * 1.001) assert_true(r.c[i].hours >= r.c[0].hours);
  assert_true(r.c[0].pareto);
  double full = r.flops;
  vl_plan_release(&r);
  f.q.base.lora_rank = 16;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.n > 0);
  double per_token = r.c[0].checkpointing == VL_CKPT_FULL ? 6.0 : 4.0;
  assert_close(r.flops, full * per_token / 6.0, 1e-3, "LoRA FLOPs: 4N a token (+2N recomputed)");
  vl_plan_release(&r);
}

/* A published GPU cost table (its §3.1): cost per card = price x hours x
 * utilisation x memory share;
 * the 2 x A100 row: 3.5 x 26 x 0.72 x 0.603 = 39.5, x 2 = 79.0; the 4 x A100
 * row: 3.5 x 14 x 0.68 x 0.603 = 20.1 (printed 20.3). The 1 x A100 row's
 * 32.8 does not follow from its own inputs (3.5 x 48 x 0.65 x 0.603 = 65.8);
 * the table's 46.2 = 79.0 - 32.8 uses the printed value. */
static void published_cost_table(void **state) {
  (void)state;
  double two = 3.5 * 26 * 0.72 * 0.603, four = 3.5 * 14 * 0.68 * 0.603;
  assert_close(two, 39.5, 0.001, "2 x A100, per card");
  assert_close(2 * two, 79.0, 0.001, "2 x A100, total");
  assert_close(four, 20.3, 0.02, "4 x A100, per card (printed 20.3)");
  assert_close(2 * two - 32.8, 46.2, 0.002, "what the 3-hour buffer buys");
}

/* Tensor parallelism pays its all-reduces on the critical path: 4 a layer
 * (2 forward, 2 backward) of the b x s x h activations, each a ring moving
 * 2(t-1)/t of the bytes over NVLink (Shoeybi et al. 2019 section 3;
 * Narayanan et al. 2021 section 3.2). GPT-2's layers are small, so on the
 * same four H200s TP4 is slower than four DDP ranks, whose gradient
 * all-reduce hides behind backward. */
static void tp_pays_its_allreduces(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/gpt2.json", VL_PREC_BF16, 1024, 1000000000, 64, "h200", 4);
  const struct vl_gpu *h200 = f.q.gpus;
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  const struct vl_plan_candidate *tp4 = NULL, *ddp4 = NULL;
  for (size_t i = 0; i < r.n; i++) {
    const struct vl_plan_candidate *c = &r.c[i];
    if (c->count != 4 || c->micro_batch != 16 || c->checkpointing != VL_CKPT_NONE ||
        c->offload != VL_OFFLOAD_NONE || c->pp != 1 || c->zero)
      continue;
    if (c->tp == 4) tp4 = c;
    if (c->tp == 1) ddp4 = c;
  }
  assert_non_null(tp4);
  assert_non_null(ddp4);
  /* 4 all-reduces x 12 layers x 4 micro-batches of 16 x 1024 x 768 bf16
   * elements, 2 x 3/4 of them each over 450 GB/s */
  double bytes = 16.0 * 1024 * 768 * 2;
  double want = 4.0 * 12 * 4 * 2.0 * 3 / 4 * bytes / (h200->link_gb_s * 1e9);
  assert_close(tp4->tp_comm_s, want, 1e-9, "TP4 all-reduces a step");
  assert_close(tp4->step_s, tp4->compute_s + want, 1e-9, "TP on the critical path");
  assert_true(ddp4->tp_comm_s == 0);
  assert_true(ddp4->dp_comm_s > 0 && ddp4->dp_hidden_s == ddp4->dp_comm_s);
  assert_close(ddp4->step_s, ddp4->compute_s, 1e-9, "DDP's gradients hidden behind backward");
  printf("  gpt2 on 4 x h200: TP4 %.1f ms a step, DDP x 4 %.1f ms\n", 1e3 * tp4->step_s,
         1e3 * ddp4->step_s);
  assert_true(tp4->step_s > 1.3 * ddp4->step_s);
  assert_true(tp4->cost_usd > ddp4->cost_usd);
  assert_true(r.c[0].tp == 1); /* the ranking follows the time */
  vl_plan_release(&r);
}

/* The data-parallel gradient all-reduce hides behind the last micro-batch's
 * backward up to its time; what is left is added. Llama-2 7B's 13 GB of
 * bf16 gradients over PCIe take longer than one micro-batch's backward. */
static void dp_exposed_beyond_backward(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/llama-2-7b.json", VL_PREC_BF16, 2048, 1000000000, 8, "l40s", 8);
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  int seen = 0;
  for (size_t i = 0; i < r.n; i++) {
    const struct vl_plan_candidate *c = &r.c[i];
    if (c->dp < 2 || c->offload != VL_OFFLOAD_NONE || c->qlora) continue;
    double factor = c->checkpointing == VL_CKPT_FULL ? 8.0 : 6.0;
    double bubble = c->pp > 1 ? (double)(c->grad_accum + c->pp - 1) / (double)c->grad_accum : 1;
    double backward = c->compute_s / bubble / (double)c->grad_accum * (factor - 2) / factor;
    double hidden = c->dp_comm_s < backward ? c->dp_comm_s : backward;
    assert_true(fabs(c->dp_hidden_s - hidden) <= 1e-9 * hidden); /* up to the last backward */
    seen += c->dp_comm_s > backward;
  }
  assert_true(seen > 0);
  vl_plan_release(&r);
}

/* Without an MFU, each candidate's compute is its job's step priced kernel
 * by kernel (vl_step_time), and among plans whose cost is within 1 % of
 * the best's the best is the fastest. */
static void priced_steps(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/qwen2-0.5b.json", VL_PREC_BF16, 1024, 100000000, 32, "h100-80gb",
               8);
  f.q.mfu_given = false;
  f.q.base.optimizer = VL_OPT_ADAMW;
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.n > 0);
  int singles = 0;
  for (size_t i = 0; i < r.n; i++) {
    const struct vl_plan_candidate *c = &r.c[i];
    if (c->count != 1 || c->offload != VL_OFFLOAD_NONE) continue;
    struct vl_job j;
    vl_plan_candidate_job(&f.q, c, &j);
    struct vl_step_time t;
    assert_int_equal(vl_step_time(&f.arch, &j, c->gpu, &t, NULL), VL_OK);
    assert_true(fabs(c->compute_s - t.step_s) <= 1e-12 * t.step_s);
    singles++;
  }
  assert_true(singles > 0);
  const struct vl_plan_candidate *best = &r.c[0];
  for (size_t i = 1; i < r.n; i++)
    if (r.c[i].cost_usd <= best->cost_usd * 1.001) assert_true(r.c[i].hours >= best->hours);
  vl_plan_release(&r);
}

/* Costs within 1 % of each other are one cost: the best is the fastest
 * plan whose net value is within 1 % of the least cost's, wherever the two
 * fall (Llama-3-8B LoRA on up to 8 H100s: 1 GPU at $13.27 and 4.4 h, 8 at
 * $13.38 and 33 min; fixed 1 % bins once split them and chose the
 * slowest). */
static void fastest_within_one_percent(void **state) {
  (void)state;
  struct fixture f;
  fixture_init(&f, "data/models/llama-3-8b.json", VL_PREC_BF16, 2048, 200000000, 64, "h100-80gb",
               8);
  f.q.mfu_given = false;
  f.q.base.lora_rank = 16;
  struct vl_plan_result r;
  assert_int_equal(vl_plan_search(&f.q, &f.ov, &r, &f.err), VL_OK);
  assert_true(r.n > 1);
  double least = -INFINITY;
  for (size_t i = 0; i < r.n; i++)
    least = fmax(least, r.c[i].net_value_usd);
  const struct vl_plan_candidate *best = &r.c[0];
  assert_true(least - best->net_value_usd <= 0.01 * fabs(least));
  int near = 0;
  for (size_t i = 1; i < r.n; i++)
    if (least - r.c[i].net_value_usd <= 0.01 * fabs(least)) {
      assert_true(r.c[i].hours >= best->hours);
      near++;
    }
  assert_true(near > 0);
  assert_true(best->count > 1); /* the single GPU is the least cost, not the fastest near it */
  vl_plan_release(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(llama2_gpu_hours),
                                     cmocka_unit_test(more_gpus_cost_communication),
                                     cmocka_unit_test(qlora_beside_lora),
                                     cmocka_unit_test(published_cost_table),
                                     cmocka_unit_test(ties_to_faster),
                                     cmocka_unit_test(fastest_within_one_percent),
                                     cmocka_unit_test(tp_pays_its_allreduces),
                                     cmocka_unit_test(dp_exposed_beyond_backward),
                                     cmocka_unit_test(priced_steps)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
