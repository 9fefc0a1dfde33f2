/* vramledger: a measured dataset's runs (the output of
 * python/vramledger/measure.py) and validate's comparison of them with the
 * estimate. Pure: the caller reads files. */
#ifndef VRAMLEDGER_VALIDATE_H
#define VRAMLEDGER_VALIDATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramledger/model.h"
#include "vramledger/status.h"

struct vl_measured_run {
  char name[64];
  char model[64];         /* bundled model name */
  char lora_targets[128]; /* "" for PEFT's default */
  struct vl_job job;      /* the settings, as estimate takes them */
  bool holdout;
  bool ok; /* measured; false: error[] says why */
  char error[160];
  uint64_t peak_allocated; /* torch.cuda.max_memory_allocated over the step */
  uint64_t peak_reserved;
  uint64_t nvml_process;  /* 0 when NVML was not available */
  uint64_t phase_peak[3]; /* forward, backward, optimizer (train only) */
  double step_s;          /* the step's time: step_median_s, else step_s; 0: not timed */
  bool shared_process;    /* measured after other runs in one process: its reserved and
                             process memory hold what they left cached (not compared) */
  bool host_shared;       /* timed while other work ran on the host ("host_shared"): its
                             step time is not a user's (not compared) */
};

struct vl_measured {
  struct vl_measured_run *runs;
  size_t n;
  char device[64], torch[32], cuda[16], transformers[32], date[32];
};

/*! Parse a results file held in text[0..len). Runs whose settings this
 * version cannot express are kept with ok = false and a reason.
 * Release with vl_measured_release(). @return VL_OK, VL_EPARSE (line and
 * column), VL_EKEY (which run, which key), VL_ENOMEM. */
vl_status vl_measured_parse(const char *text, size_t len, struct vl_measured *m,
                            struct vl_err *err) VL_MUST_USE;
void vl_measured_release(struct vl_measured *m);

/* ---- estimate vs measured ---- */

struct vl_compare_row {
  const struct vl_measured_run *run;
  bool estimated; /* false: why[] says why not */
  char why[200];
  uint64_t est_allocated, est_reserved, est_total;
  bool other_outcome;   /* judged against bill->other, the nearer outcome */
  double err_allocated; /* percent, (estimate - measured) / measured */
  double err_reserved;
  double err_total;  /* against NVML process memory; NAN without NVML */
  double est_step_s; /* the priced step (vl_step_time) on the results' card; 0: none */
  double err_step;   /* percent against run->step_s; NAN: not timed */
};

/* predicted against measured step time over every timed row */
struct vl_time_summary {
  int n;              /* rows with both */
  double median, max; /* |error|, percent */
  int within;         /* rows with |error| <= the tolerance */
};

struct vl_compare_summary {
  int n;                                  /* rows compared */
  double median_allocated, max_allocated; /* |error|, percent */
  int within_allocated;                   /* rows with |error| <= the tolerance */
  int n_total;                            /* rows with an NVML figure */
  double median_total, max_total;
  int within_total;
  int other_outcome; /* rows judged against the job's other outcome */
};

/* What a validate report says of its rows as a whole */
struct vl_compare_tally {
  int beyond;         /* estimated rows beyond a tolerance (step time only under time_gate) */
  int shared_process; /* estimated rows measured after others in one process: reserved
                       * and process memory not compared */
  int host_shared;    /* estimated, timed rows timed while other work ran on the host:
                       * step time not compared */
};

/*! Count the rows beyond the tolerances (percent; step time counts only
 * under time_gate) and those whose memory or time was not compared. */
void vl_compare_tally(const struct vl_compare_row *rows, size_t n, double tol_allocated,
                      double tol_total, double tol_time, bool time_gate,
                      struct vl_compare_tally *t);

/*! Summarise the timed rows of both sets against tol (percent). */
vl_status vl_compare_time_summarize(const struct vl_compare_row *rows, size_t n, double tol,
                                    struct vl_time_summary *s) VL_MUST_USE;

/*! Fill the estimate columns and errors of a row from a bill. */
void vl_compare_fill(struct vl_compare_row *row, const struct vl_bill *bill);

/*! Summarise the rows of one set (holdout true or false) against the
 * tolerances (percent). */
vl_status vl_compare_summarize(const struct vl_compare_row *rows, size_t n, bool holdout,
                               double tol_allocated, double tol_total,
                               struct vl_compare_summary *s) VL_MUST_USE;

#endif
