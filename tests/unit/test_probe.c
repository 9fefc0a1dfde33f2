/* lib/measure/framework.c and probe_events.c: the probe's events read from
 * a record and analysed. tests/data/records/probe-synthetic.jsonl: two
 * ranks, six steps of 6 x 10 ms phases, steps 1-3 sampled; P = 100 MiB of
 * parameters, S = 200 MiB of optimizer state (from step 2), G = 100 MiB of
 * gradients, A = 400 MiB saved, C = 50 MiB autocast copies, O = 30 MiB of
 * outputs, 32 MiB cuBLAS workspaces, 2 MiB x step that nothing names (a
 * leak); the peak is step 2's backward, rank 1 peaks 100 MiB higher. */
#include "testutil.h"
#include "vramledger/doctor.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

#define M (1ull << 20)
static const uint64_t P = 100 * M, S = 200 * M, G = 100 * M, A = 400 * M, C = 50 * M, O = 30 * M,
                      WS = 32 * M;

/* A record from tests/data/records/ (path from the source root), read. */
static void load_file(const char *path, struct vl_record *r) {
  size_t len = 0;
  char *text = tu_read(path, &len);
  struct vl_err err = {""};
  assert_int_equal(vl_record_parse(text, len, r, &err), VL_OK);
  free(text);
}

static void load(struct vl_record *r) { load_file("tests/data/records/probe-synthetic.jsonl", r); }

static void events_are_read(void **state) {
  (void)state;
  struct vl_record r;
  load(&r);
  assert_int_equal(r.n_probes, 2);
  assert_int_equal(r.n_phases, 2 * 6 * 6); /* steps 4-6 from their step events */
  assert_int_equal(r.n_steps, 12);
  assert_string_equal(r.probes[0].torch, "2.11.0");
  assert_int_equal(r.probes[0].cublas_workspace_bytes, WS);
  const struct vl_rec_phase *p = &r.phases[1]; /* step 1, forward */
  assert_string_equal(p->phase, "forward");
  assert_true(p->has_bill && p->acts_known && p->has_alloc);
  assert_int_equal(p->bill[VL_BILL_ACTIVATIONS], A);
  assert_int_equal(p->bill[VL_BILL_OUTPUTS], O);
  assert_false(r.phases[6 * 4].has_bill); /* step 5 is not sampled */
  assert_false(r.phases[6 * 4].has_alloc);
  assert_string_equal(r.phases[6 * 4].phase, "idle");
  assert_int_equal(r.steps[0].n_modules, 2);
  assert_string_equal(r.steps[0].modules[0].name, "model.h.0.mlp");
  vl_record_release(&r);
}

