/* vramledger sweep: run a command over a grid of values, each point under
 * `vramledger run`, and tabulate what each point took. docs/cmd/sweep.md. */
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
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

#define MAX_VARS 6
#define MAX_VALUES 32

struct grid {
  char name[MAX_VARS][24];
  char value[MAX_VARS][MAX_VALUES][32];
  int n_values[MAX_VARS];
  int n;
};

static int add_grid(struct grid *g, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof g->name[0] || g->n == MAX_VARS) {
    cli_error("--grid '%s': expected NAME=V1,V2,... (at most %d variables)", spec, MAX_VARS);
    return VL_EXIT_USAGE;
  }
  int k = g->n++;
  snprintf(g->name[k], sizeof g->name[k], "%.*s", (int)(eq - spec), spec);
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", eq + 1);
  for (char *t = buf, *next; t; t = next) {
    next = strchr(t, ',');
    if (next) *next++ = '\0';
    if (!*t || g->n_values[k] == MAX_VALUES) {
      cli_error("--grid '%s': give 1 to %d non-empty values", spec, MAX_VALUES);
      return VL_EXIT_USAGE;
    }
    snprintf(g->value[k][g->n_values[k]++], 32, "%.31s", t);
  }
  return 0;
}

/* Replace {name} in s with the point's values; -1 when a placeholder is not
 * a grid variable. */
static int substitute(const char *s, const struct grid *g, const int *at, char *out, size_t n,
                      bool *used) {
  size_t o = 0;
  for (const char *p = s; *p;) {
    if (*p == '{') {
      const char *close = strchr(p, '}');
      int k = -1;
      for (int i = 0; close && i < g->n; i++)
        if ((size_t)(close - p - 1) == strlen(g->name[i]) &&
            !strncmp(p + 1, g->name[i], strlen(g->name[i])))
          k = i;
      if (k < 0) {
        snprintf(out, n, "%.*s", close ? (int)(close - p + 1) : 1, p);
        return -1;
      }
      used[k] = true;
      int w = snprintf(out + o, n - o, "%s", g->value[k][at[k]]);
      if (w < 0 || (size_t)w >= n - o) return -1;
      o += (size_t)w;
      p = close + 1;
      continue;
    }
    if (o + 1 >= n) return -1;
    out[o++] = *p++;
  }
  out[o] = '\0';
  return 0;
}

static bool file_has(const char *path, const char *needle) {
  size_t len = 0;
  FILE *f = fopen(path, "r");
  if (!f) return false;
  fclose(f);
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
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) dup2(fd, 2);
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

