/* Helpers for the renderers' units: a renderer's output captured in memory
 * (open_memstream), and JSON output parsed or the test failed with where. */
#ifndef VRAMLEDGER_TEST_RENDER_CAPTURE_H
#define VRAMLEDGER_TEST_RENDER_CAPTURE_H
#include "testutil.h"

#include <jansson.h>

/* Run `call` (an expression over FILE *rc_f that evaluates to the
 * renderer's return code) into a buffer; assert it returned 0. The caller
 * frees the result. */
#define RC_CAPTURE(out, call)                                                                      \
  do {                                                                                             \
    size_t rc_len_ = 0;                                                                            \
    FILE *rc_f = open_memstream(&(out), &rc_len_);                                                 \
    assert_non_null(rc_f);                                                                         \
    int rc_rc_ = (call);                                                                           \
    fclose(rc_f);                                                                                  \
    assert_int_equal(rc_rc_, 0);                                                                   \
    assert_non_null(out);                                                                          \
  } while (0)

/* text parsed as one JSON document, or the test fails naming the line */
static inline json_t *rc_json(const char *text) {
  json_error_t je;
  json_t *j = json_loads(text, 0, &je);
  if (!j) fail_msg("output is not JSON: line %d column %d: %s", je.line, je.column, je.text);
  return j;
}

/* the number at key of object o (integer or real), or the test fails */
static inline double rc_num(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (!json_is_number(v)) fail_msg("'%s' is not a number", key);
  return json_number_value(v);
}

static inline const char *rc_str(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (!json_is_string(v)) fail_msg("'%s' is not a string", key);
  return json_string_value(v);
}

/* lines of text that start with prefix */
static inline int rc_lines_starting(const char *text, const char *prefix) {
  int n = 0;
  size_t k = strlen(prefix);
  for (const char *s = text; s && *s;) {
    if (!strncmp(s, prefix, k)) n++;
    s = strchr(s, '\n');
    if (s) s++;
  }
  return n;
}

#endif
