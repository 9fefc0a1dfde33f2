/* The estimate report: text, Markdown and JSON. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "internal.h"
#include "vramledger/steptime.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"

static void live_list(char *buf, size_t n, unsigned mask, const char *sep) {
  size_t o = 0;
  buf[0] = '\0';
  for (int p = 0; p < VL_PH_COUNT; p++) {
    if (!(mask & (1u << p))) continue;
    int w = snprintf(buf + o, n - o, "%s%s", o ? sep : "", vl_phase_name((enum vl_phase)p));
    if (w < 0 || (size_t)w >= n - o) break;
    o += (size_t)w;
  }
  if (o == 0) snprintf(buf, n, "-");
}

static void settings_line(char *buf, size_t n, const struct vl_estimate_view *v) {
  struct vl_job eff;
  vl_job_apply_loop(v->job, &eff); /* the settings the loop runs */
  const struct vl_job *j = &eff;
  size_t o = 0;
#define ADD(...)                                                                                   \
  do {                                                                                             \
    int w_ = snprintf(buf + o, n - o, __VA_ARGS__);                                                \
    if (w_ > 0 && (size_t)w_ < n - o) o += (size_t)w_;                                             \
  } while (0)
  if (j->task == VL_TASK_TRAIN) {
    if (j->image_size) /* an image's side, not tokens */
      ADD("micro-batch %llu x image %llux%llu", (unsigned long long)j->batch,
          (unsigned long long)j->image_size, (unsigned long long)j->image_size);
    else if (j->target_seq)
      ADD("micro-batch %llu x seq %llu -> target %llu", (unsigned long long)j->batch,
          (unsigned long long)j->seq, (unsigned long long)j->target_seq);
    else
      ADD("micro-batch %llu x seq %llu", (unsigned long long)j->batch, (unsigned long long)j->seq);
    if (j->grad_accum > 1) ADD(" x %llu accumulated", (unsigned long long)j->grad_accum);
    ADD(", %s, %s (%s), %s, ", vl_precision_name(j->precision), vl_optimizer_name(j->optimizer),
        vl_opt_impl_name(j->opt_impl), vl_attention_name(j->attention));
    ADD(j->checkpointing == VL_CKPT_NONE ? "no checkpointing" : "%s checkpointing",
        vl_ckpt_name(j->checkpointing));
    if (j->lora_rank)
      ADD(", %s r=%llu", j->qlora ? "QLoRA" : "LoRA", (unsigned long long)j->lora_rank);
    if (j->loop != VL_LOOP_PLAIN) ADD(", %s loop", vl_loop_name(j->loop));
  } else {
    ADD("batch %llu x (prompt %llu + %llu new tokens), %s, %s, %s KV cache",
        (unsigned long long)j->batch, (unsigned long long)j->seq, (unsigned long long)j->new_tokens,
        vl_precision_name(j->precision), vl_attention_name(j->attention),
        vl_kv_layout_name(j->kv_layout));
  }
  uint64_t gpus = j->dp * j->tp * j->pp;
  if (gpus == 1)
    ADD(", 1 GPU");
  else {
    ADD(", %llu GPUs (dp %llu, tp %llu%s, pp %llu", (unsigned long long)gpus,
        (unsigned long long)j->dp, (unsigned long long)j->tp, j->sp ? " +sp" : "",
        (unsigned long long)j->pp);
    if (j->zero) ADD(", ZeRO-%u", j->zero);
    ADD(")");
  }
  if (j->framework != VL_FW_HF) ADD(", %s accounting", vl_framework_name(j->framework));
  if (j->offload != VL_OFFLOAD_NONE) ADD(", offload %s", vl_offload_name(j->offload));
#undef ADD
}

static const char *verdict(const struct vl_fit *f) { return f->fits ? "fits" : "does not fit"; }

/* why the estimate is approximate (its architecture, or this job), or NULL */
static const char *approx(const struct vl_estimate_view *v) {
  const char *a = vl_arch_approximate(v->arch);
  return a ? a : v->bill->approximate;
}

