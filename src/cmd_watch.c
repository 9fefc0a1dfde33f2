/* vramledger watch: sample every GPU and every process on it, like
 * `nvidia-smi --query-compute-apps -l` at millisecond resolution, to CSV or
 * JSON Lines, Prometheus /metrics, or node_exporter textfiles.
 * docs/cmd/watch.md is the manual. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
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

/* ---- /metrics: HTTP/1.0, one request per connection, no keep-alive ----
 *
 * A request may arrive in several TCP segments, so each connection keeps
 * its bytes until the blank line that ends the head (RFC 9112 section 2.1)
 * and the sampling loop never waits on one client: every connection is
 * read when poll says it can be. */
enum {
  HTTP_CONNS = 16,      /* at once; a 17th drops the oldest */
  HTTP_HEAD_MAX = 8192, /* a longer head is answered 431 */
  HTTP_WAIT_MS = 2000,  /* a head not whole by then is answered 408 */
  HTTP_WRITE_MS = 2000, /* the answer's send timeout */
};
struct http_conn {
  bool open;
  int fd;
  uint64_t deadline_ms; /* CLOCK_MONOTONIC */
  size_t len;
  char buf[HTTP_HEAD_MAX];
};

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* the client went away or stalled past the timeout */
    p += w;
    n -= (size_t)w;
  }
}

/* Answer the request in c->buf: GET or HEAD /metrics -> the last
 * exposition (HEAD: its headers only), another path -> 404, another
 * method -> 405, no request line -> 400; status 0 picks by the request. */
static void http_answer(struct http_conn *c, int status, const char *body, size_t len) {
  c->buf[c->len < sizeof c->buf ? c->len : sizeof c->buf - 1] = '\0';
  bool head;
  status = http_status(c->buf, status, &head);
  static const struct {
    int code;
    const char *reason, *body;
  } answers[] = {
      {200, "OK", NULL},
      {400, "Bad Request", "bad request\n"},
      {404, "Not Found", "not found\n"},
      {405, "Method Not Allowed", "GET or HEAD /metrics\n"},
      {408, "Request Timeout", "request timeout\n"},
      {431, "Request Header Fields Too Large", "request head too large\n"},
  };
  size_t k = 0;
  while (answers[k].code != status)
    k++;
  if (status != 200) {
    body = answers[k].body;
    len = strlen(body);
  }
  char h[256];
  int n = snprintf(h, sizeof h,
                   "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                   "Connection: close\r\n\r\n",
                   status, answers[k].reason,
                   status == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain", len,
                   status == 405 ? "Allow: GET, HEAD\r\n" : "");
  /* the answer is written blocking, with a timeout: a slow reader costs at
   * most HTTP_WRITE_MS, never a sample */
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
  struct timeval tv = {HTTP_WRITE_MS / 1000, (HTTP_WRITE_MS % 1000) * 1000};
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  write_all(c->fd, h, (size_t)n);
  if (!head) write_all(c->fd, body, len);
}

static void http_close(struct http_conn *c) {
  close(c->fd);
  c->open = false;
}

/* Read what a connection has; answer and close once its head is whole. */
static void http_read(struct http_conn *c, const char *body, size_t len) {
  for (;;) {
    if (c->len >= sizeof c->buf - 1) {
      http_answer(c, 431, body, len);
      http_close(c);
      return;
    }
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return; /* more to come */
    if (n <= 0) { /* the client closed its side: answer a whole request line */
      if (n == 0 && memchr(c->buf, '\n', c->len)) http_answer(c, 0, body, len);
      http_close(c);
      return;
    }
    c->len += (size_t)n;
    if (http_head_complete(c->buf, c->len, c->len - (size_t)n)) {
      http_answer(c, 0, body, len);
      http_close(c);
      return;
    }
  }
}

