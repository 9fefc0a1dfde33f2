/* The terms of the bill as C and as documentation, from one table
 * (lib/model/terms.def, included at compile time: VL_TERMS_DEF). A build
 * tool, not part of vramledger.
 *
 *   terms_gen c PREFIX OUT.h OUT.c   each term's bytes as a C function over
 *                                    its group's input struct, in the checked
 *                                    arithmetic of lib/util/internal.h, and
 *                                    the table of rows (PREFIX: "vl__")
 *   terms_gen doc FILE.md [--write]  the list of terms between FILE's
 *                                    markers: checked (exit 1 when stale),
 *                                    or written
 *   terms_gen check GROUP FORMULA    exit 0 when FORMULA compiles over
 *                                    GROUP's inputs
 *
 * The grammar (docs/architecture.md, "A term of the bill is its formula"):
 *
 *   a + b      vl__add          a - b      vl__sub0 (never below 0)
 *   a * b      vl__mul          a / b      vl__div_ceil (a shard holds the ceiling)
 *   a ^ k      a * a ... (k a whole literal, 1 to 8)
 *   max(a, b), min(a, b)
 *   x * a      vl__scale (a real factor: a literal with a point, or a real
 *              input; the product is rounded to whole bytes at once)
 *
 * with the usual precedence, left to right, so "P / N * g" is
 * vl__mul(vl__div_ceil(P, N), g). Names are the group's inputs; literals
 * are whole ("4", "5e8") or real ("0.05", correctly rounded). Words in
 * parentheses after an operand ("T*8 (mean, rstd)") are a note for the
 * reader and are skipped: an operand is never followed by '(' otherwise,
 * and a function's '(' follows its name with no space. A formula that does
 * not parse, names an input its group lacks, overflows in a literal, or
 * gives a real where a whole number is needed fails the build. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 12 /* VL_TERM_INPUTS (include/vramledger/model.h) */

/* ---- the table ---- */

struct gin {
  const char *name, *unit;
  bool real;
};
struct group {
  const char *name;
  struct gin in[MAX_IN + 1]; /* a NULL name ends them */
};
struct term {
  const char *id, *group, *line;
  bool detail;
  const char *name, *formula, *source;
};

