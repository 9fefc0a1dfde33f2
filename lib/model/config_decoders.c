/* config.json -> struct vl_arch for the decoders beyond the Llama block's
 * first readers: each model type's keys and transformers' defaults
 * (transformers 5.17 models/<type>/configuration_<type>.py; the defaults
 * are checked by building configs that omit every key:
 * data/reference/transformers-5.17/param-counts.json), read into the parts
 * of include/vramledger/arch.h. */
#include <string.h>

#include "config_read.h"

static vl_status generic_parts(struct vl__reader *r, struct vl_arch *a);

/* What a model_type nobody described is read with: Llama's defaults
 * (configuration_llama.py), its biases, and routed experts where the config
 * names them as a described type would (generic_parts). */
const struct vl__type vl__generic_type = {"",
                                          VL_FAM_GENERIC,
                                          vl__read_decoder,
                                          generic_parts,
                                          {32000, 4096, 11008, 32, 32, 0, 2048, 0, 0},
                                          false,
                                          {NULL}};

/* The first of keys the config sets (not null), or NULL */
static const char *first_key(struct vl__reader *r, const char *const *keys, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (vl__has(r, keys[i])) return keys[i];
  return NULL;
}

static vl_status read_common(struct vl__reader *r, struct vl_arch *a,
                             const struct vl__decoder_defaults *d) {
  TRY(vl__get_u64(r, "vocab_size", d->vocab, 1, MAX_VOCAB, &a->vocab));
  TRY(vl__get_u64(r, "hidden_size", d->hidden, 1, MAX_HIDDEN, &a->hidden));
  TRY(vl__get_u64(r, "intermediate_size", d->inter, 1, MAX_WIDTH, &a->intermediate));
  TRY(vl__get_u64(r, "num_hidden_layers", d->layers, 1, MAX_LAYERS, &a->layers));
  TRY(vl__get_u64(r, "num_attention_heads", d->heads, 1, MAX_HEADS, &a->heads));
  TRY(vl__get_u64(r, "num_key_value_heads", d->kv ? d->kv : a->heads, 1, MAX_HEADS, &a->kv_heads));
  TRY(vl__get_u64(r, "max_position_embeddings", d->pos, 1, MAX_POS, &a->max_positions));
  TRY(vl__get_u64(r, "head_dim", d->head_dim, 0, MAX_HIDDEN, &a->head_dim));
  if (a->head_dim == 0) {
    if (a->hidden % a->heads)
      return vl__fail(r->err, VL_ERANGE,
                      "hidden_size %llu is not a multiple of num_attention_heads %llu "
                      "(set head_dim)",
                      (unsigned long long)a->hidden, (unsigned long long)a->heads);
    a->head_dim = a->hidden / a->heads;
  }
  int tie = 0;
  TRY(vl__get_bool(r, "tie_word_embeddings", d->tie, &tie));
  a->tie_embeddings = (unsigned)tie;
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  a->gated_mlp = a->rms_norm = a->norm_affine = a->final_norm = a->causal = 1;
  a->rotary_pct = 1.0;
  return VL_OK;
}

static vl_status bias_key(struct vl__reader *r, struct vl_arch *a, const char *key, int def) {
  int b = 0;
  TRY(vl__get_bool(r, key, def, &b));
  a->qkv_bias = a->o_bias = (unsigned)b;
  return VL_OK;
}

/* Routed experts: num_experts (or another key) of moe_intermediate_size,
 * top-k num_experts_per_tok. */
