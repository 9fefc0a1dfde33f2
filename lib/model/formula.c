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
#include <string.h>

#include "internal.h"

/* A value: whole (n; x is NaN) or a real factor (x). Two words, so that it
 * is returned in registers: with a flag beside them, every return went
 * through the stack, and the parse took a third of plan's time. */
struct val {
  uint64_t n;
  double x;
};

struct parser {
  const char *p;
  const struct vl_input *in;
  int n_in;
  struct vl__ck *ck;
  unsigned used;
  bool bad;
};

static struct val whole(uint64_t n) { return (struct val){n, NAN}; }
static struct val factor(double x) { return (struct val){0, x}; }
static bool is_real(struct val v) { return !isnan(v.x); }

static struct val fail(struct parser *ps) {
  ps->bad = true;
  return whole(0);
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
    m = vl__add(ps->ck, vl__mul(ps->ck, m, 10), (uint64_t)(*ps->p - '0'));
    if (frac >= 0) frac++;
  }
  if (frac >= 0) {
    double d = 1.0;
    for (int i = 0; i < frac; i++)
      d *= 10.0;
    if (frac > 22 || m >> 53) return fail(ps);
    return factor((double)m / d);
  }
  if (*ps->p == 'e' && is_digit(ps->p[1])) {
    unsigned x = 0;
    for (ps->p++; is_digit(*ps->p); ps->p++)
      x = x * 10 + (unsigned)(*ps->p - '0');
    if (x > 19) return fail(ps);
    while (x--)
      m = vl__mul(ps->ck, m, 10);
  }
  return whole(m);
}

static struct val expr(struct parser *ps);

static struct val call(struct parser *ps, bool is_max) {
  ps->p++; /* '(' */
  struct val a = expr(ps);
  if (*ps->p != ',') return fail(ps);
  ps->p++;
  struct val b = expr(ps);
  if (*ps->p != ')' || is_real(a) || is_real(b)) return fail(ps);
  ps->p++;
  return whole(is_max ? vl__max(a.n, b.n) : vl__min(a.n, b.n));
}

static struct val name(struct parser *ps) {
  const char *s = ps->p;
  while (is_alpha(*ps->p) || is_digit(*ps->p))
    ps->p++;
  size_t len = (size_t)(ps->p - s);
  if (*ps->p == '(' && len == 3 && (!strncmp(s, "max", 3) || !strncmp(s, "min", 3)))
    return call(ps, s[1] == 'a');
  for (int i = 0; i < ps->n_in; i++) {
    const struct vl_input *in = &ps->in[i];
    if (in->name[0] != s[0] || strncmp(in->name, s, len) || in->name[len]) continue;
    ps->used |= 1u << i;
    if (in->real && isnan(in->value)) return fail(ps);
    return in->real ? factor(in->value) : whole(in->whole);
  }
  return fail(ps);
}

static struct val primary(struct parser *ps) {
  skip_space(ps);
  struct val v;
  if (*ps->p == '(') {
    ps->p++;
    v = expr(ps);
    if (*ps->p != ')') return fail(ps);
    ps->p++;
  } else if (is_digit(*ps->p)) {
    v = number(ps);
  } else if (is_alpha(*ps->p)) {
    v = name(ps);
  } else {
    return fail(ps);
  }
  skip_notes(ps);
  if (*ps->p != '^') return v;
  ps->p++;
  skip_space(ps);
  struct val k = number(ps);
  if (is_real(v) || is_real(k) || k.n == 0 || k.n > 8) return fail(ps);
  uint64_t r = v.n;
  for (uint64_t i = 1; i < k.n; i++)
    r = vl__mul(ps->ck, r, v.n);
  skip_notes(ps);
  return whole(r);
}

static struct val product(struct parser *ps) {
  struct val a = primary(ps);
  while (!ps->bad && (*ps->p == '*' || *ps->p == '/')) {
    char op = *ps->p++;
    struct val b = primary(ps);
    if (op == '/') {
      if (is_real(a) || is_real(b)) return fail(ps);
      a = whole(vl__div_ceil(a.n, b.n));
    } else if (is_real(a) && is_real(b)) {
      a.x *= b.x;
    } else if (is_real(a) || is_real(b)) {
      a = whole(vl__scale(ps->ck, is_real(a) ? b.n : a.n, is_real(a) ? a.x : b.x));
    } else {
      a = whole(vl__mul(ps->ck, a.n, b.n));
    }
  }
  return a;
}

static struct val expr(struct parser *ps) {
  struct val a = product(ps);
  while (!ps->bad && (*ps->p == '+' || *ps->p == '-')) {
    char op = *ps->p++;
    struct val b = product(ps);
    if (is_real(a) || is_real(b)) return fail(ps);
    a = whole(op == '+' ? vl__add(ps->ck, a.n, b.n) : vl__sub0(a.n, b.n));
  }
  return a;
}

bool vl__formula_eval(const char *formula, const struct vl_input *in, int n_in, struct vl__ck *ck,
                      uint64_t *bytes, unsigned *used) {
  struct parser ps = {formula, in, n_in, ck, 0, false};
  struct val v = expr(&ps);
  skip_space(&ps);
  const bool ok = !ps.bad && !*ps.p && !is_real(v);
  if (!ok) ck->overflow = true; /* never a wrong number: the bill fails */
  *bytes = ok ? v.n : 0;
  if (used) *used = ps.used;
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
