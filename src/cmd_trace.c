/* vramledger trace: record every allocation a PyTorch job makes (on any
 * device, a CPU dry run included) and replay it through the model of the
 * CUDA caching allocator. docs/cmd/trace.md. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "vramledger/caching.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"

enum { O_HELP, O_OUT, O_REPLAY, O_GPU, O_DEVICE, O_EXPANDABLE, O_MSS, O_GC, O_WHATIF, O_FORMAT };
static const struct cli_opt opts[] = {{"help", false, O_HELP},
                                      {"out", true, O_OUT},
                                      {"replay", true, O_REPLAY},
                                      {"gpu", true, O_GPU},
                                      {"device", true, O_DEVICE},
                                      {"expandable", false, O_EXPANDABLE},
                                      {"max-split-mb", true, O_MSS},
                                      {"gc-threshold", true, O_GC},
                                      {"what-if", false, O_WHATIF},
                                      {"format", true, O_FORMAT},
                                      {NULL, false, 0}};

struct tr {
  bool help, whatif;
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

static void row(FILE *o, const char *name, const struct vl_replay *r) {
  double G = 1073741824.0;
  double frag = r->peak_reserved ? 1.0 - (double)r->peak_allocated / (double)r->peak_reserved : 0;
  fprintf(o, "  %-26s %10.3f GiB %10.3f GiB %8.1f %% %9llu %8llu%s\n", name,
          (double)r->peak_allocated / G, (double)r->peak_reserved / G, 100 * frag,
          (unsigned long long)r->end.cuda_mallocs, (unsigned long long)r->end.alloc_retries,
          r->oom ? "  out of memory" : "");
}

static json_t *U(uint64_t x) { return json_integer((json_int_t)x); }

static int print_json(const char *trace, const char *dev, const struct vl_trace *tr, int job_rc,
                      const char *const *names, const struct vl_replay *r, int n) {
  json_t *o = json_object();
  json_object_set_new(o, "schema", json_string("vramledger.trace/1"));
  json_object_set_new(o, "trace", json_string(trace));
  json_object_set_new(o, "device", json_string(dev));
  json_object_set_new(o, "events", U(tr->n));
  json_object_set_new(o, "allocations", U(r[0].allocs));
  json_object_set_new(o, "frees", U(r[0].frees));
  json_object_set_new(o, "job_exit_status", json_integer(job_rc));
  json_object_set_new(o, "peak_mark",
                      r[0].peak_mark >= 0 ? json_string(tr->marks[r[0].peak_mark]) : json_null());
  json_object_set_new(o, "peak_module",
                      r[0].peak_module ? json_string(tr->modules[r[0].peak_module]) : json_null());
  json_t *a = json_array();
  for (int i = 0; i < n; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "allocator", json_string(names[i]));
    json_object_set_new(x, "peak_allocated_bytes", U(r[i].peak_allocated));
    json_object_set_new(x, "peak_reserved_bytes", U(r[i].peak_reserved));
    json_object_set_new(x, "inactive_split_at_peak_bytes", U(r[i].inactive_split_at_peak));
    json_object_set_new(x, "segments_created", U(r[i].end.cuda_mallocs));
    json_object_set_new(x, "alloc_retries", U(r[i].end.alloc_retries));
    json_object_set_new(x, "oom", json_boolean(r[i].oom));
    json_array_append_new(a, x);
  }
  json_object_set_new(o, "replays", a);
  int rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(o);
  fputc('\n', stdout);
  return rc;
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
  if (t.gpu) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/gpus.json", cli_data_dir());
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    if (!text) return VL_EXIT_ERROR;
    struct vl_catalog cat;
    struct vl_err err = {""};
    vl_status s = vl_catalog_parse(text, len, &cat, &err);
    free(text);
    if (s != VL_OK) {
      cli_error("%s: %s", path, err.msg);
      return VL_EXIT_ERROR;
    }
    const struct vl_gpu *g = vl_catalog_find(&cat, t.gpu);
    if (!g) {
      cli_error("--gpu %s: not in the catalog (vramledger estimate --help lists them)", t.gpu);
      vl_catalog_release(&cat);
      return VL_EXIT_USAGE;
    }
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
  if (t.device == -1) device = tr.per_device[1] ? 1 : -1; /* cuda if any, else all */
  struct vl_cache_conf confs[4] = {t.conf};
  const char *names[4] = {"as given"};
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
  struct vl_replay r[4];
  for (int i = 0; i < nconf; i++)
    if ((s = vl_trace_replay(&tr, device, &confs[i], &r[i])) != VL_OK) {
      cli_error("replay: %s", vl_strerror(s));
      vl_trace_release(&tr);
      return VL_EXIT_ERROR;
    }
  const char *dev = device == 1 ? "cuda" : device == 0 ? "cpu" : device == 2 ? "meta" : "all";
  if (t.fmt == 1) {
    if (print_json(trace, dev, &tr, job_rc, names, r, nconf) != 0) cli_error("cannot write");
  } else {
    printf("trace: %s\n  %zu allocations and %zu frees replayed (device %s)%s\n", trace,
           r[0].allocs, r[0].frees, dev,
           job_rc ? "; the job did not finish cleanly: the trace stops where it did" : "");
    printf("\n  the GPU would see (PyTorch's caching allocator, docs/model.md section 12):\n\n");
    printf("  %-26s %14s %14s %10s %9s %8s\n", "allocator", "peak alloc", "peak reserved", "cached",
           "segments", "retries");
    for (int i = 0; i < nconf; i++)
      row(stdout, names[i], &r[i]);
    printf("\n  the peak: event %zu of %zu", r[0].peak_event + 1, tr.n);
    if (r[0].peak_mark >= 0) printf(", in '%s'", tr.marks[r[0].peak_mark]);
    if (r[0].peak_module) printf(", allocated by %s", tr.modules[r[0].peak_module]);
    printf("\n");
  }
  bool oom = false;
  for (int i = 0; i < nconf; i++)
    oom |= r[i].oom;
  vl_trace_release(&tr);
  if (job_rc) return job_rc;
  return oom ? VL_EXIT_NOFIT : VL_EXIT_OK;
}
