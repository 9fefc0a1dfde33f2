/* vramledger: the Training Resource Commitment.
 *
 * A reviewed document: the hardware, the configuration baseline with its
 * estimated (and measured) memory, the SLA, the fallback triggers and the
 * audit clause. commitment.json is its machine-readable form; the library
 * reads it and compares jobs and runs with it (pure: the caller reads the
 * files). */
#ifndef VRAMLEDGER_COMMITMENT_H
#define VRAMLEDGER_COMMITMENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramledger/model.h"
#include "vramledger/status.h"

#define VL_COMMITMENT_SCHEMA "vramledger.commitment/1"

struct vl_commitment {
  char model[128];
  struct vl_job job;      /* the configuration baseline */
  char lora_targets[256]; /* storage for job.lora_targets */
  char gpu[32];           /* catalog name */
  uint64_t gpu_memory_bytes;
  uint64_t gpus; /* dp * tp * pp */
  double margin;
  uint64_t est_allocated_bytes, est_reserved_bytes, est_total_bytes;
  /* the process total of the job's other outcome, where timing decides
   * between two (DDP's bucket rebuild; estimate's bill->other); 0: none */
  uint64_t est_other_total_bytes;
  bool measured; /* a run was attached */
  uint64_t measured_process_bytes;
  char measured_run[256];
  double sla_tokens_per_s; /* 0: none stated */
  double gpu_hours;        /* 0: no budget stated */
  double peak_trigger;     /* 1.05: measured peak above 105 % -> fallback */
  double tput_trigger;     /* 0.80: tokens/s under 80 % of the SLA -> fallback */
  double audit_tolerance;  /* 0.05 */
};

/*! Read commitment.json text. @return VL_OK, VL_EPARSE (line, column),
 * VL_EKEY (what is missing or wrong; never a pass by accident). */
vl_status vl_commitment_parse(const char *text, size_t len, struct vl_commitment *c,
                              struct vl_err *err) VL_MUST_USE;

/*! Read a job's settings object (the "settings" of `estimate --format
 * json`, the "baseline" of a commitment) into *job; lora targets are kept
 * in targets[]. @return VL_OK or VL_EKEY naming the key. */
vl_status vl_job_from_settings(const char *text, size_t len, struct vl_job *job, char *targets,
                               size_t targets_len, struct vl_err *err) VL_MUST_USE;

/*! Apply a DeepSpeed configuration (ds_config.json text) to *job: what
 * DeepSpeed controls (micro-batch, accumulation, data-parallel ranks from
 * train_batch_size, ZeRO stage, offload, bf16/fp16 with an fp32 master
 * copy, optimizer) replaces the job's; framework becomes deepspeed. A
 * setting given as "auto" is left as it was and named in autos[].
 * @return VL_OK, VL_EPARSE (line, column), VL_EKEY naming the key. */
vl_status vl_job_apply_deepspeed(const char *text, size_t len, struct vl_job *job, char *autos,
                                 size_t autos_len, struct vl_err *err) VL_MUST_USE;

/*! The estimated process total a GPU must hold: the larger of the job's
 * two outcomes where timing decides between them. */
uint64_t vl_commitment_budget_bytes(const struct vl_commitment *c);

/*! The committed total a measured per-GPU peak is held to: the total, or
 * the other outcome's where the peak lies nearer it (*other set then). */
uint64_t vl_commitment_reference_bytes(const struct vl_commitment *c, uint64_t measured,
                                       bool *other);

/*! The bytes per GPU above which the peak trigger fires: peak_trigger x
 * the measured process peak when a run was attached, else x the estimated
 * budget (vl_commitment_budget_bytes). */
uint64_t vl_commitment_peak_threshold(const struct vl_commitment *c);

struct vl_drift {
  char field[32]; /* the estimate flag's name, without -- */
  char committed[64];
  char now[64];
};

/*! Compare a job with the baseline, field by field.
 * @return the number of drifted fields (at most cap are written). */
int vl_commitment_diff(const struct vl_commitment *c, const struct vl_job *job,
                       struct vl_drift *out, int cap);

#endif
