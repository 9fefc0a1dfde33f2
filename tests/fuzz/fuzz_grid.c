/* libFuzzer harness: sweep's --grid option (each line but the last) and
 * the {NAME} placeholders of its command (the last line), substituted at
 * the first and the last value of every variable, into a large and a small
 * buffer. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char text[8192];
  if (size >= sizeof text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  struct grid g;
  memset(&g, 0, sizeof g);
  struct vl_err err;
  char *line = text, *nl;
  while ((nl = strchr(line, '\n'))) {
    *nl = '\0';
    if (grid_add(&g, line, &err) != VL_OK) return 0;
    line = nl + 1;
  }
  if (g.n < 0 || g.n > GRID_MAX_VARS) __builtin_trap();
  int first[GRID_MAX_VARS] = {0}, last[GRID_MAX_VARS] = {0};
  for (int k = 0; k < g.n; k++) {
    if (g.n_values[k] < 1 || g.n_values[k] > GRID_MAX_VALUES) __builtin_trap();
    last[k] = g.n_values[k] - 1;
  }
  static char out[4096];
  char small[16];
  bool used[GRID_MAX_VARS] = {false};
  if (grid_substitute(line, &g, first, out, sizeof out, used) == 0 && strlen(out) >= sizeof out)
    __builtin_trap();
  (void)grid_substitute(line, &g, last, out, sizeof out, used);
  if (grid_substitute(line, &g, last, small, sizeof small, used) == 0 &&
      strlen(small) >= sizeof small)
    __builtin_trap();
  return 0;
}
