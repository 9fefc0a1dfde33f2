/* Commitment reader and the drift between a job and its baseline. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
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

/* A token of a file in a message: at most max bytes of it (of s[0..len)),
 * printable ASCII as it is, other bytes (and quote, the message's quote
 * around it) as \xNN, "..." when cut. A message
 * never echoes more of a file than the token it refuses. */
static void token_excerpt(const char *s, size_t len, size_t max, char quote, char *out, size_t n) {
  size_t o = 0, i = 0;
  for (; i < len && i < max && o + 5 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != quote && c != '\\')
      out[o++] = (char)c;
    else
      o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
  }
  out[o] = '\0';
  if (i < len && o + 4 < n) memcpy(out + o, "...", 4);
}

/* jansson's message with the token it quotes ("... near 'TOKEN'") cut
 * to an escaped excerpt of 16 bytes: a message never echoes a file's
 * content (a commitment may name /proc/self/environ as its config). */
static const char *json_why(const char *text, char *out, size_t n) {
  const char *near = strstr(text, " near '");
  if (!near) {
    snprintf(out, n, "%s", text);
    return out;
  }
  const char *t = near + 7, *q = strrchr(t, '\'');
  char shown[80];
  token_excerpt(t, q ? (size_t)(q - t) : strlen(t), 16, '\'', shown, sizeof shown);
  snprintf(out, n, "%.*s near '%s'", (int)(near - text), text, shown);
  return out;
}

/* The values of an enum the files spell, "a, b, c", into buf. */
static const char *names_list(const char *(*name)(int), int count, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && o < n; i++) {
    int w = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", name(i));
    if (w < 0) break;
    o += (size_t)w;
  }
  return buf;
}

/* Key k of o, when there, one of name(0..count): its index in *out. Any
 * other value is refused with the allowed ones, never read as a default
 * (a gate would pass on what it assumed). The value is quoted cut. */
static vl_status key_enum(json_t *o, const char *k, const char *(*name)(int), int count, int *out,
                          struct vl_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v) return VL_OK;
  const char *s = json_string_value(v);
  for (int i = 0; s && i < count; i++)
    if (strcmp(s, name(i)) == 0) {
      *out = i;
      return VL_OK;
    }
  char list[256];
  names_list(name, count, list, sizeof list);
  if (!s) return vl__fail(err, VL_EKEY, "key '%s': expected a string, one of: %s", k, list);
  char shown[160];
  token_excerpt(s, strlen(s), 32, '"', shown, sizeof shown);
  return vl__fail(err, VL_EKEY, "key '%s': \"%s\" is not one of: %s", k, shown, list);
}

/* Key k of o, when there, true or false (never a string or a number). */
static vl_status key_bool(json_t *o, const char *k, bool *out, struct vl_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v) return VL_OK;
  if (!json_is_boolean(v)) return vl__fail(err, VL_EKEY, "key '%s': expected true or false", k);
  *out = json_is_true(v);
  return VL_OK;
}

/* Every key of o is one of known[] (NULL-terminated): vramledger's own
 * files are read whole, so a key it does not know (a misspelt setting) is
 * refused rather than left at its default. */
static vl_status known_keys(json_t *o, const char *where, const char *const *known,
                            struct vl_err *err) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    size_t i = 0;
    while (known[i] && strcmp(known[i], k))
      i++;
    if (known[i]) continue;
    char list[640] = "", shown[160];
    for (size_t j = 0, n = 0; known[j] && n < sizeof list; j++) {
      int w = snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", known[j]);
      if (w < 0) break;
      n += (size_t)w;
    }
    token_excerpt(k, strlen(k), 32, '"', shown, sizeof shown);
    return vl__fail(err, VL_EKEY, "%s%s\"%s\" is not a key vramledger knows; the keys: %s", where,
                    where[0] ? ": " : "", shown, list);
  }
  return VL_OK;
}

/* the library's name functions take enums */
static const char *n_prec(int i) { return vl_precision_name((enum vl_precision)i); }
static const char *n_opt(int i) { return vl_optimizer_name((enum vl_optimizer)i); }
static const char *n_impl(int i) { return vl_opt_impl_name((enum vl_opt_impl)i); }
static const char *n_loop(int i) { return vl_loop_name((enum vl_loop)i); }
static const char *n_attn(int i) { return vl_attention_name((enum vl_attention)i); }
static const char *n_ckpt(int i) { return vl_ckpt_name((enum vl_ckpt)i); }
static const char *n_alloc(int i) { return vl_allocator_name((enum vl_allocator)i); }
static const char *n_fw(int i) { return vl_framework_name((enum vl_framework)i); }
static const char *n_off(int i) { return vl_offload_name((enum vl_offload)i); }
static const char *n_kv(int i) { return vl_kv_layout_name((enum vl_kv_layout)i); }
static const char *n_task(int i) { return i == 0 ? "train" : "infer"; }
static const char *n_sched(int i) { return i == 0 ? "1f1b" : "gpipe"; }

