/* Helpers for the unit and reference tests. */
#ifndef VRAMLEDGER_TESTUTIL_H
#define VRAMLEDGER_TESTUTIL_H
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vramledger/alloc.h"
#include "vramledger/arch.h"
#include "vramledger/model.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

static inline char *tu_read(const char *rel, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", VL_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  buf[got] = '\0';
  *len = got;
  return buf;
}

/* Load a config (path relative to the source tree) or fail the test. */
static inline void tu_arch(const char *rel, struct vl_arch *a) {
  size_t len = 0;
  char *text = tu_read(rel, &len);
  assert_non_null(text);
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(text, len, a, &err);
  if (s != VL_OK) fprintf(stderr, "%s: %s\n", rel, err.msg);
  assert_int_equal(s, VL_OK);
  free(text);
}

static inline void tu_arch_text(const char *text, struct vl_arch *a) {
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(text, strlen(text), a, &err);
  if (s != VL_OK) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(s, VL_OK);
}

static inline void tu_bill(const struct vl_arch *a, const struct vl_job *j, struct vl_bill *b) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_err err = {""};
  vl_status s = vl_bill_compute(a, j, &ov, b, &err);
  if (s != VL_OK) fprintf(stderr, "bill: %s\n", err.msg);
  assert_int_equal(s, VL_OK);
}

/* |got - want| <= tol * |want|, printing the difference (llm.c style). */
#define assert_close(got, want, tol, what)                                                         \
  do {                                                                                             \
    double g_ = (double)(got), w_ = (double)(want);                                                \
    double d_ = w_ != 0 ? fabs(g_ - w_) / fabs(w_) : fabs(g_);                                     \
    printf("  %-58s got %.6g want %.6g diff %.3f%% (tol %.3f%%)\n", what, g_, w_, d_ * 100,        \
           (double)(double)(tol)*100);                                                             \
    assert_true(d_ <= (tol));                                                                      \
  } while (0)

/* The bundled GPU catalog (data/gpus.json), parsed; 0 or -1 (a cmocka
 * group setup's answer). Release with vl_catalog_release. */
#include "vramledger/catalog.h"
static inline int tu_catalog(struct vl_catalog *cat) {
  size_t len = 0;
  char *text = tu_read("data/gpus.json", &len);
  struct vl_err err = {""};
  vl_status s = text ? vl_catalog_parse(text, len, cat, &err) : VL_EIO;
  free(text);
  return s == VL_OK ? 0 : -1;
}

#endif
