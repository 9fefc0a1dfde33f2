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
#include "vramledger/record.h"
#include "vramledger/render.h"

#define MAX_CONFIG_DRIFTS 32

/* Was flag given (as "--flag V" or "--flag=V")? */
static bool given(int argc, const char **argv, const char *flag) {
  size_t n = strlen(flag);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], flag, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '=')) return true;
  return false;
}

/* "a/b/../c" -> "a/c" in place, for the messages: a folder and the ".."
 * after it cancel (unless the folder is ".." itself). Symbolic links aside,
 * the same file. */
static void tidy(char *p) {
  char *from = p;
  for (char *up; (up = strstr(from, "/../"));) {
    char *start = up;
    while (start > p && start[-1] != '/')
      start--;
    if ((up - start == 2 && strncmp(start, "..", 2) == 0) || up == start) {
      from = up + 3; /* "../.." or "/..": nothing to cancel */
      continue;
    }
    memmove(start, up + 4, strlen(up + 4) + 1);
    from = start > p ? start - 1 : p;
  }
}

/* The model the job trains now: --model, else the commitment's own (its
 * config file relative to the commitment's folder, or its bundled name). */
static int current_model(const char *commitment, const struct vl_commitment *c, const char *model,
                         struct vl_arch *arch, struct cli_model *m) {
  if (model) return cli_load_model_file(model, arch, m);
  if (!c->has_identity) return cli_load_model_file(c->model, arch, m);
  if (c->config_bundled[0]) return cli_load_model_file(c->config_bundled, arch, m);
  char path[PATH_MAX];
  const char *slash = strrchr(commitment, '/');
  if (c->config_file[0] == '/' || !slash)
    snprintf(path, sizeof path, "%s", c->config_file);
  else
    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - commitment), commitment, c->config_file);
  tidy(path);
  int rc = cli_load_model_file(path, arch, m);
  if (rc)
    cli_hint("'%s' is the commitment's model_config.file '%s', relative to the commitment's "
             "folder; give the model's config with --model FILE",
             path, c->config_file);
  return rc;
}

/* What the gate compares the model by (vl_check_compute): for a
 * commitment with a copy of its config, the config's digest and, when it
 * differs, its keys against the copy's (into keys[MAX_CONFIG_DRIFTS]); for
 * one without, a note on stderr. */
static int model_now(const char *commitment, const struct vl_commitment *c,
                     const struct cli_model *m, const struct vl_arch *arch, uint64_t params,
                     const char *model_flag, char *sha, struct vl_drift *keys,
                     struct vl_check_model *out) {
  *out = (struct vl_check_model){.file = m->path,
                                 .model_type = arch->model_type,
                                 .params = params,
                                 .model_flag = model_flag,
                                 .sha256 = sha,
                                 .keys = keys,
                                 .n_keys_given = MAX_CONFIG_DRIFTS};
  if (!c->has_identity) {
    fprintf(stderr,
            "vramledger: note: '%s' names its model ('%s') but holds no copy of its config: "
            "compared by model_type and parameter count only; commit again to record it\n",
            commitment, c->model);
    return 0;
  }
  struct vl_err err = {""};
  if (vl_config_sha256(m->text, m->len, sha, &err) != VL_OK) {
    cli_error("cannot use '%s': %s", m->path, err.msg);
    return VL_EXIT_ERROR;
  }
  if (strcmp(sha, c->config_sha256) == 0) return 0;
  size_t len = 0;
  char *text = cli_read_file(commitment, &len);
  if (!text) return VL_EXIT_ERROR;
  vl_status s = vl_commitment_config_diff(text, len, m->text, m->len, keys, MAX_CONFIG_DRIFTS,
                                          &out->n_keys, &err);
  vl_free(text);
  if (s != VL_OK && s != VL_EKEY) {
    cli_error("cannot compare '%s' with the commitment's config: %s", m->path, err.msg);
    return VL_EXIT_ERROR;
  }
  out->keys_known = s == VL_OK;
  return 0;
}