/* The keys of a job's settings: what vl__settings_json writes, and an
 * inference job's kv_block_tokens (a commitment's baseline). */
static const char *const settings_keys[] = {"task",
                                            "batch",
                                            "seq",
                                            "image_size",
                                            "target_seq",
                                            "precision",
                                            "attention",
                                            "grad_accum",
                                            "optimizer",
                                            "optimizer_impl",
                                            "loop",
                                            "checkpointing",
                                            "framework",
                                            "lora_rank",
                                            "qlora",
                                            "zero",
                                            "offload",
                                            "new_tokens",
                                            "kv_layout",
                                            "kv_bytes_per_element",
                                            "kv_block_tokens",
                                            "dp",
                                            "tp",
                                            "pp",
                                            "sp",
                                            "lora_targets",
                                            "master_grads_fp32",
                                            "allocator",
                                            "keep_grads",
                                            "drop_outputs",
                                            "ddp_static_graph",
                                            "pp_schedule",
                                            NULL};

#define ENUM_KEY(key, name, count, field)                                                          \
  do {                                                                                             \
    int k_ = (int)job->field;                                                                      \
    TRY(key_enum(o, key, name, count, &k_, err));                                                  \
    job->field = (__typeof__(job->field))k_;                                                       \
  } while (0)

static vl_status enums(json_t *o, struct vl_job *job, struct vl_err *err) {
  int task = 0, sched = 0;
  TRY(key_enum(o, "task", n_task, 2, &task, err));
  job->task = task ? VL_TASK_INFER : VL_TASK_TRAIN;
  ENUM_KEY("precision", n_prec, VL_PREC_COUNT, precision);
  ENUM_KEY("optimizer", n_opt, VL_OPT_COUNT, optimizer);
  ENUM_KEY("optimizer_impl", n_impl, VL_IMPL_COUNT, opt_impl);
  job->opt_impl_given = json_object_get(o, "optimizer_impl") != NULL;
  ENUM_KEY("loop", n_loop, VL_LOOP_COUNT, loop);
  ENUM_KEY("attention", n_attn, VL_ATTN_COUNT, attention);
  ENUM_KEY("checkpointing", n_ckpt, VL_CKPT_COUNT, checkpointing);
  ENUM_KEY("allocator", n_alloc, VL_ALLOC_COUNT, allocator);
  ENUM_KEY("framework", n_fw, VL_FW_COUNT, framework);
  ENUM_KEY("offload", n_off, VL_OFFLOAD_COUNT, offload);
  ENUM_KEY("kv_layout", n_kv, VL_KV_COUNT, kv_layout);
  TRY(key_enum(o, "pp_schedule", n_sched, 2, &sched, err));
  job->pp_gpipe = sched == 1;
  return VL_OK;
}

