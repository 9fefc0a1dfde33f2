/* Commitment reader and the drift between a job and its baseline. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/commitment.h"

static vl_status key_u64(json_t *o, const char *k, uint64_t lo, uint64_t hi, uint64_t *out,
                         bool required, struct vl_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    if (required) return vl__fail(err, VL_EKEY, "missing key '%s'", k);
    return VL_OK;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
      (uint64_t)json_integer_value(v) > hi)
    return vl__fail(err, VL_EKEY, "key '%s': expected an integer in [%llu, %llu]", k,
                    (unsigned long long)lo, (unsigned long long)hi);
  *out = (uint64_t)json_integer_value(v);
  return VL_OK;
}

#define TRY(x)                                                                                     \
  do {                                                                                             \
    vl_status s_ = (x);                                                                            \
    if (s_ != VL_OK) return s_;                                                                    \
  } while (0)

#define ENUM_KEY(key, parse, field)                                                                \
  do {                                                                                             \
    json_t *v_ = json_object_get(o, key);                                                          \
    if (v_ && (!json_is_string(v_) || !parse(json_string_value(v_), &job->field)))                 \
      return vl__fail(err, VL_EKEY, "key '%s': unknown value", key);                               \
  } while (0)

static vl_status settings(json_t *o, struct vl_job *job, char *targets, size_t tl,
                          struct vl_err *err) {
  if (!json_is_object(o)) return vl__fail(err, VL_EKEY, "settings: expected an object");
  vl_job_init(job);
  json_t *t = json_object_get(o, "task");
  if (t && (!json_is_string(t) ||
            (strcmp(json_string_value(t), "train") && strcmp(json_string_value(t), "infer"))))
    return vl__fail(err, VL_EKEY, "key 'task': expected \"train\" or \"infer\"");
  if (t) job->task = strcmp(json_string_value(t), "infer") == 0 ? VL_TASK_INFER : VL_TASK_TRAIN;
  TRY(key_u64(o, "batch", 1, 1u << 20, &job->batch, true, err));
  TRY(key_u64(o, "seq", 1, 1u << 24, &job->seq, true, err));
  TRY(key_u64(o, "grad_accum", 1, 65536, &job->grad_accum, false, err));
  TRY(key_u64(o, "lora_rank", 0, 65536, &job->lora_rank, false, err));
  TRY(key_u64(o, "dp", 1, 65536, &job->dp, false, err));
  TRY(key_u64(o, "tp", 1, 1024, &job->tp, false, err));
  TRY(key_u64(o, "pp", 1, 1024, &job->pp, false, err));
  TRY(key_u64(o, "new_tokens", 0, 1u << 24, &job->new_tokens, false, err));
  uint64_t zero = 0;
  TRY(key_u64(o, "zero", 0, 3, &zero, false, err));
  job->zero = (unsigned)zero;
  ENUM_KEY("precision", vl_precision_parse, precision);
  ENUM_KEY("optimizer", vl_optimizer_parse, optimizer);
  ENUM_KEY("optimizer_impl", vl_opt_impl_parse, opt_impl);
  job->opt_impl_given = json_object_get(o, "optimizer_impl") != NULL;
  ENUM_KEY("loop", vl_loop_parse, loop);
  ENUM_KEY("attention", vl_attention_parse, attention);
  ENUM_KEY("checkpointing", vl_ckpt_parse, checkpointing);
  ENUM_KEY("allocator", vl_allocator_parse, allocator);
  json_t *b;
  if ((b = json_object_get(o, "sp"))) job->sp = json_is_true(b);
  if ((b = json_object_get(o, "qlora"))) job->qlora = json_is_true(b);
  if ((b = json_object_get(o, "master_grads_fp32"))) job->master_grads_fp32 = json_is_true(b);
  const char *fw = json_string_value(json_object_get(o, "framework"));
  for (int i = 0; fw && i < VL_FW_COUNT; i++)
    if (strcmp(fw, vl_framework_name((enum vl_framework)i)) == 0)
      job->framework = (enum vl_framework)i;
  const char *off = json_string_value(json_object_get(o, "offload"));
  for (int i = 0; off && i < VL_OFFLOAD_COUNT; i++)
    if (strcmp(off, vl_offload_name((enum vl_offload)i)) == 0) job->offload = (enum vl_offload)i;
  const char *lt = json_string_value(json_object_get(o, "lora_targets"));
  snprintf(targets, tl, "%s", lt ? lt : "");
  for (char *p = targets; p && *p && job->n_lora_targets < VL_MAX_LORA_TARGETS;) {
    job->lora_targets[job->n_lora_targets++] = p;
    p = strchr(p, ',');
    if (p) *p++ = '\0';
  }
  return VL_OK;
}

vl_status vl_job_from_settings(const char *text, size_t len, struct vl_job *job, char *targets,
                               size_t tl, struct vl_err *err) {
  json_error_t je;
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!o) return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column, je.text);
  json_t *inner = json_object_get(o, "settings"); /* estimate's whole output works too */
  vl_status s = settings(inner ? inner : o, job, targets, tl, err);
  json_decref(o);
  return s;
}

