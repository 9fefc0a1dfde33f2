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
#include "vramledger/render.h"

enum { O_HELP, O_INTERVAL, O_CSV, O_JSONL, O_PORT, O_LISTEN, O_TEXTFILE, O_COUNT, O_NAMES };
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
    {NULL, false, 0},
};
static const char *const metric_names[] = {"vramledger", "dcgm", NULL};

struct w {
  bool help;
  uint64_t interval_ms, port, count;
  const char *csv, *jsonl, *listen, *textfile;
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

/* v's Prometheus exposition to the server, which is started at the first
 * sample (so that no scrape finds none, and before anything is written),
 * and into the textfile. @return 0 or VL_EXIT_ERROR (said). */
static int expose(const struct w *o, const struct vl_watch_view *v, struct http_server **srv) {
  char *prom = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&prom, &len);
  if (!m) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  bool bad = vl_render_watch(m, o->dcgm ? VL_WATCH_PROMETHEUS_DCGM : VL_WATCH_PROMETHEUS, v) != 0;
  if (fclose(m) != 0 || bad) {
    free(prom);
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  /* the server takes prom, which stays readable here until the next
   * publish (http.h) */
  bool ours = !o->port_set;
  if (*srv)
    http_server_publish(*srv, prom, len);
  else if (o->port_set && !(*srv = serve(o, prom, len))) {
    free(prom);
    return VL_EXIT_ERROR;
  }
  int rc = 0;
  if (o->textfile && write_textfile(o->textfile, prom, len) != 0) {
    cli_error("cannot write into '%s': %s", o->textfile, strerror(errno));
    rc = VL_EXIT_ERROR;
  }
  if (ours) free(prom);
  return rc;
}

/* Every GPU's sample and processes into gs, ps and wg (n of each at most).
 * @return how many GPUs were read. */
static unsigned sample_gpus(struct vl_nvml *nv, unsigned n, struct vl_gpu_sample *gs,
                            struct vl_proc_sample *ps, struct vl_watch_gpu *wg) {
  unsigned k = 0;
  for (unsigned i = 0; i < n; i++) {
    if (vl_nvml_sample(nv, i, &gs[k]) != VL_OK) continue;
    struct vl_proc_sample *p = ps + (size_t)k * VL_WATCH_MAX_PROCS;
    unsigned np = 0;
    if (vl_nvml_processes(nv, i, p, VL_WATCH_MAX_PROCS, &np) != VL_OK) np = 0;
    wg[k] = (struct vl_watch_gpu){&gs[k], p, np < VL_WATCH_MAX_PROCS ? np : VL_WATCH_MAX_PROCS};
    k++;
  }
  return k;
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
  struct vl_gpu_sample *gs = vl_calloc(n + 1, sizeof *gs);
  struct vl_proc_sample *ps = vl_calloc((size_t)(n + 1) * VL_WATCH_MAX_PROCS, sizeof *ps);
  struct vl_watch_gpu *wg = vl_calloc(n + 1, sizeof *wg);
  struct http_server *srv = NULL;
  if (!gs || !ps || !wg) {
    cli_error("out of memory");
    rc = VL_EXIT_ERROR;
  }
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (uint64_t ticks = 0; !rc && !stop;) {
    unsigned k = sample_gpus(nv, n, gs, ps, wg);
    struct vl_watch_view v = {unix_ms(), wg, k, host, n - k, VL_VERSION};
    if ((o.port_set || o.textfile) && (rc = expose(&o, &v, &srv))) break;
    if (stream && (vl_render_watch(out, sfmt, &v) != 0 || fflush(out) != 0)) {
      cli_error("cannot write the samples: %s", strerror(errno));
      rc = VL_EXIT_ERROR;
      break;
    }
    if (o.count && ++ticks >= o.count) break;
    sleep_tick(&next, o.interval_ms);
  }
  http_server_stop(srv);
  vl_free(gs);
  vl_free(ps);
  vl_free(wg);
  if (out != stdout) fclose(out);
  vl_nvml_close(nv);
  return rc;
}
