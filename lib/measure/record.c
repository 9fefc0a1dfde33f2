/* Reader of run records (schema vramledger.run/1) and their summary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/leak.h"
#include "vramledger/record.h"
#include "probe_events.h"
#include "record_read.h"
#include "record_schema.h"

#define MAX_SAMPLES (1u << 24) /* 466 hours at 100 ms, 46 at 10 ms; 4.6 GiB of samples */
#define MAX_PIDS 256

struct alloc_state {
  unsigned pid[MAX_PIDS];
  uint64_t live[MAX_PIDS];
  uint64_t lib_live[MAX_PIDS][VL_REC_MAX_LIBS]; /* per process, per library */
  unsigned n;
};

/* An alloc event's "libs": each library's live bytes in process k; the
 * record keeps the most each library held at once over all processes. */
static void alloc_libs(json_t *libs, struct alloc_state *as, unsigned k, struct vl_record *r) {
  const char *name;
  json_t *v;
  json_object_foreach(libs, name, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) continue;
    unsigned i = 0;
    while (i < r->n_alloc_libs && strcmp(r->alloc_libs[i].name, name) != 0)
      i++;
    if (i == r->n_alloc_libs) {
      if (i == VL_REC_MAX_LIBS) continue;
      vl__utf8_copy(r->alloc_libs[i].name, sizeof r->alloc_libs[i].name, name);
      vl__rec_clean(r->alloc_libs[i].name);
      r->n_alloc_libs++;
    }
    as->lib_live[k][i] = (uint64_t)json_integer_value(v);
    uint64_t sum = 0;
    for (unsigned p = 0; p < as->n; p++)
      sum += as->lib_live[p][i];
    if (sum > r->alloc_libs[i].peak) r->alloc_libs[i].peak = sum;
  }
}

static vl_status meta(json_t *o, struct vl_record *r, size_t line, struct vl_err *err) {
  vl__rec_str(r->schema, sizeof r->schema, o, VL_RF(meta, schema));
  if (strncmp(r->schema, "vramledger.run/", 15) != 0)
    return vl__fail(err, VL_EKEY, "line %zu: not a vramledger run record (schema '%s')", line,
                    r->schema);
  if (strcmp(r->schema, VL_RECORD_SCHEMA) != 0 && strcmp(r->schema, VL_RECORD_SCHEMA_1) != 0)
    return vl__fail(err, VL_EKEY,
                    "line %zu: record schema '%s'; this vramledger reads '%s' and '%s'", line,
                    r->schema, VL_RECORD_SCHEMA_1, VL_RECORD_SCHEMA);
  vl__rec_str(r->host, sizeof r->host, o, VL_RF(meta, host));
  vl__rec_str(r->driver, sizeof r->driver, o, VL_RF(meta, driver));
  vl__rec_str(r->nvml, sizeof r->nvml, o, VL_RF(meta, nvml));
  r->start_ns = vl__rec_u(o, VL_RF(meta, t_ns));
  r->start_unix_ms = vl__rec_u(o, VL_RF(meta, start_unix_ms));
  r->interval_ms = vl__rec_u(o, VL_RF(meta, interval_ms));
  json_t *cmd = json_object_get(o, VL_RF(meta, command));
  size_t i, used = 0;
  json_t *a;
  json_array_foreach(cmd, i, a) {
    if (!json_is_string(a)) continue;
    int w = snprintf(r->command + used, sizeof r->command - used, "%s%s", i ? " " : "",
                     json_string_value(a));
    if (w < 0 || (size_t)w >= sizeof r->command - used) break;
    used += (size_t)w;
  }
  vl__utf8_copy(r->command, sizeof r->command, r->command); /* an argument cut to fit */
  vl__rec_clean(r->command);
  json_t *gpus = json_object_get(o, VL_RF(meta, gpus));
  json_array_foreach(gpus, i, a) {
    if (i >= VL_RECORD_MAX_GPUS) break;
    struct vl_rec_gpu *g = &r->gpus[i];
    g->index = (unsigned)vl__rec_u(a, VL_RF(meta_gpus, index));
    vl__rec_str(g->name, sizeof g->name, a, VL_RF(meta_gpus, name));
    vl__rec_str(g->uuid, sizeof g->uuid, a, VL_RF(meta_gpus, uuid));
    g->total_bytes = vl__rec_u(a, VL_RF(meta_gpus, total_bytes));
    r->n_gpus = (unsigned)i + 1;
  }
  return VL_OK;
}

/* The next sample of r, zeroed. */
static vl_status new_sample(struct vl_record *r, size_t *cap_s, size_t line,
                            struct vl_rec_sample **s, struct vl_err *err) {
  if (vl__rec_grow((void **)&r->samples, cap_s, r->n_samples, sizeof *r->samples, MAX_SAMPLES))
    return vl__fail(err, VL_ENOMEM,
                    "line %zu: more than %u samples, the most a record is read with (%.0f "
                    "hours at the default 100 ms), or out of memory",
                    line, MAX_SAMPLES, MAX_SAMPLES / 36000.0);
  *s = &r->samples[r->n_samples++];
  memset(*s, 0, sizeof **s);
  return VL_OK;
}

/* ---- sample lines without a JSON tree -------------------------------------
 * Sample lines are nearly all of a long record (one every --interval-ms,
 * 1 KiB with 8 GPUs), and building jansson's tree of each took nearly all
 * of reading one (bench/results/speed/README.md#report-1gib). A sample line is
 * read here by a scanner of plain JSON only: strings without escapes or
 * bytes past ASCII, integers of up to 18 digits, no reals, nesting up to
 * 16; a line with anything else (or whose type is not "sample") is left to
 * jansson. Both read a line alike: the last of a repeated member counts, a
 * member absent, not an integer or not positive reads as 0 (vl__rec_u),
 * a GPU entry that is no object as GPU 0's zeros. */
