/* vramledger trace: record every allocation a PyTorch job makes (on any
 * device, a CPU dry run included) and replay it through the model of the
 * CUDA caching allocator. docs/cmd/trace.md. */
#include <errno.h>
#include <fcntl.h>
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
#include "vramledger/alloc.h"
#include "vramledger/caching.h"
#include "vramledger/catalog.h"
#include "util/internal.h"
#include "vramledger/render.h"
#include "trace_time.h"

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
  O_FROM_MARK,
  O_SNAPSHOT,
  O_SNAPSHOT_AT,
  O_FORMAT
};
static const struct cli_opt opts[] = {{"help", false, O_HELP},
                                      {"out", true, O_OUT},
                                      {"replay", true, O_REPLAY},
                                      {"gpu", true, O_GPU},
                                      {"device", true, O_DEVICE},
                                      {"expandable", false, O_EXPANDABLE},
                                      {"max-split-mb", true, O_MSS},
                                      {"gc-threshold", true, O_GC},
                                      {"what-if", false, O_WHATIF},
                                      {"batch", true, O_BATCH},
                                      {"from-mark", true, O_FROM_MARK},
                                      {"snapshot", true, O_SNAPSHOT},
                                      {"snapshot-at", true, O_SNAPSHOT_AT},
                                      {"format", true, O_FORMAT},
                                      {NULL, false, 0}};

#define MAX_BATCHES 8

struct tr {
  bool help, whatif;
  uint64_t batch[MAX_BATCHES]; /* --batch: replays at these micro-batches */
  int n_batch;
  const char *out, *replay, *gpu, *from_mark;
  const char *snapshot; /* --snapshot FILE: the allocator's state as a memory_viz pickle */
  int snapshot_at;      /* 0: at the peak, 1: at the end */
  int device, fmt;
  struct vl_cache_conf conf;
  unsigned sms, threads_per_sm; /* --gpu's, from the catalog; 0: not given or not known */
  char capability[16];          /* --gpu's compute capability ("8.0", "gfx942"); "": none */
  uint64_t workspace_bytes;     /* --gpu's BLAS workspaces a thread (catalog); 0: not known */
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct tr *t = ctx;
  static const char *const devices[] = {"cpu", "cuda", "meta", "all", NULL};
  static const char *const formats[] = {"text", "json", "markdown", NULL};
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
    struct vl__list l;
    if (!vl__list_init(&l, arg, ',')) { /* never cut: a cut size is another size */
      cli_error("--%s is longer than %zu bytes: at most %d batch sizes, comma-separated", flag,
                sizeof l.buf - 1, MAX_BATCHES);
      return VL_EXIT_USAGE;
    }
    l.empty = true; /* an empty size is refused as a number, not taken as the end */
    for (char *tok; !rc && (tok = vl__list_next(&l, NULL));) {
      if (t->n_batch == MAX_BATCHES) {
        cli_error("%s: at most %d batch sizes", flag, MAX_BATCHES);
        return VL_EXIT_USAGE;
      }
      rc = cli_u64(flag, tok, 1, 1u << 20, &t->batch[t->n_batch++]);
    }
    break;
  }
  case O_FROM_MARK: t->from_mark = arg; break;
  case O_SNAPSHOT: t->snapshot = arg; break;
  case O_SNAPSHOT_AT: {
    static const char *const at[] = {"peak", "end", NULL};
    if ((t->snapshot_at = cli_choice(flag, arg, at)) < 0) return VL_EXIT_USAGE;
    break;
  }
  case O_FORMAT:
    if ((t->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
    break;
  default: break;
  }
  return rc;
}

/* The card the tracer stands for on meta or the CPU
 * (python/vramledger/tracer.py): its SMs and threads per SM, which size
 * the scratch of CUDA reductions, its compute capability, and its BLAS
 * workspaces a thread (the catalog's cuBLAS + cuBLASLt bytes, as the bill
 * takes them: the tracer's rule by capability knows no ROCm card). --gpu's
 * from the catalog override the environment's; without it the model's SM
 * count (the reference card's, also the catalog's), unless the environment
 * gives one, and the threads per SM and workspaces of
 * VRAMLEDGER_TRACE_CAPABILITY. In the child, before exec. */
