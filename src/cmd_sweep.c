/* vramledger sweep: run a command over a grid of values, each point under
 * `vramledger run`, and tabulate what each point took. docs/cmd/sweep.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "grid.h"
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

#define WORD_MAX 4096 /* a word of the command with the point's values in it, NUL included */

static int add_grid(struct grid *g, const char *spec) {
  struct vl_err err = {""};
  if (grid_add(g, spec, &err) != VL_OK) {
    cli_error("--grid '%s': %s", spec, err.msg);
    return VL_EXIT_USAGE;
  }
  return 0;
}

static bool file_has(const char *path, const char *needle) {
  size_t len = 0;
  if (access(path, F_OK) != 0) return false; /* no fopen: a FIFO there would block it */
  char *t = cli_read_file(path, &len);
  bool hit = t && strstr(t, needle);
  vl_free(t);
  return hit;
}

/* Run one point under `vramledger run`, its stderr kept in DIR/stderr.log
 * (and shown). Returns the command's exit status. */
static int run_point(const char *self, const char *dir, char **argv, uint64_t interval) {
  char log[PATH_MAX], iv[32];
  snprintf(log, sizeof log, "%.4000s/stderr.log", dir);
  snprintf(iv, sizeof iv, "%llu", (unsigned long long)interval);
  pid_t pid = fork();
  if (pid == 0) {
    /* rewritten when a point runs again, never through a symbolic link */
    int fd = cli_create_fd(log, O_TRUNC, 0600);
    if (fd < 0) _exit(125);
    dup2(fd, 2);
    int n = 0;
    while (argv[n])
      n++;
    const char **a = calloc((size_t)n + 9, sizeof *a); /* 8 of ours + the command + NULL */
    if (!a) _exit(125);
    int k = 0;
    a[k++] = self;
    a[k++] = "run";
    a[k++] = "--quiet";
    a[k++] = "--interval-ms";
    a[k++] = iv;
    a[k++] = "--out";
    a[k++] = dir;
    a[k++] = "--";
    for (int i = 0; i < n; i++)
      a[k++] = argv[i];
    a[k] = NULL;
    execv(self, (char *const *)a);
    _exit(125);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return 125;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The sweep as it goes: the options, the command and where results go. */
struct sweep {
  struct grid g;
  const char *out;
  uint64_t repeat, interval;
  const char **cmd; /* the command after '--', cmd_n words */
  int cmd_n;
  char self[PATH_MAX]; /* this binary, run once per point */
  char csv[PATH_MAX];
  struct cli_output csv_out; /* csv, replaced whole once every point ran */
  FILE *f;                   /* csv_out.f, open while the points run */
  int kb, ks;                /* tokens per step = batch x seq, when both are swept */
  size_t total;              /* points in the grid */
  int failures;
};

/* What one point took over its repeats. */
struct point {
  size_t p;
  int at[GRID_MAX_VARS]; /* each variable's value index */
  char **av;             /* the command with the point's values */
  uint64_t lo, hi, cuda;
  double secs, rate, tok_rate;
  int rated, tok_rated;
  uint64_t alloc_peak, reserved_peak; /* the probe's, when it ran */
  uint64_t fwd_bwd_peak, optimizer_peak;
  const char *status;
};

/* Is argv[*i] the option name with its value ("--out DIR" or "--out=DIR",
 * as every command spells them)? Its value in *v, *i past it. */
static bool option(const char *name, int argc, const char **argv, int *i, const char **v) {
  size_t l = strlen(name);
  if (strncmp(argv[*i], name, l) != 0) return false;
  if (argv[*i][l] == '=') {
    *v = argv[*i] + l + 1;
    return true;
  }
  if (argv[*i][l] != '\0' || *i + 1 >= argc) return false;
  *v = argv[++*i];
  return true;
}

/* The options up to '--'. Sets *help after printing --help. */
static int parse_options(struct sweep *s, int argc, const char **argv, bool *help) {
  int dash = -1, rc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      dash = i;
      break;
    }
    if (!strcmp(argv[i], "--help")) {
      fputs(vl_help_sweep, stdout);
      *help = true;
      return VL_EXIT_OK;
    }
    const char *v = NULL;
    if (option("--grid", argc, argv, &i, &v)) {
      if ((rc = add_grid(&s->g, v))) return rc;
    } else if (option("--out", argc, argv, &i, &v)) {
      s->out = v;
    } else if (option("--repeat", argc, argv, &i, &v)) {
      if ((rc = cli_u64("repeat", v, 1, 100, &s->repeat))) return rc;
    } else if (option("--interval-ms", argc, argv, &i, &v)) {
      if ((rc = cli_u64("interval-ms", v, 1, 60000, &s->interval))) return rc;
    } else {
      cli_error("unknown or incomplete option '%s'", argv[i]);
      cli_hint(
          "vramledger sweep --grid batch=1,2,4 [--repeat N] [--out DIR] -- COMMAND {batch} ...");
      return VL_EXIT_USAGE;
    }
  }
  if (!s->g.n || dash < 0 || dash + 1 >= argc) {
    cli_error("sweep needs --grid NAME=V1,V2,... and a command after '--'");
    return VL_EXIT_USAGE;
  }
  s->cmd_n = argc - dash - 1;
  s->cmd = argv + dash + 1;
  return 0;
}

