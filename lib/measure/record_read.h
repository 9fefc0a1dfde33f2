/* Internal: the streaming record reader with its piece size, for tests and
 * the fuzz harness (vl_record_read reads in pieces of 1 MiB). */
#ifndef VRAMLEDGER_RECORD_READ_H
#define VRAMLEDGER_RECORD_READ_H
#include <stdbool.h>
#include <stddef.h>

#include "vramledger/record.h"

/* vl_record_read on an open descriptor, read piece bytes at a time (a
 * line longer than the buffer doubles it, up to VL_RECORD_MAX_LINE). The
 * descriptor stays open. */
vl_status vl__record_read_fd(int fd, size_t piece, struct vl_record *r, struct vl_err *err);

/* Sample lines read by the scanner of plain JSON (true, the default) or,
 * false, every line by jansson: for the fuzz harness, which compares the
 * two (lib/measure/record.c, "sample lines without a JSON tree"). */
extern bool vl__record_scan;

#endif
