/* Parameter inventory: every parameter tensor shape transformers creates for
 * an architecture. Sources: transformers/models/<family>/modeling_<family>.py
 * (5.17). Checked against PyTorch's sum(p.numel()) on the real classes:
 * data/reference/transformers-5.17/param-counts.json. */
#include <string.h>

#include "internal.h"
#include "vramledger/arch.h"

struct builder {
  struct vl_inventory *inv;
  struct vl__ck ck;
  uint64_t layers;
  bool full; /* more distinct tensors than an inventory holds */
};

static void add(struct builder *b, const char *name, enum vl_tensor_kind kind, uint64_t rows,
                uint64_t cols, uint64_t count, int per_layer) {
  struct vl_inventory *inv = b->inv;
  if (rows == 0 || cols == 0 || count == 0) return;
  /* a tensor of a shape and name met before adds to its count (ResNet's
   * blocks, a stage's repeated layers) */
  struct vl_tensor *t = NULL;
  for (int i = 0; i < inv->n && !t; i++) {
    struct vl_tensor *o = &inv->t[i];
    if (o->kind == kind && o->rows == rows && o->cols == cols &&
        o->per_layer == (per_layer ? 1u : 0u) && strcmp(o->name, name) == 0)
      t = o;
  }
  if (!t) {
    if (inv->n == VL_MAX_TENSORS) {
      b->full = true;
      return;
    }
    t = &inv->t[inv->n++];
    *t = (struct vl_tensor){name, kind, rows, cols, 0, per_layer ? 1u : 0u};
  }
  t->count = vl__add(&b->ck, t->count, count);
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
  layer(b, name, VL_T_NORM, w, 1, a->rms_norm || a->norm_nobias ? 1 : 2);
}

static void global_norm(struct builder *b, const struct vl_arch *a, const char *name, uint64_t w) {
  if (!a->norm_affine) return;
  add(b, name, VL_T_NORM, w, 1, a->rms_norm || a->norm_nobias ? 1 : 2, 0);
}

/* A per-layer tensor in n of the layers (MoE layers beside dense ones):
 * count tensors in each of them. */
static void some_layers(struct builder *b, const char *name, enum vl_tensor_kind kind,
                        uint64_t rows, uint64_t cols, uint64_t per, uint64_t n) {
  add(b, name, kind, rows, cols, vl__mul(&b->ck, per, n), 1);
}

/* Self-attention of a decoder layer: q/k/v (fused or not) or MLA, the
 * output projection, q/k norms (modeling_<type>.py <Type>Attention). */
