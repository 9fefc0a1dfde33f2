/* The framework layer of a run, analysed: see vramledger/probe.h and
 * docs/model.md ("The measured bill"). Pure: no I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorted in place); 0 when n == 0. */
static double median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t named(const uint64_t b[VL_BILL_N]) {
  uint64_t s = 0;
  for (int i = 0; i < VL_BILL_N; i++)
    s += b[i];
  return s;
}

static bool is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* The phases whose peak is taken with the categories at their own end
 * (everything saved is still held there); the others with those at their
 * start (the end of the interval before). */
static bool billed_at_end(const char *phase) {
  return is(phase, "forward") || is(phase, "loss") || is(phase, "eval");
}

/* cuBLAS workspaces live at phase i of the main process: one for the
 * forward's thread once a forward ran, one for autograd's backward thread
 * once a backward ran (aten/src/ATen/cuda/CublasHandlePool.cpp keeps one
 * per thread and stream; measured: bench/results/probe/
 * unexplained.json). */
static uint64_t workspaces(const struct vl_record *r, unsigned pid, size_t upto, uint64_t ws) {
  bool fwd = false, bwd = false;
  for (size_t i = 0; i <= upto && i < r->n_phases; i++) {
    const struct vl_rec_phase *p = &r->phases[i];
    if (p->pid != pid) continue;
    if (is(p->phase, "forward") || is(p->phase, "eval")) fwd = true;
    if (is(p->phase, "backward")) bwd = true;
  }
  /* an interval that ends at `upto` ran its own kind already */
  return ws * ((uint64_t)fwd + (uint64_t)bwd);
}

static void ranks(const struct vl_record *r, struct vl_probe_layer *f) {
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *s = &r->steps[i];
    unsigned k = 0;
    while (k < f->n_rank_peaks && f->ranks[k].pid != s->pid)
      k++;
    if (k == f->n_rank_peaks) {
      if (k >= VL_FW_MAX_RANKS) continue;
      f->ranks[k] = (struct vl_fw_rank){.rank = s->rank, .pid = s->pid};
      f->n_rank_peaks++;
    }
    if (s->peak_allocated > f->ranks[k].peak_allocated)
      f->ranks[k].peak_allocated = s->peak_allocated;
    if (s->peak_reserved > f->ranks[k].peak_reserved) f->ranks[k].peak_reserved = s->peak_reserved;
  }
  bool alloc = true;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    struct vl_fw_rank *x = &f->ranks[k];
    for (size_t i = 0; i < r->n_phases; i++)
      if (r->phases[i].pid == x->pid && r->phases[i].has_bill &&
          named(r->phases[i].bill) > x->peak_named)
        x->peak_named = named(r->phases[i].bill);
    if (!x->peak_allocated) alloc = false;
  }
  uint64_t lo = UINT64_MAX, hi = 0;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    uint64_t v = alloc ? f->ranks[k].peak_allocated : f->ranks[k].peak_named;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  f->rank_imbalance = f->n_rank_peaks > 1 && hi ? (double)(hi - lo) / (double)hi : 0;
}

/* DDP's first gradient buckets kept into step 2 (docs/model.md, DDP's two
 * outcomes): a rank whose step-2 peak stands above its peak of every later
 * step (steps 3.., two at least) by the parameters' bytes, the buckets'
 * copy of the gradients, within 20 %. Then the ranks' imbalance again with
 * those ranks at their later steps' peak. */