static void tracer_card(const struct tr *t) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  char v[24];
  snprintf(v, sizeof v, "%u", t->sms ? t->sms : ov.sm_count);
  setenv("VRAMLEDGER_TRACE_SMS", v, t->sms != 0);
  if (t->capability[0]) setenv("VRAMLEDGER_TRACE_CAPABILITY", t->capability, 1);
  if (t->workspace_bytes) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)t->workspace_bytes);
    setenv("VRAMLEDGER_TRACE_WORKSPACE_BYTES", v, 1);
  }
  if (!t->threads_per_sm) return;
  snprintf(v, sizeof v, "%u", t->threads_per_sm);
  setenv("VRAMLEDGER_TRACE_THREADS_PER_SM", v, 1);
}

/* Run the job under `vramledger run` with the tracer on. @return the job's
 * exit status (128 + the signal that killed it; 127 when it did not start). */
static int trace_job(const struct tr *t, const char *dir, const char *trace, int argc,
                     const char **argv) {
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
    setenv("VRAMLEDGER_PROBE_EVERY", "1", 0); /* every step: the module of each allocation */
    tracer_card(t);
    if (t->fmt && dup2(2, 1) < 0) _exit(126); /* --format json, markdown: stdout is ours */
    execv(self, (char *const *)av);
    cli_error("cannot run '%s': %s", self, strerror(errno));
    _exit(127);
  }
  free(av);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One of a command and --replay, and a command after '--' when there is
 * one. @return 0 or VL_EXIT_USAGE. */
static int check_mode(const struct tr *t, int argc, int dash) {
  bool has_cmd = dash + 1 < argc;
  if (!t->replay && !has_cmd && dash < argc) {
    cli_error("trace: no command after '--'");
    cli_hint("give the job to trace after it (vramledger trace -- python train.py --device cpu), "
             "or replay a trace: vramledger trace --replay FILE");
    return VL_EXIT_USAGE;
  }
  if (!!t->replay == has_cmd) {
    cli_error("trace needs a command after '--' to run, or --replay FILE (one of them)");
    return VL_EXIT_USAGE;
  }
  return 0;
}

/* How the job ended, for a message: "exited with status 3", "was killed by
 * signal 9" (`run`'s status: 128 + the signal). */
static const char *job_end(int job_rc, char *buf, size_t n) {
  if (job_rc > 128)
    snprintf(buf, n, "was killed by signal %d", job_rc - 128);
  else
    snprintf(buf, n, "exited with status %d", job_rc);
  return buf;
}

/* The run directory must be new: `run` refuses an old record, and an old
 * trace there would be replayed as this job's. @return 0 or an exit code. */
static int check_new_dir(const char *dir, const char *trace) {
  char rec[PATH_MAX];
  snprintf(rec, sizeof rec, "%.4000s/record.jsonl", dir);
  const char *old = access(trace, F_OK) == 0 ? trace : access(rec, F_OK) == 0 ? rec : NULL;
  if (!old) return 0;
  cli_error("'%s' exists: a trace and its record are never overwritten", old);
  if (old == trace)
    cli_hint("give a new --out directory, or replay this trace: vramledger trace --replay %s",
             trace);
  else
    cli_hint("give a new --out directory");
  return VL_EXIT_ERROR;
}

/* The job left no trace file. @return its status, or 1 when it was 0. */
static int no_trace(const char *trace, const char *cmd, int job_rc) {
  char end[64];
  if (!job_rc) {
    cli_error("no trace: '%s' exited with status 0 and wrote no '%s'", cmd, trace);
    cli_hint("is the command Python with PyTorch (the tracer attaches when it imports torch)?");
    return VL_EXIT_ERROR;
  }
  cli_error("no trace: '%s' %s before the tracer wrote '%s'", cmd, job_end(job_rc, end, sizeof end),
            trace);
  if (job_rc == 127)
    cli_hint("status 127 is a command not found: check '%s' and PATH", cmd);
  else if (job_rc == 126)
    cli_hint("status 126 is a command that cannot be executed: check '%s' and its permissions",
             cmd);
  return job_rc;
}

