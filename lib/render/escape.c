/* One escaping function per output format, for every string that comes
 * from outside: a record (phase, mark, module, library and GPU names, the
 * command line, the host), a configuration, the command line (file paths).
 * Each writes valid UTF-8 whatever it is given (a byte of no character as
 * '?': lib/util/utf8.c's rule). */
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/alloc.h"

/* put(o, ch) for each character of s, ch its bytes NUL-ended; a byte of
 * no character is "?". */
static void each_char(const char *s, void (*put)(FILE *, const char *), FILE *o) {
  while (*s) {
    size_t l = vl__utf8_len(s);
    char ch[5] = "?";
    if (l) {
      memcpy(ch, s, l);
      ch[l] = '\0';
    }
    put(o, ch);
    s += l ? l : 1;
  }
}

/* a control character (C0, DEL, C1) in the character ch */
static bool control(const char *ch) {
  unsigned char c = (unsigned char)ch[0];
  return c < 0x20 || c == 0x7f || (c == 0xc2 && (unsigned char)ch[1] < 0xa0);
}

static void put_plain(FILE *o, const char *ch) { fputs(control(ch) ? "?" : ch, o); }

void vl__plain_text(FILE *o, const char *s) { each_char(s ? s : "", put_plain, o); }

static void put_html(FILE *o, const char *ch) {
  switch (ch[0]) {
  case '<': fputs("&lt;", o); return;
  case '>': fputs("&gt;", o); return;
  case '&': fputs("&amp;", o); return;
  case '"': fputs("&quot;", o); return;
  default: put_plain(o, ch);
  }
}

void vl__html_text(FILE *o, const char *s) { each_char(s ? s : "", put_html, o); }

static void put_md(FILE *o, const char *ch) {
  switch (ch[0]) {
  case '<': fputs("&lt;", o); return;
  case '>': fputs("&gt;", o); return;
  case '&': fputs("&amp;", o); return;
  case '|':
  case '\\':
  case '[':
  case ']':
  case '`':
    fputc('\\', o);
    fputc(ch[0], o);
    return;
  default: put_plain(o, ch);
  }
}

void vl__md_text(FILE *o, const char *s) { each_char(s ? s : "", put_md, o); }

static void put_md_code(FILE *o, const char *ch) {
  if (ch[0] == '|') fputc('\\', o); /* GFM: a table cell ends at a bare | even in code */
  put_plain(o, ch);
}

void vl__md_code(FILE *o, const char *s) {
  s = s ? s : "";
  size_t run = 0, most = 0; /* the fence: one backtick more than s's longest run */
  for (const char *p = s; *p; p++) {
    run = *p == '`' ? run + 1 : 0;
    most = run > most ? run : most;
  }
  bool pad = s[0] == '`' || (*s && s[strlen(s) - 1] == '`');
  for (size_t i = 0; i <= most; i++)
    fputc('`', o);
  if (pad) fputc(' ', o);
  each_char(s, put_md_code, o);
  if (pad) fputc(' ', o);
  for (size_t i = 0; i <= most; i++)
    fputc('`', o);
}

void vl__text_pad(FILE *o, const char *s, int width, bool md) {
  vl__text(o, s, md);
  for (size_t n = strlen(s ? s : ""); n < (size_t)(width > 0 ? width : 0); n++)
    fputc(' ', o);
}

void vl__text(FILE *o, const char *s, bool md) {
  if (md)
    vl__md_text(o, s);
  else
    vl__plain_text(o, s);
}

static void put_prom(FILE *o, const char *ch) {
  if (ch[0] == '\\' || ch[0] == '"') {
    fputc('\\', o);
    fputc(ch[0], o);
  } else if (ch[0] == '\n') {
    fputs("\\n", o);
  } else {
    put_plain(o, ch);
  }
}

void vl__prom_label(FILE *o, const char *s) { each_char(s ? s : "", put_prom, o); }

static void put_csv(FILE *o, const char *ch) {
  if (ch[0] == '"') fputc('"', o);
  put_plain(o, ch);
}

void vl__csv_field(FILE *o, const char *s) {
  s = s ? s : "";
  fputc('"', o);
  if (strchr("=+-@", s[0]) && s[0]) fputc('\'', o); /* no spreadsheet formula */
  each_char(s, put_csv, o);
  fputc('"', o);
}

static void put_json(FILE *o, const char *ch) {
  unsigned char c = (unsigned char)ch[0];
  if (c == '"' || c == '\\')
    fprintf(o, "\\%c", c);
  else if (c < 0x20 || c == '<' || c == '>' || c == '&')
    fprintf(o, "\\u%04x", c);
  else
    fputs(ch, o);
}

void vl__json_text(FILE *o, const char *s) {
  fputc('"', o);
  each_char(s ? s : "", put_json, o);
  fputc('"', o);
}

json_t *vl__json_str(const char *s) {
  if (!s) return NULL;
  json_t *j = json_string(s);
  if (j) return j;
  size_t n = strlen(s) + 1; /* not UTF-8: each bad byte a '?' */
  char *c = vl_malloc(n);
  if (!c) return NULL;
  vl__utf8_copy(c, n, s);
  j = json_string(c);
  vl_free(c);
  return j;
}
