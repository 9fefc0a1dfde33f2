/* The step-time model (lib/decide/steptime.c, docs/model.md 13.1): its
 * mechanisms one by one, each checked by the direction and size the
 * measured tables imply, and its refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "model/kernel_tables.h"
#include "vramledger/catalog.h"
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

/* job j of architecture a on the catalog's card gpu */
static struct vl_step_time timed_arch(const struct vl_arch *a, const struct vl_job *j,
                                      const char *gpu) {
  struct vl_step_time t;
  struct vl_err err = {""};
  assert_int_equal(vl_step_time(a, j, vl_catalog_find(&cat, gpu), &t, &err), VL_OK);
  return t;
}

static struct vl_step_time timed(const char *config, const struct vl_job *j, const char *gpu) {
  struct vl_arch a;
  tu_arch(config, &a);
  return timed_arch(&a, j, gpu);
}

static struct vl_job job(enum vl_precision p, uint64_t batch, uint64_t seq) {
  struct vl_job j;
  vl_job_init(&j);
  j.precision = p;
  j.optimizer = VL_OPT_ADAMW;
  j.batch = batch;
  j.seq = seq;
  return j;
}

/* A large dense step is matmul-bound: its MFU lies between what the
 * GEMM table allows (at most about 0.78 of the 989 TFLOP/s peak) and a
 * fifth; the phases add up to the step. */
static void gemm_bound(void **state) {
  (void)state;
  struct vl_job j = job(VL_PREC_BF16, 4, 2048);
  struct vl_step_time t = timed("data/models/llama-2-7b.json", &j, "h100-80gb");
  printf("  llama-2-7b bf16 4 x 2048 on h100: %.3f s, MFU %.2f\n", t.step_s, t.mfu);
  assert_true(t.mfu > 0.2 && t.mfu < 0.8);
  assert_close(t.forward_s + t.backward_s + t.recompute_s + t.optimizer_s, t.step_s, 1e-12,
               "phases");
  double kinds = 0;
  for (int k = 0; k < VL_TK_COUNT; k++)
    kinds += t.kind_s[k];
  assert_close(kinds, t.step_s, 1e-9, "kinds add up to the step");
  assert_true(t.kind_s[VL_TK_MATMUL] > 0.5 * t.step_s);
  assert_false(t.derived);
  assert_non_null(strstr(t.source, "H100"));
}

/* fp32 matmuls run without TF32 on CUDA cores: several times slower than
 * bf16 on tensor cores (the measured tables: about 50 against 600-750
 * TFLOP/s) */
static void fp32_without_tf32(void **state) {
  (void)state;
  struct vl_job h = job(VL_PREC_BF16, 4, 1024), f = job(VL_PREC_FP32, 4, 1024);
  struct vl_step_time th = timed("data/models/gpt2-large.json", &h, "h100-80gb");
  struct vl_step_time tf = timed("data/models/gpt2-large.json", &f, "h100-80gb");
  printf("  gpt2-large: bf16 %.3f s, fp32 %.3f s\n", th.step_s, tf.step_s);
  assert_true(tf.kind_s[VL_TK_MATMUL] > 6 * th.kind_s[VL_TK_MATMUL]);
}

/* Accumulation repeats the micro-batch and steps the optimizer once;
 * checkpointing adds the layers' forward inside backward; LoRA drops the
 * frozen weights' gradients. */
static void step_structure(void **state) {
  (void)state;
  const char *m = "data/models/qwen2-0.5b.json";
  struct vl_job one = job(VL_PREC_BF16, 4, 1024), four = one, ck = one, lo = one;
  four.grad_accum = 4;
  ck.checkpointing = VL_CKPT_FULL;
  lo.lora_rank = 16;
  struct vl_step_time t1 = timed(m, &one, "h100-80gb"), t4 = timed(m, &four, "h100-80gb");
  /* issued back to back: never more than four alone, never less than
   * four times the device's share */
  double one_s = t1.forward_s + t1.backward_s, four_s = t4.forward_s + t4.backward_s;
  assert_true(four_s <= 4 * one_s * (1 + 1e-12));
  assert_true(four_s >= 4 * (t1.gpu_s - t1.optimizer_s) * (1 - 1e-12));
  assert_close(t4.optimizer_s, t1.optimizer_s, 1e-12, "one optimizer step");
  assert_close(t4.tokens_per_s * t4.step_s, 4 * 4 * 1024, 1e-9, "tokens");
  struct vl_step_time tc = timed(m, &ck, "h100-80gb");
  /* the forward again, its host share dearer (the checkpoint's hooks) */
  assert_true(tc.recompute_s > 0 && tc.recompute_s < 2 * tc.forward_s);
  assert_close(tc.forward_s, t1.forward_s, 1e-9, "checkpointing: the same forward");
  assert_true(tc.step_s > t1.step_s);
  /* (on a 7B model, where the fp32 adapters' small GEMMs are a sliver of
   * the frozen weights' gradients they save) */
  struct vl_step_time tf = timed("data/models/llama-2-7b.json", &one, "h100-80gb");
  struct vl_step_time tl = timed("data/models/llama-2-7b.json", &lo, "h100-80gb");
  assert_true(tl.kind_s[VL_TK_MATMUL] < 0.9 * tf.kind_s[VL_TK_MATMUL]);
  assert_true(tl.optimizer_s < 0.1 * tf.optimizer_s);
}

