/* watch's /metrics server on GNU libmicrohttpd (see http.h).
 *
 * libmicrohttpd reads and writes every connection without blocking from one
 * thread of its own (MHD_USE_INTERNAL_POLLING_THREAD), so a slow, a split or
 * a silent client holds up neither another scrape nor the sampling loop,
 * which never touches a socket. What that thread reads of the loop's state
 * is one exposition: the loop renders the next one outside any lock and
 * swaps the pointer under s->mu; a request copies the current one under
 * s->mu into its response (MHD_RESPMEM_MUST_COPY). A snapshot swapped
 * under a lock rather than a lock held while rendering: the loop waits on
 * nothing a client does, and a request on nothing but a memcpy of a few
 * kilobytes.
 *
 * A GET of /metrics is a scrape: counted under s->mu as its copy is made,
 * so that the loop, which publishes only while the count is the one it
 * read (http_server_publish_if), knows whether the exposition it is about
 * to replace reached a client (watch's *_max_bytes: the most since the
 * previous scrape).
 *
 * Slow clients are not let in to starve the others: a client that sends a
 * byte a second is never silent for HTTP_TIMEOUT_S, so the timeout alone
 * would let 64 of them hold every connection (and a cap per address would
 * shut out a scraper on the same host as them). Instead, when a connection
 * opens with fewer than HTTP_SPARE free, the oldest one whose request head
 * is not whole yet is shut down: a scrape, whose head arrives in one
 * segment, is answered before HTTP_CONNS - HTTP_SPARE others have opened
 * after it. The table of connections is touched only by libmicrohttpd's one
 * thread (its notification and request callbacks), so it takes no lock. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"
#include "vramledger/alloc.h"

/* One open connection: its order of opening, and whether its request head
 * came whole (then it is answered and closes) or it was shut down. */
struct conn {
  struct MHD_Connection *c; /* NULL: a free entry */
  uint64_t seq;
  bool whole, shut;
};

struct http_server {
  struct MHD_Daemon *d;
  struct conn conns[HTTP_CONNS]; /* libmicrohttpd's thread only */
  uint64_t opened;
  pthread_mutex_t mu; /* guards body, len, scrapes, why */
  char *body;         /* the exposition served, owned (free()) */
  size_t len;
  uint64_t scrapes; /* GETs of /metrics answered with body so far */
  char *why;        /* while starting: where libmicrohttpd's first complaint goes */
  size_t why_cap;
};

/* libmicrohttpd's messages: while starting, the first one is why it failed
 * (bind's error, named); once serving, nothing is printed, as a refused or
 * timed-out client is the limits working, not a fault of watch. */
static void on_log(void *cls, const char *fmt, va_list ap) {
  struct http_server *s = cls;
  pthread_mutex_lock(&s->mu);
  if (s->why && !s->why[0]) {
    vsnprintf(s->why, s->why_cap, fmt, ap);
    s->why[strcspn(s->why, "\r\n")] = '\0';
  }
  pthread_mutex_unlock(&s->mu);
}

static const char prom_type[] = "text/plain; version=0.0.4; charset=utf-8";

/* A response with HTTP/1.0's status line (one request per connection,
 * closed after the answer) and its Content-Type; NULL when out of memory. */
static struct MHD_Response *response(struct http_server *s, unsigned status, bool get) {
  static const struct {
    unsigned code;
    const char *body;
  } texts[] = {{404, "not found\n"}, {405, "GET or HEAD /metrics\n"}};
  struct MHD_Response *r = NULL;
  if (status == MHD_HTTP_OK) {
    pthread_mutex_lock(&s->mu);
    r = MHD_create_response_from_buffer(s->len, s->body, MHD_RESPMEM_MUST_COPY);
    if (r && get) s->scrapes++;
    pthread_mutex_unlock(&s->mu);
  }
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
    if (texts[k].code == status)
      r = MHD_create_response_from_buffer(strlen(texts[k].body), (void *)texts[k].body,
                                          MHD_RESPMEM_PERSISTENT);
  if (!r) return NULL;
  if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                              status == MHD_HTTP_OK ? prom_type : "text/plain") != MHD_YES ||
      (status == MHD_HTTP_METHOD_NOT_ALLOWED &&
       MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES) ||
      MHD_set_response_options(r, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END) != MHD_YES) {
    MHD_destroy_response(r);
    return NULL;
  }
  return r;
}

/* Shut down the oldest connection of s whose head is not whole, but for
 * keep; libmicrohttpd then reads its end and closes it. */