/* Every placeholder defined, every variable used: checked before anything
 * runs. */
static int word_too_long(const struct sweep *s, int i) {
  cli_error("the command's word %d ('%.40s...') is longer than %d bytes with the grid's values in "
            "it",
            i + 1, s->cmd[i], WORD_MAX - 1);
  return VL_EXIT_USAGE;
}

static int check_command(const struct sweep *s) {
  bool used[GRID_MAX_VARS] = {false};
  int at[GRID_MAX_VARS] = {0};
  char buf[WORD_MAX];
  for (int i = 0; i < s->cmd_n; i++) {
    int r = grid_substitute(s->cmd[i], &s->g, at, buf, sizeof buf, used);
    if (r == -1) {
      cli_error("the command uses %s, which no --grid defines", buf);
      return VL_EXIT_USAGE;
    }
    if (r) return word_too_long(s, i);
  }
  for (int k = 0; k < s->g.n; k++)
    if (!used[k]) {
      cli_error("--grid %s is never used in the command (write {%s} where it goes)", s->g.name[k],
                s->g.name[k]);
      return VL_EXIT_USAGE;
    }
  grid_longest(&s->g, at); /* every point fits if these do */
  for (int i = 0; i < s->cmd_n; i++)
    if (grid_substitute(s->cmd[i], &s->g, at, buf, sizeof buf, used) != 0)
      return word_too_long(s, i);
  return 0;
}

/* The output directory, this binary's path, and sweep.csv with its header
 * row. */
static int open_outputs(struct sweep *s) {
  if (mkdir(s->out, 0700) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", s->out, strerror(errno));
    return VL_EXIT_ERROR;
  }
  ssize_t sl = readlink("/proc/self/exe", s->self, sizeof s->self - 1);
  if (sl <= 0) {
    cli_error("cannot find the vramledger binary (/proc/self/exe)");
    return VL_EXIT_ERROR;
  }
  s->self[sl] = '\0';
  snprintf(s->csv, sizeof s->csv, "%.4000s/sweep.csv", s->out);
  /* rewritten at each sweep (a resumed one too), never through a symbolic
   * link: beside it while the points run, in its place at the end */
  if (cli_output_open(&s->csv_out, s->csv, 0600)) return VL_EXIT_ERROR;
  s->f = s->csv_out.f;
  fputs("point", s->f);
  for (int k = 0; k < s->g.n; k++)
    fprintf(s->f, ",%s", s->g.name[k]);
  fputs(",peak_bytes,peak_cuda_alloc_bytes,peak_allocated_bytes,peak_reserved_bytes,"
        "peak_fwd_bwd_bytes,peak_optimizer_bytes,spread_pct,seconds,steps_per_s,tokens_per_s,"
        "status\n",
        s->f);
  return 0;
}

