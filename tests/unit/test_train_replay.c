/* lib/model/train_replay*.c: the training step replayed through the
 * caching-allocator model, called directly (vl__train_replay) on bundled
 * configs of each family the bill replays. The peaks are pinned from the
 * build that wrote this test (each pin says its job), and the mechanisms
 * are checked against what PyTorch does whatever the pin: AdamW's step
 * holds weights, gradients and two states at once; LoRA keeps no gradient
 * or state for a frozen weight; checkpointing keeps a layer's input only;
 * eager attention materialises the scores SDPA does not; the allocator
 * reserves whole 2 MiB pages (c10/cuda/CUDACachingAllocator.cpp,
 * kRoundLarge and kSmallBuffer). */
#include <math.h>
#include "testutil.h"
#include "model/internal.h"
#include "model/policy.h"
#include "vramledger/caching.h"

#define M (1ull << 20)

struct fixture {
  struct vl_arch a;
  struct vl_inventory inv;
  struct vl__train_sizes z;
};

/* the sizes bill.c gives the replay for one GPU, amp-bf16, AdamW
 * (foreach), SDPA, no checkpointing: fp32 weights, gradients and two fp32
 * states, bf16 matmul activations and an fp32 residual stream */
static void load_prec(struct fixture *f, const char *config, uint64_t batch, uint64_t seq,
                      enum vl_precision prec) {
  tu_arch(config, &f->a);
  struct vl_err err = {""};
  assert_int_equal(vl_inventory_build(&f->a, &f->inv, &err), VL_OK);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl__policy pol;
  vl__policy_get(prec, &pol);
  bool vision = vl_arch_is_vision(&f->a);
  f->z = (struct vl__train_sizes){
      .B = batch,
      .P = seq,
      .T = batch * seq,
      .Pd = seq,
      .side = f->a.image_size,
      .h = f->a.hidden,
      .I = f->a.intermediate,
      .V = vision ? f->a.labels : f->a.vocab,
      .wb = pol.weight,
      .gb = pol.grad,
      .mb = pol.master,
      .sb = pol.state,
      .states = 2,
      .impl = VL_IMPL_FOREACH,
      .step_temp = true,
      .autocast = pol.autocast,
      .e = pol.act,
      .r = pol.resid,
      .workspace = vl_workspace_thread_bytes(&ov),
      .sms = ov.sm_count,
      .tps = ov.threads_per_sm,
      .ab = VL__ADAPTER_BYTES,
  };
}

static void load(struct fixture *f, const char *config, uint64_t batch, uint64_t seq) {
  load_prec(f, config, batch, seq, VL_PREC_AMP_BF16);
}

static struct vl_cache_stats run(const struct fixture *f) {
  struct vl_cache_stats s;
  struct vl_err err = {""};
  vl_status rc = vl__train_replay(&f->a, &f->inv, &f->z, &s, &err);
  if (rc != VL_OK) fprintf(stderr, "replay: %s\n", err.msg);
  assert_int_equal(rc, VL_OK);
  /* whatever the job: a whole step ends with nothing but the model, its
   * states and the allocator's segments; reserved covers allocated, in
   * whole 2 MiB pages (kRoundLarge; the small pool's segments are
   * kSmallBuffer, 2 MiB) */
  assert_true(s.peak_reserved >= s.peak_allocated);
  assert_int_equal(s.peak_reserved % (2 * M), 0);
  return s;
}

/* LoRA on every linear of a layer, as bill.c lists them (all-linear) */
static void lora_all_linear(struct fixture *f, uint64_t rank) {
  f->z.lora_rank = rank;
  f->z.n_lin = 0;
  for (int i = 0; i < f->inv.n; i++) {
    const struct vl_tensor *t = &f->inv.t[i];
    if (t->kind != VL_T_LINEAR || !t->per_layer) continue;
    assert_true(f->z.n_lin < VL__MAX_LAYER_LINEARS);
    f->z.lin[f->z.n_lin].name = t->name;
    f->z.lin[f->z.n_lin].out = t->rows;
    f->z.lin[f->z.n_lin].in = t->cols;
    f->z.lin[f->z.n_lin].count = t->count;
    f->z.lin[f->z.n_lin++].adapted = true;
  }
}

