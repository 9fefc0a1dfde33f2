/* vramledger report: what a run record says. docs/cmd/report.md. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/model.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"
#include "vramledger/steptime.h"

enum { O_HELP, O_FORMAT };
static const struct cli_opt opts[] = {
    {"help", false, O_HELP}, {"format", true, O_FORMAT}, {NULL, false, 0}};

struct rep {
  bool help;
  int fmt;
  const char *run;
};

/* Without --gpu, the card the record ran on, by its device name (into
 * name, for e->gpu), when the catalog knows it; else the H200's overheads,
 * said. */
static int record_gpu(struct est *e, const char *device, char *name, size_t cap) {
  if (e->gpu || !device || !device[0]) return 0;
  struct vl_catalog cat;
  int rc = est_catalog(e->catalog, &cat);
  if (rc) return rc;
  const struct vl_gpu *g = vl_catalog_match_device(&cat, device);
  if (g) {
    snprintf(name, cap, "%s", g->name);
    e->gpu = name;
  } else {
    cli_hint("--estimate: the record's GPU '%s' is not in the catalog; the estimate bills the "
             "H200's cuBLAS workspaces and SMs (name the card with --gpu)",
             device);
  }
  vl_catalog_release(&cat);
  return 0;
}

/* The estimate for the job flags given after --estimate (as `estimate`
 * takes them), on their --gpu card as `estimate --gpu` bills it; without
 * one, on the card the record names (device). */
static int estimate_bill(int argc, const char **argv, const char *device, struct vl_bill **out,
                         struct vl_step_time *time, char *card, size_t card_cap) {
  struct est e;
  est_init(&e);
  int rc = est_parse(argc, argv, &e);
  if (rc) return rc;
  if (!e.model) {
    cli_error("--estimate needs the job's settings: --model NAME|FILE and the flags of "
              "'vramledger estimate' (--batch, --seq, --precision, ...)");
    return VL_EXIT_USAGE;
  }
  char gpu_name[VL_GPU_NAME];
  if ((rc = record_gpu(&e, device, gpu_name, sizeof gpu_name))) return rc;
  struct vl_arch arch;
  if ((rc = cli_load_model(e.model, &arch))) return rc;
  struct vl_catalog cat;
  const struct vl_gpu *gpu;
  if ((rc = est_gpu(&e, &cat, &gpu))) return rc;
  struct vl_err err = {""};
  vl_status s = est_bill(&arch, &e.job, gpu, out, &err);
  /* the step priced on that card, as estimate --gpu prices it; a card or
   * job it cannot price leaves the time out (said), never the bill */
  if (s == VL_OK && e.gpu && e.job.task == VL_TASK_TRAIN) {
    struct vl_err terr = {""};
    if (vl_step_time(&arch, &e.job, gpu, time, &terr) == VL_OK)
      snprintf(card, card_cap, "%s", gpu->name);
    else
      cli_hint("--estimate: the step is not priced: %s", terr.msg);
  }
  vl_catalog_release(&cat);
  if (s != VL_OK) {
    cli_error("--estimate: %s", err.msg);
    return s == VL_ENOMEM ? VL_EXIT_ERROR : VL_EXIT_USAGE;
  }
  return 0;
}

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct rep *r = ctx;
  static const char *const formats[] = {"text", "json", "md", "trace", "html", NULL};
  if (id == O_HELP) r->help = true;
  if (id == O_FORMAT && (r->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
  return 0;
}

int cmd_report(int argc, const char **argv) {
  struct rep r = {0};
  /* RUN, then the report's own flags (anywhere), and everything after
   * --estimate: the job's flags, as `estimate` takes them */
  const char *own[8], *job[64];
  int n_own = 0, n_job = 0;
  bool estimate = false;
  own[n_own++] = argv[0];
  job[n_job++] = argv[0];
  for (int i = 1; i < argc; i++) {
    bool format = strcmp(argv[i], "--format") == 0;
    if (format || strcmp(argv[i], "--help") == 0 || strncmp(argv[i], "--format=", 9) == 0) {
      if (n_own < 7) own[n_own++] = argv[i];
      if (format && i + 1 < argc && n_own < 7) own[n_own++] = argv[++i];
    } else if (strcmp(argv[i], "--estimate") == 0) {
      estimate = true;
    } else if (!estimate && argv[i][0] != '-' && !r.run) {
      r.run = argv[i];
    } else if (n_job < 63) {
      job[n_job++] = argv[i];
    }
  }
  int rc = cli_parse(n_own, own, opts, on_opt, &r);
  if (rc) return rc;
  if (r.help) {
    fputs(vl_help_report, stdout);
    return VL_EXIT_OK;
  }
  if (!r.run) {
    cli_error("report needs a run: a directory made by 'vramledger run' or its record.jsonl");
    return VL_EXIT_USAGE;
  }
  if (n_job > 1 && !estimate) {
    cli_error("report: unexpected '%s' (job flags go with --estimate)", job[1]);
    return VL_EXIT_USAGE;
  }
  struct vl_bill *bill = NULL;
  struct cli_run *rr = malloc(sizeof *rr);
  if (!rr) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  if ((rc = cli_load_run(r.run, rr))) {
    free(rr);
    return rc;
  }
  const char *device = rr->rec.n_gpus ? rr->rec.gpus[0].name : "";
  if (!device[0] && rr->rec.n_probes) device = rr->rec.probes[0].device_name;
  struct vl_step_time time = {0};
  char card[32] = "";
  if (estimate && (rc = estimate_bill(n_job, job, device, &bill, &time, card, sizeof card))) {
    vl_record_release(&rr->rec);
    free(rr);
    return rc;
  }
  struct vl_probe_compare cmp = {0};
  if (bill) {
    vl_probe_compare(&rr->fw, bill, &cmp);
    if (cmp.present && card[0] && rr->fw.step_s_median > 0) {
      cmp.est_step_s = time.step_s;
      cmp.est_forward_s = time.forward_s;
      cmp.est_backward_s = time.backward_s;
      cmp.est_optimizer_s = time.optimizer_s;
      cmp.measured_step_s = rr->fw.step_s_median;
      snprintf(cmp.card, sizeof cmp.card, "%s", card);
    }
    if (!cmp.present)
      cli_hint("--estimate: the record has no measured bill (no PyTorch probe, or no sampled "
               "step); nothing to compare");
  }
  struct vl_report_view v = {&rr->rec, &rr->sum, rr->findings,      rr->n_findings,
                             rr->path, &rr->fw,  bill ? &cmp : NULL};
  static const enum vl_report_format map[] = {VL_REP_TEXT, VL_REP_JSON, VL_REP_MD, VL_REP_TRACE,
                                              VL_REP_HTML};
  int w = vl_render_report(stdout, map[r.fmt], &v);
  rc = w == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
  if (w == -2)
    cli_error("cannot draw the report of '%s': %s", rr->path, vl_strerror(VL_ENOMEM));
  else if (w)
    cli_error("cannot write the output");
  vl_record_release(&rr->rec);
  free(rr);
  vl_free(bill);
  return rc;
}
