/* perfetto_check [--ranks N] TRACE.json: import a Chrome trace JSON file the
 * way Perfetto's trace processor does, and say what it would lose.
 *
 * Debian ships no trace processor, so this applies its rules by hand:
 *
 * - Timestamps. JSON "ts" and "dur" are microseconds; an integer becomes
 *   ns by * 1000, a real by (int64_t)(value * 1000), truncated (CoerceToNs,
 *   src/trace_processor/importers/json/json_trace_utils.cc), or rounded to
 *   nearest in later releases (CoerceToTs, std::llround, in
 *   json_trace_tokenizer.cc). Both are tried; the worse counts. Two reals
 *   rounded apart need not meet where the next slice starts.
 * - Nesting. "Duration events should either be nested or disjoint, never
 *   partially intersecting" (SliceTracker::MaybeCloseStack,
 *   src/trace_processor/importers/common/slice_tracker.cc; the Perfetto
 *   FAQ, "Why are overlapping events in JSON traces not displayed
 *   correctly?": the JSON spec lets events only perfectly nest). Per
 *   track (pid, tid), in timestamp order, an open slice that ended before
 *   the new one starts is closed, and one that ends exactly where it
 *   starts too (intervals are closed on the left, open on the right;
 *   two zero-length instants stack); a new complete slice that starts
 *   inside an open one and ends after it is dropped
 *   (stats::slice_drop_overlapping_complete_event).
 * - Counters. A "C" event feeds one track per argument, named
 *   "<name> <argument>" (json_trace_parser.cc), so a unit in both reads
 *   twice ("... GiB GiB").
 *
 * It checks: no slice dropped, every pid named by a process_name, every
 * counter track named with its unit once, and with --ranks N exactly N
 * processes named "rank ...". Prints one summary line; exit 0 when all
 * hold, 1 when one does not, 2 on bad input. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ev {
  const json_t *ts, *dur; /* as written; dur NULL for an instant */
  int64_t pid, tid, ts_ns, dur_ns;
  size_t order; /* position in the file: the sorter keeps it for equal ts */
  const char *name;
};

/* CoerceToNs (json_trace_utils.cc) when !nearest, CoerceToTs
 * (json_trace_tokenizer.cc) when nearest. */
static int to_ns(const json_t *v, bool nearest, int64_t *ns) {
  if (json_is_integer(v)) {
    *ns = (int64_t)json_integer_value(v) * 1000;
    return 0;
  }
  if (json_is_real(v)) {
    double x = json_real_value(v) * 1000.0;
    *ns = nearest ? (int64_t)llround(x) : (int64_t)x;
    return 0;
  }
  return -1;
}

static int by_track_then_ts(const void *a, const void *b) {
  const struct ev *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ts_ns != y->ts_ns) return x->ts_ns < y->ts_ns ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

struct open_slice {
  int64_t ts, dur;
};

/* SliceTracker::MaybeCloseStack for a complete slice (new_dur known):
 * pops what ended, returns 0 to keep the new slice, -1 to drop it. */
static int close_stack(struct open_slice *st, size_t *n, int64_t ts, int64_t dur,
                       const struct open_slice **conflict) {
  for (size_t i = *n; i-- > 0;) {
    int64_t end = st[i].ts + st[i].dur;
    int ends_before = end < ts;
    int ends_same = end == ts && !(st[i].dur == 0 && dur == 0);
    if (ends_before || ends_same) {
      (*n)--; /* StackPop: the top of the stack */
      continue;
    }
    if (ts < end && ts + dur > end) {
      *conflict = &st[i];
      return -1;
    }
  }
  return 0;
}

