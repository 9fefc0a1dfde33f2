/* A term of the bill is defined by its formula: the text the bill shows is
 * the expression this file evaluates, over the inputs the bill shows beside
 * it, so the two cannot drift. The grammar is plain arithmetic over whole
 * numbers, in the checked operations of ../util/internal.h:
 *
 *   a + b      vl__add          a - b      vl__sub0 (never below 0)
 *   a * b      vl__mul          a / b      vl__div_ceil (a shard holds the ceiling)
 *   a ^ k      a * a ... (k a whole literal)
 *   max(a, b), min(a, b)
 *   x * a      vl__scale (a real factor: a literal with a point, or a real
 *              input; the product is rounded to whole bytes at once)
 *
 * with the usual precedence, left to right, so "P / N * g" is
 * vl__mul(vl__div_ceil(P, N), g). Names are inputs ([A-Za-z_][A-Za-z0-9_]*);
 * literals are whole ("4", "5e8") or real ("0.05"). Words in parentheses
 * after an operand ("T*8 (mean, rstd)") are a note for the reader and are
 * skipped: an operand is never followed by '(' otherwise, and a function's
 * '(' follows its name with no space. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "vramledger/alloc.h"

/* A value: whole (n; x is NaN) or a real factor (x): two words, no flag
 * beside them (a program's literals and its stack hold them). */
struct val {
  uint64_t n;
  double x;
};

/* A formula is compiled once into a program (postfix, its operations in
 * the order the text gives them) and the program run on the inputs'
 * values: a bill evaluates about a hundred formulas and plan 10^5 bills,
 * and parsing each one every time was a third of plan's time. A program
 * is cached by the formula's address and its inputs' names and kinds
 * (string literals: their addresses are stable), per thread. */
enum op { OP_IN, OP_LIT, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN };
#define PROG_CODE 128 /* operations a program holds (the bill's longest formula: 43) */
#define PROG_LITS 16  /* literals (the most in one formula of the bill: 4) */
#define PROG_STACK 32

struct insn {
  uint8_t op, arg; /* arg: the input, the literal or the power */
};
struct prog {
  /* the key */
  const char *formula;
  const char *names[VL_TERM_INPUTS];
  uint16_t real; /* bit i: input i is a real factor */
  uint8_t n_in;
  /* the program */
  bool ok;           /* it parsed: the text is whole, its names known */
  bool lit_overflow; /* a literal overflowed (as the checked parse would say) */
  uint8_t len, n_lits;
  unsigned used; /* the inputs it names */
  struct insn code[PROG_CODE];
  struct val lits[PROG_LITS];
};

struct parser {
  const char *p;
  const struct vl_input *in;
  int n_in;
  struct vl__ck ck; /* literals' own */
  struct prog *g;
  int depth; /* of the program's stack */
  bool bad;
};

static struct val whole(uint64_t n) { return (struct val){n, NAN}; }
static struct val factor(double x) { return (struct val){0, x}; }
static bool is_real(struct val v) { return !isnan(v.x); }

static void fail(struct parser *ps) { ps->bad = true; }

/* op into the program; delta: what it does to the stack's depth */
static void emit(struct parser *ps, enum op op, unsigned arg, int delta) {
  if (ps->g->len == PROG_CODE || ps->depth + delta > PROG_STACK) {
    fail(ps); /* longer than any formula of the bill: refused, never cut */
    return;
  }
  ps->g->code[ps->g->len++] = (struct insn){(uint8_t)op, (uint8_t)arg};
  ps->depth += delta;
}

static void emit_lit(struct parser *ps, struct val v) {
  if (ps->g->n_lits == PROG_LITS) {
    fail(ps);
    return;
  }
  ps->g->lits[ps->g->n_lits] = v;
  emit(ps, OP_LIT, ps->g->n_lits++, 1);
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
        fail(ps);
        return;
      }
      depth += *ps->p == '(' ? 1 : *ps->p == ')' ? -1 : 0;
      ps->p++;
    } while (depth);
  }
}

/* "4", "5e8" (whole) or "0.05" (real: digits / 10^k, correctly rounded) */
static struct val number(struct parser *ps) {
  uint64_t m = 0;
  int frac = -1;
  for (; is_digit(*ps->p) || (*ps->p == '.' && frac < 0); ps->p++) {
    if (*ps->p == '.') {
      frac = 0;
      continue;
    }
    m = vl__add(&ps->ck, vl__mul(&ps->ck, m, 10), (uint64_t)(*ps->p - '0'));
    if (frac >= 0) frac++;
  }
  if (frac >= 0) {
    double d = 1.0;
    for (int i = 0; i < frac; i++)
      d *= 10.0;
    if (frac > 22 || m >> 53) fail(ps);
    return factor((double)m / d);
  }
  if (*ps->p == 'e' && is_digit(ps->p[1])) {
    unsigned x = 0;
    for (ps->p++; is_digit(*ps->p); ps->p++)
      x = x * 10 + (unsigned)(*ps->p - '0');
    if (x > 19) {
      fail(ps);
      return whole(0);
    }
    while (x--)
      m = vl__mul(&ps->ck, m, 10);
  }
  return whole(m);
}

