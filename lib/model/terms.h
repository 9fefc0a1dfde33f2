/* The terms of the bill: each one a row of lib/model/terms.def (its id,
 * line, name, formula, source and its group's inputs), from which the build
 * generates (cmake/terms_gen.c) the function that computes its bytes in
 * the checked arithmetic of ../util/internal.h, the display string, the
 * inputs it names, and the list of terms in docs/model.md. A call site
 * fills its group's input struct and records the term:
 *
 *   vl__note_optimizer(bill, ck, VL__T_OPTIMIZER_STATES,
 *                      &(struct vl__in_optimizer){.P_train = tr, ...});
 *
 * The struct is the group's (one set of inputs for the formulas one term
 * may take, by the case); the term shows the inputs its formula names, in
 * the group's order. */
#ifndef VRAMLEDGER_MODEL_TERMS_H
#define VRAMLEDGER_MODEL_TERMS_H
#include "internal.h"

/* an input a term's formula names: where its value is in the group's struct */
struct vl__term_in {
  const char *name, *unit;
  bool real; /* a double (a real factor), else a uint64_t */
  uint16_t offset;
};

/* a row of the table, as generated */
struct vl__term_row {
  enum vl_line line;
  bool detail; /* explains a part of another term; not summed */
  uint8_t group;
  uint8_t n_in;
  const char *id, *name, *formula, *source;
  uint64_t (*bytes)(struct vl__ck *ck, const void *in); /* the formula, compiled */
  struct vl__term_in in[VL_TERM_INPUTS];                /* those its formula names */
};

/* The bytes of row r over in (its group g's struct), in checked
 * arithmetic: an overflow sets ck->overflow (the bill then fails; never a
 * wrong number), and so do a NaN factor and an in of another group than
 * r's, which give 0. */
uint64_t vl__term_value(struct vl__ck *ck, const struct vl__term_row *r, unsigned g,
                        const void *in);
/* Records r over in as a term of b and returns its bytes (vl__term_value). */
uint64_t vl__term_note(struct vl_bill *b, struct vl__ck *ck, const struct vl__term_row *r,
                       unsigned g, const void *in);
/* sets ck->overflow; @return 0 (a formula that cannot give its bytes) */
uint64_t vl__term_fail(struct vl__ck *ck);

#include "terms_table.h" /* generated: enum vl__term, struct vl__in_<group>, vl__note_<group> */
#endif
