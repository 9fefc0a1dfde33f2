/* vramledger commit: write the Training Resource Commitment for a job
 * (commitment.json + COMMITMENT.md). docs/cmd/commit.md. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "plan_best.h"
#include "vramledger/alloc.h"
#include "vramledger/commitment.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

/* One of the two files, written and synced beside its path, not yet in
 * its place (cli_output_rename): a commitment is reviewed, and a failure
 * (a full disk) leaves the one there as it was. */
static int write_file(struct cli_output *o, const char *path, bool md,
                      const struct vl_commit_view *v) {
  int rc = cli_output_open(o, path, 0644);
  if (rc) return rc;
  errno = 0;
  if (vl_render_commitment(o->f, md, v) != 0) {
    cli_error("cannot write '%s': %s; '%s' is as it was", path, strerror(errno ? errno : EIO),
              path);
    cli_output_discard(o);
    return VL_EXIT_ERROR;
  }
  return cli_output_close(o);
}

/* Both files, then both put in place: never one new beside one old. */
static int write_both(const char *pj, const char *pm, const struct vl_commit_view *v) {
  struct cli_output oj, om;
  int rc = write_file(&oj, pj, false, v);
  if (rc) return rc;
  if ((rc = write_file(&om, pm, true, v)) || (rc = cli_output_rename(&oj))) {
    cli_output_discard(&oj);
    cli_output_discard(&om);
    return rc;
  }
  return cli_output_rename(&om);
}

/* A plan's model: a bundled name as it is; a relative path against the
 * plan file's folder, where that file exists (the plan read from another
 * folder), else as given (against the working directory). */
static void plan_model(const char *plan, const char *model, char *out, size_t n) {
  size_t ml = strlen(model);
  bool path = strchr(model, '/') || (ml >= 5 && strcmp(model + ml - 5, ".json") == 0);
  const char *slash = strrchr(plan, '/');
  struct stat st;
  if (path && model[0] != '/' && slash) {
    int w = snprintf(out, n, "%.*s/%s", (int)(slash - plan), plan, model);
    if (w >= 0 && (size_t)w < n && stat(out, &st) == 0) return; /* a cut path is no file */
  }
  snprintf(out, n, "%s", model);
}

/* The path of file relative to the folder dir (both existing): what a
 * commitment stores so that it can be read from any working directory and
 * from another clone. 0, or -1 when either cannot be resolved. */
static int relative_path(const char *dir, const char *file, char *out, size_t n) {
  char d[PATH_MAX + 1], f[PATH_MAX];
  if (!realpath(dir, d) || !realpath(file, f)) return -1;
  size_t dl = strlen(d);
  if (d[dl - 1] != '/') { /* "/a/b" -> "/a/b/": its folders end in '/' */
    d[dl++] = '/';
    d[dl] = '\0';
  }
  size_t common = 0; /* the last '/' of the folder both lie under */
  for (size_t i = 0; d[i] && d[i] == f[i]; i++)
    if (d[i] == '/') common = i;
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = common + 1; i < dl; i++) /* up from dir to that folder */
    if (d[i] == '/' && o + 3 < n) o += (size_t)snprintf(out + o, n - o, "../");
  snprintf(out + o, n - o, "%s", f + common + 1);
  return 0;
}

/* The job of a plan's best configuration (`plan --format json`): its
 * model, card, margin and settings, as if given as estimate flags. The
 * strings live in names[] (model, gpu); its GPU-hours go to *gpu_hours. */
