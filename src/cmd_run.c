/* vramledger run: run a command unchanged and record what it held on the
 * GPU: NVML for the job's process tree, the interposer's live allocations,
 * phase marks. docs/cmd/run.md is the manual. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "guard.h"
#include "commands.h"
#include "measure/record_schema.h"
#include "util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/commitment.h"
#include "vramledger/counters.h"
#include "vramledger/nvml.h"
#include "vramledger/record.h"
#include "vramledger/sampler.h"

enum {
  O_HELP,
  O_OUT,
  O_INTERVAL,
  O_NO_PRELOAD,
  O_NO_PROBE,
  O_SNAPSHOT,
  O_SNAPSHOT_AT,
  O_QUIET,
  O_COMMITMENT,
  O_TRIGGER_SIGNAL,
  O_NO_WAIT
};
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},
    {"out", true, O_OUT},
    {"interval-ms", true, O_INTERVAL},
    {"no-preload", false, O_NO_PRELOAD},
    {"no-probe", false, O_NO_PROBE},
    {"snapshot", false, O_SNAPSHOT},
    {"snapshot-at", true, O_SNAPSHOT_AT},
    {"quiet", false, O_QUIET},
    {"commitment", true, O_COMMITMENT},
    {"trigger-signal", true, O_TRIGGER_SIGNAL},
    {"no-wait-descendants", false, O_NO_WAIT},
    {NULL, false, 0},
};

struct runopt {
  bool help, no_preload, no_probe, snapshot, quiet, no_wait;
  const char *snapshot_at; /* --snapshot-at: oom (default), peak or exit */
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
  case O_SNAPSHOT_AT: { /* implies --snapshot */
    static const char *const at[] = {"oom", "peak", "exit", NULL};
    int k = cli_choice(flag, arg, at);
    if (k < 0) return VL_EXIT_USAGE;
    o->snapshot = true;
    o->snapshot_at = at[k];
    return 0;
  }
  case O_QUIET: o->quiet = true; return 0;
  case O_NO_WAIT: o->no_wait = true; return 0;
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

/* the signals passed on to the job */
static const int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* The run as it goes: the job, its run directory and record, what
 * watches it. */
struct run {
  struct runopt o;
  const char **cmd; /* the command after '--', cmd_argc words */
  int cmd_argc;
  uint64_t guard;    /* the commitment's peak trigger (bytes), 0: none */
  double tput_floor; /* tokens/s under which the throughput trigger fires */
  uint64_t start_ns;
  struct timespec wall;
  char dir[PATH_MAX];
  char rec_path[PATH_MAX + 32], ctr_path[PATH_MAX + 32], fb_path[PATH_MAX + 32];
  char streams[PATH_MAX + 32]; /* the record's streams folder: one file a writer of the job */
  bool streams_made;
  struct vl_record_writer out;
  struct tput_watch tw;
  struct vl_counters *ctr;       /* or NULL */
  size_t ctr_len;                /* its mapping's */
  char ctr_state[200];           /* the record's meta "counters": on, no rings or off, and why */
  char ctr_warn[PATH_MAX + 300]; /* map_counters' warning, said once the record is written */
  bool dir_made;                 /* run made r->dir (not an --out that was there) */
  /* The disk had no room for the record at the start: the job runs as
   * without vramledger, nothing recorded (go_unrecorded); why, for the
   * summary */
  bool no_record;
  char no_record_why[PATH_MAX + 128];
  struct vl_nvml *nv;    /* or NULL */
  vl_status nvml_status; /* NVML's opening, its message in nvml_err */
  struct vl_err nvml_err;
  unsigned vis[VL_RECORD_MAX_GPUS], n_vis;
  const char *pre; /* the interposer */
  bool use_preload;
  bool fb_made;   /* the fallback file was created */
  int reserve_fd; /* room kept for the record's last lines (reserve_room), or -1 */
  pid_t pid;
  bool subreaper;              /* the job's orphans are reparented to us */
  bool said_left;              /* what the job left was said */
  const struct vl_sampler *sm; /* the sampler, once it runs */
  sigset_t wake;               /* the signals our handlers take */
  struct sigaction old[sizeof fwd / sizeof fwd[0]], old_chld; /* the handlers before ours */
};

/* One event line into the record (the reference is taken). */
static vl_status put(struct run *r, json_t *o, struct vl_err *err) {
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  vl_status st = vl_record_writer_put(&r->out, s, err);
  free(s);
  return st;
}

static int create_private(const char *path, int flags);

/* ---- signals --------------------------------------------------------------- */

static int trigger_signal; /* --trigger-signal: sent to the job when a trigger fires */
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

/* A signal reaches the job once. The job stays in our process group, so
 * the terminal (Ctrl-C, Ctrl-\, Ctrl-Z, a hangup), a `kill -- -PGID`, timeout(1)'s
 * signal to its group, and schedulers that signal every process of a job
 * (Slurm, systemd) reach it directly; only a signal aimed at us alone (a
 * `kill PID`, a container's stop, timeout --foreground) is to be passed
 * on. Which is which: the sentinel, a process of ours in the same group
 * that blocks the forwarded signals, so that whatever reached it stays
 * pending there (readable in /proc/PID/status, ShdPnd) — a signal pending
 * there too was not sent to us alone. Members of a group are signalled
 * newest first (the sentinel is newer than we are), and a sender that
 * signals us and then the group (timeout) or each process in turn (Slurm)
 * is given 20 ms (on a loaded machine a sender can be held that long
 * between two kill()s). A drained sentinel (what was pending taken) is ready for
 * the next. Without a sentinel, what the kernel sent (si_code > 0: the
 * terminal, a hangup) is taken for the group's. docs/cmd/run.md. */
static volatile sig_atomic_t sentinel_pid;
static int sentinel_wake = -1, sentinel_ack = -1; /* pipes to and from it */

/* Is sig pending at the sentinel? Async-signal-safe. */
static bool sentinel_has(int sig) {
  char path[40] = "/proc/", buf[4096];
  size_t k = 6;
  char digits[16];
  int nd = 0;
  for (unsigned long v = (unsigned long)sentinel_pid; v && nd < 16; v /= 10)
    digits[nd++] = (char)('0' + v % 10);
  while (nd)
    path[k++] = digits[--nd];
  memcpy(path + k, "/status", 8);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char *p = strstr(buf, "ShdPnd:");
  if (!p) return false;
  p += 7;
  while (*p == ' ' || *p == '\t')
    p++;
  unsigned long long mask = 0;
  for (;; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (d < 0) break;
    mask = mask << 4 | (unsigned long long)d;
  }
  return (mask >> (sig - 1)) & 1;
}

