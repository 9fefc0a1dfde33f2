/* UTF-8 kept whole where strings are cut to a buffer's size. */
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The length of the well-formed UTF-8 sequence at s (1 to 4: RFC 3629's
 * table, no overlong forms, no surrogates, nothing past U+10FFFF); 0 when
 * none starts there, with *cut set when s holds only the first bytes of
 * one before its end (a character a writer cut). */
static size_t seq_len(const unsigned char *s, bool *cut) {
  unsigned char c = s[0];
  *cut = false;
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    unsigned char b = s[i];
    if (b == 0) {
      *cut = true;
      return 0;
    }
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

size_t vl__utf8_len(const char *s) {
  bool cut;
  return *s ? seq_len((const unsigned char *)s, &cut) : 0;
}

size_t vl__utf8_copy(char *dst, size_t n, const char *src) {
  if (n == 0) return 0;
  const unsigned char *s = (const unsigned char *)src;
  size_t k = 0;
  while (*s) {
    bool cut;
    size_t l = seq_len(s, &cut);
    if (cut) break; /* a character cut at the end: dropped whole */
    if (l == 0) {   /* a byte of no character */
      if (k + 1 >= n) break;
      dst[k++] = '?';
      s++;
      continue;
    }
    if (k + l >= n) break; /* it does not fit: cut before it */
    for (size_t i = 0; i < l; i++)
      dst[k++] = (char)s[i];
    s += l;
  }
  dst[k] = '\0';
  return k;
}
