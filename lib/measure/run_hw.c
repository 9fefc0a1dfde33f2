/* The GPUs a run ran on, from its record (vramledger/record.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "vramledger/record.h"

void vl_run_hw_read(const struct vl_record *rec, struct vl_run_hw *hw) {
  memset(hw, 0, sizeof *hw);
  bool used[VL_RECORD_MAX_GPUS] = {false};
  unsigned n_used = 0;
  for (size_t i = 0; i < rec->n_samples; i++)
    for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++)
      if (rec->samples[i].gpu_tree[g] && !used[g]) {
        used[g] = true;
        n_used++;
      }
  hw->used = n_used > 0;
  hw->count = n_used ? n_used : rec->n_gpus;
  const struct vl_rec_gpu *first = NULL;
  for (unsigned i = 0; i < rec->n_gpus; i++) {
    const struct vl_rec_gpu *g = &rec->gpus[i];
    if (n_used && (g->index >= VL_RECORD_MAX_GPUS || !used[g->index])) continue;
    if (!first)
      first = g;
    else if (strcmp(first->name, g->name) != 0)
      hw->mixed = true;
  }
  if (first) {
    snprintf(hw->device, sizeof hw->device, "%s", first->name);
    hw->memory_bytes = first->total_bytes;
  }
}
