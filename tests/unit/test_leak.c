/* lib/measure/leak.c: one leak rule for report and doctor. The record
 * where report said "[leak] ... 1024.0 MiB/s" and doctor --fail-on leak
 * passed (NVML samples only: tests/data/records/sample.jsonl) is now a
 * leak to both; on every record the tests carry, report's finding and
 * doctor's VL-D004 agree with the rule. */
#include <dirent.h>

#include "testutil.h"
#include "vramledger/doctor.h"
#include "vramledger/leak.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

struct loaded {
  struct vl_record r;
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf;
  struct vl_probe_layer fw;
};

static bool load(const char *rel, struct loaded *x) {
  size_t len = 0;
  char *text = tu_read(rel, &len);
  assert_non_null(text);
  struct vl_err err = {""};
  vl_status st = vl_record_parse(text, len, &x->r, &err);
  free(text);
  if (st != VL_OK) return false; /* a damaged record the reader refuses */
  vl_record_summarize(&x->r, &x->s, x->f, &x->nf);
  assert_int_equal(vl_probe_analyze(&x->r, &x->fw), VL_OK);
  vl_probe_ladder(&x->fw, &x->s);
  return true;
}

static bool report_says_leak(const struct loaded *x) {
  for (int i = 0; i < x->nf; i++)
    if (!strcmp(x->f[i].code, "leak")) return true;
  return false;
}

static const struct vl_diag *doctor_leak(const struct loaded *x, struct vl_diag *d) {
  int n = vl_doctor(&x->r, &x->s, &x->fw, d);
  for (int i = 0; i < n; i++)
    if (d[i].kind == VL_D_LEAK) return &d[i];
  return NULL;
}

static void nvml_only_leak(void **state) {
  (void)state;
  struct loaded *x = malloc(sizeof *x);
  assert_true(load("tests/data/records/sample.jsonl", x));
  assert_false(x->fw.present);
  assert_true(report_says_leak(x));
  struct vl_leak l;
  assert_true(vl_leak_judge(&x->r, x->s.peak_process_bytes, &x->fw, &l));
  assert_true(l.system && !l.framework && !l.probed);
  /* 0.05 GiB per 100 ms on each of two GPUs: 1024 MiB/s, as report says */
  assert_true(fabs(l.floor_bytes_per_s - 1024 * MiB) < 0.03 * 1024 * MiB);
  assert_true(l.floor_bytes_per_s == x->s.leak_bytes_per_s);
  assert_true(l.floor_grown_bytes > 0.05 * (double)x->s.peak_process_bytes);
  struct vl_diag d[VL_MAX_DIAGS];
  const struct vl_diag *leak = doctor_leak(x, d);
  assert_non_null(leak); /* was absent: doctor looked at the probe only */
  assert_int_equal(leak->severity, VL_SEV_ERROR);
  assert_true(leak->leak.system);
  /* a floor that rises less than 5 % of the peak is not a leak, to both */
  for (size_t i = 0; i < x->r.n_samples; i++)
    x->r.samples[i].tree_bytes += 200ull << 30; /* the same rise on a far larger job */
  vl_record_summarize(&x->r, &x->s, x->f, &x->nf);
  assert_false(report_says_leak(x));
  assert_false(vl_leak_judge(&x->r, x->s.peak_process_bytes, &x->fw, &l));
  assert_true(l.floor_grown_bytes > 0);
  assert_null(doctor_leak(x, d));
  vl_record_release(&x->r);
  free(x);
}

static void every_record_agrees(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/records", VL_SOURCE_DIR);
  DIR *dp = opendir(dir);
  assert_non_null(dp);
  struct loaded *x = malloc(sizeof *x);
  int seen = 0, leaks = 0;
  for (struct dirent *e; (e = readdir(dp));) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
    char rel[512];
    snprintf(rel, sizeof rel, "tests/data/records/%s", e->d_name);
    if (!load(rel, x)) continue;
    struct vl_leak l;
    bool judged = vl_leak_judge(&x->r, x->s.peak_process_bytes, &x->fw, &l);
    struct vl_diag d[VL_MAX_DIAGS];
    const struct vl_diag *leak = doctor_leak(x, d);
    if (report_says_leak(x) != l.system || (leak != NULL) != judged)
      fprintf(stderr, "%s: report %d, system %d, doctor %d, rule %d\n", e->d_name,
              report_says_leak(x), l.system, leak != NULL, judged);
    assert_true(report_says_leak(x) == l.system);
    assert_true(x->s.leak_bytes_per_s == l.floor_bytes_per_s);
    assert_true((leak != NULL) == judged);
    /* report's leak is always doctor's */
    if (report_says_leak(x)) assert_non_null(leak);
    seen++;
    leaks += judged;
    vl_record_release(&x->r);
  }
  closedir(dp);
  free(x);
  assert_true(seen >= 5);
  assert_true(leaks >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(nvml_only_leak),
                                     cmocka_unit_test(every_record_agrees)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