/* The grid's size, the batch and seq variables, and the table's header. */
static void plan_grid(struct sweep *s) {
  s->kb = s->ks = -1;
  for (int k = 0; k < s->g.n; k++) {
    if (!strcmp(s->g.name[k], "batch")) s->kb = k;
    if (!strcmp(s->g.name[k], "seq")) s->ks = k;
  }
  printf("%-6s", "point");
  for (int k = 0; k < s->g.n; k++)
    printf(" %10s", s->g.name[k]);
  printf(" %12s %12s %8s %8s %9s %10s  %s\n", "process GiB", "alloc GiB", "spread", "s", "steps/s",
         "tokens/s", "status");
  s->total = 1;
  for (int k = 0; k < s->g.n; k++)
    s->total *= (size_t)s->g.n_values[k];
}

/* An older interrupted record's streams folder, removed: the files of its
 * writers (a streams folder holds no other). @return 0, or -1 (errno). */
static int remove_streams(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? 0 : -1;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char f[PATH_MAX + 300];
    snprintf(f, sizeof f, "%.4000s/%s", dir, e->d_name);
    unlink(f);
  }
  closedir(d);
  return rmdir(dir);
}

/* The interrupted record's streams (record.d) moved with it, to the
 * folder of record.interrupted.jsonl (record.interrupted.d), which reads
 * as one record. @return 0, or -1 said. */
static int keep_streams(const char *rec, const char *old) {
  char from[PATH_MAX], to[PATH_MAX];
  vl_record_streams_dir(rec, from, sizeof from);
  vl_record_streams_dir(old, to, sizeof to);
  if (remove_streams(to) != 0 || (rename(from, to) != 0 && errno != ENOENT)) {
    cli_error("cannot move the interrupted record's streams '%s' aside: %s", from, strerror(errno));
    return -1;
  }
  return 0;
}

/* Run repeat r of the point in DIR, or take its complete record from an
 * earlier sweep (resume). A record without its exit event is of a point
 * that was interrupted: it is kept as record.interrupted.jsonl with its
 * streams (replacing an older one) and the point runs again (`run`
 * creates its files new).
 * Returns the command's exit status, or -1 when DIR cannot be created or
 * the interrupted record moved. */
static int run_or_resume(const struct sweep *s, const struct point *pt, const char *dir,
                         const char *rec) {
  if (file_has(rec, "\"type\":\"exit\"")) return file_has(rec, "\"status\":0,") ? 0 : 1;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", dir, strerror(errno));
    return -1;
  }
  struct stat st;
  if (lstat(rec, &st) == 0) {
    char old[PATH_MAX], part[PATH_MAX];
    snprintf(old, sizeof old, "%.4000s/record.interrupted.jsonl", dir);
    if (rename(rec, old) != 0) {
      cli_error("cannot move the interrupted record '%s' aside: %s", rec, strerror(errno));
      return -1;
    }
    if (keep_streams(rec, old) != 0) return -1;
    static const char *const parts[] = {"counters", "fallback"}; /* run's other files */
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
      snprintf(part, sizeof part, "%.4000s/%s", dir, parts[i]);
      unlink(part);
    }
    fprintf(stderr,
            "vramledger: sweep point %zu/%zu was interrupted (its record has no exit): "
            "run again, the old record kept as %s\n",
            pt->p + 1, s->total, old);
  }
  char cmdline[64];
  snprintf(cmdline, sizeof cmdline, "point %zu/%zu", pt->p + 1, s->total);
  fprintf(stderr, "vramledger: sweep %s\n", cmdline);
  return run_point(s->self, dir, pt->av, s->interval);
}

