/* vramledger: doctor — what is wrong with a run's memory, with evidence
 * and a fix (pure diagnosis; lib/render/doctor.c words it). Each finding
 * has a stable id so that CI can fail on one (`doctor --fail-on`). */
#ifndef VRAMLEDGER_DOCTOR_H
#define VRAMLEDGER_DOCTOR_H
#include <stdint.h>

#include "vramledger/leak.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

/* id, slug: stable; never renumbered. */
#define VL_DIAGS(X)                                                                                \
  X(VL_D_EXTRA_CONTEXTS, "VL-D001", "extra-contexts")                                              \
  X(VL_D_FRAGMENTATION, "VL-D002", "fragmentation")                                                \
  X(VL_D_ALLOC_RETRIES, "VL-D003", "alloc-retries")                                                \
  X(VL_D_LEAK, "VL-D004", "leak")                                                                  \
  X(VL_D_CLIP_PEAK, "VL-D005", "clip-temporaries")                                                 \
  X(VL_D_OPTIMIZER_PEAK, "VL-D006", "optimizer-temporaries")                                       \
  X(VL_D_EMPTY_CACHE, "VL-D007", "empty-cache-churn")                                              \
  X(VL_D_RANK_IMBALANCE, "VL-D008", "rank-imbalance")                                              \
  X(VL_D_OOM, "VL-D009", "out-of-memory")                                                          \
  X(VL_D_ACTIVATIONS, "VL-D010", "activations-dominate")                                           \
  X(VL_D_CASTS, "VL-D011", "repeated-casts")                                                       \
  X(VL_D_CACHE_GROWS, "VL-D012", "cache-grows")                                                    \
  X(VL_D_PROBE_STOPPED, "VL-D013", "probe-stopped")                                                \
  X(VL_D_NO_PROBE, "VL-D014", "no-framework-layer")                                                \
  X(VL_D_DDP_FIRST_BUCKETS, "VL-D015", "ddp-first-buckets")                                        \
  X(VL_D_DESCENDANTS_LEFT, "VL-D016", "descendants-left")

#define VL_D_ENUM(e, id, slug) e,
enum vl_diag_kind { VL_DIAGS(VL_D_ENUM) VL_D_COUNT };
#undef VL_D_ENUM

const char *vl_diag_id(enum vl_diag_kind k);   /* "VL-D004" */
const char *vl_diag_slug(enum vl_diag_kind k); /* "leak" */

enum vl_severity { VL_SEV_INFO, VL_SEV_WARN, VL_SEV_ERROR };

/* One finding: its kind, how bad, and the figures that show it (their
 * meaning depends on the kind; see lib/render/doctor.c). */
struct vl_diag {
  enum vl_diag_kind kind;
  enum vl_severity severity;
  double a, b, c;
  char text[256]; /* a name the evidence needs (a phase, a note) */
  /* rank-imbalance: the part of the bill that sets the fullest rank
   * (rank_hi) apart from the emptiest (rank_lo) the most, c its bytes; -1
   * when the ranks' bills are not known. Parts: enum vl_bill_part, then
   * VL_BILL_N the cuBLAS workspaces, VL_BILL_N + 1 the transient. */
  int part;
  unsigned rank_hi, rank_lo;
  struct vl_leak leak; /* leak: the evidence of each layer (vramledger/leak.h) */
};

#define VL_MAX_DIAGS VL_D_COUNT

/* The CI gate over a run's findings (doctor --fail-on LIST): which of
 * them the list names. Decided by the caller; the renderer shows it. */
struct vl_doctor_verdict {
  const char *fail_on;       /* the list as given (borrowed) */
  bool listed[VL_MAX_DIAGS]; /* finding i is named by the list: it fails the run */
  int n_listed;              /* the verdict fails when > 0 */
};

/*! Diagnose a run (pure). Thresholds in docs/cmd/doctor.md.
 * @return the number of findings written to out. */
int vl_doctor(const struct vl_record *r, const struct vl_run_summary *s,
              const struct vl_probe_layer *f, struct vl_diag out[VL_MAX_DIAGS]);

#endif
