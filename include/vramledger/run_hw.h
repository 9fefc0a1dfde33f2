/* vramledger: the GPUs a run ran on, as plain data. lib/measure reads them
 * from a record (vl_run_hw_read, vramledger/record.h); lib/decide holds
 * them to a commitment (vl_commitment_hw_diff, vl_audit_compute). Below
 * both, so that neither includes the other. */
#ifndef VRAMLEDGER_RUN_HW_H
#define VRAMLEDGER_RUN_HW_H
#include <stdbool.h>
#include <stdint.h>

struct vl_run_hw {
  unsigned count;        /* GPUs the job held memory on; else those it could see */
  bool used;             /* count is of the GPUs the job used (NVML samples) */
  bool mixed;            /* they are not all of one model */
  char device[96];       /* the first one's name as NVML gives it ("" if none) */
  uint64_t memory_bytes; /* its total memory */
};

#endif
