/* The sampler of `vramledger run`: see vramledger/sampler.h. It runs beside
 * the user's job, so what it costs a tick is measured and kept small
 * (the readings' CPU time goes into the record's exit event). */
#define _GNU_SOURCE /* ppoll and syscall (pidfd_open) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util/internal.h"
#include "msbuckets.h"
#include "record_schema.h"
#include "vramledger/alloc.h"
#include "vramledger/counters.h"
#include "vramledger/nvml.h"
#include "vramledger/sampler.h"

uint64_t vl_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* this process's CPU time so far, user + system, ns */
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

/* ---- the record file ------------------------------------------------------ */

/* bytes of buf that went out in write() calls */
static size_t write_some(int fd, const char *buf, size_t n, int *err) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = w < 0 ? errno : EIO;
      break;
    }
    done += (size_t)w;
  }
  return done;
}

/* One write of whole lines, after the gap line owed (see the writer).
 * The record's own file has one writer, `run` (the job's processes write
 * their own streams: docs/record.md, "Streams"), so the file ends inside a
 * line only where a write of ours was cut (w->cut). */
static int put_line(struct vl_record_writer *w, const char *line, size_t n) {
  int err = 0;
  if (w->gap_bytes) {
    char gap[256];
    int g = snprintf(gap, sizeof gap,
                     "%s{\"type\":\"gap\",\"t_ns\":%llu,\"lost_bytes\":%llu,\"error\":\"%s\"}\n",
                     w->cut ? "\n" : "", (unsigned long long)vl_monotonic_ns(),
                     (unsigned long long)w->gap_bytes, strerror(w->err));
    size_t done = write_some(w->fd, gap, (size_t)g, &err);
    if (done != (size_t)g) {
      if (done) w->cut = true;
      w->err = err;
      w->lost_bytes += n;
      w->gap_bytes += n;
      return -1;
    }
    w->gap_bytes = 0;
    w->cut = false;
  }
  size_t done = write_some(w->fd, line, n, &err);
  if (done == n) return 0;
  /* the lines of a batch that went out whole stand (readers read them);
   * the line cut is lost whole, and so is what followed it */
  size_t whole = done;
  while (whole && line[whole - 1] != '\n')
    whole--;
  w->cut = whole != done;
  w->err = err;
  w->lost_bytes += n - whole;
  w->gap_bytes += n - whole;
  errno = err;
  return -1;
}

void vl_record_writer_flush(struct vl_record_writer *w) {
  if (w->sample_len) put_line(w, w->sample_buf, w->sample_len);
  w->sample_len = 0;
}

vl_status vl_record_writer_put(struct vl_record_writer *w, const char *json, struct vl_err *err) {
  vl_record_writer_flush(w);
  if (!json) return vl__fail(err, VL_ENOMEM, "%s", strerror(ENOMEM));
  size_t n = strlen(json);
  char *line = vl_malloc(n + 2);
  if (!line) return vl__fail(err, VL_ENOMEM, "%s", strerror(ENOMEM));
  memcpy(line, json, n);
  line[n] = '\n';
  int r = put_line(w, line, n + 1);
  int e = w->err;
  vl_free(line);
  if (r != 0) return vl__fail(err, VL_EIO, "%s", strerror(e));
  return VL_OK;
}

/* ---- the job's process tree ---------------------------------------------- */

/* pid's parent and state letter (/proc/PID/stat); -1 when it is gone */
static pid_t parent_of(pid_t pid, char *state) {
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
  char st;
  if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2) return -1;
  if (state) *state = st;
  return ppid;
}

/* Is pid the job's? Its parents lead to the job (root: 0 once the job is
 * gone, its pid may be another's), or, with subreaper, to this process
 * through another child than keep_out: an orphan of the job, reparented
 * here. */
static bool in_tree(struct vl_sampler *s, pid_t pid, pid_t root) {
  for (unsigned i = 0; i < s->tree_n; i++)
    if (s->tree[i].pid == pid) return s->tree[i].member;
  bool member = false;
  pid_t p = pid, below = 0, self = s->subreaper ? s->self : -1;
  for (int depth = 0; depth < 64 && p > 1; depth++) {
    if (p == root) {
      member = true;
      break;
    }
    if (p == self) {
      member = below != 0 && below != s->keep_out;
      break;
    }
    below = p;
    p = parent_of(p, NULL);
  }
  if (s->tree_n < VL_SAMPLER_TREE_CACHE)
    s->tree[s->tree_n++] = (struct vl_sampler_pid){pid, member};
  return member;
}

/* ---- what the job leaves ---------------------------------------------------- */

struct proc_parent {
  pid_t pid, ppid;
};

