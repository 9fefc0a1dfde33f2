/* The plan: the seeds' cost table, the Pareto front, the decision trace. */
#include <jansson.h>
#include <stdio.h>

#include "../util/internal.h"
#include "vramledger/plan.h"
#include "vramledger/render.h"

#define GIB(x) ((double)(x) / (double)(1ull << 30))

static const char *strategy(const struct vl_plan_candidate *c, char *buf, size_t n) {
  if (c->tp > 1 && c->dp > 1)
    snprintf(buf, n, "TP%u x %s", c->tp, c->zero ? "ZeRO" : "DDP");
  else if (c->tp > 1)
    snprintf(buf, n, "TP%u", c->tp);
  else if (c->dp > 1)
    snprintf(buf, n, c->zero ? "ZeRO-%u" : "DDP", c->zero);
  else
    snprintf(buf, n, "1 GPU");
  if (c->tp > 1 && c->dp > 1 && c->zero) {
    size_t l = 0;
    while (buf[l])
      l++;
    snprintf(buf + l, n - l, "-%u", c->zero);
  }
  return buf;
}

static json_t *cand_json(const struct vl_plan_candidate *c) {
  char s[32];
  json_t *o = json_object();
  json_object_set_new(o, "gpu", json_string(c->gpu->name));
  json_object_set_new(o, "count", json_integer(c->count));
  json_object_set_new(o, "strategy", json_string(strategy(c, s, sizeof s)));
  json_object_set_new(o, "dp", json_integer(c->dp));
  json_object_set_new(o, "tp", json_integer(c->tp));
  json_object_set_new(o, "zero", json_integer(c->zero));
  json_object_set_new(o, "micro_batch", json_integer((json_int_t)c->micro_batch));
  json_object_set_new(o, "grad_accum", json_integer((json_int_t)c->grad_accum));
  json_object_set_new(o, "checkpointing", json_string(vl_ckpt_name(c->checkpointing)));
  json_object_set_new(o, "peak_bytes_per_gpu", json_integer((json_int_t)c->peak_bytes_per_gpu));
  json_object_set_new(o, "gpu_memory_bytes", json_integer((json_int_t)c->gpu->memory_bytes));
  json_object_set_new(o, "hours", json_real(c->hours));
  json_object_set_new(o, "cost_usd", json_real(c->cost_usd));
  json_object_set_new(o, "efficiency", json_real(c->efficiency));
  json_object_set_new(o, "step_s", json_real(c->step_s));
  json_object_set_new(o, "pareto", json_boolean(c->pareto));
  json_object_set_new(o, "meets_deadline", json_boolean(c->meets_deadline));
  json_object_set_new(o, "within_budget", json_boolean(c->within_budget));
  json_object_set_new(o, "net_value_usd", json_real(c->net_value_usd));
  return o;
}

int vl_render_plan(FILE *o, enum vl_format fmt, const struct vl_plan_view *v) {
  const struct vl_plan_result *r = v->r;
  const struct vl_plan_query *q = v->q;
  if (fmt == VL_FMT_JSON) {
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string("vramledger.plan/1"));
    json_object_set_new(root, "model", json_string(v->model_name));
    json_object_set_new(root, "tokens", json_integer((json_int_t)q->tokens));
    json_object_set_new(root, "seq", json_integer((json_int_t)q->base.seq));
    json_object_set_new(root, "global_batch", json_integer((json_int_t)q->global_batch));
    json_object_set_new(root, "mfu", json_real(q->mfu));
    json_object_set_new(root, "steps", json_integer((json_int_t)r->steps));
    json_object_set_new(root, "training_flops", json_real(r->flops));
    json_object_set_new(root, "evaluated", json_integer((json_int_t)r->evaluated));
    json_object_set_new(root, "prices_date", json_string(v->prices_date ? v->prices_date : ""));
    json_object_set_new(root, "best", r->have_best ? cand_json(&r->c[0]) : json_null());
    json_t *arr = json_array();
    for (size_t i = 0; i < r->n; i++)
      json_array_append_new(arr, cand_json(&r->c[i]));
    json_object_set_new(root, "candidates", arr);
    json_t *tr = json_array();
    for (int i = 0; i < r->n_trace; i++)
      json_array_append_new(tr, json_string(r->trace[i]));
    json_object_set_new(root, "trace", tr);
    int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    fputc('\n', o);
    return rc == 0 && !ferror(o) ? 0 : -1;
  }
  bool md = fmt == VL_FMT_MD;
  fprintf(o, "%s%s: %.3g tokens, seq %llu, global batch %llu -> %llu steps, %.3g FLOPs, MFU %.2f\n",
          md ? "## Plan: " : "plan: ", v->model_name, (double)q->tokens,
          (unsigned long long)q->base.seq, (unsigned long long)q->global_batch,
          (unsigned long long)r->steps, r->flops, q->mfu);
  fprintf(o, "%s%zu configurations estimated, %zu fit with %.0f %% kept free; prices of %s\n\n",
          md ? "\n" : "  ", r->evaluated, r->n, 100 * q->margin,
          v->prices_date && *v->prices_date ? v->prices_date : "the catalog");
  if (!r->n) {
    fprintf(o, "%snothing fits: try more GPUs (--max-gpus), LoRA, or a shorter sequence\n",
            md ? "" : "  ");
    return ferror(o) ? -1 : 0;
  }
  if (md)
    fprintf(o, "| # | GPU config | strategy | micro-batch x accum | ckpt | time h | efficiency | "
               "memory share | "
               "cost per GPU | total cost | Pareto "
               "|\n|---:|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
  else
    fprintf(o, "  %3s %-15s %-12s %-12s %-5s %9s %6s %7s %12s %12s %s\n", "#", "GPU config",
            "strategy", "mb x accum", "ckpt", "time h", "eff", "memory", "cost/GPU $", "total $",
            "");
  for (size_t i = 0; i < r->n && i < v->top; i++) {
    const struct vl_plan_candidate *c = &r->c[i];
    char cfg[48], st[32], mb[32];
    snprintf(cfg, sizeof cfg, "%ux%s", c->count, c->gpu->name);
    snprintf(mb, sizeof mb, "%llu x %llu", (unsigned long long)c->micro_batch,
             (unsigned long long)c->grad_accum);
    strategy(c, st, sizeof st);
    const char *mark = c->pareto ? "pareto" : "";
    if (!c->meets_deadline) mark = "late";
    if (!c->within_budget) mark = "over budget";
    if (md)
      fprintf(o, "| %zu | %s | %s | %s | %s | %.1f | %.0f %% | %.0f %% | %.2f | %.2f | %s |\n",
              i + 1, cfg, st, mb, vl_ckpt_name(c->checkpointing), c->hours, 100 * c->efficiency,
              100 * c->memory_share, c->cost_usd / c->count, c->cost_usd, mark);
    else
      fprintf(o, "  %3zu %-15s %-12s %-12s %-5s %9.1f %5.0f%% %6.0f%% %12.2f %12.2f %s\n", i + 1,
              cfg, st, mb, vl_ckpt_name(c->checkpointing), c->hours, 100 * c->efficiency,
              100 * c->memory_share, c->cost_usd / c->count, c->cost_usd, mark);
  }
  fprintf(o, "\n%s\n", md ? "### Why" : "decision tree:");
  for (int i = 0; i < r->n_trace; i++)
    fprintf(o, "%s%s\n", md ? "- " : "  ", r->trace[i]);
  if (!r->have_best)
    fprintf(o, "%sno configuration meets the deadline and the budget\n", md ? "\n" : "  ");
  return ferror(o) ? -1 : 0;
}
