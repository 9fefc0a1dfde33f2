/* sweep's grid (--grid NAME=V1,V2,...) and the placeholders {NAME} of its
 * command: pure, so that the fuzz harness reads what sweep reads. */
#ifndef VRAMLEDGER_GRID_H
#define VRAMLEDGER_GRID_H
#include <stdbool.h>
#include <stddef.h>

#include "vramledger/status.h"

#define GRID_MAX_VARS 6
#define GRID_MAX_VALUES 32

struct grid {
  char name[GRID_MAX_VARS][24];
  char value[GRID_MAX_VARS][GRID_MAX_VALUES][256]; /* a longer value is refused */
  int n_values[GRID_MAX_VARS];
  int n;
};

/*! Add the variable of spec ("batch=1,2,4") to *g (zeroed before the
 * first). @return VL_OK, or VL_EINVAL saying what is wrong (g is then
 * not to be used). */
vl_status grid_add(struct grid *g, const char *spec, struct vl_err *err) VL_MUST_USE;

/*! Replace each {name} in s with the value at[k] of that variable into
 * out (n > 0 bytes, always a string), setting used[k]. @return 0; -1 when
 * a placeholder is no variable (out then holds the placeholder); -2 when
 * out is too small (out holds what fitted). The longest result is at each
 * variable's longest value (grid_longest). */
int grid_substitute(const char *s, const struct grid *g, const int *at, char *out, size_t n,
                    bool *used);

/*! at[k] = the index of variable k's longest value (the first of them). */
void grid_longest(const struct grid *g, int *at);

#endif
