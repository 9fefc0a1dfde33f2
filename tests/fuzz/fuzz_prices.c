/* libFuzzer harness: the prices file of `plan --prices`, applied to a small
 * catalog (two cards, one with aliases), then the cards looked up again. */
#include <stddef.h>
#include <stdint.h>

#include "vramledger/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char catalog[] =
    "{\"schema\": \"vramledger.gpus/1\", \"date\": \"2026-11-29\", \"gpus\": ["
    "{\"name\": \"h100-80gb\", \"aliases\": [\"h100\", \"h100-sxm\"], \"label\": \"NVIDIA H100\","
    " \"memory_bytes\": 85520809984, \"bf16_tflops\": 989, \"fp16_tflops\": 989,"
    " \"fp8_tflops\": 1979, \"compute_capability\": \"9.0\", \"hbm_gb_s\": 3350,"
    " \"interconnect\": \"nvlink\", \"link_gb_s\": 450, \"usd_per_hour\": 2.49},"
    "{\"name\": \"l40s\", \"label\": \"NVIDIA L40S\", \"memory_bytes\": 48305799168,"
    " \"bf16_tflops\": 362, \"hbm_gb_s\": 864, \"interconnect\": \"pcie\", \"link_gb_s\": 32}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct vl_catalog c;
  struct vl_err err;
  if (vl_catalog_parse(catalog, sizeof catalog - 1, &c, &err) != VL_OK) __builtin_trap();
  double before[8];
  for (size_t i = 0; i < c.n && i < 8; i++)
    before[i] = c.gpus[i].usd_per_hour;
  if (vl_prices_apply((const char *)data, size, &c, &err) != VL_OK) {
    /* all or nothing: a refused file changes no price and no date */
    for (size_t i = 0; i < c.n && i < 8; i++)
      if (c.gpus[i].usd_per_hour != before[i]) __builtin_trap();
    if (c.prices_date[0]) __builtin_trap();
  } else {
    /* applied: every price is a number the planner can multiply */
    for (size_t i = 0; i < c.n; i++)
      if (!(c.gpus[i].usd_per_hour >= 0 && c.gpus[i].usd_per_hour < 1e6)) __builtin_trap();
    (void)vl_catalog_find(&c, "h100");
  }
  vl_catalog_release(&c);
  return 0;
}