static void time_text(FILE *o, const struct vl_estimate_view *v) {
  const struct vl_step_time *t = v->time;
  char s1[64];
  fprintf(o, "  step time on %s: %.3f s (forward %.3f, backward %.3f", v->gpu->name, t->step_s,
          t->forward_s, t->backward_s);
  if (t->recompute_s > 0) fprintf(o, ", recomputation %.3f", t->recompute_s);
  fprintf(o, ", optimizer %.3f s); %s %s/s, MFU %.2f\n", t->optimizer_s,
          vl_fmt_int(s1, sizeof s1, (uint64_t)(t->tokens_per_s + 0.5)),
          vl_arch_is_conv(v->arch) ? "images" : "tokens", t->mfu);
  fprintf(
      o, "    (%s%s%s%s)\n", t->source, t->approximate ? "; approximate: " : "",
      t->approximate ? (t->note[0] ? t->note : "the model type is read as a generic decoder") : "",
      t->host_bound ? "; host-bound: the CPU's dispatch sets it, +-40 % from host to host" : "");
}

static void time_explain(FILE *o, const struct vl_step_time *t) {
  char s1[64];
  fprintf(o, "\ntime of a step by op kind (seconds on the critical path)\n");
  for (int k = 0; k < VL_TK_COUNT; k++) {
    double share = t->step_s > 0 ? 100.0 * t->kind_s[k] / t->step_s : 0;
    fprintf(o, "  %-10s %9.4f s %5.1f %%\n", vl_time_kind_name((enum vl_time_kind)k), t->kind_s[k],
            share);
  }
  fprintf(o,
          "  GPU busy %.4f s, host dispatch %.4f s for %s eager ops; %.3g FLOP executed, "
          "%.3g the model's (6ND; 4ND with a frozen LoRA base)\n",
          t->gpu_s, t->host_s, vl_fmt_int(s1, sizeof s1, t->ops), t->executed_flops,
          t->model_flops);
}

