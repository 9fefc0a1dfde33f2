/* libFuzzer harness: what `watch --prometheus-port` reads from a client.
 * First byte even: the rest is a request arriving in segments of 1 to 128
 * bytes (the second byte), read as watch's server reads it into a head of
 * HTTP_HEAD_MAX bytes: answered once whole, 431 when full, and as it is
 * when the client closes. First byte odd: the rest is a --listen address. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { HEAD_MAX = 8192 }; /* cmd_watch.c's HTTP_HEAD_MAX */

static void answer(char *buf, size_t len, int status) {
  buf[len] = '\0';
  bool head;
  int s = http_status(buf, status, &head);
  if (s != 200 && s != 400 && s != 404 && s != 405 && s != 408 && s != 431) __builtin_trap();
  if (status && s != status) __builtin_trap();
}

static void request(const uint8_t *data, size_t size) {
  if (!size) return;
  size_t seg = (size_t)(data[0] % 128) + 1;
  data++;
  size--;
  static char buf[HEAD_MAX];
  size_t len = 0;
  for (size_t at = 0;;) {
    if (len >= sizeof buf - 1) {
      if (http_head_complete(buf, len, 0))
        __builtin_trap(); /* the search from the new bytes missed it */
      answer(buf, len, 431);
      return;
    }
    size_t n = size - at < seg ? size - at : seg;
    if (n > sizeof buf - 1 - len) n = sizeof buf - 1 - len;
    if (!n) { /* the client closed its side */
      if (http_head_complete(buf, len, 0)) __builtin_trap();
      if (memchr(buf, '\n', len)) answer(buf, len, 0);
      answer(buf, len, 408); /* or it waited too long */
      return;
    }
    memcpy(buf + len, data + at, n);
    len += n;
    at += n;
    if (http_head_complete(buf, len, len - n)) {
      answer(buf, len, 0);
      return;
    }
  }
}

static void listen_arg(const uint8_t *data, size_t size) {
  char arg[512], host[256];
  if (size >= sizeof arg) return;
  memcpy(arg, data, size);
  arg[size] = '\0';
  uint64_t port = 0;
  bool has_port = false;
  if (http_listen_parse(arg, host, sizeof host, &port, &has_port) == 0) {
    if (!host[0] || strlen(host) >= sizeof host || port > 65535) __builtin_trap();
    /* a port is digits only: strtoul would take " 80" or "+80" */
    const char *p = strrchr(arg, ':');
    if (has_port && (!p || !p[1] || strspn(p + 1, "0123456789") != strlen(p + 1))) __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  if (data[0] % 2)
    listen_arg(data + 1, size - 1);
  else
    request(data + 1, size - 1);
  return 0;
}