static int from_plan(const char *path, struct est *e, char names[2][PATH_MAX], double *gpu_hours) {
  size_t len;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  static struct plan_best b;
  struct vl_err err = {""};
  enum plan_fault f = plan_best_read(text, len, &b, &e->job, e->targets, sizeof e->targets, &err);
  vl_free(text);
  switch (f) {
  case PLAN_NOT_JSON:
    cli_error("%s:%s", path, err.msg);
    cli_hint("give the output of `vramledger plan ... --format json`");
    return VL_EXIT_ERROR;
  case PLAN_NOT_PLAN:
    cli_error("%s: not a plan (schema '%s', expected 'vramledger.plan/1')", path, err.msg);
    cli_hint("give the output of `vramledger plan ... --format json`");
    return VL_EXIT_ERROR;
  case PLAN_NO_BEST:
    cli_error("%s: the plan has no best configuration (nothing met its deadline and budget)", path);
    cli_hint("plan again with a later --deadline-hours, a larger --budget or more GPUs");
    return VL_EXIT_ERROR;
  case PLAN_INCOMPLETE:
    cli_error("%s: the plan's best configuration lacks its model, gpu, margin or settings (a "
              "plan from an older vramledger?)",
              path);
    cli_hint("plan again with this vramledger");
    return VL_EXIT_ERROR;
  case PLAN_SETTINGS: cli_error("%s: best.settings: %s", path, err.msg); return VL_EXIT_ERROR;
  case PLAN_MARGIN:
    cli_error("%s: margin %g: a plan keeps from 0 to under 1 of the card free", path, b.margin);
    return VL_EXIT_USAGE;
  case PLAN_OK: break;
  }
  plan_model(path, b.model, names[0], PATH_MAX);
  snprintf(names[1], PATH_MAX, "%s", b.gpu);
  e->model = names[0];
  e->gpu = names[1];
  e->margin = b.margin;
  *gpu_hours = b.gpu_hours;
  return 0;
}

/* The run's hardware where it differs from the committed card and count
 * ("2 x h200"), into buf; "" when it is the same or the record names
 * none. */
static void run_hardware(const char *run, const struct vl_gpu *gpu, uint64_t count,
                         const struct vl_catalog *cat, char *buf, size_t n) {
  buf[0] = '\0';
  struct vl_record r;
  char rp[PATH_MAX];
  if (cli_load_record(run, &r, rp, sizeof rp)) return;
  struct vl_run_hw hw;
  vl_run_hw_read(&r, &hw);
  vl_record_release(&r);
  struct vl_drift d[2];
  if (!vl_commitment_hw_diff(gpu->name, gpu->memory_bytes, count, cat, &hw, d, 2)) return;
  const struct vl_gpu *g = vl_catalog_match_device(cat, hw.device);
  snprintf(buf, n, "%u x %s", hw.count, g ? g->name : hw.device);
}

/* What the command line asks: the job (from its flags or --plan), the
 * output folder, the run record, the SLA and budget, --force. */
struct commit_args {
  struct est e;
  const char *val[5]; /* --out, --run, --sla-tokens-per-s, --gpu-hours, --plan */
  char plan_names[2][PATH_MAX];
  double sla, hours;
  bool force;
};