static void text(FILE *o, const struct vl_estimate_view *v) {
  const struct vl_bill *b = v->bill;
  char s1[64], s2[64], set[512], live[96];
  settings_line(set, sizeof set, v);
  vl__plain_text(o, v->model_name); /* a path or a config's name: from outside */
  fputs(" (", o);
  vl__plain_text(o, v->arch->model_type);
  fprintf(o, "): %s\n",
          b->task == VL_TASK_TRAIN ? "training step, per GPU" : "generation, per GPU");
  fprintf(o, "  %s\n", set);
  if (approx(v)) {
    fputs("  approximate: model_type '", o);
    vl__plain_text(o, v->arch->model_type);
    fprintf(o, "' %s\n", approx(v));
  }
  fprintf(o, "  parameters %s", vl_fmt_int(s1, sizeof s1, b->params));
  if (b->task == VL_TASK_TRAIN)
    fprintf(o, ", trainable %s", vl_fmt_int(s2, sizeof s2, b->trainable_params));
  if (b->params_per_gpu != b->params)
    fprintf(o, ", on this GPU %s", vl_fmt_int(s1, sizeof s1, b->params_per_gpu));
  if (v->job->pp > 1) fprintf(o, " (pipeline stage %llu)", (unsigned long long)b->pp_stage);
  fprintf(o, "\n\n");
  fprintf(o, "  %-26s %10s %7s %10s  %s\n", "at the peak", "GiB", "share", "max GiB", "live in");
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    if (!b->line_max[l]) continue;
    double share = b->total_bytes ? 100.0 * (double)b->lines[l] / (double)b->total_bytes : 0.0;
    live_list(live, sizeof live, b->live[l], ", ");
    fprintf(o, "  %-26s %10.2f %6.1f%% %10.2f  %s\n", vl_line_label((enum vl_line)l),
            GIB(b->lines[l]), share, GIB(b->line_max[l]), live);
  }
  fprintf(o, "  %-26s %10.2f          (torch.cuda.max_memory_allocated)\n", "peak allocated",
          GIB(b->peak_allocated_bytes));
  fprintf(o, "  %-26s %10.2f          (torch.cuda.max_memory_reserved)\n", "peak reserved",
          GIB(b->peak_reserved_bytes));
  fprintf(o, "  %-26s %10.2f %6.1f%%   (process memory in nvidia-smi)\n", "total",
          GIB(b->total_bytes), 100.0);
  if (v->job->pp > 1 && b->task == VL_TASK_TRAIN)
    fprintf(o,
            "  %-26s %10s          first stage %.2f allocated / %.2f total, last stage %.2f / "
            "%.2f GiB\n",
            "pipeline stages", "", GIB(b->pp_first.peak_allocated_bytes),
            GIB(b->pp_first.total_bytes), GIB(b->pp_last.peak_allocated_bytes),
            GIB(b->pp_last.total_bytes));
  if (b->other.total_bytes)
    fprintf(o,
            "  %-26s %10.2f          allocated %.2f, reserved %.2f GiB: the other outcome\n"
            "      (%s)\n",
            "or, by timing", GIB(b->other.total_bytes), GIB(b->other.peak_allocated_bytes),
            GIB(b->other.peak_reserved_bytes), b->other.why);
  fprintf(o, "\n  peak during: %s", vl_phase_name(b->peak_phase));
  for (int p = 0; p < VL_PH_COUNT; p++)
    if (b->phase_peak[p])
      fprintf(o, "%s%s %.2f GiB",
              p == 0 || (b->task == VL_TASK_INFER && p == VL_PH_PREFILL) ? " (" : ", ",
              vl_phase_name((enum vl_phase)p), GIB(b->phase_peak[p]));
  fprintf(o, " allocated)\n");
  if (b->host_bytes) fprintf(o, "  host RAM for offloaded states: %.2f GiB\n", GIB(b->host_bytes));
  if (v->gpu) {
    const struct vl_fit *f = v->fit;
    double hr = GIB(f->headroom_bytes);
    fprintf(o, "  %s: %.2f GiB, %.0f %% kept free -> %.2f GiB usable: %s, %s %.2f GiB%s\n",
            v->gpu->name, GIB(f->capacity_bytes), f->margin * 100.0, GIB(f->usable_bytes),
            verdict(f), f->fits ? "headroom" : "short by", f->fits ? hr : -hr,
            vl_bill_budget_bytes(b) > b->total_bytes ? " (counting the other outcome)" : "");
    char carry[400];
    if (v->carry) vl__context_carry_text(v->carry, v->gpu->name, carry, sizeof carry);
    if (v->carry && carry[0]) fprintf(o, "  %s\n", carry);
    if (v->carry && v->context_edge) fprintf(o, "  %s\n", vl__context_edge_text(f));
  }
  if (v->searched) {
    const char *what = v->searched == 1 ? "micro-batch" : "sequence length";
    if (v->search_best)
      fprintf(o, "  largest %s that fits %s: %llu\n", what, v->gpu->name,
              (unsigned long long)v->search_best);
    else
      fprintf(o, "  no %s fits %s, not even 1\n", what, v->gpu->name);
  }
  if (v->time) time_text(o, v);
  if (!v->explain) return;
  if (v->time) time_explain(o, v->time);
  fprintf(o, "\nformulas (bytes; detail lines explain a part and are not summed)\n");
  for (int i = 0; i < b->n_terms; i++) {
    const struct vl_term *t = &b->terms[i];
    fprintf(o, "  %s%s: %s = %s", t->detail ? "  . " : "", t->name, t->formula,
            vl_fmt_int(s1, sizeof s1, t->bytes));
    fprintf(o, " (%.3f GiB)\n", GIB(t->bytes));
    if (t->n_in) {
      fprintf(o, "      where");
      for (int k = 0; k < t->n_in; k++) {
        double x = t->in[k].value;
        char num[48];
        if (x >= 0 && x < 1e18 && x == (double)(uint64_t)x)
          vl_fmt_int(num, sizeof num, (uint64_t)x);
        else
          snprintf(num, sizeof num, "%.4g", x);
        fprintf(o, "%s %s = %s%s%s", k ? "," : "", t->in[k].name, num, t->in[k].unit[0] ? " " : "",
                t->in[k].unit);
      }
      fprintf(o, "\n");
    }
    fprintf(o, "      source: %s\n", t->source);
  }
  if (v->recipe) vl__recipe_text(o, v->recipe);
}