static void bill_at_the_peak(void **state) {
  (void)state;
  struct vl_record r;
  load(&r);
  struct vl_probe_layer f;
  assert_int_equal(vl_probe_analyze(&r, &f), VL_OK);
  assert_true(f.present && f.cuda);
  assert_int_equal(f.main_pid, 10);
  assert_int_equal(f.n_ranks, 2);
  assert_int_equal(f.n_steps, 6);
  /* step 2's backward: everything held at the end of the loss, the
   * gradients appearing, 300 MiB of temporaries, and the 4 MiB leak */
  uint64_t peak = P + S + A + C + 4 * M + 2 * WS + G + 300 * M;
  assert_int_equal(f.peak_allocated, peak);
  assert_int_equal(f.peak_step, 2);
  assert_string_equal(f.peak_phase, "backward");
  /* the peak apart by phase: the main rank's backward (rank 1's is 100 MiB
   * higher, not taken), and the largest of the main rank's pre_step and
   * optimizer peaks (step 3's optimizer in the file: 520 MiB, above its
   * idle phases but below every backward) */
  assert_int_equal(f.peak_fwd_bwd, peak);
  assert_int_equal(f.peak_optimizer, 520 * M);
  assert_true(f.has_bill);
  assert_int_equal(f.bill_step, 2);
  assert_string_equal(f.bill_taken_at, "start");
  assert_int_equal(f.bill[VL_BILL_PARAMETERS], P);
  assert_int_equal(f.bill[VL_BILL_GRADIENTS], 0);
  assert_int_equal(f.bill[VL_BILL_OPTIMIZER_STATES], S);
  assert_int_equal(f.bill[VL_BILL_ACTIVATIONS], A);
  assert_int_equal(f.bill[VL_BILL_AUTOCAST], C);
  assert_int_equal(f.cublas_workspaces, 2 * WS);
  assert_int_equal(f.transient, 4 * M + G + 300 * M);
  /* every boundary of step 2 leaves exactly the leak unnamed, less the
   * 1 MiB the allocator's blocks hold beyond the bytes asked for (the
   * record's requested), named as rounding */
  assert_int_equal(f.n_ledger, 6);
  for (unsigned i = 0; i < f.n_ledger; i++) {
    assert_int_equal(f.ledger[i].rounding, M);
    assert_int_equal(f.ledger[i].unnamed, (int64_t)(3 * M));
  }
  /* the model loaded: parameters and step 1's 2 MiB; the first forward */
  assert_int_equal(f.load_bytes, P + 2 * M);
  assert_int_equal(f.first_forward_bytes, A + C + O + WS);
  /* growth from steps 4, 5, 6: 2 MiB a step */
  assert_int_equal(f.growth_steps, 3);
  assert_true(fabs(f.growth_bytes_per_step - 2.0 * M) < 1);
  /* six 10 ms phases a step; 4096 tokens */
  assert_true(fabs(f.step_s_median - 0.06) < 1e-12);
  assert_true(fabs(f.tokens_per_s - 4096 / 0.06) < 1e-6);
  assert_true(fabs(f.probe_share_light - 0.001) < 1e-12);
  assert_true(fabs(f.probe_share_sampled - 0.01) < 1e-12);
  /* two ranks 100 MiB apart */
  assert_int_equal(f.n_rank_peaks, 2);
  assert_true(fabs(f.rank_imbalance - 100.0 * M / (double)(peak + 100 * M)) < 1e-12);
  /* the ladder: NVML and the interposer see both ranks (one process tree),
   * so reserved and allocated are both ranks' peaks summed */
  uint64_t res = f.ranks[0].peak_reserved + f.ranks[1].peak_reserved;
  uint64_t alloc = f.ranks[0].peak_allocated + f.ranks[1].peak_allocated;
  assert_int_equal(alloc, 2 * peak + 100 * M);
  struct vl_run_summary s = {.peak_process_bytes = res + 2048 * M,
                             .peak_cuda_alloc_bytes = res + 1024 * M};
  vl_probe_ladder(&f, &s);
  assert_true(f.has_ladder);
  assert_int_equal(f.ladder_ranks, 2);
  /* who asked the driver, outside PyTorch's allocator (libc10_cuda): the
   * most each library held at once, both ranks' processes summed */
  assert_int_equal(f.n_outside, 2);
  assert_string_equal(f.outside[0].name, "libcublas.so.13");
  assert_int_equal(f.outside[0].bytes, 128 * M);
  assert_string_equal(f.outside[1].name, "libnccl.so.2");
  assert_int_equal(f.outside[1].bytes, 10 * M);
  assert_int_equal(f.ladder[2], res);
  assert_int_equal(f.ladder[3], alloc);
  assert_int_equal(f.gap_context, 1024 * M);
  assert_int_equal(f.gap_outside, 1024 * M);
  assert_int_equal(f.gap_cached, res - alloc);
  assert_int_equal(f.gap_fragmented, 8 * M);
  vl_record_release(&r);
}

static void no_probe(void **state) {
  (void)state;
  struct vl_record r;
  load_file("tests/data/records/sample.jsonl", &r);
  struct vl_probe_layer f;
  assert_int_equal(vl_probe_analyze(&r, &f), VL_OK);
  assert_false(f.present);
  assert_false(f.has_bill);
  vl_record_release(&r);
}

static bool found(const struct vl_diag *d, int n, enum vl_diag_kind k) {
  for (int i = 0; i < n; i++)
    if (d[i].kind == k) return true;
  return false;
}

