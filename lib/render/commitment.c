/* The Training Resource Commitment: commitment.json and COMMITMENT.md
 * (hardware, baseline, SLA, fallback triggers, audit). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "internal.h"
#include "vramledger/alloc.h"
#include "vramledger/catalog.h"
#include "vramledger/commitment.h"
#include "vramledger/render.h"

static const char *peak_action(const struct vl_commit_view *v) {
  return v->peak_action ? v->peak_action : "enable activation checkpointing";
}
static const char *throughput_action(const struct vl_commit_view *v) {
  return v->throughput_action ? v->throughput_action : "switch the attention kernel";
}

/* The baseline: the settings as estimate writes them (every key check
 * reads back: keep_grads, drop_outputs, ddp_static_graph and pp_schedule
 * among them, written there once), and what only a commitment holds, an
 * inference job's KV-cache block. A commitment written before the settings
 * carried a key lacks it, and is read with its default
 * (lib/decide/commitment.c, settings). */
static json_t *baseline_json(const struct vl_job *j) {
  json_t *s = vl__settings_json(j);
  if (j->task == VL_TASK_INFER) json_object_set_new(s, "kv_block_tokens", U(j->kv_block_tokens));
  return s;
}

static int commitment_json(FILE *out, const struct vl_commit_view *v) {
  const struct vl_job *j = v->job;
  json_t *o = json_object();
  json_object_set_new(o, "schema", vl__json_str(VL_COMMITMENT_SCHEMA));
  json_object_set_new(o, "created", vl__json_str(v->created));
  json_object_set_new(o, "vramledger", vl__json_str(v->version));
  json_object_set_new(o, "model", vl__json_str(v->model_name));
  json_object_set_new(o, "model_type", vl__json_str(v->arch->model_type));
  json_object_set_new(o, "params", U(v->bill->params));
  if (v->config_sha256) {
    json_t *mc = json_object();
    json_object_set_new(mc, "sha256", vl__json_str(v->config_sha256));
    if (v->config_file) json_object_set_new(mc, "file", vl__json_str(v->config_file));
    if (v->config_bundled) json_object_set_new(mc, "bundled", vl__json_str(v->config_bundled));
    /* a copy, so that check can name what changed (keys sorted) */
    json_t *content = v->config_canonical ? json_loads(v->config_canonical, 0, NULL) : NULL;
    if (content) json_object_set_new(mc, "content", content);
    json_object_set_new(o, "model_config", mc);
  }
  json_t *hw = json_object();
  json_object_set_new(hw, "gpu", vl__json_str(v->gpu->name));
  json_object_set_new(hw, "gpu_memory_bytes", U(v->gpu->memory_bytes));
  json_object_set_new(hw, "count", U(j->dp * j->tp * j->pp));
  json_object_set_new(hw, "margin", json_real(v->fit->margin));
  json_object_set_new(
      hw, "min_memory_bytes_per_gpu",
      U((uint64_t)((double)vl_bill_budget_bytes(v->bill) / (1.0 - v->fit->margin) + 0.5)));
  json_object_set_new(o, "hardware", hw);
  json_object_set_new(o, "baseline", baseline_json(j));
  json_t *est = json_object();
  json_object_set_new(est, "peak_allocated_bytes", U(v->bill->peak_allocated_bytes));
  json_object_set_new(est, "peak_reserved_bytes", U(v->bill->peak_reserved_bytes));
  json_object_set_new(est, "total_bytes", U(v->bill->total_bytes));
  if (v->bill->other.total_bytes) /* DDP's bucket rebuild: the other outcome */
    json_object_set_new(est, "other_total_bytes", U(v->bill->other.total_bytes));
  json_object_set_new(est, "parameters_bytes", U(v->bill->lines[VL_LINE_PARAMETERS]));
  json_object_set_new(est, "peak_phase", vl__json_str(vl_phase_name(v->bill->peak_phase)));
  json_object_set_new(est, "source", vl__json_str("vramledger estimate"));
  json_object_set_new(o, "estimate", est);
  if (v->run) {
    json_t *m = json_object();
    json_object_set_new(m, "record", vl__json_str(v->run));
    json_object_set_new(m, "peak_process_bytes", U(v->run_peak_process_bytes));
    json_object_set_new(m, "peak_cuda_alloc_bytes", U(v->run_peak_cuda_alloc_bytes));
    if (v->run_hardware) /* measured elsewhere: said, not hidden */
      json_object_set_new(m, "other_hardware", vl__json_str(v->run_hardware));
    json_object_set_new(o, "measured", m);
  }
  json_t *sla = json_object();
  if (v->sla_tokens_per_s > 0)
    json_object_set_new(sla, "tokens_per_s", json_real(v->sla_tokens_per_s));
  json_object_set_new(
      sla, "measurement",
      vl__json_str("median tokens/s over steady steps after warm-up, from the run record"));
  json_object_set_new(o, "sla", sla);
  json_t *tr = json_object();
  json_object_set_new(tr, "peak_over_commitment", json_real(VL_COMMIT_PEAK_TRIGGER));
  json_object_set_new(tr, "peak_action", vl__json_str(peak_action(v)));
  json_object_set_new(tr, "throughput_under_sla", json_real(VL_COMMIT_TPUT_TRIGGER));
  json_object_set_new(tr, "throughput_action", vl__json_str(throughput_action(v)));
  json_object_set_new(o, "triggers", tr);
  json_t *au = json_object();
  if (v->gpu_hours > 0) json_object_set_new(au, "gpu_hours", json_real(v->gpu_hours));
  json_object_set_new(au, "tolerance", json_real(VL_COMMIT_AUDIT_TOLERANCE));
  char action[64];
  snprintf(action, sizeof action, "more than %.0f %% off: review", 100 * VL_COMMIT_AUDIT_TOLERANCE);
  json_object_set_new(au, "action", vl__json_str(action));
  json_object_set_new(o, "audit", au);
  int rc = json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(o);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}

