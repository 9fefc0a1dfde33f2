/* libFuzzer harness: the allocation-trace reader of `trace`, then replays
 * under every allocator setting (a small card, so retries and OOM run). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "vramledger/caching.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_trace t;
  struct vl_err err;
  if (vl_trace_parse((const char *)data, size, &t, &err) != VL_OK) return 0;
  if (t.max_id > (1u << 20)) { /* ids index arrays: keep the fuzzer's memory small */
    vl_trace_release(&t);
    return 0;
  }
  const struct vl_cache_conf confs[] = {
      {0, 0, 0, false},
      {64ull << 20, 0, 0, false},
      {64ull << 20, 8ull << 20, 0.5, false},
      {64ull << 20, 0, 0, true},
  };
  for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
    struct vl_replay r;
    if (vl_trace_replay(&t, -1, &confs[i], &r) != VL_OK) continue;
    if (r.peak_allocated > r.peak_reserved) abort(); /* the books must balance */
  }
  vl_trace_release(&t);
  return 0;
}
