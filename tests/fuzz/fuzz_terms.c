/* libFuzzer harness: the options of `fit` that are parsed against the
 * points: --terms (the first line) and --predict (each further line), on
 * fixed points of batch, seq and hidden; then the fit, its predictions and
 * the optimizer's terms (--by-phase). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vramledger/regress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char points[] = "batch,seq,hidden,peak_bytes\n"
                             "1,512,1024,1100000000\n"
                             "2,512,1024,1300000000\n"
                             "4,512,2048,1900000000\n"
                             "1,1024,2048,1500000000\n"
                             "2,1024,1024,2100000000\n"
                             "4,1024,4096,3700000000\n"
                             "1,2048,4096,2600000000\n"
                             "2,2048,2048,4200000000\n"
                             "4,2048,1024,8100000000\n"
                             "8,4096,4096,31000000000\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char text[4096];
  if (size >= sizeof text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  struct vl_points p;
  struct vl_err err;
  if (vl_points_parse(points, sizeof points - 1, NULL, 0, &p, &err) != VL_OK) __builtin_trap();
  char *line = text, *nl = strchr(line, '\n');
  if (nl) *nl = '\0';
  struct vl_term_spec t[VL_FIT_MAX_TERMS], to[VL_FIT_MAX_TERMS];
  size_t nt;
  struct vl_fit_result r;
  if (vl_terms_parse(line, &p, t, &nt, &err) == VL_OK) {
    /* nothing dropped: no term cut off the end, none after an empty one */
    if (strlen(line) >= 256 || strstr(line, ",,")) __builtin_trap();
    if (nt < 1 || nt > VL_FIT_MAX_TERMS) __builtin_trap();
    for (size_t k = 0; k < nt; k++)
      for (int f = 0; f < t[k].nf; f++)
        if (t[k].var[f] < 0 || (size_t)t[k].var[f] >= p.nvars) __builtin_trap();
    size_t nto = vl_terms_without_squares(t, nt, to);
    bool fitted = vl_fit_points(&p, t, nt, &r, &err) == VL_OK;
    while (nl) {
      line = nl + 1;
      if ((nl = strchr(line, '\n'))) *nl = '\0';
      struct vl_fit_prediction q;
      memset(&q, 0, sizeof q);
      bool read = vl_point_parse(line, &p, q.x, &err) == VL_OK;
      if (read && strlen(line) >= 256) __builtin_trap(); /* a cut number is another one */
      if (read && fitted) {
        vl_fit_predict_parts(&r, t, nt, &q);
        struct vl_fit_result ro;
        if (nto && vl_fit_points(&p, to, nto, &ro, &err) == VL_OK)
          (void)vl_fit_take_larger(&ro, to, nto, &q);
      }
    }
  }
  vl_points_release(&p);
  return 0;
}