/* One job per family the bill replays, batch 2 x 128 tokens (a vision
 * model: its config's image side), amp-bf16 AdamW. The peaks are this
 * replay's as of commit ea74862 (printed by this test); a change to any
 * family's ops moves its row, and the change's commit says why. T5 runs
 * eager, as the bill replays it (SDPA would take its position bias as a
 * mask). */
static const struct pin {
  const char *config;
  bool eager;
  uint64_t peak_allocated, peak_reserved;
} pins[] = {
    {"data/models/gpt2.json", false, 2606776832u, 2858418176u},         /* decoder, tied head */
    {"data/models/qwen2-0.5b.json", false, 10058397696u, 10764681216u}, /* GQA, rotary */
    {"data/models/bert-base-uncased.json", false, 2284593152u, 2522873856u}, /* encoder */
    {"data/models/t5-base.json", true, 4583185408u, 5289017344u},            /* seq2seq */
    /* seq2seq; under autocast its logits + final_logits_bias are fp32 */
    {"data/models/bart-base.json", false, 2918236160u, 3361734656u},
    {"data/models/vit-base-patch16-224.json", false, 1802577920u, 2065694720u}, /* patches */
    {"data/models/resnet-50.json", false, 588801024u, 635437056u},              /* convolutions */
    {"data/models/olmoe-1b-7b.json", false, 138594058240u, 142612627456u}, /* MoE, 64 experts */
};

static void each_family_pinned(void **state) {
  (void)state;
  static struct fixture f;
  for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
    load(&f, pins[i].config, 2, 128);
    f.z.eager = pins[i].eager;
    struct vl_cache_stats s = run(&f);
    printf("  %-40s allocated %llu reserved %llu\n", pins[i].config,
           (unsigned long long)s.peak_allocated, (unsigned long long)s.peak_reserved);
    assert_int_equal(s.peak_allocated, pins[i].peak_allocated);
    assert_int_equal(s.peak_reserved, pins[i].peak_reserved);
    /* AdamW's step holds every weight, its gradient and two states, fp32
     * each: 16 bytes a parameter at least */
    assert_true(s.peak_allocated >= 16 * f.inv.total);
  }
}

/* the bill's peak allocated for a replayed job is the replay's own */
static void bill_takes_the_replays_peak(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/gpt2.json", 2, 128);
  struct vl_cache_stats s = run(&f);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 128;
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  tu_bill(&f.a, &j, b);
  assert_int_equal(b->peak_allocated_bytes, s.peak_allocated);
  free(b);
}

/* the optimizer's states: AdamW's two fp32 states are 8 bytes a parameter
 * over a step without them (states 0), the rounding of each tensor's
 * block (512 B) aside */
static void adamw_states_are_eight_bytes_a_parameter(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/gpt2.json", 1, 16);
  uint64_t adam = run(&f).peak_allocated;
  f.z.states = 0;
  uint64_t none = run(&f).peak_allocated;
  assert_close(adam - none, 8.0 * (double)f.inv.total, 0.005, "AdamW - no states");
}

/* LoRA freezes the base: no gradient (4 B) and no AdamW state (8 B) for a
 * frozen weight, so at a few tokens the peak falls by 12 bytes a base
 * parameter at least; a gradient kept for the frozen weights would leave
 * it 4 bytes short */
static void lora_keeps_nothing_for_frozen_weights(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/gpt2.json", 1, 16);
  uint64_t full = run(&f).peak_allocated;
  lora_all_linear(&f, 8);
  uint64_t lora = run(&f).peak_allocated;
  printf("  full %llu lora %llu (params %llu)\n", (unsigned long long)full,
         (unsigned long long)lora, (unsigned long long)f.inv.total);
  assert_true(lora >= 4 * f.inv.total); /* the fp32 base weights stay */
  assert_true(full - lora >= 12 * f.inv.total);
  assert_true(full - lora < 16 * f.inv.total);
}

/* the peak grows with the batch, checkpointed or not; checkpointing keeps
 * only each layer's input, so it lowers the peak, the more the larger the
 * batch; eager attention saves each layer's fp32 probabilities
 * (softmax's output under autocast) that SDPA never makes */
