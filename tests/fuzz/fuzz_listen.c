/* libFuzzer harness: `watch --listen ADDR[:PORT]` as src/http.c reads it
 * (the requests themselves are read by libmicrohttpd). The input is the
 * argument, cut at its first NUL as argv would be. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char arg[512], host[256];
  if (size >= sizeof arg) return 0;
  memcpy(arg, data, size);
  arg[size] = '\0';
  uint64_t port = 0;
  bool has_port = false;
  if (http_listen_parse(arg, host, sizeof host, &port, &has_port) != 0) return 0;
  if (!host[0] || strlen(host) >= sizeof host || port > 65535) __builtin_trap();
  /* a port is digits only: strtoul would take " 80" or "+80" */
  const char *p = strrchr(arg, ':');
  if (has_port && (!p || !p[1] || strspn(p + 1, "0123456789") != strlen(p + 1))) __builtin_trap();
  /* the address is what came before the port, brackets off */
  size_t n = strlen(host);
  const char *at = arg[0] == '[' ? arg + 1 : arg;
  if (strncmp(at, host, n) != 0 || (has_port && at + n + (arg[0] == '[') != p)) __builtin_trap();
  return 0;
}