static void expr(struct parser *ps);

static void call(struct parser *ps, bool is_max) {
  ps->p++; /* '(' */
  expr(ps);
  if (*ps->p != ',') return fail(ps);
  ps->p++;
  expr(ps);
  if (*ps->p != ')') return fail(ps);
  ps->p++;
  emit(ps, is_max ? OP_MAX : OP_MIN, 0, -1);
}

static void name(struct parser *ps) {
  const char *s = ps->p;
  while (is_alpha(*ps->p) || is_digit(*ps->p))
    ps->p++;
  size_t len = (size_t)(ps->p - s);
  if (*ps->p == '(' && len == 3 && (!strncmp(s, "max", 3) || !strncmp(s, "min", 3)))
    return call(ps, s[1] == 'a');
  for (int i = 0; i < ps->n_in; i++) {
    const struct vl_input *in = &ps->in[i];
    if (in->name[0] != s[0] || strncmp(in->name, s, len) || in->name[len]) continue;
    ps->g->used |= 1u << i;
    return emit(ps, OP_IN, (unsigned)i, 1);
  }
  fail(ps);
}

static void primary(struct parser *ps) {
  skip_space(ps);
  if (*ps->p == '(') {
    ps->p++;
    expr(ps);
    if (*ps->p != ')') return fail(ps);
    ps->p++;
  } else if (is_digit(*ps->p)) {
    emit_lit(ps, number(ps));
  } else if (is_alpha(*ps->p)) {
    name(ps);
  } else {
    return fail(ps);
  }
  skip_notes(ps);
  if (*ps->p != '^') return;
  ps->p++;
  skip_space(ps);
  struct val k = number(ps);
  if (is_real(k) || k.n == 0 || k.n > 8) return fail(ps);
  emit(ps, OP_POW, (unsigned)k.n, 0);
  skip_notes(ps);
}

static void product(struct parser *ps) {
  primary(ps);
  while (!ps->bad && (*ps->p == '*' || *ps->p == '/')) {
    char op = *ps->p++;
    primary(ps);
    emit(ps, op == '/' ? OP_DIV : OP_MUL, 0, -1);
  }
}

static void expr(struct parser *ps) {
  product(ps);
  while (!ps->bad && (*ps->p == '+' || *ps->p == '-')) {
    char op = *ps->p++;
    product(ps);
    emit(ps, op == '+' ? OP_ADD : OP_SUB, 0, -1);
  }
}

/* formula over inputs of in's names and kinds into g (its key set) */
static void compile(struct prog *g, const char *formula, const struct vl_input *in, int n_in) {
  memset(g, 0, offsetof(struct prog, code));
  g->formula = formula;
  g->n_in = (uint8_t)n_in;
  for (int i = 0; i < n_in; i++) {
    g->names[i] = in[i].name;
    if (in[i].real) g->real |= (uint16_t)(1u << i);
  }
  struct parser ps = {formula, in, n_in, {false}, g, 0, false};
  expr(&ps);
  skip_space(&ps);
  g->ok = !ps.bad && !*ps.p && ps.depth == 1;
  g->lit_overflow = ps.ck.overflow;
}

/* a * b, whole or real, as the grammar says (vl__scale for a mixed pair) */
static void mul(struct vl__ck *ck, struct val *a, struct val b) {
  if (is_real(*a) && is_real(b))
    a->x *= b.x;
  else if (is_real(*a) || is_real(b))
    *a = whole(vl__scale(ck, is_real(*a) ? b.n : a->n, is_real(*a) ? a->x : b.x));
  else
    *a = whole(vl__mul(ck, a->n, b.n));
}

/* g on in's values: false for a real where a whole is needed */
static bool run(const struct prog *g, const struct vl_input *in, struct vl__ck *ck,
                struct val *out) {
  struct val st[PROG_STACK];
  int n = 0;
  if (g->lit_overflow) ck->overflow = true;
  for (int i = 0; i < g->len; i++) {
    const struct insn c = g->code[i];
    if (c.op == OP_IN) {
      const struct vl_input *v = &in[c.arg];
      if (v->real && isnan(v->value)) return false;
      st[n++] = v->real ? factor(v->value) : whole(v->whole);
      continue;
    }
    if (c.op == OP_LIT) {
      st[n++] = g->lits[c.arg];
      continue;
    }
    struct val *a = &st[n - 1];
    if (c.op == OP_POW) {
      if (is_real(*a)) return false;
      uint64_t r = a->n;
      for (unsigned k = 1; k < c.arg; k++)
        r = vl__mul(ck, r, a->n);
      *a = whole(r);
      continue;
    }
    struct val b = st[--n];
    a = &st[n - 1];
    if (c.op == OP_MUL) {
      mul(ck, a, b);
      continue;
    }
    if (is_real(*a) || is_real(b)) return false; /* the rest take whole numbers */
    switch (c.op) {
    case OP_ADD: *a = whole(vl__add(ck, a->n, b.n)); break;
    case OP_SUB: *a = whole(vl__sub0(a->n, b.n)); break;
    case OP_DIV: *a = whole(vl__div_ceil(a->n, b.n)); break;
    case OP_MAX: *a = whole(vl__max(a->n, b.n)); break;
    default: *a = whole(vl__min(a->n, b.n)); break;
    }
  }
  *out = st[0];
  return true;
}

