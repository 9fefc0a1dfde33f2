/* vramledger check: the CI gate. A job's configuration against its
 * Training Resource Commitment; exit 3 naming each drift. docs/cmd/check.md. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/commitment.h"

int cmd_check(int argc, const char **argv) {
  static const char *const names[] = {"--commitment", "--config", "--run", "--deepspeed", NULL};
  const char *val[4];
  struct est e;
  int rc = est_parse_with(argc, argv, names, val, &e);
  if (rc) return rc;
  if (e.help) {
    fputs(vl_help_check, stdout);
    return VL_EXIT_OK;
  }
  if (!val[0]) {
    cli_error("check needs --commitment FILE");
    return VL_EXIT_USAGE;
  }
  struct vl_commitment c;
  if ((rc = cli_load_commitment(val[0], &c))) return rc;
  char targets[256];
  if (val[1]) { /* the job's settings from a file instead of flags */
    size_t len = 0;
    char *text = cli_read_file(val[1], &len);
    if (!text) return VL_EXIT_ERROR;
    struct vl_err err = {""};
    vl_status s = vl_job_from_settings(text, len, &e.job, targets, sizeof targets, &err);
    vl_free(text);
    if (s != VL_OK) {
      cli_error("cannot use the job configuration '%s': %s", val[1], err.msg);
      return VL_EXIT_ERROR;
    }
  }
  if (val[3]) { /* DeepSpeed's settings over the commitment's (or the flags') */
    if (val[1]) {
      cli_error("give --config or --deepspeed, not both");
      return VL_EXIT_USAGE;
    }
    /* the rest of the job (sequence, LoRA, attention, ...) as committed:
     * estimate flags would say the same twice */
    for (int i = 1; i < argc; i++)
      if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--commitment") &&
          strcmp(argv[i], "--deepspeed") && strcmp(argv[i], "--run") &&
          strcmp(argv[i], "--model")) {
        cli_error("with --deepspeed, the settings the DeepSpeed file does not hold are the "
                  "commitment's: %s is not taken",
                  argv[i]);
        cli_hint("check the other settings with --config JOB.json or estimate flags, in a "
                 "second call");
        return VL_EXIT_USAGE;
      }
    e.job = c.job; /* its LoRA targets point into c, which lives to the end */
    size_t len = 0;
    char *text = cli_read_file(val[3], &len);
    if (!text) return VL_EXIT_ERROR;
    struct vl_err err = {""};
    char autos[512];
    vl_status s = vl_job_apply_deepspeed(text, len, &e.job, autos, sizeof autos, &err);
    vl_free(text);
    if (s != VL_OK) {
      cli_error("cannot use the DeepSpeed configuration '%s': %s", val[3], err.msg);
      cli_hint("a ds_config.json as deepspeed.initialize(config=...) takes it");
      return VL_EXIT_ERROR;
    }
    if (autos[0]) printf("not checked (\"auto\", filled in at launch): %s\n", autos);
  }
  const char *model = e.model ? e.model : c.model;
  int problems = 0;
  if (strcmp(model, c.model) != 0) {
    printf("drift: model is '%s', the commitment says '%s'\n", model, c.model);
    problems++;
  }
  struct vl_drift d[32];
  int nd = vl_commitment_diff(&c, &e.job, d, 32);
  for (int i = 0; i < nd && i < 32; i++)
    printf("drift: %s is '%s', the commitment says '%s'\n", d[i].field, d[i].now, d[i].committed);
  problems += nd;
  if (problems)
    printf("  update the baseline (vramledger commit) or attach a new measurement report\n");

  /* does the job as it is still fit the committed card? */
  struct vl_arch arch;
  if ((rc = cli_load_model(model, &arch))) return rc;
  struct vl_bill *bill;
  struct vl_err err = {""};
  if (est_bill(&arch, &e.job, &bill, &err) != VL_OK) {
    cli_error("cannot estimate the job: %s", err.msg);
    return VL_EXIT_ERROR;
  }
  double usable = (double)c.gpu_memory_bytes * (1.0 - c.margin);
  double G = (double)(1ull << 30);
  double need = (double)vl_bill_budget_bytes(bill);
  if (need > usable) {
    printf("over budget: the job needs %.2f GiB per GPU%s, the committed %s gives %.2f GiB with "
           "%.0f %% kept free\n",
           need / G, need > (double)bill->total_bytes ? " in its worse outcome" : "", c.gpu,
           usable / G, c.margin * 100);
    problems++;
  }
  uint64_t mp = 0, mc = 0;
  char rec[PATH_MAX];
  if (val[2]) {
    if ((rc = cli_run_peaks(val[2], &mp, &mc, NULL, rec, sizeof rec))) {
      vl_free(bill);
      return rc;
    }
    if ((double)mp > c.peak_trigger * (double)vl_commitment_budget_bytes(&c)) {
      printf("trigger: the measured peak %.2f GiB is over %.0f %% of the committed %.2f GiB: "
             "enable activation checkpointing\n",
             (double)mp / G, c.peak_trigger * 100, (double)vl_commitment_budget_bytes(&c) / G);
      problems++;
    }
  }
  vl_free(bill);
  if (problems) {
    printf("check failed: %d problem%s against %s\n", problems, problems == 1 ? "" : "s", val[0]);
    return VL_EXIT_NOFIT;
  }
  printf("consistent with %s\n", val[0]);
  return VL_EXIT_OK;
}