/* The GPUs a run ran on, and the catalog that names the committed card
 * (cat: the caller releases it, also on failure). */
static int run_hardware(const char *run, const struct vl_commitment *c, const char *catalog,
                        struct vl_catalog *cat, struct vl_run_hw *hw) {
  struct est ce;
  est_init(&ce);
  ce.gpu = c->gpu;
  ce.catalog = catalog;
  const struct vl_gpu *card;
  int rc = est_gpu(&ce, cat, &card);
  if (rc) {
    cli_hint("the commitment's card '%s' is not in the catalog: give the one it was committed "
             "with (--catalog FILE)",
             c->gpu);
    return rc;
  }
  struct vl_record r;
  char rp[PATH_MAX];
  if ((rc = cli_load_record(run, &r, rp, sizeof rp))) return rc;
  vl_run_hw_read(&r, hw);
  vl_record_release(&r);
  return 0;
}

/* The job's settings from --config JOB.json or --deepspeed ds_config.json
 * (over the commitment's). autos[] names DeepSpeed's "auto" settings. */
static int job_from_files(int argc, const char **argv, const char *config, const char *ds,
                          const struct vl_commitment *c, struct est *e, char *targets, size_t tn,
                          char *autos, size_t an) {
  autos[0] = '\0';
  if (config) { /* the job's settings from a file instead of flags */
    size_t len = 0;
    char *text = cli_read_file(config, &len);
    if (!text) return VL_EXIT_ERROR;
    struct vl_err err = {""};
    vl_status s = vl_job_from_settings(text, len, &e->job, targets, tn, &err);
    vl_free(text);
    if (s != VL_OK) {
      cli_error("cannot use the job configuration '%s': %s", config, err.msg);
      return VL_EXIT_ERROR;
    }
  }
  if (!ds) return 0;
  if (config) {
    cli_error("give --config or --deepspeed, not both");
    return VL_EXIT_USAGE;
  }
  /* the rest of the job (sequence, LoRA, attention, ...) as committed:
   * estimate flags would say the same twice; the hardware and the output
   * are not DeepSpeed's */
  static const char *const taken[] = {"--commitment", "--deepspeed", "--run",
                                      "--model",      "--format",    "--gpu",
                                      "--margin",     "--catalog",   NULL};
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) != 0) continue;
    bool ok = false;
    for (int k = 0; taken[k] && !ok; k++) {
      size_t n = strlen(taken[k]);
      ok = strncmp(argv[i], taken[k], n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '=');
    }
    if (!ok) {
      cli_error("with --deepspeed, the settings the DeepSpeed file does not hold are the "
                "commitment's: %s is not taken",
                argv[i]);
      cli_hint("check the other settings with --config JOB.json or estimate flags, in a "
               "second call");
      return VL_EXIT_USAGE;
    }
  }
  e->job = c->job; /* its LoRA targets point into c, which lives to the end */
  size_t len = 0;
  char *text = cli_read_file(ds, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_job_apply_deepspeed(text, len, &e->job, autos, an, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use the DeepSpeed configuration '%s': %s", ds, err.msg);
    cli_hint("a ds_config.json as deepspeed.initialize(config=...) takes it");
    return VL_EXIT_ERROR;
  }
  return 0;
}

/* The card the job is billed on: --gpu's, else the committed one, read
 * quietly from the catalog (--catalog FILE, else the bundled one) so that
 * the bill has that card's workspaces and SMs, as commit and plan billed
 * it. cat is --gpu's (loaded) or empty. @return 0 or an exit code. */
