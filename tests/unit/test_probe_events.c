/* lib/measure/probe_events.c: the probe's events of a run record (what
 * python/vramledger/probe.py writes) read into a record with one H200 of
 * 150,754,820,096 bytes (tests/data/records/h200-gpt2-probe.jsonl's meta):
 * each event's fields, an unsampled step's phases as intervals, a PyTorch
 * counter past the card skipped as damaged with its message, strings
 * cleaned of control characters, the probes capped, notes passed on. */
#include "testutil.h"
#include "measure/probe_events.h"

#include <jansson.h>

#define H200 150754820096ull

static struct vl_record *record(void) {
  struct vl_record *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->n_gpus = 1;
  r->gpus[0].index = 0;
  snprintf(r->gpus[0].name, sizeof r->gpus[0].name, "NVIDIA H200");
  r->gpus[0].total_bytes = H200;
  return r;
}

/* one event line into r; its status, and whether the probe took it */
static vl_status event(struct vl_record *r, struct vl__probe_caps *caps, const char *line,
                       bool *handled) {
  json_error_t je;
  json_t *o = json_loads(line, 0, &je);
  assert_non_null(o);
  struct vl_err err = {""};
  vl_status s =
      vl__probe_event(o, json_string_value(json_object_get(o, "type")), r, caps, 7, &err, handled);
  json_decref(o);
  return s;
}

static void events_into_the_record(void **state) {
  (void)state;
  struct vl_record *r = record();
  struct vl__probe_caps caps = {0};
  bool h;
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"probe\",\"pid\":42,\"rank\":1,\"world_size\":2,"
                         "\"cuda\":true,\"torch\":\"2.11.0\"}",
                         &h),
                   VL_OK);
  assert_true(h);
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"device\",\"pid\":42,\"name\":\"NVIDIA H200\","
                         "\"capability\":\"9.0\",\"cublas_workspace_bytes\":33554432}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_probes, 1);
  assert_int_equal(r->probes[0].pid, 42);
  assert_int_equal(r->probes[0].rank, 1);
  assert_int_equal(r->probes[0].world_size, 2);
  assert_string_equal(r->probes[0].torch, "2.11.0");
  assert_string_equal(r->probes[0].capability, "9.0");
  assert_int_equal(r->probes[0].cublas_workspace_bytes, 32u << 20);
  /* a phase with its counters and bill (activations null: not tracked) */
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"phase\",\"pid\":42,\"step\":3,\"phase\":\"backward\","
                         "\"t0_ns\":100,\"t_ns\":250,\"allocated\":5000,\"reserved\":8192,"
                         "\"peak_allocated\":6000,\"bill\":{\"parameters\":1000,"
                         "\"activations\":null}}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_phases, 1);
  const struct vl_rec_phase *p = &r->phases[0];
  assert_string_equal(p->phase, "backward");
  assert_int_equal(p->step, 3);
  assert_int_equal(p->t0_ns, 100);
  assert_int_equal(p->t_ns, 250);
  assert_true(p->has_alloc);
  assert_false(p->has_requested);
  assert_int_equal(p->peak_allocated, 6000);
  assert_true(p->has_bill);
  assert_false(p->acts_known);
  assert_int_equal(p->bill[0], 1000); /* vl_bill_part_names[0]: parameters */
  /* an unsampled step: its phases as intervals (a malformed one skipped),
   * a name's escape character cleaned */
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"step\",\"pid\":42,\"rank\":1,\"step\":4,\"time_ns\":9000,"
                         "\"tokens\":2048,\"phases\":[[\"fwd\\u001b[31m\",10,20],[\"bwd\",20,45],"
                         "[\"bad\",\"x\",1]],\"modules\":[{\"name\":\"model.h.0\","
                         "\"saved_bytes\":77}]}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_steps, 1);
  assert_int_equal(r->steps[0].tokens, 2048);
  assert_int_equal(r->steps[0].n_modules, 1);
  assert_string_equal(r->steps[0].modules[0].name, "model.h.0");
  assert_int_equal(r->steps[0].modules[0].saved_bytes, 77);
  assert_int_equal(r->n_phases, 3);
  assert_string_equal(r->phases[1].phase, "fwd?[31m");
  assert_int_equal(r->phases[1].step, 4);
  assert_int_equal(r->phases[1].rank, 1);
  assert_int_equal(r->phases[2].t0_ns, 20);
  assert_int_equal(r->phases[2].t_ns, 45);
  /* an out-of-memory event */
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"oom\",\"pid\":42,\"step\":5,\"phase\":\"forward\","
                         "\"request_bytes\":1073741824,\"device_free_bytes\":1048576,"
                         "\"snapshot\":\"oom.pickle\"}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_ooms, 1);
  assert_int_equal(r->ooms[0].request_bytes, 1u << 30);
  assert_string_equal(r->ooms[0].snapshot, "oom.pickle");
  assert_false(r->ooms[0].has_bill);
  /* notes go on to record.c; the first "probe stopped" one is kept */
  assert_int_equal(event(r, &caps, "{\"type\":\"note\",\"text\":\"probe stopped: disk full\"}", &h),
                   VL_OK);
  assert_false(h);
  assert_int_equal(event(r, &caps, "{\"type\":\"note\",\"text\":\"probe stopped: again\"}", &h),
                   VL_OK);
  assert_string_equal(r->probe_note, "probe stopped: disk full");
  assert_int_equal(event(r, &caps, "{\"type\":\"sample\"}", &h), VL_OK);
  assert_false(h);
  assert_int_equal(r->implausible, 0);
  vl__probe_release(r);
  assert_null(r->phases);
  free(r);
}

