/* Reading a config.json's keys with transformers' defaults: the key readers
 * every model type's reader shares (config_read.c), and the readers of each
 * group of model types (config.c, config_decoders.c, config_encoders.c).
 *
 * One way only: config.c's table of model types names the readers of
 * config_decoders.c and config_encoders.c, and all of them call the key
 * readers of config_read.c; nothing calls back up (tests/tools/cycles.sh). */
#ifndef VRAMLEDGER_CONFIG_READ_H
#define VRAMLEDGER_CONFIG_READ_H
#include <jansson.h>

#include "../util/internal.h"
#include "vramledger/arch.h"

/* Limits far above any real model; beyond them products stop meaning much. */
#define MAX_HIDDEN (1ull << 20)
#define MAX_LAYERS 10000ull
#define MAX_HEADS 65536ull
#define MAX_VOCAB (1ull << 26)
#define MAX_WIDTH (1ull << 24)
#define MAX_POS (1ull << 26)
#define MAX_EXPERTS 4096ull

struct vl__type;
struct vl__reader {
  json_t *root;
  struct vl_err *err;
  const struct vl__type *type; /* the model type's row (VL_MODEL_TYPES) */
};

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    vl_status s_ = (expr);                                                                         \
    if (s_ != VL_OK) return s_;                                                                    \
  } while (0)

/* config_read.c: */
/* "an integer", "a string", ...: what a JSON value is, for a message. */
const char *vl__json_kind(const json_t *v);
/* Integer key in [lo, hi]; missing or null gives def. */
vl_status vl__get_u64(struct vl__reader *r, const char *key, uint64_t def, uint64_t lo, uint64_t hi,
                      uint64_t *out);
vl_status vl__get_bool(struct vl__reader *r, const char *key, int def, int *out);
/* Probability-like number in [0, 1]. */
vl_status vl__get_prob(struct vl__reader *r, const char *key, double def, double *out);
/* Non-negative number; missing or null gives def. */
vl_status vl__get_num(struct vl__reader *r, const char *key, double def, double *out);
/* String key; missing or null gives def (static storage or the JSON's). */
vl_status vl__get_str(struct vl__reader *r, const char *key, const char *def, const char **out);
/* Integer array of at most max entries, each in [1, hi]; *n entries. */
vl_status vl__get_u64_list(struct vl__reader *r, const char *key, uint64_t hi, uint64_t *out,
                           uint64_t max, uint64_t *n);
/* True where key is present and not null. */
int vl__has(struct vl__reader *r, const char *key);

/* The shape every multi-head family reads the same way, under its own key
 * names: vocabulary, width, depth, heads (each of hidden / heads, as many
 * key/value heads as heads), MLP width (a default of 0: 4 x hidden), and
 * positions; defaults are transformers' Configuration classes'. */
struct shape_keys {
  const char *vocab, *hidden, *layers, *heads, *inter, *pos;
  uint64_t d_vocab, d_hidden, d_layers, d_heads, d_inter, d_pos;
};
vl_status vl__read_shape(struct vl__reader *r, struct vl_arch *a, const struct shape_keys *k);

/* transformers' usual key names, the MLP's width under the name given */
#define HF_SHAPE(inter)                                                                            \
  "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", inter,                  \
      "max_position_embeddings"

/* one reader per model type (or group of them): fills *a from the keys */
/* A row of VL_MODEL_TYPES (include/vramledger/arch.h): the reader of the
 * type's keys; for a Llama-like decoder, the defaults of the keys every
 * such decoder has (kv, head_dim 0: as many as heads, h/a) and the reader
 * of the parts it adds. */
typedef vl_status (*vl__arch_reader)(struct vl__reader *r, struct vl_arch *a);
struct vl__decoder_defaults {
  uint64_t vocab, hidden, inter, layers, heads, kv, pos, head_dim;
  int tie;
};
struct vl__type {
  const char *model_type;
  enum vl_family family;
  vl__arch_reader read, parts;
  struct vl__decoder_defaults d;
  bool eager_only;     /* transformers has no SDPA path for the type */
  const char *peft[4]; /* PEFT's default LoRA targets (NULL: none) */
};

/* The readers and parts the table names: vl__read_<READ> (config.c,
 * config_decoders.c, config_encoders.c) and vl__parts_<PARTS>
 * (config_decoders.c). A reader finds its row in r->type. */
#define VL__TYPE_DECLARE_(id, name, read, parts, defaults, attn, peft)                             \
  vl_status vl__read_##read(struct vl__reader *r, struct vl_arch *a);                              \
  vl_status vl__parts_##parts(struct vl__reader *r, struct vl_arch *a);
VL_MODEL_TYPES(VL__TYPE_DECLARE_)
#undef VL__TYPE_DECLARE_

/* The row read for a model_type nobody described (config_decoders.c). */
extern const struct vl__type vl__generic_type;

#endif