static int billed_card(const struct est *e, const char *commitment, const struct vl_commitment *c,
                       struct vl_catalog *cat, const struct vl_gpu **card) {
  int rc = est_gpu(e, cat, card);
  if (rc || *card) return rc;
  if ((rc = est_catalog(e->catalog, cat))) return rc;
  if ((*card = vl_catalog_find(cat, c->gpu))) return 0;
  if (e->catalog)
    cli_error("'%s': the committed card '%s' is not in the GPU catalog '%s'", commitment, c->gpu,
              e->catalog);
  else
    cli_error("'%s': the committed card '%s' is not in the bundled GPU catalog", commitment,
              c->gpu);
  cli_hint("give the catalog it was committed with (--catalog FILE), or the card the job runs "
           "on (--gpu NAME)");
  return VL_EXIT_USAGE;
}

/* The flags check takes but does not use are refused, never ignored. */
static int refuse(const struct est *e) {
  const char *what = e->search == 1        ? "--max-batch"
                     : e->search == 2      ? "--max-seq"
                     : e->explain          ? "--explain"
                     : e->fmt == VL_FMT_MD ? "--format md"
                                           : NULL;
  if (!what) return 0;
  cli_error("check does not take %s", what);
  if (e->fmt == VL_FMT_MD)
    cli_hint("--format text (the default) or json");
  else
    cli_hint("check gates a job: vramledger estimate ... %s is the command for that", what);
  return VL_EXIT_USAGE;
}

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
  if ((rc = refuse(&e))) return rc;
  if (!val[0]) {
    cli_error("check needs --commitment FILE");
    return VL_EXIT_USAGE;
  }
  struct vl_commitment c;
  if ((rc = cli_load_commitment(val[0], &c))) return rc;
  char targets[256], autos[512];
  if ((rc = job_from_files(argc, argv, val[1], val[3], &c, &e, targets, sizeof targets, autos,
                           sizeof autos)))
    return rc;

  struct vl_arch arch;
  struct cli_model m;
  if ((rc = current_model(val[0], &c, e.model, &arch, &m))) return rc;
  struct vl_bill *bill = NULL;
  struct vl_catalog cat = {0}, run_cat = {0};
  static struct vl_check g; /* large: not on the stack */
  struct vl_err err = {""};
  const struct vl_gpu *billed = NULL;
  if ((rc = billed_card(&e, val[0], &c, &cat, &billed))) goto out;
  if (est_bill(&arch, &e.job, billed, &bill, &err) != VL_OK) {
    cli_error("cannot estimate the job: %s", err.msg);
    rc = VL_EXIT_ERROR;
    goto out;
  }
  char sha[VL_SHA256_HEX];
  struct vl_drift keys[MAX_CONFIG_DRIFTS];
  struct vl_check_model mv;
  if ((rc = model_now(val[0], &c, &m, &arch, bill->params, e.model, sha, keys, &mv))) goto out;
  /* --gpu and --margin say what the job runs on now */
  struct vl_check_job jv = {.job = &e.job,
                            .bill = bill,
                            .card = e.gpu ? billed : NULL,
                            .cat = &cat,
                            .margin = given(argc, argv, "--margin") ? e.margin : c.margin};
  struct vl_run_hw hw;
  if (val[2]) {
    uint64_t cuda_peak = 0;
    char rec[PATH_MAX];
    if ((rc = cli_run_peaks(val[2], &jv.run_peak_bytes, &cuda_peak, NULL, rec, sizeof rec)))
      goto out;
    if ((rc = run_hardware(val[2], &c, e.catalog, &run_cat, &hw))) goto out;
    jv.run_hw = &hw;
    jv.run_cat = &run_cat;
  }
  vl_check_compute(&c, &mv, &jv, &g);
  struct vl_check_view v = {val[0], m.path, g.items, g.n, autos[0] ? autos : NULL};
  if (vl_render_check(stdout, e.fmt, &v) != 0) {
    rc = VL_EXIT_ERROR;
    goto out;
  }
  rc = g.n ? VL_EXIT_NOFIT : VL_EXIT_OK;
out:
  vl_free(bill);
  vl_free(m.text);
  vl_catalog_release(&cat);
  vl_catalog_release(&run_cat);
  return rc;
}
