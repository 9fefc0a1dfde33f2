/* config.json -> struct vl_arch for encoders (RoBERTa, DistilBERT,
 * DeBERTa-v2, ModernBERT, ViT), encoder-decoders (T5, BART) and ResNet:
 * each model type's keys and transformers' defaults (transformers 5.17
 * models/<type>/configuration_<type>.py). */
#include <string.h>

#include "config_read.h"

/* BERT and RoBERTa: the same modules and keys, their own vocabulary default */
static vl_status bert_like(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys
      bert = {HF_SHAPE("intermediate_size"), 30522, 768, 12, 12, 3072, 512},
      roberta = {HF_SHAPE("intermediate_size"), 50265, 768, 12, 12, 3072, 512};
  TRY(vl__read_shape(r, a, a->family == VL_FAM_BERT ? &bert : &roberta));
  TRY(vl__get_u64(r, "type_vocab_size", 2, 0, MAX_VOCAB, &a->type_vocab));
  TRY(vl__get_prob(r, "attention_probs_dropout_prob", 0.1, &a->attn_dropout));
  TRY(vl__get_prob(r, "hidden_dropout_prob", 0.1, &a->hidden_dropout));
  a->embed_dropout = a->hidden_dropout;
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  /* the masked-LM decoder is nn.Linear(h, V) with a bias (addmm: its
   * backward makes the input's gradient first; BertLMPredictionHead,
   * RobertaLMHead) */
  a->head_bias = 1;
  a->norm_affine = a->learned_pos = 1;
  return VL_OK;
}

/* DistilBERT: dim / n_layers / n_heads / hidden_dim; no token types */
static vl_status distilbert(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      "vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "max_position_embeddings",
      30522,        768,   6,          12,        3072,         512};
  TRY(vl__read_shape(r, a, &k));
  TRY(vl__get_prob(r, "attention_dropout", 0.1, &a->attn_dropout));
  TRY(vl__get_prob(r, "dropout", 0.1, &a->hidden_dropout));
  a->embed_dropout = a->hidden_dropout;
  a->type_vocab = 0;
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->head_bias = 1; /* vocab_projector: nn.Linear(dim, vocab_size) */
  a->norm_affine = a->learned_pos = 1;
  return VL_OK;
}

/* DeBERTa-v2/v3: disentangled attention over relative position embeddings
 * (He et al. 2021, arXiv 2006.03654; modeling_deberta_v2.py) */
static vl_status deberta(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      HF_SHAPE("intermediate_size"), 128100, 1536, 24, 24, 6144, 512};
  TRY(vl__read_shape(r, a, &k));
  TRY(vl__get_u64(r, "type_vocab_size", 0, 0, MAX_VOCAB, &a->type_vocab));
  TRY(vl__get_prob(r, "attention_probs_dropout_prob", 0.1, &a->attn_dropout));
  TRY(vl__get_prob(r, "hidden_dropout_prob", 0.1, &a->hidden_dropout));
  a->embed_dropout = a->hidden_dropout;
  int rel = 0, pbi = 1, share = 0;
  TRY(vl__get_bool(r, "relative_attention", 0, &rel));
  TRY(vl__get_bool(r, "position_biased_input", 1, &pbi));
  TRY(vl__get_bool(r, "share_att_key", 0, &share));
  a->learned_pos = (unsigned)pbi;
  if (rel) {
    json_t *mr = json_object_get(r->root, "max_relative_positions");
    json_t *pb = json_object_get(r->root, "position_buckets");
    long long maxrel = mr && json_is_integer(mr) ? json_integer_value(mr) : -1;
    long long buckets = pb && json_is_integer(pb) ? json_integer_value(pb) : -1;
    if (maxrel < 1) maxrel = (long long)a->max_positions;
    uint64_t span = (uint64_t)(buckets > 0 ? buckets : maxrel);
    if (span > MAX_POS) return vl__fail(r->err, VL_ERANGE, "key 'position_buckets': too large");
    a->rel_embed_rows = 2 * span;
    const char *nre = "none";
    TRY(vl__get_str(r, "norm_rel_ebd", "none", &nre));
    a->rel_norm = strstr(nre, "layer_norm") != NULL;
    json_t *pat = json_object_get(r->root, "pos_att_type");
    if (pat && !json_is_null(pat) && !json_is_array(pat))
      return vl__fail(r->err, VL_EKEY, "key 'pos_att_type': expected an array, got %s",
                      vl__json_kind(pat));
    if (pat && json_is_array(pat)) {
      for (size_t i = 0; i < json_array_size(pat); i++) {
        const char *t = json_string_value(json_array_get(pat, i));
        if (!t)
          return vl__fail(r->err, VL_EKEY, "key 'pos_att_type': entry %zu is not a string", i);
        if (strcmp(t, "c2p") == 0) a->rel_att |= 1;
        if (strcmp(t, "p2c") == 0) a->rel_att |= 2;
      }
    }
    if (!share) a->rel_pos_proj = a->rel_att;
  }
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->head_bias = 1; /* DebertaV2LMPredictionHead's decoder: nn.Linear(h, V) */
  a->norm_affine = 1;
  return VL_OK;
}

