/* watch's /metrics server: what is read from a request's bytes, and
 * --listen's address, apart from the sockets (pure, so that the fuzz
 * harness reads what watch reads). */
#ifndef VRAMLEDGER_HTTP_H
#define VRAMLEDGER_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*! Whether b[0..n) holds a whole request head: it ends with an empty line
 * (RFC 9112 section 2.1); bare LFs are tolerated (2.2). b[0..seen) was
 * found not whole before (0: not asked): only what follows is searched, so
 * a head arriving byte by byte costs its length, not its square. */
bool http_head_complete(const char *b, size_t n, size_t seen);

/*! The answer to the request in req (NUL-terminated): GET or HEAD
 * /metrics -> 200, another path -> 404, another method -> 405, no request
 * line -> 400; a status given (not 0: 408, 431) is kept. *head: the
 * request is a HEAD one (headers only). */
int http_status(const char *req, int status, bool *head);

/*! --listen ADDR[:PORT]: an IPv4 address, an IPv6 one in brackets when a
 * port follows ([::1]:9400) or bare (::1); the address (brackets off) into
 * host (cap bytes), *has_port whether a port was given, into *port.
 * @return 0, -1 when malformed. */
int http_listen_parse(const char *arg, char *host, size_t cap, uint64_t *port, bool *has_port);

#endif