/* Each rule fires on its evidence and not without it. */
static void doctor_rules(void **state) {
  (void)state;
  struct vl_record r;
  memset(&r, 0, sizeof r);
  struct vl_run_summary s = {.max_tree_procs = 1};
  struct vl_probe_layer f = {.present = true, .cuda = true, .n_ranks = 1};
  f.peak_allocated = 10000 * M;
  f.peak_reserved = 10500 * M;
  struct vl_diag d[VL_MAX_DIAGS];
  int n = vl_doctor(&r, &s, &f, d);
  assert_int_equal(n, 0); /* a healthy run */
  /* DataLoader workers with contexts: 3 processes, 1 rank */
  s.max_tree_procs = 3;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_EXTRA_CONTEXTS));
  s.max_tree_procs = 1;
  /* a leak: 15 MiB a step over 5 steps (60 MiB > 0.5 % of 10000 MiB) */
  f.growth_steps = 5;
  f.growth_bytes_per_step = 10.0 * M;
  f.growth_total = 60 * M;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_LEAK));
  f.growth_total = 40 * M; /* under 0.5 % of the peak: noise */
  assert_false(found(d, vl_doctor(&r, &s, &f, d), VL_D_LEAK));
  f.growth_steps = 0;
  /* fragmentation: 30 % cached free */
  f.peak_reserved = 14300 * M;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_FRAGMENTATION));
  f.peak_reserved = 10500 * M;
  /* the peak in pre_step: clipping temporaries */
  snprintf(f.peak_phase, sizeof f.peak_phase, "pre_step");
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_CLIP_PEAK));
  f.peak_phase[0] = '\0';
  /* optimizer temporaries: 30 % of the peak */
  f.has_bill = true;
  snprintf(f.bill_phase, sizeof f.bill_phase, "optimizer");
  f.transient = 3000 * M;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_OPTIMIZER_PEAK));
  f.transient = 1000 * M;
  assert_false(found(d, vl_doctor(&r, &s, &f, d), VL_D_OPTIMIZER_PEAK));
  /* two copies of every weight under autocast */
  f.bill[VL_BILL_PARAMETERS] = 1000 * M;
  f.bill[VL_BILL_AUTOCAST] = 1000 * M;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_CASTS));
  f.bill[VL_BILL_AUTOCAST] = 500 * M; /* one half-precision copy: expected */
  assert_false(found(d, vl_doctor(&r, &s, &f, d), VL_D_CASTS));
  f.alloc_retries = 2;
  f.reserved_drops = 4;
  f.n_rank_peaks = 2;
  f.rank_imbalance = f.steady_rank_imbalance = 0.06;
  n = vl_doctor(&r, &s, &f, d);
  assert_true(found(d, n, VL_D_ALLOC_RETRIES));
  assert_true(found(d, n, VL_D_EMPTY_CACHE));
  assert_true(found(d, n, VL_D_RANK_IMBALANCE));
  f.present = false;
  n = vl_doctor(&r, &s, &f, d);
  assert_int_equal(n, 1);
  assert_int_equal(d[0].kind, VL_D_NO_PROBE);
  assert_string_equal(vl_diag_id(VL_D_LEAK), "VL-D004");
  assert_string_equal(vl_diag_slug(VL_D_LEAK), "leak");
}

/* DDP's first buckets kept into step 2 on one rank of two, a real record
 * (GPT-2, AMP, AdamW, 4 x 512, bench/gpu/jobs/parallel_jobs.py data --mode ddp --steps 6
 * under `vramledger run` on 2 H200s:
 * bench/results/ddp-rebuild/raw.jsonl:ddp-under-run/, run 2; its ranks'
 * max_memory_allocated() 5,777,105,920 and 5,279,681,024 B): found on rank 1 with the parameters'
 * bytes, a doctor finding of its own, and no imbalance, since that is all
 * that sets the ranks apart. */
static void ddp_first_buckets_on_h200(void **state) {
  (void)state;
  struct vl_record r;
  load_file("tests/data/records/h200x2-gpt2-ddp-kept-rank1.jsonl", &r);
  struct vl_probe_layer f;
  assert_int_equal(vl_probe_analyze(&r, &f), VL_OK);
  assert_int_equal(f.n_rank_peaks, 2);
  assert_int_equal(f.ddp_kept_ranks, 1);
  const uint64_t params = f.bill[VL_BILL_PARAMETERS];
  assert_true(params > 470 * M && params < 480 * M); /* GPT-2's 124 M in fp32 */
  for (unsigned k = 0; k < 2; k++) {
    const struct vl_fw_rank *x = &f.ranks[k];
    if (x->rank == 1) {
      assert_int_equal(x->peak_allocated, 5777105920ull);
      assert_true(x->ddp_step2_extra > 0.95 * (double)params &&
                  x->ddp_step2_extra < 1.05 * (double)params);
      assert_int_equal(x->steady_peak_allocated, x->peak_allocated - x->ddp_step2_extra);
    } else {
      assert_int_equal(x->peak_allocated, 5279681024ull);
      assert_int_equal(x->ddp_step2_extra, 0);
    }
  }
  assert_true(f.rank_imbalance > 0.08);
  assert_true(f.steady_rank_imbalance < 0.01);
  /* each rank's own bill at its peak, side by side: the same categories,
   * rank 1's transient holding the kept buckets */
  const struct vl_fw_rank *r0 = f.ranks[0].rank == 0 ? &f.ranks[0] : &f.ranks[1];
  const struct vl_fw_rank *r1 = r0 == &f.ranks[0] ? &f.ranks[1] : &f.ranks[0];
  assert_true(r0->has_bill && r1->has_bill);
  assert_int_equal(r0->bill_step, 2);
  assert_int_equal(r1->bill_step, 2);
  for (int i = 0; i < VL_BILL_N; i++)
    assert_true(r1->bill[i] == r0->bill[i] ||
                fabs((double)r1->bill[i] - (double)r0->bill[i]) < 0.01 * (double)r0->bill[i]);
  assert_int_equal(r0->bill[VL_BILL_COMM], params); /* DDP's buckets: one fp32 copy */
  assert_true(fabs((double)(r1->transient - r0->transient) - (double)r1->ddp_step2_extra) <
              0.01 * (double)params);
  struct vl_run_summary s = {0};
  struct vl_diag d[VL_MAX_DIAGS];
  int n = vl_doctor(&r, &s, &f, d);
  assert_true(found(d, n, VL_D_DDP_FIRST_BUCKETS));
  assert_false(found(d, n, VL_D_RANK_IMBALANCE));
  for (int i = 0; i < n; i++)
    if (d[i].kind == VL_D_DDP_FIRST_BUCKETS) {
      assert_int_equal((int)d[i].b, 1);
      assert_string_equal(d[i].text, "1");
    }
  /* a rank truly apart besides: the imbalance is reported too */
  f.steady_rank_imbalance = 0.06;
  assert_true(found(d, vl_doctor(&r, &s, &f, d), VL_D_RANK_IMBALANCE));
  /* a second-step bump unlike the parameters' size is not DDP's buckets:
   * the same record with rank 1's step 2 peak 0.5 x P higher only */
  for (size_t i = 0; i < r.n_steps; i++)
    if (r.steps[i].rank == 1 && r.steps[i].step == 2)
      r.steps[i].peak_allocated = 5279681024ull + params / 2;
  assert_int_equal(vl_probe_analyze(&r, &f), VL_OK);
  assert_int_equal(f.ddp_kept_ranks, 0);
  assert_false(found(d, vl_doctor(&r, &s, &f, d), VL_D_DDP_FIRST_BUCKETS));
  vl_record_release(&r);
}