/* Non-reentrant checkpointing stops recomputing a layer after its last
 * saved tensor: Qwen2-0.5B's recomputation runs no down_proj (24 layers of
 * an 8,192 x 896 x 4,864 forward GEMM) and one residual add less. With
 * dropout on the residual branches its mask keeps what follows, and the
 * whole forward runs again. */
static void recompute_early_stop(void **state) {
  (void)state;
  struct vl_arch a, d;
  tu_arch("data/models/qwen2-0.5b.json", &a);
  d = a;
  d.hidden_dropout = 0.1;
  struct vl_job j = job(VL_PREC_BF16, 4, 2048);
  j.checkpointing = VL_CKPT_FULL;
  struct vl_step_time stop = timed_arch(&a, &j, "h100-80gb"), all = timed_arch(&d, &j, "h100-80gb");
  struct vl_time_card c;
  vl_time_card_init(&c, vl_catalog_find(&cat, "h100-80gb"), false);
  struct vl_op down = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 8192, .n = 896, .k = 4864, .count = 24};
  assert_close(all.kind_s[VL_TK_MATMUL] - stop.kind_s[VL_TK_MATMUL], vl_op_device_s(&c, &down),
               1e-9, "the recomputation skips down_proj");
  assert_true(stop.ops < all.ops);
  struct vl_job n = j;
  n.checkpointing = VL_CKPT_NONE;
  struct vl_step_time none = timed_arch(&a, &n, "h100-80gb");
  assert_true(stop.kind_s[VL_TK_MATMUL] > none.kind_s[VL_TK_MATMUL]);
}

/* Tensor parallelism divides each matmul; a card never measured is the
 * H100 scaled by its datasheet ratios and says so; bf16 on a card without
 * it is refused naming both. */
static void cards_and_shares(void **state) {
  (void)state;
  const char *m = "data/models/llama-2-7b.json";
  struct vl_job j = job(VL_PREC_BF16, 2, 2048), t2 = j;
  t2.tp = 2;
  struct vl_step_time a = timed(m, &j, "h100-80gb"), b = timed(m, &t2, "h100-80gb");
  assert_true(b.kind_s[VL_TK_MATMUL] < 0.6 * a.kind_s[VL_TK_MATMUL]);
  struct vl_step_time c = timed(m, &j, "a100-80gb");
  assert_true(c.derived);
  assert_non_null(strstr(c.source, "derived from h100-80gb"));
  /* 312 against 989 TFLOP/s: the matmuls take 989/312 times as long */
  assert_close(c.kind_s[VL_TK_MATMUL] / a.kind_s[VL_TK_MATMUL], 989.4 / 312, 1e-9, "a100 ratio");
  struct vl_step_time h = timed(m, &j, "h200");
  assert_false(h.derived);
  struct vl_arch arch;
  tu_arch(m, &arch);
  struct vl_step_time t;
  struct vl_err err = {""};
  assert_int_equal(vl_step_time(&arch, &j, vl_catalog_find(&cat, "v100-32gb"), &t, &err),
                   VL_EINVAL);
  assert_non_null(strstr(err.msg, "V100"));
  assert_non_null(strstr(err.msg, "bf16"));
  j.task = VL_TASK_INFER;
  assert_int_equal(vl_step_time(&arch, &j, vl_catalog_find(&cat, "h100-80gb"), &t, &err),
                   VL_EINVAL);
}

/* The host issues the ops in order and runs ahead: a host-bound stretch
 * followed by a GPU-bound one takes the first's host time and the
 * second's device time, not the larger of the sums; the other order
 * overlaps; micro-batches chain without a sync, the next one's dispatch
 * behind this one's kernels. */
static void stream_pipeline(void **state) {
  (void)state;
  struct vl_time_pipe p = {0};
  vl_time_issue(&p, 1e-3, 3e-3); /* host-bound */
  vl_time_issue(&p, 4e-3, 1e-3); /* GPU-bound */
  assert_close(p.gpu_at, 3e-3 + 4e-3, 1e-12, "host-bound, then GPU-bound");
  struct vl_time_pipe q = {0};
  vl_time_issue(&q, 4e-3, 1e-3);
  vl_time_issue(&q, 1e-3, 3e-3);
  assert_close(q.gpu_at, 5e-3, 1e-12, "GPU-bound first: the host's 4 ms behind the device's 5");
  struct vl_time_pass fwd = {.host = 3e-3}, bwd = {.host = 1e-3};
  fwd.k[VL_TK_MEMORY] = 1e-3, bwd.k[VL_TK_MATMUL] = 4e-3;
  struct vl_step_time t = {0};
  vl_time_passes(&t, &fwd, &bwd, NULL, 3);
  assert_close(t.forward_s + t.backward_s, 7e-3 + 2 * 5e-3, 1e-12, "three micro-batches chained");
  assert_close(t.forward_s, 3e-3 + 2 * 1e-3, 1e-12, "the first forward waits on the host");
  assert_close(t.kind_s[VL_TK_HOST], 2e-3, 1e-12, "the GPU waits 2 ms, once");
  assert_close(t.gpu_s, 3 * 5e-3, 1e-12, "device time adds up");
}