/* The trace holds no allocation. @return the job's status, or 1. */
static int no_allocations(const char *trace, const char *cmd, int job_rc, size_t cut) {
  char end[64], cut_note[96] = "";
  if (cut) snprintf(cut_note, sizeof cut_note, "; its last line was cut (%zu bytes), ignored", cut);
  if (!cmd) {
    cli_error("%s: no allocation events: not an alloc.trace written by vramledger trace "
              "(docs/record.md)%s",
              trace, cut_note);
    cli_hint("trace a job to make one: vramledger trace --out DIR -- python train.py --device cpu "
             "(then DIR/alloc.trace)");
    return VL_EXIT_ERROR;
  }
  cli_error("%s: no allocation events: '%s' %s without allocating a tensor the tracer saw%s", trace,
            cmd, job_end(job_rc, end, sizeof end), cut_note);
  if (job_rc)
    cli_hint("the tracer writes in blocks, so a job that stops early leaves little or nothing: "
             "fix what stopped it (its messages above) and trace it again");
  else
    cli_hint("is the command Python with PyTorch, and does it run its model (the tracer sees "
             "the tensors torch's operators make)?");
  return job_rc ? job_rc : VL_EXIT_ERROR;
}

/* Read and parse the trace; cmd is the traced job's command, NULL for
 * --replay. Says what is wrong on failure. @return 0 or an exit code. */
static int load_trace(const char *trace, const char *cmd, int job_rc, struct vl_trace *tr) {
  if (cmd && access(trace, F_OK) != 0) return no_trace(trace, cmd, job_rc);
  size_t len = 0;
  char *text = cli_read_file(trace, &len);
  if (!text) return job_rc ? job_rc : VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_trace_parse(text, len, tr, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("%s: %s", trace, err.msg);
    if (!cmd && s == VL_EPARSE)
      cli_hint("is it an alloc.trace written by vramledger trace (docs/record.md)? one line an "
               "event; an allocator snapshot becomes one with python3 -m vramledger.history");
    return job_rc ? job_rc : VL_EXIT_ERROR;
  }
  if (tr->per_device[0] + tr->per_device[1] + tr->per_device[2] + tr->per_device[3] == 0) {
    size_t cut = tr->cut_last_line;
    vl_trace_release(tr);
    return no_allocations(trace, cmd, job_rc, cut);
  }
  return 0;
}

static const char *const device_names[] = {"cpu", "cuda", "meta", "other"};

/* The device replayed: --device's; by default cuda if the trace has any,
 * else meta (a dry run on meta tensors), else all (-1).
 * @return 0, or VL_EXIT_USAGE when --device names one with no allocation. */
static int pick_device(const struct tr *t, const struct vl_trace *tr, const char *trace,
                       int *device) {
  if (t->device == -1) {
    *device = tr->per_device[1] ? 1 : tr->per_device[2] ? 2 : -1;
    return 0;
  }
  *device = t->device == -2 ? -1 : t->device;
  if (*device < 0 || tr->per_device[*device]) return 0;
  char has[160] = "";
  size_t k = 0;
  for (int d = 0; d < 4 && k < sizeof has; d++)
    if (tr->per_device[d])
      k += (size_t)snprintf(has + k, sizeof has - k, "%s%zu on %s", k ? ", " : "",
                            tr->per_device[d], device_names[d]);
  cli_error("%s: no allocations on device %s (the trace has %s)", trace, device_names[*device],
            has);
  cli_hint("replay a device the trace has, or --device all");
  return VL_EXIT_USAGE;
}

/* --batch scales by the traced batch: the trace must say it.
 * @return 0 or VL_EXIT_USAGE. */
static int check_batch(const struct tr *t, const struct vl_trace *tr, const char *trace) {
  if (!t->n_batch || tr->batch) return 0;
  cli_error("%s: the trace does not say its batch size, so --batch cannot scale it", trace);
  cli_hint("trace a job whose micro-batch is 2 or more (the tracer learns it from the token "
           "ids or the first input of the model's forward) with this version of vramledger");
  return VL_EXIT_USAGE;
}

enum { MAX_REPLAYS = 4 + MAX_BATCHES };
/* The replays asked for: allocator settings, then one per --batch under
 * the first of them. */
struct plan {
  struct vl_cache_conf confs[MAX_REPLAYS];
  const char *names[MAX_REPLAYS];
  char batch_names[MAX_BATCHES][40];
  uint64_t batches[MAX_REPLAYS]; /* 0: the traced batch */
  int n, n_settings;
};