bool vl__record_scan = true;

struct scan {
  const char *p, *end;
};

static void scan_ws(struct scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static bool scan_str(struct scan *s, const char **b, size_t *n) {
  if (s->p >= s->end || *s->p != '"') return false;
  const char *start = ++s->p;
  for (; s->p < s->end && *s->p != '"'; s->p++) {
    unsigned char c = (unsigned char)*s->p;
    if (c < 0x20 || c >= 0x80 || c == '\\') return false;
  }
  if (s->p >= s->end) return false;
  *b = start;
  *n = (size_t)(s->p++ - start);
  return true;
}

typedef void take_fn(void *ctx, const char *k, size_t kn, char kind, uint64_t u, const char *b,
                     size_t n, const char *at);

static bool scan_members(struct scan *s, int depth, void *ctx, take_fn *take);

/* A value: *kind 'i' (integer, *u as vl__rec_u reads it), 's' (its bytes
 * in *b, *n), 'a', 'o' or 'l' (true, false, null). */
static bool scan_value(struct scan *s, int depth, char *kind, uint64_t *u, const char **b,
                       size_t *n) {
  *u = 0;
  if (s->p >= s->end || depth > 16) return false;
  char c = *s->p;
  if (c == '"') {
    *kind = 's';
    return scan_str(s, b, n);
  }
  if (c == '[' || c == '{') {
    *kind = c == '[' ? 'a' : 'o';
    return scan_members(s, depth + 1, NULL, NULL);
  }
  static const char *const lits[] = {"true", "false", "null"};
  for (size_t i = 0; i < 3; i++) {
    size_t l = strlen(lits[i]);
    if ((size_t)(s->end - s->p) >= l && memcmp(s->p, lits[i], l) == 0) {
      s->p += l;
      *kind = 'l';
      return true;
    }
  }
  bool neg = c == '-';
  if (neg) s->p++;
  const char *d = s->p;
  uint64_t v = 0;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
    v = v * 10 + (uint64_t)(*s->p++ - '0');
  size_t nd = (size_t)(s->p - d);
  if (nd == 0 || nd > 18 || (nd > 1 && *d == '0')) return false;
  if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E')) return false; /* a real */
  *kind = 'i';
  *u = neg ? 0 : v;
  return true;
}

/* The object at s, checked whole, its values scanned at depth, each member
 * handed to take (its key, its value as scan_value reads it, and where the
 * value starts). With take NULL, the object or array at s is only skipped:
 * scan_value's containers. */
static bool scan_members(struct scan *s, int depth, void *ctx, take_fn *take) {
  if (s->p >= s->end || (*s->p != '{' && *s->p != '[')) return false;
  bool object = *s->p++ == '{';
  char close = object ? '}' : ']';
  scan_ws(s);
  if (s->p < s->end && *s->p == close) {
    s->p++;
    return true;
  }
  for (;;) {
    const char *k = NULL, *b = NULL;
    size_t kn = 0, n = 0;
    char kind;
    uint64_t u;
    if (object) {
      if (!scan_str(s, &k, &kn)) return false;
      scan_ws(s);
      if (s->p >= s->end || *s->p++ != ':') return false;
      scan_ws(s);
    }
    const char *at = s->p;
    if (!scan_value(s, depth, &kind, &u, &b, &n)) return false;
    if (take) take(ctx, k, kn, kind, u, b, n, at);
    scan_ws(s);
    if (s->p >= s->end) return false;
    if (*s->p == ',') {
      s->p++;
      scan_ws(s);
      continue;
    }
    return *s->p++ == close;
  }
}

static bool key_is(const char *k, size_t kn, const char *name) {
  return strlen(name) == kn && memcmp(k, name, kn) == 0;
}

struct sample_scan {
  bool is_sample;
  const char *gpus; /* the last "gpus" member's array, or NULL */
  uint64_t t_ns, tree_bytes, other_bytes, cuda_alloc_bytes, cuda_alloc_max_bytes, tree_procs;
};

static void take_sample(void *ctx, const char *k, size_t kn, char kind, uint64_t u, const char *b,
                        size_t n, const char *at) {
  struct sample_scan *m = ctx;
  uint64_t v = kind == 'i' ? u : 0;
  if (key_is(k, kn, VL_RF(sample, type)))
    m->is_sample = kind == 's' && n == 6 && memcmp(b, "sample", 6) == 0;
  else if (key_is(k, kn, VL_RF(sample, gpus)))
    m->gpus = kind == 'a' ? at : NULL;
  else if (key_is(k, kn, VL_RF(sample, t_ns)))
    m->t_ns = v;
  else if (key_is(k, kn, VL_RF(sample, tree_bytes)))
    m->tree_bytes = v;
  else if (key_is(k, kn, VL_RF(sample, other_bytes)))
    m->other_bytes = v;
  else if (key_is(k, kn, VL_RF(sample, cuda_alloc_bytes)))
    m->cuda_alloc_bytes = v;
  else if (key_is(k, kn, VL_RF(sample, cuda_alloc_max_bytes)))
    m->cuda_alloc_max_bytes = v;
  else if (key_is(k, kn, VL_RF(sample, tree_procs)))
    m->tree_procs = v;
}

struct gpu_scan {
  uint64_t i, used, tree;
};

static void take_gpu(void *ctx, const char *k, size_t kn, char kind, uint64_t u, const char *b,
                     size_t n, const char *at) {
  (void)b, (void)n, (void)at;
  struct gpu_scan *g = ctx;
  uint64_t v = kind == 'i' ? u : 0;
  if (key_is(k, kn, VL_RF(sample_gpus, i)))
    g->i = v;
  else if (key_is(k, kn, VL_RF(sample_gpus, used)))
    g->used = v;
  else if (key_is(k, kn, VL_RF(sample_gpus, tree)))
    g->tree = v;
}

/* A sample line read into *m; false: jansson reads it. */
static bool scan_sample(const char *line, size_t n, struct sample_scan *m) {
  struct scan s = {line, line + n};
  memset(m, 0, sizeof *m);
  scan_ws(&s);
  if (s.p >= s.end || *s.p != '{' || !scan_members(&s, 1, m, take_sample)) return false;
  scan_ws(&s);
  return s.p == s.end && m->is_sample;
}

static void put_scanned(const struct sample_scan *m, const char *end, struct vl_rec_sample *s) {
  s->t_ns = m->t_ns;
  s->tree_bytes = m->tree_bytes;
  s->other_bytes = m->other_bytes;
  s->cuda_alloc_bytes = m->cuda_alloc_bytes;
  /* written only when the bytes were higher between the samples than at
   * this one (docs/record.md): absent, the bytes at the sample */
  s->cuda_alloc_max_bytes = vl__max(m->cuda_alloc_bytes, m->cuda_alloc_max_bytes);
  s->tree_procs = (unsigned)m->tree_procs;
  if (!m->gpus) return;
  struct scan a = {m->gpus + 1, end}; /* checked whole by scan_sample */
  scan_ws(&a);
  while (a.p < a.end && *a.p != ']') {
    struct gpu_scan g = {0, 0, 0};
    if (*a.p == '{') {
      scan_members(&a, 1, &g, take_gpu);
    } else {
      char kind;
      uint64_t u;
      const char *b;
      size_t n;
      scan_value(&a, 1, &kind, &u, &b, &n);
    }
    unsigned k = (unsigned)g.i;
    if (k < VL_RECORD_MAX_GPUS) {
      s->gpu_used[k] = g.used;
      s->gpu_tree[k] = g.tree;
    }
    scan_ws(&a);
    if (a.p < a.end && *a.p == ',') a.p++;
    scan_ws(&a);
  }
}

/* A descendants line: the first says when the command exited; a later one
 * names processes those started, found once they had ended */
static void descendants(json_t *o, struct vl_record *r) {
  if (r->desc_events++ == 0) r->desc_t_ns = vl__rec_u(o, VL_RF(descendants, t_ns));
  uint64_t procs = vl__rec_u(o, VL_RF(descendants, procs));
  r->desc_procs = (unsigned)vl__min((uint64_t)r->desc_procs + procs, UINT_MAX);
  r->desc_waited = json_is_true(json_object_get(o, VL_RF(descendants, waited)));
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(o, VL_RF(descendants, pids)), i, p) {
    if (r->n_desc_pids == VL_REC_MAX_DESC_PIDS) break;
    if (json_is_integer(p) && json_integer_value(p) > 0 && json_integer_value(p) <= INT_MAX)
      r->desc_pids[r->n_desc_pids++] = (unsigned)json_integer_value(p);
  }
}

