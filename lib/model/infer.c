/* The inference bill: weights + KV cache + short-lived activations of
 * prefill and decode + fixed overhead.
 * KV cache: 2 * L * g * d * S * B * bytes (vLLM, Kwon et al. 2023).
 * Contiguous caches (transformers DynamicCache) grow by torch.cat, which
 * holds the old and the new tensor of one layer at once; paged caches
 * (vLLM) round each sequence up to whole blocks. */

#include "internal.h"
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
    line_pre[VL_LINE_RESERVE] = line_dec[VL_LINE_RESERVE] = vl__note(
        bill, ck,
        &(struct vl__def){VL_LINE_RESERVE,
                          "allocator reserve",
                          "replay_reserved - replay_allocated (generate()'s allocations replayed)",
                          "PyTorch CUDACachingAllocator.cpp; transformers cache_utils.py "
                          "(bench/results/generate-reserve)",
                          {{"replay_reserved", st.peak_reserved, "bytes"},
                           {"replay_allocated", st.peak_allocated, "bytes"}}});
    *replay_allocated = st.peak_allocated;
    return VL_OK;
  }
  struct vl__def d = {
      VL_LINE_RESERVE,
      "allocator reserve",
      "prefill * churn",
      "data/reference/h200-torch-2.11/calibration.json",
      {{"prefill", line_pre[VL_LINE_ACTIVATIONS], "bytes"},
       {"decode", line_dec[VL_LINE_TRANSIENT], "bytes"},
       VL__REAL("churn",
                job->allocator == VL_ALLOC_EXPANDABLE ? ov->allocator_churn_expandable
                                                      : ov->allocator_churn,
                "")}};
  line_pre[VL_LINE_RESERVE] = vl__def_value(ck, &d);
  d.formula = "decode * churn";
  line_dec[VL_LINE_RESERVE] = vl__def_value(ck, &d);
  d.formula = "max(prefill * churn, decode * churn) (the larger phase's)";
  vl__note(bill, ck, &d);
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
  vl__note(
      bill, ck,
      &(struct vl__def){grow[peak],
                        above ? "op-by-op replay above the lines (added)"
                              : "op-by-op replay below the lines (taken off)",
                        above ? "replay_allocated - analytic" : "analytic - replay_allocated",
                        "the generate() replay (infer_replay.c): its peak allocated is the "
                        "estimate's",
                        {{"replay_allocated", want, "bytes"}, {"analytic", analytic, "bytes"}}});
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

