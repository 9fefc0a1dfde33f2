/* vramledger watch: sample every GPU and every process on it, like
 * `nvidia-smi --query-compute-apps -l` at millisecond resolution, to CSV or
 * JSON Lines, Prometheus /metrics, or node_exporter textfiles.
 * docs/cmd/watch.md is the manual. */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "http.h"
#include "vramledger/alloc.h"
#include "vramledger/nvml.h"
#include "vramledger/procinfo.h"
#include "vramledger/render.h"

enum {
  O_HELP,
  O_INTERVAL,
  O_CSV,
  O_JSONL,
  O_PORT,
  O_LISTEN,
  O_TEXTFILE,
  O_COUNT,
  O_NAMES,
  O_PROCFS
};
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},
    {"interval-ms", true, O_INTERVAL},
    {"csv", true, O_CSV},
    {"jsonl", true, O_JSONL},
    {"prometheus-port", true, O_PORT},
    {"listen", true, O_LISTEN},
    {"textfile", true, O_TEXTFILE},
    {"count", true, O_COUNT},
    {"metric-names", true, O_NAMES},
    {"procfs", true, O_PROCFS},
    {NULL, false, 0},
};
static const char *const metric_names[] = {"vramledger", "dcgm", NULL};

struct w {
  bool help;
  uint64_t interval_ms, port, count;
  const char *csv, *jsonl, *listen, *textfile;
  const char *procfs; /* --procfs: where the processes' cmdline and cgroup are read */
  bool port_set;
  bool dcgm;      /* --metric-names dcgm */
  char host[256]; /* --listen's address, brackets off */
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct w *o = ctx;
  switch (id) {
  case O_HELP: o->help = true; return 0;
  case O_INTERVAL: return cli_u64(flag, arg, 1, 3600000, &o->interval_ms);
  case O_CSV: o->csv = arg; return 0;
  case O_JSONL: o->jsonl = arg; return 0;
  case O_PORT: o->port_set = true; return cli_u64(flag, arg, 0, 65535, &o->port);
  case O_LISTEN: o->listen = arg; return 0;
  case O_TEXTFILE: o->textfile = arg; return 0;
  case O_PROCFS: o->procfs = arg; return 0;
  case O_COUNT: return cli_u64(flag, arg, 1, UINT64_MAX / 2, &o->count);
  case O_NAMES: {
    int k = cli_choice(flag, arg, metric_names);
    o->dcgm = k == 1;
    return k < 0 ? VL_EXIT_USAGE : 0;
  }
  default: return 0;
  }
}

static volatile sig_atomic_t stop;
static void on_stop(int sig) {
  (void)sig;
  stop = 1;
}

static uint64_t unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* textfile collector: write then rename, so node_exporter never reads half.
 * The temporary file has a name nobody can foresee, created O_EXCL
 * (mkstemp) in a folder others may write to, then made 0644 for the
 * exporter; the rename replaces a link at the final name, never follows
 * it. */
