/* lib/decide/audit.c: each clause of an audit against its tolerance: a
 * value at the tolerance passes, one past it fails, a side not known is
 * not judged. */
#include "testutil.h"
#include "vramledger/audit.h"
#include "vramledger/commitment.h"

/* tests/data/commitments/matches-sample-run.json: 2 x h200, a total of
 * 25,700,000,000 bytes, 5000 tokens/s, a budget of 0.00338889 GPU-hours */
static void load(struct vl_commitment *c) {
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/matches-sample-run.json", &len);
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, c, &err), VL_OK);
  free(text);
}

/* the run the commitment was written for: its card by memory, its count */
static struct vl_audit_run as_committed(const struct vl_commitment *c) {
  struct vl_audit_run r;
  memset(&r, 0, sizeof r);
  r.hw.count = (unsigned)c->gpus;
  r.hw.used = true;
  r.hw.memory_bytes = c->gpu_memory_bytes;
  r.peak_bytes = c->est_total_bytes;
  r.seconds = c->gpu_hours * 3600.0 / (double)c->gpus;
  return r;
}

static void tolerance_is_inclusive(void **state) {
  (void)state;
  struct vl_commitment c;
  load(&c);
  struct vl_audit_run r = as_committed(&c);
  struct vl_audit a;
  r.peak_bytes = c.est_total_bytes + c.est_total_bytes / 20; /* +5 % exactly */
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  assert_true(a.line[VL_AUDIT_PEAK].compared);
  assert_false(a.line[VL_AUDIT_PEAK].review);
  assert_int_equal(a.review, 0);
  r.peak_bytes += 1 << 20; /* past it */
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  assert_true(a.line[VL_AUDIT_PEAK].review);
  assert_int_equal(a.review, 1);
  /* a wider tolerance from the command line takes it back, and says so */
  vl_audit_compute(&c, &r, NULL, 0.10, true, 0, &a);
  assert_int_equal(a.review, 0);
  assert_true(a.tolerance_given);
  assert_true(a.tolerance > 0.099 && a.tolerance < 0.101);
}

static void only_a_shortfall_counts(void **state) {
  (void)state;
  struct vl_commitment c;
  load(&c);
  struct vl_audit_run r = as_committed(&c);
  struct vl_audit a;
  /* 8192 tokens a step (2 x 2048 x 1 x dp 2): a step of 8192 / 10000 s is
   * twice the SLA, no breach */
  r.step_s = 8192.0 / 10000.0;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  const struct vl_audit_clause *t = &a.line[VL_AUDIT_TOKENS_PER_S];
  assert_true(t->compared && !t->review);
  assert_false(a.tokens_from_probe);
  assert_true(t->off > 0.99 && t->off < 1.01);
  r.step_s = 8192.0 / 4700.0; /* 6 % short */
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  assert_true(t->review);
  /* the probe's tokens (per rank, times the ranks) win over the stamps */
  r.probe_tokens_per_s = 2600;
  r.probe_ranks = 2;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  assert_true(a.tokens_from_probe);
  assert_false(t->review);
  assert_true(t->measured > 5199 && t->measured < 5201);
}

static void unknown_sides_are_not_judged(void **state) {
  (void)state;
  struct vl_commitment c;
  load(&c);
  struct vl_audit_run r = as_committed(&c);
  struct vl_audit a;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  /* no probe, no stamps: parameters and tokens/s not compared, no review */
  assert_false(a.line[VL_AUDIT_PARAMS].compared);
  assert_false(a.line[VL_AUDIT_TOKENS_PER_S].compared);
  assert_false(a.line[VL_AUDIT_TOKENS_PER_S].measured_known);
  assert_true(a.line[VL_AUDIT_TOKENS_PER_S].committed_known);
  assert_int_equal(a.review, 0);
  assert_string_equal(a.want, "2 x h200");
  /* a record without memory samples measured nothing: review */
  r.peak_bytes = 0;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 0, &a);
  assert_false(a.line[VL_AUDIT_PEAK].measured_known);
  assert_true(a.line[VL_AUDIT_PEAK].review);
  /* other hardware is a finding whatever the numbers */
  r = as_committed(&c);
  r.hw.count = 1;
  vl_audit_compute(&c, &r, NULL, 0.05, false, 2.5, &a);
  assert_true(a.line[VL_AUDIT_GPUS].review);
  assert_int_equal(a.hours_gpus, 1); /* hours on the GPUs the run had */
  assert_true(a.cost_usd > 0 && a.committed_cost_usd > a.cost_usd);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(tolerance_is_inclusive),
                                     cmocka_unit_test(only_a_shortfall_counts),
                                     cmocka_unit_test(unknown_sides_are_not_judged)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