/* a counter past the card is damaged data: skipped, counted, said once */
static void past_the_card_is_skipped(void **state) {
  (void)state;
  struct vl_record *r = record();
  struct vl__probe_caps caps = {0};
  bool h;
  assert_int_equal(event(r, &caps, "{\"type\":\"probe\",\"pid\":9,\"cuda\":true}", &h), VL_OK);
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"phase\",\"pid\":9,\"phase\":\"forward\","
                         "\"reserved\":9223372036854775807}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_phases, 0);
  assert_int_equal(r->implausible, 1);
  assert_int_equal(r->implausible_line, 7);
  assert_string_equal(r->implausible_what,
                      "a phase's PyTorch reserved bytes, 8.0 EiB (9223372036854775807 bytes), is "
                      "more than the 140.4 GiB of the card (NVML)");
  assert_int_equal(
      event(r, &caps, "{\"type\":\"step\",\"pid\":9,\"peak_allocated\":150754820097}", &h), VL_OK);
  assert_int_equal(r->n_steps, 0);
  assert_int_equal(r->implausible, 2); /* counted; the first message kept */
  assert_non_null(strstr(r->implausible_what, "phase's"));
  /* a process that never said it uses CUDA: its bytes are host memory, no bound */
  assert_int_equal(event(r, &caps,
                         "{\"type\":\"phase\",\"pid\":10,\"phase\":\"forward\","
                         "\"reserved\":9223372036854775807}",
                         &h),
                   VL_OK);
  assert_int_equal(r->n_phases, 1);
  vl__probe_release(r);
  free(r);
}

static void probes_are_capped(void **state) {
  (void)state;
  struct vl_record *r = record();
  struct vl__probe_caps caps = {0};
  bool h;
  char line[96];
  for (int pid = 1; pid <= VL_REC_MAX_PROBES + 3; pid++) {
    snprintf(line, sizeof line, "{\"type\":\"probe\",\"pid\":%d,\"rank\":%d}", pid, pid - 1);
    assert_int_equal(event(r, &caps, line, &h), VL_OK);
    assert_true(h);
  }
  assert_int_equal(r->n_probes, VL_REC_MAX_PROBES);
  assert_int_equal(r->probes[VL_REC_MAX_PROBES - 1].pid, VL_REC_MAX_PROBES);
  free(r);
}

static void clean_and_grow(void **state) {
  (void)state;
  char s[] = "a\tb\x1b[31m\x7f\xc2\x85\xc3\xa9\n";
  vl__rec_clean(s);
  /* C0 (tab, escape, newline), DEL and C1 (NEL as UTF-8) become '?'; é stays */
  assert_string_equal(s, "a?b?[31m???\xc3\xa9?");
  int *v = NULL;
  size_t cap = 0;
  assert_int_equal(vl__rec_grow((void **)&v, &cap, 0, sizeof *v, 100), 0);
  assert_int_equal(cap, 64); /* from 64 */
  assert_int_equal(vl__rec_grow((void **)&v, &cap, 10, sizeof *v, 100), 0);
  assert_int_equal(cap, 64); /* room left: unchanged */
  assert_int_equal(vl__rec_grow((void **)&v, &cap, 64, sizeof *v, 100), 0);
  assert_int_equal(cap, 100); /* doubled, to the cap */
  assert_int_equal(vl__rec_grow((void **)&v, &cap, 100, sizeof *v, 100), -1); /* past it */
  assert_int_equal(cap, 100);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(events_into_the_record),
      cmocka_unit_test(past_the_card_is_skipped),
      cmocka_unit_test(probes_are_capped),
      cmocka_unit_test(clean_and_grow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
