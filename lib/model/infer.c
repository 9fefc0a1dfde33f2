/* The inference bill: weights + KV cache + short-lived activations of
 * prefill and decode + fixed overhead.
 * KV cache: 2 * L * g * d * S * B * bytes (vLLM, Kwon et al. 2023).
 * Contiguous caches (transformers DynamicCache) grow by torch.cat, which
 * holds the old and the new tensor of one layer at once; paged caches
 * (vLLM) round each sequence up to whole blocks. */

#include "internal.h"
#include "terms.h"
#include "vramledger/caching.h"

/* the elements this GPU stores (tensor parallelism splits the matmuls) */
static uint64_t weight_elems(const struct vl_inventory *inv, const struct vl_job *job,
                             struct vl__ck *ck) {
  uint64_t elems = 0;
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    uint64_t one = vl__tp_split(t, job->tp, vl__mul(ck, t->rows, t->cols));
    elems = vl__add(ck, elems, vl__mul(ck, one, t->count));
  }
  return elems;
}

/* what the caching allocator holds beyond the blocks, in each phase: for
 * transformers' generate() (a contiguous cache), a replay of its
 * allocations through the allocator model (infer_replay.c); a paged cache
 * (vLLM) preallocates its blocks, so only the activations churn */
static vl_status infer_reserve(const struct vl_arch *arch, const struct vl_inventory *inv,
                               const struct vl_job *job, const struct vl_overheads *ov,
                               const struct vl__policy *pol, uint64_t kvb, struct vl_bill *bill,
                               struct vl__ck *ck, uint64_t *line_pre, uint64_t *line_dec,
                               uint64_t *replay_allocated, struct vl_err *err) {
  const bool replayed = !ck->overflow && arch->causal && job->kv_layout == VL_KV_CONTIGUOUS;
  *replay_allocated = 0;
  if (replayed) {
    struct vl_cache_stats st;
    vl_status s = vl__infer_replay(arch, inv, job, pol->weight, pol->act, pol->resid, kvb,
                                   vl_workspace_threads(job) * vl_workspace_thread_bytes(ov),
                                   job->allocator == VL_ALLOC_EXPANDABLE, &st, err);
    if (s != VL_OK) return s;
    line_pre[VL_LINE_RESERVE] = line_dec[VL_LINE_RESERVE] = vl__note_replay_reserve(
        bill, ck, VL__T_REPLAY_RESERVE_GENERATE,
        &(struct vl__in_replay_reserve){.replay_reserved = st.peak_reserved,
                                        .replay_allocated = st.peak_allocated});
    *replay_allocated = st.peak_allocated;
    return VL_OK;
  }
  const struct vl__in_reserve_generate d = {
      .prefill = line_pre[VL_LINE_ACTIVATIONS],
      .decode = line_dec[VL_LINE_TRANSIENT],
      .churn = job->allocator == VL_ALLOC_EXPANDABLE ? ov->allocator_churn_expandable
                                                     : ov->allocator_churn,
  };
  line_pre[VL_LINE_RESERVE] = vl__value_reserve_generate(ck, VL__T_RESERVE_PREFILL, &d);
  line_dec[VL_LINE_RESERVE] = vl__value_reserve_generate(ck, VL__T_RESERVE_DECODE, &d);
  vl__note_reserve_generate(bill, ck, VL__T_RESERVE_GENERATE, &d);
  return VL_OK;
}

/* the replay writes generate()'s allocations op by op (infer_replay.c):
 * its peak allocated is the estimate's. The difference goes to the peak
 * phase's activations (prefill) or transient (decode) line; no phase stays
 * above it (the training bill does the same: bill.c). */
