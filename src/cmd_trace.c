/* vramledger trace: record every allocation a PyTorch job makes (on any
 * device, a CPU dry run included) and replay it through the model of the
 * CUDA caching allocator. docs/cmd/trace.md. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/caching.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"

enum {
  O_HELP,
  O_OUT,
  O_REPLAY,
  O_GPU,
  O_DEVICE,
  O_EXPANDABLE,
  O_MSS,
  O_GC,
  O_WHATIF,
  O_BATCH,
  O_FORMAT
};
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},       {"out", true, O_OUT},
    {"replay", true, O_REPLAY},    {"gpu", true, O_GPU},
    {"device", true, O_DEVICE},    {"expandable", false, O_EXPANDABLE},
    {"max-split-mb", true, O_MSS}, {"gc-threshold", true, O_GC},
    {"what-if", false, O_WHATIF},  {"batch", true, O_BATCH},
    {"format", true, O_FORMAT},    {NULL, false, 0}};

#define MAX_BATCHES 8

struct tr {
  bool help, whatif;
  uint64_t batch[MAX_BATCHES]; /* --batch: replays at these micro-batches */
  int n_batch;
  const char *out, *replay, *gpu;
  int device, fmt;
  struct vl_cache_conf conf;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct tr *t = ctx;
  static const char *const devices[] = {"cpu", "cuda", "meta", "all", NULL};
  static const char *const formats[] = {"text", "json", NULL};
  uint64_t mb = 0;
  int rc = 0, k;
  switch (id) {
  case O_HELP: t->help = true; break;
  case O_OUT: t->out = arg; break;
  case O_REPLAY: t->replay = arg; break;
  case O_GPU: t->gpu = arg; break;
  case O_DEVICE:
    if ((k = cli_choice(flag, arg, devices)) < 0) return VL_EXIT_USAGE;
    t->device = k == 3 ? -2 : k;
    break;
  case O_EXPANDABLE: t->conf.expandable = true; break;
  case O_MSS:
    rc = cli_u64(flag, arg, 1, 1u << 30, &mb);
    t->conf.max_split_size = mb << 20;
    break;
  case O_GC: rc = cli_double(flag, arg, 0.01, 0.99, &t->conf.gc_threshold); break;
  case O_WHATIF: t->whatif = true; break;
  case O_BATCH: {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *tok = buf, *next; tok && !rc; tok = next) {
      next = strchr(tok, ',');
      if (next) *next++ = '\0';
      if (t->n_batch == MAX_BATCHES) {
        cli_error("%s: at most %d batch sizes", flag, MAX_BATCHES);
        return VL_EXIT_USAGE;
      }
      rc = cli_u64(flag, tok, 1, 1u << 20, &t->batch[t->n_batch++]);
    }
    break;
  }
  case O_FORMAT:
    if ((t->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
    break;
  default: break;
  }
  return rc;
}

