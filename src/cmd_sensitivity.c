/* vramledger sensitivity: how robust the memory plan is; with thresholds
 * (--fail-above ...) a gate: exit 3 when a probability exceeds its own.
 * docs/cmd/sensitivity.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/render.h"
#include "vramledger/sensitivity.h"

/* "seq=±20%", "hidden=+-15%", "precision=bf16,fp16", "attention=eager,sdpa" */
static int parse_vary(const char *s, bool normal, struct vl_vary *v) {
  struct vl_err err = {""};
  if (vl_vary_parse(s, normal, v, &err) != VL_OK) {
    cli_error("--vary '%s': %s", s, err.msg);
    return VL_EXIT_USAGE;
  }
  return 0;
}

/* --fail-above* PCT: the largest acceptable probability, in percent */
static int parse_gate(const char *flag, const char *v, struct vl_sens_verdict *gate,
                      enum vl_sens_gate g) {
  double pct = 0;
  int rc = cli_double(flag, v, 0, 100, &pct);
  if (rc) return rc;
  gate->given[g] = true;
  gate->limit[g] = pct / 100;
  return 0;
}

/* A gate whose probability the draws do not give is refused, never passed. */
static int gates_ready(const struct vl_sens_query *q, const struct vl_sens_result *r,
                       const struct vl_sens_verdict *gate) {
  if (gate->given[VL_SENS_GATE_OOM] && !vl_sens_gate_ready(q, r, VL_SENS_GATE_OOM)) {
    cli_error("--fail-above needs the card the job runs on: give --gpu NAME");
    return VL_EXIT_USAGE;
  }
  static const char *const flag[] = {"", "--fail-above-budget", "--fail-above-deadline"};
  for (int g = VL_SENS_GATE_BUDGET; g < VL_SENS_GATES; g++) {
    if (!gate->given[g] || vl_sens_gate_ready(q, r, (enum vl_sens_gate)g)) continue;
    const char *what = g == VL_SENS_GATE_BUDGET ? "--budget USD" : "--deadline-hours H";
    if (q->fit || !r->timed)
      cli_error("%s needs the draws' step times, which a training job's estimates on a card "
                "give (not a fit's)",
                flag[g]);
    else
      cli_error("%s needs %s and --tokens N: the probability it holds to its threshold", flag[g],
                what);
    return VL_EXIT_USAGE;
  }
  return 0;
}

/* sensitivity's own flags, "--flag V" or "--flag=V" as the estimate
 * flags are spelt; the rest, estimate's, into f->rest. @return 0 or an
 * exit code (said). */
struct own_flags {
  const char *rest[256], *vary[VL_SENS_MAX_VARY], *gpus, *dist, *fit;
  int n, nv;
};