static int commitment_md(FILE *o, const struct vl_commit_view *v) {
  const struct vl_job *j = v->job;
  const struct vl_bill *b = v->bill;
  fputs("# Training Resource Commitment: ", o);
  vl__md_text(o, v->model_name);
  fputs("\n\nCreated ", o);
  vl__md_text(o, v->created);
  fprintf(o, " by vramledger %s.\n\n", v->version);
  fprintf(o,
          "## Hardware\n\n- %llu x %s (%.2f GiB each); at least %.2f GiB per GPU with %.0f %% "
          "kept free\n\n",
          (unsigned long long)(j->dp * j->tp * j->pp), v->gpu->name, GIB(v->gpu->memory_bytes),
          GIB(vl_bill_budget_bytes(b)) / (1.0 - v->fit->margin), 100 * v->fit->margin);
  fprintf(o, "## Configuration baseline\n\n| setting | value |\n|---|---|\n");
  fputs("| model | ", o);
  vl__md_text(o, v->model_name);
  fputs(" (", o);
  vl__md_text(o, v->arch->model_type);
  fprintf(o, ", %llu parameters) |\n", (unsigned long long)b->params);
  if (v->config_sha256) {
    fputs("| model config | ", o);
    if (v->config_file) {
      vl__md_code(o, v->config_file);
    } else {
      fputs("bundled ", o);
      vl__md_text(o, v->config_bundled);
    }
    fputs(", SHA-256 of its canonical content ", o);
    vl__md_code(o, v->config_sha256);
    fputs(" |\n", o);
  }
  fprintf(o, "| micro-batch x sequence | %llu x %llu |\n| gradient accumulation | %llu |\n",
          (unsigned long long)j->batch, (unsigned long long)j->seq,
          (unsigned long long)j->grad_accum);
  fprintf(
      o,
      "| precision | %s |\n| optimizer | %s (%s) |\n| attention | %s |\n| checkpointing | %s |\n",
      vl_precision_name(j->precision), vl_optimizer_name(j->optimizer),
      vl_opt_impl_name(j->opt_impl), vl_attention_name(j->attention),
      vl_ckpt_name(j->checkpointing));
  fprintf(o, "| parallelism | dp %llu, tp %llu, pp %llu, ZeRO %u%s |\n", (unsigned long long)j->dp,
          (unsigned long long)j->tp, (unsigned long long)j->pp, j->zero, j->sp ? ", sp" : "");
  if (j->lora_rank)
    fprintf(o, "| LoRA | rank %llu%s |\n", (unsigned long long)j->lora_rank,
            j->qlora ? ", 4-bit base" : "");
  fprintf(o, "\n| memory per GPU | estimated | measured |\n|---|---:|---:|\n");
  fprintf(o, "| peak allocated | %.2f GiB | %s |\n", GIB(b->peak_allocated_bytes),
          v->run ? "" : "n/a");
  fprintf(o, "| process total | %.2f GiB | ", GIB(b->total_bytes));
  if (v->run) {
    fprintf(o, "%.2f GiB (", GIB(v->run_peak_process_bytes));
    vl__md_code(o, v->run); /* a path from the command line */
    if (v->run_hardware) {
      fputs(", measured on ", o);
      vl__md_text(o, v->run_hardware);
    }
    fputs(") |\n", o);
  } else
    fprintf(o, "not measured yet |\n");
  if (b->other.total_bytes)
    fprintf(o, "| process total, other outcome | %.2f GiB | (%s) |\n", GIB(b->other.total_bytes),
            b->other.why);
  fprintf(o, "\n## SLA\n\n");
  if (v->sla_tokens_per_s > 0)
    fprintf(o, "- throughput at least %.0f tokens/s, the median over steady steps after warm-up\n",
            v->sla_tokens_per_s);
  else
    fprintf(o, "- throughput: not stated\n");
  fprintf(o, "- convergence: as the team states it here\n\n## Fallback triggers\n\n");
  fprintf(o, "- measured peak above %.0f %% of the committed %.2f GiB -> %s\n",
          100 * VL_COMMIT_PEAK_TRIGGER, GIB(vl_bill_budget_bytes(b)), peak_action(v));
  fprintf(o, "- throughput under %.0f %% of the SLA -> %s\n\n## Audit\n\n",
          100 * VL_COMMIT_TPUT_TRIGGER, throughput_action(v));
  if (v->gpu_hours > 0) fprintf(o, "- budget: %.1f GPU-hours\n", v->gpu_hours);
  fprintf(o,
          "- actual GPU-hours, peak memory and throughput against this commitment: more than "
          "%.0f %% off -> review (`vramledger audit`)\n- CI: `vramledger check --commitment "
          "commitment.json ...` fails a change whose configuration drifts\n",
          100 * VL_COMMIT_AUDIT_TOLERANCE);
  return ferror(o) ? -1 : 0;
}

