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

/* Every model type described, one row each; the enum below, the list of
 * supported types and the readers' table (lib/model/config.c) are generated
 * from it:
 *   X(ID, "model_type", READ, PARTS, (V, h, I, L, a, g, positions, d, tie), ATTN,
 *     (PEFT's default LoRA targets))
 * READ names the reader of the type's keys, vl__read_READ
 * (lib/model/config*.c). `decoder` reads the keys every Llama-like decoder
 * has, with the row's defaults (transformers 5.17 configuration_<type>.py:
 * vocab_size, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads (0: as many as heads),
 * max_position_embeddings, head_dim (0: h/a), tie_word_embeddings), then
 * PARTS, vl__parts_PARTS (lib/model/config_decoders.c), reads the parts the
 * type adds to the Llama block. The other readers read their own keys and
 * defaults (PARTS none, defaults unused). ATTN: `sdpa` where transformers
 * runs the type under SDPA when asked, `eager` where it has no SDPA path
 * (5.17: DeBERTa-v2's modeling file has none; gpt-oss's sinks run in
 * eager_attention_forward only), so the job is estimated eager whatever
 * --attention says. The last column: the modules PEFT adapts when a
 * LoraConfig names none (peft 0.21 utils/constants.py
 * TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), in the inventory's
 * names (DeBERTa-v2's query_proj is `query` there); (NULL) where PEFT has
 * no default and asks for target_modules. */
/* clang-format off */
#define VL_MODEL_TYPES(X)                                                                                                                   \
  X(LLAMA,       "llama",       decoder, llama,       (32000, 4096, 11008, 32, 32, 0, 2048, 0, 0), sdpa, ("q_proj", "v_proj"))              \
  X(MISTRAL,     "mistral",     decoder, mistral,     (32000, 4096, 14336, 32, 32, 8, 131072, 0, 0), sdpa, ("q_proj", "v_proj"))            \
  X(MIXTRAL,     "mixtral",     decoder, mixtral,     (32000, 4096, 14336, 32, 32, 8, 131072, 0, 0), sdpa, ("q_proj", "v_proj"))            \
  X(QWEN2,       "qwen2",       decoder, qwen2,       (151936, 4096, 22016, 32, 32, 0, 32768, 0, 0), sdpa, ("q_proj", "v_proj"))            \
  X(QWEN2_MOE,   "qwen2_moe",   decoder, qwen2_moe,   (151936, 2048, 5632, 24, 16, 0, 32768, 0, 0), sdpa, (NULL))                           \
  X(QWEN3,       "qwen3",       decoder, qwen3,       (151936, 4096, 22016, 32, 32, 0, 32768, 128, 0), sdpa, ("q_proj", "v_proj"))          \
  X(QWEN3_MOE,   "qwen3_moe",   decoder, qwen3_moe,   (151936, 2048, 6144, 24, 32, 4, 32768, 0, 0), sdpa, (NULL))                           \
  X(GEMMA,       "gemma",       decoder, gemma,       (256000, 3072, 24576, 28, 16, 0, 8192, 256, 1), sdpa, ("q_proj", "v_proj"))           \
  X(GEMMA2,      "gemma2",      decoder, gemma2,      (256000, 2304, 9216, 26, 8, 4, 8192, 256, 1), sdpa, ("q_proj", "v_proj"))             \
  X(GEMMA3,      "gemma3_text", decoder, gemma3,      (262208, 2304, 9216, 26, 8, 4, 131072, 256, 1), sdpa, ("q_proj", "v_proj"))           \
  X(PHI,         "phi",         decoder, phi,         (51200, 2048, 8192, 24, 32, 0, 2048, 0, 0), sdpa, ("q_proj", "v_proj", "fc1", "fc2")) \
  X(PHI3,        "phi3",        decoder, phi3,        (32064, 3072, 8192, 32, 32, 0, 4096, 0, 0), sdpa, (NULL))                             \
  X(OLMO2,       "olmo2",       decoder, olmo2,       (50304, 4096, 11008, 32, 32, 0, 2048, 0, 0), sdpa, (NULL))                            \
  X(OLMOE,       "olmoe",       decoder, olmoe,       (50304, 2048, 2048, 16, 16, 0, 4096, 0, 0), sdpa, (NULL))                             \
  X(GRANITE,     "granite",     decoder, granite,     (32000, 4096, 11008, 32, 32, 0, 2048, 0, 0), sdpa, (NULL))                            \
  X(STARCODER2,  "starcoder2",  decoder, starcoder2,  (49152, 3072, 12288, 30, 24, 2, 4096, 0, 1), sdpa, (NULL))                            \
  X(FALCON,      "falcon",      falcon,  none,        (0), sdpa, ("query_key_value"))                                                       \
  X(GPT_BIGCODE, "gpt_bigcode", gpt2,    none,        (0), sdpa, ("c_attn"))                                                                \
  X(GPT2,        "gpt2",        gpt2,    none,        (0), sdpa, ("c_attn"))                                                                \
  X(GPT_NEOX,    "gpt_neox",    neox,    none,        (0), sdpa, ("query_key_value"))                                                       \
  X(OPT,         "opt",         opt,     none,        (0), sdpa, ("q_proj", "v_proj"))                                                      \
  X(STABLELM,    "stablelm",    decoder, stablelm,    (50304, 2560, 6912, 32, 32, 0, 4096, 0, 0), sdpa, ("q_proj", "v_proj"))               \
  X(GLM,         "glm",         decoder, glm,         (151552, 4096, 13696, 40, 32, 2, 131072, 128, 0), sdpa, (NULL))                       \
  X(DEEPSEEK_V2, "deepseek_v2", decoder, deepseek_v2, (102400, 4096, 11008, 32, 32, 0, 2048, 0, 0), sdpa, (NULL))                           \
  X(DEEPSEEK_V3, "deepseek_v3", decoder, deepseek_v3, (129280, 7168, 18432, 61, 128, 128, 4096, 64, 0), sdpa, (NULL))                       \
  X(GLM4,        "glm4",        decoder, glm4,        (151552, 4096, 13696, 40, 32, 2, 131072, 128, 0), sdpa, (NULL))                       \
  X(SMOLLM3,     "smollm3",     decoder, smollm3,     (128256, 2048, 11008, 36, 16, 4, 32768, 0, 1), sdpa, (NULL))                          \
  X(GPT_OSS,     "gpt_oss",     decoder, gpt_oss,     (201088, 2880, 2880, 36, 64, 8, 131072, 64, 0), eager, (NULL))                        \
  X(EXAONE4,     "exaone4",     decoder, exaone4,     (102400, 4096, 16384, 32, 32, 0, 2048, 0, 0), sdpa, (NULL))                           \
  X(BERT,        "bert",        encoder, none,        (0), sdpa, ("query", "value"))                                                        \
  X(ROBERTA,     "roberta",     encoder, none,        (0), sdpa, ("query", "value"))                                                        \
  X(DISTILBERT,  "distilbert",  encoder, none,        (0), sdpa, (NULL))                                                                    \
  X(DEBERTA_V2,  "deberta-v2",  encoder, none,        (0), eager, ("query", "value"))                                                       \
  X(MODERNBERT,  "modernbert",  encoder, none,        (0), sdpa, (NULL))                                                                    \
  X(T5,          "t5",          seq2seq, none,        (0), sdpa, ("q", "v"))                                                                \
  X(BART,        "bart",        seq2seq, none,        (0), sdpa, ("q_proj", "v_proj"))                                                      \
  X(VIT,         "vit",         vision,  none,        (0), sdpa, (NULL))                                                                    \
  X(RESNET,      "resnet",      vision,  none,        (0), sdpa, (NULL))