static void md(FILE *o, const struct vl_estimate_view *v) {
  const struct vl_bill *b = v->bill;
  char set[512], live[96], s1[64];
  settings_line(set, sizeof set, v);
  fputs("## Memory estimate: ", o);
  vl__md_text(o, v->model_name);
  fputs(" (", o);
  vl__md_text(o, v->arch->model_type);
  fprintf(o, ")\n\n%s.\n\n", set);
  if (approx(v)) {
    fputs("Approximate: model_type '", o);
    vl__md_text(o, v->arch->model_type);
    fprintf(o, "' %s.\n\n", approx(v));
  }
  fprintf(o, "Parameters: %s", vl_fmt_int(s1, sizeof s1, b->params));
  if (b->task == VL_TASK_TRAIN)
    fprintf(o, "; trainable: %s", vl_fmt_int(s1, sizeof s1, b->trainable_params));
  fprintf(o, ".\n\n| line | bytes at the peak | GiB | share | max GiB | live in "
             "|\n|---|---:|---:|---:|---:|---|\n");
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    if (!b->line_max[l]) continue;
    double share = b->total_bytes ? 100.0 * (double)b->lines[l] / (double)b->total_bytes : 0.0;
    live_list(live, sizeof live, b->live[l], ", ");
    fprintf(o, "| %s | %s | %.2f | %.1f %% | %.2f | %s |\n", vl_line_label((enum vl_line)l),
            vl_fmt_int(s1, sizeof s1, b->lines[l]), GIB(b->lines[l]), share, GIB(b->line_max[l]),
            live);
  }
  fprintf(o, "| **peak allocated** | %s | %.2f | | | %s |\n",
          vl_fmt_int(s1, sizeof s1, b->peak_allocated_bytes), GIB(b->peak_allocated_bytes),
          vl_phase_name(b->peak_phase));
  fprintf(o, "| **peak reserved** | %s | %.2f | | | |\n",
          vl_fmt_int(s1, sizeof s1, b->peak_reserved_bytes), GIB(b->peak_reserved_bytes));
  fprintf(o, "| **total (process)** | %s | %.2f | 100.0 %% | | |\n",
          vl_fmt_int(s1, sizeof s1, b->total_bytes), GIB(b->total_bytes));
  if (v->gpu)
    fprintf(o, "\n**%s** (%.2f GiB, %.0f %% kept free): %s, %s %.2f GiB.\n", v->gpu->name,
            GIB(v->fit->capacity_bytes), v->fit->margin * 100.0, verdict(v->fit),
            v->fit->fits ? "headroom" : "short by",
            GIB(v->fit->fits ? v->fit->headroom_bytes : -v->fit->headroom_bytes));
  char carry[400] = "";
  if (v->gpu && v->carry) vl__context_carry_text(v->carry, v->gpu->name, carry, sizeof carry);
  if (carry[0]) fprintf(o, "\n%s.\n", carry);
  if (v->gpu && v->carry && v->context_edge) fprintf(o, "\n%s.\n", vl__context_edge_text(v->fit));
  if (v->time)
    fprintf(o,
            "\nStep time on %s: %.3f s (forward %.3f, backward %.3f, recomputation %.3f, "
            "optimizer %.3f); %.0f %s/s; MFU %.2f (%s).\n",
            v->gpu->name, v->time->step_s, v->time->forward_s, v->time->backward_s,
            v->time->recompute_s, v->time->optimizer_s, v->time->tokens_per_s,
            vl_arch_is_conv(v->arch) ? "images" : "tokens", v->time->mfu, v->time->source);
  if (v->searched)
    fprintf(o, "\nLargest %s that fits: %llu.\n",
            v->searched == 1 ? "micro-batch" : "sequence length",
            (unsigned long long)v->search_best);
  if (!v->explain) return;
  fprintf(o, "\n### Formulas\n\n| term | formula | bytes | source |\n|---|---|---:|---|\n");
  for (int i = 0; i < b->n_terms; i++) {
    const struct vl_term *t = &b->terms[i];
    fprintf(o, "| %s%s | `%s` | %s | %s |\n", t->detail ? "↳ " : "", t->name, t->formula,
            vl_fmt_int(s1, sizeof s1, t->bytes), t->source);
  }
  if (v->recipe) vl__recipe_md(o, v->recipe);
}

static json_t *phases_array(unsigned mask) {
  json_t *a = json_array();
  for (int p = 0; p < VL_PH_COUNT; p++)
    if (mask & (1u << p)) json_array_append_new(a, vl__json_str(vl_phase_name((enum vl_phase)p)));
  return a;
}