vl_status vl__bill_infer(const struct vl_arch *arch, const struct vl_inventory *inv,
                         const struct vl_job *job, const struct vl_overheads *ov,
                         struct vl_bill *bill, struct vl_err *err) {
  struct vl__ck ck = {false};
  struct vl__policy pol;
  vl__policy_get(job->precision, &pol);
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
  const uint64_t B = job->batch, P = job->seq, S = job->seq + job->new_tokens;
  const uint64_t e = pol.act, r = pol.resid, t = job->tp;
  const uint64_t L = arch->layers, d = arch->head_dim;
  const uint64_t a_loc = vl__div_ceil(arch->heads, t), g_loc = vl__div_ceil(arch->kv_heads, t);
  const uint64_t I_loc = vl__div_ceil(arch->intermediate, t), V_loc = vl__div_ceil(arch->vocab, t);
  const uint64_t elems = weight_elems(inv, job, &ck);
  const bool buf = arch->buffer_bytes > 0; /* GPT-BigCode's mask, beside the weights */
  uint64_t W = vl__note(bill, &ck,
                        &(struct vl__def){VL_LINE_PARAMETERS,
                                          "weights",
                                          buf ? "P_gpu * w + buffers" : "P_gpu * w",
                                          buf ? "parameters x bytes per element; buffers: "
                                                "modeling_gpt_bigcode.py"
                                              : "parameters x bytes per element",
                                          {{"P_gpu", elems},
                                           {"w", pol.weight, "bytes"},
                                           {"buffers", arch->buffer_bytes, "bytes"}}});

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
  struct vl__def kv = {VL_LINE_KV_CACHE,
                       "KV cache",
                       !arch->causal ? "0 (an encoder keeps no cache)"
                       : arch->mla   ? "L * (c + r) * k * S * B"
                                     : "2 * L * g * d * k * S * B",
                       arch->mla ? "MLA's latent cache (DeepSeek-AI 2024, arXiv 2405.04434 2.1.2)"
                                 : "2 L H_kv d_head S B bytes; Kwon et al. 2023 (PagedAttention)",
                       {{"L", L},
                        {"g", g_loc, "heads"},
                        {"d", d},
                        {"k", kvb, "bytes"},
                        {"S", P_cached, "tokens"},
                        {"B", B},
                        {"c", arch->kv_lora_rank},
                        {"r", arch->qk_rope_dim}}};
  const uint64_t kv_prompt = vl__def_value(&ck, &kv);
  kv.in[4].n = S_cached;
  const uint64_t kv_full = vl__note(bill, &ck, &kv);

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
  uint64_t prefill =
      vl__note(bill, &ck,
               &(struct vl__def){VL_LINE_ACTIVATIONS,
                                 "prefill activations (one layer live)",
                                 "hidden + max(qkv + scores, mlp) + logits",
                                 "transformers generate(): no autograd, logits_to_keep=1",
                                 {{"hidden", hid, "bytes (2 x T x h)"},
                                  {"qkv", qkv, "bytes"},
                                  {"scores", attn, "bytes"},
                                  {"mlp", mlp, "bytes"},
                                  {"logits", logits, "bytes"}}});

  /* decode: one token per sequence against S cached positions */
  /* the hidden states, the larger of attention's scores and the MLP, the
   * logits and their fp32 probabilities; a contiguous cache grows by
   * torch.cat of one layer's K or V */
  const bool grows = job->kv_layout == VL_KV_CONTIGUOUS && job->new_tokens;
  const uint64_t decode =
      vl__note(bill, &ck,
               &(struct vl__def){VL_LINE_TRANSIENT,
                                 "decode step + cache growth",
                                 grows ? "B*h*r*2 + max(B*a*S*(4 + e), B*I*e*3) + B*V*(e + 8) + "
                                         "g*d*(S*B)*k (torch.cat)"
                                       : "B*h*r*2 + max(B*a*S*(4 + e), B*I*e*3) + B*V*(e + 8)",
                                 "transformers DynamicCache.update (torch.cat)",
                                 {{"B", B},
                                  {"h", arch->hidden},
                                  {"r", r, "bytes"},
                                  {"a", a_loc, "heads"},
                                  {"S", S, "tokens"},
                                  {"e", e, "bytes"},
                                  {"I", I_loc},
                                  {"V", V_loc},
                                  {"g", g_loc, "heads"},
                                  {"d", d},
                                  {"k", kvb, "bytes"}}});

  uint64_t ranks = vl__mul(&ck, job->tp, job->pp);
  uint64_t ctx = vl__note(bill, &ck,
                          &(struct vl__def){VL_LINE_CONTEXT,
                                            "CUDA context + libraries (generate() only)",
                                            "context + nccl (when ranks > 1)",
                                            "data/reference/h200-torch-2.11/calibration.json "
                                            "(generate() runs)",
                                            {{"context", vl_context_bytes(ov, job), "bytes"},
                                             {"nccl", ranks > 1 ? ov->nccl_bytes : 0, "bytes"}}});
  /* generate() runs its matmuls on one thread: one handle's workspaces (the
   * card's, and ROCm's separate cuBLASLt one: precision.c) */
  const uint64_t lt = ov->cublaslt_workspace_bytes;
  const uint64_t ws =
      vl__note(bill, &ck,
               &(struct vl__def){VL_LINE_WORKSPACE,
                                 "cuBLAS workspace",
                                 lt ? "workspace + cublaslt (one thread: no backward)"
                                    : "workspace (one: no backward thread)",
                                 "data/reference/h200-torch-2.11/basics.json",
                                 {{"workspace", ov->cublas_workspace_bytes, "bytes"},
                                  {"cublaslt", lt, "bytes"}}});

  uint64_t line_pre[VL_LINE_COUNT] = {0}, line_dec[VL_LINE_COUNT] = {0};
  line_pre[VL_LINE_PARAMETERS] = line_dec[VL_LINE_PARAMETERS] = W;
  line_pre[VL_LINE_WORKSPACE] = line_dec[VL_LINE_WORKSPACE] = ws;
  line_pre[VL_LINE_CONTEXT] = line_dec[VL_LINE_CONTEXT] = ctx;
  line_pre[VL_LINE_KV_CACHE] = kv_prompt;
  line_pre[VL_LINE_ACTIVATIONS] = prefill;
  line_dec[VL_LINE_KV_CACHE] = kv_full;
  line_dec[VL_LINE_TRANSIENT] = decode;
  uint64_t replay_allocated = 0;
  vl_status s = infer_reserve(arch, inv, job, ov, &pol, kvb, bill, &ck, line_pre, line_dec,
                              &replay_allocated, err);
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
