/* lib/render/doctor.c: doctor's findings in words (evidence, a fix) and as
 * JSON with their stable ids and the --fail-on gate's verdict. */
#include <jansson.h>

#include "testutil.h"
#include "vramledger/doctor.h"
#include "vramledger/render.h"

static char *render(bool json, const struct vl_diag *d, int n, const struct vl_doctor_verdict *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(vl_render_doctor(f, json, "run-1/record.jsonl", d, n, v), 0);
  fclose(f);
  return buf;
}

static void findings(struct vl_diag d[2]) {
  memset(d, 0, 2 * sizeof *d);
  d[0] = (struct vl_diag){.kind = VL_D_EXTRA_CONTEXTS,
                          .severity = VL_SEV_WARN,
                          .a = 3,
                          .b = 1,
                          .c = 3 * 512.0 * 1024 * 1024};
  d[1] = (struct vl_diag){.kind = VL_D_OOM,
                          .severity = VL_SEV_ERROR,
                          .a = 2.0 * 1024 * 1024 * 1024,
                          .b = 0.5 * 1024 * 1024 * 1024,
                          .c = 7};
  snprintf(d[1].text, sizeof d[1].text, "backward");
}

static void has(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("missing:\n%s\nin:\n%s", part, text);
}

/* each finding: its id, severity and code, title, evidence and fix */
static void text(void **state) {
  (void)state;
  struct vl_diag d[2];
  findings(d);
  char *t = render(false, d, 2, NULL);
  has(t, "doctor: run-1/record.jsonl\n\n  VL-D001 warn [extra-contexts] more processes hold GPU "
         "memory than run the model\n    evidence: 3 processes of the job held GPU memory at once, "
         "1 with the model; each CUDA context costs about 512 MiB\n    fix: keep CUDA out of "
         "DataLoader workers");
  has(t, "\n  VL-D009 error [out-of-memory] the job ran out of memory\n    evidence: step 7, in "
         "backward: asked for 2.00 GiB with 0.50 GiB free\n    fix: ");
  free(t);
  t = render(false, d, 0, NULL);
  assert_string_equal(t, "doctor: run-1/record.jsonl\n  nothing wrong found\n");
  free(t);
}

/* a record's own words (a phase) cannot break a line of the text or the
 * JSON: control characters are escaped in the one, encoded in the other */
static void hostile_phase(void **state) {
  (void)state;
  struct vl_diag d[2];
  findings(d);
  snprintf(d[1].text, sizeof d[1].text, "back\nward\"\x1b[2J");
  char *t = render(false, d, 2, NULL);
  const char *ev = strstr(t, "evidence: step 7");
  assert_non_null(ev);
  const char *eol = strchr(ev, '\n');
  assert_non_null(eol);
  const char *end = strstr(ev, " free");
  assert_true(end && end < eol); /* one line to its end */
  assert_null(strchr(t, '\x1b'));
  free(t);
  t = render(true, d, 2, NULL);
  json_error_t e;
  json_t *r = json_loads(t, 0, &e);
  if (!r) fail_msg("not JSON: %s\n%s", e.text, t);
  const char *evj = json_string_value(
      json_object_get(json_array_get(json_object_get(r, "findings"), 1), "evidence"));
  assert_non_null(evj);
  assert_non_null(strstr(evj, "in back\nward\"\x1b[2J: asked"));
  json_decref(r);
  free(t);
}

/* JSON: the stable ids; with a gate, the verdict and each finding's result */
static void json(void **state) {
  (void)state;
  struct vl_diag d[2];
  findings(d);
  struct vl_doctor_verdict v = {"out-of-memory", {false, true}, 1};
  char *t = render(true, d, 2, &v);
  json_error_t e;
  json_t *r = json_loads(t, 0, &e);
  if (!r) fail_msg("not JSON: %s\n%s", e.text, t);
  assert_string_equal(json_string_value(json_object_get(r, "schema")), "vramledger.doctor/1");
  assert_string_equal(json_string_value(json_object_get(r, "verdict")), "fail");
  assert_string_equal(json_string_value(json_object_get(r, "fail_on")), "out-of-memory");
  json_t *f = json_object_get(r, "findings");
  assert_int_equal(json_array_size(f), 2);
  static const char *const want[2][4] = {{"VL-D001", "extra-contexts", "warn", "pass"},
                                         {"VL-D009", "out-of-memory", "error", "fail"}};
  static const char *const keys[4] = {"id", "code", "severity", "result"};
  for (size_t i = 0; i < 2; i++)
    for (size_t k = 0; k < 4; k++)
      assert_string_equal(json_string_value(json_object_get(json_array_get(f, i), keys[k])),
                          want[i][k]);
  json_decref(r);
  free(t);
  /* no gate: the verdict is null */
  t = render(true, d, 2, NULL);
  r = json_loads(t, 0, &e);
  assert_non_null(r);
  assert_true(json_is_null(json_object_get(r, "verdict")));
  json_decref(r);
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(text),
      cmocka_unit_test(json),
      cmocka_unit_test(hostile_phase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
