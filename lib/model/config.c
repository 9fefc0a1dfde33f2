/* Hugging Face config.json -> struct vl_arch.
 *
 * Defaults are those of transformers' configuration classes (checked against
 * transformers 5.17: data/reference/transformers-5.17/param-counts.json holds
 * the parameter counts of configs that omit every key). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/arch.h"

#include "config_read.h"

/* The rows of VL_MODEL_TYPES (include/vramledger/arch.h). */
#define VL__DEFAULTS_(...)                                                                         \
  { __VA_ARGS__ }
#define VL__ATTN_sdpa false
#define VL__ATTN_eager true
#define VL__TYPE_ROW_(id, name, read, parts, defaults, attn, peft)                                 \
  {name,                                                                                           \
   VL_FAM_##id,                                                                                    \
   vl__read_##read,                                                                                \
   vl__parts_##parts,                                                                              \
   VL__DEFAULTS_ defaults,                                                                         \
   VL__ATTN_##attn,                                                                                \
   {VL__PEFT_ peft}},
#define VL__PEFT_(...) __VA_ARGS__
static const struct vl__type types[] = {VL_MODEL_TYPES(VL__TYPE_ROW_)};
#undef VL__TYPE_ROW_

#define N_TYPES (sizeof types / sizeof types[0])

/* "llama, mistral, ...": the model_type column, joined at compile time */
#define VL__TYPE_NAME_(id, name, read, parts, defaults, attn, peft) ", " name
const char *vl_arch_supported(void) { return VL_MODEL_TYPES(VL__TYPE_NAME_) + 2; }
#undef VL__TYPE_NAME_

const char *vl_arch_approximate(const struct vl_arch *a) {
  /* the spread of that reading over the causal-LM types of transformers
   * 5.17 it does not describe, against their dry runs on meta tensors
   * (bench/results/model-types, generic decoder: 19 types, full training and LoRA) */
  return a->approximate ? "is read as a generic Llama-like decoder (it is not described): on 19 "
                          "undescribed types that reading's peak was -15 to +30 % from the dry "
                          "run's (median 2 %); --dry-run builds the model itself"
                        : NULL;
}

const char *const *vl__peft_targets(enum vl_family f) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (types[i].family == f) return types[i].peft;
  return NULL;
}

const char *vl_arch_family_name(enum vl_family f) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (types[i].family == f) return types[i].model_type;
  return "generic decoder";
}

vl_status vl__read_gpt2(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      "vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "n_positions",
      50257,        768,      12,        12,       0,         1024};
  TRY(vl__read_shape(r, a, &k));
  int tie = 0, mq = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  if (a->family == VL_FAM_GPT_BIGCODE) {
    /* GPT-BigCode: multi-query attention, one key/value head in c_attn
     * (modeling_gpt_bigcode.py); softmax in fp32 (attention_softmax_in_fp32) */
    TRY(vl__get_bool(r, "multi_query", 1, &mq));
    a->kv_heads = mq ? 1 : a->heads;
    /* GPTBigCodeModel.bias: torch.tril of max_positions^2 bools, a buffer
     * (persistent=False) that model.to(device) moves with the weights
     * (modeling_gpt_bigcode.py; 64 MiB at StarCoder's 8,192 positions) */
    a->buffer_bytes = a->max_positions * a->max_positions; /* at most 2^52: MAX_POS */
  }
  TRY(vl__get_prob(r, "attn_pdrop", 0.1, &a->attn_dropout));
  TRY(vl__get_prob(r, "resid_pdrop", 0.1, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embd_pdrop", 0.1, &a->embed_dropout));
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->norm_affine = a->learned_pos = a->final_norm = a->fused_qkv = a->causal = 1;
  /* eager_attention_forward calls F.softmax(x) without dtype=float32 (the
   * other families pass it): half scores give half probabilities
   * (transformers 5.17 modeling_gpt2.py, replay-histories unseen5-worst-histories/
   * tf-sources.txt) */
  a->softmax_native = a->family == VL_FAM_GPT2;
  /* "gelu_new" (the default) is transformers' NewGELUActivation, written
   * with Python tensor ops: autograd keeps four intermediates, not one */
  const char *act = a->family == VL_FAM_GPT2 ? "gelu_new" : "";
  TRY(vl__get_str(r, "activation_function", act, &act)); /* a number is refused, not a default */
  a->gelu_python = (unsigned)(strcmp(act, "gelu_new") == 0);
  return VL_OK;
}

vl_status vl__read_neox(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      HF_SHAPE("intermediate_size"), 50432, 6144, 44, 64, 24576, 2048};
  TRY(vl__read_shape(r, a, &k));
  int tie = 0, bias = 0, par = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 0, &tie));
  TRY(vl__get_bool(r, "attention_bias", 1, &bias));
  TRY(vl__get_bool(r, "use_parallel_residual", 1, &par));
  a->tie_embeddings = (unsigned)tie;
  a->parallel_residual = (unsigned)par;
  a->qkv_bias = a->o_bias = (unsigned)bias;
  a->mlp_bias = 1;
  /* rotary_pct (older configs) or partial_rotary_factor (newer) */
  json_t *rp = json_object_get(r->root, "partial_rotary_factor");
  TRY(vl__get_prob(r, rp ? "partial_rotary_factor" : "rotary_pct", 0.25, &a->rotary_pct));
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  TRY(vl__get_prob(r, "hidden_dropout", 0.0, &a->hidden_dropout));
  a->norm_affine = a->final_norm = a->fused_qkv = a->qkv_heads_first = a->causal = 1;
  a->rope_cat = 1; /* modeling_gpt_neox.py apply_rotary_pos_emb: torch.cat([q_embed, q_pass]) */
  return VL_OK;
}

