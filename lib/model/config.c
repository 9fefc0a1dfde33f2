/* Hugging Face config.json -> struct vl_arch.
 *
 * Defaults are those of transformers' configuration classes (checked against
 * transformers 5.17: bench/results/2026-11-29-h200-param-counts.json holds
 * the parameter counts of configs that omit every key). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/arch.h"

static const struct {
  const char *model_type;
  enum vl_family family;
} families[] = {
    {"llama", VL_FAM_LLAMA}, {"mistral", VL_FAM_MISTRAL},   {"qwen2", VL_FAM_QWEN2},
    {"gemma", VL_FAM_GEMMA}, {"phi3", VL_FAM_PHI3},         {"mixtral", VL_FAM_MIXTRAL},
    {"gpt2", VL_FAM_GPT2},   {"gpt_neox", VL_FAM_GPT_NEOX}, {"opt", VL_FAM_OPT},
    {"bert", VL_FAM_BERT},
};

const char *vl_arch_supported(void) {
  return "llama, mistral, qwen2, gemma, phi3, mixtral, gpt2, gpt_neox, opt, bert";
}

/* Limits far above any real model; beyond them products stop meaning much. */
#define MAX_HIDDEN (1ull << 20)
#define MAX_LAYERS 10000ull
#define MAX_HEADS 65536ull
#define MAX_VOCAB (1ull << 26)
#define MAX_WIDTH (1ull << 24)
#define MAX_POS (1ull << 26)
#define MAX_EXPERTS 4096ull

struct reader {
  json_t *root;
  struct vl_err *err;
};

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

/* Integer key in [lo, hi]; missing or null gives def. */
static vl_status get_u64(struct reader *r, const char *key, uint64_t def, uint64_t lo, uint64_t hi,
                         uint64_t *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  json_int_t i;
  if (json_is_integer(v)) {
    i = json_integer_value(v);
  } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9.0e15) {
    i = (json_int_t)json_real_value(v);
  } else {
    return vl__fail(r->err, VL_EKEY, "key '%s': expected an integer, got %s", key, json_kind(v));
  }
  if (i < 0 || (uint64_t)i < lo || (uint64_t)i > hi)
    return vl__fail(r->err, VL_ERANGE, "key '%s': %lld is out of range [%llu, %llu]", key,
                    (long long)i, (unsigned long long)lo, (unsigned long long)hi);
  *out = (uint64_t)i;
  return VL_OK;
}

