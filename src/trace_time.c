/* trace --gpu: the traced step's ops priced on the card, as estimate
 * prices its own (lib/decide/steptrace.c; docs/cmd/trace.md, "Step
 * time"). */
#include "trace_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/catalog.h"

/* ops of the last step the trace counted ("# op STEP PHASE COUNT ...") */
static double step_ops(const char *text, size_t len) {
  double n = 0;
  unsigned long long last = 0;
  for (const char *s = text, *lim = text + len; s < lim;) {
    const char *e = memchr(s, '\n', (size_t)(lim - s));
    if (!e) e = lim;
    unsigned long long st;
    double c;
    char ph[16];
    if (e - s > 5 && !memcmp(s, "# op ", 5) && sscanf(s + 5, "%llu %15s %lf", &st, ph, &c) == 3) {
      if (st > last) last = st, n = 0;
      if (st == last) n += c;
    }
    s = e + 1;
  }
  return n;
}

int trace_time(const char *trace, const char *gpu, struct vl_trace_time *out, char *name,
               size_t name_n, double *ops) {
  *ops = 0;
  size_t len = 0;
  char *text = cli_read_file_quiet(trace, &len);
  if (!text) return 1;
  *ops = step_ops(text, len);
  if (!gpu) {
    vl_free(text);
    return 1;
  }
  struct est e;
  est_init(&e);
  e.gpu = gpu;
  struct vl_catalog cat;
  const struct vl_gpu *g;
  int rc = est_gpu(&e, &cat, &g);
  if (rc) {
    vl_free(text);
    return rc;
  }
  snprintf(name, name_n, "%s", g->label[0] ? g->label : g->name);
  struct vl_err err = {""};
  vl_status st = vl_trace_step_time(text, len, g, out, &err);
  vl_free(text);
  vl_catalog_release(&cat);
  if (st != VL_OK) {
    fprintf(stderr, "vramledger: note: no step time: %s: %s\n", trace, err.msg);
    return 1;
  }
  return 0;
}
