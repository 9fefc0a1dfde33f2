/* The one leak rule (vramledger/leak.h), and where its thresholds come
 * from. docs/cmd/doctor.md lists them. */
#include <string.h>

#include "../util/internal.h"
#include "vramledger/leak.h"

/* The floor of the job's memory rises through the run: four windows after
 * the job first holds GPU memory (so the CUDA context appearing is not
 * growth); the minimum of each must rise, window after window, by more
 * than 5 % of the peak in all. A spike or a context coming up is not a
 * leak (measured: bench/results/run-interposer). At least
 * 20 samples. */
void vl_leak_system(const struct vl_record *r, uint64_t peak_process_bytes, struct vl_leak *l) {
  l->system = false;
  l->floor_bytes_per_s = l->floor_grown_bytes = 0;
  size_t first = 0;
  while (first < r->n_samples && r->samples[first].tree_bytes == 0)
    first++;
  size_t m = r->n_samples - first;
  if (m < 20) return;
  uint64_t floor[4];
  double tmid[4];
  for (int w = 0; w < 4; w++) {
    size_t a = first + m * (size_t)w / 4, b = first + m * (size_t)(w + 1) / 4;
    floor[w] = UINT64_MAX;
    for (size_t i = a; i < b; i++)
      floor[w] = vl__min(floor[w], r->samples[i].tree_bytes);
    tmid[w] = (double)(r->samples[(a + b) / 2].t_ns - r->start_ns) * 1e-9;
  }
  bool rising = floor[0] < floor[1] && floor[1] < floor[2] && floor[2] < floor[3];
  if (!rising) return;
  l->floor_grown_bytes = (double)(floor[3] - floor[0]);
  if (tmid[3] > tmid[0]) l->floor_bytes_per_s = l->floor_grown_bytes / (tmid[3] - tmid[0]);
  l->system = l->floor_grown_bytes > 0.05 * (double)peak_process_bytes;
}

/* Allocated at the start of every step holds more, steps 4 on (the first
 * steps create the optimizer's states and the allocator's pools), by more
 * than 1 MiB and 0.5 % of the peak over the steps seen. */
void vl_leak_framework(const struct vl_probe_layer *f, struct vl_leak *l) {
  l->framework = false;
  l->step_bytes = 0;
  l->step_total_bytes = 0;
  l->steps = 0;
  l->probed = f && f->present;
  if (!l->probed || f->growth_steps < 3 || !(f->growth_bytes_per_step > 0)) return;
  l->step_bytes = f->growth_bytes_per_step;
  l->step_total_bytes = f->growth_total;
  l->steps = f->growth_steps;
  double total = (double)f->growth_total, floor = 0.005 * (double)f->peak_allocated;
  l->framework = total > (double)(1u << 20) && total > floor;
}

bool vl_leak_judge(const struct vl_record *r, uint64_t peak_process_bytes,
                   const struct vl_probe_layer *f, struct vl_leak *l) {
  memset(l, 0, sizeof *l);
  vl_leak_system(r, peak_process_bytes, l);
  vl_leak_framework(f, l);
  return l->system || l->framework;
}