static void attention(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
  if (a->mla) { /* DeepseekV2Attention */
    uint64_t qk = a->qk_nope_dim + a->qk_rope_dim;
    if (a->q_lora_rank) {
      layer(b, "q_a_proj", VL_T_LINEAR, a->q_lora_rank, h, 1);
      if (a->qkv_bias) layer(b, "q_a_proj.bias", VL_T_BIAS, a->q_lora_rank, 1, 1);
      layer(b, "q_a_layernorm", VL_T_NORM, a->q_lora_rank, 1, 1);
      layer(b, "q_b_proj", VL_T_LINEAR, a->heads * qk, a->q_lora_rank, 1);
    } else {
      layer(b, "q_proj", VL_T_LINEAR, a->heads * qk, h, 1);
    }
    layer(b, "kv_a_proj_with_mqa", VL_T_LINEAR, a->kv_lora_rank + a->qk_rope_dim, h, 1);
    if (a->qkv_bias)
      layer(b, "kv_a_proj_with_mqa.bias", VL_T_BIAS, a->kv_lora_rank + a->qk_rope_dim, 1, 1);
    layer(b, "kv_a_layernorm", VL_T_NORM, a->kv_lora_rank, 1, 1);
    layer(b, "kv_b_proj", VL_T_LINEAR, a->heads * (a->qk_nope_dim + a->v_head_dim), a->kv_lora_rank,
          1);
    layer(b, "o_proj", VL_T_LINEAR, h, a->heads * a->v_head_dim, 1);
    return;
  }
  if (a->fused_qkv) { /* Phi-3 qkv_proj, Falcon query_key_value, ModernBERT Wqkv */
    layer(b, a->family == VL_FAM_FALCON ? "query_key_value" : "qkv_proj", VL_T_LINEAR, q + 2 * kv,
          h, 1);
    if (a->qkv_bias) layer(b, "qkv_proj.bias", VL_T_BIAS, q + 2 * kv, 1, 1);
  } else {
    layer(b, "q_proj", VL_T_LINEAR, q, h, 1);
    layer(b, "k_proj", VL_T_LINEAR, kv, h, 1);
    layer(b, "v_proj", VL_T_LINEAR, kv, h, 1);
    if (a->qkv_bias) {
      layer(b, "q_proj.bias", VL_T_BIAS, q, 1, 1);
      layer(b, "k_proj.bias", VL_T_BIAS, kv, 1, 2);
    }
  }
  layer(b, a->family == VL_FAM_PHI || a->family == VL_FAM_FALCON ? "dense" : "o_proj", VL_T_LINEAR,
        h, q, 1);
  if (a->o_bias) layer(b, "o_proj.bias", VL_T_BIAS, h, 1, 1);
  if (a->attn_sinks) layer(b, "sinks", VL_T_BIAS, a->heads, 1, 1);
  /* q/k norms: per head (Qwen3, Gemma 3: RMSNorm of d; Phi: LayerNorm of
   * d; StableLM: a LayerNorm without bias for every head), or over all
   * heads (OLMo 2, OLMoE) */
  uint64_t nw = a->rms_norm || a->family == VL_FAM_STABLELM ? 1 : 2;
  if (a->qk_norm == 1 && a->family == VL_FAM_STABLELM) {
    layer(b, "q_layernorm", VL_T_NORM, a->head_dim, 1, a->heads);
    layer(b, "k_layernorm", VL_T_NORM, a->head_dim, 1, a->kv_heads);
  } else if (a->qk_norm == 1) {
    layer(b, "q_norm", VL_T_NORM, a->head_dim, 1, nw);
    layer(b, "k_norm", VL_T_NORM, a->head_dim, 1, nw);
  } else if (a->qk_norm == 2) {
    layer(b, "q_norm", VL_T_NORM, q, 1, 1);
    layer(b, "k_norm", VL_T_NORM, kv, 1, 1);
  }
}

/* A dense MLP of width w in n layers: gated (gate, up, down; gate_up fused)
 * or plain (up, act, down) */
static void dense_mlp(struct builder *b, const struct vl_arch *a, uint64_t w, uint64_t n) {
  uint64_t h = a->hidden;
  if (!w || !n) return;
  if (a->gated_mlp && a->fused_gate_up) {
    some_layers(b, "gate_up_proj", VL_T_LINEAR, 2 * w, h, 1, n);
  } else if (a->gated_mlp) {
    some_layers(b, "gate_proj", VL_T_LINEAR, w, h, 1, n);
    some_layers(b, "up_proj", VL_T_LINEAR, w, h, 1, n);
  } else {
    some_layers(b,
                a->family == VL_FAM_FALCON ? "dense_h_to_4h"
                : a->family == VL_FAM_PHI  ? "fc1"
                                           : "c_fc",
                VL_T_LINEAR, w, h, 1, n);
  }
  const char *down = a->gated_mlp                 ? "down_proj"
                     : a->family == VL_FAM_FALCON ? "dense_4h_to_h"
                     : a->family == VL_FAM_PHI    ? "fc2"
                                                  : "c_proj";
  some_layers(b, down, VL_T_LINEAR, h, w, 1, n);
  if (a->mlp_bias) {
    some_layers(b, "up.bias", VL_T_BIAS, w, 1, a->gated_mlp ? 2 : 1, n);
    some_layers(b, "down.bias", VL_T_BIAS, h, 1, 1, n);
  }
}

/* The MoE block of the sparse layers: router, routed experts (one 3-D
 * gate_up_proj and down_proj tensor each in transformers 5; Mixtral's
 * w1/w3/w2), shared experts and their gate (Qwen2-MoE, DeepSeek-V2). */
