#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

vl_status vl__fail(struct vl_err *err, vl_status s, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return s;
}
