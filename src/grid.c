/* sweep's grid: see grid.h. */
#include "grid.h"

#include <stdio.h>
#include <string.h>

#include "util/internal.h" /* vl__fail */

vl_status grid_add(struct grid *g, const char *spec, struct vl_err *err) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof g->name[0] || g->n == GRID_MAX_VARS)
    return vl__fail(err, VL_EINVAL, "expected NAME=V1,V2,... (at most %d variables)",
                    GRID_MAX_VARS);
  int k = g->n++;
  snprintf(g->name[k], sizeof g->name[k], "%.*s", (int)(eq - spec), spec);
  for (const char *t = eq + 1;;) {
    const char *comma = strchr(t, ',');
    size_t len = comma ? (size_t)(comma - t) : strlen(t);
    if (!len || g->n_values[k] == GRID_MAX_VALUES)
      return vl__fail(err, VL_EINVAL, "give 1 to %d non-empty values", GRID_MAX_VALUES);
    if (len >= sizeof g->value[k][0]) /* never cut: a cut path would run another job */
      return vl__fail(err, VL_EINVAL, "a value of at most %zu bytes, not '%.*s...' (%zu bytes)",
                      sizeof g->value[k][0] - 1, 24, t, len);
    memcpy(g->value[k][g->n_values[k]], t, len);
    g->value[k][g->n_values[k]++][len] = '\0';
    if (!comma) break;
    t = comma + 1;
  }
  return VL_OK;
}

int grid_substitute(const char *s, const struct grid *g, const int *at, char *out, size_t n,
                    bool *used) {
  size_t o = 0;
  for (const char *p = s; *p;) {
    if (*p == '{') {
      const char *close = strchr(p, '}');
      int k = -1;
      for (int i = 0; close && i < g->n; i++)
        if ((size_t)(close - p - 1) == strlen(g->name[i]) &&
            !strncmp(p + 1, g->name[i], strlen(g->name[i])))
          k = i;
      if (k < 0) {
        snprintf(out, n, "%.*s", close ? (int)(close - p + 1) : 1, p);
        return -1;
      }
      used[k] = true;
      int w = snprintf(out + o, n - o, "%s", g->value[k][at[k]]);
      if (w < 0 || (size_t)w >= n - o) return -2; /* cut, and a string */
      o += (size_t)w;
      p = close + 1;
      continue;
    }
    if (o + 1 >= n) {
      out[o] = '\0';
      return -2;
    }
    out[o++] = *p++;
  }
  out[o] = '\0';
  return 0;
}

void grid_longest(const struct grid *g, int *at) {
  for (int k = 0; k < g->n; k++) {
    at[k] = 0;
    for (int i = 1; i < g->n_values[k]; i++)
      if (strlen(g->value[k][i]) > strlen(g->value[k][at[k]])) at[k] = i;
  }
}
