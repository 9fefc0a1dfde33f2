/* vramledger run: run a command unchanged and record what it held on the
 * GPU: NVML for the job's process tree, the interposer's live allocations,
 * phase marks. docs/cmd/run.md is the manual. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "guard.h"
#include "commands.h"
#include "vramledger/commitment.h"
#include "vramledger/counters.h"
#include "vramledger/nvml.h"
#include "vramledger/record.h"

enum {
  O_HELP,
  O_OUT,
  O_INTERVAL,
  O_NO_PRELOAD,
  O_NO_PROBE,
  O_SNAPSHOT,
  O_QUIET,
  O_COMMITMENT,
  O_TRIGGER_SIGNAL
};
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},
    {"out", true, O_OUT},
    {"interval-ms", true, O_INTERVAL},
    {"no-preload", false, O_NO_PRELOAD},
    {"no-probe", false, O_NO_PROBE},
    {"snapshot", false, O_SNAPSHOT},
    {"quiet", false, O_QUIET},
    {"commitment", true, O_COMMITMENT},
    {"trigger-signal", true, O_TRIGGER_SIGNAL},
    {NULL, false, 0},
};

struct runopt {
  bool help, no_preload, no_probe, snapshot, quiet;
  const char *out, *commitment;
  int trigger_signal;
  uint64_t interval_ms;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct runopt *o = ctx;
  switch (id) {
  case O_HELP: o->help = true; return 0;
  case O_OUT: o->out = arg; return 0;
  case O_INTERVAL: return cli_u64(flag, arg, 1, 60000, &o->interval_ms);
  case O_NO_PRELOAD: o->no_preload = true; return 0;
  case O_NO_PROBE: o->no_probe = true; return 0;
  case O_SNAPSHOT: o->snapshot = true; return 0;
  case O_QUIET: o->quiet = true; return 0;
  case O_COMMITMENT: o->commitment = arg; return 0;
  case O_TRIGGER_SIGNAL: {
    static const char *const names[] = {"USR1", "USR2", "HUP", "INT", "TERM", NULL};
    static const int sigs[] = {SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGTERM};
    const char *n = strncmp(arg, "SIG", 3) == 0 ? arg + 3 : arg;
    int k = cli_choice(flag, n, names);
    if (k < 0) return VL_EXIT_USAGE;
    o->trigger_signal = sigs[k];
    return 0;
  }
  default: return 0;
  }
}

static int put(json_t *o);
static int trigger_signal; /* --trigger-signal: sent to the job when a trigger fires */
static void tell_job(void);

/* A trigger fired: its event goes into DIR/fallback (one line, appended:
 * the job reads it through vramledger.fallback_requested()) and into the
 * record; the job is signalled when asked for; never stopped. Each
 * trigger fires once per run. */
