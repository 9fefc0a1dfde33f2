/* `report --format trace`: the record as Chrome trace event JSON, the
 * format Perfetto (ui.perfetto.dev) and chrome://tracing import.
 *
 * One process track for the job (NVML and interposer counters), one per
 * GPU (its NVML counters) and one per process with the probe (its phases
 * as slices, its caching allocator's counters), each named by
 * process_name metadata and kept in that order by process_sort_index.
 * The pids are the trace's own numbers, 1, 2, ...; the names carry the
 * processes' real pids, and so do the tids.
 *
 * Times are integer microseconds from the record's start, each computed
 * once from a boundary's nanoseconds: a slice's dur is its end's
 * microsecond minus its start's, so a phase ends exactly where the next
 * begins. Perfetto truncates a real ts or dur on its own (CoerceToNs,
 * trace_processor/importers/json/json_trace_utils.cc) and drops a slice
 * that is not nested in the one open on its track (SliceTracker::
 * MaybeCloseStack); tests/trace/perfetto_check.c applies both rules.
 *
 * A counter event feeds one track per argument, named "<name> <argument>",
 * so the names here carry no unit and the argument is the unit: "GiB". */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/internal.h"
#include "internal.h"
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

enum { JOB_PID = 1 }; /* then the GPUs, then the probed processes */

/* Microseconds from the record's start; 0 before it. */
static json_int_t us(const struct vl_record *r, uint64_t t_ns) {
  return (json_int_t)(vl__sub0(t_ns, r->start_ns) / 1000);
}

static void meta(json_t *ev, const char *what, int pid, unsigned tid, const char *key,
                 json_t *value) {
  json_t *e = json_object();
  json_object_set_new(e, "name", vl__json_str(what));
  json_object_set_new(e, "ph", vl__json_str("M"));
  json_object_set_new(e, "pid", json_integer(pid));
  if (tid) json_object_set_new(e, "tid", json_integer(tid));
  json_t *a = json_object();
  json_object_set_new(a, key, value);
  json_object_set_new(e, "args", a);
  json_array_append_new(ev, e);
}

/* A process track: its name and its place among the others. */
static void process(json_t *ev, int pid, const char *name) {
  meta(ev, "process_name", pid, 0, "name", vl__json_str(name));
  meta(ev, "process_sort_index", pid, 0, "sort_index", json_integer(pid));
}

static void counter(json_t *ev, int pid, const char *name, json_int_t ts, uint64_t bytes) {
  json_t *e = json_object();
  json_object_set_new(e, "name", vl__json_str(name));
  json_object_set_new(e, "ph", vl__json_str("C"));
  json_object_set_new(e, "ts", json_integer(ts));
  json_object_set_new(e, "pid", json_integer(pid));
  json_t *a = json_object();
  json_object_set_new(a, "GiB", json_real(GIB(bytes)));
  json_object_set_new(e, "args", a);
  json_array_append_new(ev, e);
}

/* An instant on its process's track ("s": "p"): a mark, an OOM. */
static void instant(json_t *ev, int pid, unsigned tid, const char *name, json_int_t ts) {
  json_t *e = json_object();
  json_object_set_new(e, "name", vl__json_str(name));
  json_object_set_new(e, "ph", vl__json_str("i"));
  json_object_set_new(e, "s", vl__json_str("p"));
  json_object_set_new(e, "ts", json_integer(ts));
  json_object_set_new(e, "pid", json_integer(pid));
  json_object_set_new(e, "tid", json_integer(tid));
  json_array_append_new(ev, e);
}

/* The processes with the probe's phases or steps, by rank then pid: each
 * gets a track. */
struct ranks {
  struct rank_proc {
    unsigned os_pid, rank;
  } * p;
  size_t n;
};

static int rank_cmp(const void *a, const void *b) {
  const struct rank_proc *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->os_pid < y->os_pid ? -1 : x->os_pid > y->os_pid;
}

static void ranks_add(struct ranks *k, unsigned os_pid, unsigned rank) {
  for (size_t i = 0; i < k->n; i++)
    if (k->p[i].os_pid == os_pid) return;
  k->p[k->n++] = (struct rank_proc){os_pid, rank};
}

/* The trace pid of a probed process; 0: not one. */
static int rank_pid(const struct ranks *k, int first, unsigned os_pid) {
  for (size_t i = 0; i < k->n; i++)
    if (k->p[i].os_pid == os_pid) return first + (int)i;
  return 0;
}

/* The job: what NVML and the interposer saw of all its processes. */
static void job_track(json_t *ev, const struct vl_record *r) {
  char name[sizeof r->command + 8];
  snprintf(name, sizeof name, "job: %s", r->command[0] ? r->command : "vramledger run");
  process(ev, JOB_PID, name);
  for (size_t i = 0; i < r->n_samples; i++) {
    const struct vl_rec_sample *s = &r->samples[i];
    json_int_t ts = us(r, s->t_ns);
    counter(ev, JOB_PID, "process memory (NVML)", ts, s->tree_bytes);
    /* the most since the previous sample, as report's peak and the HTML
     * chart take it: a block held between two samples shows */
    counter(ev, JOB_PID, "driver-allocated (interposer)", ts, s->cuda_alloc_max_bytes);
    counter(ev, JOB_PID, "context + other", ts, vl__sub0(s->tree_bytes, s->cuda_alloc_bytes));
  }
}

