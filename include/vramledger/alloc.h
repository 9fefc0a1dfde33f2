/* vramledger: the one allocation hook. Every heap allocation of the library
 * goes through vl_malloc/vl_calloc/vl_realloc/vl_free so tests can fail the
 * N-th allocation (curl's torture tests). */
#ifndef VRAMLEDGER_ALLOC_H
#define VRAMLEDGER_ALLOC_H
#include <stddef.h>

void *vl_malloc(size_t n);
void *vl_calloc(size_t count, size_t n);
void *vl_realloc(void *p, size_t n);
void vl_free(void *p); /* accepts NULL */

/*! Make the fail_at-th allocation from now on (1-based) return NULL;
 * 0 turns failure injection off. For tests only. */
void vl_alloc_fail_at(unsigned long fail_at);
/*! How many allocations were asked for since the process started (the
 * failed ones too): a test counts a call's allocations once, then fails
 * each of them in turn. For tests only. */
unsigned long vl_alloc_calls(void);

#endif
