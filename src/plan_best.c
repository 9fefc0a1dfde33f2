/* commit --plan's reader: see plan_best.h. */
#include "plan_best.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum plan_fault best(json_t *root, struct plan_best *b, struct vl_job *job, char *targets,
                            size_t targets_len, struct vl_err *err) {
  json_t *bst = json_object_get(root, "best"), *set = json_object_get(bst, "settings");
  const char *model = json_string_value(json_object_get(root, "model"));
  const char *gpu = json_string_value(json_object_get(bst, "gpu"));
  json_t *margin = json_object_get(root, "margin");
  const char *schema = json_string_value(json_object_get(root, "schema"));
  if (!schema || strcmp(schema, "vramledger.plan/1") != 0) {
    snprintf(err->msg, sizeof err->msg, "%s", schema ? schema : "none");
    return PLAN_NOT_PLAN;
  }
  if (json_is_null(bst) || !bst) return PLAN_NO_BEST;
  if (!json_is_object(set) || !model || !gpu || !json_is_number(margin)) return PLAN_INCOMPLETE;
  char *st = json_dumps(set, JSON_COMPACT);
  vl_status s =
      st ? vl_job_from_settings(st, strlen(st), job, targets, targets_len, err) : VL_ENOMEM;
  free(st);
  if (s == VL_ENOMEM) snprintf(err->msg, sizeof err->msg, "out of memory");
  if (s != VL_OK) return PLAN_SETTINGS;
  snprintf(b->model, sizeof b->model, "%s", model);
  snprintf(b->gpu, sizeof b->gpu, "%s", gpu);
  b->margin = json_number_value(margin);
  /* the plan's time on its GPUs is the budget, unless --gpu-hours says */
  json_t *h = json_object_get(bst, "hours"), *n = json_object_get(bst, "count");
  if (json_is_number(h) && json_is_integer(n))
    b->gpu_hours = json_number_value(h) * (double)json_integer_value(n);
  return b->margin >= 0 && b->margin < 1 ? PLAN_OK : PLAN_MARGIN;
}

enum plan_fault plan_best_read(const char *text, size_t len, struct plan_best *b,
                               struct vl_job *job, char *targets, size_t targets_len,
                               struct vl_err *err) {
  memset(b, 0, sizeof *b);
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  if (!root) {
    snprintf(err->msg, sizeof err->msg, "%d:%d: not JSON: %s", je.line, je.column, je.text);
    return PLAN_NOT_JSON;
  }
  enum plan_fault f = best(root, b, job, targets, targets_len, err);
  json_decref(root);
  return f;
}