static int by_pid(const void *a, const void *b) {
  pid_t x = ((const struct proc_parent *)a)->pid, y = ((const struct proc_parent *)b)->pid;
  return (x > y) - (x < y);
}

/* Every process of /proc with its parent, zombies left out (their parent
 * reaps them), sorted by pid. @return how many, *v the caller's to free. */
static size_t read_procs(struct proc_parent **v) {
  DIR *d = opendir("/proc");
  size_t n = 0, cap = 0;
  *v = NULL;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    char st = '?';
    if (*end || pid <= 0) continue;
    pid_t pp = parent_of((pid_t)pid, &st);
    if (pp < 0 || st == 'Z' || st == 'X') continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 512;
      struct proc_parent *nv = vl_realloc(*v, nc * sizeof *nv);
      if (!nv) break;
      *v = nv;
      cap = nc;
    }
    (*v)[n++] = (struct proc_parent){(pid_t)pid, pp};
  }
  closedir(d);
  if (n) qsort(*v, n, sizeof **v, by_pid);
  return n;
}

/* Does pid descend from this process through another child than keep_out? */
static bool under_self(const struct vl_sampler *s, const struct proc_parent *v, size_t n,
                       const struct proc_parent *p) {
  for (int depth = 0; depth < 64; depth++) {
    if (p->ppid == s->self) return p->pid != s->keep_out;
    struct proc_parent key = {p->ppid, 0};
    p = bsearch(&key, v, n, sizeof *v, by_pid);
    if (!p) return false;
  }
  return false;
}

/* A descriptor that becomes readable when pid ends (pidfd_open, Linux
 * 5.3; a zombie has ended), or -1. */
static int job_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

static void left_close(struct vl_sampler *s) {
  for (unsigned i = 0; i < s->left_n; i++)
    if (s->left_fd[i] >= 0) close(s->left_fd[i]);
  s->left_n = 0;
}

/* The processes under this one (the job's, once it is gone), in one pass
 * over /proc: into s->left, the first VL_SAMPLER_LEFT_MAX, each with a
 * pidfd when watch. @return how many run (s->left_total). */
static unsigned find_left(struct vl_sampler *s, bool watch) {
  struct proc_parent *v;
  size_t n = read_procs(&v);
  left_close(s);
  s->left_total = 0;
  for (size_t i = 0; i < n; i++) {
    if (!under_self(s, v, n, &v[i])) continue;
    int fd = -1;
    if (watch && s->left_n < VL_SAMPLER_LEFT_MAX) {
      fd = job_pidfd(v[i].pid);
      if (fd < 0 && errno == ESRCH) continue; /* ended since */
    }
    s->left_total++;
    if (s->left_n == VL_SAMPLER_LEFT_MAX) continue;
    s->left_fd[s->left_n] = fd;
    s->left[s->left_n++] = v[i].pid;
  }
  vl_free(v);
  return s->left_total;
}

/* Drop the processes watched that ended (their pidfd readable; without
 * one, kill(0) fails). @return whether any did. */
static bool prune_left(struct vl_sampler *s) {
  struct pollfd p[VL_SAMPLER_LEFT_MAX];
  for (unsigned i = 0; i < s->left_n; i++)
    p[i] = (struct pollfd){.fd = s->left_fd[i], .events = POLLIN};
  if (poll(p, s->left_n, 0) < 0) return false;
  unsigned k = 0;
  for (unsigned i = 0; i < s->left_n; i++) {
    bool ended =
        s->left_fd[i] >= 0 ? p[i].revents != 0 : kill(s->left[i], 0) != 0 && errno == ESRCH;
    if (ended) {
      if (s->left_fd[i] >= 0) close(s->left_fd[i]);
      continue;
    }
    s->left_fd[k] = s->left_fd[i];
    s->left[k++] = s->left[i];
  }
  bool any = k != s->left_n;
  s->left_n = k;
  return any;
}

/* How often the processes the job left are looked at without a pidfd, and
 * how long they must outlive it to be said: a job's workers ended by the
 * same Ctrl-C, or Python's resource tracker that ends with its last user,
 * are gone by then. */
#define LEFT_LOOK_NS 100000000ull

/* The hook: the list of those watched (found: and the record's word). */
static void tell_left(struct vl_sampler *s, uint64_t t, bool found) {
  if (found) s->left_seen += s->left_total;
  if (s->hooks.left) s->hooks.left(s->hooks.ctx, t, s->left, s->left_n, s->left_total, found);
}

/* Reap every child that ended: the job (its status into s->status), the
 * others (the job's orphans, keep_out) told through the hook. @return true
 * when the job was among them. */