/* ModernBERT: fused Wqkv, GeGLU MLP (Wi of 2 I), LayerNorms without bias,
 * rotary positions, global attention every n layers and a local window
 * elsewhere (Warner et al. 2024, arXiv 2412.13663; modeling_modernbert.py) */
static vl_status modernbert(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {
      HF_SHAPE("intermediate_size"), 50368, 768, 22, 12, 1152, 8192};
  TRY(vl__read_shape(r, a, &k));
  int nb = 0, ab = 0, mb = 0, db = 1, cb = 0;
  TRY(vl__get_bool(r, "norm_bias", 0, &nb));
  TRY(vl__get_bool(r, "attention_bias", 0, &ab));
  TRY(vl__get_bool(r, "mlp_bias", 0, &mb));
  TRY(vl__get_bool(r, "decoder_bias", 1, &db));
  TRY(vl__get_bool(r, "classifier_bias", 0, &cb));
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  TRY(vl__get_prob(r, "mlp_dropout", 0.0, &a->hidden_dropout));
  TRY(vl__get_prob(r, "embedding_dropout", 0.0, &a->embed_dropout));
  uint64_t every = 3, local = 128;
  TRY(vl__get_u64(r, "global_attn_every_n_layers", 3, 1, MAX_LAYERS, &every));
  TRY(vl__get_u64(r, "local_attention", 128, 0, MAX_POS, &local));
  a->sliding_window = local / 2; /* each side of a token */
  a->global_every = every;
  a->sliding_layers = 0;
  for (uint64_t l = 0; l < a->layers; l++)
    if (l % every) a->sliding_layers++;
  a->qkv_bias = a->o_bias = (unsigned)ab;
  a->mlp_bias = (unsigned)mb;
  a->head_bias = (unsigned)db; /* decoder.bias */
  a->cls_bias = (unsigned)cb;
  a->norm_nobias = (unsigned)!nb; /* LayerNorm(bias=False): a weight only */
  a->norm_affine = a->gated_mlp = a->fused_qkv = a->fused_gate_up = a->final_norm = 1;
  a->rotary_pct = 1.0;
  /* apply_rotary_pos_emb: (q.float() * cos) + (rotate_half(q.float()) *
   * sin), then q_embed.to(original_dtype) (modeling_modernbert.py) */
  a->rope_upcast = a->rope_cast_back = 1;
  int tie = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  return VL_OK;
}

static vl_status vit(struct vl__reader *r, struct vl_arch *a) {
  static const struct shape_keys k = {"vocab_size",
                                      "hidden_size",
                                      "num_hidden_layers",
                                      "num_attention_heads",
                                      "intermediate_size",
                                      "max_position_embeddings",
                                      1,
                                      768,
                                      12,
                                      12,
                                      3072,
                                      1};
  TRY(vl__read_shape(r, a, &k));
  a->vocab = 0;
  TRY(vl__get_u64(r, "image_size", 224, 1, 1u << 16, &a->image_size));
  TRY(vl__get_u64(r, "patch_size", 16, 1, 1u << 16, &a->patch_size));
  TRY(vl__get_u64(r, "num_channels", 3, 1, 4096, &a->channels));
  if (a->patch_size > a->image_size)
    return vl__fail(r->err, VL_ERANGE, "patch_size %llu is larger than image_size %llu",
                    (unsigned long long)a->patch_size, (unsigned long long)a->image_size);
  int qb = 1;
  TRY(vl__get_bool(r, "qkv_bias", 1, &qb));
  TRY(vl__get_prob(r, "attention_probs_dropout_prob", 0.0, &a->attn_dropout));
  TRY(vl__get_prob(r, "hidden_dropout_prob", 0.0, &a->hidden_dropout));
  uint64_t side = a->image_size / a->patch_size;
  a->max_positions = side * side + 1; /* the patches and the [CLS] token */
  a->qkv_bias = (unsigned)qb;
  a->o_bias = a->mlp_bias = 1;
  a->norm_affine = a->learned_pos = a->final_norm = 1;
  return VL_OK;
}

