/* trace --gpu's step time (src/trace_time.c). */
#ifndef VRAMLEDGER_SRC_TRACE_TIME_H
#define VRAMLEDGER_SRC_TRACE_TIME_H
#include <stddef.h>

#include "vramledger/steptime.h"

/*! The ops of trace (the file) priced on card gpu (a catalog name; NULL:
 * none given), into *out; *ops the ops the trace holds in its last step
 * (0: none, a trace written before the tracer counted them). name gets
 * the card's name as the catalog spells it. A card not in the catalog is
 * an error said on stderr; a trace without ops a note. @return 0 when
 * *out was priced, 1 when not (no --gpu, no ops), or an exit code. */
int trace_time(const char *trace, const char *gpu, struct vl_trace_time *out, char *name,
               size_t name_n, double *ops);

#endif