vl_status vl__read_opt(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {HF_SHAPE("ffn_dim"), 50272, 768, 12, 12, 3072, 2048};
  TRY(vl__read_shape(r, a, &k));
  TRY(vl__get_u64(r, "word_embed_proj_dim", a->hidden, 1, MAX_HIDDEN, &a->embed_proj_dim));
  int tie = 0, bias = 0, before = 0, removefinal = 0, affine = 0;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  TRY(vl__get_bool(r, "enable_bias", 1, &bias));
  TRY(vl__get_bool(r, "do_layer_norm_before", 1, &before));
  TRY(vl__get_bool(r, "_remove_final_layer_norm", 0, &removefinal));
  TRY(vl__get_bool(r, "layer_norm_elementwise_affine", 1, &affine));
  a->tie_embeddings = (unsigned)tie;
  a->qkv_bias = a->o_bias = a->mlp_bias = (unsigned)bias;
  a->norm_affine = (unsigned)affine;
  /* OPTDecoder: final_layer_norm only when do_layer_norm_before and not removed */
  a->final_norm = (unsigned)(before && !removefinal);
  a->norm_after_add = (unsigned)!before; /* OPTDecoderLayer: "350m applies layer norm AFTER" */
  a->pos_local = 1;
  a->q_scaled = 1; /* OPTAttention.forward: self.q_proj(hidden_states) * self.scaling */
  a->layer_inline = (unsigned)before; /* (350m: the MLP's input is the residual too) */
  TRY(vl__get_prob(r, "dropout", 0.1, &a->hidden_dropout));
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  /* (OPTDecoder.forward: no dropout on the embeddings' sum) */
  a->pos_offset = 2; /* OPTLearnedPositionalEmbedding: offset 2 */
  const char *act = "relu";
  TRY(vl__get_str(r, "activation_function", "relu", &act));
  a->relu_act = (unsigned)(strcmp(act, "relu") == 0);
  a->learned_pos = a->causal = 1;
  return VL_OK;
}

/* A model_type nobody described: read as a Llama-like decoder where the
 * usual keys are all present, marked approximate; otherwise name the keys
 * missing and the way to an exact answer. */