/* DeBERTa's c2p and p2c terms: torch.gather of every score and its
 * backward, a scatter-add of atomic adds, at the rates measured on the
 * H100 (3.5 and 14.5 ps an element), besides their matmuls */
static void deberta_gathers(void **state) {
  (void)state;
  struct vl_arch a, none;
  tu_arch("data/models/deberta-v3-base.json", &a);
  none = a;
  none.rel_att = 0;
  struct vl_job j = job(VL_PREC_AMP_BF16, 8, 512);
  j.attention = VL_ATTN_EAGER;
  struct vl_step_time t = timed_arch(&a, &j, "h100-80gb"), t0 = timed_arch(&none, &j, "h100-80gb");
  double n = 8.0 * 12 * 512 * 512, gathers = 12 * 2 * n * (3.5e-12 + 14.5e-12);
  double d = t.kind_s[VL_TK_MEMORY] - t0.kind_s[VL_TK_MEMORY];
  printf("  deberta-v3-base c2p+p2c: %.2f ms memory-bound, %.2f ms of it gathers\n", d * 1e3,
         gathers * 1e3);
  assert_true(d > gathers && d < 1.5 * gathers);
  assert_true(t.kind_s[VL_TK_MATMUL] + t.kind_s[VL_TK_ATTENTION] >
              t0.kind_s[VL_TK_MATMUL] + t0.kind_s[VL_TK_ATTENTION]);
}

/* GPT-2's 50,257-token head is off cuBLAS's 8-element alignment: the same
 * model with 50,256 tokens runs its head several times faster */
static void unaligned_head(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j = job(VL_PREC_BF16, 8, 1024);
  struct vl_step_time odd = timed_arch(&a, &j, "h100-80gb");
  a.vocab = 50256;
  struct vl_step_time even = timed_arch(&a, &j, "h100-80gb");
  /* the head's three GEMMs: at most 146 TFLOP/s unaligned, 600 or more
   * aligned (bench/results/step-time/raw.jsonl:align/) */
  double head = 3 * 2.0 * 8 * 1024 * 768 * 50257.0;
  printf("  gpt2 matmuls: vocab 50257 %.4f s, 50256 %.4f s\n", odd.kind_s[VL_TK_MATMUL],
         even.kind_s[VL_TK_MATMUL]);
  assert_true(odd.kind_s[VL_TK_MATMUL] - even.kind_s[VL_TK_MATMUL] > head / 146e12 - head / 600e12);
}

/* One op priced alone (vl_op_device_s), against the measured tables:
 * a GEMM at a grid point takes its FLOPs at the table's rate; a batch of
 * b is one GEMM b times as tall; TF32 at half the 16-bit rate, fp32 on
 * CUDA cores slower still; a 16-bit dimension off 8 elements at the
 * unaligned rate only where allowed; attention's backward at least 2.5
 * forwards, a causal mask half the keys; a memory-bound op its bytes at
 * its class's bandwidth; a view nothing; a card derived by ratios. */