static bool reap_children(struct vl_sampler *s) {
  bool job = false;
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, WNOHANG);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return job;
    if (w == s->pid) {
      s->status = st;
      job = true;
    } else if (s->hooks.reaped) {
      s->hooks.reaped(s->hooks.ctx, w);
    }
  }
}

/* The job was reaped at t: does what it started run on? Those found are
 * watched (without no_wait) and handed to the caller; said at once with
 * no_wait, else once they have outlived the job by LEFT_LOOK_NS. The caller
 * is told in every case (an empty list when none): the job's pid is not
 * the job's any more. @return true to sample until they end. */
static bool job_ended(struct vl_sampler *s, uint64_t t) {
  s->job_end_ns = t;
  bool left = s->subreaper && find_left(s, !s->no_wait);
  tell_left(s, t, left && s->no_wait);
  return left && !s->no_wait;
}

/* While waiting for what the job left, at t (each tick; the processes
 * looked at when a pidfd said so, else every LEFT_LOOK_NS): those that
 * ended dropped; once none is left, /proc looked at again for what they
 * started. @return true while some run and no stop was asked for. */
static bool wait_left(struct vl_sampler *s, uint64_t t, uint64_t *last) {
  if (s->stop_wait && *s->stop_wait) {
    s->left_stopped = true;
    return false;
  }
  if (!s->left_ready && t - *last < LEFT_LOOK_NS) return true;
  s->left_ready = false;
  *last = t;
  bool told = s->left_seen > 0;
  if (prune_left(s)) tell_left(s, t, false);
  if (!s->left_n) {
    if (!find_left(s, true)) return false;
    if (told) tell_left(s, t, true); /* started by those that ended */
  }
  if (!told && t - s->job_end_ns >= LEFT_LOOK_NS) tell_left(s, s->job_end_ns, true);
  return true;
}

/* ---- the interposer's counters ------------------------------------------- */