static int64_t int_of(const json_t *o, const char *k, int64_t dflt) {
  const json_t *v = json_object_get(o, k);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

int main(int argc, char **argv) {
  long ranks = -1;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      ranks = strtol(argv[++i], NULL, 10);
    else
      path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: perfetto_check [--ranks N] TRACE.json\n");
    return 2;
  }
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  const json_t *events = json_object_get(root, "traceEvents");
  if (!json_is_array(events)) {
    fprintf(stderr, "%s: not a trace: %s\n", path, root ? "no traceEvents" : jerr.text);
    return 2;
  }
  size_t n_all = json_array_size(events), n = 0;
  struct ev *sl = calloc(n_all + 1, sizeof *sl);
  /* pids with events, and pids named: small sets, kept as arrays */
  int64_t *used = calloc(n_all + 1, sizeof *used), *named = calloc(n_all + 1, sizeof *named);
  size_t n_used = 0, n_named = 0;
  long rank_procs = 0, counter_tracks = 0, bad = 0;
  char **ctr = calloc(n_all + 1, sizeof *ctr); /* counter tracks seen: "pid name" */
  if (!sl || !used || !named || !ctr) return 2;
  for (size_t i = 0; i < n_all; i++) {
    const json_t *e = json_array_get(events, i);
    const char *ph = json_string_value(json_object_get(e, "ph"));
    const char *name = json_string_value(json_object_get(e, "name"));
    int64_t pid = int_of(e, "pid", 0), tid = int_of(e, "tid", pid);
    if (!ph || !name) {
      fprintf(stderr, "%s: event %zu has no ph or no name\n", path, i);
      bad++;
      continue;
    }
    if (strcmp(ph, "M") == 0) {
      const char *val = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
      if (strcmp(name, "process_name") == 0 && val) {
        named[n_named++] = pid;
        if (strncmp(val, "rank ", 5) == 0) rank_procs++;
      }
      continue;
    }
    used[n_used++] = pid;
    if (strcmp(ph, "C") == 0) {
      const char *k;
      const json_t *v;
      json_object_foreach((json_t *)json_object_get(e, "args"), k, v) {
        char key[512];
        snprintf(key, sizeof key, "%lld %s %s", (long long)pid, name, k);
        size_t c = 0;
        while (c < (size_t)counter_tracks && strcmp(ctr[c], key) != 0)
          c++;
        if (c < (size_t)counter_tracks) continue;
        ctr[counter_tracks++] = strdup(key);
        size_t ln = strlen(name), lk = strlen(k);
        if (ln > lk && strcmp(name + ln - lk, k) == 0 && name[ln - lk - 1] == ' ') {
          fprintf(stderr, "%s: counter track '%s %s' names its unit twice\n", path, name, k);
          bad++;
        }
      }
      continue;
    }
    int thread_instant =
        (strcmp(ph, "i") == 0 || strcmp(ph, "I") == 0) &&
        (!json_object_get(e, "s") || strcmp(json_string_value(json_object_get(e, "s")), "t") == 0);
    if (strcmp(ph, "X") != 0 && !thread_instant) continue; /* process/global instants: own tracks */
    struct ev *s = &sl[n];
    s->pid = pid;
    s->tid = tid;
    s->order = i;
    s->name = name;
    s->ts = json_object_get(e, "ts");
    s->dur = thread_instant ? NULL : json_object_get(e, "dur");
    if (to_ns(s->ts, false, &s->ts_ns) != 0 || (s->dur && to_ns(s->dur, false, &s->dur_ns) != 0)) {
      fprintf(stderr, "%s: slice '%s' (event %zu) has no ts or dur\n", path, name, i);
      bad++;
      continue;
    }
    n++;
  }
  struct open_slice *st = calloc(n + 1, sizeof *st);
  size_t dropped = 0, lost_by[2] = {0, 0};
  for (int nearest = 0; nearest < 2; nearest++) {
    for (size_t i = 0; i < n; i++) {
      to_ns(sl[i].ts, nearest, &sl[i].ts_ns);
      sl[i].dur_ns = 0;
      if (sl[i].dur) to_ns(sl[i].dur, nearest, &sl[i].dur_ns);
    }
    qsort(sl, n, sizeof *sl, by_track_then_ts);
    size_t depth = 0, lost = 0;
    for (size_t i = 0; i < n; i++) {
      if (i == 0 || sl[i].pid != sl[i - 1].pid || sl[i].tid != sl[i - 1].tid) depth = 0;
      const struct open_slice *c = NULL;
      if (sl[i].dur_ns < 0 || close_stack(st, &depth, sl[i].ts_ns, sl[i].dur_ns, &c) != 0) {
        if (lost < 5)
          fprintf(stderr,
                  "%s: dropped '%s' [%lld, +%lld ns] (pid %lld tid %lld, %s): overlaps [%lld, "
                  "+%lld]\n",
                  path, sl[i].name, (long long)sl[i].ts_ns, (long long)sl[i].dur_ns,
                  (long long)sl[i].pid, (long long)sl[i].tid, nearest ? "rounded" : "truncated",
                  c ? (long long)c->ts : 0LL, c ? (long long)c->dur : 0LL);
        lost++;
        continue;
      }
      st[depth++] = (struct open_slice){sl[i].ts_ns, sl[i].dur_ns};
    }
    lost_by[nearest] = lost;
    if (lost > dropped) dropped = lost;
  }
  long unnamed = 0, procs = 0;
  for (size_t i = 0; i < n_used; i++) {
    int seen = 0, ok = 0;
    for (size_t k = 0; k < i && !seen; k++)
      seen = used[k] == used[i];
    if (seen) continue;
    procs++;
    for (size_t k = 0; k < n_named && !ok; k++)
      ok = named[k] == used[i];
    if (!ok) {
      fprintf(stderr, "%s: pid %lld has events but no process_name\n", path, (long long)used[i]);
      unnamed++;
    }
  }
  printf("%s: %zu slices, %zu dropped (%zu truncating, %zu rounding), %ld processes (%ld named "
         "rank), %ld counter tracks\n",
         path, n, dropped, lost_by[0], lost_by[1], procs, rank_procs, counter_tracks);
  int fail = dropped || unnamed || bad;
  if (ranks >= 0 && rank_procs != ranks) {
    fprintf(stderr, "%s: %ld processes named rank, the record has %ld ranks\n", path, rank_procs,
            ranks);
    fail = 1;
  }
  for (long c = 0; c < counter_tracks; c++)
    free(ctr[c]);
  free(ctr);
  free(st);
  free(sl);
  free(used);
  free(named);
  json_decref(root);
  return fail;
}
