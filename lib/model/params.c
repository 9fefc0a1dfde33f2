/* Parameter inventory: every parameter tensor shape transformers creates for
 * an architecture. Sources: transformers/models/<family>/modeling_<family>.py
 * (5.17). Checked against PyTorch's sum(p.numel()) on the real classes:
 * bench/results/2026-11-29-h200-param-counts.json. */
#include <string.h>

#include "../util/internal.h"
#include "vramledger/arch.h"

struct builder {
  struct vl_inventory *inv;
  struct vl__ck ck;
  uint64_t layers;
};

static void add(struct builder *b, const char *name, enum vl_tensor_kind kind, uint64_t rows,
                uint64_t cols, uint64_t count, int per_layer) {
  struct vl_inventory *inv = b->inv;
  if (rows == 0 || cols == 0 || count == 0 || inv->n == VL_MAX_TENSORS) return;
  struct vl_tensor *t = &inv->t[inv->n++];
  t->name = name;
  t->kind = kind;
  t->rows = rows;
  t->cols = cols;
  t->count = count;
  t->per_layer = per_layer ? 1u : 0u;
  uint64_t one = vl__mul(&b->ck, rows, cols);
  inv->total = vl__add(&b->ck, inv->total, vl__mul(&b->ck, one, count));
  if (per_layer)
    inv->per_layer = vl__add(&b->ck, inv->per_layer, vl__mul(&b->ck, one, count / b->layers));
  if (one > inv->largest) inv->largest = one;
}

/* A per-layer tensor: count tensors in each layer. */
static void layer(struct builder *b, const char *name, enum vl_tensor_kind kind, uint64_t rows,
                  uint64_t cols, uint64_t per) {
  add(b, name, kind, rows, cols, vl__mul(&b->ck, per, b->layers), 1);
}

/* A LayerNorm (weight + bias) or RMSNorm (weight) of width w, per layer. */
static void layer_norm(struct builder *b, const struct vl_arch *a, const char *name, uint64_t w) {
  if (!a->norm_affine) return;
  layer(b, name, VL_T_NORM, w, 1, a->rms_norm ? 1 : 2);
}

static void global_norm(struct builder *b, const struct vl_arch *a, const char *name, uint64_t w) {
  if (!a->norm_affine) return;
  add(b, name, VL_T_NORM, w, 1, a->rms_norm ? 1 : 2, 0);
}

static void llama_like(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
  add(b, "embed_tokens", VL_T_EMBED, a->vocab, h, 1, 0);
  if (a->fused_qkv) { /* Phi-3: qkv_proj, no bias */
    layer(b, "qkv_proj", VL_T_LINEAR, q + 2 * kv, h, 1);
  } else {
    layer(b, "q_proj", VL_T_LINEAR, q, h, 1);
    layer(b, "k_proj", VL_T_LINEAR, kv, h, 1);
    layer(b, "v_proj", VL_T_LINEAR, kv, h, 1);
    if (a->qkv_bias) {
      layer(b, "q_proj.bias", VL_T_BIAS, q, 1, 1);
      layer(b, "k_proj.bias", VL_T_BIAS, kv, 1, 2);
    }
  }
  layer(b, "o_proj", VL_T_LINEAR, h, q, 1);
  if (a->o_bias) layer(b, "o_proj.bias", VL_T_BIAS, h, 1, 1);
  if (a->experts) { /* Mixtral: router + E experts of w1 (gate), w3 (up), w2 (down) */
    layer(b, "gate", VL_T_LINEAR, a->experts, h, 1);
    layer(b, "w1", VL_T_LINEAR, a->intermediate, h, a->experts);
    layer(b, "w3", VL_T_LINEAR, a->intermediate, h, a->experts);
    layer(b, "w2", VL_T_LINEAR, h, a->intermediate, a->experts);
  } else if (a->fused_qkv) { /* Phi-3: gate_up_proj */
    layer(b, "gate_up_proj", VL_T_LINEAR, 2 * a->intermediate, h, 1);
    layer(b, "down_proj", VL_T_LINEAR, h, a->intermediate, 1);
  } else {
    layer(b, "gate_proj", VL_T_LINEAR, a->intermediate, h, 1);
    layer(b, "up_proj", VL_T_LINEAR, a->intermediate, h, 1);
    layer(b, "down_proj", VL_T_LINEAR, h, a->intermediate, 1);
    if (a->mlp_bias) {
      layer(b, "gate_up.bias", VL_T_BIAS, a->intermediate, 1, 2);
      layer(b, "down_proj.bias", VL_T_BIAS, h, 1, 1);
    }
  }
  layer_norm(b, a, "input_layernorm", h);
  layer_norm(b, a, "post_attention_layernorm", h);
  global_norm(b, a, "norm", h);
  if (!a->tie_embeddings) add(b, "lm_head", VL_T_HEAD, a->vocab, h, 1, 0);
}

