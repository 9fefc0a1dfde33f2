/* Recording the terms of the bill (terms.h). The formulas themselves are
 * compiled from lib/model/terms.def by cmake/terms_gen.c into one function
 * each; what is left here is what every term shares: the check that a call
 * site gave its term's group, and the term's record with the inputs its
 * formula names. */
#include <string.h>

#include "terms.h"

uint64_t vl__term_fail(struct vl__ck *ck) {
  ck->overflow = true; /* never a wrong number: the bill fails */
  return 0;
}

uint64_t vl__term_value(struct vl__ck *ck, const struct vl__term_row *r, unsigned g,
                        const void *in) {
  return r->group == g ? r->bytes(ck, in) : vl__term_fail(ck);
}

/* appends a term to b->terms */
static struct vl_term *record(struct vl_bill *b, const struct vl__term_row *r, uint64_t bytes) {
  /* the table is sized for every term the model records; should it ever
   * fill, the last slot is reused rather than writing past the end */
  struct vl_term *t = &b->terms[b->n_terms < VL_MAX_TERMS ? b->n_terms++ : VL_MAX_TERMS - 1];
  /* its inputs are written as they are shown (n_in of them): not cleared */
  t->line = r->line;
  t->name = r->name;
  t->formula = r->formula;
  t->source = r->source;
  t->bytes = bytes;
  t->detail = r->detail;
  t->n_in = 0;
  return t;
}

/* The term shows the inputs its formula names, in its group's order (the
 * group may offer more: the inputs of its other formulas). */
uint64_t vl__term_note(struct vl_bill *b, struct vl__ck *ck, const struct vl__term_row *r,
                       unsigned g, const void *in) {
  const uint64_t bytes = vl__term_value(ck, r, g, in);
  struct vl_term *t = record(b, r, bytes);
  for (int i = 0; i < r->n_in; i++) {
    const struct vl__term_in *a = &r->in[i];
    const char *p = (const char *)in + a->offset;
    struct vl_input *v = &t->in[t->n_in++];
    uint64_t n = 0;
    double x = 0;
    if (a->real)
      memcpy(&x, p, sizeof x);
    else
      memcpy(&n, p, sizeof n);
    *v = (struct vl_input){a->name, a->real ? x : (double)n, a->unit, n, a->real};
  }
  return bytes;
}
