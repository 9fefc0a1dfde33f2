#include <stdatomic.h>
#include <stdlib.h>

#include "vramledger/alloc.h"

/* Not thread-safe by design: failure injection is a single-threaded test
 * aid. The count is atomic: the sampler's and the HTTP server's threads
 * allocate too. */
static unsigned long fail_countdown;
static atomic_ulong calls;

static int should_fail(void) {
  atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
  if (fail_countdown == 0) return 0;
  if (--fail_countdown == 0) return 1;
  return 0;
}

void vl_alloc_fail_at(unsigned long fail_at) { fail_countdown = fail_at; }

unsigned long vl_alloc_calls(void) { return atomic_load_explicit(&calls, memory_order_relaxed); }

void *vl_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *vl_calloc(size_t count, size_t n) {
  return should_fail() ? NULL : calloc(count ? count : 1, n ? n : 1);
}

void *vl_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }

void vl_free(void *p) { free(p); }
