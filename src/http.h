/* watch's /metrics server: --listen's address (pure, so that the fuzz
 * harness reads what watch reads) and the server itself, GNU
 * libmicrohttpd's (http_server.c). */
#ifndef VRAMLEDGER_HTTP_H
#define VRAMLEDGER_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*! --listen ADDR[:PORT]: an IPv4 address, an IPv6 one in brackets when a
 * port follows ([::1]:9400) or bare (::1); the address (brackets off) into
 * host (cap bytes), *has_port whether a port was given, into *port.
 * @return 0, -1 when malformed. */
int http_listen_parse(const char *arg, char *host, size_t cap, uint64_t *port, bool *has_port);

/* The limits the server holds every client to (docs/cmd/watch.md). */
enum {
  HTTP_CONNS = 64,    /* at once: past HTTP_CONNS - HTTP_SPARE, a new connection closes the
                         oldest one whose request head is not whole yet */
  HTTP_SPARE = 8,     /* connections kept free that way: a burst of new ones is never refused */
  HTTP_TIMEOUT_S = 2, /* a connection silent this long is closed, reading or sending */
  HTTP_MEMORY_BYTES = 32 * 1024, /* per connection: a longer request head is refused */
};

struct http_server;

/*! Serve GET and HEAD /metrics on host (numeric, v4 or v6) and port (0: a
 * free one) from a thread of libmicrohttpd's, the body being body[0..len),
 * which the server takes (it is freed with free()). Other paths are 404,
 * other methods 405. The calling thread's signals are blocked in the
 * server's thread, so SIGINT and SIGTERM reach the caller.
 * @return the server (stopped by http_server_stop), or NULL with why in
 * why (cap bytes) and errno set: bind's (EADDRINUSE, EADDRNOTAVAIL,
 * EACCES, ...), or 0 when libmicrohttpd failed otherwise; body then still
 * the caller's. */
struct http_server *http_server_start(const char *host, uint64_t port, char *body, size_t len,
                                      char *why, size_t cap);

/*! The port the server listens on (the one picked when 0 was asked). */
unsigned http_server_port(const struct http_server *s);

/*! Serve body[0..len) from now on, instead of the previous one: the server
 * takes body (freed with free()); a request being answered keeps the copy
 * it made. The server frees a body only in http_server_publish and
 * http_server_stop, so the caller may go on reading the one it handed over
 * (from http_server_start or here) until its next call of either. */
void http_server_publish(struct http_server *s, char *body, size_t len);

/*! How many GETs of /metrics were answered so far (HEAD is not counted:
 * it carries no exposition). A GET counts when its copy of the exposition
 * is made, whether or not the client then reads it all. */
uint64_t http_server_scrapes(struct http_server *s);

/*! http_server_publish, if no GET was answered since http_server_scrapes
 * said `scrapes`. @return true when published (body the server's); false,
 * body still the caller's, when a client scraped the exposition it was to
 * replace in the meantime. */
bool http_server_publish_if(struct http_server *s, char *body, size_t len, uint64_t scrapes);

/*! Close every connection, stop the thread, free s. Accepts NULL. */
void http_server_stop(struct http_server *s);

#endif
