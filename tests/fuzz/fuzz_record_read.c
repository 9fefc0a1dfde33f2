/* libFuzzer harness: the streamed record reader (vl_record_read) against
 * the reader of memory (vl_record_parse): the same status, message and
 * events, in pieces of 1 to 64 bytes (the input's first byte picks), so
 * lines cut at every place and the buffer grown for long lines; and the
 * reader of memory with its sample scanner against jansson alone
 * (vl__record_scan false). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "measure/record_read.h"
#include "vramledger/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t piece = 1 + data[0] % 64;
  data++, size--;
  int fd = memfd_create("record", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return 0;
  }
  struct vl_record m, r;
  struct vl_err em = {""}, er = {""};
  vl_status sm = vl_record_parse((const char *)data, size, &m, &em);
  vl_status sr = vl__record_read_fd(fd, piece, &r, &er);
  close(fd);
  if (sm != sr || strcmp(em.msg, er.msg) != 0) abort();
  if (sm != VL_OK) return 0;
  if (m.lines != r.lines || m.truncated != r.truncated || m.gaps != r.gaps ||
      m.n_samples != r.n_samples || m.n_marks != r.n_marks || m.n_steps != r.n_steps ||
      m.n_phases != r.n_phases || m.alloc_peak_bytes != r.alloc_peak_bytes)
    abort();
  if (m.n_samples && memcmp(m.samples, r.samples, m.n_samples * sizeof *m.samples) != 0) abort();
  struct vl_record j;
  struct vl_err ej = {""};
  vl__record_scan = false;
  vl_status sj = vl_record_parse((const char *)data, size, &j, &ej);
  vl__record_scan = true;
  if (sj != VL_OK || m.lines != j.lines || m.truncated != j.truncated || m.gaps != j.gaps ||
      m.n_samples != j.n_samples || m.n_marks != j.n_marks)
    abort();
  if (m.n_samples && memcmp(m.samples, j.samples, m.n_samples * sizeof *m.samples) != 0) abort();
  vl_record_release(&j);
  vl_record_release(&m);
  vl_record_release(&r);
  return 0;
}
