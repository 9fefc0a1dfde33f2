/* watch's --listen address: see http.h. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
