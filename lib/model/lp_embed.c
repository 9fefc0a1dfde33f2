/* The embeddings as a layer program (lp.h): the token embeddings' lookup
 * (F.embedding), an encoder's lookups of token types and positions and
 * their sums, its LayerNorm (DeBERTa-v2's mask after it), dropout,
 * Gemma's and Granite's scaling, and the lines the time model prices for
 * their backward where the table trains (embedding_dense_backward: the
 * table's gradient zeroed, the tokens' scattered into it). The replay
 * (train_replay.c, train_replay_seq2seq.c) runs them through vl__tr_lp;
 * its tables' gradients are the parameters' (embedding_grads). The time
 * model (steptime.c embeddings) prices them: each table's lookup, h wide,
 * and the sums of the lookups whether the replay makes them or not. */
#include "internal.h"
#include "lp.h"
#include "tape.h"

#define OP(...) vl__lp_emit(p, (struct lp_op){__VA_ARGS__})

/* the tables the time model prices a lookup of: the words', learned
 * positions', token types' */
static uint8_t tables(const struct vl_arch *arch) {
  return (uint8_t)(1 + (arch->learned_pos ? 1 : 0) + (arch->type_vocab ? 1 : 0));
}

/* a lookup beside the words' (kind 0: of no bytes, BART's, which the
 * replay leaves out; 1: rows x h; 2: the (1, seq) slice of the positions'
 * buffer, a sequence's rows) added to x, which goes; the lookup is held to
 * the embeddings' return (*held). The time model prices the sums on the
 * first one (of the words' lookup): the tables' but the words', 3 r an
 * element of rows x h */
static uint8_t add_lookup(struct lp *p, const struct vl_arch *arch, uint8_t x, unsigned r, int kind,
                          uint8_t *held) {
  const bool first = p->op[x].kind == LP_REF;
  *held = OP(.kind = LP_GATHER, .cols = LP_COLS_H, .ob = (uint8_t)(kind ? r : 0),
             .krows = kind == 2); /* (its weight's gradient needs only the indices) */
  return OP(.kind = LP_EW, .in = {x}, .cols = p->op[x].cols, .ob = p->op[x].ob, .pass = TAPE_ADD,
            .drop = {x}, .price = first ? LP_PRICE_EW : LP_UNPRICED, .pcols = LP_COLS_H,
            .times = (uint8_t)(tables(arch) - 1), .fwd_only = true, .bytes = first ? 3.0 * r : 0);
}

/* a sum of lookups the time model prices (the first one's line) */
static bool priced_sum(const struct lp *p) {
  for (unsigned i = LP_FIRST; i <= p->n; i++)
    if (p->op[i].pass == TAPE_ADD && p->op[i].price) return true;
  return false;
}

/* what an encoder's embeddings add to the word embeddings x: the token
 * types' and the learned positions' lookups and sums, then a LayerNorm
 * (BertEmbeddings, DistilBERT's, ModernBERT's norm; BART's
 * layernorm_embedding). The lookups: the token types' of the (batch, seq)
 * ids (BERT's buffer expanded; DeBERTa-v2's zeros), the positions' of the
 * buffer's (1, seq) slice, RoBERTa's of (batch, seq) ids made from
 * input_ids; DeBERTa-v2 without position_biased_input makes
 * zeros_like(inputs_embeds) instead (modeling_bert.py BertEmbeddings,
 * modeling_roberta.py, modeling_distilbert.py Embeddings,
 * modeling_deberta_v2.py DebertaV2Embeddings; transformers 5.17). The
 * time model does not price the norm or DeBERTa-v2's mask */