static vl_status read_generic(struct vl__reader *r, struct vl_arch *a, const char *name) {
  static const char *const need[] = {"vocab_size", "hidden_size", "num_hidden_layers",
                                     "num_attention_heads", "intermediate_size"};
  char missing[160] = "";
  for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
    if (!vl__has(r, need[k]))
      snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s'%s'",
               missing[0] ? ", " : "", need[k]);
  if (missing[0])
    return vl__fail(r->err, VL_EARCH,
                    "model_type '%.64s' is not described, and it cannot be read as a generic "
                    "decoder: missing %s; set them, or measure the job with `vramledger trace` "
                    "(it builds the model on meta tensors); the described types are listed by "
                    "`vramledger estimate --help`",
                    name, missing);
  a->family = VL_FAM_GENERIC;
  a->approximate = 1;
  return vl__read_decoder(r, a);
}

/* jansson's message with the token it quotes ("... near 'TOKEN'") cut to
 * 16 bytes, printable ASCII, others as \xNN: a message never echoes more
 * of a file than that (check reads the file a commitment names, and a
 * commitment may name /proc/self/environ). */
static const char *json_why(const char *text, char *out, size_t n) {
  const char *near = strstr(text, " near '");
  size_t o = (size_t)snprintf(out, n, "%.*s", near ? (int)(near - text) : (int)strlen(text), text);
  if (!near || o + 32 > n) return out;
  const char *t = near + 7, *q = strrchr(t, '\'');
  size_t len = q ? (size_t)(q - t) : strlen(t), i = 0;
  o += (size_t)snprintf(out + o, n - o, " near '");
  for (; i < len && i < 16 && o + 8 < n; i++) {
    unsigned char c = (unsigned char)t[i];
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
      out[o++] = (char)c;
    else
      o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
  }
  snprintf(out + o, n - o, "%s'", i < len ? "..." : "");
  return out;
}

/* whether the type's configuration class has an eos_token_id of its own
 * (transformers 5.17 configuration_<type>.py: every described type but
 * these, whose default is None) */
static bool eos_by_default(enum vl_family f) {
  static const enum vl_family none[] = {
      VL_FAM_QWEN2, VL_FAM_QWEN2_MOE,  VL_FAM_QWEN3,      VL_FAM_QWEN3_MOE, VL_FAM_GPT_OSS,
      VL_FAM_BERT,  VL_FAM_DISTILBERT, VL_FAM_DEBERTA_V2, VL_FAM_VIT,       VL_FAM_RESNET};
  for (size_t k = 0; k < sizeof none / sizeof none[0]; k++)
    if (none[k] == f) return false;
  return true;
}

vl_status vl_arch_from_json(const char *text, size_t len, struct vl_arch *out, struct vl_err *err) {
  json_error_t jerr;
  char why[sizeof jerr.text + 16];
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", jerr.line, jerr.column,
                    json_why(jerr.text, why, sizeof why));
  vl_status s = VL_OK;
  struct vl__reader r = {root, err, NULL};
  struct vl_arch a;
  memset(&a, 0, sizeof a);
  if (!json_is_object(root)) {
    s = vl__fail(err, VL_EKEY, "expected a JSON object at the top, got %s", vl__json_kind(root));
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
  for (i = 0; i < N_TYPES; i++)
    if (strcmp(types[i].model_type, name) == 0) break;
  snprintf(a.model_type, sizeof a.model_type, "%s", name);
  if (i == N_TYPES) {
    r.type = &vl__generic_type;
    s = read_generic(&r, &a, name);
  } else {
    r.type = &types[i];
    a.family = types[i].family;
    a.eager_only = types[i].eager_only;
    s = types[i].read(&r, &a);
  }
  if (s == VL_OK && a.heads % a.kv_heads)
    s = vl__fail(err, VL_ERANGE,
                 "num_attention_heads %llu is not a multiple of num_key_value_heads %llu",
                 (unsigned long long)a.heads, (unsigned long long)a.kv_heads);
  if (s == VL_OK && a.embed_proj_dim == 0) a.embed_proj_dim = a.hidden;
  /* generate()'s MinLength processors need an end-of-sequence token
   * (generation/utils.py _get_logits_processor: _eos_token_tensor): the
   * config's eos_token_id, else its class's default */
  json_t *eos = json_object_get(root, "eos_token_id");
  a.eos = eos ? !json_is_null(eos) && !(json_is_array(eos) && json_array_size(eos) == 0)
              : i < N_TYPES && eos_by_default(a.family);
  if (s == VL_OK) *out = a;
done:
  json_decref(root);
  return s;
}