static void ddp_first_buckets(const struct vl_record *r, struct vl_probe_layer *f) {
  const double P = (double)f->bill[VL_BILL_PARAMETERS];
  uint64_t lo = UINT64_MAX, hi = 0;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    struct vl_fw_rank *x = &f->ranks[k];
    uint64_t step2 = 0, later = 0;
    unsigned n_later = 0;
    for (size_t i = 0; i < r->n_steps; i++) {
      const struct vl_rec_step *s = &r->steps[i];
      if (s->pid != x->pid || !s->has_peak) continue;
      if (s->step == 2 && s->peak_allocated > step2) step2 = s->peak_allocated;
      if (s->step >= 3) {
        if (s->peak_allocated > later) later = s->peak_allocated;
        n_later++;
      }
    }
    x->steady_peak_allocated = x->peak_allocated;
    double d = (double)step2 - (double)later;
    if (f->n_rank_peaks > 1 && P > 0 && n_later >= 2 && later && d > 0.8 * P && d < 1.2 * P) {
      x->ddp_step2_extra = step2 - later;
      x->steady_peak_allocated = later;
      x->ddp_extra_in_bill = x->has_bill && x->bill_step == 2 && x->transient >= x->ddp_step2_extra;
      f->ddp_kept_ranks++;
    }
    if (x->steady_peak_allocated < lo) lo = x->steady_peak_allocated;
    if (x->steady_peak_allocated > hi) hi = x->steady_peak_allocated;
  }
  f->steady_rank_imbalance =
      f->ddp_kept_ranks && hi ? (double)(hi - lo) / (double)hi : f->rank_imbalance;
}

static void timing(const struct vl_record *r, struct vl_probe_layer *f, double *buf) {
  size_t n = 0, nt = 0, nsam = 0, nl = 0, ns = 0;
  double *t = buf, *tok = buf + r->n_steps, *sam = buf + 2 * r->n_steps,
         *light = buf + 3 * r->n_steps, *smp = buf + 4 * r->n_steps;
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *s = &r->steps[i];
    if (s->pid != f->main_pid || s->time_ns == 0) continue;
    f->n_steps++;
    double sec = (double)s->time_ns * 1e-9;
    bool first = s->step == 1 && f->n_steps == 1; /* start-up: compile, cuBLAS, allocator */
    if (!first) {
      t[n++] = sec;
      if (s->tokens) tok[nt++] = (double)s->tokens / sec;
      if (s->samples) sam[nsam++] = (double)s->samples / sec;
    }
    if (s->probe_ns) {
      double share = (double)s->probe_ns / (double)s->time_ns;
      if (s->sampled)
        smp[ns++] = share;
      else
        light[nl++] = share;
    }
  }
  if (n == 0) /* one step only */
    for (size_t i = 0; i < r->n_steps; i++)
      if (r->steps[i].pid == f->main_pid && r->steps[i].time_ns)
        t[n++] = (double)r->steps[i].time_ns * 1e-9;
  f->step_s_median = median(t, n);
  f->tokens_per_s = median(tok, nt);
  f->samples_per_s = median(sam, nsam);
  f->probe_share_light = median(light, nl);
  f->probe_share_sampled = median(smp, ns);
}

/* The billed step: a sampled step with the highest peak (or, without
 * allocator counters, the highest named sum at a boundary). */
static const struct vl_rec_step *billed_step(const struct vl_record *r, unsigned pid) {
  const struct vl_rec_step *best = NULL;
  uint64_t best_v = 0;
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *s = &r->steps[i];
    if (s->pid != pid || !s->sampled) continue;
    uint64_t v = s->peak_allocated;
    if (!s->has_peak)
      for (size_t k = 0; k < r->n_phases; k++) {
        const struct vl_rec_phase *p = &r->phases[k];
        if (p->pid == pid && p->step == s->step && p->has_bill && named(p->bill) > v)
          v = named(p->bill);
      }
    if (!best || v > best_v) {
      best = s;
      best_v = v;
    }
  }
  return best;
}

/* One process's bill at the peak of its billed step s: the categories at
 * the boundary that holds the peak, the cuBLAS workspaces, the rest as
 * transient. idx/n: the step's intervals, for the ledger. */
struct one_bill {
  bool has;
  char phase[16], taken_at[16];
  uint64_t bill[VL_BILL_N], workspaces, transient;
  bool by_difference;
  size_t idx[VL_FW_MAX_LEDGER * 4];
  unsigned n;
};