static void batch_checkpointing_and_attention(void **state) {
  (void)state;
  static struct fixture f;
  uint64_t last = 0, last_ckpt = 0, last_saving = 0;
  for (uint64_t B = 1; B <= 16; B *= 2) {
    load(&f, "data/models/gpt2.json", B, 512);
    uint64_t plain = run(&f).peak_allocated;
    f.z.ckpt = true;
    uint64_t ckpt = run(&f).peak_allocated;
    f.z.ckpt = false;
    f.z.eager = true;
    uint64_t eager = run(&f).peak_allocated;
    printf("  batch %2llu: %llu, checkpointed %llu, eager %llu\n", (unsigned long long)B,
           (unsigned long long)plain, (unsigned long long)ckpt, (unsigned long long)eager);
    assert_true(plain > last);
    assert_true(ckpt > last_ckpt);
    assert_true(ckpt < plain);
    assert_true(plain - ckpt > last_saving);
    uint64_t probs = f.a.layers * B * f.a.heads * 512 * 512 * 4;
    assert_true(eager >= plain + probs);
    last = plain, last_ckpt = ckpt, last_saving = plain - ckpt;
  }
}

/* DDP (gradient_as_bucket_view=False) copies every gradient into its
 * buckets: one more fp32 copy of the parameters; gradient accumulation
 * keeps .grad through the next micro-batch's forward: at most one set of
 * gradients more, and the largest tensor's new gradient before
 * AccumulateGrad adds it in place */
static void ddp_buckets_and_accumulation(void **state) {
  (void)state;
  static struct fixture f;
  for (uint64_t B = 1; B <= 8; B *= 8) {
    load(&f, "data/models/gpt2.json", B, 512);
    uint64_t plain = run(&f).peak_allocated;
    f.z.ddp = true;
    uint64_t ddp = run(&f).peak_allocated;
    f.z.ddp = false;
    f.z.accum = 2;
    uint64_t accum = run(&f).peak_allocated;
    assert_close(ddp - plain, 4.0 * (double)f.inv.total, 0.01, "DDP's buckets");
    assert_true(accum >= plain);
    assert_true(accum - plain <= 4 * (f.inv.total + f.inv.largest));
  }
}

/* accumulation's micro-batches that start where the one before started
 * are counted, not replayed (train_replay.c, skip_repeats): every figure
 * of the allocator the same as replaying each, over jobs whose micro-batch
 * comes back to where it started and ones it may not (DDP's buckets,
 * expandable segments, LoRA checkpointed, eager attention) */
static void repeated_micro_batches_counted(void **state) {
  (void)state;
  static struct fixture f;
  for (int job = 0; job < 5; job++) {
    load(&f, job < 3 ? "data/models/gpt2.json" : "data/models/qwen2-0.5b.json", 2, 256);
    f.z.accum = 7;
    f.z.ddp = job == 1;
    f.z.expandable = job == 2;
    if (job == 3) {
      lora_all_linear(&f, 8);
      f.z.ckpt = true;
    }
    f.z.eager = job == 4;
    struct vl_cache_stats skip = run(&f);
    f.z.every_micro_batch = true;
    struct vl_cache_stats each = run(&f);
    f.z.every_micro_batch = false;
    assert_memory_equal(&skip, &each, sizeof skip);
  }
}

/* expandable segments map 2 MiB pages as needed: reserved stays in pages
 * and above allocated (run() checks), and the blocks are the same, so the
 * peak allocated moves only by where blocks land */
static void expandable_segments(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/gpt2.json", 4, 512);
  struct vl_cache_stats plain = run(&f);
  f.z.expandable = true;
  struct vl_cache_stats exp = run(&f);
  assert_close(exp.peak_allocated, plain.peak_allocated, 0.01, "expandable's peak allocated");
  /* the second step's re-carving of the first step's blocks costs whole
   * segments without it (train_replay.c's header): here 255 MiB */
  assert_true(exp.peak_reserved < plain.peak_reserved);
}