static uint8_t encoder_part(struct lp *p, const struct vl_arch *arch, uint8_t x, unsigned r,
                            unsigned wb, uint8_t *held) {
  const bool deberta = arch->family == VL_FAM_DEBERTA_V2;
  const bool pos = arch->learned_pos && arch->family != VL_FAM_MODERNBERT;
  const bool lookups = vl_arch_replays_encoder(arch); /* (BART's: its sum alone) */
  const int pk = !lookups ? 0 : arch->family == VL_FAM_ROBERTA ? 1 : 2;
  int k = 0;
  if (deberta && !pos) /* zeros_like(inputs_embeds) */
    held[k++] = OP(.kind = LP_GATHER, .cols = LP_COLS_H, .ob = (uint8_t)r);
  if (deberta && pos) x = add_lookup(p, arch, x, r, pk, &held[k++]);
  if (arch->type_vocab > 0) x = add_lookup(p, arch, x, r, lookups, &held[k++]);
  if (!deberta && pos) x = add_lookup(p, arch, x, r, pk, &held[k++]);
  const uint8_t from = p->n + 1;
  uint8_t n = vl__lp_norm_of(p, arch, x, r, wb);
  for (uint8_t i = from; i <= n; i++)
    p->op[i].price = LP_UNPRICED;
  vl__lp_then_drop(p, x);
  if (deberta) /* DebertaV2Embeddings: * mask */
    n = OP(.kind = LP_EW, .in = {n}, .cols = LP_COLS_H, .ob = p->op[n].ob, .drop = {n});
  return n;
}

void vl__lp_embed(struct lp *p, const struct vl_arch *arch, bool autocast, unsigned r, unsigned wb,
                  unsigned gb, bool trained, bool held) {
  vl__lp_begin(p, r, autocast, LP_COLS_I);
  /* the words' lookup (rows x the table's width, OPT's word_embed_proj_dim),
   * a node of the caller's table where it gives one (struct lp_dims w); the
   * time model prices every table's lookup here, h wide (times) */
  const uint8_t words = OP(.kind = LP_GATHER, .cols = LP_COLS_I, .ob = (uint8_t)r, .wsave = true,
                           .price = LP_PRICE_EW, .pcols = LP_COLS_H, .times = tables(arch),
                           .fwd_only = true, .bytes = 2.0 * wb);
  uint8_t x = OP(.kind = LP_REF, .in = {words}, .cols = LP_COLS_I, .ob = (uint8_t)r);
  uint8_t lk[2] = {0, 0};
  const bool enc = !arch->causal && arch->family != VL_FAM_T5;
  if (enc) x = encoder_part(p, arch, x, r, wb, lk);
  if (tables(arch) > 1 && !priced_sum(p))
    /* the sums of the lookups where the replay makes none: GPT-2's wte +
     * wpe (the words' lookup stands for the sum), OPT's (opt_positions,
     * after the causal mask), ModernBERT's (rotary: it looks no positions
     * up, its learned_pos counted by the time model all the same) */
    OP(.kind = LP_EW, .in = {x}, .cols = LP_COLS_H, .ob = (uint8_t)r, .unmade = true,
       .price = LP_PRICE_EW, .pcols = LP_COLS_H, .times = (uint8_t)(tables(arch) - 1),
       .fwd_only = true, .bytes = 3.0 * r);
  if (arch->embed_dropout > 0) { /* its mask a byte an element (bool), whatever x's dtype */
    const uint8_t ob = p->op[x].ob;
    x = OP(.kind = LP_DROPOUT, .in = {x}, .cols = p->op[x].cols, .ob = ob, .maskb = 1,
           .price = LP_PRICE_EW, .pcols = LP_COLS_H, .bytes = 2.0 * r + 1);
  }
  if (!held) vl__lp_then_drop(p, words); /* the embeddings return: the lookups go */
  vl__lp_then_drop(p, lk[0]);
  vl__lp_then_drop(p, lk[1]);
  /* Gemma's * sqrt(h), Granite's * embedding_multiplier: a new tensor.
   * (The time model priced the scaling before dropout; no family has both) */
  if (arch->embed_scaled)
    x = OP(.kind = LP_EW, .in = {x}, .cols = LP_COLS_H, .ob = (uint8_t)r, .drop = {x},
           .price = LP_PRICE_EW, .pcols = LP_COLS_H, .bytes = 2.0 * r);
  p->out[0] = x, p->out[1] = words;
  if (!trained) return;
  /* embedding_dense_backward: the table's gradient zeroed (V x h: the
   * consumer's LP_COLS_V elements), the tokens' sorted and scattered into
   * it */
  OP(.kind = LP_GATHER, .bwd_only = true, .price = LP_PRICE_EW, .pcols = LP_COLS_V,
     .bytes = (double)gb);
  OP(.kind = LP_GATHER, .bwd_only = true, .price = LP_PRICE_EW, .pcols = LP_COLS_H, .times = 4,
     .bytes = 4.0 + 2.0 * gb);
}