/* One GPU: the job's bytes on it and the device's used memory (NVML). */
static void gpu_track(json_t *ev, const struct vl_record *r, unsigned g, int pid) {
  const struct vl_rec_gpu *gpu = &r->gpus[g];
  char name[128];
  snprintf(name, sizeof name, "GPU %u: %s", gpu->index, gpu->name);
  process(ev, pid, name);
  if (gpu->index >= VL_RECORD_MAX_GPUS) return;
  for (size_t i = 0; i < r->n_samples; i++) {
    const struct vl_rec_sample *s = &r->samples[i];
    json_int_t ts = us(r, s->t_ns);
    counter(ev, pid, "job's memory (NVML)", ts, s->gpu_tree[gpu->index]);
    counter(ev, pid, "device used (NVML)", ts, s->gpu_used[gpu->index]);
  }
}

/* One probed process: its phases as slices on the thread of its pid, and
 * the caching allocator's counters at each phase's end. */
static void rank_track(json_t *ev, const struct vl_record *r, const struct rank_proc *k, int pid) {
  char name[64];
  snprintf(name, sizeof name, "rank %u (pid %u)", k->rank, k->os_pid);
  process(ev, pid, name);
  snprintf(name, sizeof name, "phases, pid %u", k->os_pid);
  meta(ev, "thread_name", pid, k->os_pid, "name", vl__json_str(name));
  for (size_t i = 0; i < r->n_phases; i++) {
    const struct vl_rec_phase *p = &r->phases[i];
    if (p->pid != k->os_pid || p->t0_ns < r->start_ns || p->t_ns < p->t0_ns) continue;
    json_int_t t0 = us(r, p->t0_ns), t1 = us(r, p->t_ns);
    json_t *e = json_object();
    json_object_set_new(e, "name", vl__json_str(p->phase));
    json_object_set_new(e, "ph", vl__json_str("X"));
    json_object_set_new(e, "ts", json_integer(t0));
    json_object_set_new(e, "dur", json_integer(t1 - t0));
    json_object_set_new(e, "pid", json_integer(pid));
    json_object_set_new(e, "tid", json_integer(k->os_pid));
    json_t *a = json_object();
    json_object_set_new(a, "step", json_integer(p->step));
    if (p->has_alloc)
      json_object_set_new(a, "peak_allocated_GiB", json_real(GIB(p->peak_allocated)));
    json_object_set_new(e, "args", a);
    json_array_append_new(ev, e);
    if (!p->has_alloc) continue;
    counter(ev, pid, "allocated (PyTorch)", t1, p->allocated);
    counter(ev, pid, "reserved (PyTorch)", t1, p->reserved);
  }
  for (size_t i = 0; i < r->n_ooms; i++)
    if (r->ooms[i].pid == k->os_pid && r->ooms[i].t_ns >= r->start_ns)
      instant(ev, pid, k->os_pid, "out of memory", us(r, r->ooms[i].t_ns));
}

int vl__report_trace(FILE *out, const struct vl_report_view *v) {
  const struct vl_record *r = v->rec;
  struct ranks k = {vl_calloc(r->n_phases + r->n_steps + 1, sizeof *k.p), 0};
  if (!k.p) return -1;
  if (v->fw && v->fw->present) {
    for (size_t i = 0; i < r->n_phases; i++)
      ranks_add(&k, r->phases[i].pid, r->phases[i].rank);
    for (size_t i = 0; i < r->n_steps; i++)
      ranks_add(&k, r->steps[i].pid, r->steps[i].rank);
    qsort(k.p, k.n, sizeof *k.p, rank_cmp);
  }
  int first_rank = JOB_PID + 1 + (int)r->n_gpus;
  json_t *ev = json_array();
  job_track(ev, r);
  for (unsigned g = 0; g < r->n_gpus; g++)
    gpu_track(ev, r, g, JOB_PID + 1 + (int)g);
  for (size_t i = 0; i < k.n; i++)
    rank_track(ev, r, &k.p[i], first_rank + (int)i);
  for (size_t i = 0; i < r->n_marks; i++) { /* on their process's track, else the job's */
    const struct vl_rec_mark *m = &r->marks[i];
    int pid = rank_pid(&k, first_rank, m->pid);
    instant(ev, pid ? pid : JOB_PID, m->pid, m->name, us(r, m->t_ns));
  }
  vl_free(k.p);
  json_t *o = json_object();
  json_object_set_new(o, "traceEvents", ev);
  json_object_set_new(o, "displayTimeUnit", vl__json_str("ms"));
  int rc = json_dumpf(o, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
  json_decref(o);
  fputc('\n', out);
  return rc == 0 && !ferror(out) ? 0 : -1;
}
