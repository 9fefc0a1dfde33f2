/* The plan: the cost table, the Pareto front, the decision trace. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/catalog.h"
#include "vramledger/plan.h"
#include "vramledger/render.h"

#define VL_PLAN_CARDS_SAID 4096 /* the catalog's most */

static const char *strategy(const struct vl_plan_candidate *c, char *buf, size_t n) {
  size_t l = 0;
  buf[0] = '\0';
#define PART(...)                                                                                  \
  do {                                                                                             \
    if (l && l + 3 < n) l += (size_t)snprintf(buf + l, n - l, " x ");                              \
    if (l < n) l += (size_t)snprintf(buf + l, n - l, __VA_ARGS__);                                 \
  } while (0)
  if (c->tp > 1) PART("TP%u", c->tp);
  if (c->pp > 1) PART("PP%u", c->pp);
  if (c->dp > 1) {
    if (c->zero)
      PART("ZeRO-%u", c->zero);
    else
      PART("DDP");
  }
  if (!l) l = (size_t)snprintf(buf, n, "1 GPU");
  if (c->qlora && l < n) l += (size_t)snprintf(buf + l, n - l, " + QLoRA");
  if (c->offload != VL_OFFLOAD_NONE && l < n)
    snprintf(buf + l, n - l, " + CPU %s", vl_offload_name(c->offload));
#undef PART
  return buf;
}

/* A row's last column: over budget, late or on the Pareto front, and a fit
 * within its card's context range ("context edge"). */
static void row_mark(const struct vl_plan_candidate *c, char *buf, size_t n) {
  const char *base = !c->within_budget    ? "over budget"
                     : !c->meets_deadline ? "late"
                     : c->pareto          ? "pareto"
                                          : "";
  snprintf(buf, n, "%s%s%s", base, *base && c->context_edge ? ", " : "",
           c->context_edge ? "context edge" : "");
}

static json_t *cand_json(const struct vl_plan_candidate *c) {
  char s[48];
  json_t *o = json_object();
  json_object_set_new(o, "gpu", vl__json_str(c->gpu->name));
  json_object_set_new(o, "count", json_integer(c->count));
  json_object_set_new(o, "strategy", vl__json_str(strategy(c, s, sizeof s)));
  json_object_set_new(o, "dp", json_integer(c->dp));
  json_object_set_new(o, "offload", vl__json_str(vl_offload_name(c->offload)));
  json_object_set_new(o, "qlora", json_boolean(c->qlora));
  json_object_set_new(o, "dequant_s", json_real(c->dequant_s));
  json_object_set_new(o, "host_bytes", U(c->host_bytes));
  json_object_set_new(o, "tp", json_integer(c->tp));
  json_object_set_new(o, "pp", json_integer(c->pp));
  json_object_set_new(o, "zero", json_integer(c->zero));
  json_object_set_new(o, "micro_batch", U(c->micro_batch));
  json_object_set_new(o, "grad_accum", U(c->grad_accum));
  json_object_set_new(o, "checkpointing", vl__json_str(vl_ckpt_name(c->checkpointing)));
  json_object_set_new(o, "peak_bytes_per_gpu", U(c->peak_bytes_per_gpu));
  json_object_set_new(o, "headroom_bytes", json_integer((json_int_t)c->headroom_bytes));
  json_object_set_new(o, "context_range_bytes", U(c->context_range_bytes));
  json_object_set_new(o, "context_edge", json_boolean(c->context_edge));
  json_object_set_new(o, "gpu_memory_bytes", U(c->gpu->memory_bytes));
  json_object_set_new(o, "hours", json_real(c->hours));
  json_object_set_new(o, "cost_usd", json_real(c->cost_usd));
  json_object_set_new(o, "efficiency", json_real(c->efficiency));
  json_object_set_new(o, "step_s", json_real(c->step_s));
  json_object_set_new(o, "compute_s", json_real(c->compute_s));
  json_object_set_new(o, "tp_comm_s", json_real(c->tp_comm_s));
  json_object_set_new(o, "dp_comm_s", json_real(c->dp_comm_s));
  json_object_set_new(o, "dp_hidden_s", json_real(c->dp_hidden_s));
  json_object_set_new(o, "pareto", json_boolean(c->pareto));
  json_object_set_new(o, "meets_deadline", json_boolean(c->meets_deadline));
  json_object_set_new(o, "within_budget", json_boolean(c->within_budget));
  json_object_set_new(o, "net_value_usd", json_real(c->net_value_usd));
  return o;
}