static vl_status event(json_t *o, const char *type, struct vl_record *r, size_t *cap_s,
                       size_t *cap_m, struct alloc_state *as, struct vl__probe_caps *pc,
                       size_t line, struct vl_err *err) {
  bool probe_event = false;
  vl_status pst = vl__probe_event(o, type, r, pc, line, err, &probe_event);
  if (probe_event) return pst;
  if (strcmp(type, VL_RT(sample)) == 0) {
    struct vl_rec_sample *s = NULL;
    vl_status st = new_sample(r, cap_s, line, &s, err);
    if (st != VL_OK) return st;
    s->t_ns = vl__rec_u(o, VL_RF(sample, t_ns));
    s->tree_bytes = vl__rec_u(o, VL_RF(sample, tree_bytes));
    s->other_bytes = vl__rec_u(o, VL_RF(sample, other_bytes));
    s->cuda_alloc_bytes = vl__rec_u(o, VL_RF(sample, cuda_alloc_bytes));
    s->cuda_alloc_max_bytes =
        vl__max(s->cuda_alloc_bytes, vl__rec_u(o, VL_RF(sample, cuda_alloc_max_bytes)));
    s->tree_procs = (unsigned)vl__rec_u(o, VL_RF(sample, tree_procs));
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(o, VL_RF(sample, gpus)), i, g) {
      unsigned k = (unsigned)vl__rec_u(g, VL_RF(sample_gpus, i));
      if (k >= VL_RECORD_MAX_GPUS) continue;
      s->gpu_used[k] = vl__rec_u(g, VL_RF(sample_gpus, used));
      s->gpu_tree[k] = vl__rec_u(g, VL_RF(sample_gpus, tree));
    }
    if (vl__rec_sample_implausible(r, line, s)) r->n_samples--; /* damaged data: skipped */
  } else if (strcmp(type, VL_RT(mark)) == 0) {
    if (vl__rec_grow((void **)&r->marks, cap_m, r->n_marks, sizeof *r->marks, 1u << 22))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many marks", line);
    struct vl_rec_mark *m = &r->marks[r->n_marks++];
    m->t_ns = vl__rec_u(o, VL_RF(mark, t_ns));
    m->pid = (unsigned)vl__rec_u(o, VL_RF(mark, pid));
    vl__rec_str(m->name, sizeof m->name, o, VL_RF(mark, name));
  } else if (strcmp(type, VL_RT(alloc)) == 0) {
    if (vl__rec_implausible(r, line, "an alloc event's live bytes",
                            vl__rec_u(o, VL_RF(alloc, live)), VL_REC_DRIVER_MAX,
                            VL_REC_DRIVER_OF) ||
        vl__rec_implausible(r, line, "an alloc event's peak bytes",
                            vl__rec_u(o, VL_RF(alloc, peak)), VL_REC_DRIVER_MAX, VL_REC_DRIVER_OF))
      return VL_OK; /* damaged data: skipped */
    unsigned pid = (unsigned)vl__rec_u(o, VL_RF(alloc, pid));
    unsigned k = 0;
    while (k < as->n && as->pid[k] != pid)
      k++;
    if (k == as->n && as->n < MAX_PIDS) as->pid[as->n++] = pid;
    if (k < MAX_PIDS) as->live[k] = vl__rec_u(o, VL_RF(alloc, live));
    json_t *libs = json_object_get(o, VL_RF(alloc, libs));
    if (k < MAX_PIDS && json_is_object(libs)) alloc_libs(libs, as, k, r);
    uint64_t sum = 0;
    for (unsigned i = 0; i < as->n; i++)
      sum += as->live[i];
    uint64_t peak = vl__rec_u(o, VL_RF(alloc, peak));
    if (sum > r->alloc_peak_bytes) r->alloc_peak_bytes = sum;
    if (peak > r->alloc_peak_bytes && as->n == 1) r->alloc_peak_bytes = peak;
    r->alloc_pids = as->n;
  } else if (strcmp(type, VL_RT(gap)) == 0) {
    r->gaps++;
    uint64_t lost = vl__rec_u(o, VL_RF(gap, lost_bytes));
    r->gap_bytes += lost;
    const char *why = json_string_value(json_object_get(o, VL_RF(gap, error)));
    if (lost && why && (!strcmp(why, strerror(ENOSPC)) || !strcmp(why, strerror(EDQUOT))))
      r->disk_full = true;
  } else if (strcmp(type, VL_RT(lost)) == 0) {
    r->lost_no_slot_procs = (unsigned)vl__rec_u(o, VL_RF(lost, no_slot_procs));
    r->lost_slots = (unsigned)vl__rec_u(o, VL_RF(lost, slots));
    r->lost_uncounted = vl__rec_u(o, VL_RF(lost, uncounted_allocs));
    uint64_t rec = vl__rec_u(o, VL_RF(lost, record_lost_bytes)); /* the job's lines: one more gap */
    if (rec) {
      r->gaps++;
      r->gap_bytes += rec;
    }
  } else if (strcmp(type, VL_RT(descendants)) == 0) {
    descendants(o, r);
  } else if (strcmp(type, VL_RT(exit)) == 0) {
    r->exited = true;
    json_t *st = json_object_get(o, VL_RF(exit, status));
    r->exit_status = json_is_integer(st) ? (int)json_integer_value(st) : -1;
    r->end_ns = vl__rec_u(o, VL_RF(exit, t_ns));
    r->exit_samples = vl__rec_u(o, VL_RF(exit, samples));
    r->desc_left = (unsigned)vl__min(vl__rec_u(o, VL_RF(exit, descendants_left)), UINT_MAX);
  }
  return VL_OK; /* unknown types are skipped: newer writers may add some */
}