static void moe(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, n = a->layers - a->dense_layers, w = a->moe_intermediate;
  if (!a->experts || !n) return;
  some_layers(b, "gate", VL_T_LINEAR, a->experts, h, 1, n);
  some_layers(b, "w1", VL_T_LINEAR, w, h, a->experts, n);
  some_layers(b, "w3", VL_T_LINEAR, w, h, a->experts, n);
  some_layers(b, "w2", VL_T_LINEAR, h, w, a->experts, n);
  if (a->expert_bias) { /* gpt-oss: router.bias, gate_up_proj_bias, down_proj_bias */
    some_layers(b, "gate.bias", VL_T_BIAS, a->experts, 1, 1, n);
    some_layers(b, "gate_up_proj_bias", VL_T_BIAS, 2 * w, 1, a->experts, n);
    some_layers(b, "down_proj_bias", VL_T_BIAS, h, 1, a->experts, n);
  }
  if (a->shared_intermediate) {
    some_layers(b, "shared_expert.gate_proj", VL_T_LINEAR, a->shared_intermediate, h, 1, n);
    some_layers(b, "shared_expert.up_proj", VL_T_LINEAR, a->shared_intermediate, h, 1, n);
    some_layers(b, "shared_expert.down_proj", VL_T_LINEAR, h, a->shared_intermediate, 1, n);
  }
  if (a->shared_gate) some_layers(b, "shared_expert_gate", VL_T_LINEAR, 1, h, 1, n);
}

/* Norms of a decoder layer: two before attention and MLP; Gemma 2/3 four
 * (before and after each); OLMo 2 two after; one shared by a parallel
 * attention and MLP (Phi, Falcon) */
static void layer_norms(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden;
  if (a->shared_norm) {
    layer_norm(b, a, "input_layernorm", h);
    return;
  }
  if (!a->post_norm) layer_norm(b, a, "input_layernorm", h);
  layer_norm(b, a, "post_attention_layernorm", h);
  if (a->sandwich_norm) layer_norm(b, a, "pre_feedforward_layernorm", h);
  if (a->sandwich_norm || a->post_norm) layer_norm(b, a, "post_feedforward_layernorm", h);
}

/* Every Llama-like decoder, composed from its parts. */
static void decoder(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden;
  add(b, "embed_tokens", VL_T_EMBED, a->vocab, h, 1, 0);
  attention(b, a);
  uint64_t dense = a->experts ? a->dense_layers : a->layers;
  dense_mlp(b, a, a->intermediate, dense);
  moe(b, a);
  layer_norms(b, a);
  global_norm(b, a, "norm", h);
  if (!a->tie_embeddings) add(b, "lm_head", VL_T_HEAD, a->vocab, h, 1, 0);
  if (a->head_bias) add(b, "lm_head.bias", VL_T_BIAS, a->vocab, 1, 1, 0);
}