/* Have the sentinel take what is pending, and wait (10 ms at most) until
 * it has. Async-signal-safe. */
static void sentinel_drain(void) {
  char c = 1;
  if (write(sentinel_wake, &c, 1) != 1) return;
  struct pollfd pf = {.fd = sentinel_ack, .events = POLLIN};
  if (poll(&pf, 1, 10) == 1 && read(sentinel_ack, &c, 1) != 1) {
    /* gone: the next signal is passed on */
  }
}

/* What the job left running once it ended (the sampler's list, copied):
 * a signal is passed on to them as it was to the job. While run waits for
 * them, the second INT, TERM, HUP or QUIT ends the wait (docs/cmd/run.md). */
static volatile pid_t left_pids[VL_SAMPLER_LEFT_MAX];
static volatile sig_atomic_t left_n, waiting, stops, stop_wait;

/* Did sig reach the whole group, not us alone? Async-signal-safe. */
static bool group_signal(int sig, const siginfo_t *info) {
  if (sentinel_pid <= 0) return info && info->si_code > 0;
  if (sentinel_has(sig)) return true;
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  return sentinel_has(sig);
}

/* sig to pid, unless the group's reached it directly; *group: -1 until
 * asked (only for a process in our group: one that left it is missed by
 * group signals). */
static void pass_on(pid_t pid, int sig, const siginfo_t *info, int *group) {
  if (getpgid(pid) == getpgrp()) {
    if (*group < 0) *group = group_signal(sig, info);
    if (*group) return;
  }
  kill(pid, sig);
}

/* INT, TERM or HUP that reached us while the job ran, 0: none; run ends
 * by it (finish) */
static volatile sig_atomic_t stop_signal;

static void forward(int sig, siginfo_t *info, void *uc) {
  (void)uc;
  pid_t job = (pid_t)child_pid;
  int n = left_n;
  if (job > 0 && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)) stop_signal = sig;
  if (job <= 0 && n <= 0) return;
  int saved = errno;
  int group = -1;
  if (job > 0) pass_on(job, sig, info, &group);
  for (int i = 0; i < n && i < VL_SAMPLER_LEFT_MAX; i++)
    pass_on(left_pids[i], sig, info, &group);
  if (waiting && sig != SIGUSR1 && sig != SIGUSR2 && ++stops >= 2) stop_wait = 1;
  /* drained unless another of sig is on its way to us (the group's, after
   * ours): that one finds it still pending */
  sigset_t mine;
  if (group == 1 && sentinel_pid > 0 && sigpending(&mine) == 0 && !sigismember(&mine, sig))
    sentinel_drain();
  errno = saved;
}

/* In the sentinel: the forwarded signals blocked, drained when asked;
 * gone with us (its pipe closed, or PR_SET_PDEATHSIG). */
__attribute__((noreturn)) static void sentinel_main(int wake, int ack, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  for (int fd = 0; fd < 1024; fd++) /* holds nothing of ours open (a pipe's reader waits for EOF) */
    if (fd != wake && fd != ack) close(fd);
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaddset(&set, fwd[i]);
  for (;;) {
    char c;
    ssize_t n = read(wake, &c, 1);
    if (n == 0) _exit(0);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(0);
    }
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0) {
    }
    if (write(ack, &c, 1) != 1) _exit(0);
  }
}

/* The sentinel, started before the job with the forwarded signals blocked
 * from the fork on (none is missed). When it cannot be, forward() falls
 * back on si_code. */
