/* vramledger: the audit of a finished run against its commitment.
 *
 * Each line of the audit is a clause: what was committed, what the run
 * measured, how far apart they are, and whether that is within the
 * tolerance. vl_audit_compute decides (pure: the caller reads the run and
 * the commitment); vl_render_audit (vramledger/render.h) only formats what
 * it decided. */
#ifndef VRAMLEDGER_AUDIT_H
#define VRAMLEDGER_AUDIT_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/catalog.h"
#include "vramledger/commitment.h"

/* The lines of an audit, in the order they are shown. */
enum vl_audit_line {
  VL_AUDIT_GPUS,        /* the card and count the run ran on */
  VL_AUDIT_PARAMS,      /* parameters' bytes per GPU (the probe's bill) */
  VL_AUDIT_PEAK,        /* peak process memory per GPU (NVML, the fullest GPU) */
  VL_AUDIT_GPU_HOURS,   /* duration x the run's GPUs */
  VL_AUDIT_TOKENS_PER_S /* against the SLA; only a shortfall counts */
};
#define VL_AUDIT_LINES 5

/* What the run measured, read by the caller from its record. */
struct vl_audit_run {
  uint64_t peak_bytes;       /* per GPU, the fullest one's; 0: no NVML samples */
  double seconds;            /* the run's duration */
  struct vl_run_hw hw;       /* the GPUs it ran on (vl_run_hw_read) */
  bool probe;                /* the PyTorch probe's bill is in the record */
  uint64_t params_bytes;     /* the bill's parameters per GPU; 0: not counted */
  double probe_tokens_per_s; /* the probe's, per rank; 0: none */
  unsigned probe_ranks;      /* ranks the probe saw; 0 taken as 1 */
  double step_s;             /* median between vl_mark("step") stamps; 0: none */
};

struct vl_audit_clause {
  bool compared; /* both sides known: the clause was judged */
  bool review;   /* off by more than the tolerance (gpus: other hardware) */
  bool committed_known, measured_known;
  double committed, measured; /* bytes, GPU-hours or tokens/s */
  double off;                 /* (measured - committed) / committed, when compared */
};

struct vl_audit {
  const char *commitment, *record; /* the paths, as given / read (borrowed) */
  double tolerance;                /* a fraction: 0.05 */
  bool tolerance_given;            /* from --tolerance, not the commitment */
  struct vl_audit_clause line[VL_AUDIT_LINES];
  int review;                          /* clauses marked for review; the verdict fails when > 0 */
  char want[64], ran[160];             /* "1 x h100-80gb", "2 x h200" or "not recorded" */
  bool peak_other;                     /* peak held to the committed other outcome (DDP rebuild) */
  unsigned hours_gpus;                 /* GPUs the hours are counted on */
  bool hours_gpus_committed;           /* the record names none: the committed count */
  bool probe;                          /* the record has the probe's bill */
  bool tokens_from_probe;              /* tokens/s from the probe, else from the step stamps */
  double price;                        /* USD a GPU-hour; 0: not given */
  double cost_usd, committed_cost_usd; /* with price; committed: 0 without a budget */
};

/*! Audit run r against commitment c: the card read with cat (may be
 * NULL: by memory alone), each line held to tolerance (a fraction, > 0;
 * tolerance_given: it came from the command line). price: USD a
 * GPU-hour, 0 none. Fills *out, all but the paths: the caller sets
 * out->commitment and out->record afterwards (borrowed, not copied). */
void vl_audit_compute(const struct vl_commitment *c, const struct vl_audit_run *r,
                      const struct vl_catalog *cat, double tolerance, bool tolerance_given,
                      double price, struct vl_audit *out);

#endif
