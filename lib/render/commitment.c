/* The Training Resource Commitment: commitment.json and COMMITMENT.md
 * (hardware, baseline, SLA, fallback triggers, audit). */
#include <jansson.h>
#include <stdio.h>

#include "../util/internal.h"
#include "internal.h"
#include "vramledger/catalog.h"
#include "vramledger/commitment.h"
#include "vramledger/render.h"

static int commitment_json(FILE *out, const struct vl_commit_view *v) {
  const struct vl_job *j = v->job;
  json_t *o = json_object();
  json_object_set_new(o, "schema", json_string(VL_COMMITMENT_SCHEMA));
  json_object_set_new(o, "created", json_string(v->created));
  json_object_set_new(o, "vramledger", json_string(v->version));
  json_object_set_new(o, "model", json_string(v->model_name));
  json_object_set_new(o, "model_type", json_string(v->arch->model_type));
  json_object_set_new(o, "params", U(v->bill->params));
  json_t *hw = json_object();
  json_object_set_new(hw, "gpu", json_string(v->gpu->name));
  json_object_set_new(hw, "gpu_memory_bytes", U(v->gpu->memory_bytes));
  json_object_set_new(hw, "count", U(j->dp * j->tp * j->pp));
  json_object_set_new(hw, "margin", json_real(v->fit->margin));
  json_object_set_new(
      hw, "min_memory_bytes_per_gpu",
      U((uint64_t)((double)vl_bill_budget_bytes(v->bill) / (1.0 - v->fit->margin) + 0.5)));
  json_object_set_new(o, "hardware", hw);
  json_object_set_new(o, "baseline", vl__settings_json(j));
  json_t *est = json_object();
  json_object_set_new(est, "peak_allocated_bytes", U(v->bill->peak_allocated_bytes));
  json_object_set_new(est, "peak_reserved_bytes", U(v->bill->peak_reserved_bytes));
  json_object_set_new(est, "total_bytes", U(v->bill->total_bytes));
  if (v->bill->other.total_bytes) /* DDP's bucket rebuild: the other outcome */
    json_object_set_new(est, "other_total_bytes", U(v->bill->other.total_bytes));
  json_object_set_new(est, "peak_phase", json_string(vl_phase_name(v->bill->peak_phase)));
  json_object_set_new(est, "source", json_string("vramledger estimate"));
  json_object_set_new(o, "estimate", est);
  if (v->run) {
    json_t *m = json_object();
    json_object_set_new(m, "record", json_string(v->run));
    json_object_set_new(m, "peak_process_bytes", U(v->run_peak_process_bytes));
    json_object_set_new(m, "peak_cuda_alloc_bytes", U(v->run_peak_cuda_alloc_bytes));
    json_object_set_new(o, "measured", m);
  }
  json_t *sla = json_object();
  if (v->sla_tokens_per_s > 0)
    json_object_set_new(sla, "tokens_per_s", json_real(v->sla_tokens_per_s));
  json_object_set_new(
      sla, "measurement",
      json_string("median tokens/s over steady steps after warm-up, from the run record"));
  json_object_set_new(o, "sla", sla);
  json_t *tr = json_object();
  json_object_set_new(tr, "peak_over_commitment", json_real(1.05));
  json_object_set_new(tr, "peak_action", json_string("enable activation checkpointing"));
  json_object_set_new(tr, "throughput_under_sla", json_real(0.80));
  json_object_set_new(tr, "throughput_action",
                      json_string("switch the attention kernel (sdpa / flash)"));
  json_object_set_new(o, "triggers", tr);
  json_t *au = json_object();
  if (v->gpu_hours > 0) json_object_set_new(au, "gpu_hours", json_real(v->gpu_hours));
  json_object_set_new(au, "tolerance", json_real(0.05));
  json_object_set_new(au, "action", json_string("more than 5 % off: review"));
  json_object_set_new(o, "audit", au);
  int rc = json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(o);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}

static int commitment_md(FILE *o, const struct vl_commit_view *v) {
  const struct vl_job *j = v->job;
  const struct vl_bill *b = v->bill;
  fprintf(o, "# Training Resource Commitment: %s\n\nCreated %s by vramledger %s.\n\n",
          v->model_name, v->created, v->version);
  fprintf(o,
          "## Hardware\n\n- %llu x %s (%.2f GiB each); at least %.2f GiB per GPU with %.0f %% "
          "kept free\n\n",
          (unsigned long long)(j->dp * j->tp * j->pp), v->gpu->name, GIB(v->gpu->memory_bytes),
          GIB(vl_bill_budget_bytes(b)) / (1.0 - v->fit->margin), 100 * v->fit->margin);
  fprintf(o, "## Configuration baseline\n\n| setting | value |\n|---|---|\n");
  fprintf(o, "| model | %s (%s, %llu parameters) |\n", v->model_name, v->arch->model_type,
          (unsigned long long)b->params);
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
  if (v->run)
    fprintf(o, "%.2f GiB (`%s`) |\n", GIB(v->run_peak_process_bytes), v->run);
  else
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
  fprintf(o,
          "- measured peak above 105 %% of the committed %.2f GiB -> enable activation "
          "checkpointing\n",
          GIB(vl_bill_budget_bytes(b)));
  fprintf(o, "- throughput under 80 %% of the SLA -> switch the attention kernel\n\n## Audit\n\n");
  if (v->gpu_hours > 0) fprintf(o, "- budget: %.1f GPU-hours\n", v->gpu_hours);
  fprintf(o, "- actual GPU-hours, peak memory and throughput against this commitment: more than "
             "5 %% off -> review (`vramledger audit`)\n- CI: `vramledger check --commitment "
             "commitment.json ...` fails a change whose configuration drifts\n");
  return ferror(o) ? -1 : 0;
}

int vl_render_commitment(FILE *out, bool md, const struct vl_commit_view *v) {
  return md ? commitment_md(out, v) : commitment_json(out, v);
}