int cmd_sweep(int argc, const char **argv) {
  struct grid g = {0};
  const char *out = "sweep";
  uint64_t repeat = 1, interval = 100;
  int dash = -1, rc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      dash = i;
      break;
    }
    if (!strcmp(argv[i], "--help")) {
      fputs(vl_help_sweep, stdout);
      return VL_EXIT_OK;
    }
    bool has = i + 1 < argc;
    if (!strcmp(argv[i], "--grid") && has) {
      if ((rc = add_grid(&g, argv[++i]))) return rc;
    } else if (!strcmp(argv[i], "--out") && has) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--repeat") && has) {
      if ((rc = cli_u64("repeat", argv[++i], 1, 100, &repeat))) return rc;
    } else if (!strcmp(argv[i], "--interval-ms") && has) {
      if ((rc = cli_u64("interval-ms", argv[++i], 1, 60000, &interval))) return rc;
    } else {
      cli_error("unknown or incomplete option '%s'", argv[i]);
      cli_hint(
          "vramledger sweep --grid batch=1,2,4 [--repeat N] [--out DIR] -- COMMAND {batch} ...");
      return VL_EXIT_USAGE;
    }
  }
  if (!g.n || dash < 0 || dash + 1 >= argc) {
    cli_error("sweep needs --grid NAME=V1,V2,... and a command after '--'");
    return VL_EXIT_USAGE;
  }
  int cmd_n = argc - dash - 1;
  const char **cmd = argv + dash + 1;
  /* every placeholder defined, every variable used: checked before anything runs */
  bool used[MAX_VARS] = {false};
  int at[MAX_VARS] = {0};
  char buf[4096];
  for (int i = 0; i < cmd_n; i++)
    if (substitute(cmd[i], &g, at, buf, sizeof buf, used) != 0) {
      cli_error("the command uses %s, which no --grid defines", buf);
      return VL_EXIT_USAGE;
    }
  for (int k = 0; k < g.n; k++)
    if (!used[k]) {
      cli_error("--grid %s is never used in the command (write {%s} where it goes)", g.name[k],
                g.name[k]);
      return VL_EXIT_USAGE;
    }
  if (mkdir(out, 0700) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", out, strerror(errno));
    return VL_EXIT_ERROR;
  }
  char self[PATH_MAX];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    cli_error("cannot find the vramledger binary (/proc/self/exe)");
    return VL_EXIT_ERROR;
  }
  self[sl] = '\0';
  char csv[PATH_MAX];
  snprintf(csv, sizeof csv, "%.4000s/sweep.csv", out);
  FILE *f = fopen(csv, "w");
  if (!f) {
    cli_error("cannot write '%s': %s", csv, strerror(errno));
    return VL_EXIT_ERROR;
  }
  fputs("point", f);
  for (int k = 0; k < g.n; k++)
    fprintf(f, ",%s", g.name[k]);
  fputs(",peak_bytes,peak_cuda_alloc_bytes,peak_allocated_bytes,peak_reserved_bytes,"
        "peak_fwd_bwd_bytes,peak_optimizer_bytes,spread_pct,seconds,steps_per_s,tokens_per_s,"
        "status\n",
        f);
  int kb = -1, ks = -1; /* tokens per step = batch x seq, when both are swept */
  for (int k = 0; k < g.n; k++) {
    if (!strcmp(g.name[k], "batch")) kb = k;
    if (!strcmp(g.name[k], "seq")) ks = k;
  }
  printf("%-6s", "point");
  for (int k = 0; k < g.n; k++)
    printf(" %10s", g.name[k]);
  printf(" %12s %12s %8s %8s %9s %10s  %s\n", "process GiB", "alloc GiB", "spread", "s", "steps/s",
         "tokens/s", "status");
  size_t total = 1;
  for (int k = 0; k < g.n; k++)
    total *= (size_t)g.n_values[k];
  int failures = 0;
  for (size_t p = 0; p < total; p++) {
    size_t rem = p;
    for (int k = g.n - 1; k >= 0; k--) {
      at[k] = (int)(rem % (size_t)g.n_values[k]);
      rem /= (size_t)g.n_values[k];
    }
    char **av = vl_calloc((size_t)cmd_n + 1, sizeof *av);
    if (!av) {
      fclose(f);
      cli_error("out of memory");
      return VL_EXIT_ERROR;
    }
    for (int i = 0; i < cmd_n; i++) {
      substitute(cmd[i], &g, at, buf, sizeof buf, used);
      av[i] = strdup(buf);
    }
    uint64_t lo = UINT64_MAX, hi = 0, cuda = 0;
    double secs = 0, rate = 0, tok_rate = 0;
    int rated = 0, tok_rated = 0;
    uint64_t alloc_peak = 0, reserved_peak = 0; /* the probe's, when it ran */
    uint64_t fwd_bwd_peak = 0, optimizer_peak = 0;
    const char *status = "ok";
    for (uint64_t r = 0; r < repeat; r++) {
      char dir[PATH_MAX], rec[PATH_MAX];
      snprintf(dir, sizeof dir, "%.3000s/point-%03zu-r%llu", out, p, (unsigned long long)r);
      snprintf(rec, sizeof rec, "%.4000s/record.jsonl", dir);
      /* resume: a point with a complete record is not run again */
      bool done = file_has(rec, "\"type\":\"exit\"");
      int code = 0;
      if (!done) {
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
          cli_error("cannot create '%s': %s", dir, strerror(errno));
          fclose(f);
          return VL_EXIT_ERROR;
        }
        char cmdline[64];
        snprintf(cmdline, sizeof cmdline, "point %zu/%zu", p + 1, total);
        fprintf(stderr, "vramledger: sweep %s\n", cmdline);
        code = run_point(self, dir, av, interval);
      } else {
        code = file_has(rec, "\"status\":0,") ? 0 : 1;
      }
      char log[PATH_MAX];
      snprintf(log, sizeof log, "%.4000s/stderr.log", dir);
      uint64_t mp = 0, mc = 0;
      double d = 0;
      char path[PATH_MAX];
      if (cli_run_peaks(dir, &mp, &mc, &d, path, sizeof path) != 0) code = code ? code : 1;
      if (code) {
        status =
            file_has(log, "out of memory") || file_has(log, "OutOfMemoryError") ? "oom" : "failed";
        failures++;
        fprintf(stderr, "vramledger: sweep point %zu: %s (exit %d); its stderr is in %s\n", p,
                status, code, log);
      }
      lo = mp < lo ? mp : lo;
      hi = mp > hi ? mp : hi;
      cuda = mc > cuda ? mc : cuda;
      secs += d / (double)repeat;
      struct vl_record rcd;
      if (!code && cli_load_record(dir, &rcd, path, sizeof path) == 0) {
        /* the probe's steps (median step time, measured tokens) when it
         * ran; else the job's "step" stamps, as audit measures them */
        struct vl_probe_layer fw;
        vl_probe_analyze(&rcd, &fw);
        double step_s =
            fw.step_s_median > 0 ? fw.step_s_median : vl_record_mark_median_s(&rcd, "step");
        if (step_s > 0) rate += 1.0 / step_s, rated++;
        if (fw.tokens_per_s > 0) tok_rate += fw.tokens_per_s, tok_rated++;
        if (fw.peak_allocated > alloc_peak) alloc_peak = fw.peak_allocated;
        if (fw.peak_reserved > reserved_peak) reserved_peak = fw.peak_reserved;
        if (fw.peak_fwd_bwd > fwd_bwd_peak) fwd_bwd_peak = fw.peak_fwd_bwd;
        if (fw.peak_optimizer > optimizer_peak) optimizer_peak = fw.peak_optimizer;
        vl_record_release(&rcd);
      }
    }
    char steps[32] = "", tokens[32] = "";
    if (rated) {
      rate /= rated;
      snprintf(steps, sizeof steps, "%.4g", rate);
      if (tok_rated)
        snprintf(tokens, sizeof tokens, "%.6g", tok_rate / tok_rated);
      else if (kb >= 0 && ks >= 0)
        snprintf(tokens, sizeof tokens, "%.6g",
                 rate * atof(g.value[kb][at[kb]]) * atof(g.value[ks][at[ks]]));
    }
    char palloc[24] = "", pres[24] = "", pfb[24] = "", popt[24] = "";
    if (alloc_peak) {
      snprintf(palloc, sizeof palloc, "%llu", (unsigned long long)alloc_peak);
      snprintf(pres, sizeof pres, "%llu", (unsigned long long)reserved_peak);
    }
    if (fwd_bwd_peak && optimizer_peak) { /* a training step, both phases seen */
      snprintf(pfb, sizeof pfb, "%llu", (unsigned long long)fwd_bwd_peak);
      snprintf(popt, sizeof popt, "%llu", (unsigned long long)optimizer_peak);
    }
    double spread = hi ? 100.0 * (double)(hi - lo) / (double)hi : 0.0;
    fprintf(f, "%zu", p);
    printf("%-6zu", p);
    for (int k = 0; k < g.n; k++) {
      fprintf(f, ",%s", g.value[k][at[k]]);
      printf(" %10s", g.value[k][at[k]]);
    }
    fprintf(f, ",%llu,%llu,%s,%s,%s,%s,%.2f,%.3f,%s,%s,%s\n", (unsigned long long)hi,
            (unsigned long long)cuda, palloc, pres, pfb, popt, spread, secs, steps, tokens, status);
    fflush(f);
    printf(" %12.2f %12.2f %7.1f%% %8.1f %9s %10s  %s\n", (double)hi / (1ull << 30),
           (double)cuda / (1ull << 30), spread, secs, *steps ? steps : "-", *tokens ? tokens : "-",
           status);
    for (int i = 0; i < cmd_n; i++)
      free(av[i]);
    vl_free(av);
  }
  if (fclose(f) != 0) {
    cli_error("cannot write '%s'", csv);
    return VL_EXIT_ERROR;
  }
  printf("\n%s: %zu points, %d not ok; fit it with: vramledger fit --csv %s\n", csv, total,
         failures, csv);
  return VL_EXIT_OK;
}
