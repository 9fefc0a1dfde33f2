/* vramledger plan: which GPUs, how many, which strategy, what it costs.
 * docs/cmd/plan.md. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/plan.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

/* --prices FILE over the catalog's example prices. */
static int apply_prices(const char *path, struct vl_catalog *cat) {
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_prices_apply(text, len, cat, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use the prices '%s': %s", path, err.msg);
    cli_hint("see docs/cmd/plan.md, \"Prices\", or data/prices-example.json");
    return VL_EXIT_ERROR;
  }
  return 0;
}

/* --run RUN: the MFU the job measured (the probe's tokens/s on its GPU),
 * in place of the default. */
static int mfu_from_run(const char *run, const struct vl_arch *arch, const struct vl_job *job,
                        const struct vl_catalog *cat, bool mfu_given, double *mfu) {
  if (mfu_given) {
    cli_error("--run and --mfu both set the MFU: give one");
    return VL_EXIT_USAGE;
  }
  char path[PATH_MAX];
  struct vl_record rec;
  int rc = cli_load_record(run, &rec, path, sizeof path);
  if (rc) return rc;
  struct vl_probe_layer f;
  vl_status s = vl_probe_analyze(&rec, &f);
  if (s != VL_OK) {
    cli_error("--run %s: cannot analyse the record: %s", path, vl_strerror(s));
    vl_record_release(&rec);
    return VL_EXIT_ERROR;
  }
  const char *device = f.device[0] ? f.device : rec.n_gpus ? rec.gpus[0].name : "";
  const struct vl_gpu *g = device[0] ? vl_catalog_match_device(cat, device) : NULL;
  double tps = f.tokens_per_s;
  vl_record_release(&rec);
  if (!f.present || tps <= 0) {
    cli_error("--run %s: no tokens per second in the record (it needs the PyTorch probe: "
              "run the job under 'vramledger run' without --no-probe)",
              path);
    return VL_EXIT_ERROR;
  }
  if (!g) {
    cli_error("--run %s: its GPU '%s' is not in the catalog; add it with --catalog FILE, or "
              "give --mfu",
              path, device[0] ? device : "(unknown: no NVML, no CUDA)");
    return VL_EXIT_ERROR;
  }
  double m = vl_plan_mfu_measured(arch, job, tps, g);
  if (!(m > 0 && m <= 1)) {
    cli_error("--run %s: %.0f tokens/s on %s means an MFU of %.3f, outside (0, 1]: is the "
              "record of this --model and these settings?",
              path, tps, g->name, m);
    return VL_EXIT_ERROR;
  }
  cli_hint("MFU %.3f measured in %s: %.0f tokens/s a GPU on %s (%s, %.0f TFLOP/s bf16)", m, path,
           tps, device, g->name, g->bf16_tflops);
  *mfu = m;
  return 0;
}

/* the cards to search: those LIST names (--gpu or --gpus), or the whole
 * catalog without one; *cards is the caller's to vl_free, NULL on failure */