/* A card's carried-over context, as a line of text; "" when measured on it. */
void vl__context_carry_text(const struct vl_context_carry *c, const char *gpu, char *buf,
                            size_t n) {
  buf[0] = '\0';
  if (!c->carried) return;
  size_t l =
      (size_t)snprintf(buf, n,
                       "%s (%s): the CUDA context (%.0f MiB) was measured on the %s only "
                       "and is carried over, +-%.0f MiB on another architecture "
                       "(docs/model.md, 9)",
                       gpu, c->architecture, MIB(c->context_bytes), "H200", MIB(c->range_bytes));
  if (l >= n || !c->workspace_card_bytes) return;
  if (c->lt_workspace_bytes)
    snprintf(buf + l, n - l,
             "; its BLAS workspaces are PyTorch's on it: %u x (%.4g MiB cuBLAS + %.4g MiB "
             "cuBLASLt)",
             c->workspaces, MIB(c->workspace_card_bytes), MIB(c->lt_workspace_bytes));
  else
    snprintf(buf + l, n - l, "; its cuBLAS workspaces are PyTorch's on it: %u x %.4g MiB",
             c->workspaces, MIB(c->workspace_card_bytes));
}

const char *vl__context_edge_text(const struct vl_fit *f) {
  return f->fits ? "the headroom is within the context's range: the card's own context may not "
                   "leave room (measure it with vramledger run)"
                 : "the shortfall is within the context's range: on the card it may fit "
                   "(measure it with vramledger run)";
}

json_t *vl__context_carry_json(const struct vl_context_carry *c) {
  json_t *o = json_object();
  json_object_set_new(o, "measured_on", vl__json_str(VL_CONTEXT_MEASURED_ON));
  json_object_set_new(o, "architecture", vl__json_str(c->architecture));
  json_object_set_new(o, "carried_over", json_boolean(c->carried));
  json_object_set_new(o, "cuda_context_bytes", U(c->context_bytes));
  json_object_set_new(o, "range_bytes", U(c->range_bytes));
  json_object_set_new(o, "cublas_workspace_billed_bytes", U(c->workspace_billed_bytes));
  json_object_set_new(o, "cublas_workspace_bytes",
                      c->workspace_card_bytes ? U(c->workspace_card_bytes) : json_null());
  json_object_set_new(o, "cublaslt_workspace_bytes", U(c->lt_workspace_bytes));
  json_object_set_new(o, "workspace_threads", U(c->workspaces));
  return o;
}

/* The settings of a job, as `estimate --format json` prints them and a
 * commitment's baseline keeps them (read back by vl_job_from_settings). */
json_t *vl__settings_json(const struct vl_job *j) {
  json_t *s = json_object();
  json_object_set_new(s, "task", vl__json_str(j->task == VL_TASK_TRAIN ? "train" : "infer"));
  json_object_set_new(s, "batch", U(j->batch));
  json_object_set_new(s, "seq", U(j->seq));
  if (j->image_size) json_object_set_new(s, "image_size", U(j->image_size));
  if (j->target_seq) json_object_set_new(s, "target_seq", U(j->target_seq));
  json_object_set_new(s, "precision", vl__json_str(vl_precision_name(j->precision)));
  json_object_set_new(s, "attention", vl__json_str(vl_attention_name(j->attention)));
  if (j->task == VL_TASK_TRAIN) {
    json_object_set_new(s, "grad_accum", U(j->grad_accum));
    json_object_set_new(s, "optimizer", vl__json_str(vl_optimizer_name(j->optimizer)));
    struct vl_job eff; /* the implementation the loop runs (HF Trainer: fused AdamW) */
    vl_job_apply_loop(j, &eff);
    json_object_set_new(s, "optimizer_impl", vl__json_str(vl_opt_impl_name(eff.opt_impl)));
    json_object_set_new(s, "loop", vl__json_str(vl_loop_name(j->loop)));
    json_object_set_new(s, "checkpointing", vl__json_str(vl_ckpt_name(j->checkpointing)));
    json_object_set_new(s, "framework", vl__json_str(vl_framework_name(j->framework)));
    json_object_set_new(s, "lora_rank", U(j->lora_rank));
    json_object_set_new(s, "qlora", json_boolean(j->qlora));
    json_object_set_new(s, "zero", U(j->zero));
    json_object_set_new(s, "offload", vl__json_str(vl_offload_name(j->offload)));
  } else {
    json_object_set_new(s, "new_tokens", U(j->new_tokens));
    json_object_set_new(s, "kv_layout", vl__json_str(vl_kv_layout_name(j->kv_layout)));
    json_object_set_new(s, "kv_bytes_per_element", U(j->kv_bytes));
  }
  json_object_set_new(s, "dp", U(j->dp));
  json_object_set_new(s, "tp", U(j->tp));
  json_object_set_new(s, "pp", U(j->pp));
  json_object_set_new(s, "sp", json_boolean(j->sp));
  if (j->task == VL_TASK_TRAIN) {
    char t[256];
    vl_job_lora_targets(j, t, sizeof t);
    json_object_set_new(s, "lora_targets", vl__json_str(t));
    json_object_set_new(s, "master_grads_fp32", json_boolean(j->master_grads_fp32));
  }
  json_object_set_new(s, "allocator", vl__json_str(vl_allocator_name(j->allocator)));
  if (j->task == VL_TASK_TRAIN) { /* the names vl_job_from_settings reads back */
    json_object_set_new(s, "keep_grads", json_boolean(j->grads_persist));
    json_object_set_new(s, "drop_outputs", json_boolean(j->drop_outputs));
    json_object_set_new(s, "ddp_static_graph", json_boolean(j->ddp_static_graph));
    json_object_set_new(s, "pp_schedule", vl__json_str(j->pp_gpipe ? "gpipe" : "1f1b"));
  }
  return s;
}