#define IN(n, u)                                                                                   \
  { #n, u, false }
#define REAL(n, u)                                                                                 \
  { #n, u, true }
#define VL__INPUTS(g, ...) {#g, {__VA_ARGS__}},
#define VL__TERM(id, g, line, detail, name, formula, source)
static const struct group groups[] = {
#include VL_TERMS_DEF
};
#undef VL__INPUTS
#undef VL__TERM
#define SUMMED false
#define DETAIL true
#define VL__INPUTS(g, ...)
#define VL__TERM(id, g, line, detail, name, formula, source)                                       \
  {#id, #g, #line, detail, name, formula, source},
static const struct term terms[] = {
#include VL_TERMS_DEF
};
#define N_GROUPS (sizeof groups / sizeof groups[0])
#define N_TERMS (sizeof terms / sizeof terms[0])

static const struct group *group_of(const char *name) {
  for (size_t i = 0; i < N_GROUPS; i++)
    if (!strcmp(groups[i].name, name)) return &groups[i];
  return NULL;
}

/* ---- text ---- */

/* Every string fmt makes, freed together at the end (a compiled formula is
 * built from its operands' strings, which nothing else holds) */
static char **made;
static size_t n_made, cap_made;

static void free_made(void) {
  for (size_t i = 0; i < n_made; i++)
    free(made[i]);
  free(made);
}

static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  if (n_made == cap_made) {
    cap_made = cap_made ? 2 * cap_made : 1024;
    made = realloc(made, cap_made * sizeof *made);
    if (!made) exit(2);
  }
  char *s = malloc((size_t)n + 1);
  if (!s) exit(2);
  made[n_made++] = s;
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

/* ---- formula -> C ---- */

/* an operand compiled: its C expression, whole (uint64_t) or real (double) */
struct ex {
  char *c;
  bool real;
};

struct parser {
  const char *p;
  const struct group *g;
  unsigned used; /* bit i: the formula names input i */
  unsigned pows; /* powers used: the helper is emitted */
  bool bad;
  const char *why;
};

static struct ex fail(struct parser *ps, const char *why) {
  if (!ps->bad) ps->why = why;
  ps->bad = true;
  return (struct ex){fmt("0"), false};
}

static bool is_alpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void skip_space(struct parser *ps) {
  while (*ps->p == ' ')
    ps->p++;
}

/* words in parentheses after an operand: skipped, nesting included */
static void skip_notes(struct parser *ps) {
  for (skip_space(ps); *ps->p == '('; skip_space(ps)) {
    int depth = 0;
    do {
      if (!*ps->p) {
        fail(ps, "an unclosed note");
        return;
      }
      depth += *ps->p == '(' ? 1 : *ps->p == ')' ? -1 : 0;
      ps->p++;
    } while (depth);
  }
}

/* "4", "5e8" (whole) or "0.05" (real: digits / 10^k, correctly rounded) */
static struct ex number(struct parser *ps) {
  uint64_t m = 0;
  int frac = -1;
  for (; is_digit(*ps->p) || (*ps->p == '.' && frac < 0); ps->p++) {
    if (*ps->p == '.') {
      frac = 0;
      continue;
    }
    const uint64_t digit = (uint64_t)(*ps->p - '0');
    if (m > UINT64_MAX / 10 || m * 10 > UINT64_MAX - digit)
      return fail(ps, "a literal overflows 64 bits");
    m = m * 10 + digit;
    if (frac >= 0) frac++;
  }
  if (frac >= 0) {
    double d = 1.0;
    for (int i = 0; i < frac; i++)
      d *= 10.0;
    if (frac > 22 || m >> 53) return fail(ps, "a real literal not exact in a double");
    return (struct ex){fmt("%a", (double)m / d), true};
  }
  if (*ps->p == 'e' && is_digit(ps->p[1])) {
    unsigned x = 0;
    for (ps->p++; is_digit(*ps->p); ps->p++)
      x = x * 10 + (unsigned)(*ps->p - '0');
    if (x > 19) return fail(ps, "a literal overflows 64 bits");
    while (x--) {
      if (m > UINT64_MAX / 10) return fail(ps, "a literal overflows 64 bits");
      m *= 10;
    }
  }
  return (struct ex){fmt("UINT64_C(%llu)", (unsigned long long)m), false};
}

/* a op b, both whole: fn(a, b), with ck where the operation is checked */
static struct ex whole_op(struct parser *ps, const char *fn, bool checked, struct ex a,
                          struct ex b) {
  if (a.real || b.real) return fail(ps, "a real where a whole number is needed");
  return (struct ex){fmt("%s(%s%s, %s)", fn, checked ? "ck, " : "", a.c, b.c), false};
}

/* a * b, whole or real, as the grammar says (vl__scale for a mixed pair) */
static struct ex mul(struct ex a, struct ex b) {
  if (a.real && b.real) return (struct ex){fmt("(%s * %s)", a.c, b.c), true};
  if (a.real || b.real)
    return (struct ex){fmt("vl__scale(ck, %s, %s)", a.real ? b.c : a.c, a.real ? a.c : b.c), false};
  return (struct ex){fmt("vl__mul(ck, %s, %s)", a.c, b.c), false};
}

static struct ex expr(struct parser *ps);

static struct ex call(struct parser *ps, bool is_max) {
  ps->p++; /* '(' */
  struct ex a = expr(ps);
  if (*ps->p != ',') return fail(ps, "a function of one argument");
  ps->p++;
  struct ex b = expr(ps);
  if (*ps->p != ')') return fail(ps, "an unclosed function");
  ps->p++;
  return whole_op(ps, is_max ? "vl__max" : "vl__min", false, a, b);
}

static struct ex name(struct parser *ps) {
  const char *s = ps->p;
  while (is_alpha(*ps->p) || is_digit(*ps->p))
    ps->p++;
  size_t len = (size_t)(ps->p - s);
  if (*ps->p == '(' && len == 3 && (!strncmp(s, "max", 3) || !strncmp(s, "min", 3)))
    return call(ps, s[1] == 'a');
  for (int i = 0; ps->g->in[i].name; i++) {
    const struct gin *in = &ps->g->in[i];
    if (strncmp(in->name, s, len) || in->name[len]) continue;
    ps->used |= 1u << i;
    return (struct ex){fmt("v->%s", in->name), in->real};
  }
  return fail(ps, "a name its group does not give");
}

static struct ex primary(struct parser *ps) {
  struct ex v;
  skip_space(ps);
  if (*ps->p == '(') {
    ps->p++;
    v = expr(ps);
    if (*ps->p != ')') return fail(ps, "an unclosed parenthesis");
    ps->p++;
    v.c = fmt("(%s)", v.c);
  } else if (is_digit(*ps->p)) {
    v = number(ps);
  } else if (is_alpha(*ps->p)) {
    v = name(ps);
  } else {
    return fail(ps, "an operand expected");
  }
  skip_notes(ps);
  if (*ps->p != '^') return v;
  ps->p++;
  skip_space(ps);
  struct ex k = number(ps);
  unsigned long long kn = 0;
  if (k.real || sscanf(k.c, "UINT64_C(%llu)", &kn) != 1 || kn == 0 || kn > 8)
    return fail(ps, "a power not a whole 1 to 8");
  if (v.real) return fail(ps, "a real raised to a power");
  ps->pows++;
  v = (struct ex){fmt("power(ck, %s, %llu)", v.c, kn), false};
  skip_notes(ps);
  return v;
}

static struct ex product(struct parser *ps) {
  struct ex a = primary(ps);
  while (!ps->bad && (*ps->p == '*' || *ps->p == '/')) {
    char op = *ps->p++;
    struct ex b = primary(ps);
    a = op == '/' ? whole_op(ps, "vl__div_ceil", false, a, b) : mul(a, b);
  }
  return a;
}

static struct ex expr(struct parser *ps) {
  struct ex a = product(ps);
  while (!ps->bad && (*ps->p == '+' || *ps->p == '-')) {
    char op = *ps->p++;
    struct ex b = product(ps);
    a = op == '+' ? whole_op(ps, "vl__add", true, a, b) : whole_op(ps, "vl__sub0", false, a, b);
  }
  return a;
}

/* formula over g's inputs: its C expression (whole), or NULL and *why */
static char *compile(const char *formula, const struct group *g, unsigned *used, const char **why) {
  struct parser ps = {formula, g, 0, 0, false, NULL};
  struct ex v = expr(&ps);
  skip_space(&ps);
  if (!ps.bad && *ps.p) fail(&ps, "text after the formula");
  if (!ps.bad && v.real) fail(&ps, "a real result (bytes are whole)");
  *used = ps.used;
  *why = ps.why;
  return ps.bad ? NULL : v.c;
}

/* ---- the C ---- */

static void upper(FILE *f, const char *s) {
  for (; *s; s++)
    fputc(toupper((unsigned char)*s), f);
}

static void c_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static int n_inputs(const struct group *g) {
  int n = 0;
  while (n < MAX_IN && g->in[n].name)
    n++;
  return n;
}

/* the table's path from the source tree's root, as the generated files name it */
static const char *def_path(void) {
  const char *p = strstr(VL_TERMS_DEF, "/lib/");
  if (!p) p = strstr(VL_TERMS_DEF, "/tests/");
  return p ? p + 1 : VL_TERMS_DEF;
}

/* group g's struct and its typed entry points */
static void emit_group(FILE *h, const char *pre, const char *PRE, const struct group *g) {
  fprintf(h, "\n/* the inputs of the terms of group %s */\nstruct %sin_%s {\n", g->name, pre,
          g->name);
  for (int i = 0; g->in[i].name; i++)
    fprintf(h, "  %s %s;\n", g->in[i].real ? "double" : "uint64_t", g->in[i].name);
  fprintf(h, "};\n");
  fprintf(h,
          "static inline uint64_t %snote_%s(struct vl_bill *b, struct vl__ck *ck, enum %sterm "
          "t,\n    const struct %sin_%s *in) {\n  return vl__term_note(b, ck, &%sterms[t], %sG_",
          pre, g->name, pre, pre, g->name, pre, PRE);
  upper(h, g->name);
  fprintf(h, ", in);\n}\n");
  fprintf(h,
          "static inline uint64_t %svalue_%s(struct vl__ck *ck, enum %sterm t,\n    const "
          "struct %sin_%s *in) {\n  return vl__term_value(ck, &%sterms[t], %sG_",
          pre, g->name, pre, pre, g->name, pre, PRE);
  upper(h, g->name);
  fprintf(h, ", in);\n}\n");
}

static void emit_header(FILE *h, const char *pre, const char *PRE) {
  fprintf(h, "/* Generated by cmake/terms_gen.c from %s: do not edit. */\n", def_path());
  fprintf(h, "#ifndef %sTERMS_TABLE_H\n#define %sTERMS_TABLE_H\n", PRE, PRE);
  fprintf(h, "enum %sterm {\n", pre);
  for (size_t t = 0; t < N_TERMS; t++) {
    fprintf(h, "  %sT_", PRE);
    upper(h, terms[t].id);
    fprintf(h, ",\n");
  }
  fprintf(h, "  %sT_COUNT\n};\n\n", PRE);
  fprintf(h, "enum %sterm_group {\n", pre);
  for (size_t g = 0; g < N_GROUPS; g++) {
    fprintf(h, "  %sG_", PRE);
    upper(h, groups[g].name);
    fprintf(h, ",\n");
  }
  fprintf(h, "};\n\nextern const struct vl__term_row %sterms[%sT_COUNT];\n", pre, PRE);
  for (size_t g = 0; g < N_GROUPS; g++)
    emit_group(h, pre, PRE, &groups[g]);
  fprintf(h, "#endif\n");
}

static const char power_fn[] =
    "/* a^k in checked products (the grammar's ^) */\n"
    "static inline uint64_t power(struct vl__ck *ck, uint64_t a, unsigned k) {\n"
    "  uint64_t r = a;\n  for (unsigned i = 1; i < k; i++)\n    r = vl__mul(ck, r, a);\n"
    "  return r;\n}\n\n";

/* the function of term t: its bytes over its group's inputs */
static int emit_function(FILE *c, const char *pre, const struct term *t, unsigned *used) {
  const struct group *g = group_of(t->group);
  if (!g) {
    fprintf(stderr, "terms_gen: %s: no input group '%s'\n", t->id, t->group);
    return 1;
  }
  const char *why;
  char *code = compile(t->formula, g, used, &why);
  if (!code) {
    fprintf(stderr, "terms_gen: %s: '%s': %s\n", t->id, t->formula, why);
    return 1;
  }
  fputs("/* ", c);
  for (const char *s = t->formula; *s; s++) {
    fputc(*s, c);
    if (s[0] == '*' && s[1] == '/') fputc(' ', c); /* in a comment: never its end */
  }
  fprintf(c, " */\nstatic uint64_t t_%s(struct vl__ck *ck, const void *in) {\n", t->id);
  fprintf(c, "  const struct %sin_%s *v = in;\n  (void)v;\n  (void)ck;\n", pre, g->name);
  for (int i = 0; g->in[i].name; i++)
    if (g->in[i].real && (*used >> i & 1u))
      fprintf(c, "  if (isnan(v->%s)) return vl__term_fail(ck);\n", g->in[i].name);
  fprintf(c, "  return %s;\n}\n\n", code);
  return 0;
}

static void emit_row(FILE *c, const char *pre, const char *PRE, const struct term *t,
                     unsigned used) {
  const struct group *g = group_of(t->group);
  fprintf(c, "    {VL_LINE_%s, %s, %sG_", t->line, t->detail ? "true" : "false", PRE);
  upper(c, g->name);
  fprintf(c, ", %d, ", __builtin_popcount(used));
  c_string(c, t->id);
  fprintf(c, ", ");
  c_string(c, t->name);
  fprintf(c, ", ");
  c_string(c, t->formula);
  fprintf(c, ", ");
  c_string(c, t->source);
  fprintf(c, ", t_%s,\n     {", t->id);
  for (int i = 0; g->in[i].name; i++) {
    if (!(used >> i & 1u)) continue;
    fprintf(c, "{\"%s\", ", g->in[i].name);
    c_string(c, g->in[i].unit);
    fprintf(c, ", %s, offsetof(struct %sin_%s, %s)}, ", g->in[i].real ? "true" : "false", pre,
            g->name, g->in[i].name);
  }
  fprintf(c, "}},\n");
}

static int emit_c(const char *pre, const char *h_path, const char *c_path) {
  char PRE[32];
  size_t n = strlen(pre);
  if (n >= sizeof PRE) return 2;
  for (size_t i = 0; i <= n; i++)
    PRE[i] = (char)toupper((unsigned char)pre[i]);
  for (size_t g = 0; g < N_GROUPS; g++)
    if (n_inputs(&groups[g]) == MAX_IN && groups[g].in[MAX_IN].name) {
      fprintf(stderr, "terms_gen: group %s: more than %d inputs\n", groups[g].name, MAX_IN);
      return 1;
    }
  FILE *h = fopen(h_path, "w"), *c = fopen(c_path, "w");
  if (!h || !c) {
    fprintf(stderr, "terms_gen: cannot write '%s' or '%s'\n", h_path, c_path);
    return 1;
  }
  emit_header(h, pre, PRE);
  const char *base = strrchr(h_path, '/');
  fprintf(c,
          "/* Generated by cmake/terms_gen.c from %s: do not edit. */\n"
          "#include <math.h>\n#include <stddef.h>\n\n#include \"terms.h\"\n#include \"%s\"\n\n%s",
          def_path(), base ? base + 1 : h_path, power_fn);
  static unsigned used[N_TERMS];
  int bad = 0;
  for (size_t t = 0; t < N_TERMS; t++)
    bad |= emit_function(c, pre, &terms[t], &used[t]);
  fprintf(c, "const struct vl__term_row %sterms[%sT_COUNT] = {\n", pre, PRE);
  for (size_t t = 0; t < N_TERMS && !bad; t++)
    emit_row(c, pre, PRE, &terms[t], used[t]);
  fprintf(c, "};\n");
  if (fclose(h) || fclose(c)) bad = 1;
  if (bad) {
    remove(h_path);
    remove(c_path);
  }
  return bad;
}

/* ---- the documentation ---- */

static const char begin_mark[] =
    "<!-- terms: generated from lib/model/terms.def by cmake/terms_gen.c -->\n";
static const char end_mark[] = "<!-- terms: end -->\n";

static void md_cell(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', f);
    fputc(*s, f);
  }
}

/* the list of terms, in the table's order */
static char *doc_text(size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) exit(2);
  fputs("| id | term | line | formula | inputs | source |\n|---|---|---|---|---|---|\n", f);
  for (size_t t = 0; t < N_TERMS; t++) {
    const struct term *tm = &terms[t];
    const struct group *g = group_of(tm->group);
    unsigned used = 0;
    const char *why;
    if (!g || !compile(tm->formula, g, &used, &why)) exit(1);
    fprintf(f, "| `%s` | %s%s | ", tm->id, tm->name, tm->detail ? " (detail)" : "");
    for (const char *s = tm->line; *s; s++)
      fputc(*s == '_' ? ' ' : tolower((unsigned char)*s), f);
    fprintf(f, " | `%s` | ", tm->formula);
    bool first = true;
    for (int i = 0; g->in[i].name; i++) {
      if (!(used >> i & 1u)) continue;
      fprintf(f, "%s`%s`", first ? "" : ", ", g->in[i].name);
      if (*g->in[i].unit) {
        fputc(' ', f);
        md_cell(f, g->in[i].unit);
      }
      if (g->in[i].real) fputs(" (real)", f);
      first = false;
    }
    fputs(" | ", f);
    md_cell(f, tm->source);
    fputs(" |\n", f);
  }
  fclose(f);
  return buf;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (*len + 4096 + 1 > cap) {
      cap = (cap + 4096) * 2;
      buf = realloc(buf, cap);
      if (!buf) exit(2);
    }
    size_t n = fread(buf + *len, 1, 4096, f);
    *len += n;
    if (n < 4096) break;
  }
  fclose(f);
  buf[*len] = '\0';
  return buf;
}

