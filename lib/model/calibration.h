/* The constants of the model that were measured, not read from a source
 * file: each once, with its name, unit, the dataset that set it and how.
 * vl_overheads_default() reads them from here; tests/unit/
 * test_calibration.c recomputes each from its dataset where the dataset is
 * in the repository and checks that docs/model.md §9 lists this table.
 * Constants read from PyTorch's or a library's source are in
 * pytorch_constants.h. */
#ifndef VRAMLEDGER_MODEL_CALIBRATION_H
#define VRAMLEDGER_MODEL_CALIBRATION_H

enum vl__cal {
  VL_CAL_CUDA_CONTEXT,       /* struct vl_overheads .cuda_context_bytes */
  VL_CAL_CUDA_CONTEXT_INFER, /* .cuda_context_infer_bytes */
  VL_CAL_NCCL,               /* .nccl_bytes */
  VL_CAL_SM_COUNT,           /* .sm_count */
  VL_CAL_THREADS_PER_SM,     /* .threads_per_sm */
  VL_CAL_CHURN,              /* .allocator_churn */
  VL_CAL_CHURN_EXPANDABLE,   /* .allocator_churn_expandable */
  VL_CAL_COUNT
};

struct vl__calibration {
  const char *name;    /* the struct vl_overheads field it sets */
  double value;        /* in unit; byte counts are whole numbers below 2^53 */
  const char *unit;    /* "bytes", "" (a count), "fraction" */
  const char *dataset; /* the file or folder under bench/results/ it comes from */
  const char *how;     /* how the dataset gave the value */
};

/*! The row of one constant (static storage); NULL when id is out of
 * range. */
const struct vl__calibration *vl__calibration(enum vl__cal id);

#endif