static int commit_args(int argc, const char **argv, struct commit_args *a) {
  static const char *const names[] = {"--out",       "--run",  "--sla-tokens-per-s",
                                      "--gpu-hours", "--plan", NULL};
  /* --force, the one flag without a value, before the job's flags */
  const char *args[256];
  int nargs = 0;
  if (argc > 255) {
    cli_error("too many arguments");
    return VL_EXIT_USAGE;
  }
  for (int i = 0; i < argc; i++) {
    if (i > 0 && strcmp(argv[i], "--force") == 0)
      a->force = true;
    else
      args[nargs++] = argv[i];
  }
  struct est *e = &a->e;
  int rc = est_parse_with(nargs, args, names, a->val, e);
  if (rc || e->help) return rc;
  const char *theirs = e->search               ? "--max-batch/--max-seq"
                       : e->explain            ? "--explain"
                       : e->fmt != VL_FMT_TEXT ? "--format"
                                               : NULL;
  if (theirs) { /* estimate's flags: refused, not ignored */
    cli_error("commit writes a commitment: %s is estimate's", theirs);
    cli_hint("vramledger estimate ... first, then commit the job it found");
    return VL_EXIT_USAGE;
  }
  double plan_hours = 0;
  if (a->val[4]) {
    if (e->model || e->gpu) {
      cli_error("give --plan PLAN.json or the job's --model and --gpu, not both");
      return VL_EXIT_USAGE;
    }
    /* the plan's job is its best configuration whole: a job flag beside
     * it would be overwritten by the plan's, so it is refused, never
     * ignored (--catalog names where the plan's card is read) */
    static const char *const with_plan[] = {"catalog", NULL};
    const char *flag = est_first_given(e, with_plan);
    if (flag) {
      cli_error("--%s is not taken with --plan: the plan's best configuration is the job, its "
                "margin and settings among it",
                flag);
      cli_hint("plan again with --%s, or commit the job by its flags (--model, --gpu, ...)", flag);
      return VL_EXIT_USAGE;
    }
    if ((rc = from_plan(a->val[4], e, a->plan_names, &plan_hours))) return rc;
  }
  if (!e->model || !e->gpu) {
    cli_error("commit needs --plan PLAN.json, or --model and --gpu (and the job's estimate flags)");
    return VL_EXIT_USAGE;
  }
  if (a->val[2] && (rc = cli_double("sla-tokens-per-s", a->val[2], 0.0, 1e12, &a->sla))) return rc;
  if (a->val[3] && (rc = cli_double("gpu-hours", a->val[3], 0.0, 1e12, &a->hours))) return rc;
  if (!a->val[3]) a->hours = plan_hours;
  return 0;
}

/* The estimated job, feasible on its card, and what the commitment
 * needs beside it: the model's canonical text and hash, the fallbacks. */
struct commit_job {
  struct vl_arch arch;
  struct cli_model m;
  struct vl_catalog cat;
  const struct vl_gpu *gpu;
  struct vl_bill *bill;
  char *canon;
  char sha[VL_SHA256_HEX];
  struct vl_fit fit;
  char peak_action[320], tput_action[320];
};

static int commit_job(struct commit_args *a, struct commit_job *j) {
  struct est *e = &a->e;
  int rc = cli_load_model_file(e->model, &j->arch, &j->m);
  if (rc) return rc;
  if ((rc = est_shape(e, &j->arch))) return rc; /* --image-size, --target-seq */
  est_target_seq(e, &j->arch);
  if ((rc = est_gpu(e, &j->cat, &j->gpu))) return rc;
  struct vl_err err = {""};
  size_t canon_len = 0;
  vl_status s = vl_config_canonical(j->m.text, j->m.len, &j->canon, &canon_len, &err);
  if (s != VL_OK) {
    cli_error("cannot use '%s': %s", j->m.path, err.msg);
    return VL_EXIT_ERROR;
  }
  vl_sha256_hex(j->canon, canon_len, j->sha);
  s = est_bill(&j->arch, &e->job, j->gpu, &j->bill, &err);
  if (s != VL_OK) {
    cli_error("cannot estimate '%s': %s", e->model, err.msg);
    return s == VL_ENOMEM || s == VL_EIO ? VL_EXIT_ERROR : VL_EXIT_USAGE;
  }
  vl_fit_check(vl_bill_budget_bytes(j->bill), j->gpu, e->margin, &j->fit);
  vl_commitment_peak_action(&e->job, j->bill, j->gpu->memory_bytes, j->peak_action,
                            sizeof j->peak_action);
  vl_commitment_throughput_action(&e->job, j->tput_action, sizeof j->tput_action);
  if (!j->fit.fits) {
    cli_error("the job needs %.2f GiB per GPU; %s gives %.2f GiB with %.0f %% kept free: a "
              "commitment must be feasible",
              (double)vl_bill_budget_bytes(j->bill) / (1ull << 30), j->gpu->name,
              (double)j->fit.usable_bytes / (1ull << 30), e->margin * 100);
    cli_hint("the next fallback for this job: %s; or the largest batch that fits: vramledger "
             "estimate ... --max-batch",
             j->peak_action);
    return VL_EXIT_NOFIT;
  }
  return 0;
}

/* The two files in --out DIR (never over a commitment without --force),
 * the run's measured peaks beside the estimate. */