static void one_bill(const struct vl_record *r, unsigned pid, bool cuda,
                     const struct vl_rec_step *s, uint64_t ws, struct one_bill *o) {
  memset(o, 0, sizeof *o);
  /* the step's intervals, in order */
  for (size_t k = 0; k < r->n_phases && o->n < sizeof o->idx / sizeof o->idx[0]; k++)
    if (r->phases[k].pid == pid && r->phases[k].step == s->step) o->idx[o->n++] = k;
  if (o->n == 0) return;
  /* the interval that holds the peak: of the step's peak phase, the one
   * with the highest peak; without allocator counters, the boundary that
   * names the most (the first of equals) */
  unsigned at = 0;
  uint64_t best = 0;
  bool found = false;
  for (unsigned j = 0; j < o->n; j++) {
    const struct vl_rec_phase *p = &r->phases[o->idx[j]];
    if (s->has_peak && !is(p->phase, s->peak_phase)) continue;
    uint64_t v = s->has_peak ? p->peak_allocated : named(p->bill);
    if (!found || v > best) {
      at = j;
      best = v;
      found = true;
    }
  }
  const struct vl_rec_phase *peak = &r->phases[o->idx[at]];
  size_t take = o->idx[at];
  if (!billed_at_end(peak->phase)) {
    /* the boundary before: the previous interval of this process */
    for (size_t k = o->idx[at]; k-- > 0;)
      if (r->phases[k].pid == pid) {
        take = k;
        break;
      }
  }
  const struct vl_rec_phase *b = &r->phases[take];
  if (!b->has_bill) return;
  o->has = true;
  snprintf(o->phase, sizeof o->phase, "%s", peak->phase);
  snprintf(o->taken_at, sizeof o->taken_at, "%s", take == o->idx[at] ? "end" : "start");
  memcpy(o->bill, b->bill, sizeof o->bill);
  o->workspaces = cuda ? workspaces(r, pid, o->idx[at], ws) : 0;
  uint64_t peak_bytes = s->has_peak ? s->peak_allocated : named(b->bill);
  if (!b->acts_known && b->has_alloc) {
    o->by_difference = true;
    o->bill[VL_BILL_ACTIVATIONS] =
        vl__sub0(b->allocated, named(o->bill) + workspaces(r, pid, take, ws));
  }
  o->transient = vl__sub0(peak_bytes, named(o->bill) + o->workspaces);
}

static vl_status bill(const struct vl_record *r, struct vl_probe_layer *f,
                      const struct vl_rec_step *s, uint64_t ws) {
  struct one_bill *o = vl_malloc(sizeof *o);
  if (!o) return VL_ENOMEM;
  one_bill(r, f->main_pid, f->cuda, s, ws, o);
  if (!o->has) {
    vl_free(o);
    return VL_OK;
  }
  f->has_bill = true;
  f->bill_step = s->step;
  snprintf(f->bill_phase, sizeof f->bill_phase, "%s", o->phase);
  snprintf(f->bill_taken_at, sizeof f->bill_taken_at, "%s", o->taken_at);
  memcpy(f->bill, o->bill, sizeof f->bill);
  f->cublas_workspaces = o->workspaces;
  f->activations_by_difference = o->by_difference;
  f->transient = o->transient;
  const size_t *idx = o->idx;
  const unsigned n = o->n;
  /* the ledger: every boundary of the step */
  f->worst_unnamed_share = 0;
  for (unsigned j = 0; j < n && f->n_ledger < VL_FW_MAX_LEDGER; j++) {
    const struct vl_rec_phase *p = &r->phases[idx[j]];
    if (!p->has_bill || !p->has_alloc) continue;
    struct vl_fw_boundary *e = &f->ledger[f->n_ledger++];
    snprintf(e->phase, sizeof e->phase, "%s", p->phase);
    e->allocated = p->allocated;
    e->named = named(p->bill);
    e->cublas_workspaces = workspaces(r, f->main_pid, idx[j], ws);
    /* memory_allocated() counts blocks; the bill counts tensors' bytes:
     * the difference is the allocator's, named as rounding */
    e->rounding = p->has_requested ? vl__sub0(p->allocated, p->requested) : 0;
    e->unnamed = (int64_t)p->allocated - (int64_t)e->rounding - (int64_t)e->named -
                 (int64_t)e->cublas_workspaces;
    if (!p->acts_known) continue; /* compiled: activations are the difference */
    double share = p->allocated ? (double)llabs(e->unnamed) / (double)p->allocated : 0;
    if (share > f->worst_unnamed_share) f->worst_unnamed_share = share;
  }
  f->n_modules = s->n_modules;
  memcpy(f->modules, s->modules, sizeof f->modules);
  vl_free(o);
  return VL_OK;
}