static void gpt2(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate;
  add(b, "wte", VL_T_EMBED, a->vocab, h, 1, 0);
  add(b, "wpe", VL_T_EMBED, a->max_positions, h, 1, 0);
  layer_norm(b, a, "ln_1", h);
  /* GPT-BigCode's multi-query c_attn: h + 2 d rows */
  uint64_t qkv = h + 2 * a->kv_heads * a->head_dim;
  layer(b, "c_attn", VL_T_LINEAR, qkv, h, 1);
  layer(b, "c_attn.bias", VL_T_BIAS, qkv, 1, 1);
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

/* BERT-like encoders with their masked-LM head: BERT, RoBERTa (the same
 * modules), DistilBERT (no token types, no pooler), DeBERTa-v2 (relative
 * position embeddings, no absolute positions in v3) */
static void encoder(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate;
  add(b, "word_embeddings", VL_T_EMBED, a->vocab, h, 1, 0);
  if (a->learned_pos) add(b, "position_embeddings", VL_T_EMBED, a->max_positions, h, 1, 0);
  add(b, "token_type_embeddings", VL_T_EMBED, a->type_vocab, h, 1, 0);
  global_norm(b, a, "embeddings.LayerNorm", h);
  layer(b, "query", VL_T_LINEAR, h, h, 1);
  layer(b, "key", VL_T_LINEAR, h, h, 1);
  layer(b, "value", VL_T_LINEAR, h, h, 1);
  layer(b, "attention.output.dense", VL_T_LINEAR, h, h, 1);
  layer(b, "qkvo.bias", VL_T_BIAS, h, 1, 4);
  if (a->rel_pos_proj & 1) layer(b, "pos_key_proj", VL_T_LINEAR, h, h, 1);
  if (a->rel_pos_proj & 2) layer(b, "pos_query_proj", VL_T_LINEAR, h, h, 1);
  if (a->rel_pos_proj)
    layer(b, "pos_proj.bias", VL_T_BIAS, h, 1, (a->rel_pos_proj & 1) + (a->rel_pos_proj >> 1));
  layer_norm(b, a, "attention.output.LayerNorm", h);
  layer(b, "intermediate.dense", VL_T_LINEAR, I, h, 1);
  layer(b, "intermediate.dense.bias", VL_T_BIAS, I, 1, 1);
  layer(b, "output.dense", VL_T_LINEAR, h, I, 1);
  layer(b, "output.dense.bias", VL_T_BIAS, h, 1, 1);
  layer_norm(b, a, "output.LayerNorm", h);
  if (a->rel_embed_rows) add(b, "rel_embeddings", VL_T_EMBED, a->rel_embed_rows, h, 1, 0);
  if (a->rel_norm) global_norm(b, a, "encoder.LayerNorm", h);
  /* the MLM head: transform (dense + LayerNorm), decoder tied to
   * word_embeddings, and its own bias of V */
  add(b, "cls.transform.dense", VL_T_LINEAR, h, h, 1, 0);
  add(b, "cls.transform.dense.bias", VL_T_BIAS, h, 1, 1, 0);
  global_norm(b, a, "cls.transform.LayerNorm", h);
  if (!a->tie_embeddings) add(b, "cls.decoder", VL_T_HEAD, a->vocab, h, 1, 0);
  add(b, "cls.decoder.bias", VL_T_BIAS, a->vocab, 1, 1, 0);
}

/* ModernBERT: the first layer has no attn_norm (an Identity) */
static void modernbert(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate, nw = a->norm_nobias ? 1 : 2;
  add(b, "tok_embeddings", VL_T_EMBED, a->vocab, h, 1, 0);
  add(b, "embeddings.norm", VL_T_NORM, h, 1, nw, 0);
  layer(b, "Wqkv", VL_T_LINEAR, 3 * h, h, 1);
  if (a->qkv_bias) layer(b, "Wqkv.bias", VL_T_BIAS, 3 * h, 1, 1);
  layer(b, "attn.Wo", VL_T_LINEAR, h, h, 1);
  if (a->o_bias) layer(b, "attn.Wo.bias", VL_T_BIAS, h, 1, 1);
  if (a->layers > 1) some_layers(b, "attn_norm", VL_T_NORM, h, 1, nw, a->layers - 1);
  layer(b, "mlp_norm", VL_T_NORM, h, 1, nw);
  layer(b, "Wi", VL_T_LINEAR, 2 * I, h, 1);
  layer(b, "mlp.Wo", VL_T_LINEAR, h, I, 1);
  if (a->mlp_bias) {
    layer(b, "Wi.bias", VL_T_BIAS, 2 * I, 1, 1);
    layer(b, "mlp.Wo.bias", VL_T_BIAS, h, 1, 1);
  }
  add(b, "final_norm", VL_T_NORM, h, 1, nw, 0);
  add(b, "head.dense", VL_T_LINEAR, h, h, 1, 0);
  if (a->cls_bias) add(b, "head.dense.bias", VL_T_BIAS, h, 1, 1, 0);
  add(b, "head.norm", VL_T_NORM, h, 1, nw, 0);
  if (!a->tie_embeddings) add(b, "decoder", VL_T_HEAD, a->vocab, h, 1, 0);
  if (a->head_bias) add(b, "decoder.bias", VL_T_BIAS, a->vocab, 1, 1, 0);
}

/* ViTForImageClassification: patch projection (a p x p convolution), [CLS]
 * token and positions, pre-norm layers, final LayerNorm, classifier (no
 * pooler) */
static void vit(struct builder *b, const struct vl_arch *a) {
  uint64_t h = a->hidden, I = a->intermediate, pp = a->patch_size * a->patch_size;
  add(b, "cls_token", VL_T_EMBED, h, 1, 1, 0);
  add(b, "position_embeddings", VL_T_EMBED, a->max_positions, h, 1, 0);
  add(b, "patch_embeddings.projection", VL_T_LINEAR, h, a->channels * pp, 1, 0);
  add(b, "patch_embeddings.projection.bias", VL_T_BIAS, h, 1, 1, 0);
  layer(b, "q_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "k_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "v_proj", VL_T_LINEAR, h, h, 1);
  if (a->qkv_bias) layer(b, "qkv.bias", VL_T_BIAS, h, 1, 3);
  layer(b, "o_proj", VL_T_LINEAR, h, h, 1);
  layer(b, "o_proj.bias", VL_T_BIAS, h, 1, 1);
  layer_norm(b, a, "layernorm_before", h);
  layer_norm(b, a, "layernorm_after", h);
  layer(b, "fc1", VL_T_LINEAR, I, h, 1);
  layer(b, "fc1.bias", VL_T_BIAS, I, 1, 1);
  layer(b, "fc2", VL_T_LINEAR, h, I, 1);
  layer(b, "fc2.bias", VL_T_BIAS, h, 1, 1);
  global_norm(b, a, "layernorm", h);
  add(b, "classifier", VL_T_HEAD, a->labels, h, 1, 0);
  add(b, "classifier.bias", VL_T_BIAS, a->labels, 1, 1, 0);
}

/* One stack of an encoder-decoder: self-attention, (decoder) cross-
 * attention, MLP, their norms, in n layers */
static void seq2seq_stack(struct builder *b, const struct vl_arch *a, uint64_t n, bool dec) {
  uint64_t h = a->hidden, inner = a->heads * a->head_dim, I = a->intermediate;
  uint64_t nw = a->rms_norm ? 1 : 2, att = dec ? 2 : 1;
  some_layers(b, "q", VL_T_LINEAR, inner, h, att, n);
  some_layers(b, "k", VL_T_LINEAR, inner, h, att, n);
  some_layers(b, "v", VL_T_LINEAR, inner, h, att, n);
  some_layers(b, "o", VL_T_LINEAR, h, inner, att, n);
  if (a->qkv_bias) some_layers(b, "qkvo.bias", VL_T_BIAS, h, 1, 4 * att, n);
  some_layers(b, "layer_norm", VL_T_NORM, h, 1, nw * (att + 1), n);
  if (a->gated_mlp) {
    some_layers(b, "wi_0", VL_T_LINEAR, I, h, 1, n);
    some_layers(b, "wi_1", VL_T_LINEAR, I, h, 1, n);
  } else {
    some_layers(b, "wi", VL_T_LINEAR, I, h, 1, n);
  }
  some_layers(b, "wo", VL_T_LINEAR, h, I, 1, n);
  if (a->mlp_bias) {
    some_layers(b, "wi.bias", VL_T_BIAS, I, 1, 1, n);
    some_layers(b, "wo.bias", VL_T_BIAS, h, 1, 1, n);
  }
  /* T5: relative position bias in the first block of each stack; BART:
   * learned positions (offset 2) and a LayerNorm after the embeddings */
  if (a->rel_bias) add(b, "relative_attention_bias", VL_T_EMBED, a->rel_buckets, a->heads, 1, 0);
  if (a->learned_pos) {
    add(b, "embed_positions", VL_T_EMBED, a->max_positions + a->pos_offset, h, 1, 0);
    add(b, "layernorm_embedding", VL_T_NORM, h, 1, nw, 0);
  }
  if (a->final_norm) add(b, "final_layer_norm", VL_T_NORM, h, 1, nw, 0);
}

/* T5ForConditionalGeneration, BartForConditionalGeneration: a shared
 * embedding, encoder and decoder stacks, the LM head (tied by default) */
static void seq2seq(struct builder *b, const struct vl_arch *a) {
  add(b, "shared", VL_T_EMBED, a->vocab, a->hidden, 1, 0);
  b->layers = a->enc_layers + a->layers;
  seq2seq_stack(b, a, a->enc_layers, false);
  seq2seq_stack(b, a, a->layers, true);
  b->layers = a->layers;
  if (!a->tie_embeddings) add(b, "lm_head", VL_T_HEAD, a->vocab, a->hidden, 1, 0);
}

/* a convolution of out x in x k x k with its batch norm (weight, bias) */
static void conv_bn(struct builder *b, const char *name, uint64_t out, uint64_t in, uint64_t k) {
  add(b, name, VL_T_LINEAR, out, in * k * k, 1, 0);
  add(b, "normalization", VL_T_NORM, out, 1, 2, 0);
}

/* ResNetForImageClassification: stem, stages, classifier (modeling_resnet.py:
 * ResNetBottleNeckLayer reduces to out / 4; a shortcut where the width or
 * the stride changes) */
static void resnet(struct builder *b, const struct vl_arch *a) {
  conv_bn(b, "embedder.convolution", a->stem_width, a->channels, 7);
  uint64_t in = a->stem_width;
  for (uint64_t s = 0; s < a->stages; s++) {
    uint64_t out = a->stage_width[s];
    bool stride = s > 0 || a->stride_first;
    for (uint64_t l = 0; l < a->stage_depth[s]; l++) {
      uint64_t cin = l ? out : in;
      if (!l && (cin != out || stride)) conv_bn(b, "shortcut", out, cin, 1);
      if (a->bottleneck) {
        uint64_t red = out / 4;
        conv_bn(b, "layer.0", red, cin, 1);
        conv_bn(b, "layer.1", red, red, 3);
        conv_bn(b, "layer.2", out, red, 1);
      } else {
        conv_bn(b, "layer.0", out, cin, 3);
        conv_bn(b, "layer.1", out, out, 3);
      }
    }
    in = out;
  }
  add(b, "classifier", VL_T_HEAD, a->labels, in, 1, 0);
  add(b, "classifier.bias", VL_T_BIAS, a->labels, 1, 1, 0);
}

vl_status vl_inventory_build(const struct vl_arch *a, struct vl_inventory *inv,
                             struct vl_err *err) {
  memset(inv, 0, sizeof *inv);
  struct builder b = {inv, {false}, a->layers, false};
  switch (a->family) {
  case VL_FAM_GPT2:
  case VL_FAM_GPT_BIGCODE: gpt2(&b, a); break;
  case VL_FAM_GPT_NEOX: neox(&b, a); break;
  case VL_FAM_OPT: opt(&b, a); break;
  case VL_FAM_BERT:
  case VL_FAM_ROBERTA:
  case VL_FAM_DISTILBERT:
  case VL_FAM_DEBERTA_V2: encoder(&b, a); break;
  case VL_FAM_MODERNBERT: modernbert(&b, a); break;
  case VL_FAM_VIT: vit(&b, a); break;
  case VL_FAM_T5:
  case VL_FAM_BART: seq2seq(&b, a); break;
  case VL_FAM_RESNET: resnet(&b, a); break;
  case VL_FAM_FALCON:
  default: decoder(&b, a); break;
  }
  if (b.ck.overflow)
    return vl__fail(err, VL_EOVERFLOW, "the parameter count of this config overflows 64 bits");
  if (b.full)
    return vl__fail(err, VL_ERANGE,
                    "this config has more than %d distinct parameter shapes; measure the job with "
                    "`vramledger trace`",
                    VL_MAX_TENSORS);
  return VL_OK;
}

/* Tensor-parallel split of a tensor of the inventory: matmul weights and
 * vocabulary-parallel embeddings/heads are split, norms and biases are not.
 * The training bill (bill.c), inference (infer.c) and its replay
 * (infer_replay.c) all split by this one rule. */
uint64_t vl__tp_split(const struct vl_tensor *t, uint64_t tp, uint64_t elems) {
  if (tp <= 1) return elems;
  if (t->kind == VL_T_LINEAR || t->kind == VL_T_HEAD ||
      (t->kind == VL_T_EMBED && strstr(t->name, "position") == NULL && strcmp(t->name, "wpe")))
    return vl__div_ceil(elems, tp);
  return elems;
}

uint64_t vl__count_in(const struct vl_arch *arch, const struct vl_tensor *t, int w) {
  /* spread evenly, the remainder over the layers so that they sum to the
   * count (tensors in some layers only: MoE beside dense layers) */
  if (t->per_layer)
    return w >= 0 && arch->layers
               ? t->count * (uint64_t)(w + 1) / arch->layers - t->count * (uint64_t)w / arch->layers
               : 0;
  return w == (t->kind == VL_T_EMBED ? VL_BEFORE_LAYERS : VL_AFTER_LAYERS) ? t->count : 0;
}

/* transformers 5 holds a layer's routed experts as two 3-D parameters,
 * gate_up_proj (E, 2w, h) and down_proj (E, h, w) (modeling_qwen3_moe.py
 * Qwen3MoeExperts; modeling_olmoe.py, modeling_mixtral.py,
 * modeling_deepseek_v3.py alike), where the inventory counts each expert's
 * w1, w3 and w2 (moe() above) */
uint64_t vl__expert_part(const struct vl_arch *arch, const struct vl_tensor *t) {
  if (!arch->experts || !t->per_layer) return 0;
  if (!strcmp(t->name, "w1")) return 2;
  if (!strcmp(t->name, "w2") || !strcmp(t->name, "gate_up_proj_bias") ||
      !strcmp(t->name, "down_proj_bias"))
    return 1; /* (gpt-oss's biases: one (E, out) parameter each) */
  return !strcmp(t->name, "w3") ? UINT64_MAX : 0;
}
