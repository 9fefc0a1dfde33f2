/* Fit check and the largest batch or sequence that fits.
 * The margin is the fragmentation reserve: keep 10-15 % of the card
 * free. */
#include <string.h>

#include "../util/internal.h"
#include "vramledger/catalog.h"

void vl_fit_check(uint64_t total_bytes, const struct vl_gpu *gpu, double margin,
                  struct vl_fit *fit) {
  struct vl__ck ck = {false};
  memset(fit, 0, sizeof *fit);
  fit->margin = margin;
  fit->capacity_bytes = gpu->memory_bytes;
  fit->usable_bytes = vl__scale(&ck, gpu->memory_bytes, 1.0 - margin);
  fit->headroom_bytes = (int64_t)fit->usable_bytes - (int64_t)total_bytes;
  if (total_bytes > (uint64_t)INT64_MAX) fit->headroom_bytes = INT64_MIN;
  fit->fits = total_bytes <= fit->usable_bytes;
}

bool vl_fit_near_edge(const struct vl_fit *fit, uint64_t range_bytes) {
  int64_t h = fit->headroom_bytes;
  if (!range_bytes || h == INT64_MIN) return false;
  return (uint64_t)(h < 0 ? -h : h) < range_bytes;
}

/* Does the job fit at value v? 1 yes, 0 no, -1 error (status in *s). */
static int fits_at(const struct vl_arch *arch, const struct vl_job *base,
                   const struct vl_overheads *ov, const struct vl_gpu *gpu, double margin,
                   enum vl_search_dim dim, uint64_t v, struct vl_bill *bill, vl_status *s,
                   struct vl_err *err) {
  struct vl_job job = *base;
  if (dim == VL_SEARCH_BATCH)
    job.batch = v;
  else
    job.seq = v;
  *s = vl_bill_compute(arch, &job, ov, bill, err);
  if (*s == VL_EOVERFLOW || *s == VL_ERANGE) return 0; /* beyond any card */
  if (*s == VL_ECONFLICT && dim == VL_SEARCH_SEQ && arch->learned_pos) return 0;
  if (*s != VL_OK) return -1;
  struct vl_fit fit;
  vl_fit_check(vl_bill_budget_bytes(bill), gpu, margin, &fit);
  return fit.fits ? 1 : 0;
}

vl_status vl_search_max(const struct vl_arch *arch, const struct vl_job *job,
                        const struct vl_overheads *ov, const struct vl_gpu *gpu, double margin,
                        enum vl_search_dim dim, uint64_t *best, struct vl_bill *bill,
                        struct vl_err *err) {
  vl_status s = VL_OK;
  *best = 0;
  const uint64_t limit = dim == VL_SEARCH_BATCH ? (1ull << 20) : (1ull << 24);
  int r = fits_at(arch, job, ov, gpu, margin, dim, 1, bill, &s, err);
  if (r < 0) return s;
  if (r == 0) return VL_OK;
  /* memory grows monotonically in batch and sequence: double, then bisect */
  uint64_t lo = 1, hi = 2;
  while (hi <= limit) {
    r = fits_at(arch, job, ov, gpu, margin, dim, hi, bill, &s, err);
    if (r < 0) return s;
    if (r == 0) break;
    lo = hi;
    hi *= 2;
  }
  if (hi > limit) hi = limit + 1;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    r = fits_at(arch, job, ov, gpu, margin, dim, mid, bill, &s, err);
    if (r < 0) return s;
    if (r)
      lo = mid;
    else
      hi = mid;
  }
  *best = lo;
  r = fits_at(arch, job, ov, gpu, margin, dim, lo, bill, &s, err); /* leave lo's bill */
  return r < 0 ? s : VL_OK;
}