/* a failed allocation inside the replay is an error, with its message */
static void out_of_memory_is_said(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/gpt2.json", 1, 16);
  struct vl_cache_stats s;
  struct vl_err err = {""};
  unsigned long before = vl_alloc_calls();
  run(&f);
  unsigned long n = vl_alloc_calls() - before;
  printf("  %lu allocations\n", n);
  assert_true(n > 2);
  /* the last allocations are the loop's own, freed at its end */
  vl_alloc_fail_at(n / 2);
  vl_status rc = vl__train_replay(&f.a, &f.inv, &f.z, &s, &err);
  vl_alloc_fail_at(0);
  assert_int_equal(rc, VL_ENOMEM);
  assert_non_null(strstr(err.msg, "out of memory"));
}

/* PEFT's LoRA on a bf16 model keeps its adapters in fp32
 * (autocast_adapter_dtype) and casts the layer's input to fp32 for them;
 * that copy is the forward's local x, alive until Linear.forward returns,
 * after lora_B's output, the scaling and the sum (peft 0.21
 * tuners/lora/layer.py). Under checkpointing nothing saves it, so its
 * lifetime is Python's and moves where blocks land: Phi-3-mini, bf16,
 * LoRA r=8 on every linear, full checkpointing, 4 x 2048, AdamW, reserves
 * 14,799,601,664 B in `vramledger trace` of that job on meta tensors
 * (python/vramledger/measure.py --device meta, transformers 5.17); freeing
 * the copy after lora_A instead gave 3.8 % less. */
static void lora_input_cast_held_to_return(void **state) {
  (void)state;
  static struct fixture f;
  load_prec(&f, "data/models/phi-3-mini.json", 4, 2048, VL_PREC_BF16);
  lora_all_linear(&f, 8);
  f.z.ckpt = true;
  struct vl_cache_stats s = run(&f);
  const double traced = 14799601664.0;
  printf("  phi-3-mini LoRA ckpt: reserved %llu (traced %.0f)\n",
         (unsigned long long)s.peak_reserved, traced);
  assert_true(fabs((double)s.peak_reserved / traced - 1) < 0.01);
}

/* A checkpointed layer's recomputation ends as the last matmul that saves
 * its inputs packs them (torch/utils/checkpoint.py's early stop): under
 * autocast after the casts it makes for that matmul (the frozen down
 * projection's half weight), with LoRA on that linear after its adapter's
 * fp32 input copy and lora_A. Llama-2-7B's shapes cut to 3 layers and a
 * 512-token vocabulary (bench/configs/llama-2-7b-3l-v512.json), so the
 * peak falls in a layer's recomputation:
 * amp-bf16, LoRA rank 8 on every linear, 2 x 1,024 tokens; `vramledger
 * estimate --dry-run` of that job (PyTorch 2.13 on the CPU under autocast)
 * peaks at 3,680,792,576 B allocated. Stopped before the down projection,
 * the replay was 5.5 % under it. */
static void recomputation_ends_at_the_last_saved_tensor(void **state) {
  (void)state;
  static struct fixture f;
  load_prec(&f, "bench/configs/llama-2-7b-3l-v512.json", 2, 1024, VL_PREC_AMP_BF16);
  lora_all_linear(&f, 8);
  f.z.ckpt = true;
  struct vl_cache_stats s = run(&f);
  const double traced = 3680792576.0;
  printf("  llama-2-7b x 3 layers LoRA ckpt amp: allocated %llu (traced %.0f)\n",
         (unsigned long long)s.peak_allocated, traced);
  assert_true(fabs((double)s.peak_allocated / traced - 1) < 0.02);
}

/* OPTDecoderLayer writes its dropouts and fc1/fc2 in the layer, each
 * result rebinding hidden_states: the attention's norm output goes as
 * self_attn returns (before the dropout), the MLP's norm output right
 * after fc1 (modeling_opt.py). OPT-1.3B, amp-bf16, AdamW (foreach), 8 x
 * 1,024 tokens: an H200 reserved 38,373,687,296 B
 * (data/reference/h200-torch-2.11/unseen-measured.json,
 * u-opt13-amp-adamw-b8s1024); released after the MLP and the dropout, the
 * replay reserved 4.2 % more. */