/* Run the job under `vramledger run` with the tracer on. */
static int trace_job(const char *dir, const char *trace, int argc, const char **argv,
                     bool quiet_stdout) {
  const char **av = calloc((size_t)argc + 8, sizeof *av);
  if (!av) return VL_EXIT_ERROR;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    free(av);
    cli_error("cannot find the vramledger executable: %s", strerror(errno));
    return VL_EXIT_ERROR;
  }
  self[n] = '\0';
  int k = 0;
  av[k++] = self;
  av[k++] = "run";
  av[k++] = "--quiet";
  av[k++] = "--no-preload";
  av[k++] = "--out";
  av[k++] = dir;
  av[k++] = "--";
  for (int i = 0; i < argc; i++)
    av[k++] = argv[i];
  av[k] = NULL;
  pid_t pid = fork();
  if (pid < 0) {
    free(av);
    cli_error("cannot start '%s': %s", argv[0], strerror(errno));
    return VL_EXIT_ERROR;
  }
  if (pid == 0) {
    setenv("VRAMLEDGER_TRACE", trace, 1);
    setenv("VRAMLEDGER_PROBE_EVERY", "1", 0);       /* every step: the module of each allocation */
    if (quiet_stdout && dup2(2, 1) < 0) _exit(126); /* --format json: stdout is ours */
    execv(self, (char *const *)av);
    _exit(127);
  }
  free(av);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cmd_trace(int argc, const char **argv) {
  int dash = argc;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--") == 0) {
      dash = i;
      break;
    }
  struct tr t = {.device = -1};
  int rc = cli_parse(dash, argv, opts, on_opt, &t);
  if (rc) return rc;
  if (t.help) {
    fputs(vl_help_trace, stdout);
    return VL_EXIT_OK;
  }
  bool has_cmd = dash + 1 < argc;
  if (!!t.replay == has_cmd) {
    cli_error("trace needs a command after '--' to run, or --replay FILE (one of them)");
    return VL_EXIT_USAGE;
  }
  if (t.gpu) { /* the card's memory, from the catalog as estimate reads it */
    struct est e;
    est_init(&e);
    e.gpu = t.gpu;
    struct vl_catalog cat;
    const struct vl_gpu *g;
    if ((rc = est_gpu(&e, &cat, &g))) return rc;
    t.conf.device_bytes = g->memory_bytes;
    vl_catalog_release(&cat);
  }
  char dir[PATH_MAX], trace[PATH_MAX];
  int job_rc = 0;
  if (has_cmd) {
    if (t.out) {
      snprintf(dir, sizeof dir, "%s", t.out);
    } else {
      char stamp[32];
      time_t now = time(NULL);
      strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&now));
      snprintf(dir, sizeof dir, "runs/%s-trace", stamp);
    }
    snprintf(trace, sizeof trace, "%.4000s/alloc.trace", dir);
    job_rc = trace_job(dir, trace, argc - dash - 1, argv + dash + 1, t.fmt == 1);
  } else {
    snprintf(trace, sizeof trace, "%s", t.replay);
  }
  size_t len = 0;
  char *text = cli_read_file(trace, &len);
  if (!text) {
    if (has_cmd)
      cli_hint("no trace was written: is the command Python with PyTorch (the tracer attaches "
               "when it imports torch)?");
    return job_rc ? job_rc : VL_EXIT_ERROR;
  }
  struct vl_trace tr;
  struct vl_err err = {""};
  vl_status s = vl_trace_parse(text, len, &tr, &err);
  free(text);
  if (s != VL_OK) {
    cli_error("%s: %s", trace, err.msg);
    return VL_EXIT_ERROR;
  }
  int device = t.device == -2 ? -1 : t.device;
  if (t.device == -1) /* cuda if any, else meta (a dry run on meta tensors), else all */
    device = tr.per_device[1] ? 1 : tr.per_device[2] ? 2 : -1;
  if (t.n_batch && !tr.batch) {
    cli_error("%s: the trace does not say its batch size, so --batch cannot scale it", trace);
    cli_hint("trace a job whose micro-batch is 2 or more (the tracer learns it from the token "
             "ids or the first input of the model's forward) with this version of vramledger");
    vl_trace_release(&tr);
    return VL_EXIT_USAGE;
  }
  enum { MAX_REPLAYS = 4 + MAX_BATCHES };
  struct vl_cache_conf confs[MAX_REPLAYS] = {t.conf};
  const char *names[MAX_REPLAYS] = {"as given"};
  char batch_names[MAX_BATCHES][40];
  uint64_t batches[MAX_REPLAYS] = {0}; /* 0: the traced batch */
  int nconf = 1;
  if (t.whatif) {
    confs[0] = (struct vl_cache_conf){.device_bytes = t.conf.device_bytes};
    names[0] = "default";
    confs[1] = confs[0];
    confs[1].expandable = true;
    names[1] = "expandable_segments";
    confs[2] = confs[0];
    confs[2].max_split_size = 128ull << 20;
    names[2] = "max_split_size_mb:128";
    confs[3] = confs[0];
    confs[3].gc_threshold = 0.6;
    names[3] = "garbage_collection_0.6";
    nconf = 4;
  } else if (!t.conf.expandable && !t.conf.max_split_size && !t.conf.gc_threshold) {
    names[0] = "default";
  }
  int nalloc = nconf; /* then one replay per --batch, under the first setting */
  for (int k = 0; k < t.n_batch; k++, nconf++) {
    confs[nconf] = confs[0];
    batches[nconf] = t.batch[k];
    snprintf(batch_names[k], sizeof batch_names[k], "batch %llu (traced %llu)",
             (unsigned long long)t.batch[k], (unsigned long long)tr.batch);
    names[nconf] = batch_names[k];
  }
  struct vl_replay r[MAX_REPLAYS];
  for (int i = 0; i < nconf; i++)
    if ((s = vl_trace_replay_scaled(&tr, device, &confs[i],
                                    i < nalloc ? 1.0 : (double)batches[i] / (double)tr.batch,
                                    &r[i])) != VL_OK) {
      cli_error("replay: %s", vl_strerror(s));
      vl_trace_release(&tr);
      return VL_EXIT_ERROR;
    }
  const char *dev = device == 1 ? "cuda" : device == 0 ? "cpu" : device == 2 ? "meta" : "all";
  struct vl_trace_view v = {trace, dev, &tr, job_rc, names, r, nconf, batches, NULL};
  struct cli_run *run = NULL; /* the probe's bill of the job, from its record */
  if (has_cmd && (run = calloc(1, sizeof *run)) != NULL && cli_load_run(dir, run) != 0) {
    free(run);
    run = NULL;
  }
  if (run) v.fw = &run->fw;
  if (vl_render_trace(stdout, t.fmt == 1, &v) != 0) cli_error("cannot write the output");
  bool oom = false;
  for (int i = 0; i < nconf; i++)
    oom |= r[i].oom;
  vl_trace_release(&tr);
  if (run) {
    vl_record_release(&run->rec);
    free(run);
  }
  if (job_rc) return job_rc;
  return oom ? VL_EXIT_NOFIT : VL_EXIT_OK;
}
