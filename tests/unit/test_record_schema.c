/* lib/measure/record_schema.c: the record's one schema (record_schema.def),
 * the check of an event against it, and docs/record.md's field tables,
 * generated from it here: the test fails when the page differs, and
 * VL_REGEN=1 rewrites the page's tables. */
#include "testutil.h"
#include <jansson.h>

#include "measure/record_schema.h"
#include "vramledger/record.h"

#define DOC "docs/record.md"
#define BEGIN "<!-- fields: generated from lib/measure/record_schema.def -->\n"
#define END "<!-- fields end -->\n"

/* a field's JSON type as the page says it; part: the object inside */
static void put_jtype(FILE *f, const struct vl__rec_field_row *r) {
  const char *part = r->part == VL_RO__ ? "" : vl__rec_objs[r->part].id;
  switch (r->jtype) {
  case VL_RJ_U: fputs("integer >= 0", f); break;
  case VL_RJ_I: fputs("integer", f); break;
  case VL_RJ_NUM: fputs("number", f); break;
  case VL_RJ_S: fputs("string", f); break;
  case VL_RJ_B: fputs("boolean", f); break;
  case VL_RJ_UN: fputs("integer >= 0 or null", f); break;
  case VL_RJ_AS: fputs("array of strings", f); break;
  case VL_RJ_AU: fputs("array of integers >= 0", f); break;
  case VL_RJ_AA: fputs("array of arrays", f); break;
  case VL_RJ_AO: fprintf(f, "array of objects (%s)", part); break;
  case VL_RJ_O: fprintf(f, "object (%s)", part); break;
  case VL_RJ_MAP: fputs("object of integers >= 0 by name", f); break;
  }
}

/* The page's tables, from the .def's rows: one an object. */
static char *tables(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  fputs(BEGIN, f);
  for (int o = 0; o < VL_RO_N; o++) {
    fprintf(f, "\n**%s** (`%s`; %s)\n\n", vl__rec_objs[o].id, vl__rec_objs[o].path,
            vl__rec_objs[o].writers);
    fputs("| field | JSON | unit | present | writers |\n|---|---|---|---|---|\n", f);
    for (int i = 0; i < VL_RF_N; i++) {
      const struct vl__rec_field_row *r = &vl__rec_fields[i];
      if ((int)r->obj != o) continue;
      fprintf(f, "| `%s` | ", r->name);
      put_jtype(f, r);
      fprintf(f, " | %s | %s | %s |\n", r->unit, r->required ? "always" : "some lines", r->writers);
    }
  }
  fputs("\n" END, f);
  fclose(f);
  return text;
}

static void doc_tables_are_the_schemas(void **state) {
  (void)state;
  size_t len = 0;
  char *doc = tu_read(DOC, &len), *want = tables();
  assert_non_null(doc);
  char *b = strstr(doc, BEGIN), *e = b ? strstr(b, END) : NULL;
  if (!b || !e) fail_msg("%s: no '%s' ... '%s' section for the generated tables", DOC, BEGIN, END);
  e += strlen(END);
  size_t have = (size_t)(e - b);
  bool same = have == strlen(want) && memcmp(b, want, have) == 0;
  const char *regen = getenv("VL_REGEN");
  if (!same && regen && strcmp(regen, "1") == 0) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", VL_SOURCE_DIR, DOC);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(doc, 1, (size_t)(b - doc), f);
    fputs(want, f);
    fputs(e, f);
    assert_int_equal(fclose(f), 0);
    same = true;
  }
  if (!same)
    fail_msg("%s: its field tables differ from lib/measure/record_schema.def; rerun this test "
             "with VL_REGEN=1 to write them, and say in the prose what a new field means",
             DOC);
  free(doc);
  free(want);
}

/* Every field is said in the prose too (`name` outside the tables): a
 * field added to the table without a word on what it means fails here. */
static void doc_prose_names_every_field(void **state) {
  (void)state;
  size_t len = 0;
  char *doc = tu_read(DOC, &len);
  assert_non_null(doc);
  char *b = strstr(doc, BEGIN);
  assert_non_null(b);
  *b = '\0';
  int missing = 0;
  for (int i = 0; i < VL_RF_N; i++) {
    char quoted[80];
    snprintf(quoted, sizeof quoted, "`%s`", vl__rec_fields[i].name);
    if (!strstr(doc, quoted)) {
      fprintf(stderr, "%s: the field %s of %s is in no sentence\n", DOC, quoted,
              vl__rec_objs[vl__rec_fields[i].obj].path);
      missing++;
    }
  }
  assert_int_equal(missing, 0);
  free(doc);
}