int vl_render_commitment(FILE *out, bool md, const struct vl_commit_view *v) {
  return md ? commitment_md(out, v) : commitment_json(out, v);
}

/* ---- check: the CI gate's verdict -------------------------------------- */

static const char *const check_kind[VL_CHECK_KIND_COUNT] = {"model", "setting", "hardware",
                                                            "budget", "trigger"};
/* the rule each kind of problem broke, for JSON's readers */
static const char *const check_rule[VL_CHECK_KIND_COUNT] = {
    "the model's config is the committed one",
    "the setting is the committed baseline's",
    "the committed card, GPU count and margin",
    "the job fits the card with the margin kept free",
    "the measured peak per GPU is at most the peak trigger x the committed total",
};

/* one problem; its values come from the commitment and the config files,
 * so they are written as plain text (no terminal's control sequences) */
static void check_line(FILE *o, const struct vl_check_item *it) {
  const struct vl_drift *d = &it->d;
  const char *pre = "drift: ", *mid = " is '", *post = "', the commitment says '", *end = "'\n";
  switch (it->kind) {
  case VL_CHECK_MODEL:
    pre = "drift: the model's ", mid = " is ", post = ", the commitment says ", end = "\n";
    break;
  case VL_CHECK_BUDGET:
    pre = "over budget: the job needs ", mid = NULL, post = ", the commitment gives ", end = "\n";
    break;
  case VL_CHECK_TRIGGER:
    pre = "trigger: the measured peak ", mid = NULL, post = " is over ", end = "\n";
    break;
  default: break;
  }
  fputs(pre, o);
  if (mid) {
    vl__plain_text(o, d->field);
    fputs(mid, o);
  }
  vl__plain_text(o, d->now);
  fputs(post, o);
  vl__plain_text(o, d->committed);
  fputs(end, o);
}