/* clang-format on */

#define VL_FAMILY_ENUM_(id, name, read, parts, defaults, attn, peft) VL_FAM_##id,
enum vl_family {
  VL_MODEL_TYPES(VL_FAMILY_ENUM_)
  /* a model_type nobody described: its usual keys read as a Llama-like
   * decoder (approximate) */
  VL_FAM_GENERIC,
  VL_FAM_COUNT
};
#undef VL_FAMILY_ENUM_

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
  double act_dropout;    /* inside the MLP, after its activation (T5 dropout_rate, BART
                            activation_dropout) */
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
  unsigned qkv_sliced : 1;        /* q, k, v sliced off it, not split (Phi-3: qkv[..., :pos]) */
  unsigned qkv_heads_first : 1;   /* split after .view(..., heads, 3 d).transpose(1, 2) (NeoX) */
  unsigned eos : 1;               /* an eos_token_id: generate()'s min-length processors run */
  unsigned rope_cat : 1;          /* q and k rotated then joined with torch.cat (partial rotary:
                                     NeoX, Phi, StableLM, GLM; Phi-3 always): q reaches the
                                     attention contiguous as (B, heads, s, d) */
  unsigned causal : 1;            /* decoder (causal LM head) vs encoder (MLM) */
  unsigned relu_act : 1;          /* ReLU MLP (OPT): one saved tensor, not two */
  unsigned gelu_python : 1;       /* GELU written in Python ops (GPT-2 gelu_new) */
  unsigned parallel_residual : 1; /* x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX) */
  unsigned softmax_native : 1;    /* eager softmax in the scores' dtype, not fp32 (GPT-2) */
  unsigned fused_gate_up : 1;     /* one gate_up_proj matrix (Phi-3, GLM) */

  /* ---- parts beyond the Llama block (docs/model.md, "Model types") ---- */
  unsigned approximate : 1; /* model_type unknown: read as a generic decoder */
  unsigned qk_norm : 2; /* RMSNorm on q and k: 1 per head (Qwen3, Gemma 3), 2 over all heads (OLMo
                           2, OLMoE) */
  unsigned sandwich_norm : 1;  /* Gemma 2/3: norms before and after attention and MLP (4 a layer) */
  unsigned post_norm : 1;      /* OLMo 2: norms after attention and MLP only, none before */
  unsigned pos_local : 1;      /* OPTDecoder: the learned positions and project_in's output are
                                  its locals, summed after the causal mask, no dropout */
  unsigned q_scaled : 1;       /* q_proj's output times head_dim^-0.5, a new tensor (OPT) */
  unsigned layer_inline : 1;   /* OPTDecoderLayer: the dropouts and fc1/fc2 written in the layer,
                                  each result rebinding hidden_states: the attention's norm output
                                  goes as self_attn returns (before the dropout), the MLP's after
                                  fc1 */
  unsigned norm_after_add : 1; /* OPT-350m (do_layer_norm_before false): each norm after its
                                  residual add, BERT's layer */
  unsigned norm_fp32_weight : 1; /* RMSNorm multiplies by its weight in fp32, then casts (Gemma's
                                    1 + weight, OLMo 2) */
  unsigned rope_cast_back : 1;   /* rotary's output cast back to q's and k's dtype (OLMo 2) */
  unsigned rope_upcast : 1;      /* rotary on q.float() and k.float() (ModernBERT) */
  unsigned shared_norm : 1;      /* one norm feeds attention and MLP (Phi, Falcon parallel_attn) */
  unsigned head_bias : 1;        /* the LM head has a bias (Phi) */
  unsigned embed_scaled : 1;     /* the embeddings are multiplied (Gemma sqrt(h), Granite) */
  unsigned embed_scale_own : 1;  /* ... by the embedding module itself (Gemma's
                                    GemmaTextScaledWordEmbedding; Granite's model multiplies) */
  unsigned resid_scaled : 1;     /* Granite: residual branches multiplied before the add */
  unsigned logits_scaled : 1;    /* Granite: logits divided by logits_scaling */
  unsigned shared_gate : 1;      /* Qwen2-MoE: sigmoid gate on the shared expert */
  unsigned mla : 1;              /* DeepSeek-V2 multi-head latent attention */
  unsigned rel_bias : 1;         /* T5: relative position bias added to the scores */
  unsigned attn_sinks : 1;       /* gpt-oss: a learned sink logit a head joins the scores
                                    (eager attention only) */
  unsigned eager_only : 1;       /* transformers runs the type's attention eagerly only (its
                                    row's ATTN) */
  unsigned expert_bias : 1; /* gpt-oss: the router and every expert's projections have biases */
  unsigned gate_clamp : 1;  /* gpt-oss: the experts' clamped GLU on interleaved gate/up */
  unsigned router_fp32 : 2; /* the routing weights stay float32 (1: Mixtral's router; 2:
                               DeepSeek-V2/V3's, which also casts its input to float32) */
  double attn_softcap;      /* Gemma 2: tanh cap on the attention scores (0: none) */
  double final_softcap;     /* Gemma 2: tanh cap on the logits (0: none) */
  uint64_t sliding_window;  /* tokens a sliding-window layer sees (0: none) */
  uint64_t sliding_layers;  /* how many layers slide */
  uint64_t global_every;    /* ModernBERT: every n-th layer is global, the rest slide */
  /* layers without rotary positions (NoPE): nope_layers of them spread over
   * the stack (SmolLM3 no_rope_layers), or with nope_global the layers that
   * do not slide (EXAONE-4's global layers) */
  uint64_t nope_layers;
  unsigned nope_global : 1;
  /* bytes of the buffers that are not parameters but go to the GPU with the
   * model (GPT-BigCode's causal mask: max_positions^2 bools) */
  uint64_t buffer_bytes;
  /* MoE (experts > 0): routed experts of moe_intermediate, shared experts of
   * shared_intermediate in all, dense_layers layers with a dense MLP of
   * intermediate instead (DeepSeek first_k_dense_replace, Qwen
   * mlp_only_layers / decoder_sparse_step) */
  uint64_t moe_intermediate;
  uint64_t shared_intermediate;
  uint64_t dense_layers;
  /* MLA: q through a low-rank (q_lora_rank, 0: one q_proj), k and v from a
   * compressed kv_lora_rank latent; per head qk_nope + qk_rope for q and
   * k, v_head_dim for v (DeepSeek-V2, arXiv 2405.04434 section 2.1) */
  uint64_t q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
  /* encoder-decoder (T5, BART): enc_layers encoder layers, `layers` decoder
   * layers with cross-attention; rel_buckets T5's relative buckets */
  uint64_t enc_layers;
  uint64_t rel_buckets;
  /* DeBERTa-v2: relative position embeddings rows, separate position
   * projections when not shared */
  uint64_t rel_embed_rows;
  unsigned rel_pos_proj : 2; /* bit 0 c2p (pos_key_proj), bit 1 p2c (pos_query_proj) */
  unsigned rel_att : 2;      /* DeBERTa's disentangled terms: bit 0 c2p, bit 1 p2c */
  unsigned rel_norm : 1;     /* encoder.LayerNorm on the relative embeddings */
  unsigned cls_bias : 1;     /* ModernBERT: head.dense has a bias (classifier_bias) */
  unsigned norm_nobias : 1;  /* LayerNorms without a bias (ModernBERT norm_bias false) */
  /* vision: ViT patches, ResNet stages; labels: classifier rows */
  uint64_t image_size, patch_size, channels, labels;
  uint64_t stages, stage_depth[8], stage_width[8], stem_width;
  unsigned bottleneck : 1;            /* ResNet bottleneck blocks (1x1, 3x3, 1x1), else basic */
  unsigned stride_first : 1;          /* ResNet downsample_in_first_stage */
  unsigned scale_decoder_outputs : 1; /* T5: the tied head's input * d_model^-0.5 (T5 v1.0;
                                         a config's tie_word_embeddings false: v1.1) */
};