/* The reader across lines: a record is read a line at a time, from memory
 * or streamed from its files, so its size is bounded by what it holds (the
 * caps on samples, marks and the probe's events), not by its text. */
struct parse {
  struct vl_record *r;
  size_t cap_s, cap_m;
  struct vl__probe_caps pc;
  struct alloc_state as;
  bool have_meta;
};

/* One stream of a record (docs/record.md, "Streams"): the record's own
 * file, or one writer's file in its streams folder. Its next whole line
 * waits in buf[ls, ls + ln) with its t_ns, for the merge by time. */
struct stream {
  int fd;
  char *buf;
  size_t cap, have, from, scan; /* buf[from, have): not handed out; [scan, have): unsearched */
  bool eof, ready, last, done, timed;
  size_t ls, ln;     /* the next line */
  uint64_t t;        /* its t_ns: the line before's when it says none */
  size_t line;       /* lines handed out */
  size_t bad;        /* a line that was not an object, 0: none; a gap line must follow */
  char bad_msg[160]; /* what was wrong with it */
  char name[64];     /* "": the record's own file; else "record.d/probe.7.jsonl" */
};

static void parse_init(struct parse *p, struct vl_record *r) {
  memset(r, 0, sizeof *r);
  memset(p, 0, sizeof *p);
  p->r = r;
}

/* The bad line no gap line closed (not UTF-8, not JSON: a writer's bug or
 * a stray write): skipped and counted, the first one named (finding
 * "damaged"), the rest of the record read. */
static void damaged(struct parse *p, const struct stream *s) {
  struct vl_record *r = p->r;
  if (r->damaged++ == 0) {
    r->damaged_line = s->bad;
    vl__utf8_copy(r->damaged_why, sizeof r->damaged_why, s->bad_msg);
    snprintf(r->damaged_file, sizeof r->damaged_file, "%s", s->name);
  }
}

/* A line that is no JSON object: the meta line's fault is the record's;
 * the last line was cut by a crash (everything before it stands); any
 * other waits for the gap line that may follow it. */
static vl_status not_an_object(struct parse *p, struct stream *s, json_t *o,
                               const json_error_t *jerr, bool last, struct vl_err *err) {
  if (last) {
    json_decref(o);
    p->r->truncated = true;
    s->done = true;
    return VL_OK;
  }
  snprintf(s->bad_msg, sizeof s->bad_msg, "%s", o ? "expected a JSON object" : jerr->text);
  vl__utf8_copy(s->bad_msg, sizeof s->bad_msg, s->bad_msg); /* jansson quotes the line */
  vl__rec_clean(s->bad_msg);
  json_decref(o);
  if (!p->have_meta) /* the meta line: nothing after it can be read */
    return vl__fail(err, VL_EPARSE, "line %zu: %s", s->line, s->bad_msg);
  s->bad = s->line;
  return VL_OK;
}

