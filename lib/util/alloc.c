#include <stdlib.h>

#include "vramledger/alloc.h"

/* Not thread-safe by design: failure injection is a single-threaded test aid. */
static unsigned long fail_countdown;

static int should_fail(void) {
  if (fail_countdown == 0) return 0;
  if (--fail_countdown == 0) return 1;
  return 0;
}

void vl_alloc_fail_at(unsigned long fail_at) { fail_countdown = fail_at; }

void *vl_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *vl_calloc(size_t count, size_t n) {
  return should_fail() ? NULL : calloc(count ? count : 1, n ? n : 1);
}

void *vl_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }

void vl_free(void *p) { free(p); }