/* Encoders whose training step the allocation replay runs: the BERT-style
 * post-norm ones and the pre-norm ModernBERT and ViT. */
static inline int vl_arch_replays_encoder(const struct vl_arch *a) {
  return a->family == VL_FAM_BERT || a->family == VL_FAM_ROBERTA ||
         a->family == VL_FAM_DISTILBERT || a->family == VL_FAM_DEBERTA_V2 ||
         a->family == VL_FAM_MODERNBERT || a->family == VL_FAM_VIT;
}

/* Models that take images (pixel_values): the image side, not a token
 * count, is their input's length (ViT: tokens = (side/patch)^2 + 1) */
static inline int vl_arch_is_vision(const struct vl_arch *a) {
  return a->family == VL_FAM_VIT || a->family == VL_FAM_RESNET;
}

/* Convolutional models: feature maps, no tokens or attention */
static inline int vl_arch_is_conv(const struct vl_arch *a) { return a->stages > 0; }

/* Encoder-decoders: an encoder's tokens (seq), a decoder's (target_seq) */
static inline int vl_arch_is_seq2seq(const struct vl_arch *a) { return a->enc_layers > 0; }

/* BERT-style layers (and OPT-350m's): the norm after each residual add (post-LN) */
static inline int vl_arch_post_ln(const struct vl_arch *a) {
  return a->norm_after_add || a->family == VL_FAM_BERT || a->family == VL_FAM_ROBERTA ||
         a->family == VL_FAM_DISTILBERT || a->family == VL_FAM_DEBERTA_V2;
}

/* The model's task head as transformers' Auto class builds it. */
static inline int vl_arch_is_encoder(const struct vl_arch *a) {
  return !a->causal && !a->enc_layers;
}

/*! Parse a Hugging Face config.json held in text[0..len).
 * @return VL_OK and *out filled; VL_EPARSE (message has line and column),
 * VL_EARCH (unknown model_type; message lists the supported ones), VL_EKEY
 * (a key has the wrong type), VL_ERANGE (absurd or inconsistent sizes). */
vl_status vl_arch_from_json(const char *text, size_t len, struct vl_arch *out,
                            struct vl_err *err) VL_MUST_USE;

/*! Comma-separated list of supported model_type values (static storage). */
const char *vl_arch_supported(void);

/*! Why an estimate for this architecture is approximate, or NULL where
 * every part of it is described (static storage). */
const char *vl_arch_approximate(const struct vl_arch *a);

/*! The model_type a family is read from ("generic decoder" for
 * VL_FAM_GENERIC); static storage. */
const char *vl_arch_family_name(enum vl_family f);

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

#define VL_MAX_TENSORS 96

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
