/* libFuzzer harness: the run record reader, its summary, the probe's layer
 * (analysis, ladder, comparison with an estimate), doctor, and the text
 * report and doctor's words on what it reads. */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vramledger/doctor.h"
#include "vramledger/model.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_record r;
  struct vl_err err;
  if (vl_record_parse((const char *)data, size, &r, &err) != VL_OK) return 0;
  struct vl_run_summary s;
  struct vl_finding f[VL_MAX_FINDINGS];
  int n;
  vl_record_summarize(&r, &s, f, &n);
  struct vl_probe_layer *fw = malloc(sizeof *fw);
  struct vl_bill *b = calloc(1, sizeof *b);
  if (fw && b && vl_probe_analyze(&r, fw) == VL_OK) {
    vl_probe_ladder(fw, &s);
    struct vl_probe_compare c;
    vl_probe_compare(fw, b, &c);
    struct vl_diag d[VL_MAX_DIAGS];
    int nd = vl_doctor(&r, &s, fw, d);
    if (nd < 0 || nd > VL_MAX_DIAGS) abort();
    if (fw->has_ladder && fw->gap_fragmented > fw->gap_cached) abort();
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    if (sink) {
      struct vl_report_view v = {&r, &s, f, n, "fuzz", fw, NULL};
      (void)vl_render_report(sink, VL_REP_TEXT, &v);
      (void)vl_render_doctor(sink, false, "fuzz", d, nd, NULL);
    }
  }
  free(fw);
  free(b);
  vl_record_release(&r);
  return 0;
}