static void infer_replay_peak(struct vl_bill *bill, struct vl__ck *ck, const struct vl_job *job,
                              uint64_t want, uint64_t *line_pre, uint64_t *line_dec) {
  uint64_t *ph[2] = {line_pre, line_dec}, have[2] = {0, 0};
  const enum vl_line grow[2] = {VL_LINE_ACTIVATIONS, VL_LINE_TRANSIENT};
  for (int k = 0; k < 2; k++)
    for (int l = 0; l < VL_LINE_COUNT; l++)
      if (vl_line_in_allocated((enum vl_line)l)) have[k] += ph[k][l];
  const int peak = job->new_tokens && have[1] > have[0];
  const uint64_t analytic = have[peak];
  if (want > have[peak]) ph[peak][grow[peak]] += want - have[peak];
  for (int k = 0; k < 2; k++) {
    static const enum vl_line trim[] = {VL_LINE_ACTIVATIONS, VL_LINE_TRANSIENT};
    for (size_t t = 0; t < sizeof trim / sizeof trim[0] && have[k] > want; t++) {
      uint64_t cut = vl__min(have[k] - want, ph[k][trim[t]]);
      ph[k][trim[t]] -= cut;
      have[k] -= cut;
    }
  }
  const bool above = want >= analytic;
  /* on the line that grows: prefill's activations, decode's transient */
  static const enum vl__term gap[2][2] = {
      {VL__T_GENERATE_REPLAY_BELOW_PREFILL, VL__T_GENERATE_REPLAY_ABOVE_PREFILL},
      {VL__T_GENERATE_REPLAY_BELOW_DECODE, VL__T_GENERATE_REPLAY_ABOVE_DECODE}};
  vl__note_replay_gap(bill, ck, gap[peak][above],
                      &(struct vl__in_replay_gap){.replay_allocated = want, .analytic = analytic});
}

/* the bill from the two phases' lines: the peak phase's, and each line's
 * maximum */
static void infer_peak(const struct vl_job *job, const uint64_t *line_pre, const uint64_t *line_dec,
                       uint64_t ctx, struct vl_bill *bill) {
  uint64_t pre = 0, dc = 0;
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    if (!vl_line_in_allocated((enum vl_line)l)) continue;
    pre += line_pre[l];
    dc += line_dec[l];
  }
  bill->phase_peak[VL_PH_PREFILL] = pre;
  bill->phase_peak[VL_PH_DECODE] = job->new_tokens ? dc : 0;
  bool decode_peak = job->new_tokens && dc > pre;
  bill->peak_phase = decode_peak ? VL_PH_DECODE : VL_PH_PREFILL;
  const uint64_t *peak = decode_peak ? line_dec : line_pre;
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    bill->lines[l] = peak[l];
    bill->line_max[l] = vl__max(line_pre[l], job->new_tokens ? line_dec[l] : 0);
    if (line_pre[l]) bill->live[l] |= 1u << VL_PH_PREFILL;
    if (job->new_tokens && line_dec[l]) bill->live[l] |= 1u << VL_PH_DECODE;
  }
  bill->peak_allocated_bytes = decode_peak ? dc : pre;
  bill->peak_reserved_bytes = bill->peak_allocated_bytes + peak[VL_LINE_RESERVE];
  bill->cuda_context_bytes = ctx;
  bill->total_bytes = bill->peak_reserved_bytes + ctx;
}

/* what generate() of this model and job refuses before anything is billed */
vl_status vl__infer_check(const struct vl_arch *arch, const struct vl_job *job,
                          struct vl_err *err) {
  if (arch->enc_layers && job->new_tokens)
    return vl__fail(err, VL_ECONFLICT,
                    "generate() of an encoder-decoder (%s) is not modelled yet; measure it "
                    "with `vramledger trace`",
                    arch->model_type);
  if (!arch->causal && job->new_tokens)
    return vl__fail(err, VL_ECONFLICT,
                    "%s is an encoder: it does not generate; use "
                    "--new-tokens 0",
                    arch->model_type);
  if (job->kv_layout == VL_KV_PAGED && (job->kv_block_tokens == 0 || job->kv_block_tokens > 4096))
    return vl__fail(err, VL_ERANGE, "--kv-block must be between 1 and 4096 tokens");
  return VL_OK;
}