static double num(json_t *o, const char *k, double def) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : def;
}

vl_status vl_commitment_parse(const char *text, size_t len, struct vl_commitment *c,
                              struct vl_err *err) {
  memset(c, 0, sizeof *c);
  json_error_t je;
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!o) return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column, je.text);
  vl_status s = VL_OK;
  const char *schema = json_string_value(json_object_get(o, "schema"));
  json_t *hw = json_object_get(o, "hardware"), *est = json_object_get(o, "estimate");
  json_t *model = json_object_get(o, "model");
  if (!schema || strcmp(schema, VL_COMMITMENT_SCHEMA) != 0) {
    s = vl__fail(err, VL_EKEY, "not a commitment (schema '%s', expected '%s')",
                 schema ? schema : "missing", VL_COMMITMENT_SCHEMA);
    goto done;
  }
  if (!json_is_string(model) || !json_is_object(hw) || !json_is_object(est)) {
    s = vl__fail(err, VL_EKEY, "a commitment needs 'model', 'hardware' and 'estimate'");
    goto done;
  }
  snprintf(c->model, sizeof c->model, "%s", json_string_value(model));
  s = settings(json_object_get(o, "baseline"), &c->job, c->lora_targets, sizeof c->lora_targets,
               err);
  if (s != VL_OK) {
    char m[sizeof err->msg];
    snprintf(m, sizeof m, "%s", err ? err->msg : "");
    s = vl__fail(err, s, "baseline: %s", m);
    goto done;
  }
  const char *g = json_string_value(json_object_get(hw, "gpu"));
  if (!g) {
    s = vl__fail(err, VL_EKEY, "hardware: missing key 'gpu'");
    goto done;
  }
  snprintf(c->gpu, sizeof c->gpu, "%s", g);
  if ((s = key_u64(hw, "gpu_memory_bytes", 1, UINT64_MAX / 2, &c->gpu_memory_bytes, true, err)) ||
      (s = key_u64(hw, "count", 1, 1u << 24, &c->gpus, true, err)) ||
      (s = key_u64(est, "peak_allocated_bytes", 1, UINT64_MAX / 2, &c->est_allocated_bytes, true,
                   err)) ||
      (s = key_u64(est, "peak_reserved_bytes", 1, UINT64_MAX / 2, &c->est_reserved_bytes, true,
                   err)) ||
      (s = key_u64(est, "total_bytes", 1, UINT64_MAX / 2, &c->est_total_bytes, true, err)) ||
      (s = key_u64(est, "other_total_bytes", 1, UINT64_MAX / 2, &c->est_other_total_bytes, false,
                   err)))
    goto done;
  c->margin = num(hw, "margin", 0.10);
  json_t *meas = json_object_get(o, "measured");
  if (json_is_object(meas)) {
    c->measured = true;
    if ((s = key_u64(meas, "peak_process_bytes", 0, UINT64_MAX / 2, &c->measured_process_bytes,
                     true, err)))
      goto done;
    const char *run = json_string_value(json_object_get(meas, "record"));
    snprintf(c->measured_run, sizeof c->measured_run, "%s", run ? run : "");
  }
  c->sla_tokens_per_s = num(json_object_get(o, "sla"), "tokens_per_s", 0.0);
  c->gpu_hours = num(json_object_get(o, "audit"), "gpu_hours", 0.0);
  c->audit_tolerance = num(json_object_get(o, "audit"), "tolerance", 0.05);
  c->peak_trigger = num(json_object_get(o, "triggers"), "peak_over_commitment", 1.05);
  c->tput_trigger = num(json_object_get(o, "triggers"), "throughput_under_sla", 0.80);
  if (c->margin < 0 || c->margin >= 1 || c->audit_tolerance <= 0 || c->peak_trigger < 1 ||
      !(c->tput_trigger > 0 && c->tput_trigger <= 1))
    s = vl__fail(err, VL_EKEY,
                 "margin, audit tolerance, peak trigger or throughput trigger out of range");
done:
  json_decref(o);
  return s;
}

static void add(struct vl_drift *out, int cap, int *n, const char *field, const char *a,
                const char *b) {
  if (*n < cap) {
    snprintf(out[*n].field, sizeof out[*n].field, "%s", field);
    snprintf(out[*n].committed, sizeof out[*n].committed, "%s", a);
    snprintf(out[*n].now, sizeof out[*n].now, "%s", b);
  }
  (*n)++;
}

