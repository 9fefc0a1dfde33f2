/* doctor: the diagnosis of a run's memory (vramledger/doctor.h). Every
 * threshold is here and in docs/cmd/doctor.md. */
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/doctor.h"
#include "vramledger/leak.h"

#define VL_D_ID(e, id, slug) id,
#define VL_D_SLUG(e, id, slug) slug,
static const char *const ids[] = {VL_DIAGS(VL_D_ID)};
static const char *const slugs[] = {VL_DIAGS(VL_D_SLUG)};

const char *vl_diag_id(enum vl_diag_kind k) { return k < VL_D_COUNT ? ids[k] : "?"; }
const char *vl_diag_slug(enum vl_diag_kind k) { return k < VL_D_COUNT ? slugs[k] : "?"; }

static void add(struct vl_diag *out, int *n, enum vl_diag_kind k, enum vl_severity sev, double a,
                double b, double c, const char *text) {
  if (*n >= VL_MAX_DIAGS) return;
  out[*n] = (struct vl_diag){.kind = k, .severity = sev, .a = a, .b = b, .c = c, .part = -1};
  snprintf(out[*n].text, sizeof out[*n].text, "%s", text ? text : "");
  (*n)++;
}

/* VL-D004 with each layer's evidence: a, b, c the framework layer's (per
 * step, in all, steps), leak both. */
static void add_leak(struct vl_diag *out, int *n, const struct vl_leak *l) {
  add(out, n, VL_D_LEAK, VL_SEV_ERROR, l->step_bytes, (double)l->step_total_bytes, l->steps, NULL);
  if (out[*n - 1].kind == VL_D_LEAK) out[*n - 1].leak = *l;
}

/* reserved at the start of steps 4.. rising while allocated does not */
static double cache_growth(const struct vl_record *r, unsigned pid, uint64_t *first,
                           uint64_t *last) {
  *first = *last = 0;
  unsigned n = 0;
  for (size_t k = 0; k < r->n_phases; k++) {
    const struct vl_rec_phase *p = &r->phases[k];
    if (p->pid != pid || !p->has_alloc || strcmp(p->phase, "idle") != 0 || p->step < 4) continue;
    if (n++ == 0) *first = p->reserved;
    *last = p->reserved;
  }
  return n >= 3 && *first ? (double)*last / (double)*first - 1 : 0;
}

/* Of the ranks' bills, the part that sets the fullest rank apart from the
 * emptiest the most (steady peaks: DDP's first buckets aside). */
static void imbalance_part(const struct vl_probe_layer *f, struct vl_diag *d) {
  const struct vl_fw_rank *hi = NULL, *lo = NULL;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    const struct vl_fw_rank *x = &f->ranks[k];
    if (!x->has_bill) return;
    uint64_t v = f->cuda ? x->steady_peak_allocated : x->peak_named;
    if (!hi || v > (f->cuda ? hi->steady_peak_allocated : hi->peak_named)) hi = x;
    if (!lo || v < (f->cuda ? lo->steady_peak_allocated : lo->peak_named)) lo = x;
  }
  if (!hi || hi == lo) return;
  double best = 0;
  for (int i = 0; i < VL_BILL_N + 2; i++) {
    uint64_t h = i < VL_BILL_N    ? hi->bill[i]
                 : i == VL_BILL_N ? hi->cublas_workspaces
                                  : hi->transient;
    uint64_t l = i < VL_BILL_N    ? lo->bill[i]
                 : i == VL_BILL_N ? lo->cublas_workspaces
                                  : lo->transient;
    double diff = (double)h - (double)l;
    if (diff > best) {
      best = diff;
      d->part = i;
    }
  }
  d->c = best;
  d->rank_hi = hi->rank;
  d->rank_lo = lo->rank;
}

