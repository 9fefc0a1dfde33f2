/* Which top-level keys of a config.json a model type's reader reads,
 * found by the reader's refusals: each key in turn is given a value no
 * reader takes ([true]: not an integer, number, boolean, string, object
 * or list of integers), and the reader must refuse it with a message that
 * names the key in quotes; a key it does not read leaves the config
 * readable. Shared by test_config_decoders.c and test_config_encoders.c. */
#ifndef VRAMLEDGER_TEST_CONFIG_KEYS_H
#define VRAMLEDGER_TEST_CONFIG_KEYS_H
#include "testutil.h"

#include <jansson.h>

/* The config (relative to the source tree) read with `key` set to `value`
 * (NULL: removed); its status, its message in err. */
static inline vl_status ck_read_with(const char *rel, const char *key, json_t *value,
                                     struct vl_err *err) {
  size_t len = 0;
  char *text = tu_read(rel, &len);
  assert_non_null(text);
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  free(text);
  assert_non_null(root);
  if (value)
    json_object_set(root, key, value);
  else
    json_object_del(root, key);
  char *out = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  struct vl_arch a;
  *err = (struct vl_err){""};
  vl_status s = vl_arch_from_json(out, strlen(out), &a, err);
  free(out);
  return s;
}

/* The keys of config `rel` its reader reads, comma-separated in the
 * file's order, into buf; asserts every refusal names its key. */
static inline void ck_keys_read(const char *rel, char *buf, size_t n) {
  size_t len = 0;
  char *text = tu_read(rel, &len);
  assert_non_null(text);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_PRESERVE_ORDER, &je);
  free(text);
  assert_non_null(root);
  json_t *bad = json_pack("[b]", 1);
  buf[0] = '\0';
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (strcmp(key, "model_type") == 0) continue; /* chooses the reader */
    struct vl_err err;
    vl_status s = ck_read_with(rel, key, bad, &err);
    if (s == VL_OK) continue;
    char quoted[160];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    if (!strstr(err.msg, quoted))
      fail_msg("%s: key %s ill-typed: the message does not name it: %s", rel, key, err.msg);
    if (s != VL_EKEY && s != VL_ERANGE)
      fail_msg("%s: key %s ill-typed: %s", rel, key, vl_strerror(s));
    size_t used = strlen(buf);
    snprintf(buf + used, n - used, "%s%s", used ? "," : "", key);
  }
  json_decref(bad);
  json_decref(root);
}

/* Of the keys `read` (comma-separated), those whose removal the reader
 * refuses (naming the key where it has no default) rather than taking transformers' default, into
 * buf likewise. */
static inline void ck_keys_required(const char *rel, const char *read, char *buf, size_t n) {
  buf[0] = '\0';
  char key[128];
  for (const char *p = read; *p;) {
    size_t k = strcspn(p, ",");
    snprintf(key, sizeof key, "%.*s", (int)k, p);
    p += k + (p[k] == ',');
    struct vl_err err;
    vl_status s = ck_read_with(rel, key, NULL, &err);
    if (s == VL_OK) continue;
    /* a key without a default is named as missing; else its default is
     * what is refused, with the others ("d_model 1024 is not a multiple
     * of decoder_attention_heads 12") */
    if (s == VL_EKEY && !strstr(err.msg, key))
      fail_msg("%s: key %s removed: the message does not name it: %s", rel, key, err.msg);
    size_t used = strlen(buf);
    snprintf(buf + used, n - used, "%s%s", used ? "," : "", key);
  }
}

#endif
