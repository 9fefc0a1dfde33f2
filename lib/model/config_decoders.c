/* config.json -> struct vl_arch for the decoders beyond the Llama block's
 * first readers: each model type's keys and transformers' defaults
 * (transformers 5.17 models/<type>/configuration_<type>.py; the defaults
 * are checked by building configs that omit every key:
 * data/reference/transformers-5.17/param-counts.json), read into the parts
 * of include/vramledger/arch.h. */
#include <string.h>

#include "config_read.h"

/* Defaults of the keys every Llama-like decoder has. */
struct decoder_defaults {
  uint64_t vocab, hidden, inter, layers, heads, kv, pos, head_dim; /* kv, head_dim 0: heads, h/a */
  int tie;
};

static const struct decoder_defaults *defaults_of(enum vl_family f) {
  static const struct decoder_defaults llama = {32000, 4096, 11008, 32, 32, 0, 2048, 0, 0},
                                       mistral = {32000, 4096, 14336, 32, 32, 8, 131072, 0, 0},
                                       qwen2 = {151936, 4096, 22016, 32, 32, 0, 32768, 0, 0},
                                       gemma = {256000, 3072, 24576, 28, 16, 0, 8192, 256, 1},
                                       phi3 = {32064, 3072, 8192, 32, 32, 0, 4096, 0, 0},
                                       qwen3 = {151936, 4096, 22016, 32, 32, 0, 32768, 128, 0},
                                       qwen2_moe = {151936, 2048, 5632, 24, 16, 0, 32768, 0, 0},
                                       qwen3_moe = {151936, 2048, 6144, 24, 32, 4, 32768, 0, 0},
                                       gemma2 = {256000, 2304, 9216, 26, 8, 4, 8192, 256, 1},
                                       gemma3 = {262208, 2304, 9216, 26, 8, 4, 131072, 256, 1},
                                       phi = {51200, 2048, 8192, 24, 32, 0, 2048, 0, 0},
                                       olmo2 = {50304, 4096, 11008, 32, 32, 0, 2048, 0, 0},
                                       olmoe = {50304, 2048, 2048, 16, 16, 0, 4096, 0, 0},
                                       granite = {32000, 4096, 11008, 32, 32, 0, 2048, 0, 0},
                                       starcoder2 = {49152, 3072, 12288, 30, 24, 2, 4096, 0, 1},
                                       glm = {151552, 4096, 13696, 40, 32, 2, 131072, 128, 0},
                                       deepseek_v2 = {102400, 4096, 11008, 32, 32, 0, 2048, 0, 0},
                                       stablelm = {50304, 2560, 6912, 32, 32, 0, 4096, 0, 0},
                                       generic = {32000, 4096, 11008, 32, 32, 0, 2048, 0, 0};
  switch (f) {
  case VL_FAM_LLAMA: return &llama;
  case VL_FAM_MISTRAL:
  case VL_FAM_MIXTRAL: return &mistral;
  case VL_FAM_QWEN2: return &qwen2;
  case VL_FAM_GEMMA: return &gemma;
  case VL_FAM_PHI3: return &phi3;
  case VL_FAM_QWEN3: return &qwen3;
  case VL_FAM_QWEN2_MOE: return &qwen2_moe;
  case VL_FAM_QWEN3_MOE: return &qwen3_moe;
  case VL_FAM_GEMMA2: return &gemma2;
  case VL_FAM_GEMMA3: return &gemma3;
  case VL_FAM_PHI: return &phi;
  case VL_FAM_OLMO2: return &olmo2;
  case VL_FAM_OLMOE: return &olmoe;
  case VL_FAM_GRANITE: return &granite;
  case VL_FAM_STARCODER2: return &starcoder2;
  case VL_FAM_GLM: return &glm;
  case VL_FAM_DEEPSEEK_V2: return &deepseek_v2;
  case VL_FAM_STABLELM: return &stablelm;
  default: return &generic;
  }
}

