/* vramledger commit: write the Training Resource Commitment for a job
 * (commitment.json + COMMITMENT.md). docs/cmd/commit.md. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/commitment.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

static int write_file(const char *path, bool md, const struct vl_commit_view *v) {
  FILE *f = fopen(path, "w");
  if (!f || vl_render_commitment(f, md, v) != 0 || fclose(f) != 0) {
    cli_error("cannot write '%s': %s", path, strerror(errno));
    return VL_EXIT_ERROR;
  }
  return 0;
}

/* The job of a plan's best configuration (`plan --format json`): its
 * model, card, margin and settings, as if given as estimate flags. The
 * strings live in names[] (model, gpu); its GPU-hours go to *gpu_hours. */
static int from_plan(const char *path, struct est *e, char names[2][256], double *gpu_hours) {
  size_t len;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  vl_free(text);
  int rc = VL_EXIT_ERROR;
  if (!root) {
    cli_error("%s:%d:%d: not JSON: %s", path, je.line, je.column, je.text);
    cli_hint("give the output of `vramledger plan ... --format json`");
    return rc;
  }
  json_t *best = json_object_get(root, "best"), *set = json_object_get(best, "settings");
  const char *model = json_string_value(json_object_get(root, "model"));
  const char *gpu = json_string_value(json_object_get(best, "gpu"));
  json_t *margin = json_object_get(root, "margin");
  const char *schema = json_string_value(json_object_get(root, "schema"));
  if (!schema || strcmp(schema, "vramledger.plan/1") != 0) {
    cli_error("%s: not a plan (schema '%s', expected 'vramledger.plan/1')", path,
              schema ? schema : "none");
    cli_hint("give the output of `vramledger plan ... --format json`");
  } else if (json_is_null(best) || !best) {
    cli_error("%s: the plan has no best configuration (nothing met its deadline and budget)", path);
    cli_hint("plan again with a later --deadline-hours, a larger --budget or more GPUs");
  } else if (!json_is_object(set) || !model || !gpu || !json_is_number(margin)) {
    cli_error("%s: the plan's best configuration lacks its model, gpu, margin or settings (a "
              "plan from an older vramledger?)",
              path);
    cli_hint("plan again with this vramledger");
  } else {
    char *st = json_dumps(set, JSON_COMPACT);
    struct vl_err err = {""};
    vl_status s =
        st ? vl_job_from_settings(st, strlen(st), &e->job, e->targets, sizeof e->targets, &err)
           : VL_ENOMEM;
    free(st);
    if (s != VL_OK) {
      cli_error("%s: best.settings: %s", path, err.msg);
    } else {
      snprintf(names[0], 256, "%s", model);
      snprintf(names[1], 256, "%s", gpu);
      e->model = names[0];
      e->gpu = names[1];
      e->margin = json_number_value(margin);
      /* the plan's time on its GPUs is the budget, unless --gpu-hours says */
      json_t *h = json_object_get(best, "hours"), *n = json_object_get(best, "count");
      if (json_is_number(h) && json_is_integer(n))
        *gpu_hours = json_number_value(h) * (double)json_integer_value(n);
      rc = 0;
    }
  }
  json_decref(root);
  return rc;
}

int cmd_commit(int argc, const char **argv) {
  static const char *const names[] = {"--out",       "--run",  "--sla-tokens-per-s",
                                      "--gpu-hours", "--plan", NULL};
  const char *val[5];
  struct est e;
  int rc = est_parse_with(argc, argv, names, val, &e);
  if (rc) return rc;
  if (e.help) {
    fputs(vl_help_commit, stdout);
    return VL_EXIT_OK;
  }
  char plan_names[2][256];
  double plan_hours = 0;
  if (val[4]) {
    if (e.model || e.gpu) {
      cli_error("give --plan PLAN.json or the job's --model and --gpu, not both");
      return VL_EXIT_USAGE;
    }
    if ((rc = from_plan(val[4], &e, plan_names, &plan_hours))) return rc;
  }
  if (!e.model || !e.gpu) {
    cli_error("commit needs --plan PLAN.json, or --model and --gpu (and the job's estimate flags)");
    return VL_EXIT_USAGE;
  }
  double sla = 0, hours = 0;
  if (val[2] && (rc = cli_double("sla-tokens-per-s", val[2], 0.0, 1e12, &sla))) return rc;
  if (val[3] && (rc = cli_double("gpu-hours", val[3], 0.0, 1e12, &hours))) return rc;
  if (!val[3]) hours = plan_hours;
  struct vl_arch arch;
  if ((rc = cli_load_model(e.model, &arch))) return rc;
  struct vl_catalog cat;
  const struct vl_gpu *gpu;
  if ((rc = est_gpu(&e, &cat, &gpu))) return rc;
  struct vl_bill *bill;
  struct vl_err err = {""};
  vl_status s = est_bill(&arch, &e.job, &bill, &err);
  if (s != VL_OK) {
    cli_error("cannot estimate '%s': %s", e.model, err.msg);
    rc = s == VL_ENOMEM || s == VL_EIO ? VL_EXIT_ERROR : VL_EXIT_USAGE;
    goto out;
  }
  struct vl_fit fit;
  vl_fit_check(vl_bill_budget_bytes(bill), gpu, e.margin, &fit);
  if (!fit.fits) {
    cli_error("the job needs %.2f GiB per GPU; %s gives %.2f GiB with %.0f %% kept free: a "
              "commitment must be feasible",
              (double)vl_bill_budget_bytes(bill) / (1ull << 30), gpu->name,
              (double)fit.usable_bytes / (1ull << 30), e.margin * 100);
    cli_hint("vramledger estimate ... --max-batch, or checkpointing, LoRA or ZeRO");
    rc = VL_EXIT_NOFIT;
    goto out;
  }
  uint64_t mp = 0, mc = 0;
  char rec[PATH_MAX];
  if (val[1] && (rc = cli_run_peaks(val[1], &mp, &mc, NULL, rec, sizeof rec))) goto out;
  char created[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char *slash = strrchr(e.model, '/');
  struct vl_commit_view v = {
      slash ? slash + 1 : e.model, &arch, &e.job, bill, gpu,   &fit,      created,
      val[1] ? rec : NULL,         mp,    mc,     sla,  hours, VL_VERSION};
  const char *dir = val[0] ? val[0] : ".";
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", dir, strerror(errno));
    rc = VL_EXIT_ERROR;
    goto out;
  }
  char pj[PATH_MAX], pm[PATH_MAX];
  snprintf(pj, sizeof pj, "%.4000s/commitment.json", dir);
  snprintf(pm, sizeof pm, "%.4000s/COMMITMENT.md", dir);
  if ((rc = write_file(pj, false, &v)) || (rc = write_file(pm, true, &v))) goto out;
  printf("wrote %s and %s: %llu x %s, %.2f GiB per GPU estimated", pj, pm,
         (unsigned long long)(e.job.dp * e.job.tp * e.job.pp), gpu->name,
         (double)bill->total_bytes / (1ull << 30));
  if (val[1]) printf(", %.2f GiB measured", (double)mp / (1ull << 30));
  printf("\n");
  rc = VL_EXIT_OK;
out:
  vl_free(bill);
  vl_catalog_release(&cat);
  return rc;
}