static void pull(const char *fb_path, json_t *e) {
  char *line = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
  int fd = open(fb_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  size_t n = line ? strlen(line) : 0;
  char *buf = line ? malloc(n + 2) : NULL;
  if (fd >= 0 && buf) {
    memcpy(buf, line, n);
    buf[n] = '\n';
    if (write(fd, buf, n + 1) != (ssize_t)(n + 1)) {
      /* the record below still has it */
    }
  }
  free(buf);
  if (fd >= 0) close(fd);
  free(line);
  put(e);
  tell_job();
}

static json_t *trigger_event(uint64_t t, const char *name) {
  json_t *e = json_object();
  json_object_set_new(e, "type", json_string("trigger"));
  json_object_set_new(e, "t_ns", json_integer((json_int_t)t));
  json_object_set_new(e, "trigger", json_string(name));
  return e;
}

/* The peak trigger: the job's memory on one GPU over the commitment's. */
static void fire(const char *fb_path, uint64_t t, uint64_t bytes, uint64_t guard,
                 const char *commitment) {
  json_t *e = trigger_event(t, "peak_over_commitment");
  json_object_set_new(e, "bytes", json_integer((json_int_t)bytes));
  json_object_set_new(e, "threshold_bytes", json_integer((json_int_t)guard));
  pull(fb_path, e);
  fprintf(stderr,
          "vramledger: trigger: the job holds %.2f GiB on one GPU, over the %.2f GiB that %s "
          "allows; its fallback is due (vramledger.fallback_requested() is now true)\n",
          (double)bytes / (double)(1ull << 30), (double)guard / (double)(1ull << 30), commitment);
}

/* The throughput trigger: the job's median tokens/s over its last steady
 * steps under the commitment's floor. */
static void fire_tput(const char *fb_path, uint64_t t, double tps, double floor,
                      const char *commitment) {
  json_t *e = trigger_event(t, "throughput_under_sla");
  json_object_set_new(e, "tokens_per_s", json_real(tps));
  json_object_set_new(e, "threshold_tokens_per_s", json_real(floor));
  pull(fb_path, e);
  fprintf(stderr,
          "vramledger: trigger: the job makes %.0f tokens/s, under the %.0f that %s allows; "
          "its fallback is due (vramledger.fallback_requested() is now true)\n",
          tps, floor, commitment);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the record file ------------------------------------------------------ */

static int record_fd = -1;

/* One line, newline included, in one write: whole lines beside the
 * interposer's and the probe's. */
static int put_line(const char *line, size_t n) {
  ssize_t w;
  do {
    w = write(record_fd, line, n);
  } while (w < 0 && errno == EINTR);
  return w == (ssize_t)n ? 0 : -1;
}

/* Sample lines wait here and go out together every SAMPLE_FLUSH_NS (one
 * write instead of one a tick: in a profile on the development machine the
 * writes were a sixth of the sampler's time; no gain measured yet,
 * bench/results/2026-11-29-sampler-cost-dev.md).
 * Each line stays whole; the record's other writers (the interposer, the
 * probe) may land between batches, so lines of different writers are up
 * to that much out of time order (readers go by t_ns); a kill -9 of
 * vramledger loses at most that much of its samples. */
#define SAMPLE_FLUSH_NS 100000000ull
static char sample_buf[1 << 16];
static size_t sample_len;

static void flush_samples(void) {
  if (sample_len) put_line(sample_buf, sample_len);
  sample_len = 0;
}

static void put_sample(const char *line, size_t n) {
  if (sample_len + n > sizeof sample_buf) flush_samples();
  if (n > sizeof sample_buf) {
    put_line(line, n);
    return;
  }
  memcpy(sample_buf + sample_len, line, n);
  sample_len += n;
}

static int put(json_t *o) {
  flush_samples(); /* vramledger's own lines stay in order */
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!s) return -1;
  size_t n = strlen(s);
  char *line = malloc(n + 2);
  if (!line) {
    free(s);
    return -1;
  }
  memcpy(line, s, n);
  line[n] = '\n';
  free(s);
  int r = put_line(line, n + 1);
  free(line);
  return r;
}

static int mkdir_private(const char *dir) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
  return chmod(buf, 0700);
}

/* ---- the job's process tree ---------------------------------------------- */

static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  int ppid;
  char state;
  if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

/* pid -> member of the job's tree; cached, as NVML lists the same pids at
 * every tick. */
#define TREE_CACHE 1024
struct tree_entry {
  pid_t pid;
  bool member;
};
static struct tree_entry tree_cache[TREE_CACHE];
static unsigned tree_n;

static bool in_tree(pid_t pid, pid_t root) {
  for (unsigned i = 0; i < tree_n; i++)
    if (tree_cache[i].pid == pid) return tree_cache[i].member;
  bool member = false;
  pid_t p = pid;
  for (int depth = 0; depth < 64 && p > 1; depth++) {
    if (p == root) {
      member = true;
      break;
    }
    p = parent_of(p);
  }
  if (tree_n < TREE_CACHE) tree_cache[tree_n++] = (struct tree_entry){pid, member};
  return member;
}

/* ---- signals --------------------------------------------------------------- */

static volatile sig_atomic_t child_pid;

static void tell_job(void) {
  if (trigger_signal && child_pid > 0) kill((pid_t)child_pid, trigger_signal);
}

/* The job ended (or stopped being our child): the sampler reaps it at its
 * next tick instead of asking waitpid at every tick. */
static volatile sig_atomic_t child_exited;
static void on_child(int sig) {
  (void)sig;
  child_exited = 1;
}

/* vramledger's own CPU time so far, user + system, ns */
static uint64_t self_cpu_ns(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* this thread's CPU time: what an NVML reading costs */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void forward(int sig, siginfo_t *info, void *uc) {
  (void)uc;
  /* a terminal's ^C already reached the child (same process group); a
   * kill aimed at us is passed on */
  if ((sig == SIGINT || sig == SIGQUIT) && info && info->si_code > 0) return;
  if (child_pid > 0) kill((pid_t)child_pid, sig);
}

/* ---- GPUs --------------------------------------------------------------- */

/* NVML indices the job may use: CUDA_VISIBLE_DEVICES (indices or UUID
 * prefixes), else all. */
