/* Reader of measured runs: the JSON python/vramledger/measure.py writes
 * (schema vramledger.measure/1). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/validate.h"

static void copy_str(char *dst, size_t n, json_t *v) {
  snprintf(dst, n, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static uint64_t get_u(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static void refuse(struct vl_measured_run *r, const char *why, const char *what) {
  r->ok = false;
  snprintf(r->error, sizeof r->error, "%s '%.60s'", why, what);
}

/* Settings of one run -> its job; a setting this version does not know
 * marks the run as not comparable rather than failing the file. */
static void settings(json_t *o, struct vl_measured_run *r) {
  struct vl_job *j = &r->job;
  vl_job_init(j);
  const char *task = json_string_value(json_object_get(o, "task"));
  j->task = task && strcmp(task, "infer") == 0 ? VL_TASK_INFER : VL_TASK_TRAIN;
  j->batch = get_u(o, "batch");
  j->seq = get_u(o, "seq");
  const char *s = json_string_value(json_object_get(o, "precision"));
  if (!s || !vl_precision_parse(s, &j->precision)) {
    refuse(r, "unknown precision", s ? s : "");
    return;
  }
  j->master_grads_fp32 = j->precision == VL_PREC_MIXED_BF16 || j->precision == VL_PREC_MIXED_FP16;
  s = json_string_value(json_object_get(o, "attention"));
  if (!s || !vl_attention_parse(s, &j->attention)) {
    refuse(r, "unknown attention", s ? s : "");
    return;
  }
  if (j->task == VL_TASK_INFER) {
    j->new_tokens = get_u(o, "new_tokens");
    return;
  }
  s = json_string_value(json_object_get(o, "optimizer"));
  if (!s || !vl_optimizer_parse(s, &j->optimizer)) {
    refuse(r, "unknown optimizer", s ? s : "");
    return;
  }
  s = json_string_value(json_object_get(o, "optimizer_impl"));
  if (!s || !vl_opt_impl_parse(s, &j->opt_impl)) {
    refuse(r, "unknown optimizer_impl", s ? s : "");
    return;
  }
  s = json_string_value(json_object_get(o, "checkpointing"));
  if (!s || !vl_ckpt_parse(s, &j->checkpointing)) {
    refuse(r, "unknown checkpointing", s ? s : "");
    return;
  }
  /* an encoder-decoder's decoder tokens and a vision model's image side
   * (measure.py's target_seq, image_size; absent: seq, the config's) */
  if (json_object_get(o, "target_seq")) j->target_seq = get_u(o, "target_seq");
  if (json_object_get(o, "image_size")) j->image_size = get_u(o, "image_size");
  /* gradient accumulation: micro-batches a step (measure.py's grad_accum) */
  if (json_object_get(o, "grad_accum")) j->grad_accum = get_u(o, "grad_accum");
  if (!j->grad_accum) {
    refuse(r, "grad_accum must be 1 or more", "0");
    return;
  }
  /* data parallelism (bench/accuracy/ddp_outcomes.py measured): ranks, ZeRO stage, DDP's
   * static_graph, and a loop that keeps only the loss */
  if (json_object_get(o, "dp")) j->dp = get_u(o, "dp");
  if (!j->dp) {
    refuse(r, "dp must be 1 or more", "0");
    return;
  }
  j->zero = (unsigned)get_u(o, "zero");
  if (j->zero > 3) {
    refuse(r, "zero must be 0 to 3", "");
    return;
  }
  j->ddp_static_graph = json_is_true(json_object_get(o, "ddp_static_graph"));
  j->drop_outputs = json_is_true(json_object_get(o, "drop_outputs"));
  j->lora_rank = get_u(o, "lora");
  const char *lt = json_string_value(json_object_get(o, "lora_targets"));
  if (j->lora_rank && (!lt || !*lt)) lt = "q_proj,v_proj"; /* PEFT's default */
  struct vl__list l; /* the names point into r->lora_targets */
  if (!vl__list_init_in(&l, lt ? lt : "", ',', r->lora_targets, sizeof r->lora_targets)) {
    refuse(r, "lora_targets too long to compare", lt); /* never cut: a cut name is another */
    return;
  }
  for (char *p; j->lora_rank && (p = vl__list_next(&l, NULL));) {
    if (j->n_lora_targets == VL_MAX_LORA_TARGETS) { /* never dropped: the bill would change */
      refuse(r, "more lora_targets than the estimate takes", lt);
      return;
    }
    j->lora_targets[j->n_lora_targets++] = p;
  }
}

