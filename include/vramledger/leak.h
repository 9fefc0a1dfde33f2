/* vramledger: the one leak rule. `report` (the summary's "leak" finding)
 * and `doctor` (VL-D004 leak) judge a run by it; each layer of the record
 * gives its own evidence, and either is a leak. Pure. */
#ifndef VRAMLEDGER_LEAK_H
#define VRAMLEDGER_LEAK_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/probe.h"
#include "vramledger/record.h"

struct vl_leak {
  /* system layer (NVML): the floor of the job's memory in four windows
   * after it first holds GPU memory rises window after window, by more
   * than 5 % of the job's peak process memory in all */
  bool system;
  double floor_bytes_per_s; /* the floor's rise; 0 when it does not rise */
  double floor_grown_bytes; /* last window's floor less the first's */
  /* framework layer (the probe): allocated at the start of each step,
   * steps 4 on (3 at least), rises by more than 1 MiB and 0.5 % of the
   * peak allocated */
  bool probed; /* the record has a framework layer */
  bool framework;
  double step_bytes; /* rise per step */
  uint64_t step_total_bytes;
  unsigned steps;
};

/*! The system layer's evidence. peak_process_bytes: the job's peak
 * process memory (vl_run_summary.peak_process_bytes). Fills l->system,
 * floor_bytes_per_s and floor_grown_bytes; the rest is left as it is. */
void vl_leak_system(const struct vl_record *r, uint64_t peak_process_bytes, struct vl_leak *l);

/*! The framework layer's evidence (f may be NULL or not present: no
 * evidence). Fills l->framework, step_bytes, step_total_bytes, steps. */
void vl_leak_framework(const struct vl_probe_layer *f, struct vl_leak *l);

/*! Both layers. @return whether the run leaks (either layer shows it). */
bool vl_leak_judge(const struct vl_record *r, uint64_t peak_process_bytes,
                   const struct vl_probe_layer *f, struct vl_leak *l);

#endif
