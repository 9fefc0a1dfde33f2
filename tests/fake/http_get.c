/* http_get [-a ADDR] [-X METHOD] [-p BYTES] [-s | -w MS | -b MS] PORT PATH:
 * send "METHOD PATH HTTP/1.0" (GET unless -X) to ADDR (127.0.0.1 unless -a;
 * IPv4 or IPv6) and print the whole response (status line, headers, body);
 * -p adds a header "X-Pad: aaa..." BYTES long (a large request head). -s
 * sends the request in three TCP segments, 100 ms apart, the first ending
 * inside the request line; -w connects, sends nothing for MS ms, then
 * prints what came back; -b sends the request a byte at a time, MS ms
 * apart (a slow client). A test tool with no curl. */
#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { PAD_MAX = 1 << 20 };

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *addr = "127.0.0.1", *method = "GET";
  int split = 0, i = 1;
  long wait_ms = 0, byte_ms = 0, pad = 0;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "-a") == 0 && i + 1 < argc)
      addr = argv[++i];
    else if (strcmp(argv[i], "-X") == 0 && i + 1 < argc)
      method = argv[++i];
    else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
      pad = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-s") == 0)
      split = 1;
    else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc)
      wait_ms = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
      byte_ms = strtol(argv[++i], NULL, 10);
    else
      return 2;
  }
  if (argc - i != 2 || pad < 0 || pad > PAD_MAX) return 2;
  signal(SIGPIPE, SIG_IGN); /* a server may answer and close before all is sent */
  unsigned short port = (unsigned short)strtoul(argv[i], NULL, 10);
  struct sockaddr_storage ss = {0};
  socklen_t len;
  int family;
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
    family = v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
    family = v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
  } else {
    return 2;
  }
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) != 0) return 1;
  int one = 1; /* each write its own segment */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  static char req[512 + PAD_MAX], padding[PAD_MAX + 1];
  memset(padding, 'a', (size_t)pad);
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: localhost\r\n%s%s%s\r\n", method,
                   argv[i + 1], pad ? "X-Pad: " : "", padding, pad ? "\r\n" : "");
  if (n < 0 || (size_t)n >= sizeof req) return 2;
  size_t cut[3] = {(size_t)n, (size_t)n, (size_t)n};
  if (split) {
    cut[0] = strlen(method) + 3; /* "GET /m" */
    cut[1] = (size_t)n - 3;      /* all but "\n\r\n" */
  }
  if (wait_ms) {
    struct timespec d = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
    cut[0] = cut[1] = cut[2] = 0; /* nothing */
  }
  for (size_t b = 0; byte_ms && b < (size_t)n; b++) {
    struct timespec d = {byte_ms / 1000, (byte_ms % 1000) * 1000000L};
    if (b) nanosleep(&d, NULL);
    if (send_all(fd, req + b, 1) != 0) return 1;
  }
  if (byte_ms) cut[0] = cut[1] = cut[2] = 0; /* sent */
  size_t at = 0;
  for (int k = 0; k < 3; k++) {
    if (cut[k] <= at) continue;
    if (k) {
      struct timespec d = {0, 100 * 1000000L};
      nanosleep(&d, NULL);
    }
    if (send_all(fd, req + at, cut[k] - at) != 0) break; /* refused before the end: its answer */
    at = cut[k];
  }
  char buf[4096];
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0)
    fwrite(buf, 1, (size_t)r, stdout);
  close(fd);
  return 0;
}