static void opt_layer_lets_go_of_its_norms_early(void **state) {
  (void)state;
  static struct fixture f;
  load(&f, "data/models/opt-1.3b.json", 8, 1024);
  struct vl_cache_stats s = run(&f);
  const double measured = 38373687296.0;
  printf("  opt-1.3b amp: reserved %llu (measured %.0f)\n", (unsigned long long)s.peak_reserved,
         measured);
  assert_true(fabs((double)s.peak_reserved / measured - 1) < 0.01);
}

/* the bill of config's job j against a measured peak (allocated, or
 * reserved): within tol */
static void job_against_measured(const char *config, const struct vl_job *j, bool reserved,
                                 double measured, double tol) {
  struct vl_arch a;
  tu_arch(config, &a);
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  tu_bill(&a, j, b);
  const uint64_t got = reserved ? b->peak_reserved_bytes : b->peak_allocated_bytes;
  printf("  %s: %s %llu (measured %.0f)\n", config, reserved ? "reserved" : "allocated",
         (unsigned long long)got, measured);
  free(b);
  assert_true(fabs((double)got / measured - 1) < tol);
}

/* the same for config's checkpointed job of batch x seq in precision prec
 * under optimizer (impl) */
static void against_measured(const char *config, uint64_t batch, uint64_t seq,
                             enum vl_precision prec, enum vl_optimizer optimizer,
                             enum vl_opt_impl impl, bool reserved, double measured, double tol) {
  struct vl_job j;
  vl_job_init(&j);
  j.batch = batch;
  j.seq = seq;
  j.precision = prec;
  j.optimizer = optimizer;
  j.opt_impl = impl;
  j.checkpointing = VL_CKPT_FULL;
  job_against_measured(config, &j, reserved, measured, tol);
}

/* A tied embedding's two gradients meet in its AccumulateGrad node's
 * input buffer (torch/csrc/autograd/input_buffer.cpp accumulate): under
 * autocast the head's arrives through the weight cast's backward, a fresh
 * tensor, and the embedding's is added into it in place; a third
 * vocabulary-sized fp32 table is never made. Gemma-7B, amp-bf16, plain
 * SGD, checkpointed, 1 x 1,024 tokens: an H200 peaked at 72,051,165,696 B
 * allocated (data/reference/h200-torch-2.11/unseen-measured.json,
 * x-gemma7b-amp-sgd-ckpt-b1s1024); summed out of place, the replay was
 * 4.4 % over. */
static void tied_gradients_meet_in_place_under_autocast(void **state) {
  (void)state;
  against_measured("data/models/gemma-7b.json", 1, 1024, VL_PREC_AMP_BF16, VL_OPT_SGD,
                   VL_IMPL_FOREACH, false, 72051165696.0, 0.005);
}

/* Autocast casts rotated q and k for SDPA as it calls the kernel (k's
 * first: C++ evaluates the wrapped call's arguments last to first), and
 * what the kernel does not save goes as it returns: in a checkpoint's
 * forward, under no_grad, right after it; the attention's locals then go
 * in the order Python made them. Llama-3.2-3B, amp-bf16, fused AdamW,
 * checkpointed, 4 x 1,024 tokens: an H100 reserved 57,461,964,800 B
 * (bench/results/reserved/breadth/); holding the casts to the
 * attention's return, the replay reserved 3.7 % more. */
static void autocast_casts_go_with_the_kernel(void **state) {
  (void)state;
  against_measured("bench/configs/llama-3.2-3b.json", 4, 1024, VL_PREC_AMP_BF16, VL_OPT_ADAMW,
                   VL_IMPL_FUSED, true, 57461964800.0, 0.01);
}

/* SDPA's backward under cuDNN's or flash's kernel (16-bit, no mask) makes
 * the three gradients and then one fp32 scratch the size of dq, with the
 * rows' statistics (OPT-1.3B AMP LoRA's and Pythia-1.4B AMP's allocator
 * histories: 64 + 1 MiB and 32 + 0.25 MiB a layer). Llama-2-13B, bf16,
 * plain SGD, checkpointed, 2 x 2,048 tokens: an H200 reserved
 * 55,608,082,432 B (data/reference/h200-torch-2.11/unseen-measured.json,
 * y-llama2-13b-bf16-sgd-ckpt-b2s2048); with the memory-efficient
 * kernel's two fp32 buffers, the replay reserved 2.1 % more. */