static int plan_cards(const struct vl_catalog *cat, const char *list, struct vl_gpu **cards,
                      size_t *n) {
  *cards = vl_calloc(cat->n + 1, sizeof **cards);
  const struct vl_gpu **named = vl_calloc(cat->n + 1, sizeof *named);
  *n = 0;
  if (!*cards || !named) {
    vl_free(*cards);
    vl_free(named);
    *cards = NULL;
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  int rc = 0;
  if (!list) {
    for (size_t i = 0; i < cat->n; i++)
      (*cards)[(*n)++] = cat->gpus[i];
  } else if ((rc = est_gpu_list(cat, list, named, cat->n, n)) == 0) {
    for (size_t i = 0; i < *n; i++)
      (*cards)[i] = *named[i];
  }
  vl_free(named);
  if (rc) {
    vl_free(*cards);
    *cards = NULL;
  }
  return rc;
}

int cmd_plan(int argc, const char **argv) {
  static const char *const names[] = {"--tokens",
                                      "--global-batch",
                                      "--gpus",
                                      "--max-gpus",
                                      "--deadline-hours",
                                      "--budget",
                                      "--value-per-hour",
                                      "--late-penalty",
                                      "--mfu",
                                      "--top",
                                      "--prices",
                                      "--format",
                                      "--run",
                                      "--dp-efficiency",
                                      "--offload-slowdown",
                                      "--qlora-slowdown",
                                      NULL};
  const char *val[16];
  struct est e;
  int rc = est_parse_with(argc, argv, names, val, &e);
  if (rc) return rc;
  if (e.help) {
    fputs(vl_help_plan, stdout);
    return VL_EXIT_OK;
  }
  if (!e.model || !val[0] || !val[1]) {
    cli_error("plan needs --model, --tokens N and --global-batch G (and --seq S)");
    return VL_EXIT_USAGE;
  }
  /* what plan chooses itself, and estimate's own questions: refused, never
   * ignored (a --dp 2 that the plan then overrides is no plan of it) */
  static const char *const searched[] = {
      "batch",         "grad-accum", "dp",      "tp",      "pp",   "zero",
      "checkpointing", "max-batch",  "max-seq", "explain", "task", NULL};
  if ((rc = est_refuse_given(&e, searched,
                             "plan searches the micro-batch, accumulation, data, tensor and "
                             "pipeline parallelism, ZeRO stage and checkpointing of a training "
                             "run itself (--offload and --qlora fix theirs)")))
    return rc;
  if (val[7] && !val[4]) {
    cli_error("--late-penalty has no effect without --deadline-hours H (the deadline it is for)");
    return VL_EXIT_USAGE;
  }
  struct vl_plan_query q;
  vl_plan_query_init(&q);
  uint64_t u = 0, top = 15;
  if ((rc = cli_u64("tokens", val[0], 1, UINT64_MAX / 2, &q.tokens)) ||
      (rc = cli_u64("global-batch", val[1], 1, 1u << 24, &q.global_batch)))
    return rc;
  if (val[3]) {
    if ((rc = cli_u64("max-gpus", val[3], 1, 65536, &u))) return rc;
    q.max_gpus = (unsigned)u;
  }
  if ((val[4] && (rc = cli_double("deadline-hours", val[4], 0, 1e9, &q.deadline_hours))) ||
      (val[5] && (rc = cli_double("budget", val[5], 0, 1e15, &q.budget_usd))) ||
      (val[6] && (rc = cli_double("value-per-hour", val[6], 0, 1e12, &q.value_per_hour))) ||
      (val[7] && (rc = cli_double("late-penalty", val[7], 0, 1e15, &q.late_penalty_usd))) ||
      (val[8] && (rc = cli_double("mfu", val[8], 0.001, 1, &q.mfu))) ||
      (val[9] && (rc = cli_u64("top", val[9], 1, 1000000, &top))) ||
      (val[13] && (rc = cli_double("dp-efficiency", val[13], 0.05, 1, &q.dp_efficiency))) ||
      (val[14] && (rc = cli_double("offload-slowdown", val[14], 1, 100, &q.offload_slowdown))) ||
      (val[15] && (rc = cli_double("qlora-slowdown", val[15], 1, 100, &q.qlora_slowdown))))
    return rc;
  int fmt = 0; /* plan's own --format: estimate's three and html */
  static const char *const formats[] = {"text", "json", "md", "html", NULL};
  if (val[11] && (fmt = cli_choice("format", val[11], formats)) < 0) return VL_EXIT_USAGE;
  q.margin = e.margin;
  q.base = e.job;
  struct vl_arch arch;
  struct cli_model m;
  if ((rc = cli_load_model_file(e.model, &arch, &m))) return rc;
  vl_free(m.text);
  /* the plan names its model so that `commit --plan` finds it from any
   * folder: a bundled name as it is, a file by its absolute path (the
   * commitment then stores it relative to itself) */
  char model_ref[PATH_MAX];
  if (m.bundled[0] || !realpath(m.path, model_ref))
    snprintf(model_ref, sizeof model_ref, "%s", m.bundled[0] ? m.bundled : e.model);
  q.arch = &arch;
  /* the cards: --gpu a,b,c (or one; --gpus is its alias) or the whole catalog */
  const char *gl = val[2] ? val[2] : e.gpu;
  if (e.gpu && val[2]) {
    cli_error("give the cards once: --gpus is --gpu's alias (--gpu %s,%s)", e.gpu, val[2]);
    return VL_EXIT_USAGE;
  }
  struct vl_catalog cat;
  if ((rc = est_catalog(e.catalog, &cat))) return rc;
  if (val[10] && (rc = apply_prices(val[10], &cat))) {
    vl_catalog_release(&cat);
    return rc;
  }
  struct vl_gpu *cards;
  size_t nc;
  if ((rc = plan_cards(&cat, gl, &cards, &nc))) {
    vl_catalog_release(&cat);
    return rc;
  }
  q.gpus = cards;
  q.n_gpus = nc;
  if (val[12] && (rc = mfu_from_run(val[12], &arch, &e.job, &cat, val[8] != NULL, &q.mfu))) {
    vl_free(cards);
    vl_catalog_release(&cat);
    return rc;
  }
  q.mfu_given = val[8] != NULL || val[12] != NULL; /* else each step is priced */
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_plan_result r;
  struct vl_err err = {""};
  vl_status s = vl_plan_search(&q, &ov, &r, &err);
  if (s != VL_OK) {
    cli_error("cannot plan: %s", err.msg);
    vl_free(cards);
    vl_catalog_release(&cat);
    return s == VL_ENOMEM ? VL_EXIT_ERROR : VL_EXIT_USAGE;
  }
  char name[256];
  /* each card's CUDA context and cuBLAS workspaces, as the bills hold them */
  struct vl_context_carry *carry = vl_calloc(nc + 1, sizeof *carry);
  for (size_t i = 0; carry && i < nc; i++)
    vl_context_carry(&cards[i], &ov, &e.job, &carry[i]);
  struct vl_plan_view v = {cli_model_name(e.model, name, sizeof name),
                           &q,
                           &r,
                           (size_t)top,
                           cat.prices_date,
                           model_ref,
                           carry};
  static const enum vl_format map[] = {VL_FMT_TEXT, VL_FMT_JSON, VL_FMT_MD};
  int w = fmt == 3 ? vl_render_plan_html(stdout, &v) : vl_render_plan(stdout, map[fmt], &v);
  rc = w == 0 ? (r.have_best ? VL_EXIT_OK : VL_EXIT_NOFIT) : VL_EXIT_ERROR;
  vl_free(carry);
  vl_plan_release(&r);
  vl_free(cards);
  vl_catalog_release(&cat);
  return rc;
}