static void addu(struct vl_drift *out, int cap, int *n, const char *field, uint64_t a, uint64_t b) {
  if (a == b) return;
  char x[32], y[32];
  snprintf(x, sizeof x, "%llu", (unsigned long long)a);
  snprintf(y, sizeof y, "%llu", (unsigned long long)b);
  add(out, cap, n, field, x, y);
}

static void adds(struct vl_drift *out, int cap, int *n, const char *field, const char *a,
                 const char *b) {
  if (strcmp(a ? a : "", b ? b : "") != 0) add(out, cap, n, field, a ? a : "", b ? b : "");
}

static void targets(const struct vl_job *j, char *buf, size_t n) {
  buf[0] = '\0';
  size_t o = 0;
  for (int i = 0; i < j->n_lora_targets; i++) {
    int w = snprintf(buf + o, n - o, "%s%s", i ? "," : "", j->lora_targets[i]);
    if (w < 0 || (size_t)w >= n - o) break;
    o += (size_t)w;
  }
}

int vl_commitment_diff(const struct vl_commitment *c, const struct vl_job *j, struct vl_drift *out,
                       int cap) {
  const struct vl_job *b = &c->job;
  int n = 0;
  adds(out, cap, &n, "task", b->task == VL_TASK_INFER ? "infer" : "train",
       j->task == VL_TASK_INFER ? "infer" : "train");
  addu(out, cap, &n, "batch", b->batch, j->batch);
  addu(out, cap, &n, "seq", b->seq, j->seq);
  addu(out, cap, &n, "grad-accum", b->grad_accum, j->grad_accum);
  adds(out, cap, &n, "precision", vl_precision_name(b->precision), vl_precision_name(j->precision));
  adds(out, cap, &n, "optimizer", vl_optimizer_name(b->optimizer), vl_optimizer_name(j->optimizer));
  adds(out, cap, &n, "optimizer-impl", vl_opt_impl_name(b->opt_impl),
       vl_opt_impl_name(j->opt_impl));
  adds(out, cap, &n, "attention", vl_attention_name(b->attention), vl_attention_name(j->attention));
  adds(out, cap, &n, "checkpointing", vl_ckpt_name(b->checkpointing),
       vl_ckpt_name(j->checkpointing));
  adds(out, cap, &n, "framework", vl_framework_name(b->framework), vl_framework_name(j->framework));
  adds(out, cap, &n, "allocator", vl_allocator_name(b->allocator), vl_allocator_name(j->allocator));
  addu(out, cap, &n, "lora-rank", b->lora_rank, j->lora_rank);
  char tb[256], tj[256];
  targets(b, tb, sizeof tb);
  targets(j, tj, sizeof tj);
  adds(out, cap, &n, "lora-targets", tb, tj);
  adds(out, cap, &n, "qlora", b->qlora ? "true" : "false", j->qlora ? "true" : "false");
  addu(out, cap, &n, "zero", b->zero, j->zero);
  addu(out, cap, &n, "dp", b->dp, j->dp);
  addu(out, cap, &n, "tp", b->tp, j->tp);
  addu(out, cap, &n, "pp", b->pp, j->pp);
  adds(out, cap, &n, "sp", b->sp ? "true" : "false", j->sp ? "true" : "false");
  adds(out, cap, &n, "offload", vl_offload_name(b->offload), vl_offload_name(j->offload));
  adds(out, cap, &n, "master-grads", b->master_grads_fp32 ? "fp32" : "half",
       j->master_grads_fp32 ? "fp32" : "half");
  addu(out, cap, &n, "new-tokens", b->new_tokens, j->new_tokens);
  return n;
}

uint64_t vl_commitment_budget_bytes(const struct vl_commitment *c) {
  return c->est_other_total_bytes > c->est_total_bytes ? c->est_other_total_bytes
                                                       : c->est_total_bytes;
}

uint64_t vl_commitment_reference_bytes(const struct vl_commitment *c, uint64_t measured,
                                       bool *other) {
  *other = c->est_other_total_bytes && measured &&
           fabs((double)measured - (double)c->est_other_total_bytes) <
               fabs((double)measured - (double)c->est_total_bytes);
  return *other ? c->est_other_total_bytes : c->est_total_bytes;
}

uint64_t vl_commitment_peak_threshold(const struct vl_commitment *c) {
  uint64_t ref = c->measured && c->measured_process_bytes ? c->measured_process_bytes
                                                          : vl_commitment_budget_bytes(c);
  return (uint64_t)llround((double)ref * c->peak_trigger);
}
