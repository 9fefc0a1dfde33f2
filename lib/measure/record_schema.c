/* The run record's schema as tables (record_schema.def), and the check of
 * an event against them. */
#include <stdio.h>
#include <string.h>

#include "record_schema.h"

const struct vl__rec_obj_row vl__rec_objs[VL_RO_N] = {
#define VL_REC_OBJ(id, path, writers) {#id, path, writers},
#define VL_REC_FIELD(obj, name, jtype, part, unit, presence, writers)
#include "record_schema.def"
#undef VL_REC_OBJ
#undef VL_REC_FIELD
};

#define VL__REQ true
#define VL__OPT false
const struct vl__rec_field_row vl__rec_fields[VL_RF_N] = {
#define VL_REC_OBJ(id, path, writers)
#define VL_REC_FIELD(obj, name, jtype, part, unit, presence, writers)                              \
  {VL_RO_##obj, VL_RO_##part, #name, #jtype, unit, writers, VL_RJ_##jtype, VL__##presence},
#include "record_schema.def"
#undef VL_REC_OBJ
#undef VL_REC_FIELD
};

bool vl__rec_writes(const char *writers, const char *writer) {
  size_t n = strlen(writer);
  for (const char *p = writers; *p;) {
    while (*p == ' ' || *p == ',')
      p++;
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, writer, n) == 0) return true;
    p += k;
  }
  return false;
}

static bool is_u(json_t *v) { return json_is_integer(v) && json_integer_value(v) >= 0; }

static bool all(json_t *a, bool (*each)(json_t *)) {
  size_t i;
  json_t *x;
  json_array_foreach(a, i, x) {
    if (!each(x)) return false;
  }
  return true;
}

static bool is_str(json_t *v) { return json_is_string(v); }

static bool is_arr(json_t *v) { return json_is_array(v); }

static bool is_obj(json_t *v) { return json_is_object(v); }

static bool map_u(json_t *o) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!is_u(v)) return false;
  }
  return true;
}

/* v has jtype t (an object's members are checked by the caller) */
static bool has_type(json_t *v, enum vl__rec_jtype t) {
  switch (t) {
  case VL_RJ_U: return is_u(v);
  case VL_RJ_I: return json_is_integer(v);
  case VL_RJ_NUM: return json_is_number(v);
  case VL_RJ_S: return json_is_string(v);
  case VL_RJ_B: return json_is_boolean(v);
  case VL_RJ_UN: return is_u(v) || json_is_null(v);
  case VL_RJ_AS: return json_is_array(v) && all(v, is_str);
  case VL_RJ_AU: return json_is_array(v) && all(v, is_u);
  case VL_RJ_AA: return json_is_array(v) && all(v, is_arr);
  case VL_RJ_AO: return json_is_array(v) && all(v, is_obj);
  case VL_RJ_O: return json_is_object(v);
  case VL_RJ_MAP: return json_is_object(v) && map_u(v);
  }
  return false;
}

/* Is the field f written on every line of writer (NULL: of all the
 * object's writers)? */
static bool required(const struct vl__rec_field_row *f, const char *writer) {
  if (!f->required) return false;
  if (writer) return vl__rec_writes(f->writers, writer);
  return strcmp(f->writers, vl__rec_objs[f->obj].writers) == 0;
}

static const struct vl__rec_field_row *field_of(enum vl__rec_obj obj, const char *name) {
  for (int i = 0; i < VL_RF_N; i++)
    if (vl__rec_fields[i].obj == obj && strcmp(vl__rec_fields[i].name, name) == 0)
      return &vl__rec_fields[i];
  return NULL;
}

static bool check_obj(json_t *o, enum vl__rec_obj obj, const char *writer, const char *at,
                      char *why, size_t n);

/* The member at.name's value v, its field f, its objects inside. */
static bool check_member(json_t *v, const struct vl__rec_field_row *f, const char *writer,
                         const char *at, char *why, size_t n) {
  char here[160];
  snprintf(here, sizeof here, "%s.%s", at, f->name);
  if (writer && !vl__rec_writes(f->writers, writer)) {
    snprintf(why, n, "'%s': written by %s, not %s (lib/measure/record_schema.def)", here,
             f->writers, writer);
    return false;
  }
  if (!has_type(v, f->jtype)) {
    snprintf(why, n, "'%s': not of JSON type %s (lib/measure/record_schema.def)", here,
             f->jtype_name);
    return false;
  }
  if (f->jtype == VL_RJ_O) return check_obj(v, f->part, writer, here, why, n);
  if (f->jtype != VL_RJ_AO) return true;
  size_t i;
  json_t *x;
  json_array_foreach(v, i, x) {
    char item[200];
    snprintf(item, sizeof item, "%s[%zu]", here, i);
    if (!check_obj(x, f->part, writer, item, why, n)) return false;
  }
  return true;
}

static bool check_obj(json_t *o, enum vl__rec_obj obj, const char *writer, const char *at,
                      char *why, size_t n) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    const struct vl__rec_field_row *f = field_of(obj, k);
    if (!f) {
      snprintf(why, n, "'%s.%s': not a field of %s (lib/measure/record_schema.def)", at, k,
               vl__rec_objs[obj].path);
      return false;
    }
    if (!check_member(v, f, writer, at, why, n)) return false;
  }
  for (int i = 0; i < VL_RF_N; i++) {
    const struct vl__rec_field_row *f = &vl__rec_fields[i];
    if (f->obj == obj && required(f, writer) && !json_object_get(o, f->name)) {
      snprintf(why, n, "'%s': no '%s', which %s always write%s (lib/measure/record_schema.def)", at,
               f->name, writer ? writer : f->writers, writer ? "s" : "");
      return false;
    }
  }
  return true;
}

bool vl__rec_check(json_t *event, const char *writer, char *why, size_t why_len) {
  const char *type = json_string_value(json_object_get(event, "type"));
  if (!type) {
    snprintf(why, why_len, "not an event: no string 'type'");
    return false;
  }
  enum vl__rec_obj obj = VL_RO__;
  for (int i = 0; i < VL_RO_N; i++)
    if (strcmp(vl__rec_objs[i].path, type) == 0) obj = (enum vl__rec_obj)i;
  if (obj == VL_RO__) {
    snprintf(why, why_len, "'%.60s': not an event type of lib/measure/record_schema.def", type);
    return false;
  }
  if (!writer) writer = json_string_value(json_object_get(event, "writer"));
  if (!writer && !strchr(vl__rec_objs[obj].writers, ',')) writer = vl__rec_objs[obj].writers;
  return check_obj(event, obj, writer, type, why, why_len);
}