int vl_doctor(const struct vl_record *r, const struct vl_run_summary *s,
              const struct vl_probe_layer *f, struct vl_diag out[VL_MAX_DIAGS]) {
  int n = 0;
  unsigned ranks = f->present ? f->n_ranks : 1;
  /* DataLoader workers (or any helper) holding CUDA contexts */
  if (s->max_tree_procs > ranks)
    add(out, &n, VL_D_EXTRA_CONTEXTS, VL_SEV_WARN, s->max_tree_procs, ranks,
        (double)s->context_bytes, NULL);
  /* processes the job started still running when the record closed: what
   * they held after that is not in it (a, b: left, outlived the job's
   * own; c: run waited; text: their first PIDs) */
  if (r->desc_left) {
    char pids[sizeof out[0].text];
    vl__pid_list(pids, sizeof pids, r->desc_pids, r->n_desc_pids, false); /* a, b: how many */
    add(out, &n, VL_D_DESCENDANTS_LEFT, VL_SEV_WARN, r->desc_left, r->desc_procs, r->desc_waited,
        pids);
  }
  if (f->present && f->oom)
    add(out, &n, VL_D_OOM, VL_SEV_ERROR, (double)f->first_oom.request_bytes,
        (double)f->first_oom.device_free_bytes, f->first_oom.step, f->first_oom.phase);
  if (f->present && r->probe_note[0])
    add(out, &n, VL_D_PROBE_STOPPED, VL_SEV_WARN, 0, 0, 0, r->probe_note);
  /* a leak: the one rule report's finding uses too (lib/measure/leak.c),
   * on whichever layers the record has */
  struct vl_leak leak;
  bool leaks = vl_leak_judge(r, s->peak_process_bytes, f, &leak);
  if (!f->present) {
    if (leaks) add_leak(out, &n, &leak);
    add(out, &n, VL_D_NO_PROBE, VL_SEV_INFO, 0, 0, 0, NULL);
    return n;
  }
  if (f->cuda && f->peak_reserved) {
    /* fragmentation: at the peak, cached free blocks > 25 % of reserved,
     * or > 10 % with inactive split blocks > 10 % of reserved at the end
     * of the peak's phase (free blocks right after backward are normal:
     * the next forward reuses them) */
    double split = (double)f->peak_inactive_split / (double)f->peak_reserved;
    double cached =
        (double)vl__sub0(f->peak_reserved, f->peak_allocated) / (double)f->peak_reserved;
    if (cached > 0.25 || (cached > 0.10 && split > 0.10))
      add(out, &n, VL_D_FRAGMENTATION, VL_SEV_WARN, split, cached, (double)f->peak_reserved, NULL);
  }
  if (f->alloc_retries > 0)
    add(out, &n, VL_D_ALLOC_RETRIES, VL_SEV_WARN, (double)f->alloc_retries, 0, 0, NULL);
  if (leaks) add_leak(out, &n, &leak);
  if (f->cuda && strcmp(f->peak_phase, "pre_step") == 0)
    add(out, &n, VL_D_CLIP_PEAK, VL_SEV_WARN, (double)f->peak_allocated, 0, f->peak_step, NULL);
  if (f->has_bill && strcmp(f->bill_phase, "optimizer") == 0 && f->peak_allocated &&
      (double)f->transient > 0.25 * (double)f->peak_allocated)
    add(out, &n, VL_D_OPTIMIZER_PEAK, VL_SEV_WARN, (double)f->transient, (double)f->peak_allocated,
        0, NULL);
  if (f->reserved_drops >= 3)
    add(out, &n, VL_D_EMPTY_CACHE, VL_SEV_WARN, f->reserved_drops, 0, 0, NULL);
  /* ranks apart: unless DDP's first buckets kept into step 2 on some
   * ranks (and not others) is all that sets them apart */
  if (f->ddp_kept_ranks) {
    char who[sizeof out[0].text] = "";
    double extra = 0;
    for (unsigned k = 0; k < f->n_rank_peaks; k++) {
      const struct vl_fw_rank *x = &f->ranks[k];
      if (!x->ddp_step2_extra) continue;
      size_t len = strlen(who);
      snprintf(who + len, sizeof who - len, "%s%u", len ? ", " : "", x->rank);
      if (!extra) extra = (double)x->ddp_step2_extra;
    }
    add(out, &n, VL_D_DDP_FIRST_BUCKETS, VL_SEV_INFO, extra, f->ddp_kept_ranks, f->n_rank_peaks,
        who);
  }
  if (f->n_rank_peaks > 1 && f->steady_rank_imbalance > 0.05) {
    add(out, &n, VL_D_RANK_IMBALANCE, VL_SEV_WARN, f->steady_rank_imbalance, f->n_rank_peaks, 0,
        NULL);
    if (n && out[n - 1].kind == VL_D_RANK_IMBALANCE) imbalance_part(f, &out[n - 1]);
  }
  if (f->has_bill && f->peak_allocated &&
      (double)f->bill[VL_BILL_ACTIVATIONS] > 0.5 * (double)f->peak_allocated)
    add(out, &n, VL_D_ACTIVATIONS, VL_SEV_INFO, (double)f->bill[VL_BILL_ACTIVATIONS],
        (double)f->peak_allocated, 0, NULL);
  /* more than one half-precision copy per fp32 weight byte (a copy is half
   * of its fp32 weight; 20 % slack) */
  if (f->has_bill && f->bill[VL_BILL_PARAMETERS] &&
      (double)f->bill[VL_BILL_AUTOCAST] > 0.6 * (double)f->bill[VL_BILL_PARAMETERS])
    add(out, &n, VL_D_CASTS, VL_SEV_WARN, (double)f->bill[VL_BILL_AUTOCAST],
        (double)f->bill[VL_BILL_PARAMETERS], 0, NULL);
  uint64_t first, last;
  double cg = cache_growth(r, f->main_pid, &first, &last);
  if (cg > 0.05 && f->growth_bytes_per_step * 10 < (double)(last - first))
    add(out, &n, VL_D_CACHE_GROWS, VL_SEV_WARN, cg, (double)first, (double)last, NULL);
  return n;
}
