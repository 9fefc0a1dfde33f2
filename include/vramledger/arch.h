/* vramledger: a model architecture read from a Hugging Face config.json, and
 * its parameter inventory.
 *
 * vl_arch_from_json() parses text the caller has read (the library does no
 * file I/O) and applies Hugging Face's defaults where a key is missing, so the
 * result describes the model transformers would build from that config. */
#ifndef VRAMLEDGER_ARCH_H
#define VRAMLEDGER_ARCH_H
#include <stddef.h>
#include <stdint.h>

#include "vramledger/status.h"

enum vl_family {
  VL_FAM_LLAMA,
  VL_FAM_MISTRAL,
  VL_FAM_QWEN2,
  VL_FAM_GEMMA,
  VL_FAM_PHI3,
  VL_FAM_MIXTRAL,
  VL_FAM_GPT2,
  VL_FAM_GPT_NEOX,
  VL_FAM_OPT,
  VL_FAM_BERT,
  VL_FAM_COUNT
};

struct vl_arch {
  enum vl_family family;
  char model_type[32];
  uint64_t vocab;          /* V */
  uint64_t hidden;         /* h */
  uint64_t layers;         /* L */
  uint64_t heads;          /* a, query heads */
  uint64_t kv_heads;       /* g, key/value heads (GQA/MQA: g < a) */
  uint64_t head_dim;       /* d (Gemma: 256, not h/a) */
  uint64_t intermediate;   /* I, MLP width (per expert for MoE) */
  uint64_t max_positions;  /* learned position table rows (GPT-2, OPT, BERT) */
  uint64_t type_vocab;     /* BERT token-type rows */
  uint64_t embed_proj_dim; /* OPT word_embed_proj_dim (== h when no projection) */
  uint64_t experts;        /* MoE experts per layer (0: dense) */
  uint64_t experts_per_token;
  uint32_t pos_offset;   /* OPT's learned positions carry 2 extra rows */
  double rotary_pct;     /* GPT-NeoX partial rotary; 1 for full, 0 for none */
  double attn_dropout;   /* probability on attention probabilities */
  double hidden_dropout; /* probability on residual branches */
  double embed_dropout;  /* probability after the embeddings */
  /* structure flags */
  unsigned tie_embeddings : 1;
  unsigned qkv_bias : 1;
  unsigned o_bias : 1;
  unsigned mlp_bias : 1;
  unsigned gated_mlp : 1;         /* SwiGLU/GeGLU: gate, up, down */
  unsigned rms_norm : 1;          /* RMSNorm (weight) vs LayerNorm (weight + bias) */
  unsigned norm_affine : 1;       /* norms have parameters */
  unsigned learned_pos : 1;       /* learned absolute positions */
  unsigned final_norm : 1;        /* a norm after the last layer */
  unsigned fused_qkv : 1;         /* one qkv matrix (GPT-2, NeoX, Phi-3) */
  unsigned causal : 1;            /* decoder (causal LM head) vs encoder (MLM) */
  unsigned relu_act : 1;          /* ReLU MLP (OPT): one saved tensor, not two */
  unsigned gelu_python : 1;       /* GELU written in Python ops (GPT-2 gelu_new) */
  unsigned parallel_residual : 1; /* x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX) */
  unsigned softmax_native : 1;    /* eager softmax in the scores' dtype, not fp32 (GPT-2) */
};

/*! Parse a Hugging Face config.json held in text[0..len).
 * @return VL_OK and *out filled; VL_EPARSE (message has line and column),
 * VL_EARCH (unknown model_type; message lists the supported ones), VL_EKEY
 * (a key has the wrong type), VL_ERANGE (absurd or inconsistent sizes). */
vl_status vl_arch_from_json(const char *text, size_t len, struct vl_arch *out,
                            struct vl_err *err) VL_MUST_USE;

/*! Comma-separated list of supported model_type values (static storage). */
const char *vl_arch_supported(void);

/* ---- parameter inventory ------------------------------------------------ */

enum vl_tensor_kind {
  VL_T_EMBED,  /* embedding tables (token, position, type) */
  VL_T_LINEAR, /* matmul weights: cast by autocast, sharded by TP */
  VL_T_BIAS,   /* linear biases */
  VL_T_NORM,   /* norm weights and biases */
  VL_T_HEAD    /* an untied output projection */
};

/* One parameter tensor shape and how many of it the model holds in total
 * (already multiplied by layers and experts). Vectors have cols == 1. */
struct vl_tensor {
  const char *name; /* HF module name, e.g. "q_proj", "embed_tokens" */
  enum vl_tensor_kind kind;
  uint64_t rows, cols; /* out_features x in_features for linears */
  uint64_t count;      /* how many tensors of this shape */
  unsigned per_layer : 1;
};

#define VL_MAX_TENSORS 32

struct vl_inventory {
  struct vl_tensor t[VL_MAX_TENSORS];
  int n;
  uint64_t total;     /* sum(p.numel()) as PyTorch counts it */
  uint64_t per_layer; /* elements in one transformer layer */
  uint64_t largest;   /* elements in the largest single tensor */
};

/*! Build the parameter inventory of the model transformers builds from the
 * architecture (AutoModelForCausalLM; AutoModelForMaskedLM for BERT).
 * @return VL_OK, or VL_EOVERFLOW for absurd shapes. */
vl_status vl_inventory_build(const struct vl_arch *a, struct vl_inventory *inv,
                             struct vl_err *err) VL_MUST_USE;

#endif
