/* A DeepSpeed configuration (ds_config.json) as the settings it controls,
 * for `check --deepspeed`. Keys read (DeepSpeed's configuration reference):
 * train_micro_batch_size_per_gpu, gradient_accumulation_steps,
 * train_batch_size (= micro x accumulation x data-parallel ranks, which
 * gives dp), zero_optimization.stage, zero_optimization.offload_optimizer
 * and .offload_param (.device "cpu"/"nvme"), bf16.enabled, fp16.enabled
 * (half weights with an fp32 master copy in the optimizer: mixed-bf16 /
 * mixed-fp16), optimizer.type. "auto" (the Hugging Face integration fills
 * it in at launch) leaves a setting as it was and is named in autos. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../util/internal.h"
#include "vramledger/commitment.h"

static void note_auto(char *autos, size_t n, const char *key) {
  size_t l = strlen(autos);
  if (l < n) snprintf(autos + l, n - l, "%s%s", l ? ", " : "", key);
}

/* An integer setting: *out set when the key is a whole number in range;
 * "auto" noted; absent left alone. */
static vl_status int_key(json_t *o, const char *k, const char *path, uint64_t lo, uint64_t hi,
                         uint64_t *out, bool *given, char *autos, size_t an, struct vl_err *err) {
  json_t *v = json_object_get(o, k);
  if (given) *given = false;
  if (!v) return VL_OK;
  if (json_is_string(v) && strcmp(json_string_value(v), "auto") == 0) {
    note_auto(autos, an, path);
    return VL_OK;
  }
  if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
      (uint64_t)json_integer_value(v) > hi)
    return vl__fail(err, VL_EKEY, "'%s': expected a whole number from %llu to %llu, or \"auto\"",
                    path, (unsigned long long)lo, (unsigned long long)hi);
  *out = (uint64_t)json_integer_value(v);
  if (given) *given = true;
  return VL_OK;
}

/* "enabled" of a precision section: 1 true, 0 false or absent, -1 auto;
 * anything else (a string "true", a number) is refused, never read as
 * false. */
static vl_status enabled(json_t *o, const char *sec, int *out, struct vl_err *err) {
  json_t *s = json_object_get(o, sec), *e = json_object_get(s, "enabled");
  *out = 0;
  if (s && !json_is_object(s)) return vl__fail(err, VL_EKEY, "'%s': expected an object", sec);
  if (!e) return VL_OK;
  if (json_is_string(e) && strcmp(json_string_value(e), "auto") == 0)
    *out = -1;
  else if (json_is_boolean(e))
    *out = json_is_true(e);
  else
    return vl__fail(err, VL_EKEY, "'%s.enabled': expected true, false or \"auto\"", sec);
  return VL_OK;
}

/* zero_optimization.K.device: "cpu" and "nvme" offload, "none" (or no
 * device) does not; another value is refused (DeepSpeed's reference names
 * these three). */
static vl_status offloaded(json_t *zero, const char *k, bool *out, struct vl_err *err) {
  json_t *sec = json_object_get(zero, k), *d = json_object_get(sec, "device");
  *out = false;
  if (sec && !json_is_object(sec))
    return vl__fail(err, VL_EKEY, "'zero_optimization.%s': expected an object", k);
  if (!d) return VL_OK;
  const char *v = json_string_value(d);
  if (!v || (strcmp(v, "cpu") && strcmp(v, "nvme") && strcmp(v, "none")))
    return vl__fail(err, VL_EKEY, "'zero_optimization.%s.device': expected one of: cpu, nvme, none",
                    k);
  *out = strcmp(v, "none") != 0;
  return VL_OK;
}

