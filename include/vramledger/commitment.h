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

#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/run_hw.h"
#include "vramledger/status.h"

#define VL_COMMITMENT_SCHEMA "vramledger.commitment/1"
#define VL_SHA256_HEX 65 /* 64 hex digits and the NUL */

/* The fallback triggers and the audit clause a commitment is written with,
 * and read with where commitment.json leaves them out: a measured peak over
 * 105 % of the committed one -> checkpointing; tokens/s under 80 % of the
 * SLA -> another attention kernel; actual GPU-hours more than 5 % off the
 * estimate -> review. */
#define VL_COMMIT_PEAK_TRIGGER 1.05
#define VL_COMMIT_TPUT_TRIGGER 0.80
#define VL_COMMIT_AUDIT_TOLERANCE 0.05

struct vl_commitment {
  char model[128];        /* the name it was committed under, for people */
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
  uint64_t est_params_bytes; /* the parameters' bytes per GPU; 0: not recorded */
  bool measured;             /* a run was attached */
  uint64_t measured_process_bytes;
  char measured_run[256];
  double sla_tokens_per_s; /* 0: none stated */
  double gpu_hours;        /* 0: no budget stated */
  double peak_trigger;     /* 1.05: measured peak above 105 % -> fallback */
  double tput_trigger;     /* 0.80: tokens/s under 80 % of the SLA -> fallback */
  double audit_tolerance;  /* 0.05 */
  /* what the model is ("model_config"; false in commitments written
   * before it, which name the model only) */
  bool has_identity;
  char config_sha256[VL_SHA256_HEX]; /* of the canonical config (vl_config_canonical) */
  char config_file[1024];            /* relative to the commitment's folder; "" if bundled */
  char config_bundled[128];          /* the bundled model's name; "" for a file */
  char model_type[32];               /* "" when not recorded */
  uint64_t params;                   /* 0 when not recorded */
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
  char field[96]; /* the estimate flag's name without --, or the config.json key */
  char committed[128];
  char now[128];
};

/*! Compare a job with the baseline, field by field: every setting the
 * settings object carries, the loop's defaults applied to both (the HF
 * Trainer's fused AdamW and dropped outputs are the same job however they
 * were spelled). @return the number of drifted fields (at most cap are
 * written). */
int vl_commitment_diff(const struct vl_commitment *c, const struct vl_job *job,
                       struct vl_drift *out, int cap);

/* ---- what the model is ------------------------------------------------

 * A model is identified by its config.json content, never by the path it
 * was read from: the canonical form is the JSON object with its keys
 * sorted at every level, compact (no spaces), strings in ASCII escapes,
 * without the keys that say where and by what it was saved (those starting
 * with '_', such as _name_or_path, and transformers_version). */

/*! The canonical form of config.json text (see above). *out is allocated
 * with vl_malloc (the caller frees it with vl_free), NUL-terminated, its
 * length in *out_len. @return VL_OK, VL_EPARSE (line, column), VL_EKEY (not
 * an object), VL_ENOMEM. */
vl_status vl_config_canonical(const char *text, size_t len, char **out, size_t *out_len,
                              struct vl_err *err) VL_MUST_USE;

/*! SHA-256 (FIPS 180-4) of n bytes as 64 lower-case hex digits. */
void vl_sha256_hex(const void *data, size_t n, char hex[VL_SHA256_HEX]);

/*! The SHA-256 of config.json text's canonical form. @return as
 * vl_config_canonical. */
vl_status vl_config_sha256(const char *text, size_t len, char hex[VL_SHA256_HEX],
                           struct vl_err *err) VL_MUST_USE;

/*! What changed between the config a commitment holds (its
 * model_config.content; commitment text in commitment[0..clen)) and
 * config.json text, key by key: nested objects by dotted path
 * ("rope_scaling.factor"), arrays as whole values, a missing key as
 * "(absent)"; strings unquoted, other values as compact JSON. Drifts are
 * sorted by key. *n is the number of differing keys (at most cap written);
 * 0 when the canonical forms are equal. @return VL_OK; VL_EKEY when the
 * commitment holds no copy of its config; VL_EPARSE when either is not
 * JSON. */
vl_status vl_commitment_config_diff(const char *commitment, size_t clen, const char *config,
                                    size_t len, struct vl_drift *out, int cap, int *n,
                                    struct vl_err *err) VL_MUST_USE;

/* ---- what a run ran on ------------------------------------------------ */

/*! Compare a run's GPUs with committed hardware (a catalog card name, its
 * memory, a count): the card by the catalog's reading of the device name
 * (vl_catalog_match_device; cat may be NULL), else by its memory (within
 * 1 %); then the count. Writes "gpu" and "gpus" drifts, committed against
 * the run's. @return the number of differences (0, 1 or 2; at most cap
 * written); 0 when the record names no GPUs (hw->count 0). */