static vl_status settings(json_t *o, struct vl_job *job, char *targets, size_t tl,
                          struct vl_err *err) {
  if (!json_is_object(o)) return vl__fail(err, VL_EKEY, "settings: expected an object");
  vl_job_init(job);
  TRY(known_keys(o, "", settings_keys, err));
  TRY(enums(o, job, err));
  TRY(key_u64(o, "batch", 1, 1u << 20, &job->batch, true, err));
  TRY(key_u64(o, "seq", 1, 1u << 24, &job->seq, true, err));
  TRY(key_u64(o, "image_size", 1, 1u << 16, &job->image_size, false, err));
  TRY(key_u64(o, "target_seq", 1, 1u << 24, &job->target_seq, false, err));
  TRY(key_u64(o, "grad_accum", 1, 65536, &job->grad_accum, false, err));
  TRY(key_u64(o, "lora_rank", 0, 65536, &job->lora_rank, false, err));
  TRY(key_u64(o, "dp", 1, 65536, &job->dp, false, err));
  TRY(key_u64(o, "tp", 1, 1024, &job->tp, false, err));
  TRY(key_u64(o, "pp", 1, 1024, &job->pp, false, err));
  TRY(key_u64(o, "new_tokens", 0, 1u << 24, &job->new_tokens, false, err));
  uint64_t zero = 0;
  TRY(key_u64(o, "zero", 0, 3, &zero, false, err));
  job->zero = (unsigned)zero;
  TRY(key_u64(o, "kv_bytes_per_element", 0, 8, &job->kv_bytes, false, err));
  TRY(key_u64(o, "kv_block_tokens", 1, 4096, &job->kv_block_tokens, false, err));
  TRY(key_bool(o, "keep_grads", &job->grads_persist, err));
  TRY(key_bool(o, "drop_outputs", &job->drop_outputs, err));
  TRY(key_bool(o, "ddp_static_graph", &job->ddp_static_graph, err));
  TRY(key_bool(o, "sp", &job->sp, err));
  TRY(key_bool(o, "qlora", &job->qlora, err));
  TRY(key_bool(o, "master_grads_fp32", &job->master_grads_fp32, err));
  json_t *ltv = json_object_get(o, "lora_targets");
  if (ltv && !json_is_string(ltv))
    return vl__fail(err, VL_EKEY, "key 'lora_targets': expected a string of module names");
  const char *lt = json_string_value(ltv);
  struct vl__list l; /* the names point into targets, which the caller keeps */
  if (!vl__list_init_in(&l, lt ? lt : "", ',', targets, tl)) /* never cut: a cut name is another */
    return vl__fail(err, VL_EKEY, "key 'lora_targets': longer than %zu bytes", tl ? tl - 1 : 0);
  for (char *p; (p = vl__list_next(&l, NULL));) {
    if (job->n_lora_targets == VL_MAX_LORA_TARGETS) /* never dropped: the bill would change */
      return vl__fail(err, VL_EKEY, "key 'lora_targets': at most %d module names",
                      VL_MAX_LORA_TARGETS);
    job->lora_targets[job->n_lora_targets++] = p;
  }
  return VL_OK;
}

vl_status vl_job_from_settings(const char *text, size_t len, struct vl_job *job, char *targets,
                               size_t tl, struct vl_err *err) {
  json_error_t je;
  char why[sizeof je.text + 16];
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!o)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column,
                    json_why(je.text, why, sizeof why));
  json_t *inner = json_object_get(o, "settings"); /* estimate's whole output works too */
  vl_status s = settings(inner ? inner : o, job, targets, tl, err);
  json_decref(o);
  return s;
}

/* Key part.k of o, when there, a number (never a string read as the
 * default): into *out, else def. */
static vl_status key_num(json_t *o, const char *part, const char *k, double def, double *out,
                         struct vl_err *err) {
  json_t *v = json_object_get(json_object_get(o, part), k);
  *out = def;
  if (!v) return VL_OK;
  if (!json_is_number(v)) return vl__fail(err, VL_EKEY, "key '%s.%s': expected a number", part, k);
  *out = json_number_value(v);
  return VL_OK;
}

/* The keys of a commitment, object by object, as lib/render/commitment.c
 * writes them: one it does not know (a misspelt trigger, a setting put in
 * the wrong object) is refused, never passed over. */
static const char *const top_keys[] = {
    "schema",   "created",      "vramledger", "model",    "model_type",
    "params",   "model_config", "hardware",   "baseline", "estimate",
    "measured", "sla",          "triggers",   "audit",    NULL};
static const char *const hw_keys[] = {"gpu",    "gpu_memory_bytes",         "count",
                                      "margin", "min_memory_bytes_per_gpu", NULL};
static const char *const est_keys[] = {
    "peak_allocated_bytes", "peak_reserved_bytes", "total_bytes", "other_total_bytes",
    "parameters_bytes",     "peak_phase",          "source",      NULL};
static const char *const meas_keys[] = {"record", "peak_process_bytes", "peak_cuda_alloc_bytes",
                                        "other_hardware", NULL};
static const char *const sla_keys[] = {"tokens_per_s", "measurement", NULL};
static const char *const trig_keys[] = {"peak_over_commitment", "peak_action",
                                        "throughput_under_sla", "throughput_action", NULL};
static const char *const audit_keys[] = {"gpu_hours", "tolerance", "action", NULL};
static const char *const mc_keys[] = {"sha256", "file", "bundled", "content", NULL};