vl_status vl_measured_parse(const char *text, size_t len, struct vl_measured *m,
                            struct vl_err *err) {
  memset(m, 0, sizeof *m);
  json_error_t jerr;
  json_t *root = json_loadb(text, len, 0, &jerr);
  if (!root)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
  vl_status st = VL_OK;
  json_t *runs = json_object_get(root, "runs");
  if (!json_is_array(runs) || json_array_size(runs) > 100000) {
    st = vl__fail(err, VL_EKEY, "expected an array 'runs' (a file written by measure.py)");
    goto done;
  }
  copy_str(m->device, sizeof m->device, json_object_get(root, "device"));
  copy_str(m->torch, sizeof m->torch, json_object_get(root, "torch"));
  copy_str(m->cuda, sizeof m->cuda, json_object_get(root, "cuda"));
  copy_str(m->transformers, sizeof m->transformers, json_object_get(root, "transformers"));
  copy_str(m->date, sizeof m->date, json_object_get(root, "date"));
  const char *conf = json_string_value(json_object_get(root, "alloc_conf"));
  bool expandable = conf && strstr(conf, "expandable_segments:True") != NULL;
  /* "in_process": every run in one Python process (measure.py --in-process,
   * --configs): a block an earlier run left cached pins its segment, so a
   * later run's reserved and process memory are not its own */
  bool shared = json_is_true(json_object_get(root, "in_process"));
  m->runs = vl_calloc(json_array_size(runs) + 1, sizeof *m->runs);
  if (!m->runs) {
    st = vl__fail(err, VL_ENOMEM, "out of memory reading the runs");
    goto done;
  }
  size_t i;
  json_t *o;
  json_array_foreach(runs, i, o) {
    struct vl_measured_run *r = &m->runs[i];
    if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")) ||
        !json_is_string(json_object_get(o, "model"))) {
      st = vl__fail(err, VL_EKEY, "runs[%zu]: expected an object with 'name' and 'model'", i);
      break;
    }
    copy_str(r->name, sizeof r->name, json_object_get(o, "name"));
    copy_str(r->model, sizeof r->model, json_object_get(o, "model"));
    r->holdout = json_is_true(json_object_get(o, "holdout"));
    r->shared_process = shared && i > 0;
    r->host_shared = json_is_true(json_object_get(o, "host_shared"));
    r->ok = true;
    settings(o, r);
    if (expandable) r->job.allocator = VL_ALLOC_EXPANDABLE;
    json_t *meas = json_object_get(o, "measured");
    if (r->ok && !json_is_object(meas)) {
      r->ok = false;
      copy_str(r->error, sizeof r->error, json_object_get(o, "error"));
      if (!r->error[0]) snprintf(r->error, sizeof r->error, "not measured");
    }
    if (r->ok) {
      r->peak_allocated = get_u(meas, "peak_allocated");
      r->peak_reserved = get_u(meas, "peak_reserved");
      r->nvml_process = get_u(meas, "nvml_process");
      r->phase_peak[0] = get_u(meas, "peak_forward");
      r->phase_peak[1] = get_u(meas, "peak_backward");
      r->phase_peak[2] = get_u(meas, "peak_optimizer");
      json_t *sv = json_object_get(meas, "step_median_s");
      if (!json_is_number(sv)) sv = json_object_get(meas, "step_s");
      r->step_s = json_is_number(sv) && json_number_value(sv) > 0 ? json_number_value(sv) : 0;
      if (!r->peak_allocated || !r->job.batch || !r->job.seq)
        refuse(r, "incomplete measurement", r->name);
    }
    m->n = i + 1;
  }
  if (st != VL_OK) vl_measured_release(m);
done:
  json_decref(root);
  return st;
}

void vl_measured_release(struct vl_measured *m) {
  if (!m) return;
  vl_free(m->runs);
  m->runs = NULL;
  m->n = 0;
}