static int commit_write(const struct commit_args *a, struct commit_job *j) {
  const struct est *e = &a->e;
  const char *dir = a->val[0] ? a->val[0] : ".", *run = a->val[1];
  char pj[PATH_MAX], pm[PATH_MAX];
  snprintf(pj, sizeof pj, "%.4000s/commitment.json", dir);
  snprintf(pm, sizeof pm, "%.4000s/COMMITMENT.md", dir);
  struct stat st;
  const char *there = stat(pj, &st) == 0 ? pj : stat(pm, &st) == 0 ? pm : NULL;
  if (there && !a->force) { /* before anything is written */
    cli_error("'%s' exists: a commitment is reviewed, so it is not replaced silently", there);
    cli_hint("give --force to replace it (and review the change), or another --out DIR");
    return VL_EXIT_ERROR;
  }
  uint64_t mp = 0, mc = 0;
  char rec[PATH_MAX], other_hw[160] = "";
  uint64_t count = e->job.dp * e->job.tp * e->job.pp;
  int rc;
  if (run) {
    if ((rc = cli_run_peaks(run, &mp, &mc, NULL, rec, sizeof rec))) return rc;
    run_hardware(run, j->gpu, count, &j->cat, other_hw, sizeof other_hw);
    if (other_hw[0])
      fprintf(stderr,
              "vramledger: warning: the record '%s' ran on %s, the commitment is for %llu x %s: "
              "its peak is written as measured on %s, not on the committed hardware\n",
              rec, other_hw, (unsigned long long)count, j->gpu->name, other_hw);
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", dir, strerror(errno));
    return VL_EXIT_ERROR;
  }
  /* the model by what it is, and where it lies from the commitment */
  const struct cli_model *m = &j->m;
  char rel[PATH_MAX];
  if (!m->bundled[0] && relative_path(dir, m->path, rel, sizeof rel) != 0) {
    cli_error("cannot resolve '%s' or '%s': %s", m->path, dir, strerror(errno));
    return VL_EXIT_ERROR;
  }
  char rec_rel[PATH_MAX]; /* the record, too, as the commitment's folder sees it */
  if (run && relative_path(dir, rec, rec_rel, sizeof rec_rel) != 0)
    snprintf(rec_rel, sizeof rec_rel, "%s", rec);
  char created[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  struct vl_commit_view v = {m->bundled[0] ? m->bundled : rel,
                             &j->arch,
                             &e->job,
                             j->bill,
                             j->gpu,
                             &j->fit,
                             created,
                             run ? rec_rel : NULL,
                             mp,
                             mc,
                             a->sla,
                             a->hours,
                             VL_VERSION,
                             j->canon,
                             j->sha,
                             m->bundled[0] ? NULL : rel,
                             m->bundled[0] ? m->bundled : NULL,
                             j->peak_action,
                             j->tput_action,
                             other_hw[0] ? other_hw : NULL};
  if ((rc = write_both(pj, pm, &v))) return rc;
  printf("wrote %s and %s: %llu x %s, %.2f GiB per GPU estimated", pj, pm,
         (unsigned long long)count, j->gpu->name, (double)j->bill->total_bytes / (1ull << 30));
  if (run) printf(", %.2f GiB measured", (double)mp / (1ull << 30));
  printf("\n");
  return VL_EXIT_OK;
}

int cmd_commit(int argc, const char **argv) {
  struct commit_args a;
  memset(&a, 0, sizeof a);
  int rc = commit_args(argc, argv, &a);
  if (rc) return rc;
  if (a.e.help) {
    fputs(vl_help_commit, stdout);
    return VL_EXIT_OK;
  }
  struct commit_job j;
  memset(&j, 0, sizeof j);
  if (!(rc = commit_job(&a, &j))) rc = commit_write(&a, &j);
  vl_free(j.canon);
  vl_free(j.m.text);
  vl_free(j.bill);
  vl_catalog_release(&j.cat);
  return rc;
}
