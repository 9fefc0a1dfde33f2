/* Does the record end inside a line? Shared by lib/measure/sampler.c
 * (vramledger run) and preload/preload.c (the interposer), the record's
 * two C writers; python/vramledger/probe.py reads it the same way.
 *
 * A line another writer had cut (a full disk, `ulimit -f`) leaves the file
 * ending inside it until someone closes it with a newline (docs/record.md,
 * "gap"). So, for a moment, does a line another writer is writing now: the
 * kernel copies a write into the page cache a page at a time and the size
 * grows with each page (mm/filemap.c, generic_perform_write), while other
 * writes to the file wait for it. The end is looked at again until the
 * size stands for VL_LINE_END_HOLD_NS: a write in flight moves it or ends
 * its line. One that stalls longer mid-copy (dirty-page throttling) is
 * taken for a cut: its line still goes out whole before ours, and readers
 * pass over the gap line that closed nothing (lib/measure/record.c). */
#ifndef VL_LINE_END_H
#define VL_LINE_END_H
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VL_LINE_END_HOLD_NS 1000000L /* 1 ms */
#define VL_LINE_END_LOOKS 8          /* a size still growing after 8 ms: open */

/* *held is the caller's: the size at which the end was last found open
 * after the hold (0 at first). An end still open at that size is open at
 * once: a cut line that no write closes (a disk still full) costs the
 * hold once, not every write.
 * @return 1: it ends inside a line; 0: it is empty or ends with a newline;
 * -1: it cannot be read back (a descriptor opened write-only) */
static inline int vl__line_end_open(int fd, off_t *held) {
  off_t seen = -1;
  for (int look = 0; look < VL_LINE_END_LOOKS; look++) {
    struct stat st;
    char c;
    if (fstat(fd, &st) != 0) return -1;
    if (st.st_size == 0) return 0;
    if (pread(fd, &c, 1, st.st_size - 1) != 1) return -1;
    if (c == '\n') return 0;
    if (st.st_size == seen || st.st_size == *held) {
      *held = st.st_size;
      return 1;
    }
    seen = st.st_size;
    struct timespec hold = {0, VL_LINE_END_HOLD_NS};
    nanosleep(&hold, NULL);
  }
  *held = seen;
  return 1;
}

#endif