static vl_status read_common(struct vl__reader *r, struct vl_arch *a,
                             const struct decoder_defaults *d) {
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
static vl_status experts(struct vl__reader *r, struct vl_arch *a, const char *key, uint64_t dn,
                         uint64_t dk, uint64_t dwidth) {
  TRY(vl__get_u64(r, key, dn, 0, MAX_EXPERTS, &a->experts));
  if (!vl__has(r, "num_experts_per_tok") && dk == 0 && a->experts)
    return vl__fail(r->err, VL_EKEY,
                    "key 'num_experts_per_tok' is missing or null: the experts each token "
                    "goes to are needed for the activations");
  TRY(vl__get_u64(r, "num_experts_per_tok", dk, 1, MAX_EXPERTS, &a->experts_per_token));
  TRY(vl__get_u64(r, "moe_intermediate_size", dwidth, 1, MAX_WIDTH, &a->moe_intermediate));
  if (a->experts && a->experts_per_token > a->experts)
    return vl__fail(r->err, VL_ERANGE, "num_experts_per_tok %llu exceeds %s %llu",
                    (unsigned long long)a->experts_per_token, key, (unsigned long long)a->experts);
  return VL_OK;
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

static vl_status deepseek(struct vl__reader *r, struct vl_arch *a) {
  uint64_t shared = 0, dense = 0;
  TRY(experts(r, a, "n_routed_experts", 64, 0, 1407));
  TRY(vl__get_u64(r, "n_shared_experts", 2, 0, MAX_EXPERTS, &shared));
  TRY(vl__get_u64(r, "first_k_dense_replace", 0, 0, MAX_LAYERS, &dense));
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
  return VL_OK;
}

static vl_status phi(struct vl__reader *r, struct vl_arch *a) {
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

static vl_status stablelm(struct vl__reader *r, struct vl_arch *a) {
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

static vl_status starcoder2(struct vl__reader *r, struct vl_arch *a) {
  int bias = 1;
  TRY(vl__get_bool(r, "use_bias", 1, &bias));
  a->qkv_bias = a->o_bias = a->mlp_bias = (unsigned)bias;
  TRY(vl__get_prob(r, "residual_dropout", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embedding_dropout", 0.0, &a->embed_dropout));
  TRY(every_layer_slides(r, a, 0));
  a->gated_mlp = a->rms_norm = 0; /* c_fc, gelu_pytorch_tanh, c_proj; LayerNorm with bias */
  return VL_OK;
}

static vl_status granite(struct vl__reader *r, struct vl_arch *a) {
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

/* Llama's attention_bias and mlp_bias; Qwen2's q/k/v biases; Phi-3's
 * fused projections and dropouts; Mixtral's experts (of intermediate_size);
 * Gemma's scaled embeddings. Mistral reads no bias key. */
static vl_status first_decoders(struct vl__reader *r, struct vl_arch *a) {
  int mb = 0;
  switch (a->family) {
  case VL_FAM_LLAMA:
    TRY(bias_key(r, a, "attention_bias", 0));
    TRY(vl__get_bool(r, "mlp_bias", 0, &mb));
    a->mlp_bias = (unsigned)mb;
    return VL_OK;
  case VL_FAM_QWEN2: a->qkv_bias = 1; return VL_OK; /* Qwen2Attention: o_proj without */
  case VL_FAM_PHI3:
    TRY(vl__get_prob(r, "resid_pdrop", 0.0, &a->hidden_dropout));
    TRY(vl__get_prob(r, "embd_pdrop", 0.0, &a->embed_dropout));
    a->fused_qkv = a->fused_gate_up = 1;
    a->rope_cat = 1; /* modeling_phi3.py apply_rotary_pos_emb: torch.cat([rotated, pass]) */
    return every_layer_slides(r, a, 0);
  case VL_FAM_MISTRAL: /* configuration_mistral.py: 4096 where the key is absent; null: none */
    return every_layer_slides(r, a, json_object_get(r->root, "sliding_window") ? 0 : 4096);
  case VL_FAM_MIXTRAL:
    TRY(every_layer_slides(r, a, 0));
    TRY(experts(r, a, "num_local_experts", 8, 2, a->intermediate));
    if (!a->experts)
      return vl__fail(r->err, VL_ERANGE, "key 'num_local_experts': 0 is out of range [1, %llu]",
                      (unsigned long long)MAX_EXPERTS);
    return VL_OK;
  case VL_FAM_GEMMA: a->embed_scaled = 1; return VL_OK;
  default: return VL_OK;
  }
}

static vl_status parts(struct vl__reader *r, struct vl_arch *a) {
  switch (a->family) {
  case VL_FAM_LLAMA:
  case VL_FAM_MISTRAL:
  case VL_FAM_MIXTRAL:
  case VL_FAM_QWEN2:
  case VL_FAM_GEMMA:
  case VL_FAM_PHI3: return first_decoders(r, a);
  case VL_FAM_QWEN3: a->qk_norm = 1; return bias_key(r, a, "attention_bias", 0);
  case VL_FAM_QWEN3_MOE:
    a->qk_norm = 1;
    TRY(bias_key(r, a, "attention_bias", 0));
    TRY(experts(r, a, vl__has(r, "num_experts") ? "num_experts" : "num_local_experts", 128, 8,
                768));
    return qwen_sparse_layers(r, a);
  case VL_FAM_QWEN2_MOE: {
    int qb = 1;
    TRY(vl__get_bool(r, "qkv_bias", 1, &qb));
    a->qkv_bias = (unsigned)qb;
    TRY(experts(r, a, "num_experts", 60, 4, 1408));
    TRY(vl__get_u64(r, "shared_expert_intermediate_size", 5632, 0, MAX_WIDTH,
                    &a->shared_intermediate));
    a->shared_gate = a->shared_intermediate > 0;
    return qwen_sparse_layers(r, a);
  }
  case VL_FAM_GEMMA2:
  case VL_FAM_GEMMA3:
    TRY(bias_key(r, a, "attention_bias", 0));
    a->sandwich_norm = a->embed_scaled = 1;
    a->qk_norm = a->family == VL_FAM_GEMMA3;
    TRY(vl__get_num(r, "attn_logit_softcapping", a->family == VL_FAM_GEMMA2 ? 50.0 : 0.0,
                    &a->attn_softcap));
    TRY(vl__get_num(r, "final_logit_softcapping", a->family == VL_FAM_GEMMA2 ? 30.0 : 0.0,
                    &a->final_softcap));
    {
      uint64_t every = 2;
      if (a->family == VL_FAM_GEMMA3)
        TRY(vl__get_u64(r, "sliding_window_pattern", 6, 1, MAX_LAYERS, &every));
      return sliding(r, a, 4096, every);
    }
  case VL_FAM_OLMO2: a->qk_norm = 2, a->post_norm = 1; return bias_key(r, a, "attention_bias", 0);
  case VL_FAM_OLMOE:
    a->qk_norm = 2;
    TRY(bias_key(r, a, "attention_bias", 0));
    TRY(experts(r, a, "num_experts", 64, 8, a->intermediate));
    return VL_OK;
  case VL_FAM_GLM:
    TRY(vl__get_prob(r, "partial_rotary_factor", 0.5, &a->rotary_pct));
    {
      int b = 1;
      TRY(vl__get_bool(r, "attention_bias", 1, &b));
      a->qkv_bias = (unsigned)b; /* q/k/v only: o_proj has none */
    }
    a->fused_gate_up = 1;
    a->rope_cat = 1; /* modeling_glm.py apply_rotary_pos_emb: torch.cat([q_embed, q_pass]) */
    return VL_OK;
  case VL_FAM_PHI: return phi(r, a);
  case VL_FAM_STABLELM: return stablelm(r, a);
  case VL_FAM_STARCODER2: return starcoder2(r, a);
  case VL_FAM_GRANITE: return granite(r, a);
  case VL_FAM_DEEPSEEK_V2: return deepseek(r, a);
  default: return bias_key(r, a, "attention_bias", 0);
  }
}

vl_status vl__read_decoder(struct vl__reader *r, struct vl_arch *a) {
  TRY(read_common(r, a, defaults_of(a->family)));
  TRY(parts(r, a));
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