/* One line of stream s, its newline left out (last: none followed it). */
static vl_status parse_line(struct parse *p, struct stream *s, const char *start, size_t n,
                            bool last, struct vl_err *err) {
  s->line++;
  if (s->bad && n == 0) return VL_OK; /* an empty line between: the gap may follow */
  static const char gap[] = "{\"type\":\"gap\"";
  bool is_gap = n >= sizeof gap - 1 && memcmp(start, gap, sizeof gap - 1) == 0;
  bool closing = s->bad != 0;
  if (s->bad) { /* a line cut by a failed write: the writer's gap line follows it */
    if (!is_gap) damaged(p, s);
    s->bad = 0;
  }
  if (n == 0) return VL_OK;
  unsigned implausible = p->r->implausible;
  vl_status st = VL_OK;
  static const char sample[] = "{\"type\":\"sample\"";
  struct sample_scan m;
  json_t *o = NULL;
  if (vl__record_scan && p->have_meta && n > sizeof sample &&
      memcmp(start, sample, sizeof sample - 1) == 0 && scan_sample(start, n, &m)) {
    struct vl_rec_sample *x = NULL;
    st = new_sample(p->r, &p->cap_s, s->line, &x, err);
    if (st == VL_OK) put_scanned(&m, start + n, x);
    if (st == VL_OK && vl__rec_sample_implausible(p->r, s->line, x)) p->r->n_samples--;
  } else {
    json_error_t jerr;
    o = json_loadb(start, n, 0, &jerr);
    if (!o || !json_is_object(o)) return not_an_object(p, s, o, &jerr, last, err);
    json_t *t = json_object_get(o, VL_RF(meta, type));
    const char *type = json_is_string(t) ? json_string_value(t) : "";
    if (!p->have_meta) {
      if (strcmp(type, VL_RT(meta)) != 0) {
        st = vl__fail(err, VL_EKEY, "line %zu: a record starts with its 'meta' line", s->line);
      } else {
        st = meta(o, p->r, s->line, err);
        p->have_meta = true;
      }
    } else if (is_gap && !closing && vl__rec_u(o, VL_RF(gap, lost_bytes)) == 0) {
      st = VL_OK; /* it closed a line in flight, not a cut one (a record of /1): no gap */
    } else {
      st = event(o, type, p->r, &p->cap_s, &p->cap_m, &p->as, &p->pc, s->line, err);
    }
    json_decref(o);
  }
  if (!implausible && p->r->implausible) /* the first: where it is */
    snprintf(p->r->implausible_file, sizeof p->r->implausible_file, "%s", s->name);
  return st;
}

static vl_status parse_end(struct parse *p, struct stream *s, size_t n, vl_status st,
                           struct vl_err *err) {
  struct vl_record *r = p->r;
  for (size_t i = 0; i < n; i++) {
    r->lines += s[i].line;
    if (st == VL_OK && s[i].bad) damaged(p, &s[i]);
  }
  if (st == VL_OK && !p->have_meta)
    st = vl__fail(err, VL_EKEY, "the record is empty (no 'meta' line)");
  if (st != VL_OK) vl_record_release(r);
  return st;
}

vl_status vl_record_parse(const char *text, size_t len, struct vl_record *r, struct vl_err *err) {
  struct parse *p = vl_malloc(sizeof *p);
  struct stream *s = vl_calloc(1, sizeof *s);
  if (!p || !s) {
    vl_free(p);
    vl_free(s);
    memset(r, 0, sizeof *r);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }
  parse_init(p, r);
  vl_status st = VL_OK;
  for (size_t pos = 0; pos < len && st == VL_OK && !s->done;) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    pos += n + (nl ? 1 : 0);
    st = parse_line(p, s, start, n, !nl, err);
  }
  st = parse_end(p, s, 1, st, err);
  vl_free(s);
  vl_free(p);
  return st;
}

/* A line's t_ns, for the merge: the first "t_ns" member's digits (every
 * writer puts it second); prev when the line has none (a damaged line
 * stays where its stream had it). */
static uint64_t line_t_ns(const char *l, size_t n, uint64_t prev) {
  static const char key[] = "\"t_ns\":";
  const size_t k = sizeof key - 1;
  for (size_t i = 0; i + k < n; i++) {
    if (l[i] != '"' || memcmp(l + i, key, k) != 0) continue;
    uint64_t v = 0;
    size_t d = i + k, nd = 0;
    for (; d < n && l[d] >= '0' && l[d] <= '9' && nd < 19; d++, nd++)
      v = v * 10 + (uint64_t)(l[d] - '0');
    return nd ? v : prev;
  }
  return prev;
}

/* The stream's next whole line made ready (s->ready), or s->done at its
 * end; the buffer doubles for a line longer than it, up to
 * VL_RECORD_MAX_LINE. @return VL_OK, VL_EIO, VL_ERANGE or VL_ENOMEM */