/* The cards the query named that plan did not plan on, with the reason
 * (text and Markdown). */
static void plan_excluded(FILE *o, bool md, const struct vl_plan_result *r) {
  if (!r->n_excluded) return;
  fprintf(o, "\n%s\n", md ? "### Not planned on" : "not planned on:");
  for (int i = 0; i < r->n_excluded; i++)
    fprintf(o, "%s%s: %s\n", md ? "- " : "  ", r->excluded[i].gpu->name, r->excluded[i].why);
}

/* The cards of the rows shown whose CUDA context is carried over from the
 * H200, once each (text and Markdown). */
static void plan_context(FILE *o, bool md, const struct vl_plan_view *v) {
  const struct vl_plan_result *r = v->r;
  if (!v->carry) return;
  bool said[VL_PLAN_CARDS_SAID] = {false};
  for (size_t i = 0; i < r->n && i < v->top; i++) {
    size_t k = (size_t)(r->c[i].gpu - v->q->gpus);
    if (k >= v->q->n_gpus || k >= VL_PLAN_CARDS_SAID || said[k]) continue;
    said[k] = true;
    char line[400];
    vl__context_carry_text(&v->carry[k], r->c[i].gpu->name, line, sizeof line);
    if (line[0]) fprintf(o, "%s%s%s\n", md ? "\n" : "", md ? "" : "  ", line);
  }
}

/* What "context edge" on a row shown means, once (text and Markdown). */
static void plan_edge(FILE *o, bool md, const struct vl_plan_view *v) {
  const struct vl_plan_result *r = v->r;
  for (size_t i = 0; i < r->n && i < v->top; i++) {
    if (!r->c[i].context_edge) continue;
    fprintf(o,
            "%s%scontext edge: the headroom (%.0f MiB on #%zu) is within the +-%.0f MiB of a "
            "CUDA context carried over from the H200: the card's own may not leave room; "
            "measure it with vramledger run\n",
            md ? "\n" : "", md ? "" : "  ", (double)r->c[i].headroom_bytes / (1 << 20), i + 1,
            (double)r->c[i].context_range_bytes / (1 << 20));
    return;
  }
}

/* root (every member but the candidates), then "candidates" last: one
 * compact line a candidate, each made and let go of in turn (a tree of
 * 10^5 of them and its indentation took seconds, bench/results/speed/README.md#plan) */
static int plan_json_out(FILE *o, const json_t *root, const struct vl_plan_result *r) {
  const size_t flags = JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6);
  char *head = json_dumps(root, JSON_INDENT(2) | flags);
  size_t n = head ? strlen(head) : 0;
  if (n < 2 || head[n - 1] != '}') {
    free(head);
    return -1;
  }
  head[n - 1] = '\0'; /* "{\n  ...\n}": its members, then the candidates */
  while (n > 1 && (head[n - 2] == '\n' || head[n - 2] == ' '))
    head[--n - 1] = '\0';
  fprintf(o, "%s%s\n  \"candidates\": [", head, n > 2 ? "," : "");
  free(head);
  int rc = 0;
  for (size_t i = 0; i < r->n && rc == 0; i++) {
    json_t *c = cand_json(&r->c[i]);
    fputs(i ? ",\n    " : "\n    ", o);
    rc = c ? json_dumpf(c, o, JSON_COMPACT | flags) : -1;
    json_decref(c);
  }
  fputs(r->n ? "\n  ]\n}\n" : "]\n}\n", o);
  return rc;
}

