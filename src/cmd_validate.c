/* vramledger validate: check the estimator against this machine's GPU.
 * Runs the measuring suite (python/vramledger/measure.py) in the user's
 * Python with PyTorch, or reads a results file, and compares every run with
 * `estimate` for the same settings. docs/cmd/validate.md is the manual. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/validate.h"
#include "vramledger/model.h"
#include "vramledger/render.h"
#include "vramledger/steptime.h"

enum {
  O_HELP,
  O_QUICK,
  O_SUITE,
  O_OUT,
  O_PYTHON,
  O_RESULTS,
  O_TOL,
  O_TOL_TOTAL,
  O_TOL_TIME,
  O_FORMAT
};

/* The overheads a bill takes on the measured device: the H200's, with
 * the cuBLAS workspaces of the catalog's card of that name (none known:
 * the H200's); *card: that card, or NULL. */
static void device_overheads(const struct vl_catalog *cat, const char *device,
                             struct vl_overheads *ov, const struct vl_gpu **card) {
  vl_overheads_default(ov);
  *card = device[0] ? vl_catalog_match_device(cat, device) : NULL;
  if (*card) vl_overheads_for_gpu(ov, *card);
}

/* The run's step priced on the results' card (docs/model.md 13.1): the
 * row's step columns, or none for a run not timed, not training, timed
 * while the host ran other work, or on a card the catalog does not know. */
static void time_row(struct vl_compare_row *r, const struct vl_arch *arch,
                     const struct vl_gpu *card) {
  r->err_step = NAN;
  const struct vl_measured_run *x = r->run;
  if (!card || x->job.task != VL_TASK_TRAIN || !(x->step_s > 0) || x->host_shared) return;
  struct vl_step_time t;
  if (vl_step_time(arch, &x->job, card, &t, NULL) != VL_OK) return;
  r->est_step_s = t.step_s;
  r->err_step = 100.0 * (t.step_s - x->step_s) / x->step_s;
}

static const struct cli_opt opts[] = {
    {"help", false, O_HELP},
    {"quick", false, O_QUICK},
    {"suite", true, O_SUITE},
    {"out", true, O_OUT},
    {"python", true, O_PYTHON},
    {"results", true, O_RESULTS},
    {"tolerance", true, O_TOL},
    {"total-tolerance", true, O_TOL_TOTAL},
    {"time-tolerance", true, O_TOL_TIME},
    {"format", true, O_FORMAT},
    {NULL, false, 0},
};