static vl_status get_bool(struct reader *r, const char *key, int def, int *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  if (!json_is_boolean(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected true or false, got %s", key, json_kind(v));
  *out = json_is_true(v);
  return VL_OK;
}

/* Probability-like number in [0, 1]. */
static vl_status get_prob(struct reader *r, const char *key, double def, double *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  if (!json_is_number(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected a number, got %s", key, json_kind(v));
  double d = json_number_value(v);
  if (!(d >= 0.0 && d <= 1.0))
    return vl__fail(r->err, VL_ERANGE, "key '%s': %g is not in [0, 1]", key, d);
  *out = d;
  return VL_OK;
}

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    vl_status s_ = (expr);                                                                         \
    if (s_ != VL_OK) return s_;                                                                    \
  } while (0)

/* The shape every multi-head family reads the same way, under its own key
 * names: vocabulary, width, depth, heads (each of hidden / heads, as many
 * key/value heads as heads), MLP width (a default of 0: 4 x hidden), and
 * positions; defaults are transformers' Configuration classes'. */
struct shape_keys {
  const char *vocab, *hidden, *layers, *heads, *inter, *pos;
  uint64_t d_vocab, d_hidden, d_layers, d_heads, d_inter, d_pos;
};

static vl_status read_shape(struct reader *r, struct vl_arch *a, const struct shape_keys *k) {
  TRY(get_u64(r, k->vocab, k->d_vocab, 1, MAX_VOCAB, &a->vocab));
  TRY(get_u64(r, k->hidden, k->d_hidden, 1, MAX_HIDDEN, &a->hidden));
  TRY(get_u64(r, k->layers, k->d_layers, 1, MAX_LAYERS, &a->layers));
  TRY(get_u64(r, k->heads, k->d_heads, 1, MAX_HEADS, &a->heads));
  TRY(get_u64(r, k->inter, k->d_inter ? k->d_inter : 4 * a->hidden, 1, MAX_WIDTH,
              &a->intermediate));
  TRY(get_u64(r, k->pos, k->d_pos, 1, MAX_POS, &a->max_positions));
  if (a->hidden % a->heads)
    return vl__fail(r->err, VL_ERANGE, "%s %llu is not a multiple of %s %llu", k->hidden,
                    (unsigned long long)a->hidden, k->heads, (unsigned long long)a->heads);
  a->kv_heads = a->heads;
  a->head_dim = a->hidden / a->heads;
  return VL_OK;
}

/* transformers' usual key names, the MLP's width under the name given */
#define HF_SHAPE(inter)                                                                            \
  "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", inter,                  \
      "max_position_embeddings"

/* Llama-like decoders: llama, mistral, qwen2, gemma, phi3, mixtral. */
static vl_status read_llama_like(struct reader *r, struct vl_arch *a) {
  /* defaults: transformers' Configuration classes */
  uint64_t dv = 32000, dh = 4096, di = 11008, dl = 32, dn = 32, dpos = 2048;
  int dkv_is_heads = 1, dtie = 0;
  uint64_t dkv = 0;
  switch (a->family) {
  case VL_FAM_MISTRAL: di = 14336, dkv = 8, dkv_is_heads = 0, dpos = 4096 * 32; break;
  case VL_FAM_MIXTRAL: di = 14336, dkv = 8, dkv_is_heads = 0, dpos = 4096 * 32; break;
  case VL_FAM_QWEN2: dv = 151936, di = 22016, dpos = 32768; break;
  case VL_FAM_GEMMA:
    dv = 256000, dh = 3072, di = 24576, dl = 28, dn = 16, dpos = 8192, dtie = 1;
    break;
  case VL_FAM_PHI3: dv = 32064, dh = 3072, di = 8192, dpos = 4096; break;
  default: break;
  }
  TRY(get_u64(r, "vocab_size", dv, 1, MAX_VOCAB, &a->vocab));
  TRY(get_u64(r, "hidden_size", dh, 1, MAX_HIDDEN, &a->hidden));
  TRY(get_u64(r, "intermediate_size", di, 1, MAX_WIDTH, &a->intermediate));
  TRY(get_u64(r, "num_hidden_layers", dl, 1, MAX_LAYERS, &a->layers));
  TRY(get_u64(r, "num_attention_heads", dn, 1, MAX_HEADS, &a->heads));
  TRY(get_u64(r, "num_key_value_heads", dkv_is_heads ? a->heads : dkv, 1, MAX_HEADS, &a->kv_heads));
  TRY(get_u64(r, "max_position_embeddings", dpos, 1, MAX_POS, &a->max_positions));
  uint64_t dhd = a->family == VL_FAM_GEMMA ? 256 : 0;
  TRY(get_u64(r, "head_dim", dhd, 0, MAX_HIDDEN, &a->head_dim));
  if (a->head_dim == 0) {
    if (a->hidden % a->heads)
      return vl__fail(r->err, VL_ERANGE,
                      "hidden_size %llu is not a multiple of num_attention_heads %llu "
                      "(set head_dim)",
                      (unsigned long long)a->hidden, (unsigned long long)a->heads);
    a->head_dim = a->hidden / a->heads;
  }
  int tie = 0, ab = 0, mb = 0;
  TRY(get_bool(r, "tie_word_embeddings", dtie, &tie));
  a->tie_embeddings = (unsigned)tie;
  if (a->family == VL_FAM_LLAMA) {
    TRY(get_bool(r, "attention_bias", 0, &ab));
    TRY(get_bool(r, "mlp_bias", 0, &mb));
    a->qkv_bias = a->o_bias = (unsigned)ab;
    a->mlp_bias = (unsigned)mb;
  } else if (a->family == VL_FAM_QWEN2) {
    a->qkv_bias = 1; /* Qwen2Attention: q/k/v with bias, o_proj without */
  }
  TRY(get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  if (a->family == VL_FAM_PHI3) {
    TRY(get_prob(r, "resid_pdrop", 0.0, &a->hidden_dropout));
    TRY(get_prob(r, "embd_pdrop", 0.0, &a->embed_dropout));
    a->fused_qkv = 1;
  }
  if (a->family == VL_FAM_MIXTRAL) {
    TRY(get_u64(r, "num_local_experts", 8, 1, MAX_EXPERTS, &a->experts));
    TRY(get_u64(r, "num_experts_per_tok", 2, 1, MAX_EXPERTS, &a->experts_per_token));
    if (a->experts_per_token > a->experts)
      return vl__fail(r->err, VL_ERANGE, "num_experts_per_tok %llu exceeds num_local_experts %llu",
                      (unsigned long long)a->experts_per_token, (unsigned long long)a->experts);
  }
  a->gated_mlp = a->rms_norm = a->norm_affine = a->final_norm = a->causal = 1;
  a->rotary_pct = 1.0;
  return VL_OK;
}

static vl_status read_gpt2(struct reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      "vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "n_positions",
      50257,        768,      12,        12,       0,         1024};
  TRY(read_shape(r, a, &k));
  int tie = 0;
  TRY(get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  TRY(get_prob(r, "attn_pdrop", 0.1, &a->attn_dropout));
  TRY(get_prob(r, "resid_pdrop", 0.1, &a->hidden_dropout));
  TRY(get_prob(r, "embd_pdrop", 0.1, &a->embed_dropout));
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->norm_affine = a->learned_pos = a->final_norm = a->fused_qkv = a->causal = 1;
  /* eager_attention_forward calls F.softmax(x) without dtype=float32 (the
   * other families pass it): half scores give half probabilities
   * (transformers 5.17 modeling_gpt2.py, session 9 part2-histories/
   * tf-sources.txt) */
  a->softmax_native = 1;
  /* "gelu_new" (the default) is transformers' NewGELUActivation, written
   * with Python tensor ops: autograd keeps four intermediates, not one */
  json_t *act = json_object_get(r->root, "activation_function");
  a->gelu_python =
      (unsigned)(!act || (json_is_string(act) && strcmp(json_string_value(act), "gelu_new") == 0));
  return VL_OK;
}

static vl_status read_neox(struct reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      HF_SHAPE("intermediate_size"), 50432, 6144, 44, 64, 24576, 2048};
  TRY(read_shape(r, a, &k));
  int tie = 0, bias = 0, par = 1;
  TRY(get_bool(r, "tie_word_embeddings", 0, &tie));
  TRY(get_bool(r, "attention_bias", 1, &bias));
  TRY(get_bool(r, "use_parallel_residual", 1, &par));
  a->tie_embeddings = (unsigned)tie;
  a->parallel_residual = (unsigned)par;
  a->qkv_bias = a->o_bias = (unsigned)bias;
  a->mlp_bias = 1;
  /* rotary_pct (older configs) or partial_rotary_factor (newer) */
  json_t *rp = json_object_get(r->root, "partial_rotary_factor");
  TRY(get_prob(r, rp ? "partial_rotary_factor" : "rotary_pct", 0.25, &a->rotary_pct));
  TRY(get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  TRY(get_prob(r, "hidden_dropout", 0.0, &a->hidden_dropout));
  a->norm_affine = a->final_norm = a->fused_qkv = a->causal = 1;
  return VL_OK;
}

static vl_status read_opt(struct reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {HF_SHAPE("ffn_dim"), 50272, 768, 12, 12, 3072, 2048};
  TRY(read_shape(r, a, &k));
  TRY(get_u64(r, "word_embed_proj_dim", a->hidden, 1, MAX_HIDDEN, &a->embed_proj_dim));
  int tie = 0, bias = 0, before = 0, removefinal = 0, affine = 0;
  TRY(get_bool(r, "tie_word_embeddings", 1, &tie));
  TRY(get_bool(r, "enable_bias", 1, &bias));
  TRY(get_bool(r, "do_layer_norm_before", 1, &before));
  TRY(get_bool(r, "_remove_final_layer_norm", 0, &removefinal));
  TRY(get_bool(r, "layer_norm_elementwise_affine", 1, &affine));
  a->tie_embeddings = (unsigned)tie;
  a->qkv_bias = a->o_bias = a->mlp_bias = (unsigned)bias;
  a->norm_affine = (unsigned)affine;
  /* OPTDecoder: final_layer_norm only when do_layer_norm_before and not removed */
  a->final_norm = (unsigned)(before && !removefinal);
  TRY(get_prob(r, "dropout", 0.1, &a->hidden_dropout));
  TRY(get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  a->embed_dropout = a->hidden_dropout;
  a->pos_offset = 2; /* OPTLearnedPositionalEmbedding: offset 2 */
  json_t *act = json_object_get(r->root, "activation_function");
  a->relu_act =
      (unsigned)(!act || (json_is_string(act) && strcmp(json_string_value(act), "relu") == 0));
  a->learned_pos = a->causal = 1;
  return VL_OK;
}

static vl_status read_bert(struct reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {HF_SHAPE("intermediate_size"), 30522, 768, 12, 12, 3072, 512};
  TRY(read_shape(r, a, &k));
  TRY(get_u64(r, "type_vocab_size", 2, 0, MAX_VOCAB, &a->type_vocab));
  int tie = 0;
  TRY(get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  TRY(get_prob(r, "attention_probs_dropout_prob", 0.1, &a->attn_dropout));
  TRY(get_prob(r, "hidden_dropout_prob", 0.1, &a->hidden_dropout));
  a->embed_dropout = a->hidden_dropout;
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->norm_affine = a->learned_pos = 1;
  return VL_OK;
}

vl_status vl_arch_from_json(const char *text, size_t len, struct vl_arch *out, struct vl_err *err) {
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
  vl_status s = VL_OK;
  struct reader r = {root, err};
  struct vl_arch a;
  memset(&a, 0, sizeof a);
  if (!json_is_object(root)) {
    s = vl__fail(err, VL_EKEY, "expected a JSON object at the top, got %s", json_kind(root));
    goto done;
  }
  json_t *mt = json_object_get(root, "model_type");
  if (!mt || !json_is_string(mt)) {
    s = vl__fail(err, VL_EKEY,
                 "missing key 'model_type' (a string such as \"llama\"); supported: %s",
                 vl_arch_supported());
    goto done;
  }
  const char *name = json_string_value(mt);
  size_t i;
  for (i = 0; i < sizeof families / sizeof families[0]; i++)
    if (strcmp(families[i].model_type, name) == 0) break;
  if (i == sizeof families / sizeof families[0]) {
    s = vl__fail(err, VL_EARCH, "model_type '%.64s' is not supported; supported: %s", name,
                 vl_arch_supported());
    goto done;
  }
  a.family = families[i].family;
  snprintf(a.model_type, sizeof a.model_type, "%s", name);
  switch (a.family) {
  case VL_FAM_GPT2: s = read_gpt2(&r, &a); break;
  case VL_FAM_GPT_NEOX: s = read_neox(&r, &a); break;
  case VL_FAM_OPT: s = read_opt(&r, &a); break;
  case VL_FAM_BERT: s = read_bert(&r, &a); break;
  default: s = read_llama_like(&r, &a); break;
  }
  if (s == VL_OK && a.heads % a.kv_heads)
    s = vl__fail(err, VL_ERANGE,
                 "num_attention_heads %llu is not a multiple of num_key_value_heads %llu",
                 (unsigned long long)a.heads, (unsigned long long)a.kv_heads);
  if (s == VL_OK && a.embed_proj_dim == 0) a.embed_proj_dim = a.hidden;
  if (s == VL_OK) *out = a;
done:
  json_decref(root);
  return s;
}