uint64_t vl_counters_scan(struct vl_counters *c, unsigned *end, uint64_t *peak, bool reap,
                          uint64_t *ops) {
  uint64_t live = 0;
  if (ops) *ops = 0;
  for (unsigned i = 0; i < VL_COUNTERS_SLOTS; i++) {
    struct vl_counters_slot *s = &c->slot[i];
    uint32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
    if (!pid) {
      if (i >= *end) break; /* never taken: nor is any after it (counters.h) */
      continue;
    }
    if (i >= *end) *end = i + 1;
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
    __atomic_store_n(&s->rings, 0, __ATOMIC_RELAXED);
    __atomic_compare_exchange_n(&s->pid, &pid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  return live;
}

uint64_t vl_counters_read(struct vl_counters *c, uint64_t *peak, bool reap, uint64_t *ops) {
  unsigned end = VL_COUNTERS_SLOTS;
  return vl_counters_scan(c, &end, peak, reap, ops);
}

/* ---- NVML ------------------------------------------------------------------ */

/* NVML's queries are most of the sampler's cost; with the interposer in the
 * job, NVML is read again when the job's driver-allocated bytes pass their
 * highest or NVML_MAX_AGE_NS passed, so a new peak is read at the tick it
 * happens and a quiet job costs ten readings a second. */
#define NVML_MAX_AGE_NS 100000000ull
/* the periodic readings may take this share of a core at most: when a
 * reading costs more than 0.5 ms of CPU (a slow period of the machine:
 * 0.65-0.71 ms seen on the H200 host), they come less often than every
 * NVML_MAX_AGE_NS */
#define NVML_CPU_SHARE 0.005
#define NVML_MIN_GAP_NS 20000000ull

/* Is a reading due at t? Every tick without the interposer (`blind`: NVML
 * is all there is); with it, when the job's driver-allocated bytes pass the
 * most they were at any reading (a new peak of process memory can only come
 * from there: the rest, context and libraries, changes slowly), at most
 * every NVML_MIN_GAP_NS (a spike still shows in two readings before it is
 * 50 ms old, and the counters, read every tick, hold its exact peak); and
 * every NVML_MAX_AGE_NS regardless, longer when a reading costs more than
 * NVML_CPU_SHARE allows. A reading costs 0.12-0.71 ms of CPU (H200:
 * bench/results/generate-reserve/): reading every tick, then every
 * 20 ms, while Python imported its libraries (nothing allocated yet: a
 * context appears once and stays, the periodic reading sees it) was most of
 * the sampler's cost at 100 Hz, and a job that allocates and frees every
 * 20 ms cost twice a quiet one while any movement triggered a reading. */
static bool nvml_due(const struct vl_sampler_nvml *v, uint64_t t, bool blind, uint64_t ops,
                     uint64_t alloc) {
  uint64_t age = t - v->t_ns;
  uint64_t max_age = (uint64_t)((double)v->cost_ns / NVML_CPU_SHARE);
  if (max_age < NVML_MAX_AGE_NS) max_age = NVML_MAX_AGE_NS;
  bool higher = ops > 0 && alloc > v->high;
  return blind || age >= max_age || (higher && age >= NVML_MIN_GAP_NS);
}

static void nvml_read(struct vl_sampler *s) {
  struct vl_sampler_nvml *v = &s->nvv;
  free(v->gpus);
  free(v->procs);
  json_t *gpus = json_array(), *procs = json_array();
  v->tree = v->other = v->gpu_max = 0;
  v->tree_procs = 0;
  for (unsigned k = 0; k < s->n_vis; k++) {
    struct vl_gpu_sample g;
    if (vl_nvml_sample(s->nv, s->vis[k], &g) != VL_OK) continue;
    struct vl_proc_sample ps[256];
    unsigned np = 0;
    uint64_t gtree = 0;
    if (vl_nvml_processes(s->nv, s->vis[k], ps, 256, &np) == VL_OK) {
      for (unsigned i = 0; i < np && i < 256; i++) {
        uint64_t b = ps[i].used_bytes == UINT64_MAX ? 0 : ps[i].used_bytes;
        if (in_tree(s, (pid_t)ps[i].pid, s->job_end_ns ? 0 : s->pid)) {
          gtree += b;
          v->tree_procs++;
          json_t *e = json_object();
          json_object_set_new(e, VL_RF(sample_procs, pid), json_integer(ps[i].pid));
          json_object_set_new(e, VL_RF(sample_procs, gpu), json_integer(s->vis[k]));
          json_object_set_new(e, VL_RF(sample_procs, bytes), json_integer((json_int_t)b));
          json_array_append_new(procs, e);
        } else {
          v->other += b;
        }
      }
    }
    v->tree += gtree;
    if (gtree > v->gpu_max) v->gpu_max = gtree;
    json_t *e = json_object();
    json_object_set_new(e, VL_RF(sample_gpus, i), json_integer(s->vis[k]));
    json_object_set_new(e, VL_RF(sample_gpus, used), json_integer((json_int_t)g.used_bytes));
    json_object_set_new(e, VL_RF(sample_gpus, tree), json_integer((json_int_t)gtree));
    if (g.util_gpu_pct != UINT32_MAX)
      json_object_set_new(e, VL_RF(sample_gpus, util), json_integer(g.util_gpu_pct));
    json_array_append_new(gpus, e);
  }
  v->gpus = json_dumps(gpus, JSON_COMPACT | JSON_PRESERVE_ORDER);
  v->procs = json_dumps(procs, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(gpus);
  json_decref(procs);
}

/* A reading at t when one is due (or the job exited), timed; else the
 * last one stays. @return true when the last one stays (the sample says
 * when it was taken). */
static bool nvml_tick(struct vl_sampler *s, uint64_t t, bool done, uint64_t ops, uint64_t alloc) {
  struct vl_sampler_nvml *v = &s->nvv;
  if (!(done || nvml_due(v, t, s->blind, ops, alloc))) return true;
  uint64_t c0 = thread_cpu_ns();
  nvml_read(s);
  uint64_t cost = thread_cpu_ns() - c0;
  v->cpu_ns += cost;
  v->cost_ns = v->reads++ ? (v->cost_ns * 7 + cost) / 8 : cost;
  v->t_ns = t;
  if (alloc > v->high) v->high = alloc;
  return false;
}

/* ---- the loop -------------------------------------------------------------- */

/* A sample line is its tick's t_ns, what the last NVML reading said and
 * the tick's driver-allocated bytes. The middle part changes only at a
 * reading, so it is rendered then (mid: ",\"nvml_t_ns\":N", then from
 * mid_at on the GPU and process arrays and NVML's totals up to
 * ",\"cuda_alloc_bytes\":") and a tick writes its two numbers around it. */
struct sample_fmt {
  char *mid;
  size_t mid_len, mid_at, mid_cap;
  uint64_t reads; /* the reading mid was rendered for: nvv.reads then */
  char *line;     /* a line longer than the record's buffer */
  size_t line_cap;
};

static bool fmt_grow(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return true;
  char *nb = vl_realloc(*buf, need);
  if (!nb) return false;
  *buf = nb;
  *cap = need;
  return true;
}

/* mid for the last reading. @return false without memory for it. */
static bool fmt_render(struct sample_fmt *f, const struct vl_sampler *s) {
  const struct vl_sampler_nvml *v = &s->nvv;
  const char *g = s->nv && v->gpus ? v->gpus : NULL, *pr = s->nv && v->procs ? v->procs : NULL;
  size_t cap = 320 + (g ? strlen(g) : 0) + (pr ? strlen(pr) : 0);
  if (!fmt_grow(&f->mid, &f->mid_cap, cap)) return false;
  char *l = f->mid;
  int n = snprintf(l, cap, ",\"nvml_t_ns\":%llu", (unsigned long long)v->t_ns);
  f->mid_at = (size_t)n;
  if (g && pr) n += snprintf(l + n, cap - (size_t)n, ",\"gpus\":%s,\"procs\":%s", g, pr);
  n += snprintf(l + n, cap - (size_t)n,
                ",\"tree_bytes\":%llu,\"tree_procs\":%u,\"other_bytes\":%llu,"
                "\"cuda_alloc_bytes\":",
                (unsigned long long)v->tree, v->tree_procs, (unsigned long long)v->other);
  f->mid_len = (size_t)n;
  f->reads = v->reads;
  return true;
}

static void fmt_release(struct sample_fmt *f) {
  vl_free(f->mid);
  vl_free(f->line);
}

/* One sample line into the record's buffer, written there in place (a
 * line longer than the buffer goes out alone, from f->line); reused: NVML
 * was not read at this tick (the line says when it was). Left out without
 * memory. */
static void put_sample_line(struct vl_sampler *s, struct sample_fmt *f, uint64_t t, bool reused,
                            uint64_t alloc, uint64_t hi) {
  static const char head[] = "{\"type\":\"sample\",\"t_ns\":";
  static const char max[] = ",\"cuda_alloc_max_bytes\":";
  if ((!f->mid || f->reads != s->nvv.reads) && !fmt_render(f, s)) return;
  const char *mid = f->mid + (reused ? 0 : f->mid_at);
  size_t mid_len = f->mid_len - (size_t)(mid - f->mid);
  size_t most = sizeof head - 1 + 20 + mid_len + 20 + sizeof max - 1 + 20 + 2;
  struct vl_record_writer *w = s->out;
  if (w->sample_len + most > sizeof w->sample_buf) vl_record_writer_flush(w);
  bool alone = most > sizeof w->sample_buf;
  if (alone && !fmt_grow(&f->line, &f->line_cap, most)) return;
  char *l = alone ? f->line : w->sample_buf + w->sample_len;
  memcpy(l, head, sizeof head - 1);
  size_t n = sizeof head - 1;
  n += vl__u64_dec(l + n, t);
  memcpy(l + n, mid, mid_len);
  n += mid_len;
  n += vl__u64_dec(l + n, alloc);
  if (hi > alloc) { /* it was higher between the samples (docs/record.md) */
    memcpy(l + n, max, sizeof max - 1);
    n += sizeof max - 1;
    n += vl__u64_dec(l + n, hi);
  }
  l[n++] = '}';
  l[n++] = '\n';
  if (alone)
    put_line(w, l, n);
  else
    w->sample_len += n;
  s->n_samples++;
}

/* ---- samples from the interposer's millisecond rings ----------------------- */

static bool ms_batched(const struct vl_sampler *s) {
  return s->ctr && !s->blind && s->interval_ms < VL_SAMPLER_BATCH_BELOW_MS &&
         s->ctr->ring_ms == VL_COUNTERS_RING_MS;
}

/* The note, once a run, that a process's milliseconds could not be read:
 * its ring was overwritten first (late), or it has none (an older
 * interposer). */
static void ms_say_lost(struct vl_sampler *s, uint32_t pid, uint64_t ms, bool late) {
  if (s->ms_lost_said) return;
  s->ms_lost_said = true;
  char why[160], text[400];
  if (late)
    snprintf(why, sizeof why,
             "were overwritten before they were read (the sampler was over %u ms late)",
             VL_COUNTERS_RING_MS);
  else
    snprintf(why, sizeof why,
             "are not kept (an older vramledger-preload, or a process past the first %u slots)",
             VL_COUNTERS_RING_SLOTS);
  snprintf(text, sizeof text,
           "the interposer's milliseconds of process %u %s: from this time on, a sample of "
           "such a process's bytes is what it held when the sampler woke (every %u ms)",
           pid, why, VL_SAMPLER_WAKE_MS);
  json_t *e = json_object();
  json_object_set_new(e, VL_RF(note, type), json_string(VL_RT(note)));
  json_object_set_new(e, VL_RF(note, t_ns), json_integer((json_int_t)(ms * 1000000ull)));
  json_object_set_new(e, VL_RF(note, text), json_string(text));
  char *json = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(e);
  struct vl_err err;
  if (vl_record_writer_put(s->out, json, &err) != VL_OK) {
    /* lost_bytes and the next gap line say it */
  }
  free(json);
}

/* Slot i's live bytes when millisecond ms began, for a process that
 * allocated before the sampler started: the latest millisecond its ring
 * holds before ms; none in the ring (no change for VL_COUNTERS_RING_MS):
 * its bytes now. */
static uint64_t ms_first_live(struct vl_counters *c, unsigned i, uint64_t ms) {
  const struct vl_msbucket *ring = vl_counters_ring(c, i);
  for (uint64_t k = 1; k < VL_COUNTERS_RING_MS && k <= ms; k++) {
    uint64_t end, hi;
    if (vl__msb_read(ring, VL_COUNTERS_RING_MS, ms - k, &end, &hi) == VL_MSB_SET) return end;
  }
  return __atomic_load_n(&c->slot[i].live, __ATOMIC_RELAXED);
}

/* The job's driver-allocated bytes when millisecond ms ended (the return)
 * and, in *hi, the most they were within it (each process's most, summed:
 * more than the total ever was when two processes peaked apart within the
 * millisecond). A slot whose ring lost ms counts its bytes now. */
static uint64_t ms_value(struct vl_sampler *s, uint64_t ms, uint64_t *hi) {
  uint64_t sum = 0, sum_hi = 0;
  struct vl_counters *c = s->ctr;
  while (s->ctr_end < VL_COUNTERS_SLOTS &&
         __atomic_load_n(&c->slot[s->ctr_end].pid, __ATOMIC_ACQUIRE))
    s->ctr_end++; /* a process that took a slot since the last scan */
  for (unsigned i = 0; i < s->ctr_end; i++) {
    uint32_t pid = __atomic_load_n(&c->slot[i].pid, __ATOMIC_ACQUIRE);
    if (pid != s->ms_pid[i]) { /* a new process: it held nothing before it took the slot */
      s->ms_pid[i] = pid;
      s->ms_live[i] = 0;
    }
    if (!pid) continue;
    uint64_t prev = s->ms_live[i], end = prev, h = prev;
    enum vl_msb_read r = VL_MSB_LOST;
    if (i < VL_COUNTERS_RING_SLOTS && __atomic_load_n(&c->slot[i].rings, __ATOMIC_ACQUIRE))
      r = vl__msb_read(vl_counters_ring(c, i), VL_COUNTERS_RING_MS, ms, &end, &h);
    switch (r) {
    case VL_MSB_SET: break;
    case VL_MSB_NONE: end = h = prev; break;
    case VL_MSB_LOST:
      end = h = __atomic_load_n(&c->slot[i].live, __ATOMIC_RELAXED);
      if (end || __atomic_load_n(&c->slot[i].allocs, __ATOMIC_RELAXED))
        ms_say_lost(s, pid, ms,
                    i < VL_COUNTERS_RING_SLOTS &&
                        __atomic_load_n(&c->slot[i].rings, __ATOMIC_RELAXED));
      break;
    }
    s->ms_live[i] = end;
    sum += end;
    sum_hi += h > prev ? h : prev; /* it held prev when the millisecond began */
  }
  *hi = sum_hi;
  return sum;
}

/* The processes that allocated before the loop began, and their bytes
 * when its first millisecond began. */
static void ms_start(struct vl_sampler *s) {
  struct vl_counters *c = s->ctr;
  for (unsigned i = 0; i < VL_COUNTERS_SLOTS; i++) {
    uint32_t pid = __atomic_load_n(&c->slot[i].pid, __ATOMIC_ACQUIRE);
    if (!pid) break; /* none taken after it (vramledger/counters.h) */
    s->ms_pid[i] = pid;
    s->ms_live[i] =
        i < VL_COUNTERS_RING_SLOTS && __atomic_load_n(&c->slot[i].rings, __ATOMIC_ACQUIRE)
            ? ms_first_live(c, i, s->ms_done)
            : __atomic_load_n(&c->slot[i].live, __ATOMIC_RELAXED);
  }
}

/* The samples of the milliseconds that ended before now_ms, one each
 * interval_ms, with NVML's last reading. @return the most bytes a sample
 * said (0: none written). */
static uint64_t ms_samples(struct vl_sampler *s, struct sample_fmt *f, uint64_t now_ms) {
  uint64_t most = 0;
  for (; s->ms_done < now_ms; s->ms_done++) {
    uint64_t hi, v = ms_value(s, s->ms_done, &hi);
    if (hi > s->ms_hi) s->ms_hi = hi;
    if (s->ms_done + 1 != s->ms_next) continue;
    put_sample_line(s, f, s->ms_next * 1000000ull, s->nv != NULL, v, s->ms_hi);
    if (v > most) most = v;
    s->ms_hi = 0;
    s->ms_next += s->interval_ms;
  }
  return most;
}

/* The commitment's triggers at t, each once a run: the job's memory on
 * one GPU over guard_bytes (without NVML the driver-allocated bytes stand
 * in: they are less), its tokens/s under tput_floor. */
static void triggers(struct vl_sampler *s, uint64_t t, uint64_t alloc, bool *fired,
                     bool *tput_fired) {
  const struct vl_sampler_hooks *h = &s->hooks;
  uint64_t held = s->nv ? s->nvv.gpu_max : alloc;
  if (s->guard_bytes && !*fired && held > s->guard_bytes) {
    *fired = true;
    if (h->peak_over) h->peak_over(h->ctx, t, held);
  }
  if (s->tput_floor > 0 && !*tput_fired && h->poll_tokens_per_s) {
    double tps = 0;
    if (h->poll_tokens_per_s(h->ctx, &tps) && tps > 0 && tps < s->tput_floor) {
      *tput_fired = true;
      if (h->tput_under) h->tput_under(h->ctx, t, tps);
    }
  }
}

/* Sleep until `next` (CLOCK_MONOTONIC), or until the job or a process it
 * left ends (their pidfds; without one, the SIGCHLD that interrupts the
 * sleep), or a signal sets stop_wait: a job that exits is noticed at once,
 * not at the next tick (5 s later at --interval-ms 5000). mask: the signal
 * mask in the sleep (s->wake let through), or NULL. */
static void sleep_until(const struct timespec *next, int pidfd, struct vl_sampler *s,
                        const sigset_t *mask) {
  struct pollfd p[1 + VL_SAMPLER_LEFT_MAX];
  nfds_t n = 0;
  if (pidfd >= 0) p[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
  for (unsigned i = 0; i < s->left_n; i++)
    if (s->left_fd[i] >= 0) p[n++] = (struct pollfd){.fd = s->left_fd[i], .events = POLLIN};
  for (;;) {
    if (*s->child_exited || (s->stop_wait && *s->stop_wait)) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ns = (int64_t)(next->tv_sec - now.tv_sec) * 1000000000 + (next->tv_nsec - now.tv_nsec);
    if (ns <= 0) return;
    struct timespec left = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    int r = ppoll(p, n, &left, mask);
    if (r > 0) {
      bool job = pidfd >= 0 && p[0].revents;
      if (job) *s->child_exited = 1; /* the job ended: waitpid at once */
      if (r > (int)job) s->left_ready = true;
      return;
    }
    if (r == 0 || errno != EINTR) return;
  }
}

void vl_sampler_run(struct vl_sampler *s) {
  bool done = false, fired = false, tput_fired = false, job_alive = true;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t last_reap = 0, last_wait = 0, last_flush = 0, last_left = 0;
  struct sample_fmt fmt = {0};
  sigset_t old;
  const sigset_t *mask = s->wake && sigprocmask(SIG_BLOCK, s->wake, &old) == 0 ? &old : NULL;
  s->self = getpid();
  s->loop_cpu0 = self_cpu_ns();
  s->loop_t0 = vl_monotonic_ns();
  int pidfd = job_pidfd(s->pid);
  /* batched: a sample a millisecond grid step from the rings, NVML and the
   * rest at each wake-up, a sample line of its own at the first and the
   * last */
  const bool batch = ms_batched(s);
  const unsigned wake_ms = batch ? VL_SAMPLER_WAKE_MS : s->interval_ms;
  s->ms_done = s->loop_t0 / 1000000ull;
  s->ms_next = s->ms_done + s->interval_ms;
  if (batch) ms_start(s);
  for (bool first = true; !done; first = false) {
    uint64_t t = vl_monotonic_ns();
    s->n_wakes++;
    /* waitpid when SIGCHLD or a pidfd said so, and every 100 ms in case it
     * was lost */
    if (*s->child_exited || s->left_ready || t - last_wait >= NVML_MAX_AGE_NS) {
      *s->child_exited = 0;
      last_wait = t;
      if (reap_children(s) && job_alive) {
        job_alive = false;
        if (pidfd >= 0) close(pidfd);
        pidfd = -1;
        last_left = t;
        done = !job_ended(s, t); /* then one last sample below */
      }
    }
    if (!job_alive && !done) done = !wait_left(s, t, &last_left);
    uint64_t batch_most = batch ? ms_samples(s, &fmt, t / 1000000ull) : 0;
    uint64_t alloc = 0, ops = 0;
    /* exited processes are looked for every 100 ms (a kill(0) each) */
    bool reap = done || t - last_reap >= NVML_MAX_AGE_NS;
    if (reap) last_reap = t;
    if (s->ctr) alloc = vl_counters_scan(s->ctr, &s->ctr_end, &s->slot_peak, reap, &ops);
    bool nvml_now = s->nv && !nvml_tick(s, t, done, ops, alloc); /* read at this tick */
    /* NVML and the counters are read a moment apart: an allocation made in
     * between would show in NVML but not in the counters and be taken for
     * context. When NVML was read, read the counters again and keep the
     * larger. */
    if (s->ctr && nvml_now) {
      uint64_t again =
          vl_counters_scan(s->ctr, &s->ctr_end, &s->slot_peak, false, NULL); /* reaped just now */
      if (again > alloc) alloc = again;
    }
    if (!batch || first || done) put_sample_line(s, &fmt, t, s->nv && !nvml_now, alloc, 0);
    if (done || t - last_flush >= VL_SAMPLE_FLUSH_NS) {
      vl_record_writer_flush(s->out);
      last_flush = t;
    }
    triggers(s, t, alloc > batch_most ? alloc : batch_most, &fired, &tput_fired);
    const struct vl_sampler_nvml *v = &s->nvv;
    if (v->tree > s->peak_tree) {
      s->peak_tree = v->tree;
      s->peak_t = t - s->start_ns;
      s->ctx_at_peak = v->tree > alloc ? v->tree - alloc : 0;
      s->peak_procs = v->tree_procs;
    }
    if (alloc > s->peak_alloc) s->peak_alloc = alloc;
    if (batch_most > s->peak_alloc) s->peak_alloc = batch_most;
    if (done) break;
    next.tv_nsec += (long)(wake_ms % 1000) * 1000000L;
    next.tv_sec += (time_t)(wake_ms / 1000) + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    sleep_until(&next, pidfd, s, mask);
  }
  if (pidfd >= 0) close(pidfd);
  reap_children(s); /* the last of what the job left, if it ended here */
  if (s->left_stopped)
    find_left(s, false); /* those still running */
  else if (!s->no_wait)
    left_close(s);
  if (mask) sigprocmask(SIG_SETMASK, &old, NULL);
  s->loop_end = vl_monotonic_ns();
  fmt_release(&fmt);
}

void vl_sampler_finish(struct vl_sampler *s) {
  if (s->ctr) vl_counters_read(s->ctr, &s->slot_peak, true, NULL);
  free(s->nvv.gpus);
  free(s->nvv.procs);
  s->nvv.gpus = s->nvv.procs = NULL;
  if (s->slot_peak > s->peak_alloc) s->peak_alloc = s->slot_peak;
}

vl_status vl_sampler_put_exit(const struct vl_sampler *s, int code, struct vl_err *err) {
  json_t *ex = json_object();
  uint64_t end = vl_monotonic_ns();
  json_object_set_new(ex, VL_RF(exit, type), json_string(VL_RT(exit)));
  json_object_set_new(ex, VL_RF(exit, t_ns), json_integer((json_int_t)end));
  json_object_set_new(ex, VL_RF(exit, status), json_integer(code));
  if (WIFSIGNALED(s->status))
    json_object_set_new(ex, VL_RF(exit, signal), json_integer(WTERMSIG(s->status)));
  if (s->left_seen)
    json_object_set_new(ex, VL_RF(exit, descendants_left), json_integer((json_int_t)s->left_total));
  json_object_set_new(ex, VL_RF(exit, wall_ns), json_integer((json_int_t)(end - s->start_ns)));
  uint64_t cpu = self_cpu_ns();
  json_object_set_new(ex, VL_RF(exit, sampler_cpu_ns), json_integer((json_int_t)cpu));
  json_object_set_new(ex, VL_RF(exit, sampling_cpu_ns),
                      json_integer((json_int_t)(cpu - s->loop_cpu0)));
  json_object_set_new(ex, VL_RF(exit, sampling_wall_ns),
                      json_integer((json_int_t)(s->loop_end - s->loop_t0)));
  json_object_set_new(ex, VL_RF(exit, samples), json_integer((json_int_t)s->n_samples));
  json_object_set_new(ex, VL_RF(exit, sampling_wakes), json_integer((json_int_t)s->n_wakes));
  json_object_set_new(ex, VL_RF(exit, nvml_reads), json_integer((json_int_t)s->nvv.reads));
  json_object_set_new(ex, VL_RF(exit, nvml_cpu_ns), json_integer((json_int_t)s->nvv.cpu_ns));
  char *json = json_dumps(ex, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(ex);
  vl_status st = vl_record_writer_put(s->out, json, err);
  free(json);
  return st;
}
