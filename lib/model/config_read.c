/* The readers of a config.json's keys every model type's reader shares:
 * a key's type and range checked, transformers' default where it is
 * missing or null, and a message naming the key and what it holds where
 * it is wrong. They know no model type: config.c's table and the readers
 * of config_decoders.c and config_encoders.c call them, never the other
 * way (config_read.h). */
#include <jansson.h>
#include <math.h>

#include "../util/internal.h"
#include "vramledger/arch.h"

#include "config_read.h"

const char *vl__json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

/* Integer key in [lo, hi]; missing or null gives def. */
vl_status vl__get_u64(struct vl__reader *r, const char *key, uint64_t def, uint64_t lo, uint64_t hi,
                      uint64_t *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  json_int_t i;
  if (json_is_integer(v)) {
    i = json_integer_value(v);
  } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9.0e15) {
    i = (json_int_t)json_real_value(v);
  } else {
    return vl__fail(r->err, VL_EKEY, "key '%s': expected an integer, got %s", key,
                    vl__json_kind(v));
  }
  if (i < 0 || (uint64_t)i < lo || (uint64_t)i > hi)
    return vl__fail(r->err, VL_ERANGE, "key '%s': %lld is out of range [%llu, %llu]", key,
                    (long long)i, (unsigned long long)lo, (unsigned long long)hi);
  *out = (uint64_t)i;
  return VL_OK;
}

vl_status vl__get_bool(struct vl__reader *r, const char *key, int def, int *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  if (!json_is_boolean(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected true or false, got %s", key,
                    vl__json_kind(v));
  *out = json_is_true(v);
  return VL_OK;
}

/* A number in [lo, hi] (range: how a message says it); missing or null
 * gives def. */
static vl_status get_ranged(struct vl__reader *r, const char *key, double def, double lo, double hi,
                            const char *range, double *out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  if (!json_is_number(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected a number, got %s", key, vl__json_kind(v));
  double d = json_number_value(v);
  if (!(d >= lo && d <= hi)) return vl__fail(r->err, VL_ERANGE, "key '%s': %g %s", key, d, range);
  *out = d;
  return VL_OK;
}

/* Probability-like number in [0, 1]. */
vl_status vl__get_prob(struct vl__reader *r, const char *key, double def, double *out) {
  return get_ranged(r, key, def, 0.0, 1.0, "is not in [0, 1]", out);
}

vl_status vl__read_shape(struct vl__reader *r, struct vl_arch *a, const struct shape_keys *k) {
  TRY(vl__get_u64(r, k->vocab, k->d_vocab, 1, MAX_VOCAB, &a->vocab));
  TRY(vl__get_u64(r, k->hidden, k->d_hidden, 1, MAX_HIDDEN, &a->hidden));
  TRY(vl__get_u64(r, k->layers, k->d_layers, 1, MAX_LAYERS, &a->layers));
  TRY(vl__get_u64(r, k->heads, k->d_heads, 1, MAX_HEADS, &a->heads));
  TRY(vl__get_u64(r, k->inter, k->d_inter ? k->d_inter : 4 * a->hidden, 1, MAX_WIDTH,
                  &a->intermediate));
  TRY(vl__get_u64(r, k->pos, k->d_pos, 1, MAX_POS, &a->max_positions));
  if (a->hidden % a->heads)
    return vl__fail(r->err, VL_ERANGE, "%s %llu is not a multiple of %s %llu", k->hidden,
                    (unsigned long long)a->hidden, k->heads, (unsigned long long)a->heads);
  a->kv_heads = a->heads;
  a->head_dim = a->hidden / a->heads;
  return VL_OK;
}

vl_status vl__get_num(struct vl__reader *r, const char *key, double def, double *out) {
  return get_ranged(r, key, def, 0.0, nextafter(1e12, 0.0), "is out of range [0, 1e12)", out);
}

vl_status vl__get_str(struct vl__reader *r, const char *key, const char *def, const char **out) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return VL_OK;
  }
  if (!json_is_string(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected a string, got %s", key, vl__json_kind(v));
  *out = json_string_value(v);
  return VL_OK;
}

vl_status vl__get_u64_list(struct vl__reader *r, const char *key, uint64_t hi, uint64_t *out,
                           uint64_t max, uint64_t *n) {
  json_t *v = json_object_get(r->root, key);
  if (!v || json_is_null(v)) return VL_OK; /* *n and out keep the defaults */
  if (!json_is_array(v))
    return vl__fail(r->err, VL_EKEY, "key '%s': expected an array, got %s", key, vl__json_kind(v));
  if (json_array_size(v) > max)
    return vl__fail(r->err, VL_ERANGE, "key '%s': %zu entries, at most %llu are read", key,
                    json_array_size(v), (unsigned long long)max);
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *x = json_array_get(v, i);
    if (!json_is_integer(x) || json_integer_value(x) < 1 || (uint64_t)json_integer_value(x) > hi)
      return vl__fail(r->err, VL_ERANGE, "key '%s': entry %zu is not an integer in [1, %llu]", key,
                      i, (unsigned long long)hi);
    out[i] = (uint64_t)json_integer_value(x);
  }
  *n = json_array_size(v);
  return VL_OK;
}

int vl__has(struct vl__reader *r, const char *key) {
  json_t *v = json_object_get(r->root, key);
  return v && !json_is_null(v);
}