int vl_commitment_hw_diff(const char *gpu, uint64_t gpu_memory_bytes, uint64_t count,
                          const struct vl_catalog *cat, const struct vl_run_hw *hw,
                          struct vl_drift *out, int cap);

/* ---- what to do ------------------------------------------------------- */

/*! The next fallback for a job whose memory is over what it was given:
 * the decision tree (docs/model.md: LoRA/QLoRA/ZeRO, checkpointing, headroom) at
 * the first rung the job is not on yet. Model states (parameters, master
 * copy, gradients, optimizer states: bill->line_max) over 80 % of the
 * card: ZeRO one stage further when there are data-parallel ranks, else
 * LoRA, else QLoRA, else the optimizer offloaded, else more GPUs; else
 * activations over 50 % of what is left: activation checkpointing (full);
 * else, or with it already on: half the micro-batch with twice the
 * accumulation (the same global batch); at micro-batch 1: more GPUs
 * (vramledger plan). One sentence naming the flag, into buf[0..n). */
void vl_commitment_peak_action(const struct vl_job *job, const struct vl_bill *bill,
                               uint64_t card_bytes, char *buf, size_t n);

/*! The fallback for throughput under the SLA, fitting the job: eager
 * attention -> SDPA; SDPA -> FlashAttention-2, then the step's profile;
 * full checkpointing recomputes the forward -> selective. Into buf[0..n). */
void vl_commitment_throughput_action(const struct vl_job *job, char *buf, size_t n);

/* ---- the CI gate's report --------------------------------------------- */

enum vl_check_kind {
  VL_CHECK_MODEL,    /* the model's config differs */
  VL_CHECK_SETTING,  /* a setting of the baseline */
  VL_CHECK_HARDWARE, /* the card, its count or the margin */
  VL_CHECK_BUDGET,   /* the job no longer fits the committed card */
  VL_CHECK_TRIGGER,  /* a measured peak over the peak trigger */
  VL_CHECK_KIND_COUNT
};

struct vl_check_item {
  enum vl_check_kind kind;
  struct vl_drift d;
  char action[320]; /* what to do */
};

/* The gate's problems, in the order shown. Large (about 64 KiB): the
 * caller keeps it off the stack. */
#define VL_CHECK_MAX_ITEMS 96
struct vl_check {
  struct vl_check_item items[VL_CHECK_MAX_ITEMS];
  int n;
};

/* The job's model now, as the caller read it. */
struct vl_check_model {
  const char *file;       /* the config.json read (named in what to do) */
  const char *model_type; /* its model_type */
  uint64_t params;        /* its parameter count */
  const char *model_flag; /* --model as given; NULL: the commitment's own model */
  /* with the commitment's copy of its config (has_identity): */
  const char *sha256;          /* the config's canonical digest (vl_config_sha256) */
  bool keys_known;             /* keys[] compared (vl_commitment_config_diff gave VL_OK);
                                  false: no copy to name keys by */
  const struct vl_drift *keys; /* the keys that differ, the first n_keys_given */
  int n_keys, n_keys_given;    /* all that differ; how many keys[] holds */
};

/* The job now, billed, and the run measured, as the caller read them. */
struct vl_check_job {
  const struct vl_job *job;
  const struct vl_bill *bill;   /* the job billed on its card (vl_bill_compute) */
  const struct vl_gpu *card;    /* the card it runs on now (--gpu); NULL: the committed */
  const struct vl_catalog *cat; /* the catalog card is from */
  double margin;                /* the margin now, a fraction (--margin, else committed) */
  /* --run: NULL without a run */
  const struct vl_run_hw *run_hw;   /* the GPUs it ran on (vl_run_hw_read) */
  const struct vl_catalog *run_cat; /* the catalog naming the committed card */
  uint64_t run_peak_bytes;          /* its peak process memory per GPU (NVML) */
};

/*! The CI gate: the model (by its config's keys, or by model_type and
 * parameter count for a commitment without a copy of it), each setting of
 * the baseline, the card and margin, whether the job still fits the card,
 * and with a run its GPUs and its peak against the peak trigger, into
 * *out in that order, each with what to do; at most VL_CHECK_MAX_ITEMS
 * (pure). out->n 0: the job matches its commitment. */
void vl_check_compute(const struct vl_commitment *c, const struct vl_check_model *m,
                      const struct vl_check_job *j, struct vl_check *out);

struct vl_check_view {
  const char *commitment; /* the commitment file, as given */
  const char *model_file; /* the config.json read for the model, or NULL */
  const struct vl_check_item *items;
  int n;
  const char *not_checked; /* DeepSpeed's "auto" settings (comma-separated), or NULL */
};

#endif