/* The probe's steps (median step time, measured tokens) and peaks when it
 * ran; else the job's "step" stamps, as audit measures them. @return 0,
 * or an exit code (said): never a row without them when they were there. */
static int add_rates(struct point *pt, const char *dir, char *path, size_t path_len) {
  struct vl_record rcd;
  int rc = cli_load_record(dir, &rcd, path, path_len);
  if (rc) return rc;
  struct vl_probe_layer fw;
  double step_s = 0;
  vl_status s = vl_probe_analyze(&rcd, &fw);
  if (s == VL_OK) step_s = fw.step_s_median;
  if (s == VL_OK && !(step_s > 0)) s = vl_record_mark_median_s(&rcd, "step", &step_s);
  if (s != VL_OK) {
    cli_error("cannot analyse the record '%s': %s", path, vl_strerror(s));
    vl_record_release(&rcd);
    return VL_EXIT_ERROR;
  }
  if (step_s > 0) pt->rate += 1.0 / step_s, pt->rated++;
  if (fw.tokens_per_s > 0) pt->tok_rate += fw.tokens_per_s, pt->tok_rated++;
  if (fw.peak_allocated > pt->alloc_peak) pt->alloc_peak = fw.peak_allocated;
  if (fw.peak_reserved > pt->reserved_peak) pt->reserved_peak = fw.peak_reserved;
  if (fw.peak_fwd_bwd > pt->fwd_bwd_peak) pt->fwd_bwd_peak = fw.peak_fwd_bwd;
  if (fw.peak_optimizer > pt->optimizer_peak) pt->optimizer_peak = fw.peak_optimizer;
  vl_record_release(&rcd);
  return 0;
}

/* Repeat r of the point: run it (or resume it), then add what it took. */
static int measure_repeat(struct sweep *s, struct point *pt, uint64_t r) {
  char dir[PATH_MAX], rec[PATH_MAX];
  snprintf(dir, sizeof dir, "%.3000s/point-%03zu-r%llu", s->out, pt->p, (unsigned long long)r);
  snprintf(rec, sizeof rec, "%.4000s/record.jsonl", dir);
  int code = run_or_resume(s, pt, dir, rec);
  if (code < 0) return VL_EXIT_ERROR;
  char log[PATH_MAX];
  snprintf(log, sizeof log, "%.4000s/stderr.log", dir);
  uint64_t mp = 0, mc = 0;
  double d = 0;
  char path[PATH_MAX];
  if (cli_run_peaks(dir, &mp, &mc, &d, path, sizeof path) != 0) code = code ? code : 1;
  if (code) {
    pt->status =
        file_has(log, "out of memory") || file_has(log, "OutOfMemoryError") ? "oom" : "failed";
    s->failures++;
    fprintf(stderr, "vramledger: sweep point %zu: %s (exit %d); its stderr is in %s\n", pt->p,
            pt->status, code, log);
  }
  pt->lo = mp < pt->lo ? mp : pt->lo;
  pt->hi = mp > pt->hi ? mp : pt->hi;
  pt->cuda = mc > pt->cuda ? mc : pt->cuda;
  pt->secs += d / (double)s->repeat;
  return code ? 0 : add_rates(pt, dir, path, sizeof path);
}

