/* Internal: the run record's schema (record_schema.def) as C. Readers and
 * writers name a field VL_RF(event, field): the name comes from the
 * table, and a field the table lacks does not compile. */
#ifndef VRAMLEDGER_RECORD_SCHEMA_H
#define VRAMLEDGER_RECORD_SCHEMA_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* the events and the objects inside them; VL_RO__: no part */
enum vl__rec_obj {
  VL_RO__ = -1,
#define VL_REC_OBJ(id, path, writers) VL_RO_##id,
#define VL_REC_FIELD(obj, name, jtype, part, unit, presence, writers)
#include "record_schema.def"
#undef VL_REC_OBJ
#undef VL_REC_FIELD
  VL_RO_N
};

enum vl__rec_field {
#define VL_REC_OBJ(id, path, writers)
#define VL_REC_FIELD(obj, name, jtype, part, unit, presence, writers) VL_RF_##obj##__##name,
#include "record_schema.def"
#undef VL_REC_OBJ
#undef VL_REC_FIELD
  VL_RF_N
};

/* a field's JSON type (the .def's jtype column) */
enum vl__rec_jtype {
  VL_RJ_U,   /* an integer >= 0 */
  VL_RJ_I,   /* an integer */
  VL_RJ_NUM, /* a number */
  VL_RJ_S,   /* a string */
  VL_RJ_B,   /* true or false */
  VL_RJ_UN,  /* an integer >= 0, or null */
  VL_RJ_AS,  /* an array of strings */
  VL_RJ_AU,  /* an array of integers >= 0 */
  VL_RJ_AA,  /* an array of arrays */
  VL_RJ_AO,  /* an array of objects (the field's part) */
  VL_RJ_O,   /* an object (the field's part) */
  VL_RJ_MAP  /* an object of integers >= 0 by name */
};

struct vl__rec_obj_row {
  const char *id, *path, *writers; /* writers: a comma list */
};

struct vl__rec_field_row {
  enum vl__rec_obj obj, part;
  const char *name, *jtype_name, *unit, *writers;
  enum vl__rec_jtype jtype;
  bool required; /* on every line its writers write */
};

extern const struct vl__rec_obj_row vl__rec_objs[VL_RO_N];
extern const struct vl__rec_field_row vl__rec_fields[VL_RF_N];

/* A field's name: VL_RF(sample, tree_bytes) is "tree_bytes", the name of
 * the table's row (vl__rec_fields[VL_RF_sample__tree_bytes].name, both
 * spelled from the row's identifier), and a field the table lacks does
 * not compile. A string literal, not a look-up: the sample scanner's
 * compares stay constants (lib/measure/record.c). */
#define VL_RF(obj, f) ((void)VL_RF_##obj##__##f, #f)
/* An event's type: VL_RT(sample) is "sample" (an event's path is its id:
 * tests/unit/test_record_schema.c) */
#define VL_RT(obj) ((void)VL_RO_##obj, #obj)

/* Does the comma list writers name writer? */
bool vl__rec_writes(const char *writers, const char *writer);

/* An event checked against the table: its type known, each member a field
 * of it with the field's JSON type (objects inside, the same), and the
 * fields its writer always writes there. writer: "run", "interposer" or
 * "probe"; NULL: the event's "writer" member, else the event's one writer,
 * else only what all its writers write is required.
 * @return true when it conforms; false with what is wrong in why (a
 * member's path, what was found and what the table says) */
bool vl__rec_check(json_t *event, const char *writer, char *why, size_t why_len);

#endif
