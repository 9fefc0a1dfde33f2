/* The runtime guard's throughput watch: see guard.h. */
#define _GNU_SOURCE /* memmem */
#include "guard.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tput_open(struct tput_watch *w, const char *path) {
  memset(w, 0, sizeof *w);
  w->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (w->fd < 0) return -1;
  if (lseek(w->fd, 0, SEEK_END) < 0) {
    close(w->fd);
    w->fd = -1;
    return -1;
  }
  return 0;
}

void tput_close(struct tput_watch *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void step(struct tput_watch *w, const char *line, size_t n) {
  if (!memmem(line, n, "\"type\":\"step\"", 13)) return;
  json_t *o = json_loadb(line, n, 0, NULL);
  if (!o) return;
  json_int_t pid = json_integer_value(json_object_get(o, "pid"));
  json_int_t rank = json_integer_value(json_object_get(o, "rank"));
  json_int_t stepno = json_integer_value(json_object_get(o, "step"));
  json_int_t tokens = json_integer_value(json_object_get(o, "tokens"));
  json_int_t ns = json_integer_value(json_object_get(o, "time_ns"));
  json_decref(o);
  size_t k = 0;
  while (k < w->npids && w->pids[k] != (unsigned)pid)
    k++;
  if (k == w->npids && w->npids < sizeof w->pids / sizeof w->pids[0])
    w->pids[w->npids++] = (unsigned)pid;
  if (rank != 0 || stepno <= GUARD_WARMUP || tokens <= 0 || ns <= 0) return;
  w->rate[w->at] = (double)tokens * 1e9 / (double)ns;
  w->at = (w->at + 1) % GUARD_WINDOW;
  if (w->n < GUARD_WINDOW) w->n++;
  w->seen_steady++;
}

/* The lines of the w->len bytes in the buffer: each whole one read, the
 * rest kept for the next bytes; a line longer than the buffer is dropped.
 * The kept bytes hold no newline: the next scan starts after them (a long
 * line arriving in small pieces is not searched again and again). */
static void scan(struct tput_watch *w) {
  size_t start = 0;
  for (size_t i = w->scanned; i < w->len; i++)
    if (w->buf[i] == '\n') {
      step(w, w->buf + start, i - start);
      start = i + 1;
    }
  if (start == 0 && w->len == sizeof w->buf) {
    w->len = w->scanned = 0;
    return;
  }
  memmove(w->buf, w->buf + start, w->len - start);
  w->len -= start;
  w->scanned = w->len;
}

void tput_feed(struct tput_watch *w, const char *data, size_t n) {
  while (n) {
    size_t c = sizeof w->buf - w->len < n ? sizeof w->buf - w->len : n;
    memcpy(w->buf + w->len, data, c);
    w->len += c;
    data += c;
    n -= c;
    scan(w);
  }
}

double tput_rate(const struct tput_watch *w) {
  if (w->seen_steady < GUARD_MIN_STEPS) return 0;
  double v[GUARD_WINDOW];
  memcpy(v, w->rate, w->n * sizeof v[0]);
  qsort(v, w->n, sizeof v[0], cmp);
  double med = w->n % 2 ? v[w->n / 2] : (v[w->n / 2 - 1] + v[w->n / 2]) / 2;
  return med * (double)(w->npids ? w->npids : 1);
}

void tput_poll(struct tput_watch *w, double *job_tps) {
  *job_tps = 0;
  if (w->fd < 0) return;
  for (;;) {
    ssize_t r = read(w->fd, w->buf + w->len, sizeof w->buf - w->len);
    if (r <= 0) break;
    w->len += (size_t)r;
    scan(w);
  }
  *job_tps = tput_rate(w);
}
