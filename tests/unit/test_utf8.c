/* lib/util/utf8.c: strings from records and traces cut to a buffer keep
 * whole characters. A character is well-formed as RFC 3629 section 4
 * (Unicode 15 Table 3-7) has it: no overlong form (C0, C1, E0 80..9F,
 * F0 80..8F), no surrogate (ED A0..BF), nothing past U+10FFFF (F4 90..,
 * F5..FF); a byte of no character becomes '?', a character cut at the
 * end of the input is dropped, and one that does not fit is left out
 * whole. */
#include "testutil.h"
#include "util/internal.h"

struct c {
  const char *in;
  size_t n; /* the buffer */
  const char *want;
};

static const struct c cases[] = {
    {"plain", 16, "plain"},
    {"plain", 3, "pl"},                             /* cut to n - 1 bytes and a NUL */
    {"\xc3\xa9t\xc3\xa9", 16, "\xc3\xa9t\xc3\xa9"}, /* été */
    {"ab\xc3\xa9", 4, "ab"},                        /* é does not fit whole: left out */
    {"\xe2\x82\xac", 4, "\xe2\x82\xac"},            /* € exactly fits */
    {"\xe2\x82\xac", 3, ""},
    {"\xf0\x9f\x98\x80!", 16, "\xf0\x9f\x98\x80!"}, /* U+1F600 */
    {"\xf4\x8f\xbf\xbf", 16, "\xf4\x8f\xbf\xbf"},   /* U+10FFFF, the last */
    {"\xf4\x90\x80\x80", 16, "????"},               /* past U+10FFFF */
    {"\xf5\x80", 16, "??"},
    {"\xc0\xaf", 16, "??"}, /* overlong '/' */
    {"\xc1\xbf", 16, "??"},
    {"\xe0\x80\xaf", 16, "???"},          /* overlong, three bytes */
    {"\xf0\x80\x80\xaf", 16, "????"},     /* overlong, four bytes */
    {"\xed\xa0\x80", 16, "???"},          /* a surrogate, U+D800 */
    {"\xed\x9f\xbf", 16, "\xed\x9f\xbf"}, /* U+D7FF, before them */
    {"a\x80z", 16, "a?z"},                /* a lone continuation byte */
    {"\xc3(", 16, "?("},                  /* a lead byte without its continuation */
    {"ok\xe2\x82", 16, "ok"},             /* cut at the end: dropped */
    {"ok\xf0\x9f\x98", 16, "ok"},
    {"\xff\xfe", 2, "?"}, /* '?' for each, as many as fit */
    {"", 1, ""},
};

static void copies_whole_characters(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[32];
    memset(buf, 'X', sizeof buf);
    size_t k = vl__utf8_copy(buf, cases[i].n, cases[i].in);
    if (strcmp(buf, cases[i].want) || k != strlen(cases[i].want))
      fail_msg("case %zu: got \"%s\" (%zu), want \"%s\"", i, buf, k, cases[i].want);
    assert_true(k < cases[i].n);
    assert_int_equal(buf[cases[i].n], 'X'); /* nothing written past n */
  }
  char one = 'X';
  assert_int_equal(vl__utf8_copy(&one, 0, "abc"), 0); /* no room at all: untouched */
  assert_int_equal(one, 'X');
}

static void length_of_the_character_at(void **state) {
  (void)state;
  assert_int_equal(vl__utf8_len(""), 0);
  assert_int_equal(vl__utf8_len("a"), 1);
  assert_int_equal(vl__utf8_len("\xc3\xa9"), 2);
  assert_int_equal(vl__utf8_len("\xe2\x82\xac"), 3);
  assert_int_equal(vl__utf8_len("\xf0\x9f\x98\x80"), 4);
  assert_int_equal(vl__utf8_len("\xc0\xaf"), 0);
  assert_int_equal(vl__utf8_len("\xed\xa0\x80"), 0);
  assert_int_equal(vl__utf8_len("\xe2\x82"), 0); /* cut */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(copies_whole_characters),
      cmocka_unit_test(length_of_the_character_at),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