static int own_flags(int argc, const char **argv, struct vl_sens_query *q,
                     struct vl_sens_verdict *g, struct own_flags *f) {
  int rc;
  static const char *const own[] = {"--vary",
                                    "--samples",
                                    "--seed",
                                    "--gpus",
                                    "--dist",
                                    "--fit",
                                    "--estimates",
                                    "--tokens",
                                    "--deadline-hours",
                                    "--budget",
                                    "--fail-above",
                                    "--fail-above-budget",
                                    "--fail-above-deadline",
                                    NULL};
  for (int i = 0; i < argc; i++) { /* our own flags; the rest are estimate's */
    /* "--flag V" or "--flag=V", as the estimate flags are spelt */
    const char *a = NULL, *v = NULL;
    for (int k = 0; i > 0 && own[k] && !a; k++) {
      size_t l = strlen(own[k]);
      if (!strncmp(argv[i], own[k], l) && (argv[i][l] == '\0' || argv[i][l] == '=')) {
        a = own[k];
        v = argv[i][l] == '=' ? argv[i] + l + 1 : NULL;
      }
    }
    if (!a) {
      f->rest[f->n++] = argv[i];
      continue;
    }
    if (!v && i + 1 >= argc) {
      cli_error("option '%s' needs a value", a);
      return VL_EXIT_USAGE;
    }
    if (!v) v = argv[++i];
    if (!strcmp(a, "--vary")) {
      if (f->nv == VL_SENS_MAX_VARY) {
        cli_error("at most %d --vary", VL_SENS_MAX_VARY);
        return VL_EXIT_USAGE;
      }
      f->vary[f->nv++] = v;
    } else if (!strcmp(a, "--samples")) {
      if ((rc = cli_u64("samples", v, 1, 100000000, &q->samples))) return rc;
    } else if (!strcmp(a, "--seed")) {
      if ((rc = cli_u64("seed", v, 0, UINT32_MAX, &q->seed))) return rc;
    } else if (!strcmp(a, "--estimates")) {
      if ((rc = cli_u64("estimates", v, 1, 10000000, &q->max_estimates))) return rc;
    } else if (!strcmp(a, "--tokens")) {
      if ((rc = cli_u64("tokens", v, 1, UINT64_C(1) << 60, &q->tokens))) return rc;
    } else if (!strcmp(a, "--deadline-hours")) {
      if ((rc = cli_double("deadline-hours", v, 1e-6, 1e9, &q->deadline_hours))) return rc;
    } else if (!strcmp(a, "--budget")) {
      if ((rc = cli_double("budget", v, 1e-6, 1e15, &q->budget_usd))) return rc;
    } else if (!strcmp(a, "--fail-above")) {
      if ((rc = parse_gate("fail-above", v, g, VL_SENS_GATE_OOM))) return rc;
    } else if (!strcmp(a, "--fail-above-budget")) {
      if ((rc = parse_gate("fail-above-budget", v, g, VL_SENS_GATE_BUDGET))) return rc;
    } else if (!strcmp(a, "--fail-above-deadline")) {
      if ((rc = parse_gate("fail-above-deadline", v, g, VL_SENS_GATE_DEADLINE))) return rc;
    } else if (!strcmp(a, "--gpus")) { /* --gpu's alias */
      f->gpus = v;
    } else if (!strcmp(a, "--fit")) {
      f->fit = v;
    } else {
      static const char *const d[] = {"uniform", "normal", NULL};
      if (cli_choice("dist", v, d) < 0) return VL_EXIT_USAGE;
      f->dist = v;
    }
  }
  return 0;
}

/* --fit FIT.json read into *fitted, the query's fit. @return 0 or an
 * exit code (said). */
