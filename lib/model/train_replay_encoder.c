/* The training replay of BERT-like encoders (train_replay.h): BERT,
 * RoBERTa, DistilBERT, DeBERTa-v2, ModernBERT. Their embeddings' sums and
 * norm, the post-norm layer (BART's encoder has it too), the masked-LM
 * head's transform (and T5's tied-head scaling where the head begins). */
#include "train_replay.h"

/* a BERT-style encoder layer, the norms after the residual adds:
 * LN(x + dropout(attn(x))), then LN(h + dropout(mlp(h))) (modeling_bert.py
 * BertSelfOutput, BertOutput; DistilBERT's sa_layer_norm and
 * output_layer_norm); Python's reference to x is taken over */
uint32_t vl__tr_post_ln_layer(struct run *R, uint32_t x, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, r = R->z->r;
  uint64_t nb;
  uint32_t held = 0;
  R->lin = 0;
  uint32_t at = vl__tr_dropout(R, vl__tr_attention(R, x, r, &held), arch->hidden_dropout);
  uint32_t s1 = join(R, T * h * r, x, at, TAPE_ADD);
  uint32_t h1 = vl__tr_norm(R, s1, r, &nb);
  rel(R, s1);
  uint32_t mo =
      vl__tr_dropout(R, vl__tr_mlp(R, h1, nb, T, R->z->I, false, stop), arch->hidden_dropout);
  uint32_t s2 = join(R, T * h * vl__max(nb, r), h1, mo, TAPE_ADD);
  uint64_t ob;
  uint32_t out = vl__tr_norm(R, s2, vl__max(nb, r), &ob);
  rel(R, s2);
  rel(R, held);
  R->tp.no_alloc = false;
  return out;
}

/* what an encoder's embeddings add to the word embeddings x (T x h): the
 * token types' and the learned positions' sums, then a LayerNorm
 * (BertEmbeddings, DistilBERT's, ModernBERT's norm); a ViT's and a
 * ResNet's: train_replay_vision.c. Decoders: x itself. */
uint32_t vl__tr_encoder_embeddings(struct run *R, uint32_t x) {
  const struct vl_arch *arch = R->arch;
  if (arch->causal || arch->family == VL_FAM_T5) return x;
  if (arch->family == VL_FAM_RESNET || arch->family == VL_FAM_VIT)
    return vl__tr_vision_embeddings(R, x);
  const uint64_t Th = R->T * R->z->h, r = R->z->r;
  int adds = (arch->type_vocab > 0) + (arch->learned_pos && arch->family != VL_FAM_MODERNBERT);
  for (int i = 0; i < adds; i++) {
    uint32_t y = op(R, (struct tape_op){.out_bytes = Th * r, .in = {x}, .pass = TAPE_ADD});
    rel(R, x);
    x = y;
  }
  uint64_t ob;
  uint32_t n = vl__tr_norm(R, x, r, &ob);
  rel(R, x);
  if (arch->family == VL_FAM_DEBERTA_V2) { /* DebertaV2Embeddings: * mask */
    uint32_t m = op(R, (struct tape_op){.out_bytes = R->tp.t[n].bytes, .in = {n}});
    rel(R, n);
    n = m;
  }
  return n;
}

/* the masked-LM head's transform before the decoder: dense, GELU (saves
 * its input), LayerNorm (BertPredictionHeadTransform, RobertaLMHead,
 * DistilBERT's vocab_transform, ModernBertPredictionHead); x taken over */
uint32_t vl__tr_mlm_transform(struct run *R, uint32_t x, uint64_t *xb) {
  if (R->arch->causal || R->arch->family == VL_FAM_VIT || R->arch->stages) return x;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e;
  if (R->arch->enc_layers) {
    if (R->arch->family != VL_FAM_T5 || !R->arch->scale_decoder_outputs) return x;
    /* T5 v1.0: sequence_output * d_model^-0.5 (modeling_t5.py) */
    uint32_t sc = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
    rel(R, x);
    return sc;
  }
  R->lin = 1u << 30; /* no LoRA adapter on the head */
  uint32_t d = vl__tr_linear(R, x, *xb, T, h, h, true);
  rel(R, x);
  uint32_t g = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {d}, .saved = {d}});
  rel(R, d);
  uint32_t n = vl__tr_norm(R, g, e, xb);
  rel(R, g);
  return n;
}
