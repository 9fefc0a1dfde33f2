/* The runtime guard's throughput watch: see guard.h. */
#define _GNU_SOURCE /* memmem */
#include "guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "measure/record_schema.h"
#include "vramledger/alloc.h"

void tput_open(struct tput_watch *w, const char *dir) {
  memset(w, 0, sizeof *w);
  snprintf(w->dir, sizeof w->dir, "%s", dir);
}

void tput_close(struct tput_watch *w) {
  for (size_t i = 0; i < w->n_streams; i++) {
    close(w->streams[i]->fd);
    vl_free(w->streams[i]);
  }
  w->n_streams = 0;
  w->dir[0] = '\0';
}

static bool is_probe_stream(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "probe.", 6) == 0 && n > 12 && n < 48 && strcmp(name + n - 6, ".jsonl") == 0;
}

/* The probe streams not yet open, opened (a process's stream appears at
 * its first event). */
static void list_streams(struct tput_watch *w) {
  DIR *d = opendir(w->dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) && w->n_streams < GUARD_STREAMS;) {
    if (!is_probe_stream(e->d_name)) continue;
    size_t k = 0;
    while (k < w->n_streams && strcmp(w->streams[k]->name, e->d_name) != 0)
      k++;
    if (k < w->n_streams) continue;
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", w->dir, e->d_name);
    struct tput_stream *s = vl_malloc(sizeof *s);
    int fd = s ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0) {
      vl_free(s);
      continue;
    }
    s->fd = fd;
    snprintf(s->name, sizeof s->name, "%s", e->d_name);
    s->rest_len = 0;
    w->streams[w->n_streams++] = s;
  }
  closedir(d);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void step(struct tput_watch *w, const char *line, size_t n) {
  if (!memmem(line, n, "\"type\":\"step\"", 13)) return;
  json_t *o = json_loadb(line, n, 0, NULL);
  if (!o) return;
  json_int_t pid = json_integer_value(json_object_get(o, VL_RF(step, pid)));
  json_int_t rank = json_integer_value(json_object_get(o, VL_RF(step, rank)));
  json_int_t stepno = json_integer_value(json_object_get(o, VL_RF(step, step)));
  json_int_t tokens = json_integer_value(json_object_get(o, VL_RF(step, tokens)));
  json_int_t ns = json_integer_value(json_object_get(o, VL_RF(step, time_ns)));
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

/* What stream s has appended since, its whole lines read: its kept bytes
 * go through the watch's buffer as tput_feed's do. */
static void poll_stream(struct tput_watch *w, struct tput_stream *s) {
  memcpy(w->buf, s->rest, s->rest_len);
  w->len = w->scanned = s->rest_len;
  for (;;) {
    ssize_t r = read(s->fd, w->buf + w->len, sizeof w->buf - w->len);
    if (r <= 0) break;
    w->len += (size_t)r;
    scan(w);
  }
  memcpy(s->rest, w->buf, w->len);
  s->rest_len = w->len;
}

void tput_poll(struct tput_watch *w, double *job_tps) {
  *job_tps = 0;
  if (!w->dir[0]) return;
  uint64_t now = mono_ns();
  if (!w->listed_ns || now - w->listed_ns >= GUARD_LIST_NS) {
    list_streams(w);
    w->listed_ns = now;
  }
  for (size_t i = 0; i < w->n_streams; i++)
    poll_stream(w, w->streams[i]);
  *job_tps = tput_rate(w);
}