/* every rank's own bill at the peak of its billed step */
static vl_status rank_bills(const struct vl_record *r, struct vl_probe_layer *f, uint64_t ws) {
  struct one_bill *o = vl_malloc(sizeof *o);
  if (!o) return VL_ENOMEM;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    struct vl_fw_rank *x = &f->ranks[k];
    const struct vl_rec_step *s = billed_step(r, x->pid);
    if (!s) continue;
    one_bill(r, x->pid, f->cuda, s, ws, o);
    if (!o->has) continue;
    x->has_bill = true;
    x->bill_step = s->step;
    snprintf(x->bill_phase, sizeof x->bill_phase, "%s", o->phase);
    memcpy(x->bill, o->bill, sizeof x->bill);
    x->cublas_workspaces = o->workspaces;
    x->transient = o->transient;
  }
  vl_free(o);
  return VL_OK;
}

static void growth(const struct vl_record *r, struct vl_probe_layer *f) {
  /* allocated after each step, steps 4.. (every step has it) */
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  unsigned n = 0;
  uint64_t first = 0, last = 0, prev_reserved = 0;
  for (size_t k = 0; k < r->n_steps; k++) {
    const struct vl_rec_step *s = &r->steps[k];
    if (s->pid != f->main_pid || !s->has_end) continue;
    if (prev_reserved && s->reserved < prev_reserved) f->reserved_drops++;
    prev_reserved = s->reserved;
    if (s->step < 4) continue;
    double x = s->step, y = (double)s->allocated;
    if (n == 0) first = s->allocated;
    last = s->allocated;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    n++;
  }
  f->growth_steps = n;
  if (n >= 3) {
    double d = n * sxx - sx * sx;
    f->growth_bytes_per_step = d > 0 ? (n * sxy - sx * sy) / d : 0;
    f->growth_total = last > first ? last - first : 0;
  }
}

