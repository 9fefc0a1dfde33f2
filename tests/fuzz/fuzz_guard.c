/* libFuzzer harness: the step lines the guard reads while a job runs under
 * `run --commitment` (its throughput trigger). The first byte picks how
 * the bytes arrive (chunks of 1 to 256 bytes), the second how many times
 * the rest is appended (1 to 32: a job steps again and again, and a line
 * may outgrow the buffer); then the job's rate. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t chunk = (size_t)data[0] + 1, times = (size_t)(data[1] % 32) + 1;
  data += 2;
  size -= 2;
  static struct tput_watch w;
  memset(&w, 0, sizeof w);
  for (size_t t = 0; t < times; t++)
    for (size_t at = 0; at < size; at += chunk)
      tput_feed(&w, (const char *)data + at, size - at < chunk ? size - at : chunk);
  if (w.len >= sizeof w.buf || w.n > GUARD_WINDOW || w.at >= GUARD_WINDOW ||
      w.npids > sizeof w.pids / sizeof w.pids[0])
    __builtin_trap();
  double tps = tput_rate(&w);
  if (!(tps >= 0) || isnan(tps)) __builtin_trap();
  return 0;
}