vl_status vl__bill_infer(const struct vl_arch *arch, const struct vl_inventory *inv,
                         const struct vl_job *job, const struct vl_overheads *ov,
                         struct vl_bill *bill, struct vl_err *err) {
  vl_status s = vl__infer_check(arch, job, err);
  if (s != VL_OK) return s;
  struct vl__ck ck = {false};
  struct vl__policy pol;
  vl__policy_get(job->precision, &pol);
  const uint64_t B = job->batch, P = job->seq, S = job->seq + job->new_tokens;
  const uint64_t e = pol.act, r = pol.resid, t = job->tp;
  const uint64_t L = arch->layers, d = arch->head_dim;
  const uint64_t a_loc = vl__div_ceil(arch->heads, t), g_loc = vl__div_ceil(arch->kv_heads, t);
  const uint64_t I_loc = vl__div_ceil(arch->intermediate, t), V_loc = vl__div_ceil(arch->vocab, t);
  const uint64_t elems = weight_elems(inv, job, &ck);
  const bool buf = arch->buffer_bytes > 0; /* GPT-BigCode's mask, beside the weights */
  uint64_t W = vl__note_weights(
      bill, &ck, buf ? VL__T_WEIGHTS_BUFFERS : VL__T_WEIGHTS,
      &(struct vl__in_weights){.P_gpu = elems, .w = pol.weight, .buffers = arch->buffer_bytes});

  /* KV cache, per token of one sequence: 2 * L * g * d * bytes */
  const uint64_t kvb = job->kv_bytes ? job->kv_bytes : e; /* fp8/int8 caches: 1 */
  uint64_t S_cached = S, P_cached = P;
  if (job->kv_layout == VL_KV_PAGED) {
    S_cached = vl__round_up(S, job->kv_block_tokens);
    P_cached = vl__round_up(P, job->kv_block_tokens);
  }
  /* the cache of the prompt (prefill), then of every token (decode); MLA
   * caches its compressed latent and the shared rotary key, one "head" of
   * c + r a token (modeling_deepseek_v3.py: past_key_values.update(kv_nope,
   * k_rot) before expand_kv) */
  const enum vl__term kv_term =
      !arch->causal ? (arch->mla ? VL__T_KV_CACHE_ENCODER_MLA : VL__T_KV_CACHE_ENCODER)
      : arch->mla   ? VL__T_KV_CACHE_MLA
                    : VL__T_KV_CACHE;
  struct vl__in_kv_cache kv = {.L = L,
                               .g = g_loc,
                               .d = d,
                               .k = kvb,
                               .S = P_cached,
                               .B = B,
                               .c = arch->kv_lora_rank,
                               .r = arch->qk_rope_dim};
  const uint64_t kv_prompt = vl__value_kv_cache(&ck, kv_term, &kv);
  kv.S = S_cached;
  const uint64_t kv_full = vl__note_kv_cache(bill, &ck, kv_term, &kv);

  /* prefill: one layer's live intermediates, no autograd */
  uint64_t T = vl__mul(&ck, B, P);
  uint64_t hid = vl__mul4(&ck, T, arch->hidden, r, 2);
  uint64_t qkv = vl__mul4(&ck, T, a_loc + 2 * g_loc, d, e);
  /* eager: masked scores (e), softmax's fp32 copy of them and its fp32
   * output live together (F.softmax(x, dtype=float32)); GPT-2's softmax
   * without autocast: scores and probabilities in e */
  const uint64_t sm = vl__softmax_bytes(arch, pol.autocast, e);
  uint64_t attn = job->attention == VL_ATTN_EAGER
                      ? vl__mul(&ck, vl__mul4(&ck, B, a_loc, P, P), e + (sm != e ? 4 : 0) + sm)
                      : vl__mul4(&ck, T, a_loc, d, e);
  uint64_t mlp = vl__mul4(&ck, T, I_loc, e, arch->gated_mlp ? 3 : 2);
  if (arch->experts) mlp = vl__mul(&ck, mlp, arch->experts_per_token);
  uint64_t logits_rows = arch->causal ? B : T; /* generate keeps the last position */
  uint64_t logits = vl__mul3(&ck, logits_rows, V_loc, e + 4);
  uint64_t prefill = vl__note_prefill(
      bill, &ck, VL__T_PREFILL,
      &(struct vl__in_prefill){
          .hidden = hid, .qkv = qkv, .scores = attn, .mlp = mlp, .logits = logits});

  /* decode: one token per sequence against S cached positions */
  /* the hidden states, the larger of attention's scores and the MLP, the
   * logits and their fp32 probabilities; a contiguous cache grows by
   * torch.cat of one layer's K or V */
  const bool grows = job->kv_layout == VL_KV_CONTIGUOUS && job->new_tokens;
  const uint64_t decode = vl__note_decode(bill, &ck, grows ? VL__T_DECODE_GROWS : VL__T_DECODE,
                                          &(struct vl__in_decode){
                                              .B = B,
                                              .h = arch->hidden,
                                              .r = r,
                                              .a = a_loc,
                                              .S = S,
                                              .e = e,
                                              .I = I_loc,
                                              .V = V_loc,
                                              .g = g_loc,
                                              .d = d,
                                              .k = kvb,
                                          });

  uint64_t ranks = vl__mul(&ck, job->tp, job->pp);
  uint64_t ctx = vl__note_context(bill, &ck, VL__T_CONTEXT_GENERATE,
                                  &(struct vl__in_context){
                                      .context = vl_context_bytes(ov, job),
                                      .nccl = ranks > 1 ? ov->nccl_bytes : 0,
                                  });
  /* generate() runs its matmuls on one thread: one handle's workspaces (the
   * card's, and ROCm's separate cuBLASLt one: precision.c) */
  const uint64_t lt = ov->cublaslt_workspace_bytes;
  const uint64_t ws = vl__note_workspaces(
      bill, &ck, lt ? VL__T_WORKSPACE_GENERATE_LT : VL__T_WORKSPACE_GENERATE,
      &(struct vl__in_workspaces){.workspace = ov->cublas_workspace_bytes, .cublaslt = lt});

  uint64_t line_pre[VL_LINE_COUNT] = {0}, line_dec[VL_LINE_COUNT] = {0};
  line_pre[VL_LINE_PARAMETERS] = line_dec[VL_LINE_PARAMETERS] = W;
  line_pre[VL_LINE_WORKSPACE] = line_dec[VL_LINE_WORKSPACE] = ws;
  line_pre[VL_LINE_CONTEXT] = line_dec[VL_LINE_CONTEXT] = ctx;
  line_pre[VL_LINE_KV_CACHE] = kv_prompt;
  line_pre[VL_LINE_ACTIVATIONS] = prefill;
  line_dec[VL_LINE_KV_CACHE] = kv_full;
  line_dec[VL_LINE_TRANSIENT] = decode;
  uint64_t replay_allocated = 0;
  s = infer_reserve(arch, inv, job, ov, &pol, kvb, bill, &ck, line_pre, line_dec, &replay_allocated,
                    err);
  if (s != VL_OK) return s;
  if (replay_allocated) infer_replay_peak(bill, &ck, job, replay_allocated, line_pre, line_dec);
  if (ck.overflow)
    return vl__fail(err, VL_EOVERFLOW,
                    "the bill overflows 64 bits (batch %llu x %llu tokens is too large to model)",
                    (unsigned long long)B, (unsigned long long)S);

  infer_peak(job, line_pre, line_dec, ctx, bill);
  bill->params_per_gpu = elems;
  bill->trainable_params = 0;
  bill->tokens = vl__mul(&ck, B, S);
  return VL_OK;
}
