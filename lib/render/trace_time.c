/* trace --gpu's step time (docs/cmd/trace.md, "Step time"): the traced
 * step's ops priced as estimate prices its own, shown as estimate shows
 * them (lib/render/estimate.c). */
#include "trace_time.h"

#include "internal.h"
#include "../util/internal.h"
#include "vramledger/render.h"

static const char *const phases[] = {"forward", "backward",  "recompute",
                                     "prestep", "optimizer", "other"};

#define HINT                                                                                       \
  "step time: give --gpu CARD, a card of the catalog (h100-80gb, h200, a100-80gb, l4, ...: "       \
  "data/gpus.json), to price the traced step's ops"

static double all_ops(const struct vl_trace_time *tt) {
  double n = 0;
  for (int p = 0; p < 6; p++)
    n += tt->phase_ops[p];
  return n;
}

void vl__trace_time_text(FILE *o, const struct vl_trace_time *tt, const char *gpu, double ops) {
  if (!tt) {
    if (ops > 0) fprintf(o, "\n  %s\n", HINT);
    return;
  }
  const struct vl_step_time *t = &tt->time;
  char s1[64], s2[64];
  fputs("\n  step time on ", o);
  vl__plain_text(o, gpu);
  fprintf(o, " (step %llu of %llu traced, %s ops): %.4f s (forward %.4f, backward %.4f",
          (unsigned long long)tt->step, (unsigned long long)tt->steps,
          vl_fmt_int(s1, sizeof s1, (uint64_t)(all_ops(tt) + 0.5)), t->step_s, t->forward_s,
          t->backward_s);
  if (t->recompute_s > 0) fprintf(o, ", recomputation %.4f", t->recompute_s);
  fprintf(o, ", optimizer %.4f s)", t->optimizer_s);
  if (t->tokens_per_s > 0)
    fprintf(o, "; %s tokens/s", vl_fmt_int(s2, sizeof s2, (uint64_t)(t->tokens_per_s + 0.5)));
  fprintf(o, ", MFU %.2f\n", t->mfu);
  fprintf(o, "    (%s%s%s)\n", t->source, t->approximate ? "; approximate: " : "",
          t->approximate ? t->note : "");
  fprintf(o, "  time of the step by op kind (seconds on the critical path)\n");
  for (int k = 0; k < VL_TK_COUNT; k++) {
    double share = t->step_s > 0 ? 100.0 * t->kind_s[k] / t->step_s : 0;
    fprintf(o, "    %-10s %9.4f s %5.1f %%\n", vl_time_kind_name((enum vl_time_kind)k),
            t->kind_s[k], share);
  }
  fprintf(o,
          "    GPU busy %.4f s, host dispatch %.4f s for %s ops (%s launch a kernel); %.3g FLOP "
          "of matmuls and attention, %.3g with the recomputation\n",
          t->gpu_s, t->host_s, vl_fmt_int(s1, sizeof s1, t->ops),
          vl_fmt_int(s2, sizeof s2, (uint64_t)(tt->kernels + 0.5)), t->model_flops,
          t->executed_flops);
}

void vl__trace_time_md(FILE *o, const struct vl_trace_time *tt, const char *gpu, double ops) {
  if (!tt) {
    if (ops > 0) fprintf(o, "\n%s.\n", HINT);
    return;
  }
  const struct vl_step_time *t = &tt->time;
  fputs("\n## Step time on ", o);
  vl__md_text(o, gpu);
  fprintf(o,
          "\n\nStep %llu of %llu traced: %.4f s (forward %.4f, backward %.4f, recomputation "
          "%.4f, optimizer %.4f)",
          (unsigned long long)tt->step, (unsigned long long)tt->steps, t->step_s, t->forward_s,
          t->backward_s, t->recompute_s, t->optimizer_s);
  if (t->tokens_per_s > 0) fprintf(o, "; %.0f tokens/s", t->tokens_per_s);
  fprintf(o, "; MFU %.2f (", t->mfu);
  vl__md_text(o, t->source);
  if (t->approximate) {
    fputs("; approximate: ", o);
    vl__md_text(o, t->note);
  }
  fputs(").\n\n| op kind | seconds | share |\n|---|---:|---:|\n", o);
  for (int k = 0; k < VL_TK_COUNT; k++)
    fprintf(o, "| %s | %.4f | %.1f %% |\n", vl_time_kind_name((enum vl_time_kind)k), t->kind_s[k],
            t->step_s > 0 ? 100.0 * t->kind_s[k] / t->step_s : 0);
}

void vl__trace_time_json(json_t *r, const struct vl_trace_time *tt, const char *gpu) {
  if (!tt) {
    json_object_set_new(r, "step_seconds", json_null());
    return;
  }
  vl__time_json(r, &tt->time);
  json_t *x = json_object_get(r, "time");
  if (!x) return;
  json_object_set_new(x, "gpu", vl__json_str(gpu));
  json_object_set_new(x, "step", U(tt->step));
  json_object_set_new(x, "steps", U(tt->steps));
  json_object_set_new(x, "step_complete", json_boolean(tt->complete));
  json_object_set_new(x, "tokens", tt->tokens > 0 ? json_real(tt->tokens) : json_null());
  json_object_set_new(x, "kernels", json_real(tt->kernels));
  json_t *p = json_object();
  for (int i = 0; i < 6; i++)
    json_object_set_new(p, phases[i], json_real(tt->phase_ops[i]));
  json_object_set_new(x, "phase_ops", p);
  json_object_set_new(x, "optimizer", tt->optimizer[0] ? vl__json_str(tt->optimizer) : json_null());
  json_object_set_new(x, "optimizer_impl",
                      tt->optimizer[0] ? vl__json_str(tt->optimizer_impl) : json_null());
  if (tt->time.tokens_per_s <= 0) json_object_set_new(r, "tokens_per_second", json_null());
}
