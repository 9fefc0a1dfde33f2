#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/render.h"

const char *vl_fmt_gib(char *buf, size_t n, uint64_t bytes) {
  snprintf(buf, n, "%.2f GiB", (double)bytes / (double)(1ull << 30));
  return buf;
}

const char *vl_fmt_int(char *buf, size_t n, uint64_t v) {
  char tmp[32];
  int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < len && o + 1 < n; i++) {
    if (i > 0 && (len - i) % 3 == 0 && o + 2 < n) buf[o++] = ',';
    buf[o++] = tmp[i];
  }
  buf[o < n ? o : n - 1] = '\0';
  return buf;
}

void vl__html_text(FILE *o, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", o);
    else if (*s == '>')
      fputs("&gt;", o);
    else if (*s == '&')
      fputs("&amp;", o);
    else if (*s == '"')
      fputs("&quot;", o);
    else
      fputc(*s, o);
  }
}