/* ---- the cache of programs ---- */

#define CACHE_SLOTS 512                  /* a bill's formulas, with room */
static _Thread_local struct prog *cache; /* NULL: not made yet, or no memory */
static _Thread_local bool cache_tried;

static bool same_key(const struct prog *g, const char *formula, const struct vl_input *in,
                     int n_in) {
  if (g->formula != formula || g->n_in != n_in) return false;
  for (int i = 0; i < n_in; i++)
    if (g->names[i] != in[i].name || ((g->real >> i & 1u) != 0) != in[i].real) return false;
  return true;
}

/* formula's program for in's names and kinds: cached, or compiled into
 * *own when the cache could not be made */
static const struct prog *program(const char *formula, const struct vl_input *in, int n_in,
                                  struct prog *own) {
  if (!cache && !cache_tried) {
    cache_tried = true;
    cache = vl_calloc(CACHE_SLOTS, sizeof *cache);
  }
  if (!cache) {
    compile(own, formula, in, n_in);
    return own;
  }
  uint64_t h = (uint64_t)(uintptr_t)formula * 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < n_in; i++)
    h = (h ^ (uint64_t)(uintptr_t)in[i].name) * 0x100000001B3ull;
  struct prog *g = &cache[(h >> 40) & (CACHE_SLOTS - 1)];
  if (!same_key(g, formula, in, n_in)) compile(g, formula, in, n_in);
  return g;
}

bool vl__formula_eval(const char *formula, const struct vl_input *in, int n_in, struct vl__ck *ck,
                      uint64_t *bytes, unsigned *used) {
  struct prog own;
  const struct prog *g = program(formula, in, n_in, &own);
  struct val v = whole(0);
  const bool ok = g->ok && run(g, in, ck, &v) && !is_real(v);
  if (!ok) ck->overflow = true; /* never a wrong number: the bill fails */
  *bytes = ok ? v.n : 0;
  if (used) *used = g->used;
  return ok;
}

static struct vl_input input_of(const struct vl__in *a) {
  return (struct vl_input){a->name, a->real ? a->x : (double)a->n, a->unit ? a->unit : "", a->n,
                           a->real};
}

/* the inputs of d (n of them) and the value of its formula over them;
 * *used: those it names */
static uint64_t eval_def(struct vl__ck *ck, const struct vl__def *d, struct vl_input *in, int *n,
                         unsigned *used) {
  *n = 0;
  while (*n < VL_TERM_INPUTS && d->in[*n].name) {
    in[*n] = input_of(&d->in[*n]);
    (*n)++;
  }
  uint64_t bytes;
  vl__formula_eval(d->formula, in, *n, ck, &bytes, used);
  return bytes;
}

uint64_t vl__def_value(struct vl__ck *ck, const struct vl__def *d) {
  struct vl_input in[VL_TERM_INPUTS];
  int n;
  return eval_def(ck, d, in, &n, NULL);
}

/* appends a term to b->terms */
static struct vl_term *record(struct vl_bill *b, enum vl_line line, const char *name,
                              const char *formula, const char *source, uint64_t bytes) {
  /* the table is sized for every term the model records; should it ever
   * fill, the last slot is reused rather than writing past the end */
  struct vl_term *t = &b->terms[b->n_terms < VL_MAX_TERMS ? b->n_terms++ : VL_MAX_TERMS - 1];
  /* its inputs are written as they are shown (n_in of them): not cleared */
  t->line = line;
  t->name = name;
  t->formula = formula;
  t->source = source;
  t->bytes = bytes;
  t->detail = false;
  t->n_in = 0;
  return t;
}

/* The term shows the inputs its formula names, in the order given: a
 * definition may offer more (the inputs of its other cases). */
uint64_t vl__note(struct vl_bill *b, struct vl__ck *ck, const struct vl__def *d) {
  struct vl_input in[VL_TERM_INPUTS];
  int n;
  unsigned used = 0;
  uint64_t bytes = eval_def(ck, d, in, &n, &used);
  struct vl_term *t = record(b, d->line, d->name, d->formula, d->source, bytes);
  t->detail = d->detail;
  for (int i = 0; i < n; i++)
    if (used >> i & 1u) t->in[t->n_in++] = in[i];
  return bytes;
}