/* The point's row in sweep.csv and in the table. */
static void write_point(const struct sweep *s, const struct point *pt) {
  const struct grid *g = &s->g;
  char steps[32] = "", tokens[32] = "";
  if (pt->rated) {
    double rate = pt->rate / pt->rated;
    snprintf(steps, sizeof steps, "%.4g", rate);
    if (pt->tok_rated)
      snprintf(tokens, sizeof tokens, "%.6g", pt->tok_rate / pt->tok_rated);
    else if (s->kb >= 0 && s->ks >= 0)
      snprintf(tokens, sizeof tokens, "%.6g",
               rate * atof(g->value[s->kb][pt->at[s->kb]]) * atof(g->value[s->ks][pt->at[s->ks]]));
  }
  char palloc[24] = "", pres[24] = "", pfb[24] = "", popt[24] = "";
  if (pt->alloc_peak) {
    snprintf(palloc, sizeof palloc, "%llu", (unsigned long long)pt->alloc_peak);
    snprintf(pres, sizeof pres, "%llu", (unsigned long long)pt->reserved_peak);
  }
  if (pt->fwd_bwd_peak && pt->optimizer_peak) { /* a training step, both phases seen */
    snprintf(pfb, sizeof pfb, "%llu", (unsigned long long)pt->fwd_bwd_peak);
    snprintf(popt, sizeof popt, "%llu", (unsigned long long)pt->optimizer_peak);
  }
  double spread = pt->hi ? 100.0 * (double)(pt->hi - pt->lo) / (double)pt->hi : 0.0;
  fprintf(s->f, "%zu", pt->p);
  printf("%-6zu", pt->p);
  for (int k = 0; k < g->n; k++) {
    fprintf(s->f, ",%s", g->value[k][pt->at[k]]);
    printf(" %10s", g->value[k][pt->at[k]]);
  }
  fprintf(s->f, ",%llu,%llu,%s,%s,%s,%s,%.2f,%.3f,%s,%s,%s\n", (unsigned long long)pt->hi,
          (unsigned long long)pt->cuda, palloc, pres, pfb, popt, spread, pt->secs, steps, tokens,
          pt->status);
  fflush(s->f);
  printf(" %12.2f %12.2f %7.1f%% %8.1f %9s %10s  %s\n", (double)pt->hi / (1ull << 30),
         (double)pt->cuda / (1ull << 30), spread, pt->secs, *steps ? steps : "-",
         *tokens ? tokens : "-", pt->status);
}

/* Point p: its values, its command, its repeats, its row. */
static int run_grid_point(struct sweep *s, size_t p) {
  struct point pt = {.p = p, .lo = UINT64_MAX, .status = "ok"};
  size_t rem = p;
  for (int k = s->g.n - 1; k >= 0; k--) {
    pt.at[k] = (int)(rem % (size_t)s->g.n_values[k]);
    rem /= (size_t)s->g.n_values[k];
  }
  pt.av = vl_calloc((size_t)s->cmd_n + 1, sizeof *pt.av);
  if (!pt.av) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  bool used[GRID_MAX_VARS] = {false};
  char buf[WORD_MAX];
  int rc = 0;
  for (int i = 0; i < s->cmd_n && !rc; i++) {
    (void)grid_substitute(s->cmd[i], &s->g, pt.at, buf, sizeof buf, used); /* checked to fit */
    if (!(pt.av[i] = strdup(buf))) { /* a NULL would end the command there */
      cli_error("out of memory");
      rc = VL_EXIT_ERROR;
    }
  }
  for (uint64_t r = 0; r < s->repeat && !rc; r++)
    rc = measure_repeat(s, &pt, r);
  if (!rc) write_point(s, &pt);
  for (int i = 0; i < s->cmd_n; i++)
    free(pt.av[i]);
  vl_free(pt.av);
  return rc;
}

int cmd_sweep(int argc, const char **argv) {
  struct sweep s = {.out = "sweep", .repeat = 1, .interval = 100};
  bool help = false;
  int rc;
  if ((rc = parse_options(&s, argc, argv, &help)) || help || (rc = check_command(&s)) ||
      (rc = open_outputs(&s)))
    return rc;
  plan_grid(&s);
  for (size_t p = 0; p < s.total; p++)
    if ((rc = run_grid_point(&s, p))) {
      cli_output_discard(&s.csv_out);
      return rc;
    }
  if (cli_output_commit(&s.csv_out)) return VL_EXIT_ERROR;
  printf("\n%s: %zu points, %d not ok; fit it with: vramledger fit --csv %s\n", s.csv, s.total,
         s.failures, s.csv);
  return VL_EXIT_OK;
}
