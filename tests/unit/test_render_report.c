/* lib/render/report.c with the parts it calls (framework.c, report_trace.c,
 * html_run.c, run_words.c): a measured record, tests/data/records/
 * h200-gpt2-probe.jsonl (GPT-2 under amp-bf16 on an H200, the probe in
 * it), summarised and analysed as `report` does, rendered as JSON (the
 * peaks the summary's and the probe's, the samples and marks counted),
 * text and Markdown (the layers' rows in GiB), Chrome trace JSON (a counter
 * event per sample) and HTML (one closed page whose charts' JSON parses);
 * with an estimate beside it (report --estimate), each line's estimate,
 * measure and difference. */
#include "render_capture.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

static struct vl_record rec;
static struct vl_run_summary sum;
static struct vl_finding findings[VL_MAX_FINDINGS];
static int nf;
static struct vl_probe_layer fw;
static struct vl_report_view view;

static int setup(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/records/h200-gpt2-probe.jsonl", &len);
  struct vl_err err = {""};
  if (!text || vl_record_parse(text, len, &rec, &err) != VL_OK) return -1;
  free(text);
  vl_record_summarize(&rec, &sum, findings, &nf);
  if (vl_probe_analyze(&rec, &fw) != VL_OK) return -1;
  vl_probe_ladder(&fw, &sum);
  view = (struct vl_report_view){.rec = &rec,
                                 .sum = &sum,
                                 .findings = findings,
                                 .n_findings = nf,
                                 .source = "run.jsonl",
                                 .fw = &fw};
  return 0;
}

static int teardown(void **state) {
  (void)state;
  vl_record_release(&rec);
  return 0;
}

static void json_peaks_and_counts(void **state) {
  (void)state;
  assert_true(fw.present);
  assert_true(sum.peak_process_bytes > 0);
  char *text = NULL;
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_JSON, &view));
  json_t *root = rc_json(text);
  assert_string_equal(rc_str(root, "schema"), "vramledger.report/1");
  assert_string_equal(rc_str(root, "record"), "run.jsonl");
  assert_string_equal(rc_str(root, "host"), "vm");
  assert_int_equal(rc_num(root, "samples"), rec.n_samples);
  assert_int_equal(rc_num(root, "marks"), rec.n_marks);
  json_t *gpus = json_object_get(root, "gpus");
  assert_int_equal(json_array_size(gpus), 1);
  assert_string_equal(json_string_value(json_array_get(gpus, 0)), "NVIDIA H200");
  json_t *peak = json_object_get(root, "peak");
  assert_int_equal(rc_num(peak, "process_bytes"), sum.peak_process_bytes);
  /* the probe's peak beside NVML's */
  assert_true(json_is_true(json_object_get(root, "framework")));
  assert_int_equal(rc_num(peak, "allocated_bytes"), fw.peak_allocated);
  assert_int_equal(rc_num(peak, "reserved_bytes"), fw.peak_reserved);
  assert_true(fw.peak_allocated <= fw.peak_reserved);
  assert_int_equal(json_array_size(json_object_get(root, "findings")), (size_t)nf);
  json_decref(root);
  free(text);
}

static void text_and_markdown_rows(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_TEXT, &view));
  char row[128];
  snprintf(row, sizeof row, "  %-46s %8.2f GiB\n", "process memory (NVML, the job's processes)",
           (double)sum.peak_process_bytes / GiB);
  if (!strstr(text, row)) fail_msg("no '%s' in:\n%s", row, text);
  assert_non_null(strstr(text, "GPUs: 0 NVIDIA H200"));
  assert_non_null(strstr(text, "python3 bench/probe_job.py --model gpt2"));
  free(text);
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_MD, &view));
  assert_non_null(strstr(text, "| layer | peak GiB |\n|---|---:|\n"));
  snprintf(row, sizeof row, "| process memory (NVML, the job's processes) | %.2f |\n",
           (double)sum.peak_process_bytes / GiB);
  assert_non_null(strstr(text, row));
  free(text);
}