static vl_status experts_keyed(struct vl__reader *r, struct vl_arch *a, const char *key,
                               const char *kkey, uint64_t dn, uint64_t dk, uint64_t dwidth) {
  TRY(vl__get_u64(r, key, dn, 0, MAX_EXPERTS, &a->experts));
  if (!vl__has(r, kkey) && dk == 0 && a->experts)
    return vl__fail(r->err, VL_EKEY,
                    "key '%s' is missing or null: the experts each token goes to are needed "
                    "for the activations",
                    kkey);
  TRY(vl__get_u64(r, kkey, dk, 1, MAX_EXPERTS, &a->experts_per_token));
  TRY(vl__get_u64(r, "moe_intermediate_size", dwidth, 1, MAX_WIDTH, &a->moe_intermediate));
  if (a->experts && a->experts_per_token > a->experts)
    return vl__fail(r->err, VL_ERANGE, "%s %llu exceeds %s %llu", kkey,
                    (unsigned long long)a->experts_per_token, key, (unsigned long long)a->experts);
  return VL_OK;
}

/* the usual per-token key, num_experts_per_tok */
static vl_status experts(struct vl__reader *r, struct vl_arch *a, const char *key, uint64_t dn,
                         uint64_t dk, uint64_t dwidth) {
  return experts_keyed(r, a, key, "num_experts_per_tok", dn, dk, dwidth);
}

/* Qwen2-MoE / Qwen3-MoE: a layer is sparse unless listed in mlp_only_layers
 * or off the decoder_sparse_step grid (modeling_qwen2_moe.py
 * Qwen2MoeDecoderLayer) */
static vl_status qwen_sparse_layers(struct vl__reader *r, struct vl_arch *a) {
  uint64_t step = 1, only[64], n = 0;
  TRY(vl__get_u64(r, "decoder_sparse_step", 1, 1, MAX_LAYERS, &step));
  json_t *v = json_object_get(r->root, "mlp_only_layers");
  if (v && json_is_array(v) && json_array_size(v) > 0) {
    if (json_array_size(v) > 64)
      return vl__fail(r->err, VL_ERANGE, "key 'mlp_only_layers': more than 64 entries");
    for (size_t i = 0; i < json_array_size(v); i++) {
      json_t *x = json_array_get(v, i);
      if (!json_is_integer(x) || json_integer_value(x) < 0)
        return vl__fail(r->err, VL_EKEY, "key 'mlp_only_layers': entry %zu is not a layer index",
                        i);
      only[n++] = (uint64_t)json_integer_value(x);
    }
  }
  a->dense_layers = 0;
  for (uint64_t l = 0; l < a->layers; l++) {
    bool listed = false;
    for (uint64_t i = 0; i < n; i++)
      listed = listed || only[i] == l;
    if (listed || !a->experts || (l + 1) % step) a->dense_layers++;
  }
  return VL_OK;
}

/* How many layers slide (layer_types, or Gemma 3's sliding_window_pattern,
 * or Gemma 2's alternation). */
static vl_status sliding(struct vl__reader *r, struct vl_arch *a, uint64_t dwin, uint64_t every) {
  TRY(vl__get_u64(r, "sliding_window", dwin, 0, MAX_POS, &a->sliding_window));
  json_t *lt = json_object_get(r->root, "layer_types");
  a->sliding_layers = 0;
  if (lt && !json_is_null(lt) && !json_is_array(lt))
    return vl__fail(r->err, VL_EKEY, "key 'layer_types': expected an array, got %s",
                    vl__json_kind(lt));
  if (lt && json_is_array(lt)) {
    for (size_t i = 0; i < json_array_size(lt) && i < a->layers; i++) {
      json_t *x = json_array_get(lt, i);
      if (!json_is_string(x))
        return vl__fail(r->err, VL_EKEY, "key 'layer_types': entry %zu is not a string", i);
      if (strcmp(json_string_value(x), "sliding_attention") == 0) a->sliding_layers++;
    }
  } else if (every) {
    for (uint64_t l = 0; l < a->layers; l++)
      if ((l + 1) % every) a->sliding_layers++;
  }
  if (!a->sliding_window) a->sliding_layers = 0;
  return VL_OK;
}