static unsigned visible_gpus(struct vl_nvml *nv, const struct vl_gpu_sample *all, unsigned n,
                             unsigned *idx) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  unsigned k = 0;
  if (!v) {
    for (unsigned i = 0; i < n; i++)
      idx[k++] = i;
    return k;
  }
  (void)nv;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *tok = buf, *next; tok && *tok && k < n; tok = next) {
    next = strchr(tok, ',');
    if (next) *next++ = '\0';
    char *end;
    long i = strtol(tok, &end, 10);
    if (*tok && !*end && i >= 0 && (unsigned long)i < n) {
      idx[k++] = (unsigned)i;
      continue;
    }
    for (unsigned g = 0; g < n; g++)
      if (strncmp(all[g].uuid, tok, strlen(tok)) == 0 && strlen(tok) >= 5) {
        idx[k++] = g;
        break;
      }
  }
  return k;
}

/* Live bytes of the job's processes. A process that exited took its
 * allocations with it (the driver frees them): its slot no longer counts,
 * and is handed back for the next process once its peak is kept. */
static uint64_t read_counters(struct vl_counters *c, uint64_t *peak, bool reap, uint64_t *ops) {
  uint64_t live = 0;
  if (ops) *ops = 0;
  for (unsigned i = 0; i < VL_COUNTERS_SLOTS; i++) {
    struct vl_counters_slot *s = &c->slot[i];
    uint32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
    if (!pid) continue;
    uint64_t p = __atomic_load_n(&s->peak, __ATOMIC_RELAXED);
    if (p > *peak) *peak = p;
    if (!reap || kill((pid_t)pid, 0) == 0 || errno == EPERM) {
      live += __atomic_load_n(&s->live, __ATOMIC_RELAXED);
      if (ops)
        *ops += __atomic_load_n(&s->allocs, __ATOMIC_RELAXED) +
                __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
      continue;
    }
    __atomic_store_n(&s->live, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->peak, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->frees, 0, __ATOMIC_RELAXED);
    __atomic_compare_exchange_n(&s->pid, &pid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  return live;
}

/* What NVML said at its last reading, put into every sample until the
 * next: per GPU its used bytes and the job's, the job's processes, the
 * job's total, other processes' total, the job on its fullest GPU. NVML's
 * queries are most of the sampler's cost; with the interposer in the job,
 * NVML is read again when the job's driver-allocated bytes pass their
 * highest or NVML_MAX_AGE_NS passed, so a new peak is read at the tick it
 * happens and a quiet job costs ten readings a second. */
#define NVML_MAX_AGE_NS 100000000ull
/* the periodic readings may take this share of a core at most: when a
 * reading costs more than 0.5 ms of CPU (a slow period of the machine:
 * 0.65-0.71 ms seen on the H200 host), they come less often than every
 * NVML_MAX_AGE_NS */
#define NVML_CPU_SHARE 0.005
#define NVML_MIN_GAP_NS 20000000ull
struct nvml_view {
  char *gpus, *procs; /* their JSON arrays, rendered once a reading (json_dumps) */
  uint64_t tree, other, gpu_max;
  unsigned tree_procs;
  uint64_t t_ns;    /* when read; 0: never */
  uint64_t high;    /* the most the counters showed at a reading */
  uint64_t reads;   /* readings so far */
  uint64_t cpu_ns;  /* the CPU time they took */
  uint64_t cost_ns; /* one reading's, a moving average */
};

/* Is a reading due at t? Every tick without the interposer (`blind`: NVML
 * is all there is); with it, when the job's driver-allocated bytes pass the
 * most they were at any reading (a new peak of process memory can only come
 * from there: the rest, context and libraries, changes slowly), at most
 * every NVML_MIN_GAP_NS (a spike still shows in two readings before it is
 * 50 ms old, and the counters, read every tick, hold its exact peak); and
 * every NVML_MAX_AGE_NS regardless, longer when a reading costs more than
 * NVML_CPU_SHARE allows. A reading costs 0.12-0.71 ms of CPU (H200:
 * bench/results/2026-11-29-h200-session5/): reading every tick, then every
 * 20 ms, while Python imported its libraries (nothing allocated yet: a
 * context appears once and stays, the periodic reading sees it) was most of
 * the sampler's cost at 100 Hz, and a job that allocates and frees every
 * 20 ms cost twice a quiet one while any movement triggered a reading. */
static bool nvml_due(const struct nvml_view *v, uint64_t t, bool blind, uint64_t ops,
                     uint64_t alloc) {
  uint64_t age = t - v->t_ns;
  uint64_t max_age = (uint64_t)((double)v->cost_ns / NVML_CPU_SHARE);
  if (max_age < NVML_MAX_AGE_NS) max_age = NVML_MAX_AGE_NS;
  bool higher = ops > 0 && alloc > v->high;
  return blind || age >= max_age || (higher && age >= NVML_MIN_GAP_NS);
}

static void nvml_read(struct vl_nvml *nv, const unsigned *vis, unsigned n_vis, pid_t root,
                      struct nvml_view *v) {
  free(v->gpus);
  free(v->procs);
  json_t *gpus = json_array(), *procs = json_array();
  v->tree = v->other = v->gpu_max = 0;
  v->tree_procs = 0;
  for (unsigned k = 0; k < n_vis; k++) {
    struct vl_gpu_sample g;
    if (vl_nvml_sample(nv, vis[k], &g) != VL_OK) continue;
    struct vl_proc_sample ps[256];
    unsigned np = 0;
    uint64_t gtree = 0;
    if (vl_nvml_processes(nv, vis[k], ps, 256, &np) == VL_OK) {
      for (unsigned i = 0; i < np && i < 256; i++) {
        uint64_t b = ps[i].used_bytes == UINT64_MAX ? 0 : ps[i].used_bytes;
        if (in_tree((pid_t)ps[i].pid, root)) {
          gtree += b;
          v->tree_procs++;
          json_t *e = json_object();
          json_object_set_new(e, "pid", json_integer(ps[i].pid));
          json_object_set_new(e, "gpu", json_integer(vis[k]));
          json_object_set_new(e, "bytes", json_integer((json_int_t)b));
          json_array_append_new(procs, e);
        } else {
          v->other += b;
        }
      }
    }
    v->tree += gtree;
    if (gtree > v->gpu_max) v->gpu_max = gtree;
    json_t *e = json_object();
    json_object_set_new(e, "i", json_integer(vis[k]));
    json_object_set_new(e, "used", json_integer((json_int_t)g.used_bytes));
    json_object_set_new(e, "tree", json_integer((json_int_t)gtree));
    if (g.util_gpu_pct != UINT32_MAX) json_object_set_new(e, "util", json_integer(g.util_gpu_pct));
    json_array_append_new(gpus, e);
  }
  v->gpus = json_dumps(gpus, JSON_COMPACT | JSON_PRESERVE_ORDER);
  v->procs = json_dumps(procs, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(gpus);
  json_decref(procs);
}

static const char *preload_path(void) {
  const char *env = getenv("VRAMLEDGER_PRELOAD");
  if (env && *env) return env;
  return VL_PRELOAD_PATH;
}

/* The probe's sitecustomize and the vramledger package first on the job's
 * PYTHONPATH (the job's own entries follow). In the child, before exec. */
static void python_path(void) {
  const char *py = cli_python_dir(), *cur = getenv("PYTHONPATH");
  char buf[PATH_MAX * 4];
  int n =
      snprintf(buf, sizeof buf, "%s/site:%s%s%s", py, py, cur && *cur ? ":" : "", cur ? cur : "");
  if (n > 0 && (size_t)n < sizeof buf) setenv("PYTHONPATH", buf, 1);
}

static char *basename_of(const char *p) {
  const char *s = strrchr(p, '/');
  return (char *)(s ? s + 1 : p);
}

/* The counters file the interposer writes into, mapped; NULL if it cannot
 * be made (the run goes on with NVML alone). */
static struct vl_counters *map_counters(const char *path) {
  struct vl_counters *ctr = NULL;
  int cfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (cfd >= 0 && ftruncate(cfd, sizeof *ctr) == 0) {
    void *p = mmap(NULL, sizeof *ctr, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
    if (p != MAP_FAILED) {
      ctr = p;
      ctr->version = VL_COUNTERS_VERSION;
      ctr->slots = VL_COUNTERS_SLOTS;
      __atomic_store_n(&ctr->magic, VL_COUNTERS_MAGIC, __ATOMIC_RELEASE);
    }
  }
  if (cfd >= 0) close(cfd);
  return ctr;
}

/* The record's first event: the command, the host, NVML's state, the GPUs
 * the job can see. */
static json_t *meta_event(uint64_t start_ns, const struct timespec *wall, const char **cmd,
                          int cmd_argc, unsigned interval_ms, const char *nvml_state,
                          struct vl_nvml *nv, const struct vl_gpu_sample *gs, const unsigned *vis,
                          unsigned n_vis) {
  json_t *meta = json_object();
  json_object_set_new(meta, "type", json_string("meta"));
  json_object_set_new(meta, "schema", json_string(VL_RECORD_SCHEMA));
  json_object_set_new(meta, "t_ns", json_integer((json_int_t)start_ns));
  json_object_set_new(meta, "start_unix_ms",
                      json_integer((json_int_t)wall->tv_sec * 1000 + wall->tv_nsec / 1000000));
  json_t *jc = json_array();
  for (int i = 0; i < cmd_argc; i++)
    json_array_append_new(jc, json_string(cmd[i]));
  json_object_set_new(meta, "command", jc);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_object_set_new(meta, "host", json_string(host));
  json_object_set_new(meta, "interval_ms", json_integer((json_int_t)interval_ms));
  json_object_set_new(meta, "nvml", json_string(nvml_state));
  json_object_set_new(meta, "driver", json_string(vl_nvml_driver(nv)));
  if (vl_nvml_cuda_driver(nv)) {
    char cuda[16];
    snprintf(cuda, sizeof cuda, "%d.%d", vl_nvml_cuda_driver(nv) / 1000,
             vl_nvml_cuda_driver(nv) % 1000 / 10);
    json_object_set_new(meta, "cuda_driver", json_string(cuda));
  }
  json_t *jg = json_array();
  for (unsigned k = 0; k < n_vis; k++) {
    const struct vl_gpu_sample *g = &gs[vis[k]];
    json_t *e = json_object();
    json_object_set_new(e, "index", json_integer(vis[k]));
    json_object_set_new(e, "name", json_string(g->name));
    json_object_set_new(e, "uuid", json_string(g->uuid));
    json_object_set_new(e, "total_bytes", json_integer((json_int_t)g->total_bytes));
    json_array_append_new(jg, e);
  }
  json_object_set_new(meta, "gpus", jg);
  json_object_set_new(meta, "vramledger", json_string(VL_VERSION));
  return meta;
}

/* The sampling loop's inputs and what it found. */
struct sampler {
  /* in */
  pid_t pid;
  struct vl_counters *ctr; /* the interposer's counters, or NULL */
  struct vl_nvml *nv;      /* or NULL */
  const unsigned *vis;
  unsigned n_vis;
  bool blind; /* no interposer: NVML is all there is */
  unsigned interval_ms;
  uint64_t start_ns;
  uint64_t guard;    /* the commitment's peak trigger (bytes), 0: none */
  double tput_floor; /* its throughput trigger (tokens/s), 0: none */
  struct tput_watch *tw;
  const char *fb_path, *commitment;
  /* out */
  int status; /* waitpid's */
  uint64_t slot_peak, peak_tree, peak_t, peak_alloc, ctx_at_peak;
  unsigned peak_procs;
  uint64_t n_samples;
  uint64_t loop_cpu0, loop_t0, loop_end;
  struct nvml_view nvv;
};

/* One sample line, formatted here: a tick renders only its numbers (the
 * GPU and process arrays are rendered once a reading). */
static void put_sample_line(struct sampler *s, uint64_t t, bool reused, uint64_t alloc, char **line,
                            size_t *line_cap) {
  const struct nvml_view *v = &s->nvv;
  const char *g = s->nv && v->gpus ? v->gpus : NULL, *pr = s->nv && v->procs ? v->procs : NULL;
  size_t cap = 320 + (g ? strlen(g) : 0) + (pr ? strlen(pr) : 0);
  if (cap > *line_cap) {
    char *nl = realloc(*line, cap);
    if (!nl) return;
    *line = nl;
    *line_cap = cap;
  }
  char *l = *line;
  size_t lc = *line_cap;
  int n = snprintf(l, lc, "{\"type\":\"sample\",\"t_ns\":%llu", (unsigned long long)t);
  if (reused)
    n += snprintf(l + n, lc - (size_t)n, ",\"nvml_t_ns\":%llu", (unsigned long long)v->t_ns);
  if (g && pr) n += snprintf(l + n, lc - (size_t)n, ",\"gpus\":%s,\"procs\":%s", g, pr);
  n += snprintf(l + n, lc - (size_t)n,
                ",\"tree_bytes\":%llu,\"tree_procs\":%u,\"other_bytes\":%llu,"
                "\"cuda_alloc_bytes\":%llu}\n",
                (unsigned long long)v->tree, v->tree_procs, (unsigned long long)v->other,
                (unsigned long long)alloc);
  put_sample(l, (size_t)n);
  s->n_samples++;
}

/* Sample every interval until the child exits (one last sample then):
 * the interposer's counters every tick, NVML when nvml_due() says, the
 * guard's triggers, the peaks. */
static void sample_until_exit(struct sampler *s) {
  bool done = false, fired = false, tput_fired = false;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t last_reap = 0, last_wait = 0, last_flush = 0;
  char *line = NULL;
  size_t line_cap = 0;
  s->loop_cpu0 = self_cpu_ns();
  s->loop_t0 = now_ns();
  while (!done) {
    uint64_t t = now_ns();
    /* waitpid when SIGCHLD said so, and every 100 ms in case it was lost */
    if (child_exited || t - last_wait >= NVML_MAX_AGE_NS) {
      child_exited = 0;
      last_wait = t;
      pid_t w = waitpid(s->pid, &s->status, WNOHANG);
      if (w == s->pid) done = true; /* one last sample below */
    }
    uint64_t alloc = 0, ops = 0;
    /* exited processes are looked for every 100 ms (a kill(0) each) */
    bool reap = done || t - last_reap >= NVML_MAX_AGE_NS;
    if (reap) last_reap = t;
    if (s->ctr) alloc = read_counters(s->ctr, &s->slot_peak, reap, &ops);
    bool reused = false;
    struct nvml_view *v = &s->nvv;
    if (s->nv) {
      if (done || nvml_due(v, t, s->blind, ops, alloc)) {
        uint64_t c0 = thread_cpu_ns();
        nvml_read(s->nv, s->vis, s->n_vis, s->pid, v);
        uint64_t cost = thread_cpu_ns() - c0;
        v->cpu_ns += cost;
        v->cost_ns = v->reads++ ? (v->cost_ns * 7 + cost) / 8 : cost;
        v->t_ns = t;
        if (alloc > v->high) v->high = alloc;
      } else {
        reused = true;
      }
    }
    /* NVML and the counters are read a moment apart: an allocation made in
     * between would show in NVML but not in the counters and be taken for
     * context. Read the counters again and keep the larger. */
    if (s->ctr) {
      uint64_t again = read_counters(s->ctr, &s->slot_peak, false, NULL); /* reaped a moment ago */
      if (again > alloc) alloc = again;
    }
    put_sample_line(s, t, reused, alloc, &line, &line_cap);
    if (done || t - last_flush >= SAMPLE_FLUSH_NS) {
      flush_samples();
      last_flush = t;
    }
    /* without NVML the driver-allocated bytes stand in (they are less) */
    uint64_t held = s->nv ? v->gpu_max : alloc;
    if (s->guard && !fired && held > s->guard) {
      fired = true;
      fire(s->fb_path, t, held, s->guard, s->commitment);
    }
    if (s->tput_floor > 0 && !tput_fired && s->tw->fd >= 0) {
      double tps = 0;
      tput_poll(s->tw, &tps);
      if (tps > 0 && tps < s->tput_floor) {
        tput_fired = true;
        fire_tput(s->fb_path, t, tps, s->tput_floor, s->commitment);
      }
    }
    if (v->tree > s->peak_tree) {
      s->peak_tree = v->tree;
      s->peak_t = t - s->start_ns;
      s->ctx_at_peak = v->tree > alloc ? v->tree - alloc : 0;
      s->peak_procs = v->tree_procs;
    }
    if (alloc > s->peak_alloc) s->peak_alloc = alloc;
    if (done) break;
    next.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
    next.tv_sec += (time_t)(s->interval_ms / 1000) + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
    }
  }
  s->loop_end = now_ns();
  free(line);
}

/* The exit event: the status, and what watching cost (vramledger's own CPU
 * time, not the job's: all of it, NVML's start included, and the sampling
 * loop's alone). */
static void put_exit(const struct sampler *s, int code) {
  json_t *ex = json_object();
  uint64_t end = now_ns();
  json_object_set_new(ex, "type", json_string("exit"));
  json_object_set_new(ex, "t_ns", json_integer((json_int_t)end));
  json_object_set_new(ex, "status", json_integer(code));
  if (WIFSIGNALED(s->status)) json_object_set_new(ex, "signal", json_integer(WTERMSIG(s->status)));
  json_object_set_new(ex, "wall_ns", json_integer((json_int_t)(end - s->start_ns)));
  uint64_t cpu = self_cpu_ns();
  json_object_set_new(ex, "sampler_cpu_ns", json_integer((json_int_t)cpu));
  json_object_set_new(ex, "sampling_cpu_ns", json_integer((json_int_t)(cpu - s->loop_cpu0)));
  json_object_set_new(ex, "sampling_wall_ns", json_integer((json_int_t)(s->loop_end - s->loop_t0)));
  json_object_set_new(ex, "samples", json_integer((json_int_t)s->n_samples));
  json_object_set_new(ex, "nvml_reads", json_integer((json_int_t)s->nvv.reads));
  json_object_set_new(ex, "nvml_cpu_ns", json_integer((json_int_t)s->nvv.cpu_ns));
  put(ex);
}

int cmd_run(int argc, const char **argv) {
  int dash = -1;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--") == 0) {
      dash = i;
      break;
    }
  struct runopt o = {.interval_ms = 100};
  int rc = cli_parse(dash < 0 ? argc : dash, argv, opts, on_opt, &o);
  if (rc) return rc;
  if (o.help) {
    fputs(vl_help_run, stdout);
    return VL_EXIT_OK;
  }
  if (dash < 0 || dash + 1 >= argc) {
    cli_error("run needs a command after '--'");
    cli_hint("for example: vramledger run -- python train.py --lr 3e-4");
    return VL_EXIT_USAGE;
  }
  const char **cmd = argv + dash + 1;
  int cmd_argc = argc - dash - 1;
  if (o.trigger_signal && !o.commitment) {
    cli_error("--trigger-signal goes with --commitment (the triggers are the commitment's)");
    return VL_EXIT_USAGE;
  }
  trigger_signal = o.trigger_signal;
  /* the runtime guard: the commitment's peak trigger, per GPU, and its
   * throughput trigger against the SLA (the probe's steps, read back) */
  uint64_t guard = 0;
  double tput_floor = 0; /* tokens/s under which the throughput trigger fires */
  if (o.commitment) {
    struct vl_commitment cm;
    if ((rc = cli_load_commitment(o.commitment, &cm))) return rc;
    guard = vl_commitment_peak_threshold(&cm);
    if (cm.sla_tokens_per_s > 0) tput_floor = cm.tput_trigger * cm.sla_tokens_per_s;
  }

  /* the run directory: 0700, files 0600 */
  char dir[PATH_MAX];
  uint64_t start_ns = now_ns();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  if (o.out) {
    snprintf(dir, sizeof dir, "%s", o.out);
  } else {
    struct tm tm;
    gmtime_r(&wall.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(dir, sizeof dir, "runs/%s-%.40s", stamp, basename_of(cmd[0]));
  }
  if (mkdir_private(dir) != 0) {
    cli_error("cannot create the run directory '%s': %s", dir, strerror(errno));
    return VL_EXIT_ERROR;
  }
  char rec_path[PATH_MAX + 32], ctr_path[PATH_MAX + 32];
  snprintf(rec_path, sizeof rec_path, "%s/record.jsonl", dir);
  snprintf(ctr_path, sizeof ctr_path, "%s/counters", dir);
  char fb_path[PATH_MAX + 32];
  snprintf(fb_path, sizeof fb_path, "%s/fallback", dir);
  struct tput_watch tw = {.fd = -1};
  record_fd = open(rec_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (record_fd < 0) {
    cli_error("cannot create '%s': %s", rec_path, strerror(errno));
    if (errno == EEXIST) cli_hint("give a new --out directory; a record is never overwritten");
    return VL_EXIT_ERROR;
  }
  struct vl_counters *ctr = map_counters(ctr_path);

  /* NVML: optional; the command runs and is recorded without it */
  struct vl_nvml *nv = NULL;
  struct vl_err err = {""};
  vl_status ns = vl_nvml_open(&nv, &err);
  if (ns != VL_OK && !o.quiet)
    fprintf(stderr, "vramledger: note: %s; the command runs and is recorded without GPU samples\n",
            err.msg);
  unsigned n_all = vl_nvml_count(nv), vis[VL_RECORD_MAX_GPUS], n_vis = 0;
  struct vl_gpu_sample gs[VL_RECORD_MAX_GPUS];
  for (unsigned i = 0; i < n_all && i < VL_RECORD_MAX_GPUS; i++)
    if (vl_nvml_sample(nv, i, &gs[i]) != VL_OK) memset(&gs[i], 0, sizeof gs[i]);
  if (nv)
    n_vis = visible_gpus(nv, gs, n_all < VL_RECORD_MAX_GPUS ? n_all : VL_RECORD_MAX_GPUS, vis);

  json_t *meta = meta_event(start_ns, &wall, cmd, cmd_argc, o.interval_ms,
                            ns == VL_OK ? "ok" : err.msg, nv, gs, vis, n_vis);
  if (put(meta) != 0) {
    cli_error("cannot write '%s': %s", rec_path, strerror(errno));
    return VL_EXIT_ERROR;
  }
  if (tput_floor > 0 && tput_open(&tw, rec_path) != 0)
    cli_hint("cannot read '%s' back: the throughput trigger is off", rec_path);

  /* the child: the command, with the interposer and the record's paths */
  const char *pre = preload_path();
  bool use_preload = !o.no_preload && access(pre, R_OK) == 0;
  int errpipe[2];
  if (pipe(errpipe) != 0 || fcntl(errpipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(errpipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    cli_error("cannot start '%s': %s", cmd[0], strerror(errno));
    return VL_EXIT_ERROR;
  }
  struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  static const int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  struct sigaction old[sizeof fwd / sizeof fwd[0]], old_chld;
  struct sigaction sc = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigemptyset(&sc.sa_mask);
  child_exited = 0;
  sigaction(SIGCHLD, &sc, &old_chld); /* before fork: an exit is never missed */
  pid_t pid = fork();
  if (pid < 0) {
    cli_error("cannot start '%s': %s", cmd[0], strerror(errno));
    return VL_EXIT_ERROR;
  }
  if (pid == 0) {
    if (use_preload) {
      const char *cur = getenv("LD_PRELOAD");
      char buf[PATH_MAX * 2];
      snprintf(buf, sizeof buf, "%s%s%s", pre, cur && *cur ? ":" : "", cur ? cur : "");
      setenv("LD_PRELOAD", buf, 1);
    }
    setenv("VRAMLEDGER_RECORD", rec_path, 1);
    if (ctr) setenv("VRAMLEDGER_COUNTERS", ctr_path, 1);
    setenv("VRAMLEDGER_RUN_DIR", dir, 1);
    if (guard || tput_floor > 0) setenv("VRAMLEDGER_FALLBACK_FILE", fb_path, 1);
    if (o.no_probe) setenv("VRAMLEDGER_PROBE", "0", 1);
    if (o.snapshot) setenv("VRAMLEDGER_SNAPSHOT", "1", 1);
    python_path();
    execvp(cmd[0], (char *const *)cmd);
    int e = errno;
    ssize_t w = write(errpipe[1], &e, sizeof e);
    (void)w;
    _exit(e == ENOENT ? 127 : 126);
  }
  child_pid = pid;
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaction(fwd[i], &sa, &old[i]);
  close(errpipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(errpipe[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  close(errpipe[0]);
  if (got == (ssize_t)sizeof exec_errno) {
    int st;
    waitpid(pid, &st, 0);
    cli_error("cannot run '%s': %s", cmd[0], strerror(exec_errno));
    json_t *ex = json_object();
    json_object_set_new(ex, "type", json_string("exit"));
    json_object_set_new(ex, "t_ns", json_integer((json_int_t)now_ns()));
    json_object_set_new(ex, "status", json_integer(exec_errno == ENOENT ? 127 : 126));
    json_object_set_new(ex, "error", json_string(strerror(exec_errno)));
    put(ex);
    vl_nvml_close(nv);
    return exec_errno == ENOENT ? 127 : 126;
  }

  /* the sampler */
  struct sampler sm = {.pid = pid,
                       .ctr = ctr,
                       .nv = nv,
                       .vis = vis,
                       .n_vis = n_vis,
                       .blind = !ctr || !use_preload,
                       .interval_ms = o.interval_ms,
                       .start_ns = start_ns,
                       .guard = guard,
                       .tput_floor = tput_floor,
                       .tw = &tw,
                       .fb_path = fb_path,
                       .commitment = o.commitment};
  sample_until_exit(&sm);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaction(fwd[i], &old[i], NULL);
  sigaction(SIGCHLD, &old_chld, NULL);
  int status = sm.status;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  /* a process's own peak is exact, samples may fall between its peaks */
  if (ctr) read_counters(ctr, &sm.slot_peak, true, NULL);
  free(sm.nvv.gpus);
  free(sm.nvv.procs);
  if (sm.slot_peak > sm.peak_alloc) sm.peak_alloc = sm.slot_peak;
  put_exit(&sm, code);
  tput_close(&tw);
  close(record_fd);
  vl_nvml_close(nv);
  if (ctr) munmap(ctr, sizeof *ctr);
  if (!o.quiet) {
    double G = (double)(1ull << 30);
    fprintf(stderr, "vramledger: record: %s\n", rec_path);
    if (ns == VL_OK)
      fprintf(stderr,
              "vramledger: peak process memory %.2f GiB at %.1f s (%u process%s): "
              "driver-allocated %.2f GiB (its own peak %.2f GiB), CUDA context and other %.2f "
              "GiB\n",
              (double)sm.peak_tree / G, (double)sm.peak_t * 1e-9, sm.peak_procs,
              sm.peak_procs == 1 ? "" : "es", (double)(sm.peak_tree - sm.ctx_at_peak) / G,
              (double)sm.peak_alloc / G, (double)sm.ctx_at_peak / G);
    else
      fprintf(stderr, "vramledger: driver-allocated peak %.2f GiB (no NVML samples)\n",
              (double)sm.peak_alloc / G);
  }
  return code;
}