static vl_status commitment_keys(json_t *o, struct vl_err *err) {
  static const struct {
    const char *name;
    const char *const *keys;
  } parts[] = {{"hardware", hw_keys},    {"estimate", est_keys},  {"measured", meas_keys},
               {"sla", sla_keys},        {"triggers", trig_keys}, {"audit", audit_keys},
               {"model_config", mc_keys}};
  TRY(known_keys(o, "", top_keys, err));
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    json_t *p = json_object_get(o, parts[i].name);
    if (!p) continue;
    if (!json_is_object(p))
      return vl__fail(err, VL_EKEY, "'%s': expected an object", parts[i].name);
    TRY(known_keys(p, parts[i].name, parts[i].keys, err));
  }
  json_t *mt = json_object_get(o, "model_type");
  if (mt && !json_is_string(mt))
    return vl__fail(err, VL_EKEY, "key 'model_type': expected a string");
  json_t *rec = json_object_get(json_object_get(o, "measured"), "record");
  if (rec && !json_is_string(rec))
    return vl__fail(err, VL_EKEY, "key 'measured.record': expected a string");
  return VL_OK;
}

/* model_type, params and model_config: what the model is */
static vl_status identity(json_t *o, struct vl_commitment *c, struct vl_err *err) {
  const char *mt = json_string_value(json_object_get(o, "model_type"));
  snprintf(c->model_type, sizeof c->model_type, "%s", mt ? mt : "");
  TRY(key_u64(o, "params", 0, UINT64_MAX / 2, &c->params, false, err));
  json_t *mc = json_object_get(o, "model_config");
  if (!mc) return VL_OK;
  const char *sha = json_string_value(json_object_get(mc, "sha256"));
  const char *file = json_string_value(json_object_get(mc, "file"));
  const char *bundled = json_string_value(json_object_get(mc, "bundled"));
  if (!json_is_object(mc) || !sha || strlen(sha) != VL_SHA256_HEX - 1 ||
      strspn(sha, "0123456789abcdef") != VL_SHA256_HEX - 1)
    return vl__fail(err, VL_EKEY, "model_config: expected an object with 'sha256' (64 hex digits)");
  if (!file == !bundled)
    return vl__fail(err, VL_EKEY, "model_config: expected one of 'file' and 'bundled'");
  if (strlen(file ? file : bundled) >= (file ? sizeof c->config_file : sizeof c->config_bundled))
    return vl__fail(err, VL_EKEY, "model_config: '%s' is too long", file ? "file" : "bundled");
  c->has_identity = true;
  snprintf(c->config_sha256, sizeof c->config_sha256, "%s", sha);
  snprintf(c->config_file, sizeof c->config_file, "%s", file ? file : "");
  snprintf(c->config_bundled, sizeof c->config_bundled, "%s", bundled ? bundled : "");
  return VL_OK;
}

vl_status vl_commitment_parse(const char *text, size_t len, struct vl_commitment *c,
                              struct vl_err *err) {
  memset(c, 0, sizeof *c);
  json_error_t je;
  char why[sizeof je.text + 16];
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!o)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column,
                    json_why(je.text, why, sizeof why));
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
  if ((s = commitment_keys(o, err))) goto done;
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
  if ((s = key_u64(est, "parameters_bytes", 0, UINT64_MAX / 2, &c->est_params_bytes, false, err)))
    goto done;
  if ((s = identity(o, c, err))) goto done;
  if ((s = key_num(o, "hardware", "margin", VL_FIT_MARGIN_DEFAULT, &c->margin, err))) goto done;
  json_t *meas = json_object_get(o, "measured");
  if (json_is_object(meas)) {
    c->measured = true;
    if ((s = key_u64(meas, "peak_process_bytes", 0, UINT64_MAX / 2, &c->measured_process_bytes,
                     true, err)))
      goto done;
    const char *run = json_string_value(json_object_get(meas, "record"));
    snprintf(c->measured_run, sizeof c->measured_run, "%s", run ? run : "");
  }
  if ((s = key_num(o, "sla", "tokens_per_s", 0.0, &c->sla_tokens_per_s, err)) ||
      (s = key_num(o, "audit", "gpu_hours", 0.0, &c->gpu_hours, err)) ||
      (s = key_num(o, "audit", "tolerance", VL_COMMIT_AUDIT_TOLERANCE, &c->audit_tolerance, err)) ||
      (s = key_num(o, "triggers", "peak_over_commitment", VL_COMMIT_PEAK_TRIGGER, &c->peak_trigger,
                   err)) ||
      (s = key_num(o, "triggers", "throughput_under_sla", VL_COMMIT_TPUT_TRIGGER, &c->tput_trigger,
                   err)))
    goto done;
  /* a tolerance above 100 % would pass every run; a trigger of 10x the
   * committed peak would never fire */
  const struct {
    const char *field, *range;
    double v;
    bool ok;
  } ranges[] = {
      {"margin", "0 to under 1", c->margin, c->margin >= 0 && c->margin < 1},
      {"audit.tolerance", "above 0, at most 1", c->audit_tolerance,
       c->audit_tolerance > 0 && c->audit_tolerance <= 1},
      {"triggers.peak_over_commitment", "1 to 10", c->peak_trigger,
       c->peak_trigger >= 1 && c->peak_trigger <= 10},
      {"triggers.throughput_under_sla", "above 0, at most 1", c->tput_trigger,
       c->tput_trigger > 0 && c->tput_trigger <= 1},
      {"sla.tokens_per_s", "0 or more", c->sla_tokens_per_s, c->sla_tokens_per_s >= 0},
      {"audit.gpu_hours", "0 or more", c->gpu_hours, c->gpu_hours >= 0},
  };
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0] && s == VL_OK; i++)
    if (!ranges[i].ok)
      s = vl__fail(err, VL_EKEY, "%s %g is out of range (%s)", ranges[i].field, ranges[i].v,
                   ranges[i].range);
