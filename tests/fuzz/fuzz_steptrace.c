/* libFuzzer harness: trace --gpu's reader of the tracer's op lines
 * (lib/decide/steptrace.c), priced on a measured card and on one derived
 * by datasheet ratios. The text is not NUL-terminated here, as a reader
 * must not need. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramledger/steptime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_gpu cards[2];
  memset(cards, 0, sizeof cards);
  snprintf(cards[0].name, sizeof cards[0].name, "h100-80gb");
  cards[0].bf16_tflops = cards[0].fp16_tflops = 989.4;
  snprintf(cards[1].name, sizeof cards[1].name, "not-measured");
  cards[1].bf16_tflops = 312, cards[1].fp32_tflops = 19.5, cards[1].hbm_gb_s = 2039;
  char *text = malloc(size ? size : 1); /* exactly size bytes: no NUL after them */
  if (!text) return 0;
  for (size_t i = 0; i < size; i++)
    text[i] = (char)data[i];
  for (int c = 0; c < 2; c++) {
    struct vl_trace_time t;
    struct vl_err err;
    if (vl_trace_step_time(text, size, &cards[c], &t, &err) != VL_OK) continue;
    const struct vl_step_time *s = &t.time;
    /* a step is a finite, non-negative time made of its phases */
    if (!isfinite(s->step_s) || s->step_s < 0 || s->forward_s < 0 || s->backward_s < 0 ||
        s->recompute_s < 0 || s->optimizer_s < 0)
      abort();
    if (fabs(s->forward_s + s->backward_s + s->recompute_s + s->optimizer_s - s->step_s) >
        1e-9 * (1 + s->step_s))
      abort();
  }
  free(text);
  return 0;
}