static void one_op(void **state) {
  (void)state;
  struct vl_time_card h100, a100;
  vl_time_card_init(&h100, vl_catalog_find(&cat, "h100-80gb"), false);
  vl_time_card_init(&a100, vl_catalog_find(&cat, "a100-80gb"), false);
  assert_false(h100.derived);
  assert_true(a100.derived);
  const struct vl_kt_card *k = h100.tables;
  /* m 2048, n 1024, k 1024: grid point [2][2][2] */
  struct vl_op g = {.kind = VL_OP_GEMM,
                    .layout = VL_GEMM_WGRAD,
                    .m = vl_kt_m[2],
                    .n = vl_kt_nk[2],
                    .k = vl_kt_nk[2],
                    .count = 3};
  double s = vl_op_device_s(&h100, &g);
  assert_close(s, 3 * 2.0 * 2048 * 1024 * 1024 / k->gemm[0][VL_GEMM_WGRAD][2][2][2], 1e-12,
               "gemm at a grid point");
  assert_close(vl_op_flops(&g), 2.0 * 2048 * 1024 * 1024, 1e-12, "gemm flops");
  struct vl_op b = g;
  b.m = 512, b.batch = 4;
  assert_close(vl_op_device_s(&h100, &b), s, 1e-12, "a batch of 4 x 512 rows is 2048 rows");
  struct vl_op t = g, f = g;
  t.fp32 = t.tf32 = true;
  f.fp32 = true;
  assert_close(vl_op_device_s(&h100, &t), 2 * s, 1e-12, "tf32 at half the bf16 rate");
  assert_true(vl_op_device_s(&h100, &f) > vl_op_device_s(&h100, &t));
  assert_close(vl_op_device_s(&a100, &g) / s, 989.4 / 312, 1e-9, "a100 by the datasheet ratio");
  /* off 8 elements: odd at the align1 rate, even at the align2 rate */
  struct vl_op odd = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 8192, .n = 50257, .k = 768, .count = 1};
  struct vl_op even = odd, twin = odd;
  even.n = 50258, twin.n = 50256;
  double aligned = vl_op_device_s(&h100, &twin);
  assert_close(vl_op_device_s(&h100, &odd), 2.0 * 8192 * 50257 * 768 / k->unaligned[0][0], 1e-12,
               "odd n: align1");
  assert_close(vl_op_device_s(&h100, &even), 2.0 * 8192 * 50258 * 768 / k->unaligned[1][0], 1e-12,
               "even n off 8: align2");
  assert_true(vl_op_device_s(&h100, &odd) > 5 * aligned);
  assert_true(vl_op_device_s(&h100, &even) > 2 * aligned);
  odd.fp32 = twin.fp32 = true;
  assert_close(vl_op_device_s(&h100, &odd) / vl_op_device_s(&h100, &twin), 50257.0 / 50256, 1e-3,
               "fp32 does not care");
  struct vl_op at = {.kind = VL_OP_ATTENTION,
                     .kernel = "default",
                     .half = true,
                     .bs = 4,
                     .heads = 32,
                     .q_len = 2048,
                     .kv_len = 2048,
                     .dqk = 128,
                     .dv = 128,
                     .count = 1};
  double fw = vl_op_device_s(&h100, &at);
  at.backward = true;
  double bw = vl_op_device_s(&h100, &at);
  assert_true(fw > 0 && bw >= 2.5 * fw);
  struct vl_op cz = at;
  cz.causal = true, cz.backward = false;
  assert_close(vl_op_flops(&cz), vl_op_flops(&at) / 2.5 / 2, 1e-9, "causal: half the keys");
  struct vl_op unknown = cz;
  unknown.kernel = "no-such-kernel";
  assert_close(vl_op_device_s(&h100, &unknown), vl_op_device_s(&h100, &cz), 1e-15,
               "an unknown kernel is priced as SDPA's default");
  struct vl_op m = {.kind = VL_OP_MEMORY, .mem = VL_MEM_CAST, .bytes = 6e9, .count = 2};
  assert_close(vl_op_device_s(&h100, &m), 2 * 6e9 / k->bw_cast, 1e-12, "bytes at bandwidth");
  struct vl_op v = {.kind = VL_OP_DISPATCH, .count = 100};
  assert_true(vl_op_device_s(&h100, &v) == 0);
  struct vl_time_pass p = {{0}, 0, 0};
  vl_time_pass_add(&p, &h100, &g, VL_TK_MATMUL);
  vl_time_pass_add(&p, &h100, &v, VL_TK_MEMORY);
  assert_close(p.k[VL_TK_MATMUL], s, 1e-15, "pass: the gemm's time");
  assert_close(p.ops, 103, 1e-12, "pass: every op's dispatch");
}

/* SDPA's pick (sdp_utils.cpp select_sdp_backend on sm90, cuDNN > 9.15:
 * cuDNN, flash, memory-efficient) as priced: cuDNN's rows without a
 * dropout, flash's or the memory-efficient kernel's with one (cuDNN's
 * dropout costs it 1.2 to 1.7 times, which its rows do not hold); flash
 * refuses an attn_mask, which transformers hands it where a sliding window reaches
 * the keys; under a mask every key is computed. StarCoder2-3B LoRA
 * checkpointed at 8,192 tokens (window 4,096, attention dropout 0.1) took
 * 0.98 s on an H100 where a cuDNN kernel over the window was priced at
 * 0.46 s (bench/results/reserved/breadth/). */