int vl_render_plan(FILE *o, enum vl_format fmt, const struct vl_plan_view *v) {
  const struct vl_plan_result *r = v->r;
  const struct vl_plan_query *q = v->q;
  if (fmt == VL_FMT_JSON) {
    json_t *root = json_object();
    json_object_set_new(root, "schema", vl__json_str("vramledger.plan/1"));
    json_object_set_new(root, "model", vl__json_str(v->model ? v->model : v->model_name));
    json_object_set_new(root, "tokens", U(q->tokens));
    json_object_set_new(root, "seq", U(q->base.seq));
    json_object_set_new(root, "global_batch", U(q->global_batch));
    json_object_set_new(root, "mfu", q->mfu_given ? json_real(q->mfu) : json_null());
    json_object_set_new(root, "time_model",
                        vl__json_str(q->mfu_given ? "6ND at the given MFU" : "kernels priced"));
    json_object_set_new(root, "dp_efficiency",
                        q->dp_efficiency > 0 ? json_real(q->dp_efficiency) : json_null());
    json_object_set_new(root, "steps", U(r->steps));
    json_object_set_new(root, "training_flops", json_real(r->flops));
    json_object_set_new(root, "evaluated", U(r->evaluated));
    json_object_set_new(root, "prices_date", vl__json_str(v->prices_date ? v->prices_date : ""));
    json_object_set_new(root, "margin", json_real(q->margin));
    json_t *best = json_null();
    if (r->have_best) { /* with the job it runs: `commit --plan` reads it */
      struct vl_job j;
      vl_plan_candidate_job(q, &r->c[0], &j);
      best = cand_json(&r->c[0]);
      json_object_set_new(best, "settings", vl__settings_json(&j));
    }
    json_object_set_new(root, "best", best);
    json_t *tr = json_array();
    for (int i = 0; i < r->n_trace; i++)
      json_array_append_new(tr, vl__json_str(r->trace[i]));
    json_object_set_new(root, "trace", tr);
    json_t *ex = json_array();
    for (int i = 0; i < r->n_excluded; i++) {
      json_t *e = json_object();
      json_object_set_new(e, "gpu", vl__json_str(r->excluded[i].gpu->name));
      json_object_set_new(e, "reason", vl__json_str(r->excluded[i].why));
      json_array_append_new(ex, e);
    }
    json_object_set_new(root, "excluded", ex);
    json_t *cx = json_array(); /* each card's CUDA context: measured, or carried over */
    for (size_t i = 0; v->carry && i < q->n_gpus; i++) {
      json_t *e = vl__context_carry_json(&v->carry[i]);
      json_object_set_new(e, "gpu", vl__json_str(q->gpus[i].name));
      json_array_append_new(cx, e);
    }
    json_object_set_new(root, "context", cx);
    int rc = plan_json_out(o, root, r);
    json_decref(root);
    return rc == 0 && !ferror(o) ? 0 : -1;
  }
  bool md = fmt == VL_FMT_MD;
  fputs(md ? "## Plan: " : "plan: ", o);
  vl__text(o, v->model_name, md);
  fprintf(o, ": %.3g tokens, seq %llu, global batch %llu -> %llu steps, %.3g FLOPs, ",
          (double)q->tokens, (unsigned long long)q->base.seq, (unsigned long long)q->global_batch,
          (unsigned long long)r->steps, r->flops);
  if (q->mfu_given)
    fprintf(o, "MFU %.2f", q->mfu);
  else
    fprintf(o, "steps priced kernel by kernel");
  if (q->dp_efficiency > 0) fprintf(o, ", data-parallel scaling %.2f (measured)", q->dp_efficiency);
  fputc('\n', o);
  fprintf(o, "%s%zu configurations estimated, %zu fit with %.0f %% kept free; prices of %s\n\n",
          md ? "\n" : "  ", r->evaluated, r->n, 100 * q->margin,
          v->prices_date && *v->prices_date ? v->prices_date : "the catalog");
  if (!r->n) {
    if (!r->evaluated && r->n_excluded)
      fprintf(o,
              "%sno card named can run this job (below): name others with --gpus, or take "
              "another --precision\n",
              md ? "" : "  ");
    else
      fprintf(o, "%snothing fits: try more GPUs (--max-gpus), LoRA, or a shorter sequence\n",
              md ? "" : "  ");
    for (int i = 0; i < r->n_trace; i++)
      fprintf(o, "%s%s\n", md ? "- " : "  ", r->trace[i]);
    plan_excluded(o, md, r);
    return ferror(o) ? -1 : 0;
  }
  if (md)
    fprintf(o, "| # | GPU config | strategy | micro-batch x accum | ckpt | time | efficiency | "
               "memory share | "
               "cost per GPU | total cost | Pareto "
               "|\n|---:|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
  int sw = 12; /* the strategy column: as wide as the widest shown */
  for (size_t i = 0; i < r->n && i < v->top; i++) {
    char st[48];
    int l = (int)strlen(strategy(&r->c[i], st, sizeof st));
    if (l > sw) sw = l;
  }
  if (!md)
    fprintf(o, "  %3s %-15s %-*s %-12s %-5s %9s %6s %7s %12s %12s %s\n", "#", "GPU config", sw,
            "strategy", "mb x accum", "ckpt", "time", "eff", "memory", "cost/GPU", "total", "");
  for (size_t i = 0; i < r->n && i < v->top; i++) {
    const struct vl_plan_candidate *c = &r->c[i];
    char cfg[48], st[48], mb[32];
    snprintf(cfg, sizeof cfg, "%ux%s", c->count, c->gpu->name);
    snprintf(mb, sizeof mb, "%llu x %llu", (unsigned long long)c->micro_batch,
             (unsigned long long)c->grad_accum);
    strategy(c, st, sizeof st);
    char mark[48];
    row_mark(c, mark, sizeof mark);
    /* time and cost in the unit that fits each (minutes, cents for a
     * short job) */
    char hours[32], per_gpu[32], total[32];
    vl_plan_hours_text(c->hours, hours, sizeof hours);
    vl_plan_usd_text(c->cost_usd / c->count, per_gpu, sizeof per_gpu);
    vl_plan_usd_text(c->cost_usd, total, sizeof total);
    if (md)
      fprintf(o, "| %zu | %s | %s | %s | %s | %s | %.0f %% | %.0f %% | %s | %s | %s |\n", i + 1,
              cfg, st, mb, vl_ckpt_name(c->checkpointing), hours, 100 * c->efficiency,
              100 * c->memory_share, per_gpu, total, mark);
    else
      fprintf(o, "  %3zu %-15s %-*s %-12s %-5s %9s %5.0f%% %6.0f%% %12s %12s %s\n", i + 1, cfg, sw,
              st, mb, vl_ckpt_name(c->checkpointing), hours, 100 * c->efficiency,
              100 * c->memory_share, per_gpu, total, mark);
  }
  plan_context(o, md, v);
  plan_edge(o, md, v);
  fprintf(o, "\n%s\n", md ? "### Why" : "decision tree:");
  for (int i = 0; i < r->n_trace; i++)
    fprintf(o, "%s%s\n", md ? "- " : "  ", r->trace[i]);
  plan_excluded(o, md, r);
  if (!r->have_best)
    fprintf(o, "%sno configuration meets the deadline and the budget\n", md ? "\n" : "  ");
  return ferror(o) ? -1 : 0;
}

/* ---- HTML: the table and time against cost for every feasible plan ------ */

/* A plan's marker: the parallelism that shapes it (the chart's legend
 * names them; html_charts.js draws them). */
static const char *const shape_name[][2] = {{"circle", "one GPU"},
                                            {"square", "DDP"},
                                            {"triangle", "ZeRO"},
                                            {"diamond", "tensor parallel (TP)"},
                                            {"star", "pipeline (PP)"}};
static int shape_of(const struct vl_plan_candidate *c) {
  if (c->pp > 1) return 4;
  if (c->tp > 1) return 3;
  if (c->dp > 1) return c->zero ? 2 : 1;
  return 0;
}

/* one colour a GPU type, in the order the plans name them */
static const char *const gpu_colour[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                         "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"};
enum { MAX_GPU_SERIES = sizeof gpu_colour / sizeof gpu_colour[0] };

/* What hovering a plan shows: GPU, count, strategy, micro-batch, time,
 * cost, and the bill's total a GPU. */
static json_t *plan_meta(const struct vl_plan_candidate *c, bool chosen) {
  char st[48], hours[32], usd[32], gib[32], text[320];
  vl_plan_hours_text(c->hours, hours, sizeof hours);
  vl_plan_usd_text(c->cost_usd, usd, sizeof usd);
  snprintf(text, sizeof text,
           "%s%u x %s, %s, micro-batch %llu x %llu accumulated, checkpointing %s: %s, %s, "
           "the bill %s a GPU%s",
           chosen ? "the chosen plan: " : "", c->count, c->gpu->name, strategy(c, st, sizeof st),
           (unsigned long long)c->micro_batch, (unsigned long long)c->grad_accum,
           vl_ckpt_name(c->checkpointing), hours, usd,
           vl_fmt_gib(gib, sizeof gib, c->peak_bytes_per_gpu), c->pareto ? " (Pareto front)" : "");
  return json_pack("{s:o,s:i}", "h", vl__json_str(text), "s", shape_of(c));
}

/* Time against cost, log scales: one colour a GPU type, one marker shape a
 * kind of parallelism, the Pareto front a line through its plans, the
 * chosen plan ringed; hovering a plan names it. Every plan that fits, at
 * most about 5,000 (the front and the chosen always). */
static void plan_chart(FILE *o, const struct vl_plan_result *r) {
  json_t *chart = vl__chart_new("lines", "time to train", "hours", "cost", "usd");
  json_object_set_new(json_object_get(chart, "x"), "log", json_true());
  json_object_set_new(json_object_get(chart, "y"), "log", json_true());
  const struct vl_gpu *gpus[MAX_GPU_SERIES];
  int ser[MAX_GPU_SERIES], n_gpus = 0;
  for (size_t i = 0; i < r->n; i++) {
    int k = 0;
    while (k < n_gpus && gpus[k] != r->c[i].gpu)
      k++;
    if (k == n_gpus && n_gpus < MAX_GPU_SERIES) {
      gpus[n_gpus] = r->c[i].gpu;
      ser[n_gpus] = vl__chart_series(chart, r->c[i].gpu->name, gpu_colour[n_gpus],
                                     VL_SERIES_POINTS | VL_SERIES_NO_LINE);
      n_gpus++;
    }
  }
  int front = vl__chart_series(chart, "the time/cost Pareto front", "#d62728", 0);
  int chosen = r->have_best ? vl__chart_series(chart, "the chosen plan", "#000000",
                                               VL_SERIES_POINTS | VL_SERIES_NO_LINE | VL_SERIES_BIG)
                            : -1;
  json_t *all = json_object_get(chart, "series");
  for (int k = 0; k < n_gpus; k++)
    json_object_set_new(json_array_get(all, (size_t)ser[k]), "shaped", json_true());
  json_object_set_new(json_array_get(all, (size_t)front), "width", json_real(2.5));
  if (chosen >= 0) json_object_set_new(json_array_get(all, (size_t)chosen), "ring", json_true());
  json_t *meta = json_array(), *shapes = json_array();
  for (size_t k = 0; k < sizeof shape_name / sizeof shape_name[0]; k++)
    json_array_append_new(shapes, json_pack("[s,s]", shape_name[k][0], shape_name[k][1]));
  size_t step = r->n > 5000 ? r->n / 5000 : 1; /* a page, not a megabyte */
  for (size_t i = 0; i < r->n; i++) {
    const struct vl_plan_candidate *x = &r->c[i];
    bool is_best = chosen >= 0 && i == 0;
    if (!x->pareto && !is_best && i % step) continue;
    int k = 0;
    while (k < n_gpus && gpus[k] != x->gpu)
      k++;
    json_t *row = vl__chart_row(chart, x->hours);
    if (k < n_gpus) vl__chart_set(row, ser[k], x->cost_usd);
    if (x->pareto) vl__chart_set(row, front, x->cost_usd);
    if (is_best) vl__chart_set(row, chosen, x->cost_usd);
    json_array_append_new(meta, plan_meta(x, is_best));
  }
  json_object_set_new(chart, "meta", meta);
  json_object_set_new(chart, "shapes", shapes);
  fputs("<h2>Time against cost (every plan that fits; log scales)</h2>\n", o);
  vl__html_chart(o, "time against cost", chart, 460);
  fputs("<p class=\"vl-caption\">Each dot is a plan that fits: its colour the GPU, its shape the "
        "parallelism; the red line joins the Pareto front (no plan is both faster and cheaper), "
        "the ring is the chosen plan. Hover a plan to read it; drag to zoom, double-click to zoom "
        "out.</p>\n",
        o);
}

int vl_render_plan_html(FILE *o, const struct vl_plan_view *v) {
  const struct vl_plan_result *r = v->r;
  const struct vl_plan_query *q = v->q;
  vl__html_head(o, "vramledger plan");
  fputs("<h1>Plan: ", o);
  vl__html_text(o, v->model_name);
  char tokens[32], flops[32];
  vl_fmt_int(tokens, sizeof tokens, q->tokens);
  /* SI prefixes, never e-notation: the page is read, not parsed */
  static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y"};
  double fl = r->flops;
  int k = 0;
  while (fl >= 1000 && k < 8)
    fl /= 1000, k++;
  snprintf(flops, sizeof flops, "%.1f %sFLOP", fl, prefix[k]);
  char tm[48];
  if (q->mfu_given)
    snprintf(tm, sizeof tm, "MFU %.2f", q->mfu);
  else
    snprintf(tm, sizeof tm, "steps priced kernel by kernel");
  fprintf(o,
          "</h1>\n<p>%s tokens, seq %llu, global batch %llu: %llu steps, %s, %s. %zu "
          "configurations estimated, %zu fit with %.0f %% kept free; prices of ",
          tokens, (unsigned long long)q->base.seq, (unsigned long long)q->global_batch,
          (unsigned long long)r->steps, flops, tm, r->evaluated, r->n, 100 * q->margin);
  vl__html_text(o, v->prices_date && *v->prices_date ? v->prices_date : "the catalog");
  fputs(".</p>\n", o);
  if (r->n) {
    plan_chart(o, r);
    fputs("<table><tr><th>#</th><th>GPU config</th><th>strategy</th><th>micro-batch x "
          "accum</th><th>ckpt</th><th>time</th><th>efficiency</th><th>memory share</th>"
          "<th>cost per GPU</th><th>total</th><th></th></tr>\n",
          o);
    for (size_t i = 0; i < r->n && i < v->top; i++) {
      const struct vl_plan_candidate *c = &r->c[i];
      char st[48], mark[48], hours[32], per_gpu[32], total[32];
      row_mark(c, mark, sizeof mark);
      vl_plan_hours_text(c->hours, hours, sizeof hours);
      vl_plan_usd_text(c->cost_usd / c->count, per_gpu, sizeof per_gpu);
      vl_plan_usd_text(c->cost_usd, total, sizeof total);
      fprintf(o, "<tr%s><td class=n>%zu</td><td>%ux",
              i == 0 && r->have_best ? " class=\"vl-chosen\"" : "", i + 1, c->count);
      vl__html_text(o, c->gpu->name);
      fprintf(o,
              "</td><td>%s</td><td>%llu x %llu</td><td>%s</td><td class=n>%s</td>"
              "<td class=n>%.0f %%</td><td class=n>%.0f %%</td><td class=n>%s</td>"
              "<td class=n>%s</td><td>%s</td></tr>\n",
              strategy(c, st, sizeof st), (unsigned long long)c->micro_batch,
              (unsigned long long)c->grad_accum, vl_ckpt_name(c->checkpointing), hours,
              100 * c->efficiency, 100 * c->memory_share, per_gpu, total, mark);
    }
    fputs("</table>\n", o);
  } else {
    fputs("<p>Nothing fits: try more GPUs (--max-gpus), LoRA, or a shorter sequence.</p>\n", o);
  }
  fputs("<h2>Why</h2>\n<ul>\n", o);
  for (int i = 0; i < r->n_trace; i++) {
    fputs("<li>", o);
    vl__html_text(o, r->trace[i]);
    fputs("</li>\n", o);
  }
  fputs("</ul>\n", o);
  if (r->n && !r->have_best)
    fputs("<p>No configuration meets the deadline and the budget.</p>\n", o);
  vl__html_foot(o);
  return ferror(o) ? -1 : 0;
}