static void chrome_trace(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_TRACE, &view));
  json_t *root = rc_json(text);
  json_t *ev = json_object_get(root, "traceEvents");
  assert_true(json_is_array(ev));
  assert_string_equal(rc_str(root, "displayTimeUnit"), "ms");
  size_t counters = 0, phases = 0;
  for (size_t i = 0; i < json_array_size(ev); i++) {
    json_t *e = json_array_get(ev, i);
    const char *ph = rc_str(e, "ph");
    counters += !strcmp(ph, "C");
    phases += !strcmp(ph, "X");
    if (strcmp(ph, "M")) assert_true(json_is_number(json_object_get(e, "ts")));
  }
  /* a memory counter at every sample at least, and the probe's phases */
  assert_true(counters >= rec.n_samples);
  assert_true(phases > 0);
  json_decref(root);
  free(text);
}

static void html_page(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_HTML, &view));
  assert_int_equal(strncmp(text, "<!DOCTYPE html>", 15), 0);
  size_t n = strlen(text);
  assert_true(n > 20 && strstr(text + n - 20, "</html>"));
  int charts = 0;
  for (const char *s = text; (s = strstr(s, "class=\"vl-spec\">"));) {
    s += strlen("class=\"vl-spec\">");
    const char *end = strstr(s, "</script>");
    assert_non_null(end);
    char *js = strndup(s, (size_t)(end - s));
    json_decref(rc_json(js));
    free(js);
    charts++;
  }
  assert_true(charts >= 1);
  free(text);
}

/* report --estimate: GPT-2's bill for the probed job (batch and sequence
 * of no importance here) beside the probe's lines; each line's difference
 * is estimate - measured, as the JSON says */
static void against_an_estimate(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 4;
  j.seq = 512;
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  tu_bill(&a, &j, b);
  struct vl_probe_compare cmp;
  vl_probe_compare(&fw, b, &cmp);
  assert_true(cmp.present);
  /* the estimate's peak allocated is the bill's */
  assert_int_equal(cmp.estimate[VL_CMP_LINES - 1], b->peak_allocated_bytes);
  struct vl_report_view v = view;
  v.cmp = &cmp;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_JSON, &v));
  json_t *root = rc_json(text);
  json_t *c = json_object_get(root, "estimate_vs_measured");
  assert_true(json_is_object(c));
  json_t *pk = json_object_get(c, "peak_allocated_bytes");
  assert_int_equal(rc_num(pk, "estimate"), b->peak_allocated_bytes);
  assert_int_equal(rc_num(pk, "measured"), cmp.measured[VL_CMP_LINES - 1]);
  assert_int_equal(rc_num(pk, "difference"),
                   (double)b->peak_allocated_bytes - (double)cmp.measured[VL_CMP_LINES - 1]);
  json_t *par = json_object_get(c, "parameters");
  assert_int_equal(rc_num(par, "estimate"), cmp.estimate[0]);
  assert_int_equal(rc_num(par, "measured"), cmp.measured[0]);
  json_decref(root);
  free(text);
  /* the HTML's framework section says the probe's version and steps */
  RC_CAPTURE(text, vl_render_report(rc_f, VL_REP_HTML, &v));
  assert_non_null(strstr(text, "<h2>Framework layer (PyTorch probe)</h2>"));
  char want[96];
  snprintf(want, sizeof want, ", %u process%s with the probe, %u steps", fw.n_ranks,
           fw.n_ranks == 1 ? "" : "es", fw.n_steps);
  if (!strstr(text, want)) fail_msg("no '%s' in the page", want);
  free(text);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_peaks_and_counts), cmocka_unit_test(text_and_markdown_rows),
      cmocka_unit_test(chrome_trace),          cmocka_unit_test(html_page),
      cmocka_unit_test(against_an_estimate),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