done:
  json_decref(o);
  return s;
}

static void add(struct vl_drift *out, int cap, int *n, const char *field, const char *a,
                const char *b) {
  if (*n < cap) {
    /* a value longer than the field is shown cut (a path or a name) */
    snprintf(out[*n].field, sizeof out[*n].field, "%.*s", (int)sizeof out[*n].field - 1, field);
    snprintf(out[*n].committed, sizeof out[*n].committed, "%.*s", (int)sizeof out[*n].committed - 1,
             a);
    snprintf(out[*n].now, sizeof out[*n].now, "%.*s", (int)sizeof out[*n].now - 1, b);
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

static const char *yes(bool b) { return b ? "true" : "false"; }

static void kv_dtype(uint64_t bytes, char *buf, size_t n) {
  if (bytes)
    snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
  else
    snprintf(buf, n, "auto");
}

int vl_commitment_diff(const struct vl_commitment *c, const struct vl_job *job,
                       struct vl_drift *out, int cap) {
  /* the job as its loop runs it: a Trainer's fused AdamW is the same
   * whether the loop chose it or --optimizer-impl fused did */
  struct vl_job b, j;
  vl_job_apply_loop(&c->job, &b);
  vl_job_apply_loop(job, &j);
  int n = 0;
  adds(out, cap, &n, "task", b.task == VL_TASK_INFER ? "infer" : "train",
       j.task == VL_TASK_INFER ? "infer" : "train");
  addu(out, cap, &n, "batch", b.batch, j.batch);
  addu(out, cap, &n, "seq", b.seq, j.seq);
  addu(out, cap, &n, "grad-accum", b.grad_accum, j.grad_accum);
  adds(out, cap, &n, "precision", vl_precision_name(b.precision), vl_precision_name(j.precision));
  adds(out, cap, &n, "optimizer", vl_optimizer_name(b.optimizer), vl_optimizer_name(j.optimizer));
  adds(out, cap, &n, "optimizer-impl", vl_opt_impl_name(b.opt_impl), vl_opt_impl_name(j.opt_impl));
  adds(out, cap, &n, "loop", vl_loop_name(b.loop), vl_loop_name(j.loop));
  adds(out, cap, &n, "attention", vl_attention_name(b.attention), vl_attention_name(j.attention));
  adds(out, cap, &n, "checkpointing", vl_ckpt_name(b.checkpointing), vl_ckpt_name(j.checkpointing));
  adds(out, cap, &n, "framework", vl_framework_name(b.framework), vl_framework_name(j.framework));
  adds(out, cap, &n, "allocator", vl_allocator_name(b.allocator), vl_allocator_name(j.allocator));
  adds(out, cap, &n, "keep-grads", yes(b.grads_persist), yes(j.grads_persist));
  adds(out, cap, &n, "drop-outputs", yes(b.drop_outputs), yes(j.drop_outputs));
  adds(out, cap, &n, "ddp-static-graph", yes(b.ddp_static_graph), yes(j.ddp_static_graph));
  addu(out, cap, &n, "lora-rank", b.lora_rank, j.lora_rank);
  char tb[256], tj[256];
  vl_job_lora_targets(&b, tb, sizeof tb);
  vl_job_lora_targets(&j, tj, sizeof tj);
  adds(out, cap, &n, "lora-targets", tb, tj);
  adds(out, cap, &n, "qlora", yes(b.qlora), yes(j.qlora));
  addu(out, cap, &n, "zero", b.zero, j.zero);
  addu(out, cap, &n, "dp", b.dp, j.dp);
  addu(out, cap, &n, "tp", b.tp, j.tp);
  addu(out, cap, &n, "pp", b.pp, j.pp);
  adds(out, cap, &n, "pp-schedule", b.pp_gpipe ? "gpipe" : "1f1b", j.pp_gpipe ? "gpipe" : "1f1b");
  adds(out, cap, &n, "sp", yes(b.sp), yes(j.sp));
  adds(out, cap, &n, "offload", vl_offload_name(b.offload), vl_offload_name(j.offload));
  adds(out, cap, &n, "master-grads", b.master_grads_fp32 ? "fp32" : "half",
       j.master_grads_fp32 ? "fp32" : "half");
  addu(out, cap, &n, "new-tokens", b.new_tokens, j.new_tokens);
  adds(out, cap, &n, "kv-layout", vl_kv_layout_name(b.kv_layout), vl_kv_layout_name(j.kv_layout));
  addu(out, cap, &n, "kv-block", b.kv_block_tokens, j.kv_block_tokens);
  char kb[32], kj[32];
  kv_dtype(b.kv_bytes, kb, sizeof kb);
  kv_dtype(j.kv_bytes, kj, sizeof kj);
  adds(out, cap, &n, "kv-dtype", kb, kj);
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

/* ---- what the model is ------------------------------------------------- */

/* Keys that say where and by what a config was saved, not what the model
 * is: save_pretrained writes _name_or_path (a path), transformers_version,
 * and the hub's loaders _commit_hash and the like. */
static bool bookkeeping(const char *key) {
  return key[0] == '_' || strcmp(key, "transformers_version") == 0;
}

static void strip(json_t *v) {
  const char *k;
  json_t *x, *tmp;
  size_t i;
  if (json_is_object(v)) {
    json_object_foreach_safe(v, tmp, k, x) {
      if (bookkeeping(k))
        json_object_del(v, k);
      else
        strip(x);
    }
  } else if (json_is_array(v)) {
    json_array_foreach(v, i, x) strip(x);
  }
}

#define CANON_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII)

static vl_status load_config(const char *text, size_t len, json_t **out, struct vl_err *err) {
  json_error_t je;
  char why[sizeof je.text + 16];
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!o)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column,
                    json_why(je.text, why, sizeof why));
  if (!json_is_object(o)) {
    json_decref(o);
    return vl__fail(err, VL_EKEY, "a config.json is a JSON object");
  }
  strip(o);
  *out = o;
  return VL_OK;
}

static vl_status dump(const json_t *o, char **out, size_t *out_len, struct vl_err *err) {
  size_t n = json_dumpb(o, NULL, 0, CANON_FLAGS);
  char *buf = n ? vl_malloc(n + 1) : NULL;
  if (!buf || json_dumpb(o, buf, n, CANON_FLAGS) != n) {
    vl_free(buf);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }
  buf[n] = '\0';
  *out = buf;
  if (out_len) *out_len = n;
  return VL_OK;
}

vl_status vl_config_canonical(const char *text, size_t len, char **out, size_t *out_len,
                              struct vl_err *err) {
  *out = NULL;
  json_t *o;
  TRY(load_config(text, len, &o, err));
  vl_status s = dump(o, out, out_len, err);
  json_decref(o);
  return s;
}

/* SHA-256 as FIPS 180-4 defines it (sections 4.2.2, 5.3.3, 6.2). */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, unsigned n) { return x >> n | x << (32 - n); }

