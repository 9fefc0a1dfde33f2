/* lib/util/status.c and err.c: the status ids never change meaning (the
 * tool's exit codes and any caller's stored status depend on them:
 * include/vramledger/status.h's X-macro table, libuv's UV_ERRNO_MAP), each
 * has its own words, an id past the table is said so; vl__fail fills the
 * caller's message, cut to its buffer, and takes no buffer at all. */
#include "testutil.h"
#include "util/internal.h"

static void ids_and_words(void **state) {
  (void)state;
  static const struct {
    vl_status s;
    int id;
    const char *text;
  } pinned[] = {
      {VL_OK, 0, "ok"},
      {VL_ENOMEM, 1, "out of memory"},
      {VL_EPARSE, 2, "malformed JSON"},
      {VL_EKEY, 3, "missing or invalid key"},
      {VL_EARCH, 4, "unsupported architecture"},
      {VL_ERANGE, 5, "value out of range"},
      {VL_EOVERFLOW, 6, "size does not fit in 64 bits"},
      {VL_EINVAL, 7, "invalid argument"},
      {VL_ECONFLICT, 8, "conflicting options"},
      {VL_ENOTFOUND, 9, "not found"},
      {VL_EIO, 10, "input/output error"},
  };
  assert_int_equal(VL_STATUS_COUNT, sizeof pinned / sizeof pinned[0]); /* a new one: pin it */
  for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
    assert_int_equal((int)pinned[i].s, pinned[i].id);
    assert_string_equal(vl_strerror(pinned[i].s), pinned[i].text);
  }
  assert_string_equal(vl_strerror(VL_STATUS_COUNT), "unknown status");
  assert_string_equal(vl_strerror((vl_status)-1), "unknown status");
}

static void fail_fills_the_message(void **state) {
  (void)state;
  struct vl_err err = {"untouched"};
  assert_int_equal(vl__fail(&err, VL_EKEY, "key '%s': expected %s", "hidden_size", "an integer"),
                   VL_EKEY);
  assert_string_equal(err.msg, "key 'hidden_size': expected an integer");
  assert_int_equal(vl__fail(NULL, VL_EINVAL, "no buffer: %d", 1), VL_EINVAL);
  /* longer than the buffer: cut, terminated */
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(vl__fail(&err, VL_ERANGE, "%s", big), VL_ERANGE);
  assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ids_and_words),
      cmocka_unit_test(fail_fills_the_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