static void sentinel_start(void) {
  int w[2], a[2];
  if (pipe(w) != 0) return;
  if (pipe(a) != 0) {
    close(w[0]);
    close(w[1]);
    return;
  }
  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaddset(&set, fwd[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(w[1]);
    close(a[0]);
    sentinel_main(w[0], a[1], parent);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(w[0]);
  close(a[1]);
  if (pid < 0) {
    close(w[1]);
    close(a[0]);
    return;
  }
  fcntl(w[1], F_SETFD, FD_CLOEXEC);
  fcntl(a[0], F_SETFD, FD_CLOEXEC);
  sentinel_wake = w[1];
  sentinel_ack = a[0];
  sentinel_pid = pid;
}

/* The sentinel ended (killed) and was reaped: forget it (forward() goes by
 * si_code from now on). */
static void sentinel_forget(void) {
  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaddset(&set, fwd[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  sentinel_pid = 0;
  close(sentinel_wake);
  close(sentinel_ack);
  sentinel_wake = sentinel_ack = -1;
  sigprocmask(SIG_SETMASK, &old, NULL);
}

static void sentinel_stop(void) {
  if (sentinel_pid <= 0) return;
  pid_t pid = (pid_t)sentinel_pid;
  sentinel_pid = 0;
  close(sentinel_wake);
  close(sentinel_ack);
  sentinel_wake = sentinel_ack = -1;
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
}

/* ---- the triggers ------------------------------------------------------- */

/* A trigger fired: its event goes into DIR/fallback (one line, appended:
 * the job reads it through vramledger.fallback_requested()) and into the
 * record; the job is signalled when asked for; never stopped. Each
 * trigger fires once per run. */
static void pull(struct run *r, json_t *e) {
  char *line = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
  /* the first trigger creates the file (the job looks for it), a second
   * appends to it: never through a symbolic link */
  int fd = r->fb_made ? open(r->fb_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
                      : create_private(r->fb_path, O_WRONLY | O_APPEND);
  if (fd >= 0) r->fb_made = true;
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
  if (put(r, e, NULL) != VL_OK) {
    /* the fallback file above still has it */
  }
  tell_job();
}

static json_t *trigger_event(uint64_t t, const char *name) {
  json_t *e = json_object();
  json_object_set_new(e, VL_RF(trigger, type), json_string(VL_RT(trigger)));
  json_object_set_new(e, VL_RF(trigger, t_ns), json_integer((json_int_t)t));
  json_object_set_new(e, VL_RF(trigger, trigger), json_string(name));
  return e;
}

/* The peak trigger: the job's memory on one GPU over the commitment's. */
static void fire(void *ctx, uint64_t t, uint64_t bytes) {
  struct run *r = ctx;
  json_t *e = trigger_event(t, "peak_over_commitment");
  json_object_set_new(e, VL_RF(trigger, bytes), json_integer((json_int_t)bytes));
  json_object_set_new(e, VL_RF(trigger, threshold_bytes), json_integer((json_int_t)r->guard));
  pull(r, e);
  fprintf(stderr,
          "vramledger: trigger: the job holds %.2f GiB on one GPU, over the %.2f GiB that %s "
          "allows; its fallback is due (vramledger.fallback_requested() is now true)\n",
          (double)bytes / (double)(1ull << 30), (double)r->guard / (double)(1ull << 30),
          r->o.commitment);
}

/* The job's median tokens/s over its last steady steps, read back from
 * the record; false when the record cannot be read back. */
static bool poll_tput(void *ctx, double *tps) {
  struct run *r = ctx;
  if (!r->tw.dir[0]) return false;
  tput_poll(&r->tw, tps);
  return true;
}

/* The throughput trigger: that median under the commitment's floor. */
static void fire_tput(void *ctx, uint64_t t, double tps) {
  struct run *r = ctx;
  json_t *e = trigger_event(t, "throughput_under_sla");
  json_object_set_new(e, VL_RF(trigger, tokens_per_s), json_real(tps));
  json_object_set_new(e, VL_RF(trigger, threshold_tokens_per_s), json_real(r->tput_floor));
  pull(r, e);
  fprintf(stderr,
          "vramledger: trigger: the job makes %.0f tokens/s, under the %.0f that %s allows; "
          "its fallback is due (vramledger.fallback_requested() is now true)\n",
          tps, r->tput_floor, r->o.commitment);
}

/* ---- what the job leaves ------------------------------------------------ */

static int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The signal run ends by once its record is closed, 0: none (its exit
 * code then). A shell stops its loop or script when its child dies of
 * INT (bash's wait-and-cooperative-exit), so run dies as the job did: of
 * the INT, TERM or HUP that reached run while the job ran (passed on, or
 * sent to the whole group), or that the job died of. Not QUIT, SEGV, ABRT
 * and the like: their default dumps core (128 + the signal instead); not
 * KILL or PIPE: 128 + the signal too; not a signal ignored when run
 * started (a background job's INT). docs/cmd/run.md, "Exit status". */
static int end_signal(const struct run *r, int status) {
  int sig = stop_signal;
  if (!sig && WIFSIGNALED(status)) sig = WTERMSIG(status);
  if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP) return 0;
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    if (fwd[i] == sig && !(r->old[i].sa_flags & SA_SIGINFO) && r->old[i].sa_handler == SIG_IGN)
      return 0;
  return sig;
}

/* Die of sig, as the job did (its default action: no core for INT, TERM,
 * HUP); returns only if that did not happen. */
static void die_of(int sig) {
  fflush(NULL);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
}

/* "PID 12" or "PIDs 12, 13, ..." (the first VL__PIDS_SHOWN of total) */
static void pid_list(const pid_t *pids, unsigned n, unsigned total, char *buf, size_t cap) {
  unsigned shown[VL__PIDS_SHOWN], k = 0;
  for (; k < n && k < VL__PIDS_SHOWN; k++)
    shown[k] = (unsigned)pids[k];
  vl__pid_list(buf, cap, shown, k, total > k);
}

/* What the job left running, as it is now (at the job's exit, and as they
 * end): signals are passed on to those. found: they are to be said — the
 * record's descendants event and, the first time, the word on stderr. */
static void on_left(void *ctx, uint64_t t, const pid_t *pids, unsigned n, unsigned total,
                    bool found) {
  struct run *r = ctx;
  left_n = 0;
  for (unsigned i = 0; i < n; i++)
    left_pids[i] = pids[i];
  left_n = (sig_atomic_t)n;
  child_pid = 0; /* reaped: its pid may be another process's now */
  if (!found) return;
  json_t *e = json_object(), *jp = json_array();
  json_object_set_new(e, VL_RF(descendants, type), json_string(VL_RT(descendants)));
  json_object_set_new(e, VL_RF(descendants, t_ns), json_integer((json_int_t)t));
  json_object_set_new(e, VL_RF(descendants, procs), json_integer(total));
  for (unsigned i = 0; i < n; i++)
    json_array_append_new(jp, json_integer(pids[i]));
  json_object_set_new(e, VL_RF(descendants, pids), jp);
  json_object_set_new(e, VL_RF(descendants, waited), json_boolean(!r->o.no_wait));
  if (put(r, e, NULL) != VL_OK) {
    /* the record's gap line says it */
  }
  if (r->said_left) return;
  r->said_left = true;
  char list[160];
  pid_list(pids, n, total, list, sizeof list);
  if (r->o.no_wait) {
    if (!r->o.quiet)
      fprintf(stderr,
              "vramledger: note: the job exited and left %u process%s running (%s), not "
              "recorded further (--no-wait-descendants)\n",
              total, total == 1 ? "" : "es", list);
    return;
  }
  waiting = 1;
  fprintf(stderr,
          "vramledger: waiting for %u process%s the job left (%s; the job exited with status "
          "%d): recorded until %s; Ctrl-C passes the signal on, a second Ctrl-C stops "
          "waiting\n",
          total, total == 1 ? "" : "es", list, exit_code(r->sm->status),
          total == 1 ? "it ends" : "the last ends");
}

/* A child other than the job was reaped: the sentinel, if it was. */
static void on_reaped(void *ctx, pid_t pid) {
  (void)ctx;
  if (pid == (pid_t)sentinel_pid) sentinel_forget();
}

/* ---- the run directory and the record -------------------------------------- */

/* The parents of dir (0777 less the umask), then dir itself, 0700
 * (*made: it was made here). A default directory (fresh) must be new: it
 * is never reused. --out may name
 * a directory that exists (sweep makes its points' first), never a file, a
 * symbolic link (trailing slashes or not) or anything else; its mode is
 * the user's, never changed (the run's files in it are created O_EXCL,
 * O_NOFOLLOW, 0600). @return 0; -1 with errno (ENOTDIR: not a directory;
 * ELOOP: a symbolic link); MKDIR_SHARED: writable by every user and not
 * sticky (anyone could remove or replace the record). */
enum { MKDIR_SHARED = -2 };
static int mkdir_private(const char *dir, bool fresh, bool *made) {
  char buf[PATH_MAX];
  *made = false;
  snprintf(buf, sizeof buf, "%s", dir);
  /* "link/" and "link/." are the directory a link points to: the link
   * itself is looked at */
  for (size_t n = strlen(buf); n > 1;) {
    if (buf[n - 1] == '/')
      buf[--n] = '\0';
    else if (n > 2 && buf[n - 1] == '.' && buf[n - 2] == '/')
      buf[--n] = '\0';
    else
      break;
  }
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0700) == 0) {
    *made = true;
    return 0;
  }
  if (errno != EEXIST || fresh) return -1;
  struct stat st;
  if (lstat(buf, &st) != 0) return -1;
  if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
    errno = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
    return -1;
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) return MKDIR_SHARED;
  return 0;
}

/* A file of the run directory, created new (O_EXCL: a file or symbolic
 * link already there is refused, never followed or truncated). @return its
 * descriptor, or -1 with errno. */
static int open_private(const char *path, int flags) {
  return open(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Why open_private(path) failed (errno), said. */
static void say_not_created(const char *path) {
  if (errno == EEXIST)
    cli_error("cannot create '%s': it already exists (vramledger creates its files new and "
              "follows no symbolic link)",
              path);
  else
    cli_error("cannot create '%s': %s", path, strerror(errno));
}

/* open_private, and why not said, naming path. */
static int create_private(const char *path, int flags) {
  int fd = open_private(path, flags);
  if (fd < 0) say_not_created(path);
  return fd;
}

/* Room for the record's last lines: a disk that fills up during the run
 * (ENOSPC) would leave the record without the gap line owed, the lost
 * event and the exit event, and a reader would take the run for killed.
 * So an unnamed file of RESERVE_BYTES (blocks up to 64 KiB) holds that
 * room from the start, and finish() gives it back before they are
 * written. @return its descriptor, or -1: none (no room even then, a file
 * system without the blocks to give, a 'reserve' file in DIR). */
#define RESERVE_BYTES (64 * 1024)
static int reserve_room(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/reserve", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  unlink(path); /* its blocks are held while it is open, and go with us */
  if (posix_fallocate(fd, 0, RESERVE_BYTES) != 0) {
    close(fd);
    return -1;
  }
  return fd;
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
  /* read whole, never cut: a cut UUID prefix may name another GPU */
  size_t len = strlen(v);
  char small[1024], *buf = len < sizeof small ? small : vl_malloc(len + 1);
  struct vl__list l;
  if (!buf || !vl__list_init_in(&l, v, ',', buf, len + 1)) {
    cli_error("out of memory reading CUDA_VISIBLE_DEVICES: the record lists every GPU");
    for (unsigned i = 0; i < n; i++)
      idx[k++] = i;
    return k;
  }
  bool seen[VL_RECORD_MAX_GPUS] = {false};
  /* as CUDA reads it: indices or UUID prefixes; the first entry that names
   * no GPU ends the list; a GPU named twice is one GPU (0,0 is not two) */
  for (char *tok; k < n && (tok = vl__list_next(&l, NULL));) {
    char *end;
    long i = strtol(tok, &end, 10);
    long g = -1;
    if (*tok && !*end && i >= 0 && (unsigned long)i < n) g = i;
    for (unsigned u = 0; g < 0 && u < n; u++)
      if (strlen(tok) >= 5 && strncmp(all[u].uuid, tok, strlen(tok)) == 0) g = u;
    if (g < 0) break;
    if (g < VL_RECORD_MAX_GPUS && !seen[g]) {
      seen[g] = true;
      idx[k++] = (unsigned)g;
    }
  }
  if (buf != small) vl_free(buf);
  return k;
}

/* The interposer and the probe, found where cli_preload_path and
 * cli_python_dir look; one that is missing is said on stderr and in the
 * record's meta event ("interposer", "probe": on, off or "missing: PATH"),
 * never silently dropped; so is the counters file ("counters"). */
static void find_parts(struct run *r, json_t *meta) {
  char why[PATH_MAX + 64], site[PATH_MAX + 32];
  r->pre = cli_preload_path();
  r->use_preload = !r->o.no_preload && access(r->pre, R_OK) == 0;
  snprintf(why, sizeof why, "missing: %s", r->pre);
  json_object_set_new(meta, VL_RF(meta, interposer),
                      json_string(r->o.no_preload  ? "off"
                                  : r->use_preload ? "on"
                                                   : why));
  if (!r->o.no_preload && !r->use_preload)
    fprintf(stderr,
            "vramledger: warning: the interposer '%s' is missing: the record has no "
            "driver-allocated layer; reinstall vramledger or set VRAMLEDGER_PRELOAD\n",
            r->pre);
  json_object_set_new(meta, VL_RF(meta, counters),
                      json_string(r->ctr_state)); /* map_counters said it */
  snprintf(site, sizeof site, "%s/site/sitecustomize.py", cli_python_dir());
  bool probe = access(site, R_OK) == 0;
  snprintf(why, sizeof why, "missing: %s", site);
  json_object_set_new(meta, VL_RF(meta, probe),
                      json_string(r->o.no_probe ? "off"
                                  : probe       ? "on"
                                                : why));
  if (!r->o.no_probe && !probe)
    fprintf(stderr,
            "vramledger: warning: the PyTorch probe '%s' is missing: a PyTorch job's record "
            "has no framework layer; reinstall vramledger or set VRAMLEDGER_PYTHON_DIR\n",
            site);
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

/* Zeros over fd's first len bytes, each write whole or the next one asked
 * (a file system without fallocate). @return 0 or an errno */
static int write_zeros(int fd, size_t len) {
  static const char zero[65536];
  for (size_t at = 0; at < len;) {
    size_t n = len - at < sizeof zero ? len - at : sizeof zero;
    ssize_t w = pwrite(fd, zero, n, (off_t)at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    at += (size_t)w;
  }
  return 0;
}

/* fd made len bytes long, each page with its disk blocks: posix_fallocate,
 * or zeros written where the file system has no fallocate; checked as the
 * interposer checks it (vl_counters_backed). @return true, or false with
 * why */
static bool back_file(int fd, size_t len, char *why, size_t n) {
  int e = posix_fallocate(fd, 0, (off_t)len);
  if (e != 0 && e != ENOSPC && e != EDQUOT && e != EFBIG) e = write_zeros(fd, len);
  struct stat st;
  if (e == 0 && fstat(fd, &st) != 0) e = errno;
  if (e != 0) {
    snprintf(why, n, "%s", strerror(e));
    return false;
  }
  if (!vl_counters_backed((long long)st.st_size, (long long)st.st_blocks, len)) {
    snprintf(why, n, "the file system gives its %zu bytes %lld KiB of blocks", len,
             (long long)st.st_blocks / 2);
    return false;
  }
  return true;
}

/* The counters file the interposer writes into, mapped (r->ctr_len bytes;
 * NULL: the run goes on with NVML alone), what became of it in
 * r->ctr_state ("on", "no rings: WHY", "off: WHY") and on stderr. No page
 * of it is mapped before the disk has given it its blocks: a page of a
 * shared mapping without them kills whoever first writes it when the disk
 * has no room (SIGBUS: every process of the job at its first allocation,
 * or the sampler), and vramledger never harms the job it watches. With its
 * rings when the disk gives their blocks; else, as under `ulimit -f` or on
 * a nearly full disk, the header alone; else no file. Sets *refused when
 * the file was there already. */
static struct vl_counters *map_counters(struct run *r, bool *refused) {
  char why[160] = "", why_off[160] = "";
  int cfd = open_private(r->ctr_path, O_RDWR);
  *refused = cfd < 0 && errno == EEXIST;
  if (*refused) { /* as create_private says it; any other failure is ours alone */
    cli_error("cannot create '%s': it already exists (vramledger creates its files new and "
              "follows no symbolic link)",
              r->ctr_path);
    return NULL;
  }
  if (cfd < 0) snprintf(why_off, sizeof why_off, "%s", strerror(errno));
  size_t len = VL_COUNTERS_FILE_BYTES;
  bool ok = cfd >= 0 && back_file(cfd, len, why, sizeof why);
  if (cfd >= 0 && !ok) { /* what the rings took given back first */
    len = sizeof(struct vl_counters);
    if (ftruncate(cfd, 0) != 0)
      snprintf(why_off, sizeof why_off, "ftruncate: %s", strerror(errno));
    else
      ok = back_file(cfd, len, why_off, sizeof why_off);
  }
  void *p = ok ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0) : MAP_FAILED;
  if (ok && p == MAP_FAILED) snprintf(why_off, sizeof why_off, "mmap: %s", strerror(errno));
  if (cfd >= 0) close(cfd);
  if (p == MAP_FAILED) {
    if (cfd >= 0) unlink(r->ctr_path);
    snprintf(r->ctr_state, sizeof r->ctr_state, "off: %s", why_off);
    /* said by open_nvml once the record has its first line: with no room
     * for that either, nothing is recorded, and go_unrecorded says so */
    int w = snprintf(r->ctr_warn, sizeof r->ctr_warn,
                     "vramledger: warning: cannot make the counters file '%s': %s: the job runs, "
                     "and the record has NVML's samples without the driver-allocated bytes; free "
                     "some space there or give --out another file system\n",
                     r->ctr_path, why_off);
    if (w >= (int)sizeof r->ctr_warn) /* a path that long: the warning ends cut, said so */
      memcpy(r->ctr_warn + sizeof r->ctr_warn - 6, "...\n", 5);
    return NULL;
  }
  struct vl_counters *ctr = p;
  ctr->version = VL_COUNTERS_VERSION;
  ctr->slots = VL_COUNTERS_SLOTS;
  ctr->ring_ms = len == VL_COUNTERS_FILE_BYTES ? VL_COUNTERS_RING_MS : 0;
  __atomic_store_n(&ctr->magic, VL_COUNTERS_MAGIC, __ATOMIC_RELEASE);
  r->ctr_len = len;
  if (ctr->ring_ms) {
    snprintf(r->ctr_state, sizeof r->ctr_state, "on");
  } else {
    snprintf(r->ctr_state, sizeof r->ctr_state, "no rings: %s", why);
    if (!r->o.quiet)
      fprintf(stderr,
              "vramledger: note: the counters file '%s' has no room for its rings (%zu KiB: %s): "
              "samples under 10 ms are the sampler's own\n",
              r->ctr_path, (size_t)(VL_COUNTERS_FILE_BYTES - VL_COUNTERS_RINGS_AT) / 1024, why);
  }
  return ctr;
}

/* The record's first event: the command, the host, NVML's state, the GPUs
 * the job can see. */
static json_t *meta_event(uint64_t start_ns, const struct timespec *wall, const char **cmd,
                          int cmd_argc, unsigned interval_ms, const char *nvml_state,
                          struct vl_nvml *nv, const struct vl_gpu_sample *gs, const unsigned *vis,
                          unsigned n_vis) {
  json_t *meta = json_object();
  json_object_set_new(meta, VL_RF(meta, type), json_string(VL_RT(meta)));
  json_object_set_new(meta, VL_RF(meta, schema), json_string(VL_RECORD_SCHEMA));
  json_object_set_new(meta, VL_RF(meta, t_ns), json_integer((json_int_t)start_ns));
  json_object_set_new(meta, VL_RF(meta, start_unix_ms),
                      json_integer((json_int_t)wall->tv_sec * 1000 + wall->tv_nsec / 1000000));
  json_t *jc = json_array();
  char red[256];
  for (int i = 0; i < cmd_argc; i++) /* secrets redacted: docs/record.md */
    json_array_append_new(
        jc, json_string(cli_redact_arg(i ? cmd[i - 1] : NULL, cmd[i], red, sizeof red)));
  json_object_set_new(meta, VL_RF(meta, command), jc);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_object_set_new(meta, VL_RF(meta, host), json_string(host));
  json_object_set_new(meta, VL_RF(meta, interval_ms), json_integer((json_int_t)interval_ms));
  json_object_set_new(meta, VL_RF(meta, nvml), json_string(nvml_state));
  json_object_set_new(meta, VL_RF(meta, driver), json_string(vl_nvml_driver(nv)));
  if (vl_nvml_cuda_driver(nv)) {
    char cuda[16];
    snprintf(cuda, sizeof cuda, "%d.%d", vl_nvml_cuda_driver(nv) / 1000,
             vl_nvml_cuda_driver(nv) % 1000 / 10);
    json_object_set_new(meta, VL_RF(meta, cuda_driver), json_string(cuda));
  }
  json_t *jg = json_array();
  for (unsigned k = 0; k < n_vis; k++) {
    const struct vl_gpu_sample *g = &gs[vis[k]];
    json_t *e = json_object();
    json_object_set_new(e, VL_RF(meta_gpus, index), json_integer(vis[k]));
    json_object_set_new(e, VL_RF(meta_gpus, name), json_string(g->name));
    json_object_set_new(e, VL_RF(meta_gpus, uuid), json_string(g->uuid));
    json_object_set_new(e, VL_RF(meta_gpus, total_bytes), json_integer((json_int_t)g->total_bytes));
    json_array_append_new(jg, e);
  }
  json_object_set_new(meta, VL_RF(meta, gpus), jg);
  json_object_set_new(meta, VL_RF(meta, vramledger), json_string(VL_VERSION));
  return meta;
}

/* ---- the stages of a run ------------------------------------------------- */

/* The options before '--', the command after it. Sets *help after
 * printing --help. */
static int parse_run(struct run *r, int argc, const char **argv, bool *help) {
  int dash = -1;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--") == 0) {
      dash = i;
      break;
    }
  int rc = cli_parse(dash < 0 ? argc : dash, argv, opts, on_opt, &r->o);
  if (rc) return rc;
  if (r->o.help) {
    fputs(vl_help_run, stdout);
    *help = true;
    return VL_EXIT_OK;
  }
  if (dash < 0 || dash + 1 >= argc) {
    cli_error("run needs a command after '--'");
    cli_hint("for example: vramledger run -- python train.py --lr 3e-4");
    return VL_EXIT_USAGE;
  }
  r->cmd = argv + dash + 1;
  r->cmd_argc = argc - dash - 1;
  if (r->o.trigger_signal && !r->o.commitment) {
    cli_error("--trigger-signal goes with --commitment (the triggers are the commitment's)");
    return VL_EXIT_USAGE;
  }
  trigger_signal = r->o.trigger_signal;
  return 0;
}

/* The runtime guard: the commitment's peak trigger, per GPU, and its
 * throughput trigger against the SLA (the probe's steps, read back). */
static int load_guard(struct run *r) {
  if (!r->o.commitment) return 0;
  struct vl_commitment cm;
  int rc = cli_load_commitment(r->o.commitment, &cm);
  if (rc) return rc;
  r->guard = vl_commitment_peak_threshold(&cm);
  if (cm.sla_tokens_per_s > 0) r->tput_floor = cm.tput_trigger * cm.sla_tokens_per_s;
  return 0;
}

/* The disk's failures, not the user's: a run directory or record that
 * cannot be made or written for them leaves the job unrecorded
 * (go_unrecorded), never unrun. A place the user may not write in
 * (EACCES, EROFS), a file or link where the directory goes, a record
 * already there: the user's, refused before the job starts. */
static bool disk_fault(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO; }

/* No record at all (what could not be made or written at the start:
 * what, why): what was made of the run directory goes, the job is run as
 * without vramledger (its environment untouched: no interposer, no probe,
 * nothing that writes to the run directory), the commitment's triggers
 * are off, and the sampler writes to /dev/null, still the job's parent:
 * its signals and exit status as in a recorded run. */
static void go_unrecorded(struct run *r, const char *what, const char *why) {
  snprintf(r->no_record_why, sizeof r->no_record_why, "cannot write '%s': %s", what, why);
  fprintf(stderr,
          "vramledger: warning: %s: nothing is recorded; the job runs as without vramledger%s "
          "(free some space there or give --out another file system)\n",
          r->no_record_why, r->guard || r->tput_floor > 0 ? ", the commitment's triggers off" : "");
  if (r->ctr) {
    munmap(r->ctr, r->ctr_len);
    r->ctr = NULL;
  }
  if (r->ctr_state[0] && strncmp(r->ctr_state, "off", 3) != 0) unlink(r->ctr_path);
  if (r->out.fd >= 0) {
    close(r->out.fd);
    unlink(r->rec_path);
  }
  if (r->streams_made) rmdir(r->streams);
  r->streams_made = false;
  if (r->dir_made) rmdir(r->dir);
  r->out.fd = open("/dev/null", O_WRONLY | O_APPEND | O_CLOEXEC);
  r->no_record = true;
  r->guard = 0;
  r->tput_floor = 0;
}

/* The record's streams folder (docs/record.md, "Streams"), new, 0700:
 * each process of the job writes its interposer's and its probe's lines
 * into files of its own there (VRAMLEDGER_STREAMS), so no two processes
 * write one file. A disk with no room: the job runs unrecorded. */
static int open_streams(struct run *r) {
  vl_record_streams_dir(r->rec_path, r->streams, sizeof r->streams);
  if (mkdir(r->streams, 0700) == 0) {
    r->streams_made = true;
    return 0;
  }
  if (disk_fault(errno)) {
    go_unrecorded(r, r->streams, strerror(errno));
    return 0;
  }
  say_not_created(r->streams);
  if (errno == EEXIST) cli_hint("give a new --out directory; a record is never overwritten");
  return VL_EXIT_ERROR;
}

/* The run directory (0700, files 0600), the record (never overwritten),
 * its streams folder and the interposer's counters. */
static int open_record(struct run *r) {
  r->start_ns = vl_monotonic_ns();
  clock_gettime(CLOCK_REALTIME, &r->wall);
  int made;
  if (r->o.out) {
    snprintf(r->dir, sizeof r->dir, "%s", r->o.out);
    made = mkdir_private(r->dir, false, &r->dir_made);
  } else {
    /* runs/<UTC second>-<command>, made new: a directory already there
     * (another run in the same second, or one put there) gets a suffix */
    struct tm tm;
    gmtime_r(&r->wall.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    int k = 0;
    do {
      if (k)
        snprintf(r->dir, sizeof r->dir, "runs/%s-%.40s-%d", stamp, basename_of(r->cmd[0]), k);
      else
        snprintf(r->dir, sizeof r->dir, "runs/%s-%.40s", stamp, basename_of(r->cmd[0]));
      made = mkdir_private(r->dir, true, &r->dir_made);
    } while (made != 0 && errno == EEXIST && ++k < 1000);
  }
  if (made == MKDIR_SHARED) {
    cli_error("cannot use '%s' as the run directory: every user may write in it and it is not "
              "sticky, so anyone could remove or replace the record",
              r->dir);
    cli_hint("give --out a directory of yours (or a new one), or make it sticky: chmod +t '%s'",
             r->dir);
    return VL_EXIT_ERROR;
  }
  if (made != 0 && disk_fault(errno)) {
    go_unrecorded(r, r->dir, strerror(errno));
    return 0;
  }
  if (made != 0) {
    cli_error("cannot create the run directory '%s': %s", r->dir,
              errno == ENOTDIR ? "it exists and is not a directory"
              : errno == ELOOP ? "it is a symbolic link (vramledger follows none)"
                               : strerror(errno));
    if (errno == ENOTDIR) cli_hint("give --out a new directory, or one of yours");
    return VL_EXIT_ERROR;
  }
  /* the job gets absolute paths: it may change directory */
  char abs[PATH_MAX];
  if (realpath(r->dir, abs)) snprintf(r->dir, sizeof r->dir, "%s", abs);
  snprintf(r->rec_path, sizeof r->rec_path, "%s/record.jsonl", r->dir);
  snprintf(r->ctr_path, sizeof r->ctr_path, "%s/counters", r->dir);
  snprintf(r->fb_path, sizeof r->fb_path, "%s/fallback", r->dir);
  r->out.fd = open_private(r->rec_path, O_WRONLY | O_APPEND);
  if (r->out.fd < 0 && disk_fault(errno)) {
    go_unrecorded(r, r->rec_path, strerror(errno));
    return 0;
  }
  if (r->out.fd < 0) {
    say_not_created(r->rec_path);
    if (errno == EEXIST) cli_hint("give a new --out directory; a record is never overwritten");
    return VL_EXIT_ERROR;
  }
  if (open_streams(r) != 0) return VL_EXIT_ERROR;
  bool refused = false;
  r->ctr = map_counters(r, &refused);
  if (refused) return VL_EXIT_ERROR;
  return 0;
}

/* NVML (optional: the command runs and is recorded without it), the GPUs
 * the job can see, the record's first event, the throughput watch. */
static int open_nvml(struct run *r) {
  r->nvml_status = vl_nvml_open(&r->nv, &r->nvml_err);
  if (r->nvml_status != VL_OK && !r->o.quiet)
    fprintf(stderr, "vramledger: note: %s; the command runs and is recorded without GPU samples\n",
            r->nvml_err.msg);
  unsigned n_all = vl_nvml_count(r->nv);
  struct vl_gpu_sample gs[VL_RECORD_MAX_GPUS];
  for (unsigned i = 0; i < n_all && i < VL_RECORD_MAX_GPUS; i++)
    if (vl_nvml_sample(r->nv, i, &gs[i]) != VL_OK) memset(&gs[i], 0, sizeof gs[i]);
  if (r->nv)
    r->n_vis =
        visible_gpus(r->nv, gs, n_all < VL_RECORD_MAX_GPUS ? n_all : VL_RECORD_MAX_GPUS, r->vis);
  if (r->no_record) return 0; /* open_record found no room: NVML for the summary alone */
  json_t *meta =
      meta_event(r->start_ns, &r->wall, r->cmd, r->cmd_argc, r->o.interval_ms,
                 r->nvml_status == VL_OK ? "ok" : r->nvml_err.msg, r->nv, gs, r->vis, r->n_vis);
  find_parts(r, meta);
  struct vl_err err = {""};
  if (put(r, meta, &err) != VL_OK) { /* the file is ours and new: any failure is the disk's */
    go_unrecorded(r, r->rec_path, err.msg);
    return 0;
  }
  fputs(r->ctr_warn, stderr);
  r->reserve_fd = reserve_room(r->dir); /* the first line in, room kept for the last */
  if (r->tput_floor > 0) tput_open(&r->tw, r->streams); /* the probe's steps, as they come */
  return 0;
}

/* In the child, before exec: the interposer and the record's paths in
 * the job's environment. */
static void job_env(const struct run *r) {
  if (r->use_preload) { /* the job's own LD_PRELOAD after ours, whole */
    const char *cur = getenv("LD_PRELOAD");
    size_t n = strlen(r->pre) + 1 + (cur ? strlen(cur) : 0) + 1;
    char *buf = vl_malloc(n);
    if (buf) {
      snprintf(buf, n, "%s%s%s", r->pre, cur && *cur ? ":" : "", cur ? cur : "");
      setenv("LD_PRELOAD", buf, 1);
      vl_free(buf);
    } else {
      fprintf(stderr,
              "vramledger: warning: out of memory for the job's LD_PRELOAD (%zu bytes): the "
              "job runs without the interposer\n",
              n);
    }
  }
  setenv("VRAMLEDGER_RECORD", r->rec_path, 1);
  setenv("VRAMLEDGER_STREAMS", r->streams, 1);
  if (r->ctr) setenv("VRAMLEDGER_COUNTERS", r->ctr_path, 1);
  setenv("VRAMLEDGER_RUN_DIR", r->dir, 1);
  if (r->guard || r->tput_floor > 0) setenv("VRAMLEDGER_FALLBACK_FILE", r->fb_path, 1);
  if (r->o.no_probe) setenv("VRAMLEDGER_PROBE", "0", 1);
  if (r->o.snapshot)
    setenv("VRAMLEDGER_SNAPSHOT",
           r->o.snapshot_at && strcmp(r->o.snapshot_at, "oom") ? r->o.snapshot_at : "1", 1);
  python_path();
}

/* In the child: the command, with the interposer and the record's paths
 * (unrecorded: its environment as without vramledger); exec's errno goes
 * up errfd. */
__attribute__((noreturn)) static void exec_job(const struct run *r, int errfd) {
  if (!r->no_record) job_env(r);
  execvp(r->cmd[0], (char *const *)r->cmd);
  int e = errno;
  ssize_t w = write(errfd, &e, sizeof e);
  (void)w;
  _exit(e == ENOENT ? 127 : 126);
}

/* The command could not be exec'd: reaped, said, and recorded.
 * @return its exit code, 127 (not found) or 126. */
static int exec_failed(struct run *r, int exec_errno) {
  int st;
  waitpid(r->pid, &st, 0);
  sentinel_stop();
  cli_error("cannot run '%s': %s", r->cmd[0], strerror(exec_errno));
  json_t *ex = json_object();
  json_object_set_new(ex, VL_RF(exit, type), json_string(VL_RT(exit)));
  json_object_set_new(ex, VL_RF(exit, t_ns), json_integer((json_int_t)vl_monotonic_ns()));
  json_object_set_new(ex, VL_RF(exit, status), json_integer(exec_errno == ENOENT ? 127 : 126));
  json_object_set_new(ex, VL_RF(exit, error), json_string(strerror(exec_errno)));
  if (put(r, ex, NULL) != VL_OK) {
    /* the message above says it */
  }
  vl_nvml_close(r->nv);
  return exec_errno == ENOENT ? 127 : 126;
}

/* Fork and exec the job, its signals forwarded, SIGCHLD caught (before
 * the fork: an exit is never missed). @return 0 once it runs, else an exit
 * code. */
static int start_job(struct run *r) {
  int errpipe[2];
  if (pipe(errpipe) != 0 || fcntl(errpipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(errpipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    cli_error("cannot start '%s': %s", r->cmd[0], strerror(errno));
    return VL_EXIT_ERROR;
  }
  struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  struct sigaction sc = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigemptyset(&sc.sa_mask);
  child_exited = 0;
  sigaction(SIGCHLD, &sc, &r->old_chld);
  /* the job's orphans (a launcher's background child, a worker whose
   * parent died) are reparented to us, not to init: still the job's */
  r->subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
  if (!r->subreaper && !r->o.quiet)
    fprintf(stderr,
            "vramledger: note: cannot keep the processes the job leaves (prctl "
            "PR_SET_CHILD_SUBREAPER: %s): run stops at the job's exit\n",
            strerror(errno));
  sigemptyset(&r->wake);
  sigaddset(&r->wake, SIGCHLD);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaddset(&r->wake, fwd[i]);
  sentinel_start();
  r->pid = fork();
  if (r->pid < 0) {
    sentinel_stop();
    cli_error("cannot start '%s': %s", r->cmd[0], strerror(errno));
    return VL_EXIT_ERROR;
  }
  if (r->pid == 0) {
    signal(SIGXFSZ, SIG_DFL); /* the job's own, as without vramledger */
    exec_job(r, errpipe[1]);
  }
  child_pid = r->pid;
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaction(fwd[i], &sa, &r->old[i]);
  close(errpipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(errpipe[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  close(errpipe[0]);
  if (got == (ssize_t)sizeof exec_errno) return exec_failed(r, exec_errno);
  return 0;
}

/* What the interposer could not count (its processes said so on the
 * job's stderr, once each kind) and the bytes of its lines that did not go
 * into the record: a `lost` event before the exit event, which report
 * turns into findings. */
static void put_lost(struct run *r) {
  if (!r->ctr) return;
  uint32_t lost = __atomic_load_n(&r->ctr->lost, __ATOMIC_RELAXED);
  uint64_t rec_lost = __atomic_load_n(&r->ctr->record_lost_bytes, __ATOMIC_RELAXED);
  if (rec_lost)
    cli_error("cannot write '%s': %llu bytes of the job's lines (the interposer's marks and "
              "allocation counts) lost; the record's lost event says so, when there was room "
              "for it",
              r->rec_path, (unsigned long long)rec_lost);
  if (!lost && !rec_lost) return;
  json_t *e = json_object();
  json_object_set_new(e, VL_RF(lost, type), json_string(VL_RT(lost)));
  json_object_set_new(e, VL_RF(lost, t_ns), json_integer((json_int_t)vl_monotonic_ns()));
  json_object_set_new(
      e, VL_RF(lost, no_slot_procs),
      json_integer((json_int_t)__atomic_load_n(&r->ctr->no_slot, __ATOMIC_RELAXED)));
  json_object_set_new(
      e, VL_RF(lost, uncounted_allocs),
      json_integer((json_int_t)__atomic_load_n(&r->ctr->uncounted, __ATOMIC_RELAXED)));
  json_object_set_new(e, VL_RF(lost, slots), json_integer(VL_COUNTERS_SLOTS));
  if (rec_lost)
    json_object_set_new(e, VL_RF(lost, record_lost_bytes), json_integer((json_int_t)rec_lost));
  if (put(r, e, NULL) != VL_OK) {
    /* the job's stderr said it */
  }
}

/* The summary on stderr: the record, the peaks. */
static void say_peaks(const struct run *r, const struct vl_sampler *sm) {
  double G = (double)(1ull << 30);
  if (r->no_record)
    fprintf(stderr, "vramledger: no record (%s)\n", r->no_record_why);
  else
    fprintf(stderr, "vramledger: record: %s\n", r->rec_path);
  if (r->nvml_status == VL_OK)
    fprintf(stderr,
            "vramledger: peak process memory %.2f GiB at %.1f s (%u process%s): "
            "driver-allocated %.2f GiB (its own peak %.2f GiB), CUDA context and other %.2f "
            "GiB\n",
            (double)sm->peak_tree / G, (double)sm->peak_t * 1e-9, sm->peak_procs,
            sm->peak_procs == 1 ? "" : "es", (double)(sm->peak_tree - sm->ctx_at_peak) / G,
            (double)sm->peak_alloc / G, (double)sm->ctx_at_peak / G);
  else
    fprintf(stderr, "vramledger: driver-allocated peak %.2f GiB (no NVML samples)\n",
            (double)sm->peak_alloc / G);
}

/* The job's end: our handlers gone, the exit event, everything closed,
 * and the peaks said (unless --quiet). @return the job's exit code. */
static int finish(struct run *r, struct vl_sampler *sm) {
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaction(fwd[i], &r->old[i], NULL);
  sentinel_stop();
  sigaction(SIGCHLD, &r->old_chld, NULL);
  int code = exit_code(sm->status), sig = end_signal(r, sm->status);
  if (sm->left_stopped && sm->left_total) {
    char list[160];
    pid_list(sm->left, sm->left_n, sm->left_total, list, sizeof list);
    fprintf(stderr,
            "vramledger: stopped waiting: %u process%s the job left still run%s (%s), no longer "
            "recorded\n",
            sm->left_total, sm->left_total == 1 ? "" : "es", sm->left_total == 1 ? "s" : "", list);
  }
  waiting = left_n = 0;
  vl_sampler_finish(sm);
  if (r->reserve_fd >= 0) close(r->reserve_fd); /* room for the lines that follow */
  put_lost(r);
  if (vl_sampler_put_exit(sm, code, NULL) != VL_OK) {
    /* the record ends without its exit event; readers take it for a kill */
  }
  tput_close(&r->tw);
  close(r->out.fd);
  if (r->out.lost_bytes && !r->no_record) { /* unrecorded: /dev/null, or nothing open */
    char how[48];
    if (WIFSIGNALED(sm->status))
      snprintf(how, sizeof how, "was killed by signal %d (%d)", WTERMSIG(sm->status), code);
    else
      snprintf(how, sizeof how, "exited with status %d", code);
    cli_error("cannot write '%s': %s: %llu bytes of the record lost (a 'gap' line marks "
              "where, when there was room for one); the job %s",
              r->rec_path, strerror(r->out.err), (unsigned long long)r->out.lost_bytes, how);
  }
  vl_nvml_close(r->nv);
  if (r->ctr) munmap(r->ctr, r->ctr_len);
  if (!r->o.quiet) say_peaks(r, sm);
  if (sig) die_of(sig);
  return code;
}

int cmd_run(int argc, const char **argv) {
  struct run r = {.o = {.interval_ms = 100}, .out = {.fd = -1}, .reserve_fd = -1};
  bool help = false;
  int rc;
  /* under `ulimit -f` a write past the limit fails with EFBIG (and is
   * recorded as a gap) instead of killing vramledger and leaving the job */
  signal(SIGXFSZ, SIG_IGN);
  if ((rc = parse_run(&r, argc, argv, &help)) || help || (rc = load_guard(&r)) ||
      (rc = open_record(&r)) || (rc = open_nvml(&r)) || (rc = start_job(&r)))
    return rc;
  struct vl_sampler sm = {.pid = r.pid,
                          .child_exited = &child_exited,
                          .out = &r.out,
                          .ctr = r.ctr,
                          .nv = r.nv,
                          .vis = r.vis,
                          .n_vis = r.n_vis,
                          .blind = !r.ctr || !r.use_preload,
                          .interval_ms = (unsigned)r.o.interval_ms,
                          .start_ns = r.start_ns,
                          .guard_bytes = r.guard,
                          .tput_floor = r.tput_floor,
                          .subreaper = r.subreaper,
                          .keep_out = (pid_t)sentinel_pid,
                          .no_wait = r.o.no_wait,
                          .stop_wait = &stop_wait,
                          .wake = &r.wake,
                          .hooks = {.ctx = &r,
                                    .peak_over = fire,
                                    .poll_tokens_per_s = poll_tput,
                                    .tput_under = fire_tput,
                                    .left = on_left,
                                    .reaped = on_reaped}};
  r.sm = &sm;
  vl_sampler_run(&sm);
  return finish(&r, &sm);
}