/* Wait up to timeout_ms for connections and requests, and serve them. */
static void http_poll(int lfd, struct http_conn *conns, int timeout_ms, const char *body,
                      size_t len) {
  struct pollfd p[1 + HTTP_CONNS] = {{lfd, POLLIN, 0}};
  struct http_conn *of[1 + HTTP_CONNS] = {NULL};
  nfds_t n = 1;
  uint64_t now = mono_ms();
  for (int i = 0; i < HTTP_CONNS; i++) {
    if (!conns[i].open) continue;
    if (conns[i].deadline_ms <= now) {
      http_answer(&conns[i], 408, body, len);
      http_close(&conns[i]);
      continue;
    }
    if ((int64_t)(conns[i].deadline_ms - now) < timeout_ms)
      timeout_ms = (int)(conns[i].deadline_ms - now);
    of[n] = &conns[i];
    p[n++] = (struct pollfd){conns[i].fd, POLLIN, 0};
  }
  if (poll(p, n, timeout_ms) <= 0) return;
  for (nfds_t i = 1; i < n; i++)
    if (p[i].revents) http_read(of[i], body, len);
  if (!(p[0].revents & POLLIN)) return;
  int fd = accept(lfd, NULL, NULL);
  if (fd < 0) return;
  struct http_conn *c = NULL, *oldest = &conns[0];
  for (int i = 0; i < HTTP_CONNS && !c; i++) {
    if (!conns[i].open)
      c = &conns[i];
    else if (conns[i].deadline_ms < oldest->deadline_ms)
      oldest = &conns[i];
  }
  if (!c) { /* all taken: the oldest goes */
    http_close(oldest);
    c = oldest;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  *c = (struct http_conn){.open = true, .fd = fd, .deadline_ms = mono_ms() + HTTP_WAIT_MS};
  http_read(c, body, len); /* the request is often there already */
}

/* A listening socket on host (numeric, v4 or v6) and port; says where on
 * stderr. @return the fd, or -1 with errno (EINVAL: not an address). */
static int listen_on(const char *host, uint64_t port) {
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                           .ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, service, &hints, &ai) != 0 || !ai) {
    errno = EINVAL;
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool v6 = ai->ai_family == AF_INET6;
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    int e = errno;
    close(fd);
    freeaddrinfo(ai);
    errno = e;
    return -1;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage sa;
  socklen_t sl = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  unsigned bound =
      ntohs(v6 ? ((struct sockaddr_in6 *)&sa)->sin6_port : ((struct sockaddr_in *)&sa)->sin_port);
  fprintf(stderr, "vramledger: serving Prometheus metrics on http://%s%s%s:%u/metrics\n",
          v6 ? "[" : "", host, v6 ? "]" : "", bound);
  return fd;
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
  int lfd = -1;
  bool v6 = strchr(o.host, ':') != NULL;
  if (o.port_set && (lfd = listen_on(o.host, o.port)) < 0) {
    cli_error("cannot listen on %s%s%s:%llu: %s", v6 ? "[" : "", o.host, v6 ? "]" : "",
              (unsigned long long)o.port, strerror(errno));
    vl_nvml_close(nv);
    if (out != stdout) fclose(out);
    return VL_EXIT_ERROR;
  }
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
  struct http_conn *conns = lfd >= 0 ? vl_calloc(HTTP_CONNS, sizeof *conns) : NULL;
  char *prom = NULL;
  size_t prom_len = 0;
  if (!gs || !ps || !wg || (lfd >= 0 && !conns)) {
    cli_error("out of memory");
    rc = VL_EXIT_ERROR;
    goto done;
  }
  uint64_t ticks = 0;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!stop) {
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
      if (vl_nvml_sample(nv, i, &gs[k]) != VL_OK) continue;
      unsigned np = 0;
      if (vl_nvml_processes(nv, i, ps + (size_t)k * VL_WATCH_MAX_PROCS, VL_WATCH_MAX_PROCS, &np) !=
          VL_OK)
        np = 0;
      wg[k] = (struct vl_watch_gpu){&gs[k], ps + (size_t)k * VL_WATCH_MAX_PROCS,
                                    np < VL_WATCH_MAX_PROCS ? np : VL_WATCH_MAX_PROCS};
      k++;
    }
    struct vl_watch_view v = {unix_ms(), wg, k, host, n - k, VL_VERSION};
    if (stream && (vl_render_watch(out, sfmt, &v) != 0 || fflush(out) != 0)) {
      cli_error("cannot write the samples: %s", strerror(errno));
      rc = VL_EXIT_ERROR;
      break;
    }
    if (lfd >= 0 || o.textfile) {
      free(prom);
      prom = NULL;
      FILE *m = open_memstream(&prom, &prom_len);
      enum vl_watch_format pfmt = o.dcgm ? VL_WATCH_PROMETHEUS_DCGM : VL_WATCH_PROMETHEUS;
      if (!m || vl_render_watch(m, pfmt, &v) != 0 || fclose(m) != 0) {
        cli_error("out of memory");
        rc = VL_EXIT_ERROR;
        break;
      }
      if (o.textfile && write_textfile(o.textfile, prom, prom_len) != 0) {
        cli_error("cannot write into '%s': %s", o.textfile, strerror(errno));
        rc = VL_EXIT_ERROR;
        break;
      }
    }
    if (o.count && ++ticks >= o.count) break;
    next.tv_nsec += (long)(o.interval_ms % 1000) * 1000000L;
    next.tv_sec += (time_t)(o.interval_ms / 1000) + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    /* until the next tick: answer scrapes, or just sleep */
    for (;;) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long long ms =
          (long long)(next.tv_sec - now.tv_sec) * 1000 + (next.tv_nsec - now.tv_nsec) / 1000000;
      if (ms <= 0 || stop) break;
      if (lfd < 0) {
        struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
        continue;
      }
      http_poll(lfd, conns, (int)(ms > 1000 ? 1000 : ms), prom ? prom : "", prom ? prom_len : 0);
    }
  }
done:
  free(prom);
  vl_free(gs);
  vl_free(ps);
  vl_free(wg);
  for (int i = 0; conns && i < HTTP_CONNS; i++)
    if (conns[i].open) http_close(&conns[i]);
  vl_free(conns);
  if (lfd >= 0) close(lfd);
  if (out != stdout) fclose(out);
  vl_nvml_close(nv);
  return rc;
}