static vl_status stream_next(struct stream *s, struct vl_err *err) {
  while (!s->ready && !s->done) {
    const char *nl = s->have > s->scan ? memchr(s->buf + s->scan, '\n', s->have - s->scan) : NULL;
    if (nl || (s->eof && s->have > s->from)) {
      s->ls = s->from;
      s->ln = (nl ? (size_t)(nl - s->buf) : s->have) - s->from;
      s->last = !nl;
      s->from = s->scan = s->ls + s->ln + (nl ? 1 : 0);
      s->ready = true;
      break;
    }
    if (s->eof) {
      s->done = true;
      break;
    }
    s->scan = s->have;
    if (s->from) { /* what was handed out is let go */
      memmove(s->buf, s->buf + s->from, s->have - s->from);
      s->have -= s->from;
      s->scan -= s->from;
      s->from = 0;
    }
    if (s->have == s->cap) { /* one line fills the buffer: a larger one, up to the cap */
      if (s->cap >= VL_RECORD_MAX_LINE)
        return vl__fail(err, VL_ERANGE, "%s%sline %zu: longer than %u MiB (not a record?)", s->name,
                        s->name[0] ? ": " : "", s->line + 1, VL_RECORD_MAX_LINE >> 20);
      char *nb = vl_realloc(s->buf, s->cap * 2);
      if (!nb) return vl__fail(err, VL_ENOMEM, "out of memory");
      s->buf = nb;
      s->cap *= 2;
    }
    ssize_t got = read(s->fd, s->buf + s->have, s->cap - s->have);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return vl__fail(err, VL_EIO, "%s%s%s", s->name, s->name[0] ? ": " : "", strerror(errno));
    s->eof = got == 0;
    s->have += (size_t)got;
  }
  if (s->ready && s->timed) s->t = line_t_ns(s->buf + s->ls, s->ln, s->t);
  return VL_OK;
}

/* The streams' lines, merged by t_ns: the next line read is always the
 * earliest of the streams' next lines (ties: the record's own file, then
 * the streams by name), each stream's own order kept. The meta line, the
 * record's own file's first, goes first. */
static vl_status merge_streams(struct parse *p, struct stream *s, size_t n, struct vl_err *err) {
  for (size_t i = 0; i < n; i++)
    s[i].timed = n > 1; /* one stream: its order as it is */
  vl_status st = VL_OK;
  while (st == VL_OK) {
    struct stream *pick = NULL;
    for (size_t i = 0; i < n && st == VL_OK && (i == 0 || p->have_meta); i++) {
      st = stream_next(&s[i], err);
      if (s[i].ready && (!pick || s[i].t < pick->t)) pick = &s[i];
    }
    if (st != VL_OK || !pick) break;
    pick->ready = false;
    st = parse_line(p, pick, pick->buf + pick->ls, pick->ln, pick->last, err);
  }
  return st;
}

/* The record's own file is read in pieces of READ_PIECE, each stream in
 * pieces of STREAM_PIECE (a run may have a stream a process); a line may
 * hold up to VL_RECORD_MAX_LINE bytes (the longest a writer makes is a
 * sample line, a few KiB with 16 GPUs and 256 processes). */
#define READ_PIECE (1u << 20)
#define STREAM_PIECE (64u << 10)

/* The record of open descriptors fd[0..n) (fd[0] its own file; names[i]
 * for messages, "" for fd[0]), each read piece bytes at a time, merged. */
static vl_status read_fds(const int *fd, char (*names)[64], size_t n, size_t piece,
                          struct vl_record *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  struct parse *p = vl_malloc(sizeof *p);
  struct stream *s = vl_calloc(n, sizeof *s);
  vl_status st = p && s ? VL_OK : vl__fail(err, VL_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && st == VL_OK; i++) {
    s[i].fd = fd[i];
    s[i].cap = i == 0 ? (piece ? piece : 1) : STREAM_PIECE;
    s[i].buf = vl_malloc(s[i].cap);
    snprintf(s[i].name, sizeof s[i].name, "%s", names ? names[i] : "");
    if (!s[i].buf) st = vl__fail(err, VL_ENOMEM, "out of memory");
  }
  if (st != VL_OK) {
    for (size_t i = 0; s && i < n; i++)
      vl_free(s[i].buf);
    vl_free(s);
    vl_free(p);
    return st;
  }
  parse_init(p, r);
  st = merge_streams(p, s, n, err);
  st = parse_end(p, s, n, st, err);
  for (size_t i = 0; i < n; i++)
    vl_free(s[i].buf);
  vl_free(s);
  vl_free(p);
  return st;
}

vl_status vl__record_read_fd(int fd, size_t piece, struct vl_record *r, struct vl_err *err) {
  return read_fds(&fd, NULL, 1, piece, r, err);
}

void vl_record_streams_dir(const char *path, char *dir, size_t n) {
  static const char ext[] = ".jsonl";
  size_t len = strlen(path), e = sizeof ext - 1;
  if (len > e && strcmp(path + len - e, ext) == 0) len -= e;
  snprintf(dir, n, "%.*s.d", (int)len, path);
}

#define MAX_STREAMS 1024

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* A stream's file name: WRITER.PID.jsonl, as the writers make them (no
 * dot file, nothing else the folder may hold). */
static bool stream_name(const char *name) {
  size_t n = strlen(name);
  return name[0] != '.' && n > 6 && n < 48 && strcmp(name + n - 6, ".jsonl") == 0;
}

/* The names of the streams in dir, sorted, into names[0..*n) (as the
 * messages say them: "record.d/probe.7.jsonl"); none without the folder. */
static vl_status list_streams(const char *dir, char (*names)[64], size_t *n, struct vl_err *err) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return VL_OK; /* no streams (a record of /1) */
    return vl__fail(err, VL_EIO, "its streams folder '%s': %s", dir, strerror(errno));
  }
  vl_status st = VL_OK;
  for (struct dirent *e; st == VL_OK && (e = readdir(d));) {
    if (!stream_name(e->d_name)) continue;
    if (*n == MAX_STREAMS)
      st = vl__fail(err, VL_ERANGE,
                    "its streams folder '%s' holds more than %d streams, the most "
                    "read at once",
                    dir, MAX_STREAMS);
    else
      snprintf(names[(*n)++], sizeof names[0], "%s", e->d_name);
  }
  closedir(d);
  qsort(names, *n, sizeof names[0], cmp_name);
  return st;
}

/* The streams named in names[1..n) opened into fd[1..n), their names made
 * the ones the messages say ("record.d/probe.7.jsonl"). */