static void sdpa_backend_pick(void **state) {
  (void)state;
  struct vl_time_card h100;
  vl_time_card_init(&h100, vl_catalog_find(&cat, "h100-80gb"), false);
  struct vl_op at = {.kind = VL_OP_ATTENTION,
                     .kernel = "default",
                     .half = true,
                     .causal = true,
                     .bs = 1,
                     .heads = 24,
                     .q_len = 8192,
                     .kv_len = 8192,
                     .dqk = 128,
                     .dv = 128,
                     .count = 1};
  struct vl_op cudnn = at, flash = at, eff = at;
  cudnn.kernel = "cudnn", flash.kernel = "flash", eff.kernel = "efficient";
  double c = vl_op_device_s(&h100, &cudnn);
  assert_close(vl_op_device_s(&h100, &at), c, 1e-15, "no dropout, no mask: cuDNN");
  /* cuDNN runs any dropout (PyTorch 2.11 on an H100, bench/results/
   * dry-run/raw.jsonl:sdpa-choice-h100/), but its rows hold none: flash's
   * stand for it, 1/8 as 0.1 */
  at.dropout = 0.125;
  assert_close(vl_op_device_s(&h100, &at), vl_op_device_s(&h100, &flash), 1e-15,
               "1/8 without a mask: flash's rows");
  at.dropout = 0.1;
  assert_close(vl_op_device_s(&h100, &at), vl_op_device_s(&h100, &flash), 1e-15,
               "0.1 without a mask: flash's rows");
  at.window = 4096; /* reached by the 8,192 keys: a mask */
  eff.causal = false;
  assert_close(vl_op_device_s(&h100, &at), vl_op_device_s(&h100, &eff), 1e-15,
               "0.1 under a mask: memory-efficient over every key");
  assert_true(vl_op_device_s(&h100, &at) > 4 * c);
  at.dropout = 0;
  cudnn.causal = false;
  assert_close(vl_op_device_s(&h100, &at), vl_op_device_s(&h100, &cudnn), 1e-15,
               "a mask without dropout: cuDNN over every key");
}

/* The tables hold device time only: kernels.py's times carried each call's
 * dispatch (28-32 us for every F.linear up to 128 x 1,024 x 1,024 on the
 * H100), which bench/time/distill.py takes off, leaving the smallest
 * measured shape its KERNEL_MIN_S (3 us). So the grid's quickest GEMM
 * takes 3 us, the smallest shape (and one below the grid) a few; Qwen2-0.5B's q projection over
 * 8,192 tokens (13 GFLOP) takes its FLOPs at a tensor-core rate, under the dispatch the table used
 * to hold; the smallest attention forward likewise. */
static void device_time_only(void **state) {
  (void)state;
  struct vl_time_card h100, h200;
  vl_time_card_init(&h100, vl_catalog_find(&cat, "h100-80gb"), false);
  vl_time_card_init(&h200, vl_catalog_find(&cat, "h200"), false);
  struct vl_op tiny = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 128, .n = 64, .k = 64, .count = 1};
  /* the grid's quickest forward GEMM is left 3 us; the smallest shape
   * within a few us of it (the H200 measured 34-44 us for those shapes) */
  const struct vl_time_card *cards[] = {&h100, &h200};
  for (int c = 0; c < 2; c++) {
    const struct vl_kt_card *k = cards[c]->tables;
    double least = 1;
    for (int i = 0; i < 5; i++)
      for (int n = 0; n < 5; n++)
        for (int kk = 0; kk < 5; kk++)
          least =
              fmin(least, 2 * vl_kt_m[i] * vl_kt_nk[n] * vl_kt_nk[kk] / k->gemm[0][0][i][n][kk]);
    assert_close(least, 3e-6, 1e-3, "the quickest GEMM of the grid");
    assert_true(vl_op_device_s(cards[c], &tiny) < 10e-6); /* was 30-38 us */
  }
  struct vl_op lora = tiny;
  lora.m = 16, lora.n = 16, lora.k = 16;
  assert_close(vl_op_device_s(&h100, &lora), vl_op_device_s(&h100, &tiny), 1e-12,
               "below the grid: the smallest shape's time");
  struct vl_op q = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 8192, .n = 896, .k = 896, .count = 1};
  double qs = vl_op_device_s(&h100, &q);
  printf("  8192 x 896 x 896 bf16 on h100: %.1f us, %.0f TFLOP/s\n", 1e6 * qs,
         vl_op_flops(&q) / qs / 1e12);
  assert_true(qs < 28e-6 && vl_op_flops(&q) / qs > 300e12 && vl_op_flops(&q) / qs < 800e12);
  struct vl_op at = {.kind = VL_OP_ATTENTION,
                     .kernel = "default",
                     .half = true,
                     .bs = 16,
                     .heads = 12,
                     .q_len = 128,
                     .kv_len = 128,
                     .dqk = 64,
                     .dv = 64,
                     .count = 1};
  double as = vl_op_device_s(&h100, &at);
  assert_true(as >= 3e-6 && as < 6e-6); /* was 30 us */
  /* forward+backward, timed through autograd.grad, keeps the forward's
   * kernel (it ran during the backward's dispatch): every row's at least
   * its forward's, 3.5 x its FLOPs over its rate */
  for (int c = 0; c < 2; c++) {
    const struct vl_kt_card *k = cards[c]->tables;
    for (size_t i = 0; i < k->n_attn; i++)
      assert_true(3.5 / k->attn[i].fwd_bwd >= 1 / k->attn[i].fwd);
  }
}