struct val {
  bool help;
  const char *suite, *out, *python, *results;
  double tol, tol_total, tol_time;
  bool time_gate;
  enum vl_format fmt;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct val *v = ctx;
  static const char *const formats[] = {"text", "json", "md", NULL};
  int k;
  switch (id) {
  case O_HELP: v->help = true; return 0;
  case O_QUICK: v->suite = "quick"; return 0;
  case O_SUITE: v->suite = arg; return 0;
  case O_OUT: v->out = arg; return 0;
  case O_PYTHON: v->python = arg; return 0;
  case O_RESULTS: v->results = arg; return 0;
  case O_TOL: return cli_double(flag, arg, 0.1, 100.0, &v->tol);
  case O_TOL_TOTAL: return cli_double(flag, arg, 0.1, 100.0, &v->tol_total);
  case O_TOL_TIME: v->time_gate = true; return cli_double(flag, arg, 0.1, 1000.0, &v->tol_time);
  case O_FORMAT:
    if ((k = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
    v->fmt = (enum vl_format)k;
    return 0;
  default: return 0;
  }
}

static int mkdir_p(const char *dir) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Run the measuring suite; its output goes to the terminal as it comes. */
/* A run's model: a bundled name as it is; a config file's relative path
 * from the results file's folder (the file can be read from anywhere). */
static void model_path(const char *results, const char *model, char *out, size_t n) {
  const char *slash = strrchr(results, '/');
  if (!strchr(model, '/') || model[0] == '/' || !slash) {
    snprintf(out, n, "%s", model);
    return;
  }
  snprintf(out, n, "%.*s/%s", (int)(slash - results), results, model);
}

static int measure(const struct val *v, const char *results) {
  char script[4096];
  snprintf(script, sizeof script, "%s/vramledger/measure.py", cli_python_dir());
  if (access(script, R_OK) != 0) {
    cli_error("cannot find the measuring suite '%s'", script);
    cli_hint("set VRAMLEDGER_PYTHON_DIR to the python/ folder of vramledger");
    return VL_EXIT_ERROR;
  }
  const char *argv[] = {v->python, script,   results,        "--suite",
                        v->suite,  "--data", cli_data_dir(), NULL};
  fprintf(stderr, "vramledger: measuring suite '%s' with %s (this takes a few minutes)\n", v->suite,
          v->python);
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGINT, &ign, &old_int); /* the child gets ^C; we wait for it, as system() does */
  sigaction(SIGQUIT, &ign, &old_quit);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "vramledger: error: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int status = 0;
  int w = pid > 0 ? waitpid(pid, &status, 0) : -1;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (pid < 0 || w < 0) {
    cli_error("cannot start the measuring suite: %s", strerror(errno));
    return VL_EXIT_ERROR;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    cli_hint("install Python 3 with PyTorch (CUDA), transformers and peft, or give --python");
    return VL_EXIT_ERROR;
  }
  if (WIFEXITED(status))
    cli_error("the measuring suite failed (exit %d); its output is above", WEXITSTATUS(status));
  else
    cli_error("the measuring suite was killed by signal %d", WTERMSIG(status));
  cli_hint("a CUDA GPU, PyTorch, transformers and peft are needed; --results FILE compares a "
           "file measured elsewhere");
  return VL_EXIT_ERROR;
}

int cmd_validate(int argc, const char **argv) {
  struct val v = {
      .suite = "calibration", .python = "python3", .tol = 5.0, .tol_total = 7.0, .tol_time = 25.0};
  int rc = cli_parse(argc, argv, opts, on_opt, &v);
  if (rc) return rc;
  if (v.help) {
    fputs(vl_help_validate, stdout);
    return VL_EXIT_OK;
  }
  char results[4200], dir[4096];
  if (v.results) {
    snprintf(results, sizeof results, "%s", v.results);
  } else {
    if (v.out) {
      snprintf(dir, sizeof dir, "%s", v.out);
    } else {
      time_t now = time(NULL);
      struct tm tm;
      gmtime_r(&now, &tm);
      strftime(dir, sizeof dir, "runs/validate-%Y%m%dT%H%M%SZ", &tm);
    }
    if (mkdir_p(dir) != 0) {
      cli_error("cannot create '%s': %s", dir, strerror(errno));
      return VL_EXIT_ERROR;
    }
    snprintf(results, sizeof results, "%s/measured.json", dir);
    if ((rc = measure(&v, results))) return rc;
  }

  size_t len = 0;
  char *text = cli_read_file(results, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_measured m;
  struct vl_err err = {""};
  vl_status s = vl_measured_parse(text, len, &m, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use '%s': %s", results, err.msg);
    return VL_EXIT_ERROR;
  }
  struct vl_catalog cat;
  bool have_cat = false;
  struct vl_compare_row *rows = vl_calloc(m.n + 1, sizeof *rows);
  struct vl_bill *bill = vl_calloc(1, sizeof *bill);
  if (!rows || !bill) {
    cli_error("out of memory");
    rc = VL_EXIT_ERROR;
    goto out;
  }
  struct vl_overheads ov;
  const struct vl_gpu *card = NULL;
  if ((rc = est_catalog(NULL, &cat))) goto out;
  have_cat = true;
  device_overheads(&cat, m.device, &ov, &card);
  for (size_t i = 0; i < m.n; i++) {
    struct vl_compare_row *r = &rows[i];
    r->run = &m.runs[i];
    if (!r->run->ok) {
      snprintf(r->why, sizeof r->why, "%s", r->run->error);
      continue;
    }
    struct vl_arch arch;
    char model[PATH_MAX];
    model_path(results, r->run->model, model, sizeof model);
    if (cli_load_model(model, &arch) != 0) {
      snprintf(r->why, sizeof r->why,
               strchr(r->run->model, '/') ? "config '%s' cannot be read (a path in a results "
                                            "file is from the file's folder)"
                                          : "model '%s' is not bundled",
               r->run->model);
      continue;
    }
    s = vl_bill_compute(&arch, &r->run->job, &ov, bill, &err);
    if (s != VL_OK) {
      snprintf(r->why, sizeof r->why, "%.190s", err.msg);
      continue;
    }
    vl_compare_fill(r, bill);
    time_row(r, &arch, card);
  }
  struct vl_compare_tally tally;
  vl_compare_tally(rows, m.n, v.tol, v.tol_total, v.tol_time, v.time_gate, &tally);
  struct vl_compare_summary cal, hold;
  struct vl_time_summary ts;
  if (vl_compare_summarize(rows, m.n, false, v.tol, v.tol_total, &cal) != VL_OK ||
      vl_compare_summarize(rows, m.n, true, v.tol, v.tol_total, &hold) != VL_OK ||
      vl_compare_time_summarize(rows, m.n, v.tol_time, &ts) != VL_OK) {
    cli_error("out of memory");
    rc = VL_EXIT_ERROR;
    goto out;
  }
  struct vl_validate_view view = {&m,
                                  rows,
                                  m.n,
                                  &cal,
                                  &hold,
                                  v.tol,
                                  v.tol_total,
                                  results,
                                  &tally,
                                  ts.n ? &ts : NULL,
                                  card ? card->name : NULL,
                                  v.tol_time,
                                  v.time_gate};
  if (vl_render_validate(stdout, v.fmt, &view) != 0) {
    cli_error("cannot write the output");
    rc = VL_EXIT_ERROR;
    goto out;
  }
  if (!v.results) { /* keep the report beside the measurements */
    char report[4200];
    snprintf(report, sizeof report, "%s/report.md", dir);
    struct cli_output o; /* replaced whole: a failure leaves the last report */
    if ((rc = cli_output_open(&o, report, 0644))) goto out;
    errno = 0;
    if (vl_render_validate(o.f, VL_FMT_MD, &view) != 0) {
      cli_error("cannot write '%s': %s", report, strerror(errno ? errno : EIO));
      cli_output_discard(&o);
      rc = VL_EXIT_ERROR;
      goto out;
    }
    if ((rc = cli_output_commit(&o))) goto out;
    fprintf(stderr, "vramledger: measurements and report in %s\n", dir);
  }
  if (cal.n + hold.n == 0) {
    cli_error("no run of '%s' could be compared", results);
    rc = VL_EXIT_ERROR;
  } else {
    rc = tally.beyond ? VL_EXIT_NOFIT : VL_EXIT_OK;
  }
out:
  if (have_cat) vl_catalog_release(&cat);
  vl_free(bill);
  vl_free(rows);
  vl_measured_release(&m);
  return rc;
}