static vl_status open_streams(const char *dir, int *fd, char (*names)[64], size_t n,
                              struct vl_err *err) {
  const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
  for (size_t i = 1; i < n; i++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%.*s/%s", PATH_MAX - 1, dir, names[i]);
    fd[i] = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd[i] < 0)
      return vl__fail(err, VL_EIO, "its stream '%s': %s%s", path, strerror(errno),
                      errno == EMFILE ? " (raise the limit of open files: ulimit -n)" : "");
    char shown[80]; /* base cut to 15 bytes, the name under 48 (stream_name): it fits in 64 */
    int k = snprintf(shown, sizeof shown, "%.15s/%s", base, names[i]);
    size_t len = k > 0 && (size_t)k < sizeof names[i] ? (size_t)k : 0;
    memcpy(names[i], shown, len);
    names[i][len] = '\0';
  }
  return VL_OK;
}

vl_status vl_record_read(const char *path, struct vl_record *r, struct vl_err *err) {
  memset(r, 0, sizeof *r);
  int fd0 = open(path, O_RDONLY | O_CLOEXEC);
  if (fd0 < 0) return vl__fail(err, VL_EIO, "%s", strerror(errno));
  struct stat sb;
  if (fstat(fd0, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    close(fd0);
    return vl__fail(err, VL_EIO, "it is a directory");
  }
  char dir[PATH_MAX];
  vl_record_streams_dir(path, dir, sizeof dir);
  char(*names)[64] = vl_calloc(MAX_STREAMS + 1, sizeof *names);
  int *fd = vl_calloc(MAX_STREAMS + 1, sizeof *fd);
  size_t n = 0;
  vl_status st = names && fd ? list_streams(dir, names + 1, &n, err)
                             : vl__fail(err, VL_ENOMEM, "out of memory");
  n++; /* the record's own file first */
  if (fd) {
    for (size_t i = 0; i < n; i++)
      fd[i] = -1;
    fd[0] = fd0;
  }
  if (st == VL_OK) st = open_streams(dir, fd, names, n, err);
  if (st == VL_OK) {
    names[0][0] = '\0';
    st = read_fds(fd, names, n, READ_PIECE, r, err);
  }
  for (size_t i = 0; fd && i < n; i++)
    if (fd[i] >= 0) close(fd[i]);
  if (!fd) close(fd0);
  vl_free(fd);
  vl_free(names);
  return st;
}

void vl_record_release(struct vl_record *r) {
  if (!r) return;
  vl_free(r->samples);
  vl_free(r->marks);
  r->samples = NULL;
  r->marks = NULL;
  vl__probe_release(r);
  r->n_samples = r->n_marks = 0;
}

/* printf-checked: every finding's format matches its arguments (a fuzzer
 * found "%.0s" given a double here) */
static void add_finding(struct vl_finding *f, int *n, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_finding(struct vl_finding *f, int *n, const char *code, const char *fmt, ...) {
  if (*n >= VL_MAX_FINDINGS) return;
  snprintf(f[*n].code, sizeof f[*n].code, "%s", code);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f[*n].text, sizeof f[*n].text, fmt, ap);
  va_end(ap);
  vl__utf8_copy(f[*n].text, sizeof f[*n].text, f[*n].text); /* a record's string cut to fit */
  (*n)++;
}

/* The gap finding: what could not be written and why (a full disk: a gap
 * line said ENOSPC). At least: the writers' bytes that reached a gap line
 * or the lost event (a probe's last gap line may not have), and the sample
 * lines the exit event counts but the record lacks. */
static void gap_finding(const struct vl_record *r, struct vl_finding *f, int *nf) {
  char lines[64] = "";
  if (r->exited && r->exit_samples > r->n_samples)
    snprintf(lines, sizeof lines, " and %llu sample lines",
             (unsigned long long)(r->exit_samples - r->n_samples));
  add_finding(f, nf, "gap",
              "%s: at least %.0f KiB (%llu bytes)%s of the record could not be "
              "written, in %u gap%s; the numbers around them may miss a peak%s",
              r->disk_full ? "the disk was full"
                           : "writes failed (a full disk or a file size limit)",
              (double)r->gap_bytes / 1024.0, (unsigned long long)r->gap_bytes, lines, r->gaps,
              r->gaps == 1 ? "" : "s",
              r->exited || !r->disk_full ? "" : "; the record ends early, its exit line unwritten");
}

void vl_record_summarize(const struct vl_record *r, struct vl_run_summary *s, struct vl_finding *f,
                         int *nf) {
  memset(s, 0, sizeof *s);
  *nf = 0;
  uint64_t gpu_peak[VL_RECORD_MAX_GPUS] = {0};
  for (size_t i = 0; i < r->n_samples; i++) {
    const struct vl_rec_sample *x = &r->samples[i];
    if (x->tree_bytes > s->peak_process_bytes) {
      s->peak_process_bytes = x->tree_bytes;
      s->peak_process_t_ns = x->t_ns > r->start_ns ? x->t_ns - r->start_ns : 0;
      s->context_bytes = vl__sub0(x->tree_bytes, x->cuda_alloc_bytes);
    }
    /* the most between two samples: a block held a few microseconds at
     * --interval-ms under 10 is in it, not in cuda_alloc_bytes */
    if (x->cuda_alloc_max_bytes > s->peak_cuda_alloc_bytes)
      s->peak_cuda_alloc_bytes = x->cuda_alloc_max_bytes;
    if (x->other_bytes > s->peak_other_bytes) s->peak_other_bytes = x->other_bytes;
    if (x->tree_procs > s->max_tree_procs) s->max_tree_procs = x->tree_procs;
    for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++)
      if (x->gpu_tree[g] > gpu_peak[g]) gpu_peak[g] = x->gpu_tree[g];
  }
  if (r->alloc_peak_bytes > s->peak_cuda_alloc_bytes)
    s->peak_cuda_alloc_bytes = r->alloc_peak_bytes;
  uint64_t last = r->exited ? r->end_ns : (r->n_samples ? r->samples[r->n_samples - 1].t_ns : 0);
  s->duration_ns = last > r->start_ns ? last - r->start_ns : 0;

  /* leak: the one rule (lib/measure/leak.c, doctor's too): the floor of
   * the job's memory rises window after window, by more than 5 % of the
   * peak in all */
  struct vl_leak lk;
  vl_leak_system(r, s->peak_process_bytes, &lk);
  s->leak_bytes_per_s = lk.floor_bytes_per_s;
  if (lk.system)
    add_finding(f, nf, "leak",
                "memory grows steadily: its floor rises %.1f MiB/s (%.0f MiB in all); look for "
                "tensors kept across steps (losses without .item(), growing lists, caches)",
                lk.floor_bytes_per_s / 1048576.0, lk.floor_grown_bytes / 1048576.0);
  /* imbalance across the GPUs the job uses (> 5 %) */
  uint64_t hi = 0, lo = UINT64_MAX;
  for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++) {
    if (!gpu_peak[g]) continue;
    s->gpus_used++;
    hi = vl__max(hi, gpu_peak[g]);
    lo = vl__min(lo, gpu_peak[g]);
  }
  s->peak_gpu_bytes = s->gpus_used ? hi : 0;
  if (s->gpus_used > 1) {
    s->imbalance = (double)(hi - lo) / (double)hi;
    if (s->imbalance > 0.05)
      add_finding(f, nf, "imbalance",
                  "GPUs differ by %.1f %% in peak memory (%.0f MiB): the largest rank sets the "
                  "card you need",
                  100.0 * s->imbalance, (double)(hi - lo) / 1048576.0);
  }
  /* one process per GPU is a rank (torchrun); more are extra contexts
   * (the TP job on 2 H200s, one rank a GPU, was flagged before this:
   * bench/results/nccl-run/) */
  unsigned gpus = s->gpus_used ? s->gpus_used : 1;
  if (s->max_tree_procs > gpus)
    add_finding(f, nf, "extra-contexts",
                "%u processes of the job held GPU memory at once on %u GPU%s: each CUDA context "
                "costs ~0.5 GiB (DataLoader workers touching CUDA?)",
                s->max_tree_procs, gpus, gpus == 1 ? "" : "s");
  if (s->peak_other_bytes)
    add_finding(f, nf, "other-processes", "other processes held up to %.0f MiB on the job's GPUs",
                (double)s->peak_other_bytes / 1048576.0);
  if (strncmp(r->nvml, "not sampled: ", 13) == 0) /* attach() outside run: NVML was not asked */
    add_finding(f, nf, "no-nvml",
                "no GPU samples: %.160s (run the job under vramledger run to sample them)",
                r->nvml + 13);
  else if (strncmp(r->nvml, "ok", 2) != 0)
    add_finding(f, nf, "no-nvml", "no GPU samples: NVML was not available (%.160s)", r->nvml);
  if (r->gaps) gap_finding(r, f, nf);
  if (r->damaged)
    add_finding(f, nf, "damaged",
                "%u line%s of the record could not be read and %s skipped (line %zu%s%s: %s): "
                "the numbers around %s may miss an event",
                r->damaged, r->damaged == 1 ? "" : "s", r->damaged == 1 ? "was" : "were",
                r->damaged_line, r->damaged_file[0] ? " of " : "", r->damaged_file, r->damaged_why,
                r->damaged == 1 ? "it" : "them");
  if (r->implausible)
    add_finding(f, nf, "implausible",
                "line %zu%s%s: %s: damaged data, left out of the peaks (%u event%s in all)",
                r->implausible_line, r->implausible_file[0] ? " of " : "", r->implausible_file,
                r->implausible_what, r->implausible, r->implausible == 1 ? "" : "s");
  if (r->lost_no_slot_procs)
    add_finding(f, nf, "no-slot",
                "%u process%s of the job allocated GPU memory after all %u counter slots were "
                "taken: their bytes are missing from the driver-allocated counts (NVML's "
                "process memory still has them)",
                r->lost_no_slot_procs, r->lost_no_slot_procs == 1 ? "" : "es", r->lost_slots);
  if (r->lost_uncounted)
    add_finding(f, nf, "uncounted",
                "%llu allocation%s went uncounted: a process had no memory to track more "
                "(ulimit -v?); the driver-allocated counts are low from then on",
                (unsigned long long)r->lost_uncounted, r->lost_uncounted == 1 ? "" : "s");
  if (r->truncated)
    add_finding(f, nf, "truncated", "the record's last line was cut: %s",
                r->disk_full ? "the disk was full" : "the job or vramledger died mid-write");
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

vl_status vl_record_mark_median_s(const struct vl_record *rec, const char *name, double *median_s) {
  *median_s = 0;
  size_t n = 0;
  for (size_t i = 0; i < rec->n_marks; i++)
    n += !strcmp(rec->marks[i].name, name);
  if (n < 2) return VL_OK;
  uint64_t *t = vl_malloc(n * sizeof *t);
  if (!t) return VL_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < rec->n_marks; i++)
    if (!strcmp(rec->marks[i].name, name)) t[k++] = rec->marks[i].t_ns;
  qsort(t, n, sizeof *t, cmp_u64);
  for (size_t i = 0; i + 1 < n; i++) /* intervals, in place */
    t[i] = t[i + 1] - t[i];
  qsort(t, n - 1, sizeof *t, cmp_u64);
  size_t m = n - 1;
  double med = m % 2 ? (double)t[m / 2] : ((double)t[m / 2 - 1] + (double)t[m / 2]) / 2;
  vl_free(t);
  *median_s = med * 1e-9;
  return VL_OK;
}