/* the section of md (at path) between b and e against the table's list:
 * compared, or written */
static int splice(const char *path, const char *md, const char *b, const char *e, bool write) {
  size_t glen;
  char *gen = doc_text(&glen);
  const bool same = (size_t)(e - b) == glen && !memcmp(b, gen, glen);
  int rc = 0;
  if (!write && !same) {
    fprintf(stderr,
            "terms_gen: the list of terms in '%s' is stale: run "
            "`ninja -C build terms_doc` and commit it\n",
            path);
    rc = 1;
  } else if (write && !same) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(md, 1, (size_t)(b - md), f) == (size_t)(b - md) &&
              fwrite(gen, 1, glen, f) == glen && fputs(e, f) >= 0;
    if (f && fclose(f)) ok = false;
    if (!ok) fprintf(stderr, "terms_gen: cannot write '%s'\n", path);
    rc = !ok;
  }
  free(gen);
  return rc;
}

static int doc(const char *path, bool write) {
  size_t len;
  char *md = slurp(path, &len);
  if (!md) {
    fprintf(stderr, "terms_gen: cannot read '%s'\n", path);
    return 1;
  }
  const char *b = strstr(md, begin_mark), *e = b ? strstr(b, end_mark) : NULL;
  int rc = 1;
  if (!b || !e)
    fprintf(stderr, "terms_gen: '%s' has no markers: %s ... %s", path, begin_mark, end_mark);
  else
    rc = splice(path, md, b + strlen(begin_mark), e, write);
  free(md);
  return rc;
}

int main(int argc, char **argv) {
  atexit(free_made);
  if (argc == 5 && !strcmp(argv[1], "c")) return emit_c(argv[2], argv[3], argv[4]);
  if ((argc == 3 || argc == 4) && !strcmp(argv[1], "doc"))
    return doc(argv[2], argc == 4 && !strcmp(argv[3], "--write"));
  if (argc == 4 && !strcmp(argv[1], "check")) {
    const struct group *g = group_of(argv[2]);
    unsigned used;
    const char *why;
    if (g && compile(argv[3], g, &used, &why)) return 0;
    fprintf(stderr, "terms_gen: '%s': %s\n", argv[3], g ? why : "no such group");
    return 1;
  }
  fprintf(stderr, "usage: terms_gen c PREFIX OUT.h OUT.c | doc FILE.md [--write] | "
                  "check GROUP FORMULA\n");
  return 2;
}