/* The bill's parts, which lib/measure/probe_events.c reads by
 * vl_bill_part_names (a public list), are the table's bill rows. */
static void bill_names_are_the_tables(void **state) {
  (void)state;
  int k = 0;
  for (int i = 0; i < VL_RF_N; i++) {
    if (vl__rec_fields[i].obj != VL_RO_bill) continue;
    assert_true(k < VL_BILL_N);
    assert_string_equal(vl_bill_part_names[k++], vl__rec_fields[i].name);
  }
  assert_int_equal(k, VL_BILL_N);
}

/* VL_RF and VL_RT spell the table's names: an event's path is its id,
 * each row's name the name VL_RF gives */
static void names_are_the_tables(void **state) {
  (void)state;
  for (int o = 0; o < VL_RO_N; o++)
    if (!strchr(vl__rec_objs[o].path, '.'))
      assert_string_equal(vl__rec_objs[o].path, vl__rec_objs[o].id);
  assert_string_equal(VL_RT(sample), vl__rec_objs[VL_RO_sample].path);
  assert_string_equal(VL_RF(sample, tree_bytes), vl__rec_fields[VL_RF_sample__tree_bytes].name);
  assert_string_equal(VL_RF(step_modules, saved_bytes),
                      vl__rec_fields[VL_RF_step_modules__saved_bytes].name);
}

static bool check(const char *line, const char *writer, char *why, size_t n) {
  json_error_t jerr;
  json_t *o = json_loads(line, 0, &jerr);
  assert_non_null(o);
  bool ok = vl__rec_check(o, writer, why, n);
  json_decref(o);
  return ok;
}

static void conforms(const char *line, const char *writer) {
  char why[256] = "";
  if (!check(line, writer, why, sizeof why)) fail_msg("%s: %s", line, why);
}

static void refused(const char *line, const char *writer, const char *expect) {
  char why[256] = "";
  assert_false(check(line, writer, why, sizeof why));
  if (!strstr(why, expect)) fail_msg("%s: '%s' does not say '%s'", line, why, expect);
}

static void events_checked(void **state) {
  (void)state;
  conforms("{\"type\":\"mark\",\"t_ns\":5,\"pid\":7,\"name\":\"a\"}", NULL);
  conforms("{\"type\":\"sample\",\"t_ns\":5,\"tree_bytes\":1,\"tree_procs\":1,\"other_bytes\":0,"
           "\"cuda_alloc_bytes\":0,\"gpus\":[{\"i\":0,\"used\":1,\"tree\":1}],\"procs\":[]}",
           NULL);
  conforms("{\"type\":\"gap\",\"t_ns\":5,\"lost_bytes\":0,\"error\":\"x\",\"pid\":1,"
           "\"writer\":\"probe\"}",
           NULL);
  conforms("{\"type\":\"phase\",\"t_ns\":5,\"pid\":1,\"rank\":0,\"step\":1,\"phase\":\"idle\","
           "\"t0_ns\":1,\"bill\":{\"parameters\":1,\"gradients\":0,\"optimizer_states\":0,"
           "\"activations\":null,\"autocast_weights\":0,\"outputs\":0,\"comm_buffers\":0}}",
           NULL);
  refused("{\"type\":\"mark\",\"t_ns\":5,\"pid\":7}", NULL, "no 'name'");
  refused("{\"type\":\"mark\",\"t_ns\":5,\"pid\":-7,\"name\":\"a\"}", NULL,
          "'mark.pid': not of JSON type U");
  refused("{\"type\":\"mark\",\"t_ns\":5,\"pid\":7,\"name\":\"a\",\"nmae\":1}", NULL,
          "'mark.nmae': not a field of mark");
  refused("{\"type\":\"sample\",\"t_ns\":5,\"tree_bytes\":1,\"tree_procs\":1,\"other_bytes\":0,"
          "\"cuda_alloc_bytes\":0,\"gpus\":[{\"i\":0,\"used\":1}]}",
          NULL, "'sample.gpus[0]': no 'tree'");
  refused("{\"type\":\"gap\",\"t_ns\":5,\"lost_bytes\":0,\"error\":\"x\"}", "probe", "no 'pid'");
  refused("{\"type\":\"meta\",\"t_ns\":5,\"driver\":\"1\"}", "probe",
          "'meta.driver': written by run, not probe");
  refused("{\"type\":\"spam\",\"t_ns\":5}", NULL, "not an event type");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(doc_tables_are_the_schemas),
      cmocka_unit_test(doc_prose_names_every_field),
      cmocka_unit_test(bill_names_are_the_tables),
      cmocka_unit_test(names_are_the_tables),
      cmocka_unit_test(events_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
