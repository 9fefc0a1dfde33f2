/* The training replay of BERT-like encoders (train_replay.h): BERT,
 * RoBERTa, DistilBERT, DeBERTa-v2, ModernBERT. Their embeddings' sums and
 * norm, the post-norm layer (BART's encoder has it too), the masked-LM
 * head's transform (and T5's tied-head scaling where the head begins). */
#include "train_replay.h"

/* a BERT-style encoder layer, the norms after the residual adds:
 * LN(x + dropout(attn(x))), then LN(h + dropout(mlp(h))) (modeling_bert.py
 * BertSelfOutput, BertOutput; DistilBERT's sa_layer_norm and
 * output_layer_norm); Python's reference to x is taken over. Where a
 * frozen linear saves no input (LoRA), Python's references decide when a
 * tensor goes: x, the argument, at the layer's return (the first layer's,
 * BertModel.forward's embedding_output, at the last layer's: R->enc_in);
 * a dropout's output once the LayerNorm of its sum returns (hidden_states
 * reassigned); the attention block's output and the MLP's activation
 * (BertLayer.feed_forward_chunk's attention_output, intermediate_output)
 * at the layer's return. DistilBERT has no dropout on the attention's
 * output (DistilBertSelfAttention ends at out_lin) and its FFN.ff_chunk
 * lets go of the activation at lin2 (x reassigned). modeling_bert.py,
 * modeling_distilbert.py, modeling_deberta_v2.py (transformers 5.17). */
uint32_t vl__tr_post_ln_layer(struct run *R, uint32_t x, bool stop) {
  const struct vl_arch *arch = R->arch;
  const uint64_t T = R->T, h = R->z->h, r = R->z->r;
  const bool distil = arch->family == VL_FAM_DISTILBERT;
  /* (BART's encoder and OPT-350m, post-norm too, let go of the dropout's
   * output and of x at the residual add: `residual = hidden_states`
   * reassigned, modeling_bart.py BartEncoderLayer, modeling_opt.py.
   * DeBERTa-v2 keeps these too: with BERT's lifetimes the measured reserve
   * of deberta3-amp-adamw-eager went from -2.4 to -13.9 %, its disentangled
   * attention's blocks not being its own yet) */
  const bool bert = vl_arch_replays_encoder(arch) && arch->family != VL_FAM_DEBERTA_V2;
  uint64_t nb;
  uint32_t held = 0;
  R->lin = 0;
  uint32_t at =
      vl__tr_dropout(R, vl__tr_attention(R, x, r, &held), distil ? 0 : arch->hidden_dropout);
  uint32_t s1 = op(R, (struct tape_op){.out_bytes = T * h * r, .in = {x, at}, .pass = TAPE_ADD});
  if (!bert) {
    rel(R, x);
    rel(R, at);
  }
  uint32_t h1 = vl__tr_norm(R, s1, r, &nb);
  rel(R, s1);
  if (bert) rel(R, at);
  if (vl__tr_deberta_replayed(R)) { /* DebertaV2Attention returns: its context goes */
    rel(R, held);
    held = 0;
  }
  R->keep_act = bert && !distil;
  uint32_t mo =
      vl__tr_dropout(R, vl__tr_mlp(R, h1, nb, T, R->z->I, false, stop), arch->hidden_dropout);
  R->keep_act = false;
  const uint32_t act = R->act;
  R->act = 0;
  uint32_t s2 = op(
      R, (struct tape_op){.out_bytes = T * h * vl__max(nb, r), .in = {h1, mo}, .pass = TAPE_ADD});
  if (!bert) {
    rel(R, h1);
    rel(R, mo);
  }
  uint64_t ob;
  uint32_t out = vl__tr_norm(R, s2, vl__max(nb, r), &ob);
  rel(R, s2);
  if (bert) {
    rel(R, mo);
    rel(R, act);
    rel(R, h1);
  }
  rel(R, held);
  if (bert && R->l == 0 && !stop && !R->enc_in)
    R->enc_in = x;
  else if (bert)
    rel(R, x);
  R->tp.no_alloc = false;
  return out;
}

/* an embedding lookup beside the words' (of `bytes`; 0: none made),
 * added to x (taken over); the lookup is held to the embeddings' return
 * (R->emb) */
static uint32_t add_lookup(struct run *R, uint32_t x, uint64_t bytes, int k) {
  R->emb[k] = tape_const(&R->tp, bytes); /* (its weight's gradient needs only the indices) */
  uint32_t y = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}, .pass = TAPE_ADD});
  rel(R, x);
  return y;
}

/* what an encoder's embeddings add to the word embeddings x (T x h): the
 * token types' and the learned positions' lookups and sums, then a
 * LayerNorm (BertEmbeddings, DistilBERT's, ModernBERT's norm); a ViT's and
 * a ResNet's: train_replay_vision.c. Decoders: x itself. The lookups are
 * the embeddings' locals, held to their return: the token types' of the
 * (batch, seq) ids (BERT's buffer expanded; DeBERTa-v2's zeros), the
 * positions' of the buffer's (1, seq) slice, RoBERTa's of (batch, seq)
 * ids made from input_ids; DeBERTa-v2 without position_biased_input makes
 * zeros_like(inputs_embeds) instead (modeling_bert.py BertEmbeddings,
 * modeling_roberta.py, modeling_distilbert.py Embeddings,
 * modeling_deberta_v2.py DebertaV2Embeddings; transformers 5.17) */
uint32_t vl__tr_encoder_embeddings(struct run *R, uint32_t x) {
  const struct vl_arch *arch = R->arch;
  if (arch->causal || arch->family == VL_FAM_T5) return x;
  if (arch->family == VL_FAM_RESNET || arch->family == VL_FAM_VIT)
    return vl__tr_vision_embeddings(R, x);
  const uint64_t r = R->z->r, Th = R->T * R->z->h * r, Ph = R->z->P * R->z->h * r;
  const bool deberta = arch->family == VL_FAM_DEBERTA_V2;
  const bool pos = arch->learned_pos && arch->family != VL_FAM_MODERNBERT;
  const bool lookups = vl_arch_replays_encoder(arch); /* (BART's: its sum alone) */
  const uint64_t pb = !lookups ? 0 : arch->family == VL_FAM_ROBERTA ? Th : Ph;
  int k = 0;
  if (deberta && !pos) R->emb[k++] = tape_const(&R->tp, Th); /* zeros_like(inputs_embeds) */
  if (deberta && pos) x = add_lookup(R, x, pb, k++);
  if (arch->type_vocab > 0) x = add_lookup(R, x, lookups ? Th : 0, k++);
  if (!deberta && pos) x = add_lookup(R, x, pb, k++);
  uint64_t ob;
  uint32_t n = vl__tr_norm(R, x, r, &ob);
  rel(R, x);
  if (deberta) { /* DebertaV2Embeddings: * mask */
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
  rel(R, R->mb_in); /* ModernBertModel.forward returns (train_replay_decoder.c) */
  R->mb_in = 0;
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
  R->seq_out = x; /* BertForMaskedLM.forward's sequence_output: to its loss */
  uint32_t g = op(R, (struct tape_op){.out_bytes = T * h * e, .in = {d}, .saved = {d}});
  rel(R, d);
  uint32_t n = vl__tr_norm(R, g, e, xb);
  rel(R, g);
  return n;
}