/* Pipeline stages under `vramledger run` (GPT-2, 1F1B over 2 H200s, 8 x
 * 512 in 4 micro-batches, bf16, AdamW: bench/gpu/jobs/parallel_jobs.py pipeline; bench/results/
 * ddp-rebuild/pp-fsdp-under-run/): the last stage keeps every
 * micro-batch's logits, so the ranks are apart, and the doctor names the
 * part of the bill that sets them apart and the pipeline's fix. */
static void pipeline_stages_side_by_side(void **state) {
  (void)state;
  struct vl_record r;
  load_file("tests/data/records/h200x2-gpt2-pp-1f1b.jsonl", &r);
  struct vl_probe_layer f;
  assert_int_equal(vl_probe_analyze(&r, &f), VL_OK);
  assert_int_equal(f.n_rank_peaks, 2);
  assert_int_equal(f.ddp_kept_ranks, 0);
  const struct vl_fw_rank *s0 = f.ranks[0].rank == 0 ? &f.ranks[0] : &f.ranks[1];
  const struct vl_fw_rank *s1 = s0 == &f.ranks[0] ? &f.ranks[1] : &f.ranks[0];
  /* each rank's own max_memory_allocated() (parallel_jobs.py pipeline's lines) */
  assert_int_equal(s0->peak_allocated, 1326458880ull);
  assert_int_equal(s1->peak_allocated, 2041814016ull);
  assert_true(s0->has_bill && s1->has_bill);
  /* half the blocks each: parameters within 2 %; the logits on the last */
  assert_true(
      fabs((double)s0->bill[VL_BILL_PARAMETERS] / (double)s1->bill[VL_BILL_PARAMETERS] - 1) < 0.02);
  assert_true(s1->bill[VL_BILL_OUTPUTS] > 300 * M);
  assert_true(s0->bill[VL_BILL_OUTPUTS] < 10 * M);
  struct vl_run_summary s = {0};
  struct vl_diag d[VL_MAX_DIAGS];
  int n = vl_doctor(&r, &s, &f, d);
  const struct vl_diag *im = NULL;
  for (int i = 0; i < n; i++)
    if (d[i].kind == VL_D_RANK_IMBALANCE) im = &d[i];
  assert_non_null(im);
  assert_int_equal(im->part, VL_BILL_OUTPUTS);
  assert_int_equal(im->rank_hi, 1);
  assert_int_equal(im->rank_lo, 0);
  assert_true(im->c > 300.0 * M);
  vl_record_release(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(events_are_read),
                                     cmocka_unit_test(bill_at_the_peak),
                                     cmocka_unit_test(no_probe),
                                     cmocka_unit_test(doctor_rules),
                                     cmocka_unit_test(ddp_first_buckets_on_h200),
                                     cmocka_unit_test(pipeline_stages_side_by_side)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