/* ResNet (He et al. 2015, arXiv 1512.03385; modeling_resnet.py): a 7x7
 * stem, stages of bottleneck (1x1, 3x3, 1x1) or basic (3x3, 3x3) blocks
 * with batch norm, a linear classifier. */
static vl_status resnet(struct vl__reader *r, struct vl_arch *a) {
  static const uint64_t depth[4] = {3, 4, 6, 3}, width[4] = {256, 512, 1024, 2048};
  uint64_t nd = 4, nw = 4;
  memcpy(a->stage_depth, depth, sizeof depth);
  memcpy(a->stage_width, width, sizeof width);
  TRY(vl__get_u64_list(r, "depths", 1024, a->stage_depth, 8, &nd));
  TRY(vl__get_u64_list(r, "hidden_sizes", MAX_HIDDEN, a->stage_width, 8, &nw));
  if (nd != nw || nd == 0)
    return vl__fail(r->err, VL_ERANGE, "'depths' has %llu stages but 'hidden_sizes' %llu",
                    (unsigned long long)nd, (unsigned long long)nw);
  a->stages = nd;
  TRY(vl__get_u64(r, "embedding_size", 64, 1, MAX_HIDDEN, &a->stem_width));
  TRY(vl__get_u64(r, "num_channels", 3, 1, 4096, &a->channels));
  TRY(vl__get_u64(r, "image_size", 224, 1, 1u << 16, &a->image_size));
  const char *lt = "bottleneck";
  TRY(vl__get_str(r, "layer_type", "bottleneck", &lt));
  if (strcmp(lt, "bottleneck") && strcmp(lt, "basic"))
    return vl__fail(r->err, VL_EKEY,
                    "key 'layer_type': '%.32s' is neither 'bottleneck' nor 'basic'", lt);
  a->bottleneck = strcmp(lt, "bottleneck") == 0;
  int first = 0;
  TRY(vl__get_bool(r, "downsample_in_first_stage", 0, &first));
  a->stride_first = (unsigned)first;
  a->layers = 0;
  for (uint64_t i = 0; i < nd; i++)
    a->layers += a->stage_depth[i];
  a->hidden = a->stage_width[nd - 1];
  a->heads = a->kv_heads = 1;
  a->relu_act = 1;
  return VL_OK;
}

vl_status vl__read_vision(struct vl__reader *r, struct vl_arch *a) {
  TRY(a->family == VL_FAM_RESNET ? resnet(r, a) : vit(r, a));
  /* ...ForImageClassification: num_labels rows (id2label's size) */
  json_t *ids = json_object_get(r->root, "id2label");
  uint64_t dl = ids && json_is_object(ids) ? json_object_size(ids) : 2;
  TRY(vl__get_u64(r, "num_labels", dl, 1, MAX_VOCAB, &a->labels));
  return VL_OK;
}

vl_status vl__read_encoder(struct vl__reader *r, struct vl_arch *a) {
  /* their eager attention calls softmax without dtype=float32
   * (modeling_bert.py, modeling_roberta.py eager_attention_forward): in
   * the scores' dtype, fp32 under autocast (softmax is on its fp32 list) */
  a->softmax_native = a->family != VL_FAM_MODERNBERT;
  switch (a->family) {
  case VL_FAM_BERT:
  case VL_FAM_ROBERTA: TRY(bert_like(r, a)); break;
  case VL_FAM_DISTILBERT: TRY(distilbert(r, a)); break;
  case VL_FAM_DEBERTA_V2: TRY(deberta(r, a)); break;
  default: TRY(modernbert(r, a)); return VL_OK;
  }
  int tie = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  return VL_OK;
}

/* T5: d_model, d_kv per head, d_ff, num_layers (+ num_decoder_layers),
 * RMS-style T5LayerNorm, relative position bias in each stack's first
 * block, gated-gelu for v1.1 (feed_forward_proj); BART: d_model,
 * encoder_/decoder_ layers, heads and ffn_dim, learned positions with an
 * offset of 2, LayerNorms, GELU (modeling_t5.py, modeling_bart.py) */
