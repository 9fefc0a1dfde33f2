/* The inference bill: weights + KV cache + short-lived activations of
 * prefill and decode + fixed overhead.
 * KV cache: 2 * L * g * d * S * B * bytes (vLLM, Kwon et al. 2023).
 * Contiguous caches (transformers DynamicCache) grow by torch.cat, which
 * holds the old and the new tensor of one layer at once; paged caches
 * (vLLM) round each sequence up to whole blocks. */

#include "internal.h"
#include "vramledger/caching.h"

static uint64_t weight_bytes(const struct vl_arch *arch, const struct vl_inventory *inv,
                             const struct vl_job *job, uint64_t wb, struct vl__ck *ck,
                             uint64_t *elems) {
  (void)arch;
  uint64_t total = 0;
  *elems = 0;
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    uint64_t one = vl__tp_split(t, job->tp, vl__mul(ck, t->rows, t->cols));
    uint64_t e = vl__mul(ck, one, t->count);
    *elems = vl__add(ck, *elems, e);
    total = vl__add(ck, total, vl__mul(ck, e, wb));
  }
  return total;
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
  uint64_t elems;
  uint64_t W = weight_bytes(arch, inv, job, pol.weight, &ck, &elems);
  vl__term_in(vl__term(bill, VL_LINE_PARAMETERS, "weights", "P_gpu * w",
                       "parameters x bytes per element", W),
              "P_gpu", (double)elems, "");

  /* KV cache, per token of one sequence: 2 * L * g * d * bytes */
  const uint64_t kvb = job->kv_bytes ? job->kv_bytes : e; /* fp8/int8 caches: 1 */
  uint64_t per_token = vl__mul4(&ck, 2 * L, g_loc, d, kvb);
  uint64_t S_cached = S, P_cached = P;
  if (job->kv_layout == VL_KV_PAGED) {
    S_cached = vl__round_up(S, job->kv_block_tokens);
    P_cached = vl__round_up(P, job->kv_block_tokens);
  }
  uint64_t kv_full = arch->causal ? vl__mul3(&ck, per_token, S_cached, B) : 0;
  uint64_t kv_prompt = arch->causal ? vl__mul3(&ck, per_token, P_cached, B) : 0;
  struct vl_term *tm =
      vl__term(bill, VL_LINE_KV_CACHE, "KV cache", "2 * L * g * d * S * B * k",
               "2 L H_kv d_head S B bytes; Kwon et al. 2023 (PagedAttention)", kv_full);
  vl__term_in(tm, "L", (double)L, "");
  vl__term_in(tm, "g", (double)g_loc, "heads");
  vl__term_in(tm, "d", (double)d, "");
  vl__term_in(tm, "S", (double)S_cached, "tokens");
  vl__term_in(tm, "B", (double)B, "");
  vl__term_in(tm, "k", (double)kvb, "bytes");

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
  uint64_t prefill = vl__add(&ck, vl__add(&ck, hid, vl__max(vl__add(&ck, qkv, attn), mlp)), logits);
  tm = vl__term(bill, VL_LINE_ACTIVATIONS, "prefill activations (one layer live)",
                "2*T*h*r + max(q/k/v + scores, MLP) + logits",
                "transformers generate(): no autograd, logits_to_keep=1", prefill);
  vl__term_in(tm, "T", (double)T, "tokens");

  /* decode: one token per sequence against S cached positions */
  uint64_t dec = vl__add(
      &ck, vl__mul4(&ck, B, arch->hidden, r, 2),
      vl__max(vl__mul(&ck, vl__mul3(&ck, B, a_loc, S), 4 + e), vl__mul4(&ck, B, I_loc, e, 3)));
  dec = vl__add(&ck, dec, vl__mul3(&ck, B, V_loc, e + 8)); /* logits, fp32 probs */
  uint64_t grow = 0;
  if (job->kv_layout == VL_KV_CONTIGUOUS && job->new_tokens)
    grow = vl__mul4(&ck, g_loc, d, vl__mul(&ck, S, B), kvb); /* torch.cat of one K or V */
  tm = vl__term(bill, VL_LINE_TRANSIENT, "decode step + cache growth",
                "B*a*S*(4+e) | B*I*3e, + one layer's K or V copied by torch.cat",
                "transformers DynamicCache.update (torch.cat)", vl__add(&ck, dec, grow));

  uint64_t ranks = vl__mul(&ck, job->tp, job->pp);
  uint64_t ctx = vl_context_bytes(ov, job) + (ranks > 1 ? ov->nccl_bytes : 0);
  vl__term(bill, VL_LINE_CONTEXT, "CUDA context + libraries (generate() only)", "measured",
           "bench/results/calibration/calibration.json (generate() runs)", ctx);
  /* generate() runs its matmuls on one thread: one handle's workspaces */
  const uint64_t ws = VL_WORKSPACE_THREADS_INFER * vl_workspace_thread_bytes(ov);
  vl__term(bill, VL_LINE_WORKSPACE, "cuBLAS workspace", "measured",
           "bench/results/calibration/basics.json", ws);

  uint64_t line_pre[VL_LINE_COUNT] = {0}, line_dec[VL_LINE_COUNT] = {0};
  line_pre[VL_LINE_PARAMETERS] = line_dec[VL_LINE_PARAMETERS] = W;
  line_pre[VL_LINE_WORKSPACE] = line_dec[VL_LINE_WORKSPACE] = ws;
  line_pre[VL_LINE_CONTEXT] = line_dec[VL_LINE_CONTEXT] = ctx;
  line_pre[VL_LINE_KV_CACHE] = kv_prompt;
  line_pre[VL_LINE_ACTIVATIONS] = prefill;
  line_dec[VL_LINE_KV_CACHE] = kv_full;
  line_dec[VL_LINE_TRANSIENT] = vl__add(&ck, dec, grow);
  /* what the caching allocator holds beyond the blocks: for transformers'
   * generate() (a contiguous cache), a replay of its allocations through
   * the allocator model (infer_replay.c); a paged cache (vLLM) preallocates
   * its blocks, so only the activations churn */
  const bool replayed = !ck.overflow && arch->causal && job->kv_layout == VL_KV_CONTIGUOUS;
  if (replayed) {
    struct vl_cache_stats st;
    vl_status s = vl__infer_replay(arch, inv, job, pol.weight, e, r, kvb, ws,
                                   job->allocator == VL_ALLOC_EXPANDABLE, &st, err);
    if (s != VL_OK) return s;
    line_pre[VL_LINE_RESERVE] = line_dec[VL_LINE_RESERVE] =
        vl__sub0(st.peak_reserved, st.peak_allocated);
  } else {
    double churn = job->allocator == VL_ALLOC_EXPANDABLE ? ov->allocator_churn_expandable
                                                         : ov->allocator_churn;
    line_pre[VL_LINE_RESERVE] = vl__scale(&ck, prefill, churn);
    line_dec[VL_LINE_RESERVE] = vl__scale(&ck, line_dec[VL_LINE_TRANSIENT], churn);
  }
  vl__term(bill, VL_LINE_RESERVE, "allocator reserve",
           replayed ? "replay of generate()'s allocations: peak reserved - peak allocated"
                    : "churn * transients",
           replayed ? "PyTorch CUDACachingAllocator.cpp; transformers cache_utils.py "
                      "(bench/results/generate-reserve)"
                    : "bench/results/calibration/calibration.json",
           vl__max(line_pre[VL_LINE_RESERVE], line_dec[VL_LINE_RESERVE]));
  if (ck.overflow)
    return vl__fail(err, VL_EOVERFLOW,
                    "the bill overflows 64 bits (batch %llu x %llu tokens is too large to model)",
                    (unsigned long long)B, (unsigned long long)S);

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
  bill->params_per_gpu = elems;
  bill->trainable_params = 0;
  bill->tokens = vl__mul(&ck, B, S);
  return VL_OK;
}