/* A GEMM takes at least its bytes (both operands and the result, once)
 * at the card's bandwidth: a LoRA adapter's A over 8,192 tokens of 4,096
 * (rank 16, below the grid, priced at the rate of its edge of 64) reads
 * 64 MiB of input, about 21 us on the H100, where its FLOPs at the edge's
 * rate take a few. */
static void gemm_reads_its_bytes(void **state) {
  (void)state;
  struct vl_time_card h100;
  vl_time_card_init(&h100, vl_catalog_find(&cat, "h100-80gb"), false);
  const struct vl_kt_card *k = h100.tables;
  struct vl_op a = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 8192, .n = 16, .k = 4096, .count = 2};
  double bytes = (8192.0 * 4096 + 4096.0 * 16 + 8192.0 * 16) * 2;
  assert_close(vl_op_device_s(&h100, &a), 2 * bytes / k->bw_add, 1e-12, "a thin GEMM's bytes");
  struct vl_op f = a;
  f.fp32 = true;
  assert_close(vl_op_device_s(&h100, &f), 2 * 2 * bytes / k->bw_add, 1e-12, "fp32: twice");
  struct vl_op sq = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 8192, .n = 4096, .k = 4096, .count = 1};
  assert_true(vl_op_device_s(&h100, &sq) > 1.5 * (8192.0 * 4096 * 3 * 2) / k->bw_add);
}

/* trace text priced on the H100 into *tt (VL_OK asserted) */
static void traced_h100(const char *text, struct vl_trace_time *tt) {
  struct vl_err err = {""};
  assert_int_equal(
      vl_trace_step_time(text, strlen(text), vl_catalog_find(&cat, "h100-80gb"), tt, &err), VL_OK);
}

/* A trace's op lines priced: the last step with a forward and an
 * optimizer step; its ops issued in order on the host's and the GPU's
 * clocks (here the forward's GEMMs, then views: the larger of their device
 * and host time); the optimizer's row;
 * tokens from the step line; no op lines: an error that says why. */
static void traced_step(void **state) {
  (void)state;
  const struct vl_gpu *g = vl_catalog_find(&cat, "h100-80gb");
  const char *text = "a 1 1024 meta\n"
                     "# step 1 tokens=4096 samples=2 micro=1\n"
                     "# step 2 tokens=4096 samples=2 micro=1\n"
                     "# optimizer 1 adamw foreach elems=1000000 tensors=10 w=2 g=2 st=2 states=2\n"
                     "# optimizer 2 adamw foreach elems=1000000 tensors=10 w=2 g=2 st=2 states=2\n"
                     "# op 1 forward 99 view t\n"
                     "# op 2 forward 10 gemm mm layout=fwd m=4096 n=4096 k=4096 batch=1 "
                     "dtype=bfloat16 bias=0\n"
                     "# op 2 backward 20 gemm mm layout=dgrad m=4096 n=4096 k=4096 batch=1 "
                     "dtype=bfloat16 bias=0\n"
                     "# op 2 backward 5 mem add class=ew bytes=1000000 numel=1 dtype=bfloat16\n"
                     "# op 2 forward 3 view t\n"
                     "# op 3 forward 7 view t\n"
                     "# op 3 other 7 view t";
  struct vl_trace_time tt;
  traced_h100(text, &tt);
  assert_int_equal(tt.step, 2); /* step 3 has no optimizer step */
  assert_true(tt.complete);
  assert_int_equal(tt.steps, 3);
  assert_close(tt.tokens, 4096, 0, "tokens");
  struct vl_time_card c;
  vl_time_card_init(&c, g, false);
  struct vl_op mm = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 4096, .n = 4096, .k = 4096, .count = 10};
  double fwd = vl_op_device_s(&c, &mm);
  assert_close(tt.time.forward_s, fmax(fwd, 13 * vl_trace_host_op_s()), 1e-12, "forward pass");
  assert_close(tt.time.host_s, 38 * vl_trace_host_op_s(), 1e-12, "every op of the passes");
  bool approx = false;
  double opt = vl_time_optimizer_s(&c, "adamw", "foreach", 1e6, 10, 2, 2, 2, 2, &approx);
  assert_false(approx);
  assert_close(tt.time.optimizer_s, opt + vl_time_host_step_s(), 1e-12, "optimizer row");
  assert_close(tt.time.step_s,
               tt.time.forward_s + tt.time.backward_s + tt.time.recompute_s + tt.time.optimizer_s,
               1e-12, "phases add up");
  assert_close(tt.time.model_flops, 30 * 2.0 * 4096 * 4096 * 4096, 1e-6, "the gemms' flops");
  assert_close(tt.kernels, 35, 0, "kernels of the priced passes");
  assert_true(tt.time.tokens_per_s > 0);
  struct vl_err err = {""};
  const char *none = "a 1 1024 meta\nf 1\n";
  assert_int_equal(vl_trace_step_time(none, strlen(none), g, &tt, &err), VL_ENOTFOUND);
  assert_non_null(strstr(err.msg, "# op"));
}

