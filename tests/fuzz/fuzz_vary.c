/* libFuzzer harness: the --vary option of `sensitivity` (the input, as a
 * string, with a uniform and a normal draw). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vramledger/sensitivity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct vl_vary *v) {
  if ((unsigned)v->var >= VL_VARY_COUNT || v->n_values < 0 || v->n_values > 8) __builtin_trap();
  if (v->dist != VL_DIST_DISCRETE && !(v->pct > 0 && v->pct < 1)) __builtin_trap();
  if (v->dist == VL_DIST_DISCRETE && !v->n_values) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char s[2048];
  if (size >= sizeof s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  struct vl_vary v;
  struct vl_err err;
  if (vl_vary_parse(s, false, &v, &err) == VL_OK) {
    check(&v);
    /* no value dropped: none past the 8th, none after an empty one, none cut */
    if (v.dist == VL_DIST_DISCRETE && (strlen(s) >= 256 || strstr(s, ",,"))) __builtin_trap();
  }
  if (vl_vary_parse(s, true, &v, &err) == VL_OK) check(&v);
  return 0;
}