static void plan_replays(const struct tr *t, uint64_t traced_batch, struct plan *p) {
  memset(p, 0, sizeof *p);
  p->confs[0] = t->conf;
  p->names[0] = "as given";
  p->n = 1;
  if (t->whatif) {
    p->confs[0] = (struct vl_cache_conf){.device_bytes = t->conf.device_bytes};
    p->names[0] = "default";
    p->confs[1] = p->confs[0];
    p->confs[1].expandable = true;
    p->names[1] = "expandable_segments";
    p->confs[2] = p->confs[0];
    p->confs[2].max_split_size = 128ull << 20;
    p->names[2] = "max_split_size_mb:128";
    p->confs[3] = p->confs[0];
    p->confs[3].gc_threshold = 0.6;
    p->names[3] = "garbage_collection_0.6";
    p->n = 4;
  } else if (!t->conf.expandable && !t->conf.max_split_size && !t->conf.gc_threshold) {
    p->names[0] = "default";
  }
  p->n_settings = p->n;
  for (int k = 0; k < t->n_batch; k++, p->n++) {
    p->confs[p->n] = p->confs[0];
    p->batches[p->n] = t->batch[k];
    snprintf(p->batch_names[k], sizeof p->batch_names[k], "batch %llu (traced %llu)",
             (unsigned long long)t->batch[k], (unsigned long long)traced_batch);
    p->names[p->n] = p->batch_names[k];
  }
}

/* Replay, and show the replays with the probe's bill of the job's run
 * (dir; NULL for --replay). @return the job's status when it failed, else
 * VL_EXIT_NOFIT when a replay ran out of memory, else 0. */
/* --snapshot FILE: the first replay's allocator at its peak (or at the
 * end) as the pickle torch.cuda.memory._dump_snapshot() writes, for
 * pytorch.org/memory_viz; a new file, never one that exists. */
static int write_snapshot(const struct tr *t, const struct vl_trace *tr, int device,
                          const struct vl_cache_conf *conf, const struct vl_replay *r) {
  size_t at = t->snapshot_at ? (tr->n ? tr->n - 1 : 0) : r->peak_event;
  struct vl_snapshot s;
  vl_status st = vl_trace_snapshot(tr, device, conf, 1.0, at, &s);
  if (st != VL_OK && st != VL_ERANGE) {
    cli_error("--snapshot: %s", vl_strerror(st));
    return VL_EXIT_ERROR;
  }
  int fd = open(t->snapshot, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f) {
    cli_error("cannot create '%s': %s", t->snapshot, strerror(errno));
    if (errno == EEXIST)
      cli_hint("give --snapshot a new file: an existing one is never overwritten");
    if (fd >= 0) close(fd);
    vl_snapshot_release(&s);
    return VL_EXIT_ERROR;
  }
  errno = 0;
  int w = vl_render_snapshot(f, &s);
  if (fflush(f) != 0 || ferror(f)) w = -1;
  int e = errno;
  if (fclose(f) != 0) w = -1;
  vl_snapshot_release(&s);
  if (w != 0) { /* a cut pickle is no snapshot: removed, not left to be read */
    unlink(t->snapshot);
    cli_error("cannot write '%s': %s; the partial file is removed", t->snapshot,
              strerror(e       ? e
                       : errno ? errno
                               : EIO));
    return VL_EXIT_ERROR;
  }
  return 0;
}