vl_status vl_job_apply_deepspeed(const char *text, size_t len, struct vl_job *job, char *autos,
                                 size_t autos_len, struct vl_err *err) {
  autos[0] = '\0';
  json_error_t je;
  json_t *o = json_loadb(text, len, 0, &je);
  if (!o) return vl__fail(err, VL_EPARSE, "line %d, column %d: %s", je.line, je.column, je.text);
  vl_status s = VL_OK;
  if (!json_is_object(o)) {
    s = vl__fail(err, VL_EKEY, "expected a JSON object (a DeepSpeed configuration)");
    goto out;
  }
  uint64_t micro = job->batch, accum = job->grad_accum, total = 0, stage = job->zero;
  bool have_micro, have_accum, have_total;
  if ((s = int_key(o, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", 1,
                   1u << 20, &micro, &have_micro, autos, autos_len, err)) ||
      (s = int_key(o, "gradient_accumulation_steps", "gradient_accumulation_steps", 1, 65536,
                   &accum, &have_accum, autos, autos_len, err)) ||
      (s = int_key(o, "train_batch_size", "train_batch_size", 1, 1u << 30, &total, &have_total,
                   autos, autos_len, err)))
    goto out;
  if (have_total && !(have_micro && have_accum)) {
    /* DeepSpeed derives the missing one from the other two and the ranks;
     * without the ranks here it stays as the job had it */
    note_auto(autos, autos_len, "train_batch_size (micro-batch or accumulation not given)");
  } else if (have_total) {
    if (total % (micro * accum)) {
      s = vl__fail(err, VL_EKEY,
                   "train_batch_size %llu is not train_micro_batch_size_per_gpu %llu x "
                   "gradient_accumulation_steps %llu x the number of ranks",
                   (unsigned long long)total, (unsigned long long)micro, (unsigned long long)accum);
      goto out;
    }
    job->dp = total / (micro * accum);
  }
  job->batch = micro;
  job->grad_accum = accum;
  json_t *zero = json_object_get(o, "zero_optimization");
  if (zero && !json_is_object(zero)) {
    s = vl__fail(err, VL_EKEY, "'zero_optimization': expected an object");
    goto out;
  }
  if (zero) {
    if ((s = int_key(zero, "stage", "zero_optimization.stage", 0, 3, &stage, NULL, autos, autos_len,
                     err)))
      goto out;
    job->zero = (unsigned)stage;
    bool param = false, opt = false;
    if ((s = offloaded(zero, "offload_param", &param, err)) ||
        (s = offloaded(zero, "offload_optimizer", &opt, err)))
      goto out;
    job->offload = param ? VL_OFFLOAD_FULL : opt ? VL_OFFLOAD_OPTIMIZER : VL_OFFLOAD_NONE;
  } else {
    job->zero = 0; /* DeepSpeed's default */
    job->offload = VL_OFFLOAD_NONE;
  }
  int bf = 0, fp = 0;
  if ((s = enabled(o, "bf16", &bf, err)) || (s = enabled(o, "fp16", &fp, err))) goto out;
  if (bf < 0 || fp < 0)
    note_auto(autos, autos_len, "bf16/fp16.enabled");
  else if (bf && fp) {
    s = vl__fail(err, VL_EKEY, "bf16.enabled and fp16.enabled are both true");
    goto out;
  } else
    job->precision = bf ? VL_PREC_MIXED_BF16 : fp ? VL_PREC_MIXED_FP16 : VL_PREC_FP32;
  json_t *otv = json_object_get(json_object_get(o, "optimizer"), "type");
  const char *ot = json_string_value(otv);
  if (otv && !ot) {
    s = vl__fail(err, VL_EKEY, "'optimizer.type': expected a string (Adam, AdamW, ...)");
    goto out;
  }
  if (ot) {
    static const struct {
      const char *ds;
      enum vl_optimizer opt;
    } map[] = {{"Adam", VL_OPT_ADAMW}, /* adam_w_mode is DeepSpeed's default */
               {"AdamW", VL_OPT_ADAMW},   {"FusedAdam", VL_OPT_ADAMW},
               {"CPUAdam", VL_OPT_ADAMW}, {"DeepSpeedCPUAdam", VL_OPT_ADAMW},
               {"Lion", VL_OPT_LION},     {"SGD", VL_OPT_SGD}};
    size_t i = 0, n = sizeof map / sizeof map[0];
    while (i < n && strcasecmp(map[i].ds, ot) != 0)
      i++;
    if (i == n) {
      s = vl__fail(err, VL_EKEY,
                   "optimizer.type '%.40s': vramledger does not know what state it keeps (Adam, "
                   "AdamW, FusedAdam, CPUAdam, Lion, SGD are known)",
                   ot);
      goto out;
    }
    job->optimizer = map[i].opt;
    json_t *mom =
        json_object_get(json_object_get(json_object_get(o, "optimizer"), "params"), "momentum");
    if (job->optimizer == VL_OPT_SGD && json_is_number(mom) && json_number_value(mom) > 0)
      job->optimizer = VL_OPT_SGD_MOMENTUM;
  }
  job->framework = VL_FW_DEEPSPEED;
out:
  json_decref(o);
  return s;
}
