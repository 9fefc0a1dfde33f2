/* vramledger watch: sample every GPU and every process on it, like
 * `nvidia-smi --query-compute-apps -l` at millisecond resolution, to CSV or
 * JSON Lines, Prometheus /metrics, or node_exporter textfiles.
 * docs/cmd/watch.md is the manual. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "vramledger/alloc.h"
#include "vramledger/nvml.h"
#include "vramledger/render.h"

enum { O_HELP, O_INTERVAL, O_CSV, O_JSONL, O_PORT, O_LISTEN, O_TEXTFILE, O_COUNT };
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},        {"interval-ms", true, O_INTERVAL}, {"csv", true, O_CSV},
    {"jsonl", true, O_JSONL},       {"prometheus-port", true, O_PORT}, {"listen", true, O_LISTEN},
    {"textfile", true, O_TEXTFILE}, {"count", true, O_COUNT},          {NULL, false, 0},
};

struct w {
  bool help;
  uint64_t interval_ms, port, count;
  const char *csv, *jsonl, *listen, *textfile;
  bool port_set;
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

/* Answer one HTTP request on a connected socket: GET /metrics -> the last
 * exposition, anything else -> 404. One short request, no keep-alive. */
static void serve(int fd, const char *body, size_t len) {
  char req[1024];
  struct pollfd p = {fd, POLLIN, 0};
  ssize_t n = poll(&p, 1, 200) > 0 ? read(fd, req, sizeof req - 1) : -1;
  if (n <= 0) return;
  req[n] = '\0';
  char head[256];
  bool ok = strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET /metrics?", 13) == 0;
  int h = ok ? snprintf(head, sizeof head,
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                        len)
             : snprintf(head, sizeof head,
                        "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 10\r\nConnection: close\r\n\r\nnot found\n");
  ssize_t w = write(fd, head, (size_t)h);
  if (ok && w == h && len) w = write(fd, body, len);
  (void)w;
}

static int listen_on(const char *addr, uint64_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  socklen_t sl = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  fprintf(stderr, "vramledger: serving Prometheus metrics on http://%s:%u/metrics\n", addr,
          ntohs(sa.sin_port));
  return fd;
}

/* textfile collector: write then rename, so node_exporter never reads half */
static int write_textfile(const char *dir, const char *body, size_t len) {
  char tmp[PATH_MAX], dst[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%.4000s/vramledger.prom.%d.tmp", dir, (int)getpid());
  snprintf(dst, sizeof dst, "%.4000s/vramledger.prom", dir);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  size_t w = fwrite(body, 1, len, f);
  if (fclose(f) != 0 || w != len || rename(tmp, dst) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

int cmd_watch(int argc, const char **argv) {
  struct w o = {.interval_ms = 1000, .listen = "127.0.0.1"};
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
  struct vl_nvml *nv = NULL;
  struct vl_err err = {""};
  if (vl_nvml_open(&nv, &err) != VL_OK) {
    cli_error("%s", err.msg);
    cli_hint("watch reads NVIDIA GPUs through NVML; run it on a machine with the driver");
    return VL_EXIT_ERROR;
  }
  FILE *out = stdout;
  const char *path = o.csv ? o.csv : o.jsonl;
  if (path && strcmp(path, "-") != 0 && !(out = fopen(path, "a"))) {
    cli_error("cannot open '%s': %s", path, strerror(errno));
    vl_nvml_close(nv);
    return VL_EXIT_ERROR;
  }
  /* with only a server or a textfile, no stream on stdout */
  bool stream = path || (!o.port_set && !o.textfile);
  enum vl_watch_format sfmt = o.csv ? VL_WATCH_CSV : VL_WATCH_JSONL;
  if (stream && sfmt == VL_WATCH_CSV && ftell(out) <= 0) vl_render_watch_csv_header(out);
  int lfd = -1;
  if (o.port_set && (lfd = listen_on(o.listen, o.port)) < 0) {
    cli_error("cannot listen on %s:%llu: %s", o.listen, (unsigned long long)o.port,
              strerror(errno));
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
  char *prom = NULL;
  size_t prom_len = 0;
  if (!gs || !ps || !wg) {
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
    struct vl_watch_view v = {unix_ms(), wg, k, host};
    if (stream && (vl_render_watch(out, sfmt, &v) != 0 || fflush(out) != 0)) {
      cli_error("cannot write the samples: %s", strerror(errno));
      rc = VL_EXIT_ERROR;
      break;
    }
    if (lfd >= 0 || o.textfile) {
      free(prom);
      prom = NULL;
      FILE *m = open_memstream(&prom, &prom_len);
      if (!m || vl_render_watch(m, VL_WATCH_PROMETHEUS, &v) != 0 || fclose(m) != 0) {
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
      struct pollfd p = {lfd, POLLIN, 0};
      if (poll(&p, 1, (int)(ms > 1000 ? 1000 : ms)) > 0) {
        int c = accept(lfd, NULL, NULL);
        if (c >= 0) {
          serve(c, prom ? prom : "", prom ? prom_len : 0);
          close(c);
        }
      }
    }
  }
done:
  free(prom);
  vl_free(gs);
  vl_free(ps);
  vl_free(wg);
  if (lfd >= 0) close(lfd);
  if (out != stdout) fclose(out);
  vl_nvml_close(nv);
  return rc;
}