static vl_status t5(struct vl__reader *r, struct vl_arch *a) {
  TRY(vl__get_u64(r, "vocab_size", 32128, 1, MAX_VOCAB, &a->vocab));
  TRY(vl__get_u64(r, "d_model", 512, 1, MAX_HIDDEN, &a->hidden));
  TRY(vl__get_u64(r, "d_kv", 64, 1, MAX_HIDDEN, &a->head_dim));
  TRY(vl__get_u64(r, "d_ff", 2048, 1, MAX_WIDTH, &a->intermediate));
  TRY(vl__get_u64(r, "num_layers", 6, 1, MAX_LAYERS, &a->enc_layers));
  TRY(vl__get_u64(r, "num_decoder_layers", a->enc_layers, 1, MAX_LAYERS, &a->layers));
  TRY(vl__get_u64(r, "num_heads", 8, 1, MAX_HEADS, &a->heads));
  TRY(vl__get_u64(r, "relative_attention_num_buckets", 32, 1, MAX_POS, &a->rel_buckets));
  TRY(vl__get_prob(r, "dropout_rate", 0.1, &a->hidden_dropout));
  a->attn_dropout = a->embed_dropout = a->act_dropout = a->hidden_dropout;
  const char *ff = "relu";
  TRY(vl__get_str(r, "feed_forward_proj", "relu", &ff));
  a->gated_mlp = strncmp(ff, "gated-", 6) == 0;
  a->relu_act = strstr(ff, "relu") != NULL;
  /* configuration_t5.py: "gated-gelu" runs dense_act_fn "gelu_new" */
  a->gelu_python = (unsigned)(strcmp(ff, "gated-gelu") == 0);
  /* transformers 5 ties T5's head to the shared embedding always; a
   * config's tie_word_embeddings false (T5 v1.1, flan-T5) only drops the
   * d_model^-0.5 scaling of the head's input (configuration_t5.py
   * scale_decoder_outputs) */
  int tie = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  a->scale_decoder_outputs = (unsigned)tie;
  a->tie_embeddings = 1;
  a->kv_heads = a->heads;
  a->rms_norm = a->norm_affine = a->final_norm = a->rel_bias = 1;
  return VL_OK;
}

static vl_status bart(struct vl__reader *r, struct vl_arch *a) {
  uint64_t eh = 16, dh = 16, ef = 4096;
  TRY(vl__get_u64(r, "vocab_size", 50265, 1, MAX_VOCAB, &a->vocab));
  TRY(vl__get_u64(r, "d_model", 1024, 1, MAX_HIDDEN, &a->hidden));
  TRY(vl__get_u64(r, "encoder_layers", 12, 1, MAX_LAYERS, &a->enc_layers));
  TRY(vl__get_u64(r, "decoder_layers", 12, 1, MAX_LAYERS, &a->layers));
  TRY(vl__get_u64(r, "encoder_attention_heads", 16, 1, MAX_HEADS, &eh));
  TRY(vl__get_u64(r, "decoder_attention_heads", 16, 1, MAX_HEADS, &dh));
  TRY(vl__get_u64(r, "encoder_ffn_dim", 4096, 1, MAX_WIDTH, &ef));
  TRY(vl__get_u64(r, "decoder_ffn_dim", 4096, 1, MAX_WIDTH, &a->intermediate));
  TRY(vl__get_u64(r, "max_position_embeddings", 1024, 1, MAX_POS, &a->max_positions));
  if (eh != dh || ef != a->intermediate)
    return vl__fail(r->err, VL_ERANGE,
                    "encoder and decoder of different widths (heads %llu / %llu, ffn %llu / "
                    "%llu) are not described yet; measure the job with `vramledger trace`",
                    (unsigned long long)eh, (unsigned long long)dh, (unsigned long long)ef,
                    (unsigned long long)a->intermediate);
  a->heads = a->kv_heads = dh;
  if (a->hidden % a->heads)
    return vl__fail(r->err, VL_ERANGE,
                    "d_model %llu is not a multiple of decoder_attention_heads %llu",
                    (unsigned long long)a->hidden, (unsigned long long)a->heads);
  a->head_dim = a->hidden / a->heads;
  TRY(vl__get_prob(r, "dropout", 0.1, &a->hidden_dropout));
  TRY(vl__get_prob(r, "attention_dropout", 0.0, &a->attn_dropout));
  TRY(vl__get_prob(r, "activation_dropout", 0.0, &a->act_dropout));
  a->embed_dropout = a->hidden_dropout;
  int tie = 1;
  TRY(vl__get_bool(r, "tie_word_embeddings", 1, &tie));
  a->tie_embeddings = (unsigned)tie;
  a->pos_offset = 2; /* BartLearnedPositionalEmbedding */
  a->qkv_bias = a->o_bias = a->mlp_bias = 1;
  a->norm_affine = a->learned_pos = 1;
  return VL_OK;
}

vl_status vl__read_seq2seq(struct vl__reader *r, struct vl_arch *a) {
  TRY(a->family == VL_FAM_T5 ? t5(r, a) : bart(r, a));
  /* their eager attention (eager_attention_forward of modeling_t5.py and
   * modeling_bart.py, transformers 5) calls softmax in the scores' dtype */
  a->softmax_native = 1;
  return VL_OK;
}