static void shut_oldest(struct http_server *s, const struct conn *keep) {
  struct conn *old = NULL;
  for (size_t i = 0; i < HTTP_CONNS; i++) {
    struct conn *k = &s->conns[i];
    if (k->c && k != keep && !k->whole && !k->shut && (!old || k->seq < old->seq)) old = k;
  }
  if (!old) return;
  const union MHD_ConnectionInfo *fd =
      MHD_get_connection_info(old->c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (fd) shutdown(fd->connect_fd, SHUT_RDWR);
  old->shut = true;
}

/* A connection opened or closed: kept in s->conns, the oldest slow one shut
 * when fewer than HTTP_SPARE are left. */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_ConnectionNotificationCode what) {
  struct http_server *s = cls;
  if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
    if (*ctx) *(struct conn *)*ctx = (struct conn){0};
    return;
  }
  struct conn *mine = NULL;
  size_t open = 0;
  for (size_t i = 0; i < HTTP_CONNS; i++) {
    if (!s->conns[i].c && !mine) mine = &s->conns[i];
    open += s->conns[i].c && !s->conns[i].shut;
  }
  if (!mine) return; /* libmicrohttpd holds no more than HTTP_CONNS */
  *mine = (struct conn){.c = c, .seq = ++s->opened};
  *ctx = mine;
  if (open + 1 > HTTP_CONNS - HTTP_SPARE) shut_oldest(s, mine);
}

/* GET or HEAD /metrics -> 200 with the last exposition (HEAD: libmicrohttpd
 * sends the headers alone), another path -> 404, another method -> 405.
 * Answered at the first call, once the head is whole: a body sent with the
 * request is never read (libmicrohttpd closes the connection after). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **req) {
  (void)version, (void)upload, (void)upload_len, (void)req;
  const union MHD_ConnectionInfo *ctx =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (ctx && ctx->socket_context) ((struct conn *)ctx->socket_context)->whole = true;
  bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  unsigned status = !get && !head                  ? MHD_HTTP_METHOD_NOT_ALLOWED
                    : strcmp(url, "/metrics") != 0 ? MHD_HTTP_NOT_FOUND
                                                   : MHD_HTTP_OK;
  struct MHD_Response *r = response(cls, status, get);
  if (!r) return MHD_NO; /* out of memory: the connection is closed */
  enum MHD_Result q = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return q;
}

/* libmicrohttpd's daemon on sa, from a thread with every signal blocked. */
static struct MHD_Daemon *daemon_on(struct http_server *s, const struct sockaddr *sa) {
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  /* [::] serves IPv4 too, as a socket does by default on Linux
   * (net.ipv6.bindv6only = 0) */
  if (sa->sa_family == AF_INET6) flags |= MHD_USE_DUAL_STACK;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* the logger first, so that it hears what the other options say */
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
      MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNS,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_BYTES,
      MHD_OPTION_END);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return d;
}

struct http_server *http_server_start(const char *host, uint64_t port, char *body, size_t len,
                                      char *why, size_t cap) {
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                           .ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, service, &hints, &ai) != 0 || !ai) {
    snprintf(why, cap, "not an IPv4 or IPv6 address");
    return NULL;
  }
  struct http_server *s = vl_calloc(1, sizeof *s);
  if (!s || pthread_mutex_init(&s->mu, NULL) != 0) {
    snprintf(why, cap, "out of memory");
    vl_free(s);
    freeaddrinfo(ai);
    return NULL;
  }
  why[0] = '\0';
  s->body = body;
  s->len = len;
  s->why = why;
  s->why_cap = cap;
  errno = 0;
  s->d = daemon_on(s, ai->ai_addr);
  int e = errno; /* bind's, which libmicrohttpd leaves as it found it */
  freeaddrinfo(ai);
  pthread_mutex_lock(&s->mu);
  s->why = NULL;
  pthread_mutex_unlock(&s->mu);
  if (!s->d) {
    /* its words name the port asked (0 with MHD_OPTION_SOCK_ADDR), the
     * system's do not */
    if (e)
      snprintf(why, cap, "%s", strerror(e));
    else if (!why[0])
      snprintf(why, cap, "libmicrohttpd could not start");
    pthread_mutex_destroy(&s->mu);
    vl_free(s);
    errno = e;
    return NULL;
  }
  return s;
}

unsigned http_server_port(const struct http_server *s) {
  const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  return i ? i->port : 0;
}

uint64_t http_server_scrapes(struct http_server *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->scrapes;
  pthread_mutex_unlock(&s->mu);
  return n;
}

bool http_server_publish_if(struct http_server *s, char *body, size_t len, uint64_t scrapes) {
  pthread_mutex_lock(&s->mu);
  char *old = NULL;
  bool now = s->scrapes == scrapes;
  if (now) {
    old = s->body;
    s->body = body;
    s->len = len;
  }
  pthread_mutex_unlock(&s->mu);
  free(old);
  return now;
}

void http_server_publish(struct http_server *s, char *body, size_t len) {
  pthread_mutex_lock(&s->mu);
  char *old = s->body;
  s->body = body;
  s->len = len;
  pthread_mutex_unlock(&s->mu);
  free(old);
}

void http_server_stop(struct http_server *s) {
  if (!s) return;
  MHD_stop_daemon(s->d);
  pthread_mutex_destroy(&s->mu);
  free(s->body);
  vl_free(s);
}