static void gpt2(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate;
  add(b, "wte", VL_T_EMBED, a->vocab, h, 1, 0);
  add(b, "wpe", VL_T_EMBED, a->max_positions, h, 1, 0);
  layer_norm(b, a, "ln_1", h);
  layer(b, "c_attn", VL_T_LINEAR, 3 * h, h, 1);
  layer(b, "c_attn.bias", VL_T_BIAS, 3 * h, 1, 1);
  layer(b, "attn.c_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "attn.c_proj.bias", VL_T_BIAS, h, 1, 1);
  layer_norm(b, a, "ln_2", h);
  layer(b, "c_fc", VL_T_LINEAR, I, h, 1);
  layer(b, "c_fc.bias", VL_T_BIAS, I, 1, 1);
  layer(b, "mlp.c_proj", VL_T_LINEAR, h, I, 1);
  layer(b, "mlp.c_proj.bias", VL_T_BIAS, h, 1, 1);
  global_norm(b, a, "ln_f", h);
  if (!a->tie_embeddings) add(b, "lm_head", VL_T_HEAD, a->vocab, h, 1, 0);
}

static void neox(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate;
  add(b, "embed_in", VL_T_EMBED, a->vocab, h, 1, 0);
  layer_norm(b, a, "input_layernorm", h);
  layer_norm(b, a, "post_attention_layernorm", h);
  layer(b, "query_key_value", VL_T_LINEAR, 3 * h, h, 1);
  if (a->qkv_bias) layer(b, "query_key_value.bias", VL_T_BIAS, 3 * h, 1, 1);
  layer(b, "dense", VL_T_LINEAR, h, h, 1);
  if (a->o_bias) layer(b, "dense.bias", VL_T_BIAS, h, 1, 1);
  layer(b, "dense_h_to_4h", VL_T_LINEAR, I, h, 1);
  layer(b, "dense_h_to_4h.bias", VL_T_BIAS, I, 1, 1);
  layer(b, "dense_4h_to_h", VL_T_LINEAR, h, I, 1);
  layer(b, "dense_4h_to_h.bias", VL_T_BIAS, h, 1, 1);
  global_norm(b, a, "final_layer_norm", h);
  if (!a->tie_embeddings) add(b, "embed_out", VL_T_HEAD, a->vocab, h, 1, 0);
}

static void opt(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate, p = a->embed_proj_dim;
  add(b, "embed_tokens", VL_T_EMBED, a->vocab, p, 1, 0);
  add(b, "embed_positions", VL_T_EMBED, a->max_positions + a->pos_offset, h, 1, 0);
  if (p != h) {
    add(b, "project_in", VL_T_LINEAR, h, p, 1, 0);
    add(b, "project_out", VL_T_LINEAR, p, h, 1, 0);
  }
  layer(b, "q_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "k_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "v_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "out_proj", VL_T_LINEAR, h, h, 1);
  if (a->qkv_bias) layer(b, "qkv_out.bias", VL_T_BIAS, h, 1, 4);
  layer_norm(b, a, "self_attn_layer_norm", h);
  layer(b, "fc1", VL_T_LINEAR, I, h, 1);
  layer(b, "fc2", VL_T_LINEAR, h, I, 1);
  if (a->mlp_bias) {
    layer(b, "fc1.bias", VL_T_BIAS, I, 1, 1);
    layer(b, "fc2.bias", VL_T_BIAS, h, 1, 1);
  }
  layer_norm(b, a, "final_layer_norm", h);
  if (a->final_norm) global_norm(b, a, "decoder.final_layer_norm", h);
  if (!a->tie_embeddings) add(b, "lm_head", VL_T_HEAD, a->vocab, p, 1, 0);
}

static void bert(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate;
  add(b, "word_embeddings", VL_T_EMBED, a->vocab, h, 1, 0);
  add(b, "position_embeddings", VL_T_EMBED, a->max_positions, h, 1, 0);
  add(b, "token_type_embeddings", VL_T_EMBED, a->type_vocab, h, 1, 0);
  global_norm(b, a, "embeddings.LayerNorm", h);
  layer(b, "query", VL_T_LINEAR, h, h, 1);
  layer(b, "key", VL_T_LINEAR, h, h, 1);
  layer(b, "value", VL_T_LINEAR, h, h, 1);
  layer(b, "attention.output.dense", VL_T_LINEAR, h, h, 1);
  layer(b, "qkvo.bias", VL_T_BIAS, h, 1, 4);
  layer_norm(b, a, "attention.output.LayerNorm", h);
  layer(b, "intermediate.dense", VL_T_LINEAR, I, h, 1);
  layer(b, "intermediate.dense.bias", VL_T_BIAS, I, 1, 1);
  layer(b, "output.dense", VL_T_LINEAR, h, I, 1);
  layer(b, "output.dense.bias", VL_T_BIAS, h, 1, 1);
  layer_norm(b, a, "output.LayerNorm", h);
  /* BertForMaskedLM head: transform (dense + LayerNorm), decoder tied to
   * word_embeddings, and its own bias of V */
  add(b, "cls.transform.dense", VL_T_LINEAR, h, h, 1, 0);
  add(b, "cls.transform.dense.bias", VL_T_BIAS, h, 1, 1, 0);
  global_norm(b, a, "cls.transform.LayerNorm", h);
  if (!a->tie_embeddings) add(b, "cls.decoder", VL_T_HEAD, a->vocab, h, 1, 0);
  add(b, "cls.decoder.bias", VL_T_BIAS, a->vocab, 1, 1, 0);
}

vl_status vl_inventory_build(const struct vl_arch *a, struct vl_inventory *inv,
                             struct vl_err *err) {
  memset(inv, 0, sizeof *inv);
  struct builder b = {inv, {false}, a->layers};
  switch (a->family) {
  case VL_FAM_GPT2: gpt2(&b, a); break;
  case VL_FAM_GPT_NEOX: neox(&b, a); break;
  case VL_FAM_OPT: opt(&b, a); break;
  case VL_FAM_BERT: bert(&b, a); break;
  default: llama_like(&b, a); break;
  }
  if (b.ck.overflow)
    return vl__fail(err, VL_EOVERFLOW, "the parameter count of this config overflows 64 bits");
  return VL_OK;
}