/* A convolution net's trace: a convolution is a GEMM line (the op's one
 * dispatch) and cuDNN's NHWC transposes around it inner=1 lines (device
 * time, no dispatch); BatchNorm's classes run slower than a norm's rows
 * on the same bytes; bicubic upsampling costs its chain of taps over the
 * planes, whatever its bytes. */
static void traced_conv_lines(void **state) {
  (void)state;
  const char *text = "# step 1 tokens=2 samples=2 micro=1\n"
                     "# optimizer 1 sgd foreach elems=1000 tensors=2 w=2 g=2 st=2 states=0\n"
                     "# op 1 forward 1 gemm convolution layout=fwd m=100352 n=64 k=576 batch=1 "
                     "dtype=bfloat16 bias=0\n"
                     "# op 1 forward 1 mem convolution class=cast bytes=25690112 numel=6422528 "
                     "dtype=bfloat16 inner=1\n";
  struct vl_trace_time tt;
  traced_h100(text, &tt);
  struct vl_time_card c;
  vl_time_card_init(&c, vl_catalog_find(&cat, "h100-80gb"), false);
  struct vl_op conv = {
      .kind = VL_OP_GEMM, .layout = VL_GEMM_FWD, .m = 100352, .n = 64, .k = 576, .count = 1};
  struct vl_op nhwc = {.kind = VL_OP_MEMORY, .mem = VL_MEM_CAST, .bytes = 25690112, .count = 1};
  assert_close(tt.time.kind_s[VL_TK_MATMUL] + tt.time.kind_s[VL_TK_MEMORY],
               vl_op_device_s(&c, &conv) + vl_op_device_s(&c, &nhwc), 1e-12,
               "the GEMM and its transposes on the device");
  assert_close(tt.time.host_s, vl_trace_host_op_s(), 1e-12, "one dispatch");
  assert_close(tt.phase_ops[0], 1, 0, "one op in the forward");
  assert_close(tt.kernels, 2, 0, "two kernels");
  struct vl_op bn = {.kind = VL_OP_MEMORY, .mem = VL_MEM_BATCHNORM, .bytes = 1e8, .count = 1};
  struct vl_op bnb = bn, norm = bn, cubic = bn, cubic2;
  bnb.mem = VL_MEM_BATCHNORM_BWD, norm.mem = VL_MEM_NORM;
  /* the statistics' read at 0.2 of a norm's rate, then the normalisation:
   * 7 map-sizes of a norm's time for the 2 the op moves */
  assert_close(vl_op_device_s(&c, &bn), 3.5 * vl_op_device_s(&c, &norm), 1e-12, "batch norm");
  assert_close(vl_op_device_s(&c, &bnb), vl_op_device_s(&c, &norm) / 0.26, 1e-12, "its backward");
  cubic.mem = VL_MEM_BICUBIC, cubic.planes = 768;
  cubic2 = cubic, cubic2.bytes = 1e3;
  assert_close(vl_op_device_s(&c, &cubic), 2.32148e-3, 1e-9, "ViT-base's table, 14 -> 24 patches");
  assert_close(vl_op_device_s(&c, &cubic2), vl_op_device_s(&c, &cubic), 0, "not by bytes");
  cubic.mem = VL_MEM_BICUBIC_BWD;
  assert_close(vl_op_device_s(&c, &cubic), 24.538104e-3, 1e-9, "its atomic adds backward");
}

/* The memory-bound classes whole steps' profiles gave (steptime.c
 * BCAST_BPS): a product by a broadcast operand and an op on strided halves
 * move their bytes at the same rate on the H100 and the H200 (ATen's
 * unvectorised kernel, not the card's bandwidth), slower than the
 * vectorised add; log_softmax at 1.20 and 1.75 times the softmax row's
 * rate; a trace's line of each class is priced as that class. */
