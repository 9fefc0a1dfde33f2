/* sweep's grid: see grid.h. */
#include "grid.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static vl_status fail(struct vl_err *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return VL_EINVAL;
}

vl_status grid_add(struct grid *g, const char *spec, struct vl_err *err) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof g->name[0] || g->n == GRID_MAX_VARS)
    return fail(err, "expected NAME=V1,V2,... (at most %d variables)", GRID_MAX_VARS);
  int k = g->n++;
  snprintf(g->name[k], sizeof g->name[k], "%.*s", (int)(eq - spec), spec);
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", eq + 1);
  for (char *t = buf, *next; t; t = next) {
    next = strchr(t, ',');
    if (next) *next++ = '\0';
    if (!*t || g->n_values[k] == GRID_MAX_VALUES)
      return fail(err, "give 1 to %d non-empty values", GRID_MAX_VALUES);
    snprintf(g->value[k][g->n_values[k]++], 32, "%.31s", t);
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
      if (w < 0 || (size_t)w >= n - o) return -1;
      o += (size_t)w;
      p = close + 1;
      continue;
    }
    if (o + 1 >= n) return -1;
    out[o++] = *p++;
  }
  out[o] = '\0';
  return 0;
}