static void sha_block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 |
           p[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ w[t - 15] >> 3;
    uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ w[t - 2] >> 10;
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 =
        k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[t] + w[t];
    uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void vl_sha256_hex(const void *data, size_t n, char hex[VL_SHA256_HEX]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const unsigned char *p = data;
  size_t left = n;
  for (; left >= 64; left -= 64, p += 64)
    sha_block(h, p);
  unsigned char last[128] = {0}; /* the tail, 0x80, zeros, the length in bits */
  memcpy(last, p, left);
  last[left] = 0x80;
  size_t blocks = left + 9 > 64 ? 2 : 1;
  uint64_t bits = (uint64_t)n * 8;
  for (int i = 0; i < 8; i++)
    last[blocks * 64 - 1 - (size_t)i] = (unsigned char)(bits >> (8 * i));
  for (size_t b = 0; b < blocks; b++)
    sha_block(h, last + 64 * b);
  for (int i = 0; i < 8; i++)
    snprintf(hex + 8 * i, VL_SHA256_HEX - 8 * (size_t)i, "%08x", h[i]);
}

vl_status vl_config_sha256(const char *text, size_t len, char hex[VL_SHA256_HEX],
                           struct vl_err *err) {
  char *canon = NULL;
  size_t n = 0;
  TRY(vl_config_canonical(text, len, &canon, &n, err));
  vl_sha256_hex(canon, n, hex);
  vl_free(canon);
  return VL_OK;
}

/* A config flattened to its leaves: nested objects by dotted path. */
struct leaf {
  char key[96];
  json_t *v; /* borrowed */
};
struct leaves {
  struct leaf *l;
  size_t n, cap;
};

static bool flatten(json_t *o, const char *prefix, struct leaves *ls) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    char key[96];
    snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
    if (json_is_object(v) && json_object_size(v)) {
      if (!flatten(v, key, ls)) return false;
      continue;
    }
    if (ls->n == ls->cap) {
      size_t cap = ls->cap ? 2 * ls->cap : 64;
      if (cap > (1u << 20)) return false;
      struct leaf *nl = vl_realloc(ls->l, cap * sizeof *nl);
      if (!nl) return false;
      ls->l = nl;
      ls->cap = cap;
    }
    snprintf(ls->l[ls->n].key, sizeof ls->l[ls->n].key, "%s", key);
    ls->l[ls->n++].v = v;
  }
  return true;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const struct leaf *)a)->key, ((const struct leaf *)b)->key);
}

