#include "vramledger/status.h"

const char *vl_strerror(vl_status s) {
  static const char *const text[] = {
#define VL__STATUS_TEXT(name, t) t,
      VL_STATUS_MAP(VL__STATUS_TEXT)
#undef VL__STATUS_TEXT
  };
  if ((unsigned)s >= VL_STATUS_COUNT) return "unknown status";
  return text[s];
}
