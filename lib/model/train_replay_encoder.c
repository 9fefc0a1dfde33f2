/* The training replay of BERT-like encoders (train_replay.h): BERT,
 * RoBERTa, DistilBERT, DeBERTa-v2, ModernBERT. The post-norm layer (BART's
 * encoder has it too), the masked-LM head's transform (and T5's tied-head
 * scaling where the head begins); their embeddings: lp_embed.c. */
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

/* the masked-LM head's transform before the decoder: dense, GELU (saves
 * its input), LayerNorm (BertPredictionHeadTransform, RobertaLMHead,
 * DistilBERT's vocab_transform, ModernBertPredictionHead); x taken over */
uint32_t vl__tr_mlm_transform(struct run *R, uint32_t x, uint64_t *xb) {
  rel(R, R->mb_in); /* ModernBertModel.forward returns (train_replay_decoder.c) */
  R->mb_in = 0;
  if (R->arch->causal || R->arch->family == VL_FAM_VIT || R->arch->stages) return x;
  const uint64_t T = R->T, h = R->z->h, e = R->z->e;
  if (R->arch->enc_layers) {
    if (R->arch->family != VL_FAM_T5) return x;
    /* the decoder's T5Stack.forward: its final dropout (the final norm is
     * the caller's), then it returns and its inputs_embeds goes (t5-base's
     * meta trace: modeling_t5.py:745) */
    x = vl__tr_dropout_of(R, x, R->arch->hidden_dropout, R->z->r);
    rel(R, R->dec_in); /* (embedding_grads' later release of it is a no-op) */
    R->dec_in = 0;
    if (!R->arch->scale_decoder_outputs) return x;
    /* T5 v1.0: sequence_output * d_model^-0.5 (modeling_t5.py) */
    uint32_t sc = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes, .in = {x}});
    R->seq_out = x; /* decoder_outputs[0], the model's local: to its loss */
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
