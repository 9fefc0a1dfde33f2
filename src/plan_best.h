/* commit --plan: the best configuration of a plan (`plan --format json`)
 * read from its text, apart from the file and the messages (pure, so that
 * the fuzz harness reads what commit reads). */
#ifndef VRAMLEDGER_PLAN_BEST_H
#define VRAMLEDGER_PLAN_BEST_H
#include <limits.h>
#include <stddef.h>

#include "vramledger/commitment.h"

/* What is wrong with a plan, for the message and its hint. */
enum plan_fault {
  PLAN_OK,
  PLAN_NOT_JSON,   /* err: "LINE:COLUMN: not JSON: ..." */
  PLAN_NOT_PLAN,   /* err: the schema found */
  PLAN_NO_BEST,    /* nothing met its deadline and budget */
  PLAN_INCOMPLETE, /* the best lacks its model, gpu, margin or settings */
  PLAN_SETTINGS,   /* err: what vl_job_from_settings says */
  PLAN_MARGIN,     /* the rest read; the margin is not in [0, 1) */
};

struct plan_best {
  char model[PATH_MAX]; /* as the plan names it (cut to PATH_MAX - 1 bytes) */
  char gpu[PATH_MAX];
  double margin;
  double gpu_hours; /* the best's hours x count; 0 when it says none */
};

/*! Read the best configuration of the plan in text[0..len): its model,
 * card, margin and GPU-hours into *b, its settings into *job (lora
 * targets in targets[], targets_len bytes). */
enum plan_fault plan_best_read(const char *text, size_t len, struct plan_best *b,
                               struct vl_job *job, char *targets, size_t targets_len,
                               struct vl_err *err);

#endif