/* DeepSeek's MoE with MLA: the defaults of each version's configuration
 * (configuration_deepseek_v2.py, configuration_deepseek_v3.py) */
struct deepseek_defaults {
  uint64_t experts, per_token, width, shared, dense;
};

static vl_status deepseek(struct vl__reader *r, struct vl_arch *a,
                          const struct deepseek_defaults *d) {
  uint64_t shared = 0, dense = 0;
  TRY(experts(r, a, "n_routed_experts", d->experts, d->per_token, d->width));
  TRY(vl__get_u64(r, "n_shared_experts", d->shared, 0, MAX_EXPERTS, &shared));
  TRY(vl__get_u64(r, "first_k_dense_replace", d->dense, 0, MAX_LAYERS, &dense));
  a->shared_intermediate = shared * a->moe_intermediate;
  a->dense_layers = dense < a->layers ? dense : a->layers;
  /* q_lora_rank null (DeepSeek-V2-Lite): one q_proj; missing: 1536 */
  json_t *ql = json_object_get(r->root, "q_lora_rank");
  if (ql && json_is_null(ql))
    a->q_lora_rank = 0;
  else
    TRY(vl__get_u64(r, "q_lora_rank", 1536, 1, MAX_HIDDEN, &a->q_lora_rank));
  TRY(vl__get_u64(r, "kv_lora_rank", 512, 1, MAX_HIDDEN, &a->kv_lora_rank));
  TRY(vl__get_u64(r, "qk_nope_head_dim", 128, 1, MAX_HIDDEN, &a->qk_nope_dim));
  TRY(vl__get_u64(r, "qk_rope_head_dim", 64, 1, MAX_HIDDEN, &a->qk_rope_dim));
  TRY(vl__get_u64(r, "v_head_dim", 128, 1, MAX_HIDDEN, &a->v_head_dim));
  a->mla = 1;
  a->head_dim = a->qk_nope_dim + a->qk_rope_dim;
  a->rotary_pct = (double)a->qk_rope_dim / (double)a->head_dim;
  int ab = 0;
  TRY(vl__get_bool(r, "attention_bias", 0, &ab));
  a->qkv_bias = (unsigned)ab; /* q_a_proj and kv_a_proj_with_mqa only */
  a->router_fp32 = 2; /* DeepseekV2/V3TopkRouter: F.linear(x.float(), W.float()), weights kept */
  return VL_OK;
}

vl_status vl__parts_deepseek_v2(struct vl__reader *r, struct vl_arch *a) {
  static const struct deepseek_defaults v2 = {64, 0, 1407, 2, 0};
  return deepseek(r, a, &v2);
}

/* DeepSeek-V3: V2's parts; its router scores by sigmoid and picks within
 * groups (modeling_deepseek_v3.py DeepseekV3TopkRouter) */
vl_status vl__parts_deepseek_v3(struct vl__reader *r, struct vl_arch *a) {
  static const struct deepseek_defaults v3 = {256, 8, 2048, 1, 3};
  return deepseek(r, a, &v3);
}