static int read_fit(const char *fit, struct vl_fitted *fitted, struct vl_sens_query *q) {
  size_t len = 0;
  char *text = cli_read_file(fit, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err ferr = {""};
  vl_status fs = vl_fitted_parse(text, len, fitted, &ferr);
  vl_free(text);
  if (fs != VL_OK) {
    cli_error("cannot read the fit '%s': %s", fit, ferr.msg);
    cli_hint("make it with: vramledger fit --csv sweep.csv --format json > FIT.json");
    return VL_EXIT_ERROR;
  }
  q->fit = fitted;
  q->fit_source = fit;
  return 0;
}

/* the thresholds' flags that need others. @return 0 or VL_EXIT_USAGE (said). */
static int thresholds_given(const struct vl_sens_query *q, const struct vl_sens_verdict *g) {
  if ((q->deadline_hours > 0 || q->budget_usd > 0) && !q->tokens) {
    cli_error(
        "--deadline-hours and --budget need --tokens N (the training tokens the hours are for)");
    return VL_EXIT_USAGE;
  }
  if (g->given[VL_SENS_GATE_BUDGET] && !q->budget_usd) {
    cli_error("--fail-above-budget needs --budget USD (and --tokens N): the budget whose "
              "P(over) it holds");
    return VL_EXIT_USAGE;
  }
  if (g->given[VL_SENS_GATE_DEADLINE] && !q->deadline_hours) {
    cli_error("--fail-above-deadline needs --deadline-hours H (and --tokens N): the deadline "
              "whose P(past) it holds");
    return VL_EXIT_USAGE;
  }
  return 0;
}

int cmd_sensitivity(int argc, const char **argv) {
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  q.samples = 100000;
  q.seed = 1;
  int rc;
  struct vl_sens_verdict gate;
  memset(&gate, 0, sizeof gate);
  if (argc > 255) {
    cli_error("too many arguments");
    return VL_EXIT_USAGE;
  }
  struct own_flags f = {.dist = "uniform"};
  if ((rc = own_flags(argc, argv, &q, &gate, &f))) return rc;
  const char **rest = f.rest, **vary = f.vary, *gpus = f.gpus, *dist = f.dist, *fit = f.fit;
  int n = f.n, nv = f.nv;
  struct est e;
  est_init(&e);
  if ((rc = est_parse(n, rest, &e))) return rc;
  if (e.help) {
    fputs(vl_help_sensitivity, stdout);
    return VL_EXIT_OK;
  }
  static const char *const not_taken[] = {"max-batch", "max-seq", "explain", NULL};
  if ((rc = est_refuse_given(&e, not_taken,
                             "sensitivity draws the job's variations; ask estimate for that")))
    return rc;
  if ((!e.model && !fit) || !nv) {
    cli_error("sensitivity needs --model (or --fit FIT.json) and at least one --vary (e.g. "
              "--vary seq=±20%%)");
    return VL_EXIT_USAGE;
  }
  for (int i = 0; i < nv; i++)
    if ((rc = parse_vary(vary[i], !strcmp(dist, "normal"), &q.vary[q.n_vary++]))) return rc;
  struct vl_arch arch;
  memset(&arch, 0, sizeof arch); /* with --fit alone, no model is evaluated */
  if (e.model && (rc = cli_load_model(e.model, &arch))) return rc;
  q.arch = &arch;
  q.job = e.job;
  struct vl_fitted fitted;
  if (fit && (rc = read_fit(fit, &fitted, &q))) return rc;
  if ((rc = thresholds_given(&q, &gate))) return rc;
  if (gpus && e.gpu) {
    cli_error("give the cards once: --gpus is --gpu's alias (--gpu %s,%s)", e.gpu, gpus);
    return VL_EXIT_USAGE;
  }
  if (!gpus) gpus = e.gpu; /* one card or a comma-separated list */
  q.margin = e.margin;
  struct vl_catalog cat;
  memset(&cat, 0, sizeof cat);
  if (gpus) {
    size_t ng = 0;
    if ((rc = est_catalog(e.catalog, &cat))) return rc;
    if ((rc = est_gpu_list(&cat, gpus, q.gpus, VL_SENS_MAX_GPUS, &ng))) {
      vl_catalog_release(&cat);
      return rc;
    }
    q.n_gpus = (int)ng;
  }
  if (gate.given[VL_SENS_GATE_OOM] && !q.n_gpus) { /* before the draws: nothing to hold */
    cli_error("--fail-above needs the card the job runs on: give --gpu NAME");
    return VL_EXIT_USAGE;
  }
  /* the draws are billed on the first card (its cuBLAS workspaces); the
   * others' P(out of memory) take their own (vl_sensitivity_run) */
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  if (q.n_gpus) vl_overheads_for_gpu(&ov, q.gpus[0]);
  struct vl_context_carry carry[VL_SENS_MAX_GPUS];
  for (int g = 0; g < q.n_gpus; g++) {
    struct vl_overheads og = ov;
    vl_overheads_for_gpu(&og, q.gpus[g]);
    vl_context_carry(q.gpus[g], &og, &q.job, &carry[g]);
  }
  q.carry = carry;
  struct vl_sens_result r;
  struct vl_err err = {""};
  vl_status s = vl_sensitivity_run(&q, &ov, &r, &err);
  if (s != VL_OK) {
    cli_error("cannot run the sensitivity analysis: %s", err.msg);
    vl_catalog_release(&cat);
    return s == VL_ENOMEM ? VL_EXIT_ERROR : VL_EXIT_USAGE;
  }
  if ((rc = gates_ready(&q, &r, &gate))) {
    vl_catalog_release(&cat);
    return rc;
  }
  vl_sens_judge(&q, &r, &gate);
  rc = vl_render_sensitivity(stdout, e.fmt, &q, &r, &gate) == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
  if (rc) cli_error("cannot write the output");
  if (!rc && gate.n_failed) rc = VL_EXIT_NOFIT;
  vl_catalog_release(&cat);
  return rc;
}
