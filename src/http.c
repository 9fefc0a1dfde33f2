/* watch's /metrics server, its parsing: see http.h. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool http_head_complete(const char *b, size_t n, size_t seen) {
  /* an end not whole in b[0..seen) starts at seen - 2 or later */
  for (size_t i = seen > 2 ? seen - 2 : 0; i + 1 < n; i++)
    if (b[i] == '\n' && (b[i + 1] == '\n' || (b[i + 1] == '\r' && i + 2 < n && b[i + 2] == '\n')))
      return true;
  return false;
}

int http_status(const char *req, int status, bool *head) {
  char method[16] = "", path[2048] = "";
  if (sscanf(req, "%15[A-Z] %2047[^ ?\r\n]", method, path) != 2 && !status) status = 400;
  *head = strcmp(method, "HEAD") == 0;
  if (!status)
    status = !*head && strcmp(method, "GET") != 0 ? 405 : strcmp(path, "/metrics") != 0 ? 404 : 200;
  return status;
}

int http_listen_parse(const char *arg, char *host, size_t cap, uint64_t *port, bool *has_port) {
  const char *end = NULL, *colon = NULL;
  if (arg[0] == '[') {
    if (!(end = strchr(arg, ']')) || (end[1] && end[1] != ':')) return -1;
    colon = end[1] ? end + 1 : NULL;
    arg++;
  } else if ((colon = strchr(arg, ':')) && strchr(colon + 1, ':')) {
    colon = NULL; /* bare IPv6: no port */
  }
  if (!end) end = colon ? colon : arg + strlen(arg);
  if (end == arg || (size_t)(end - arg) >= cap) return -1;
  memcpy(host, arg, (size_t)(end - arg));
  host[end - arg] = '\0';
  *has_port = colon != NULL;
  if (!colon) return 0;
  char *e;
  errno = 0;
  unsigned long v = strtoul(colon + 1, &e, 10);
  if (colon[1] < '0' || colon[1] > '9' || *e || errno || v > 65535) return -1; /* digits only */
  *port = v;
  return 0;
}