static int check_text(FILE *o, const struct vl_check_view *v) {
  if (v->not_checked && *v->not_checked)
    fprintf(o, "not checked (\"auto\", filled in at launch): %s\n", v->not_checked);
  for (int i = 0; i < v->n; i++) {
    check_line(o, &v->items[i]);
    /* what to do, once for a run of problems that share it */
    if (i + 1 == v->n || strcmp(v->items[i + 1].action, v->items[i].action))
      fprintf(o, "  %s\n", v->items[i].action);
  }
  if (v->n)
    fprintf(o, "check failed: %d problem%s against ", v->n, v->n == 1 ? "" : "s");
  else
    fputs("consistent with ", o);
  vl__plain_text(o, v->commitment);
  fputc('\n', o);
  return ferror(o) ? -1 : 0;
}

static int check_json(FILE *out, const struct vl_check_view *v) {
  json_t *o = json_object();
  json_object_set_new(o, "schema", vl__json_str("vramledger.check/1"));
  json_object_set_new(o, "commitment", vl__json_str(v->commitment));
  json_object_set_new(o, "model_config", v->model_file ? vl__json_str(v->model_file) : json_null());
  json_object_set_new(o, "consistent", json_boolean(v->n == 0));
  json_object_set_new(o, "verdict", vl__json_str(v->n ? "fail" : "pass"));
  json_t *ps = json_array();
  for (int i = 0; i < v->n; i++) {
    const struct vl_check_item *it = &v->items[i];
    json_t *p = json_object();
    json_object_set_new(p, "kind", vl__json_str(check_kind[it->kind]));
    json_object_set_new(p, "field", vl__json_str(it->d.field));
    json_object_set_new(p, "committed", vl__json_str(it->d.committed));
    json_object_set_new(p, "current", vl__json_str(it->d.now));
    json_object_set_new(p, "rule", vl__json_str(check_rule[it->kind]));
    json_object_set_new(p, "action", vl__json_str(it->action));
    json_array_append_new(ps, p);
  }
  json_object_set_new(o, "problems", ps);
  json_t *nc = json_array();
  if (v->not_checked && *v->not_checked) {
    size_t cap = strlen(v->not_checked) + 1; /* whole: a cut name is another name */
    char *buf = vl_malloc(cap);
    struct vl__list l;
    if (!buf || !vl__list_init_in(&l, v->not_checked, ',', buf, cap)) {
      json_decref(nc);
      json_decref(o);
      return -1;
    }
    for (char *t; (t = vl__list_next(&l, NULL));) {
      while (*t == ' ')
        t++;
      json_array_append_new(nc, vl__json_str(t));
    }
    vl_free(buf);
  }
  json_object_set_new(o, "not_checked", nc);
  int rc = json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(o);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}

int vl_render_check(FILE *out, enum vl_format fmt, const struct vl_check_view *v) {
  return fmt == VL_FMT_JSON ? check_json(out, v) : check_text(out, v);
}