vl_status vl__parts_phi(struct vl__reader *r, struct vl_arch *a) {
  int qkln = 0;
  TRY(vl__get_prob(r, "partial_rotary_factor", 0.5, &a->rotary_pct));
  TRY(vl__get_prob(r, "resid_pdrop", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embd_pdrop", 0.0, &a->embed_dropout));
  TRY(vl__get_bool(r, "qk_layernorm", 0, &qkln));
  a->qk_norm = qkln ? 1 : 0;
  a->qkv_bias = a->o_bias = a->mlp_bias = a->head_bias = 1;
  a->gated_mlp = a->rms_norm = 0;
  a->gelu_python = 1; /* hidden_act gelu_new */
  a->shared_norm = a->parallel_residual = 1;
  a->rope_cat = 1; /* modeling_phi.py: torch.cat((query_rot, query_pass)) */
  return VL_OK;
}

vl_status vl__parts_stablelm(struct vl__reader *r, struct vl_arch *a) {
  int qkv = 0, qkln = 0, par = 0;
  TRY(vl__get_prob(r, "partial_rotary_factor", 0.25, &a->rotary_pct));
  TRY(vl__get_bool(r, "use_qkv_bias", 0, &qkv));
  TRY(vl__get_bool(r, "qk_layernorm", 0, &qkln));
  TRY(vl__get_bool(r, "use_parallel_residual", 0, &par));
  TRY(vl__get_prob(r, "hidden_dropout", 0.0, &a->hidden_dropout));
  a->qkv_bias = (unsigned)qkv; /* o_proj has none */
  a->qk_norm = qkln ? 1 : 0;   /* one LayerNorm (no bias) per head */
  a->rms_norm = 0;
  a->parallel_residual = a->shared_norm = (unsigned)par;
  a->rope_cat = 1; /* modeling_stablelm.py: torch.cat((query_rot, query_pass)) */
  return VL_OK;
}

/* A config whose sliding_window (default dwin; 0 or null: none) applies to
 * every layer, unless layer_types says which (modeling_mistral.py,
 * modeling_phi3.py: create_sliding_window_causal_mask where it is set). */
static vl_status every_layer_slides(struct vl__reader *r, struct vl_arch *a, uint64_t dwin) {
  TRY(sliding(r, a, dwin, 0));
  if (a->sliding_window && !json_object_get(r->root, "layer_types")) a->sliding_layers = a->layers;
  return VL_OK;
}

vl_status vl__parts_starcoder2(struct vl__reader *r, struct vl_arch *a) {
  int bias = 1;
  TRY(vl__get_bool(r, "use_bias", 1, &bias));
  a->qkv_bias = a->o_bias = a->mlp_bias = (unsigned)bias;
  TRY(vl__get_prob(r, "residual_dropout", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embedding_dropout", 0.0, &a->embed_dropout));
  TRY(every_layer_slides(r, a, 0));
  a->gated_mlp = a->rms_norm = 0; /* c_fc, gelu_pytorch_tanh, c_proj; LayerNorm with bias */
  return VL_OK;
}

vl_status vl__parts_granite(struct vl__reader *r, struct vl_arch *a) {
  double em = 1, rm = 1, ls = 1;
  int mb = 0;
  TRY(bias_key(r, a, "attention_bias", 0));
  TRY(vl__get_bool(r, "mlp_bias", 0, &mb));
  a->mlp_bias = (unsigned)mb;
  TRY(vl__get_num(r, "embedding_multiplier", 1.0, &em));
  TRY(vl__get_num(r, "residual_multiplier", 1.0, &rm));
  TRY(vl__get_num(r, "logits_scaling", 1.0, &ls));
  /* GraniteModel multiplies even by 1.0: the new tensors are made anyway
   * (modeling_granite.py: inputs_embeds * embedding_multiplier, residual +
   * hidden_states * residual_multiplier, logits / logits_scaling) */
  a->embed_scaled = a->resid_scaled = a->logits_scaled = 1;
  (void)em, (void)rm, (void)ls;
  return VL_OK;
}

/* ---- the parts each decoder type adds (VL_MODEL_TYPES' PARTS) ---- */

vl_status vl__parts_none(struct vl__reader *r, struct vl_arch *a) {
  (void)r, (void)a;
  return VL_OK;
}

/* Llama: attention_bias (q/k/v/o) and mlp_bias */
vl_status vl__parts_llama(struct vl__reader *r, struct vl_arch *a) {
  int mb = 0;
  TRY(bias_key(r, a, "attention_bias", 0));
  TRY(vl__get_bool(r, "mlp_bias", 0, &mb));
  a->mlp_bias = (unsigned)mb;
  return VL_OK;
}

/* Qwen2Attention: q/k/v with biases, o_proj without */
vl_status vl__parts_qwen2(struct vl__reader *r, struct vl_arch *a) {
  (void)r;
  a->qkv_bias = 1;
  return VL_OK;
}

/* Phi-3: fused projections and dropouts */
vl_status vl__parts_phi3(struct vl__reader *r, struct vl_arch *a) {
  TRY(vl__get_prob(r, "resid_pdrop", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embd_pdrop", 0.0, &a->embed_dropout));
  a->fused_qkv = a->fused_gate_up = a->qkv_sliced = 1;
  a->rope_cat = 1; /* modeling_phi3.py apply_rotary_pos_emb: torch.cat([rotated, pass]) */
  return every_layer_slides(r, a, 0);
}

/* Mistral reads no bias key; configuration_mistral.py: a sliding window of
 * 4096 where the key is absent, none where it is null */
vl_status vl__parts_mistral(struct vl__reader *r, struct vl_arch *a) {
  return every_layer_slides(r, a, json_object_get(r->root, "sliding_window") ? 0 : 4096);
}

/* Mixtral: Mistral's window, experts of intermediate_size */
vl_status vl__parts_mixtral(struct vl__reader *r, struct vl_arch *a) {
  TRY(every_layer_slides(r, a, 0));
  TRY(experts(r, a, "num_local_experts", 8, 2, a->intermediate));
  a->router_fp32 = 1; /* modeling_mixtral.py MixtralTopKRouter: softmax(logits.float()) kept */
  if (!a->experts)
    return vl__fail(r->err, VL_ERANGE, "key 'num_local_experts': 0 is out of range [1, %llu]",
                    (unsigned long long)MAX_EXPERTS);
  return VL_OK;
}

/* Gemma: embeddings scaled by sqrt(h) */
vl_status vl__parts_gemma(struct vl__reader *r, struct vl_arch *a) {
  (void)r;
  a->embed_scaled = a->norm_fp32_weight = 1; /* GemmaRMSNorm: x * (1 + weight) in fp32 */
  a->embed_scale_own = 1;                    /* GemmaTextScaledWordEmbedding (modeling_gemma.py) */
  return VL_OK;
}

/* Qwen3: q/k norms per head */
vl_status vl__parts_qwen3(struct vl__reader *r, struct vl_arch *a) {
  a->qk_norm = 1;
  return bias_key(r, a, "attention_bias", 0);
}

vl_status vl__parts_qwen3_moe(struct vl__reader *r, struct vl_arch *a) {
  a->qk_norm = 1;
  TRY(bias_key(r, a, "attention_bias", 0));
  TRY(experts(r, a, vl__has(r, "num_experts") ? "num_experts" : "num_local_experts", 128, 8, 768));
  return qwen_sparse_layers(r, a);
}

/* Qwen2-MoE: a shared expert with a sigmoid gate */
vl_status vl__parts_qwen2_moe(struct vl__reader *r, struct vl_arch *a) {
  int qb = 1;
  TRY(vl__get_bool(r, "qkv_bias", 1, &qb));
  a->qkv_bias = (unsigned)qb;
  TRY(experts(r, a, "num_experts", 60, 4, 1408));
  TRY(vl__get_u64(r, "shared_expert_intermediate_size", 5632, 0, MAX_WIDTH,
                  &a->shared_intermediate));
  a->shared_gate = a->shared_intermediate > 0;
  return qwen_sparse_layers(r, a);
}

/* Gemma 2 and 3: norms before and after attention and MLP, scaled
 * embeddings, softcapping (Gemma 2's defaults), sliding layers every
 * other (Gemma 2) or all but every sliding_window_pattern-th (Gemma 3,
 * which adds q/k norms) */
static vl_status gemma2_like(struct vl__reader *r, struct vl_arch *a, bool three) {
  TRY(bias_key(r, a, "attention_bias", 0));
  a->sandwich_norm = a->embed_scaled = a->norm_fp32_weight = 1;
  a->embed_scale_own = 1; /* Gemma2/3TextScaledWordEmbedding */
  a->qk_norm = three;
  TRY(vl__get_num(r, "attn_logit_softcapping", three ? 0.0 : 50.0, &a->attn_softcap));
  TRY(vl__get_num(r, "final_logit_softcapping", three ? 0.0 : 30.0, &a->final_softcap));
  uint64_t every = 2;
  if (three) TRY(vl__get_u64(r, "sliding_window_pattern", 6, 1, MAX_LAYERS, &every));
  return sliding(r, a, 4096, every);
}

vl_status vl__parts_gemma2(struct vl__reader *r, struct vl_arch *a) {
  return gemma2_like(r, a, false);
}

vl_status vl__parts_gemma3(struct vl__reader *r, struct vl_arch *a) {
  return gemma2_like(r, a, true);
}

/* OLMo 2: q/k norms over all heads, norms after attention and MLP only */
vl_status vl__parts_olmo2(struct vl__reader *r, struct vl_arch *a) {
  a->qk_norm = 2, a->post_norm = 1;
  /* Olmo2RMSNorm: (weight * x.float()).to(dtype); q_embed.to(q_type) */
  a->norm_fp32_weight = a->rope_cast_back = 1;
  return bias_key(r, a, "attention_bias", 0);
}

vl_status vl__parts_olmoe(struct vl__reader *r, struct vl_arch *a) {
  a->qk_norm = 2;
  TRY(bias_key(r, a, "attention_bias", 0));
  return experts(r, a, "num_experts", 64, 8, a->intermediate);
}

/* GLM: partial rotary joined by torch.cat, q/k/v biases, fused gate_up */
vl_status vl__parts_glm(struct vl__reader *r, struct vl_arch *a) {
  TRY(vl__get_prob(r, "partial_rotary_factor", 0.5, &a->rotary_pct));
  int b = 1;
  TRY(vl__get_bool(r, "attention_bias", 1, &b));
  a->qkv_bias = (unsigned)b; /* q/k/v only: o_proj has none */
  a->fused_gate_up = 1;
  a->rope_cat = 1; /* modeling_glm.py apply_rotary_pos_emb: torch.cat([q_embed, q_pass]) */
  return VL_OK;
}

/* GLM-4-0414: GLM's block with a norm after attention and after the MLP as
 * well (post_self_attn_layernorm, post_mlp_layernorm: modeling_glm4.py
 * Glm4DecoderLayer) */
vl_status vl__parts_glm4(struct vl__reader *r, struct vl_arch *a) {
  TRY(vl__parts_glm(r, a));
  a->sandwich_norm = 1;
  return VL_OK;
}

/* SmolLM3: Llama's block; no rotary in the layers no_rope_layers marks 0
 * (default: every no_rope_layer_interval-th); use_sliding_window slides the
 * layers layer_types names (configuration_smollm3.py, modeling_smollm3.py
 * SmolLM3Attention.use_rope) */
vl_status vl__parts_smollm3(struct vl__reader *r, struct vl_arch *a) {
  uint64_t every = 4;
  int use_sw = 0;
  TRY(vl__parts_llama(r, a));
  TRY(vl__get_u64(r, "no_rope_layer_interval", 4, 1, MAX_LAYERS, &every));
  json_t *v = json_object_get(r->root, "no_rope_layers");
  a->nope_layers = 0;
  if (v && !json_is_null(v)) {
    if (!json_is_array(v))
      return vl__fail(r->err, VL_EKEY, "key 'no_rope_layers': expected an array, got %s",
                      vl__json_kind(v));
    for (size_t i = 0; i < json_array_size(v) && i < a->layers; i++) {
      json_t *x = json_array_get(v, i);
      if (!json_is_integer(x) && !json_is_boolean(x))
        return vl__fail(r->err, VL_EKEY, "key 'no_rope_layers': entry %zu is not 0 or 1", i);
      if (json_is_integer(x) ? json_integer_value(x) == 0 : json_is_false(x)) a->nope_layers++;
    }
  } else {
    a->nope_layers = a->layers / every;
  }
  TRY(vl__get_bool(r, "use_sliding_window", 0, &use_sw));
  TRY(sliding(r, a, 0, 0));
  if (!use_sw) a->sliding_window = a->sliding_layers = 0;
  /* without layer_types the layers that slide are those without rotary */
  if (a->sliding_window && !json_object_get(r->root, "layer_types"))
    a->sliding_layers = a->nope_layers;
  return VL_OK;
}

/* EXAONE-4: q/k norms per head, norms after attention and MLP only (as
 * OLMo 2), sliding layers all but every sliding_window_pattern-th; with a
 * window, the global layers have no rotary (configuration_exaone4.py,
 * modeling_exaone4.py Exaone4Attention: "global NoPE") */
vl_status vl__parts_exaone4(struct vl__reader *r, struct vl_arch *a) {
  uint64_t every = 4;
  a->qk_norm = 1, a->post_norm = 1;
  json_t *sw = json_object_get(r->root, "sliding_window");
  json_t *pat = json_object_get(r->root, "sliding_window_pattern");
  if (pat && json_is_string(pat)) { /* "LLLG": a window of 4 layers, the last global */
    every = strlen(json_string_value(pat));
    if (!every) return vl__fail(r->err, VL_EKEY, "key 'sliding_window_pattern': an empty pattern");
  } else {
    TRY(vl__get_u64(r, "sliding_window_pattern", 4, 0, MAX_LAYERS, &every));
  }
  if (sw && json_is_null(sw)) return VL_OK; /* no window: rotary everywhere */
  TRY(sliding(r, a, 4096, every));
  a->nope_global = a->sliding_window > 0;
  return VL_OK;
}

/* gpt-oss: biases on q/k/v/o, a sink logit a head, experts of
 * intermediate_size with biases and a router with a bias, the clamped GLU
 * (alpha 1.702, limit 7) on the interleaved gate and up columns, sliding
 * layers alternating with full ones; softmax in the logits' dtype
 * (modeling_gpt_oss.py: eager_attention_forward, GptOssExperts,
 * GptOssTopKRouter) */
vl_status vl__parts_gpt_oss(struct vl__reader *r, struct vl_arch *a) {
  TRY(bias_key(r, a, "attention_bias", 1));
  TRY(experts(r, a, "num_local_experts", 128, 4, a->intermediate));
  TRY(sliding(r, a, 128, 2));
  a->attn_sinks = a->expert_bias = a->gate_clamp = 1;
  a->softmax_native = 1;
  return VL_OK;
}

/* A type nobody described: Llama's attention_bias and mlp_bias, and routed
 * experts under the keys the MoE types of transformers 5.17 use for them
 * (num_local_experts: Mixtral, GraniteMoE; num_experts: Qwen-MoE, OLMoE;
 * n_routed_experts: DeepSeek, GLM-4-MoE; moe_num_experts: ERNIE-4.5), the
 * experts a token goes to (num_experts_per_tok, moe_k), their width
 * (moe_intermediate_size, else intermediate_size), shared experts
 * (shared_expert_intermediate_size, or n_shared_experts /
 * moe_num_shared_experts experts of that width) and the dense layers before
 * the first sparse one (first_k_dense_replace, moe_layer_start_index).
 * Read as a dense decoder, such a model's experts were missing: -31 to
 * -88 % of the dry run's peak (bench/results/model-types,
 * generic decoder). */
static vl_status generic_parts(struct vl__reader *r, struct vl_arch *a) {
  static const char *const n_keys[] = {"num_local_experts", "num_experts", "n_routed_experts",
                                       "moe_num_experts"};
  static const char *const k_keys[] = {"num_experts_per_tok", "moe_k"};
  static const char *const s_keys[] = {"n_shared_experts", "moe_num_shared_experts"};
  static const char *const d_keys[] = {"first_k_dense_replace", "moe_layer_start_index"};
  TRY(vl__parts_llama(r, a));
  int moe = 1;
  TRY(vl__get_bool(r, "is_moe", 1, &moe)); /* Doge: experts listed but turned off */
  if (!moe) return VL_OK;
  const char *nk = first_key(r, n_keys, 4), *kk = first_key(r, k_keys, 2);
  uint64_t n = 0, shared = 0, dense = 0;
  if (nk) TRY(vl__get_u64(r, nk, 0, 0, MAX_EXPERTS, &n));
  if (n < 2) return VL_OK; /* one expert or none: a dense MLP */
  TRY(experts_keyed(r, a, nk, kk ? kk : "num_experts_per_tok", n, 0, a->intermediate));
  const char *sk = first_key(r, s_keys, 2), *dk = first_key(r, d_keys, 2);
  if (vl__has(r, "shared_expert_intermediate_size")) {
    TRY(vl__get_u64(r, "shared_expert_intermediate_size", 0, 0, MAX_WIDTH,
                    &a->shared_intermediate));
  } else if (sk) {
    TRY(vl__get_u64(r, sk, 0, 0, MAX_EXPERTS, &shared));
    a->shared_intermediate = shared * a->moe_intermediate;
  }
  if (dk) TRY(vl__get_u64(r, dk, 0, 0, MAX_LAYERS, &dense));
  a->dense_layers = dense < a->layers ? dense : a->layers;
  return VL_OK;
}

vl_status vl__read_decoder(struct vl__reader *r, struct vl_arch *a) {
  TRY(read_common(r, a, &r->type->d));
  TRY(r->type->parts(r, a));
  /* a sparse MoE without a width of its own uses intermediate_size */
  if (a->experts && !a->moe_intermediate) a->moe_intermediate = a->intermediate;
  return VL_OK;
}

/* Falcon: fused query_key_value (multi-query: one key/value head; the new
 * decoder architecture: num_kv_heads), parallel attention and MLP, GELU MLP
 * of ffn_hidden_size, no biases by default (modeling_falcon.py). */
vl_status vl__read_falcon(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {HF_SHAPE("ffn_hidden_size"), 65024, 4544, 32, 71, 0, 2048};
  TRY(vl__read_shape(r, a, &k));
  int mq = 1, par = 1, newarch = 0, bias = 0, alibi = 0, tie = 1;
  uint64_t nln = 0;
  TRY(vl__get_bool(r, "multi_query", 1, &mq));
  TRY(vl__get_bool(r, "parallel_attn", 1, &par));
  TRY(vl__get_bool(r, "new_decoder_architecture", 0, &newarch));
  TRY(vl__get_bool(r, "bias", 0, &bias));
  TRY(vl__get_bool(r, "alibi", 0, &alibi));
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  TRY(vl__get_u64(r, "num_ln_in_parallel_attn", newarch ? 2 : 1, 1, 2, &nln));
  if (newarch)
    TRY(vl__get_u64(r, "num_kv_heads", a->heads, 1, MAX_HEADS, &a->kv_heads));
  else
    a->kv_heads = mq ? 1 : a->heads;
  TRY(vl__get_prob(r, "hidden_dropout", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  a->tie_embeddings = (unsigned)tie;
  a->qkv_bias = a->o_bias = a->mlp_bias = (unsigned)bias;
  a->parallel_residual = (unsigned)(par || newarch);
  a->shared_norm = (unsigned)(a->parallel_residual && nln == 1);
  a->rotary_pct = alibi ? 0.0 : 1.0;
  a->norm_affine = a->final_norm = a->fused_qkv = a->causal = 1;
  return VL_OK;
}