static vl_status analyze(const struct vl_record *r, struct vl_probe_layer *f) {
  if (r->n_probes == 0 && r->n_phases == 0) return VL_OK;
  f->present = true;
  for (unsigned i = 0; i < r->n_alloc_libs && f->n_outside < 8; i++)
    if (strncmp(r->alloc_libs[i].name, "libc10_cuda", 11) != 0 && r->alloc_libs[i].peak) {
      struct vl_fw_lib *l = &f->outside[f->n_outside++];
      snprintf(l->name, sizeof l->name, "%s", r->alloc_libs[i].name);
      l->bytes = r->alloc_libs[i].peak;
    }
  /* the process analysed: rank 0 among those that ran steps (a launcher
   * such as torchrun imports torch too, and runs none) */
  f->main_pid = r->n_steps ? r->steps[0].pid : r->n_phases ? r->phases[0].pid : r->probes[0].pid;
  for (size_t i = 0; i < r->n_steps; i++)
    if (r->steps[i].rank == 0) {
      f->main_pid = r->steps[i].pid;
      break;
    }
  uint64_t ws = 0;
  for (unsigned i = 0; i < r->n_probes; i++)
    if (r->probes[i].pid == f->main_pid) {
      snprintf(f->torch, sizeof f->torch, "%s", r->probes[i].torch);
      snprintf(f->device, sizeof f->device, "%s", r->probes[i].device_name);
      ws = r->probes[i].cublas_workspace_bytes;
    }
  f->n_ranks = 0; /* processes that ran steps (or wrote phases) */
  {
    unsigned seen[VL_FW_MAX_RANKS];
    for (size_t i = 0; i < r->n_phases && f->n_ranks < VL_FW_MAX_RANKS; i++) {
      unsigned k = 0;
      while (k < f->n_ranks && seen[k] != r->phases[i].pid)
        k++;
      if (k == f->n_ranks) seen[f->n_ranks++] = r->phases[i].pid;
    }
    if (f->n_ranks == 0) f->n_ranks = 1;
  }

  uint64_t prev_reserved = 0;
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    if (p->pid != f->main_pid) continue;
    if (p->has_alloc) {
      f->cuda = true;
      f->alloc_retries = p->alloc_retries;
      f->ooms = p->ooms;
      if (prev_reserved && p->reserved < prev_reserved) f->reserved_drops++;
      prev_reserved = p->reserved;
    }
    if (!f->load_bytes && is(p->phase, "idle") && p->step == 1 && p->has_alloc)
      f->load_bytes = p->allocated;
    if (!f->first_forward_bytes && is(p->phase, "forward") && p->has_alloc)
      f->first_forward_bytes = vl__sub0(p->allocated, f->load_bytes);
  }

  if (r->n_steps) {
    double *buf = vl_calloc(5 * r->n_steps, sizeof *buf);
    if (!buf) return VL_ENOMEM;
    timing(r, f, buf);
    vl_free(buf);
  }
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *s = &r->steps[i];
    if (s->pid != f->main_pid || !s->has_peak) continue;
    if (s->peak_allocated > f->peak_allocated ||
        (s->peak_allocated == f->peak_allocated && !f->peak_phase[0])) {
      f->peak_allocated = s->peak_allocated;
      f->peak_step = s->step;
      snprintf(f->peak_phase, sizeof f->peak_phase, "%s", s->peak_phase);
    }
    if (s->peak_reserved > f->peak_reserved) f->peak_reserved = s->peak_reserved;
  }
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    if (p->pid != f->main_pid || !p->has_alloc) continue;
    if (p->step == f->peak_step && is(p->phase, f->peak_phase))
      f->peak_inactive_split = p->inactive_split;
    uint64_t *group = is(p->phase, "forward") || is(p->phase, "loss") || is(p->phase, "backward")
                          ? &f->peak_fwd_bwd
                      : is(p->phase, "pre_step") || is(p->phase, "optimizer") ? &f->peak_optimizer
                                                                              : NULL;
    if (group && p->peak_allocated > *group) *group = p->peak_allocated;
  }
  const struct vl_rec_step *s = billed_step(r, f->main_pid);
  if (s && bill(r, f, s, ws) != VL_OK) return VL_ENOMEM;
  if (!f->peak_phase[0] && f->has_bill) { /* no allocator counters (CPU) */
    snprintf(f->peak_phase, sizeof f->peak_phase, "%s", f->bill_phase);
    f->peak_step = f->bill_step;
  }
  growth(r, f);
  ranks(r, f);
  if (f->n_rank_peaks > 1 && rank_bills(r, f, ws) != VL_OK) return VL_ENOMEM;
  if (f->cuda && f->has_bill)
    ddp_first_buckets(r, f);
  else
    f->steady_rank_imbalance = f->rank_imbalance;
  if (r->n_ooms) {
    f->oom = true;
    f->first_oom = r->ooms[0];
  }
  return VL_OK;
}

vl_status vl_probe_analyze(const struct vl_record *r, struct vl_probe_layer *f) {
  memset(f, 0, sizeof *f);
  vl_status s = analyze(r, f);
  if (s != VL_OK) memset(f, 0, sizeof *f); /* no layer rather than one with parts missing */
  return s;
}

void vl_probe_ladder(struct vl_probe_layer *f, const struct vl_run_summary *s) {
  if (!f->present || !f->cuda) return;
  f->has_ladder = true;
  f->ladder[0] = s->peak_process_bytes;
  f->ladder[1] = s->peak_cuda_alloc_bytes;
  f->ladder[2] = f->peak_reserved;
  f->ladder[3] = f->peak_allocated;
  f->ladder_ranks = 1;
  uint64_t res = 0, alloc = 0;
  bool all = f->n_rank_peaks > 1;
  for (unsigned k = 0; all && k < f->n_rank_peaks; k++) {
    all = f->ranks[k].peak_reserved && f->ranks[k].peak_allocated;
    res += f->ranks[k].peak_reserved;
    alloc += f->ranks[k].peak_allocated;
  }
  if (all) { /* peaks at different moments: an upper bound of what was held at once */
    f->ladder[2] = res;
    f->ladder[3] = alloc;
    f->ladder_ranks = f->n_rank_peaks;
  }
  f->gap_context = vl__sub0(f->ladder[0], f->ladder[1]);
  f->gap_outside = vl__sub0(f->ladder[1], f->ladder[2]);
  f->gap_cached = vl__sub0(f->ladder[2], f->ladder[3]);
  f->gap_fragmented =
      f->peak_inactive_split < f->gap_cached ? f->peak_inactive_split : f->gap_cached;
}
