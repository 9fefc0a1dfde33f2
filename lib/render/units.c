#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/render.h"

const char *vl_fmt_gib(char *buf, size_t n, uint64_t bytes) {
  snprintf(buf, n, "%.2f GiB", GIB(bytes));
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

void vl__html_head(FILE *o, const char *title) {
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", o);
  vl__html_text(o, title);
  fputs("</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
        "td,th{padding:2px 10px;text-align:left}td.n{text-align:right}</style></head><body>\n",
        o);
}

void vl__svg_open(FILE *o, double w, double h, double left, double top, double right,
                  double bottom) {
  fprintf(o,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "font-size=\"11\">\n",
          w, h);
  fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>\n", left,
          h - bottom, w - right, h - bottom);
  fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>\n", left, top,
          left, h - bottom);
}