void vl__time_json(json_t *r, const struct vl_step_time *t) {
  json_object_set_new(r, "step_seconds", json_real(t->step_s));
  json_t *ph = json_object();
  json_object_set_new(ph, "forward", json_real(t->forward_s));
  json_object_set_new(ph, "backward", json_real(t->backward_s));
  json_object_set_new(ph, "recompute", json_real(t->recompute_s));
  json_object_set_new(ph, "optimizer", json_real(t->optimizer_s));
  json_object_set_new(r, "phase_seconds", ph);
  json_object_set_new(r, "tokens_per_second", json_real(t->tokens_per_s));
  json_object_set_new(r, "mfu", json_real(t->mfu));
  json_t *x = json_object();
  json_t *k = json_object();
  for (int i = 0; i < VL_TK_COUNT; i++)
    json_object_set_new(k, vl_time_kind_name((enum vl_time_kind)i), json_real(t->kind_s[i]));
  json_object_set_new(x, "kind_seconds", k);
  json_object_set_new(x, "gpu_seconds", json_real(t->gpu_s));
  json_object_set_new(x, "host_seconds", json_real(t->host_s));
  json_object_set_new(x, "eager_ops", U(t->ops));
  json_object_set_new(x, "model_flops", json_real(t->model_flops));
  json_object_set_new(x, "executed_flops", json_real(t->executed_flops));
  json_object_set_new(x, "source", vl__json_str(t->source));
  json_object_set_new(x, "derived", json_boolean(t->derived));
  json_object_set_new(x, "approximate", json_boolean(t->approximate));
  json_object_set_new(x, "host_bound", json_boolean(t->host_bound));
  if (t->note[0]) json_object_set_new(x, "note", vl__json_str(t->note));
  json_object_set_new(r, "time", x);
}