static void sdpa_backward_keeps_dq_alone_in_fp32(void **state) {
  (void)state;
  against_measured("data/models/llama-2-13b.json", 2, 2048, VL_PREC_BF16, VL_OPT_SGD,
                   VL_IMPL_FOREACH, true, 55608082432.0, 0.005);
}

/* Partial rotary (Phi's partial_rotary_factor, GPT-NeoX's rotary_pct)
 * rotates q's and k's first parts, both, before either is joined to its
 * rest (apply_rotary_pos_emb, modeling_phi.py); under autocast, q and k
 * are cast at SDPA's call, after the cache has copied k and v. Phi-2,
 * bf16, fused AdamW, checkpointed, 4 x 1,024 tokens: an H200 reserved
 * 24,767,365,120 B (data/reference/h200-torch-2.11/types-measured.json,
 * phi2-bf16-adamw-fused-ckpt); rotating and joining q before k, the
 * replay reserved 6.2 % more. */
static void partial_rotary_rotates_both_then_joins(void **state) {
  (void)state;
  against_measured("data/models/phi-2.json", 4, 1024, VL_PREC_BF16, VL_OPT_ADAMW, VL_IMPL_FUSED,
                   true, 24767365120.0, 0.01);
}

/* Softmax's backward on CUDA makes the input's gradient and then `grad *
 * output`, both of the scores' size (SoftMax.cu
 * softmax_backward_cuda_out). Mistral-7B, bf16, eager, plain SGD,
 * checkpointed, 1 x 2,048 tokens: an H200 peaked at 31,160,584,192 B
 * allocated (data/reference/h200-torch-2.11/unseen-measured.json,
 * y-mistral7b-bf16-sgd-eager-ckpt-b1s2048); without the temporary the
 * replay was 1.7 % under. */
static void softmax_backward_makes_a_product(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 1;
  j.seq = 2048;
  j.precision = VL_PREC_BF16;
  j.optimizer = VL_OPT_SGD;
  j.attention = VL_ATTN_EAGER;
  j.checkpointing = VL_CKPT_FULL;
  job_against_measured("data/models/mistral-7b.json", &j, false, 31160584192.0, 0.005);
}

/* ResNet-50's convolutions take cuDNN's workspaces by their shape, two in
 * the backward, and a block runs its shortcut after its layer. ResNet-50,
 * amp-bf16, SGD with momentum, 64 images of 224 pixels: an H200 reserved
 * 3,808,428,032 B (data/reference/h200-torch-2.11/types-measured.json,
 * resnet50-amp-sgdm); with one backward workspace of the medians by
 * kernel, the replay reserved 3.2 % less. */
static void resnet_workspaces_by_shape(void **state) {
  (void)state;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 64;
  j.image_size = 224;
  j.precision = VL_PREC_AMP_BF16;
  j.optimizer = VL_OPT_SGD_MOMENTUM;
  job_against_measured("data/models/resnet-50.json", &j, true, 3808428032.0, 0.01);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_family_pinned),
      cmocka_unit_test(bill_takes_the_replays_peak),
      cmocka_unit_test(adamw_states_are_eight_bytes_a_parameter),
      cmocka_unit_test(lora_keeps_nothing_for_frozen_weights),
      cmocka_unit_test(batch_checkpointing_and_attention),
      cmocka_unit_test(ddp_buckets_and_accumulation),
      cmocka_unit_test(repeated_micro_batches_counted),
      cmocka_unit_test(expandable_segments),
      cmocka_unit_test(out_of_memory_is_said),
      cmocka_unit_test(lora_input_cast_held_to_return),
      cmocka_unit_test(recomputation_ends_at_the_last_saved_tensor),
      cmocka_unit_test(opt_layer_lets_go_of_its_norms_early),
      cmocka_unit_test(tied_gradients_meet_in_place_under_autocast),
      cmocka_unit_test(autocast_casts_go_with_the_kernel),
      cmocka_unit_test(sdpa_backward_keeps_dq_alone_in_fp32),
      cmocka_unit_test(resnet_workspaces_by_shape),
      cmocka_unit_test(partial_rotary_rotates_both_then_joins),
      cmocka_unit_test(softmax_backward_makes_a_product),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