static int replay_and_show(const struct tr *t, const struct vl_trace *tr, const char *trace,
                           int device, const char *dir, int job_rc) {
  struct plan p;
  plan_replays(t, tr->batch, &p);
  struct vl_replay r[MAX_REPLAYS];
  bool oom = false;
  long from = t->from_mark ? vl_trace_find_mark(tr, t->from_mark) : -1;
  if (t->from_mark && from < 0) {
    cli_error("%s: --from-mark '%s': the trace has no such mark", trace, t->from_mark);
    cli_hint(tr->n_marks
                 ? "its first mark is '%s' (the probe's are 'forward 1', 'backward 1', ...; "
                   "vramledger.mark(NAME) adds one)"
                 : "the trace has no marks: call vramledger.mark(NAME) in the job%s",
             tr->n_marks ? tr->marks[0] : "");
    return VL_EXIT_USAGE;
  }
  for (int i = 0; i < p.n; i++) {
    double scale = i < p.n_settings ? 1.0 : (double)p.batches[i] / (double)tr->batch;
    vl_status s = vl_trace_replay_from(tr, device, &p.confs[i], scale, from, &r[i]);
    if (s != VL_OK) {
      cli_error("replay: %s", vl_strerror(s));
      return VL_EXIT_ERROR;
    }
    oom |= r[i].oom;
  }
  const char *dev = device == 1 ? "cuda" : device == 0 ? "cpu" : device == 2 ? "meta" : "all";
  if (t->snapshot && write_snapshot(t, tr, device, &p.confs[0], &r[0]) != 0) return VL_EXIT_ERROR;
  struct vl_live_at live;
  if (vl_trace_live_at(tr, device, 1.0, r[0].peak_event, &live) != VL_OK) {
    cli_error("replay: %s", vl_strerror(VL_ENOMEM));
    return VL_EXIT_ERROR;
  }
  struct vl_trace_view v = {trace,     dev,  tr,           job_rc, p.names, r,    p.n,
                            p.batches, NULL, t->from_mark, &live,  NULL,    NULL, 0};
  struct cli_run *run = NULL; /* the probe's bill of the job, from its record */
  int lrc = 0;
  if (dir && (run = calloc(1, sizeof *run)) == NULL) cli_error("out of memory");
  if (dir && (!run || (lrc = cli_load_run(dir, run)) != 0)) { /* said */
    free(run);
    vl_trace_live_release(&live);
    cli_hint("the trace is kept: vramledger trace --replay %s", trace);
    return job_rc ? job_rc : lrc ? lrc : VL_EXIT_ERROR;
  }
  if (run) v.fw = &run->fw;
  struct vl_trace_time tt; /* --gpu: the traced step's time */
  char gpu[64] = "";
  int trc = trace_time(trace, t->gpu, &tt, gpu, sizeof gpu, &v.ops);
  if (trc == 0) v.time = &tt, v.gpu = gpu;
  if (trc > 1) {
    if (run) vl_record_release(&run->rec);
    free(run);
    vl_trace_live_release(&live);
    return trc;
  }
  if ((t->fmt == 2 ? vl_render_trace_md(stdout, &v) : vl_render_trace(stdout, t->fmt == 1, &v)) !=
      0)
    cli_error("cannot write the output");
  if (run) {
    vl_record_release(&run->rec);
    free(run);
  }
  vl_trace_live_release(&live);
  if (job_rc) return job_rc;
  return oom ? VL_EXIT_NOFIT : VL_EXIT_OK;
}

/* --gpu: the card's memory, SMs and threads per SM, compute capability
 * and BLAS workspaces, from the catalog as estimate reads it. @return 0 or
 * an exit code. */
static int gpu_memory(struct tr *t) {
  struct est e;
  est_init(&e);
  e.gpu = t->gpu;
  struct vl_catalog cat;
  const struct vl_gpu *g;
  int rc = est_gpu(&e, &cat, &g);
  if (rc) return rc;
  t->conf.device_bytes = g->memory_bytes;
  t->sms = g->sm_count;
  t->threads_per_sm = g->max_threads_per_sm;
  snprintf(t->capability, sizeof t->capability, "%s", g->compute_capability);
  struct vl_overheads ov; /* a thread's workspaces as the bill holds them on the card */
  vl_overheads_default(&ov);
  vl_overheads_for_gpu(&ov, g);
  if (g->cublas_workspace_bytes) t->workspace_bytes = vl_workspace_thread_bytes(&ov);
  vl_catalog_release(&cat);
  return 0;
}

/* The run directory: --out, else runs/<UTC time>-trace. */
static void run_dir(const struct tr *t, char *dir, size_t n) {
  if (t->out) {
    snprintf(dir, n, "%s", t->out);
    return;
  }
  char stamp[32];
  time_t now = time(NULL);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&now));
  snprintf(dir, n, "runs/%s-trace", stamp);
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
  if ((rc = check_mode(&t, argc, dash)) || (t.gpu && (rc = gpu_memory(&t)))) return rc;
  char dir[PATH_MAX], trace[PATH_MAX];
  const char *cmd = t.replay ? NULL : argv[dash + 1];
  int job_rc = 0;
  if (cmd) {
    run_dir(&t, dir, sizeof dir);
    snprintf(trace, sizeof trace, "%.4000s/alloc.trace", dir);
    if ((rc = check_new_dir(dir, trace))) return rc;
    job_rc = trace_job(&t, dir, trace, argc - dash - 1, argv + dash + 1);
  } else {
    snprintf(trace, sizeof trace, "%s", t.replay);
  }
  struct vl_trace tr;
  if ((rc = load_trace(trace, cmd, job_rc, &tr))) return rc;
  int device = -1;
  if (!(rc = pick_device(&t, &tr, trace, &device)) && !(rc = check_batch(&t, &tr, trace)))
    rc = replay_and_show(&t, &tr, trace, device, cmd ? dir : NULL, job_rc);
  vl_trace_release(&tr);
  return rc;
}