static json_t *json_report(const struct vl_estimate_view *v) {
  const struct vl_bill *b = v->bill;
  const struct vl_job *j = v->job;
  const struct vl_arch *a = v->arch;
  json_t *r = json_object();
  json_object_set_new(r, "schema", vl__json_str("vramledger.estimate/1"));
  json_object_set_new(r, "version", vl__json_str(v->version));
  json_object_set_new(r, "approximate", json_boolean(approx(v) != NULL));
  if (approx(v)) json_object_set_new(r, "approximate_reason", vl__json_str(approx(v)));
  json_t *m = json_object();
  json_object_set_new(m, "name", vl__json_str(v->model_name));
  json_object_set_new(m, "model_type", vl__json_str(a->model_type));
  json_object_set_new(m, "layers", U(a->layers));
  json_object_set_new(m, "hidden_size", U(a->hidden));
  json_object_set_new(m, "heads", U(a->heads));
  json_object_set_new(m, "kv_heads", U(a->kv_heads));
  json_object_set_new(m, "head_dim", U(a->head_dim));
  json_object_set_new(m, "intermediate_size", U(a->intermediate));
  json_object_set_new(m, "vocab_size", U(a->vocab));
  if (a->experts) {
    json_object_set_new(m, "experts", U(a->experts));
    json_object_set_new(m, "experts_per_token", U(a->experts_per_token));
  }
  json_object_set_new(r, "model", m);
  json_object_set_new(r, "settings", vl__settings_json(j));
  if (v->recipe) json_object_set_new(r, "recipe", vl__recipe_json(v->recipe));
  json_object_set_new(r, "params", U(b->params));
  json_object_set_new(r, "trainable_params", U(b->trainable_params));
  json_object_set_new(r, "params_per_gpu", U(b->params_per_gpu));
  json_t *bill = json_object();
  for (int l = 0; l < VL_LINE_COUNT; l++)
    json_object_set_new(bill, vl_line_key((enum vl_line)l), U(b->lines[l]));
  json_object_set_new(r, "bill", bill);
  json_t *lines = json_array();
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    json_t *e = json_object();
    json_object_set_new(e, "key", vl__json_str(vl_line_key((enum vl_line)l)));
    json_object_set_new(e, "label", vl__json_str(vl_line_label((enum vl_line)l)));
    json_object_set_new(e, "bytes", U(b->lines[l]));
    json_object_set_new(e, "max_bytes", U(b->line_max[l]));
    json_object_set_new(
        e, "share", json_real(b->total_bytes ? (double)b->lines[l] / (double)b->total_bytes : 0.0));
    json_object_set_new(e, "live", phases_array(b->live[l]));
    json_object_set_new(e, "in_allocated", json_boolean(vl_line_in_allocated((enum vl_line)l)));
    json_array_append_new(lines, e);
  }
  json_object_set_new(r, "lines", lines);
  json_object_set_new(r, "peak_phase", vl__json_str(vl_phase_name(b->peak_phase)));
  json_t *pp = json_object();
  for (int p = 0; p < VL_PH_COUNT; p++)
    if (b->phase_peak[p])
      json_object_set_new(pp, vl_phase_name((enum vl_phase)p), U(b->phase_peak[p]));
  json_object_set_new(r, "phase_peaks_allocated_bytes", pp);
  json_object_set_new(r, "peak_allocated_bytes", U(b->peak_allocated_bytes));
  json_object_set_new(r, "peak_reserved_bytes", U(b->peak_reserved_bytes));
  json_object_set_new(r, "cuda_context_bytes", U(b->cuda_context_bytes));
  json_object_set_new(r, "total_bytes", U(b->total_bytes));
  json_object_set_new(r, "host_bytes", U(b->host_bytes));
  if (b->other.total_bytes) {
    json_t *w = json_object();
    json_object_set_new(w, "peak_allocated_bytes", U(b->other.peak_allocated_bytes));
    json_object_set_new(w, "peak_reserved_bytes", U(b->other.peak_reserved_bytes));
    json_object_set_new(w, "total_bytes", U(b->other.total_bytes));
    json_object_set_new(w, "why", vl__json_str(b->other.why));
    json_object_set_new(r, "other_outcome", w);
  }
  json_object_set_new(r, "budget_bytes", U(vl_bill_budget_bytes(b)));
  if (j->pp > 1) {
    json_object_set_new(r, "pp_stage", U(b->pp_stage));
    const struct vl_bill_stage *st[2] = {&b->pp_first, &b->pp_last};
    json_t *stages = json_array();
    for (int k = 0; k < 2 && b->task == VL_TASK_TRAIN; k++) {
      json_t *x = json_object();
      json_object_set_new(x, "stage", U(k ? j->pp - 1 : 0));
      json_object_set_new(x, "peak_allocated_bytes", U(st[k]->peak_allocated_bytes));
      json_object_set_new(x, "peak_reserved_bytes", U(st[k]->peak_reserved_bytes));
      json_object_set_new(x, "total_bytes", U(st[k]->total_bytes));
      json_array_append_new(stages, x);
    }
    json_object_set_new(r, "pp_stages", stages);
  }
  if (v->gpu) {
    json_t *g = json_object();
    json_object_set_new(g, "name", vl__json_str(v->gpu->name));
    json_object_set_new(g, "memory_bytes", U(v->fit->capacity_bytes));
    json_object_set_new(g, "margin", json_real(v->fit->margin));
    json_object_set_new(g, "usable_bytes", U(v->fit->usable_bytes));
    json_object_set_new(g, "headroom_bytes", json_integer(v->fit->headroom_bytes));
    json_object_set_new(g, "fits", json_boolean(v->fit->fits));
    if (v->carry) {
      json_object_set_new(g, "context", vl__context_carry_json(v->carry));
      /* the headroom (or shortfall) is within the context's range */
      json_object_set_new(g, "context_edge", json_boolean(v->context_edge));
    }
    json_object_set_new(r, "gpu", g);
    json_object_set_new(r, "fits", json_boolean(v->fit->fits));
  }
  if (v->time) vl__time_json(r, v->time);
  if (v->searched)
    json_object_set_new(r, v->searched == 1 ? "max_batch" : "max_seq", U(v->search_best));
  json_t *terms = json_array();
  for (int i = 0; i < b->n_terms; i++) {
    const struct vl_term *t = &b->terms[i];
    json_t *e = json_object();
    json_object_set_new(e, "line", vl__json_str(vl_line_key(t->line)));
    json_object_set_new(e, "name", vl__json_str(t->name));
    json_object_set_new(e, "formula", vl__json_str(t->formula));
    json_object_set_new(e, "bytes", U(t->bytes));
    json_object_set_new(e, "detail", json_boolean(t->detail));
    json_t *in = json_object();
    for (int k = 0; k < t->n_in; k++)
      json_object_set_new(in, t->in[k].name, json_real(t->in[k].value));
    json_object_set_new(e, "inputs", in);
    json_object_set_new(e, "source", vl__json_str(t->source));
    json_array_append_new(terms, e);
  }
  json_object_set_new(r, "terms", terms);
  return r;
}