static void profiled_classes(void **state) {
  (void)state;
  struct vl_time_card h100, h200;
  vl_time_card_init(&h100, vl_catalog_find(&cat, "h100-80gb"), false);
  vl_time_card_init(&h200, vl_catalog_find(&cat, "h200"), false);
  struct vl_op op = {.kind = VL_OP_MEMORY, .bytes = 1.7e9, .count = 1};
  const enum vl_mem_class same[] = {VL_MEM_BROADCAST, VL_MEM_STRIDED};
  for (size_t i = 0; i < 2; i++) {
    op.mem = same[i];
    double s = vl_op_device_s(&h100, &op);
    assert_close(vl_op_device_s(&h200, &op), s, 1e-12, "the same rate on both cards");
    struct vl_op add = op;
    add.mem = VL_MEM_ELEMENTWISE;
    assert_true(s > 1.5 * vl_op_device_s(&h100, &add));
    assert_true(s > 2 * vl_op_device_s(&h200, &add));
  }
  op.mem = VL_MEM_BROADCAST;
  assert_close(vl_op_device_s(&h100, &op), 1e-3, 1e-9, "1.7 TB/s");
  struct vl_op sm = op, ls = op, lsb = op;
  sm.mem = VL_MEM_SOFTMAX, ls.mem = VL_MEM_LOGSOFTMAX, lsb.mem = VL_MEM_LOGSOFTMAX_BWD;
  assert_close(vl_op_device_s(&h100, &ls), vl_op_device_s(&h100, &sm) / 1.20, 1e-12, "log_softmax");
  assert_close(vl_op_device_s(&h100, &lsb), vl_op_device_s(&h100, &sm) / 1.75, 1e-12, "backward");
  const char *text =
      "# step 1 tokens=2 samples=2 micro=1\n"
      "# optimizer 1 sgd foreach elems=1000 tensors=2 w=2 g=2 st=2 states=0\n"
      "# op 1 forward 1 mem mul class=bcast bytes=1700000000 numel=1 dtype=bfloat16\n"
      "# op 1 forward 1 mem cat class=strided bytes=1700000000 numel=1 "
      "dtype=bfloat16\n"
      "# op 1 forward 1 mem _log_softmax class=logsoftmax bytes=1700000000 numel=1 "
      "dtype=float32\n";
  struct vl_trace_time tt;
  traced_h100(text, &tt);
  struct vl_op st = op;
  st.mem = VL_MEM_STRIDED;
  assert_close(tt.time.kind_s[VL_TK_MEMORY],
               vl_op_device_s(&h100, &op) + vl_op_device_s(&h100, &st), 1e-12,
               "the trace's classes");
  assert_close(tt.time.kind_s[VL_TK_LOSS], vl_op_device_s(&h100, &ls), 1e-12, "the loss's");
}

/* A ViT at another image side pays its position table's bicubic
 * interpolation: h x 16 taps forward and as many atomic adds backward, a
 * latency chain the H100 ran in 2.3 and 24.5 ms at h = 768 (the
 * step-time profiles' vision section); the same ViT whose config has that
 * side pays nothing more. */
static void vit_interpolation(void **state) {
  (void)state;
  struct vl_arch a, native;
  tu_arch("data/models/vit-base-patch16-224.json", &a);
  native = a;
  native.image_size = 384;
  struct vl_job j = job(VL_PREC_BF16, 16, 384);
  j.image_size = 384;
  struct vl_step_time ti = timed_arch(&a, &j, "h100-80gb"),
                      tn = timed_arch(&native, &j, "h100-80gb");
  assert_close(ti.kind_s[VL_TK_MEMORY] - tn.kind_s[VL_TK_MEMORY], 2.32148e-3 + 24.538104e-3, 1e-9,
               "the interpolation, forward and backward");
  assert_true(ti.backward_s - tn.backward_s > 0.02);
}

/* ResNet's BatchNorm on NCHW maps runs far below a norm kernel's
 * bandwidth: at 512 pixels (16 images, bf16) its memory-bound kernels alone
 * take more than the 16.7 ms BatchNorm took on the H100; a step whose host
 * dispatch outlasts its device time says it is host-bound (the same
 * ResNet at 64 pixels), a GPU-bound one does not */
static void resnet_and_host_bound(void **state) {
  (void)state;
  struct vl_job small = job(VL_PREC_BF16, 16, 64), large = job(VL_PREC_BF16, 16, 512);
  small.image_size = 64;
  large.image_size = 512;
  struct vl_step_time ts = timed("data/models/resnet-50.json", &small, "h100-80gb");
  struct vl_step_time tl = timed("data/models/resnet-50.json", &large, "h100-80gb");
  printf("  resnet-50 bf16 x16: 64 px %.4f s (host %.4f), 512 px %.4f s (memory %.4f)\n", ts.step_s,
         ts.host_s, tl.step_s, tl.kind_s[VL_TK_MEMORY]);
  assert_true(tl.kind_s[VL_TK_MEMORY] > 0.0167);
  assert_true(ts.host_bound && ts.host_s > ts.gpu_s);
  assert_false(tl.host_bound);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gemm_bound),           cmocka_unit_test(fp32_without_tf32),
      cmocka_unit_test(step_structure),       cmocka_unit_test(cards_and_shares),
      cmocka_unit_test(stream_pipeline),      cmocka_unit_test(deberta_gathers),
      cmocka_unit_test(unaligned_head),       cmocka_unit_test(one_op),
      cmocka_unit_test(sdpa_backend_pick),    cmocka_unit_test(traced_step),
      cmocka_unit_test(traced_conv_lines),    cmocka_unit_test(device_time_only),
      cmocka_unit_test(recompute_early_stop), cmocka_unit_test(gemm_reads_its_bytes),
      cmocka_unit_test(vit_interpolation),    cmocka_unit_test(resnet_and_host_bound),
      cmocka_unit_test(profiled_classes)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
