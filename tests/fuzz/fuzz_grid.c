/* libFuzzer harness: sweep's --grid option (each line but the last) and
 * the {NAME} placeholders of its command (the last line), substituted at
 * the first and the last value of every variable, into a large and a small
 * buffer. */
#include <stddef.h>
#include <stdio.h>
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
    /* nothing cut: the values, joined again, are the spec's */
    static char joined[8192];
    size_t o = 0;
    int k = g.n - 1;
    for (int i = 0; i < g.n_values[k]; i++)
      o += (size_t)snprintf(joined + o, sizeof joined - o, "%s%s", i ? "," : "", g.value[k][i]);
    if (strcmp(joined, strchr(line, '=') + 1) != 0) __builtin_trap();
    line = nl + 1;
  }
  if (g.n < 0 || g.n > GRID_MAX_VARS) __builtin_trap();
  int first[GRID_MAX_VARS] = {0}, last[GRID_MAX_VARS] = {0};
  for (int k = 0; k < g.n; k++) {
    if (g.n_values[k] < 1 || g.n_values[k] > GRID_MAX_VALUES) __builtin_trap();
    last[k] = g.n_values[k] - 1;
  }
  /* what sweep does with the words: the message on -1 prints out, a
   * point runs it, so out is a string whatever the result */
  static char out[4096];
  char small[16];
  bool used[GRID_MAX_VARS] = {false};
  memset(out, 'x', sizeof out);
  (void)grid_substitute(line, &g, first, out, sizeof out, used);
  if (!memchr(out, '\0', sizeof out)) __builtin_trap();
  memset(out, 'x', sizeof out);
  (void)grid_substitute(line, &g, last, out, sizeof out, used);
  if (!memchr(out, '\0', sizeof out)) __builtin_trap();
  memset(small, 'x', sizeof small);
  (void)grid_substitute(line, &g, last, small, sizeof small, used);
  if (!memchr(small, '\0', sizeof small)) __builtin_trap();
  return 0;
}