static void show(const json_t *v, char *buf, size_t n) {
  if (!v) {
    snprintf(buf, n, "(absent)");
  } else if (json_is_string(v)) {
    snprintf(buf, n, "%s", json_string_value(v));
  } else {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    snprintf(buf, n, "%s", s ? s : "?");
    free(s); /* jansson's allocation */
  }
}

vl_status vl_commitment_config_diff(const char *commitment, size_t clen, const char *config,
                                    size_t len, struct vl_drift *out, int cap, int *n,
                                    struct vl_err *err) {
  *n = 0;
  json_error_t je;
  char why[sizeof je.text + 16];
  json_t *c = json_loadb(commitment, clen, JSON_REJECT_DUPLICATES, &je);
  if (!c)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", je.line, je.column,
                    json_why(je.text, why, sizeof why));
  json_t *was = json_object_get(json_object_get(c, "model_config"), "content");
  if (!json_is_object(was)) {
    json_decref(c);
    return vl__fail(err, VL_EKEY,
                    "the commitment holds no copy of its config (model_config.content)");
  }
  json_t *now;
  vl_status s = load_config(config, len, &now, err);
  if (s != VL_OK) {
    json_decref(c);
    return s;
  }
  strip(was);
  struct leaves a = {0}, b = {0};
  if (!flatten(was, "", &a) || !flatten(now, "", &b)) {
    s = vl__fail(err, VL_ENOMEM, "out of memory");
    goto done;
  }
  if (a.n) qsort(a.l, a.n, sizeof *a.l, by_key);
  if (b.n) qsort(b.l, b.n, sizeof *b.l, by_key);
  for (size_t i = 0, k = 0; i < a.n || k < b.n;) {
    int cmp = i == a.n ? 1 : k == b.n ? -1 : strcmp(a.l[i].key, b.l[k].key);
    const json_t *x = cmp <= 0 ? a.l[i].v : NULL, *y = cmp >= 0 ? b.l[k].v : NULL;
    const char *key = cmp <= 0 ? a.l[i].key : b.l[k].key;
    if (!x || !y || !json_equal(x, y)) {
      if (*n < cap) {
        snprintf(out[*n].field, sizeof out[*n].field, "%s", key);
        show(x, out[*n].committed, sizeof out[*n].committed);
        show(y, out[*n].now, sizeof out[*n].now);
      }
      (*n)++;
    }
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
  }
done:
  vl_free(a.l);
  vl_free(b.l);
  json_decref(now);
  json_decref(c);
  return s;
}

/* ---- what a run ran on ------------------------------------------------- */