int vl_render_estimate(FILE *out, enum vl_format fmt, const struct vl_estimate_view *v) {
  if (fmt == VL_FMT_JSON) {
    json_t *r = json_report(v);
    int rc = json_dumpf(r, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(r);
    fputc('\n', out);
    return rc == 0 && !ferror(out) ? 0 : -1;
  }
  if (fmt == VL_FMT_MD)
    md(out, v);
  else
    text(out, v);
  return ferror(out) ? -1 : 0;
}

/* a number past VL_EXACT_MAX: err names it (its JSON field, its words) */
static bool past_bound(uint64_t x, const char *field, const char *what, const char *unit,
                       struct vl_err *err) {
  if (x <= VL_EXACT_MAX) return false;
  char n[32];
  vl__fail(err, VL_ERANGE,
           "the configuration is beyond what can be represented: '%s'%s%s%s would be %s%s, past "
           "2^53 (9,007,199,254,740,992; 8 PiB in bytes), the most an estimate reports exactly; "
           "check the config's sizes",
           field, strcmp(field, what) ? " (" : "", strcmp(field, what) ? what : "",
           strcmp(field, what) ? ")" : "", vl_fmt_int(n, sizeof n, x), unit);
  return true;
}

vl_status vl_bill_representable(const struct vl_bill *b, struct vl_err *err) {
  for (int l = 0; l < VL_LINE_COUNT; l++) {
    char key[64];
    snprintf(key, sizeof key, "bill.%s", vl_line_key((enum vl_line)l));
    if (past_bound(b->line_max[l], key, vl_line_label((enum vl_line)l), " bytes", err))
      return VL_ERANGE;
  }
  for (int i = 0; i < b->n_terms; i++)
    if (past_bound(b->terms[i].bytes, "terms.bytes", b->terms[i].name, " bytes", err))
      return VL_ERANGE;
  for (int p = 0; p < VL_PH_COUNT; p++)
    if (past_bound(b->phase_peak[p], "phase_peaks_allocated_bytes", vl_phase_name((enum vl_phase)p),
                   " bytes", err))
      return VL_ERANGE;
  const struct {
    uint64_t v;
    const char *key, *what;
  } f[] = {
      {b->peak_allocated_bytes, "peak_allocated_bytes", "the peak allocated"},
      {b->peak_reserved_bytes, "peak_reserved_bytes", "the peak reserved"},
      {b->cuda_context_bytes, "cuda_context_bytes", "the CUDA context"},
      {b->total_bytes, "total_bytes", "the process total"},
      {b->host_bytes, "host_bytes", "host RAM for offloaded states"},
      {b->other.total_bytes, "other_outcome.total_bytes", "the other outcome's total"},
      {b->pp_first.total_bytes, "pp_stages.total_bytes", "the first pipeline stage's total"},
      {b->pp_last.total_bytes, "pp_stages.total_bytes", "the last pipeline stage's total"},
      {b->params, "params", "parameters"}, /* counts from here on */
      {b->tokens, "tokens", "tokens per micro-batch"},
  };
  const size_t n_bytes = 8;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (past_bound(f[i].v, f[i].key, f[i].what, i < n_bytes ? " bytes" : "", err)) return VL_ERANGE;
  return VL_OK;
}