static int write_textfile(const char *dir, const char *body, size_t len) {
  char tmp[PATH_MAX], dst[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%.4000s/.vramledger.prom.XXXXXX", dir);
  snprintf(dst, sizeof dst, "%.4000s/vramledger.prom", dir);
  int fd = mkstemp(tmp);
  if (fd < 0) return -1;
  FILE *f = fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    close(fd);
    unlink(tmp);
    return -1;
  }
  size_t w = fwrite(body, 1, len, f);
  if (fclose(f) != 0 || w != len || rename(tmp, dst) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* --listen and --prometheus-port into o->host and o->port. @return 0 or
 * VL_EXIT_USAGE (said). */
static int listen_flags(struct w *o) {
  uint64_t port = 0;
  bool has_port = false;
  const char *arg = o->listen ? o->listen : "127.0.0.1";
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (http_listen_parse(arg, o->host, sizeof o->host, &port, &has_port) != 0 ||
      getaddrinfo(o->host, NULL, &hints, &ai) != 0) {
    cli_error("--listen: '%s' is not ADDR or ADDR:PORT with an IPv4 or IPv6 address", arg);
    cli_hint("an IPv6 address with a port goes in brackets: --listen [::1]:9400");
    return VL_EXIT_USAGE;
  }
  freeaddrinfo(ai);
  if (has_port && o->port_set && port != o->port) {
    cli_error("--listen says port %llu, --prometheus-port %llu", (unsigned long long)port,
              (unsigned long long)o->port);
    return VL_EXIT_USAGE;
  }
  if (has_port) {
    o->port = port;
    o->port_set = true;
  }
  if (o->listen && !o->port_set) {
    cli_error("--listen needs a port: ADDR:PORT, or --prometheus-port PORT");
    return VL_EXIT_USAGE;
  }
  return 0;
}

/* Serve body on o's address, said on stderr, or say why not, with the fix.
 * @return the server (which took body), or NULL (body still the
 * caller's). */
static struct http_server *serve(const struct w *o, char *body, size_t len) {
  char why[256];
  bool v6 = strchr(o->host, ':') != NULL;
  const char *l = v6 ? "[" : "", *r = v6 ? "]" : "";
  struct http_server *s = http_server_start(o->host, o->port, body, len, why, sizeof why);
  if (!s) {
    int e = errno;
    cli_error("cannot listen on %s%s%s:%llu: %s", l, o->host, r, (unsigned long long)o->port, why);
    if (e == EADDRINUSE)
      cli_hint("another program listens on port %llu: give another PORT, or 0 for a free one",
               (unsigned long long)o->port);
    else if (e == EADDRNOTAVAIL)
      cli_hint("'%s' is none of this machine's addresses: --listen 127.0.0.1 (the default), or "
               "0.0.0.0 or [::] for every one",
               o->host);
    else if (e == EACCES)
      cli_hint("a port below 1024 needs root (CAP_NET_BIND_SERVICE): give one above, or 0");
    return NULL;
  }
  fprintf(stderr, "vramledger: serving Prometheus metrics on http://%s%s%s:%u/metrics\n", l,
          o->host, r, http_server_port(s));
  return s;
}

/* What the loop keeps from tick to tick: the samples of every GPU, who
 * each process is, and the maxima since the previous scrape. */
struct ident_cache { /* a process's command and cgroup, read once while NVML lists it */
  unsigned pid;
  bool listed; /* at this tick */
  struct vl_proc_ident id;
};
struct peak { /* a process's most on one GPU since the previous scrape */
  unsigned gpu, pid;
  struct vl_proc_ident id;
  uint64_t max_bytes;
};
/* processes whose maxima are kept between two scrapes: past this many, a
 * new one's is left out until the next scrape (docs/cmd/watch.md) */
#define WATCH_PEAKS_MAX 4096
struct state {
  unsigned n; /* GPUs */
  struct vl_gpu_sample *gs;
  struct vl_proc_sample *ps; /* VL_WATCH_MAX_PROCS a GPU */
  struct vl_proc_ident *ids; /* the same */
  struct vl_gpu_extra *ex;   /* n, read with --metric-names dcgm */
  uint64_t *ex_ns;           /* n: when each was read (CLOCK_MONOTONIC), 0: never */
  struct vl_watch_gpu *wg;   /* n */
  uint64_t *used_max;        /* n */
  struct ident_cache *cache;
  size_t n_cache, cap_cache;
  struct peak *peaks;
  size_t n_peaks, cap_peaks;
  struct vl_watch_peak *view_peaks; /* n_peaks, for the renderer */
  uint64_t seen;                    /* the server's scrapes when the maxima were last reset */
};

static void state_release(struct state *st) {
  vl_free(st->gs);
  vl_free(st->ps);
  vl_free(st->ids);
  vl_free(st->ex);
  vl_free(st->ex_ns);
  vl_free(st->wg);
  vl_free(st->used_max);
  vl_free(st->cache);
  vl_free(st->peaks);
  vl_free(st->view_peaks);
}

static bool state_init(struct state *st, unsigned n) {
  size_t np = (size_t)(n + 1) * VL_WATCH_MAX_PROCS;
  *st = (struct state){.n = n};
  st->gs = vl_calloc(n + 1, sizeof *st->gs);
  st->ps = vl_calloc(np, sizeof *st->ps);
  st->ids = vl_calloc(np, sizeof *st->ids);
  st->ex = vl_calloc(n + 1, sizeof *st->ex);
  st->ex_ns = vl_calloc(n + 1, sizeof *st->ex_ns);
  st->wg = vl_calloc(n + 1, sizeof *st->wg);
  st->used_max = vl_calloc(n + 1, sizeof *st->used_max);
  return st->gs && st->ps && st->ids && st->ex && st->ex_ns && st->wg && st->used_max;
}

/* Every GPU's sample and processes into st (a GPU NVML does not answer for
 * is in it, not up). @return how many were not read. */
static unsigned sample_gpus(struct vl_nvml *nv, struct state *st) {
  unsigned unread = 0;
  for (unsigned i = 0; i < st->n; i++) {
    struct vl_proc_sample *p = st->ps + (size_t)i * VL_WATCH_MAX_PROCS;
    bool up = vl_nvml_sample(nv, i, &st->gs[i]) == VL_OK;
    unsigned np = 0;
    if (!up || vl_nvml_processes(nv, i, p, VL_WATCH_MAX_PROCS, &np) != VL_OK) np = 0;
    unread += !up;
    st->wg[i] = (struct vl_watch_gpu){
        &st->gs[i],     p, np < VL_WATCH_MAX_PROCS ? np : VL_WATCH_MAX_PROCS, up, NULL, NULL,
        st->used_max[i]};
  }
  return unread;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* dcgm-exporter's other fields of GPU i are read again when EXTRA_AGE_NS
 * old: dcgm-exporter itself collects every 30 s unless told otherwise (its
 * --collect-interval, 30000 ms), and power, clocks and temperature read at
 * every sample of --interval-ms 1 would be five driver calls a millisecond
 * a GPU for values that move slower than that. Memory, the point of the
 * _max_bytes gauges, is read at every sample. */
#define EXTRA_AGE_NS 100000000ull
static bool extra_due(const struct state *st, unsigned i) {
  return !st->ex_ns[i] || mono_ns() - st->ex_ns[i] >= EXTRA_AGE_NS;
}

/* Who each process listed is (read from procfs the first tick NVML lists
 * it, then kept while it stays listed: a pid that leaves the list and comes
 * back, maybe another process's, is read again), and with dcgm the GPUs'
 * other fields. */
static void identify(struct state *st, struct vl_nvml *nv, const char *procfs, bool dcgm) {
  for (size_t c = 0; c < st->n_cache; c++)
    st->cache[c].listed = false;
  for (unsigned i = 0; i < st->n; i++) {
    struct vl_watch_gpu *w = &st->wg[i];
    if (dcgm && w->up && extra_due(st, i)) /* five NVML calls: not at every millisecond */
      st->ex_ns[i] = vl_nvml_extra(nv, i, &st->ex[i]) == VL_OK ? mono_ns() : 0;
    if (dcgm && w->up && st->ex_ns[i]) w->extra = &st->ex[i];
    struct vl_proc_ident *ids = st->ids + (size_t)i * VL_WATCH_MAX_PROCS;
    w->idents = ids;
    for (unsigned p = 0; p < w->n_procs; p++) {
      unsigned pid = w->procs[p].pid;
      size_t c = 0;
      while (c < st->n_cache && st->cache[c].pid != pid)
        c++;
      if (c == st->n_cache) {
        if (c == st->cap_cache) {
          size_t cap = st->cap_cache ? st->cap_cache * 2 : 16;
          struct ident_cache *nc = vl_realloc(st->cache, cap * sizeof *nc);
          if (!nc) { /* no memory: this process unnamed this tick */
            memset(&ids[p], 0, sizeof ids[p]);
            continue;
          }
          st->cache = nc;
          st->cap_cache = cap;
        }
        st->cache[c].pid = pid;
        vl_proc_ident_read(procfs, pid, &st->cache[c].id);
        st->n_cache++;
      }
      st->cache[c].listed = true;
      ids[p] = st->cache[c].id;
    }
  }
  size_t k = 0;
  for (size_t c = 0; c < st->n_cache; c++)
    if (st->cache[c].listed) st->cache[k++] = st->cache[c];
  st->n_cache = k;
}

/* The maxima start again from nothing: a scrape took them. */
static void reset_maxima(struct state *st) {
  memset(st->used_max, 0, st->n * sizeof *st->used_max);
  st->n_peaks = 0;
}

/* This tick's samples into the maxima, and the maxima into the view. */
static void merge_maxima(struct state *st) {
  for (unsigned i = 0; i < st->n; i++) {
    struct vl_watch_gpu *w = &st->wg[i];
    if (!w->up) continue;
    if (w->gpu->used_bytes > st->used_max[i]) st->used_max[i] = w->gpu->used_bytes;
    w->used_max_bytes = st->used_max[i];
    for (unsigned p = 0; p < w->n_procs; p++) {
      const struct vl_proc_sample *ps = &w->procs[p];
      if (ps->used_bytes == UINT64_MAX) continue;
      size_t k = 0;
      while (k < st->n_peaks && (st->peaks[k].gpu != i || st->peaks[k].pid != ps->pid))
        k++;
      if (k == st->n_peaks) {
        if (k == WATCH_PEAKS_MAX) continue;
        if (k == st->cap_peaks) {
          size_t cap = st->cap_peaks ? st->cap_peaks * 2 : 16;
          struct peak *np = vl_realloc(st->peaks, cap * sizeof *np);
          struct vl_watch_peak *nv = np ? vl_realloc(st->view_peaks, cap * sizeof *nv) : NULL;
          if (np) st->peaks = np;
          if (!nv) continue;
          st->view_peaks = nv;
          st->cap_peaks = cap;
        }
        memset(&st->peaks[k], 0, sizeof st->peaks[k]);
        st->peaks[k].gpu = i;
        st->peaks[k].pid = ps->pid;
        st->n_peaks++;
      }
      struct peak *pk = &st->peaks[k];
      if (w->idents) pk->id = w->idents[p]; /* its latest */
      if (ps->used_bytes > pk->max_bytes) pk->max_bytes = ps->used_bytes;
    }
  }
  for (size_t k = 0; k < st->n_peaks; k++) {
    const struct peak *pk = &st->peaks[k];
    st->view_peaks[k] =
        (struct vl_watch_peak){pk->gpu, st->gs[pk->gpu].uuid, pk->pid, &pk->id, pk->max_bytes};
  }
}

/* v's Prometheus exposition, *len bytes (free()), or NULL (no memory). */
static char *render_prometheus(const struct w *o, struct state *st, struct vl_watch_view *v,
                               size_t *len) {
  char *prom = NULL;
  *len = 0;
  v->peaks = st->view_peaks;
  v->n_peaks = st->n_peaks;
  FILE *m = open_memstream(&prom, len);
  if (!m) return NULL;
  bool bad = vl_render_watch(m, o->dcgm ? VL_WATCH_PROMETHEUS_DCGM : VL_WATCH_PROMETHEUS, v) != 0;
  if (fclose(m) != 0 || bad) {
    free(prom);
    return NULL;
  }
  return prom;
}

/* How often an exposition is made again when a scrape came while it was
 * made. Once made again its maxima are this sample's alone, which no
 * scrape has seen, so the last try is published without the check: still
 * exact, and a client scraping in a tight loop cannot hold the samples up. */
#define PUBLISH_TRIES 4

/* v's Prometheus exposition to the server, which is started at the first
 * sample (so that no scrape finds none, and before anything is written),
 * and into the textfile. The maxima are since the previous scrape: when
 * the server answered one since they were last reset, they start again
 * from this tick; when one comes while the exposition is made, it is made
 * again, so that no sample's value is lost between two scrapes nor shown
 * by both. With no server, each textfile write counts as a scrape.
 * @return 0 or VL_EXIT_ERROR (said). */
static int expose(const struct w *o, struct state *st, struct vl_watch_view *v,
                  struct http_server **srv) {
  uint64_t scrapes = *srv ? http_server_scrapes(*srv) : 0;
  if (*srv && scrapes != st->seen) {
    reset_maxima(st);
    st->seen = scrapes;
  }
  merge_maxima(st);
  size_t len = 0;
  char *prom = render_prometheus(o, st, v, &len);
  for (int tries = 1; prom && *srv; tries++) {
    if (tries == PUBLISH_TRIES) {
      http_server_publish(*srv, prom, len);
      break;
    }
    if (http_server_publish_if(*srv, prom, len, scrapes)) break;
    free(prom); /* scraped meanwhile: the maxima start again from this tick */
    scrapes = http_server_scrapes(*srv);
    reset_maxima(st);
    st->seen = scrapes;
    merge_maxima(st);
    prom = render_prometheus(o, st, v, &len);
  }
  if (!prom) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  /* the server takes prom, which stays readable here until the next
   * publish (http.h) */
  bool ours = !o->port_set;
  if (!*srv && o->port_set && !(*srv = serve(o, prom, len))) {
    free(prom);
    return VL_EXIT_ERROR;
  }
  int rc = 0;
  if (o->textfile && write_textfile(o->textfile, prom, len) != 0) {
    cli_error("cannot write into '%s': %s", o->textfile, strerror(errno));
    rc = VL_EXIT_ERROR;
  }
  if (ours) {
    free(prom);
    reset_maxima(st);
  }
  return rc;
}

/* Sleep until *next plus interval_ms (made the new *next), or a signal. */
static void sleep_tick(struct timespec *next, uint64_t interval_ms) {
  next->tv_nsec += (long)(interval_ms % 1000) * 1000000L;
  next->tv_sec += (time_t)(interval_ms / 1000) + next->tv_nsec / 1000000000L;
  next->tv_nsec %= 1000000000L;
  while (!stop) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms =
        (long long)(next->tv_sec - now.tv_sec) * 1000 + (next->tv_nsec - now.tv_nsec) / 1000000;
    if (ms <= 0) return;
    struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&d, NULL); /* EINTR: stop is looked at */
  }
}

int cmd_watch(int argc, const char **argv) {
  struct w o = {.interval_ms = 1000};
  int rc = cli_parse(argc, argv, opts, on_opt, &o);
  if (rc) return rc;
  if (o.help) {
    fputs(vl_help_watch, stdout);
    return VL_EXIT_OK;
  }
  if (o.csv && o.jsonl) {
    cli_error("give --csv or --jsonl, not both");
    return VL_EXIT_USAGE;
  }
  if ((rc = listen_flags(&o))) return rc;
  struct vl_nvml *nv = NULL;
  struct vl_err err = {""};
  if (vl_nvml_open(&nv, &err) != VL_OK) {
    cli_error("%s", err.msg);
    cli_hint("watch reads NVIDIA GPUs through NVML; run it on a machine with the driver");
    return VL_EXIT_ERROR;
  }
  FILE *out = stdout;
  const char *path = o.csv ? o.csv : o.jsonl;
  if (path && strcmp(path, "-") != 0 && !(out = cli_create_output(path, "a"))) {
    vl_nvml_close(nv);
    return VL_EXIT_ERROR;
  }
  /* with only a server or a textfile, no stream on stdout */
  bool stream = path || (!o.port_set && !o.textfile);
  enum vl_watch_format sfmt = o.csv ? VL_WATCH_CSV : VL_WATCH_JSONL;
  if (stream && sfmt == VL_WATCH_CSV && ftell(out) <= 0) vl_render_watch_csv_header(out);
  struct sigaction sa = {.sa_handler = on_stop};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  char host[256] = "";
  gethostname(host, sizeof host - 1);

  unsigned n = vl_nvml_count(nv);
  if (n > VL_WATCH_MAX_GPUS) n = VL_WATCH_MAX_GPUS;
  struct state st;
  struct http_server *srv = NULL;
  bool prom = o.port_set || o.textfile;
  if (!state_init(&st, n)) {
    cli_error("out of memory");
    rc = VL_EXIT_ERROR;
  }
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (uint64_t ticks = 0; !rc && !stop;) {
    unsigned unread = sample_gpus(nv, &st);
    if (prom) identify(&st, nv, o.procfs ? o.procfs : "/proc", o.dcgm);
    struct vl_watch_view v = {unix_ms(), st.wg, n, host, unread, VL_VERSION, NULL, 0};
    if (prom && (rc = expose(&o, &st, &v, &srv))) break;
    if (stream && (vl_render_watch(out, sfmt, &v) != 0 || fflush(out) != 0)) {
      cli_error("cannot write the samples: %s", strerror(errno));
      rc = VL_EXIT_ERROR;
      break;
    }
    if (o.count && ++ticks >= o.count) break;
    sleep_tick(&next, o.interval_ms);
  }
  http_server_stop(srv);
  state_release(&st);
  if (out != stdout) fclose(out);
  vl_nvml_close(nv);
  return rc;
}