int vl_commitment_hw_diff(const char *gpu, uint64_t gpu_memory_bytes, uint64_t count,
                          const struct vl_catalog *cat, const struct vl_run_hw *hw,
                          struct vl_drift *out, int cap) {
  if (!hw->count) return 0;
  int n = 0;
  const struct vl_gpu *want = cat ? vl_catalog_find(cat, gpu) : NULL;
  const struct vl_gpu *got = cat && hw->device[0] ? vl_catalog_match_device(cat, hw->device) : NULL;
  bool same;
  if (got)
    same = want ? got == want : strcasecmp(got->name, gpu) == 0;
  else /* a device the catalog does not name: by its memory */
    same = gpu_memory_bytes && hw->memory_bytes &&
           fabs((double)hw->memory_bytes - (double)gpu_memory_bytes) <=
               0.01 * (double)gpu_memory_bytes;
  if (!same || hw->mixed) {
    char now[128];
    if (got)
      snprintf(now, sizeof now, "%s%s", got->name, hw->mixed ? " and others" : "");
    else if (hw->device[0])
      snprintf(now, sizeof now, "%s (%.2f GiB)%s", hw->device,
               (double)hw->memory_bytes / (double)(1ull << 30), hw->mixed ? " and others" : "");
    else
      snprintf(now, sizeof now, "unnamed");
    add(out, cap, &n, "gpu", gpu, now);
  }
  addu(out, cap, &n, "gpus", count, hw->count);
  return n;
}

/* ---- what to do -------------------------------------------------------- */

void vl_commitment_peak_action(const struct vl_job *job, const struct vl_bill *bill,
                               uint64_t card_bytes, char *buf, size_t n) {
  const unsigned long long B = job->batch, A = job->grad_accum;
  if (job->task == VL_TASK_INFER) {
    if (job->kv_layout == VL_KV_CONTIGUOUS)
      snprintf(buf, n,
               "a paged KV cache (--kv-layout paged): no cache reserved past each "
               "sequence's tokens");
    else if (B > 1)
      snprintf(buf, n, "a smaller batch (--batch %llu)", B / 2);
    else
      snprintf(buf, n, "shard the model over more GPUs (--tp 2; vramledger plan)");
    return;
  }
  const uint64_t *l = bill->line_max;
  double states = (double)(l[VL_LINE_PARAMETERS] + l[VL_LINE_MASTER] + l[VL_LINE_GRADIENTS] +
                           l[VL_LINE_OPTIMIZER]);
  double acts = (double)l[VL_LINE_ACTIVATIONS], card = (double)card_bytes;
  if (states > VL_DECIDE_STATES_OF_CARD * card) { /* the model states: shard them or train fewer */
    if (job->dp > 1 && job->zero < 3 && !job->lora_rank)
      snprintf(buf, n,
               "ZeRO stage %u (--zero %u): the model states sharded over the %llu "
               "data-parallel ranks",
               job->zero + 1, job->zero + 1, (unsigned long long)job->dp);
    else if (!job->lora_rank)
      snprintf(buf, n,
               "LoRA (--lora-rank 16): only adapters trained, the base without "
               "gradients or optimizer states");
    else if (!job->qlora)
      snprintf(buf, n, "QLoRA (--qlora): the frozen base in 4 bits");
    else if (job->offload == VL_OFFLOAD_NONE)
      snprintf(buf, n, "the optimizer states offloaded to the CPU (--offload optimizer)");
    else
      snprintf(buf, n,
               "more GPUs: the model sharded over tensor or pipeline ranks (--tp 2 or "
               "--pp 2; vramledger plan)");
  } else if (acts > VL_DECIDE_ACTS_OF_LEFT * (card - states) &&
             job->checkpointing != VL_CKPT_FULL) {
    snprintf(buf, n, "%s",
             job->checkpointing == VL_CKPT_NONE
                 ? "enable activation checkpointing (--checkpointing full)"
                 : "full activation checkpointing (--checkpointing full) instead of selective");
  } else if (B > 1) {
    snprintf(buf, n,
             "half the micro-batch with twice the accumulation (--batch %llu "
             "--grad-accum %llu): %s global batch",
             B / 2, A * 2, B % 2 ? "nearly the same" : "the same");
  } else if (job->checkpointing != VL_CKPT_FULL) {
    snprintf(buf, n, "enable activation checkpointing (--checkpointing full)");
  } else {
    snprintf(buf, n,
             "more GPUs or a larger card: checkpointing is on and the micro-batch is "
             "1 (vramledger plan)");
  }
}

void vl_commitment_throughput_action(const struct vl_job *job, char *buf, size_t n) {
  if (job->attention == VL_ATTN_EAGER)
    snprintf(buf, n, "switch the attention kernel to SDPA (--attention sdpa)");
  else if (job->checkpointing == VL_CKPT_FULL)
    snprintf(buf, n,
             "full checkpointing recomputes the whole forward: selective checkpointing "
             "(--checkpointing selective) where memory allows");
  else
    snprintf(buf, n,
             "FlashAttention-2 (attn_implementation=\"flash_attention_2\"), then profile "
             "the step (data loading, communication)");
}
