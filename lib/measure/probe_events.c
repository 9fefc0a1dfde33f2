/* The framework layer's events in a run record: what python/vramledger/
 * probe.py writes (probe, device, phase, step, oom). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "probe_events.h"
#include "record_schema.h"

const char *const vl_bill_part_names[VL_BILL_N] = {
    "parameters",       "gradients", "optimizer_states", "activations",
    "autocast_weights", "outputs",   "comm_buffers"};

uint64_t vl__rec_u(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

void vl__rec_clean(char *s) {
  for (unsigned char *p = (unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) {
      *p = '?';
    } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
      p[0] = '?';
      p[1] = '?';
      p++;
    }
  }
}

void vl__rec_str(char *dst, size_t n, json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  vl__utf8_copy(dst, n, json_is_string(v) ? json_string_value(v) : ""); /* cut whole */
  vl__rec_clean(dst);
}

int vl__rec_grow(void **p, size_t *cap, size_t n, size_t elem, size_t limit) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 64;
  if (nc > limit) nc = limit;
  if (n >= nc) return -1;
  void *q = vl_realloc(*p, nc * elem);
  if (!q) return -1;
  *p = q;
  *cap = nc;
  return 0;
}

/* bytes in the largest binary unit under 1024 of it ("8.0 EiB") */
static const char *human(char *buf, size_t n, uint64_t b) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)b;
  int k = 0;
  while (v >= 1024 && k < 6)
    v /= 1024, k++;
  snprintf(buf, n, k ? "%.1f %s" : "%.0f %s", v, unit[k]);
  return buf;
}

bool vl__rec_implausible(struct vl_record *r, size_t line, const char *what, uint64_t v,
                         uint64_t bound, const char *of) {
  if (!bound || v <= bound) return false;
  if (r->implausible++ == 0) {
    char a[32], b[32];
    r->implausible_line = line;
    snprintf(r->implausible_what, sizeof r->implausible_what,
             "%s, %s (%llu bytes), is more than the %s of %s", what, human(a, sizeof a, v),
             (unsigned long long)v, human(b, sizeof b, bound), of);
  }
  return true;
}

uint64_t vl__rec_gpus_bytes(const struct vl_record *r) {
  struct vl__ck ck = {false}; /* saturates: then no bound is passed */
  uint64_t sum = 0;
  for (unsigned i = 0; i < r->n_gpus; i++)
    sum = vl__add(&ck, sum, r->gpus[i].total_bytes);
  return sum;
}

uint64_t vl__rec_card_bytes(const struct vl_record *r) {
  uint64_t most = 0;
  for (unsigned i = 0; i < r->n_gpus; i++)
    most = vl__max(most, r->gpus[i].total_bytes);
  return most;
}

bool vl__rec_sample_implausible(struct vl_record *r, size_t line, const struct vl_rec_sample *s) {
  for (unsigned g = 0; g < VL_RECORD_MAX_GPUS; g++) {
    if (!s->gpu_used[g] && !s->gpu_tree[g]) continue;
    uint64_t card = vl__rec_card_bytes(r);
    char what[64], of[128] = "the job's largest GPU (NVML)";
    for (unsigned i = 0; i < r->n_gpus; i++)
      if (r->gpus[i].index == g) {
        card = r->gpus[i].total_bytes;
        snprintf(of, sizeof of, "GPU %u, %s (NVML)", g, r->gpus[i].name);
      }
    snprintf(what, sizeof what, "a sample's memory used on GPU %u", g);
    if (vl__rec_implausible(r, line, what, vl__max(s->gpu_used[g], s->gpu_tree[g]), card, of))
      return true;
  }
  uint64_t all = vl__rec_gpus_bytes(r);
  const char *gpus = "the job's GPUs (NVML)";
  return vl__rec_implausible(r, line, "a sample's process memory", s->tree_bytes, all, gpus) ||
         vl__rec_implausible(r, line, "a sample's driver-allocated bytes", s->cuda_alloc_max_bytes,
                             VL_REC_DRIVER_MAX, VL_REC_DRIVER_OF) ||
         vl__rec_implausible(r, line, "a sample's other processes' memory", s->other_bytes, all,
                             gpus);
}

/* A bill object; activations null = not tracked (torch.compile). */
static bool bill(json_t *o, uint64_t out[VL_BILL_N], bool *acts_known) {
  json_t *b = json_object_get(o, VL_RF(phase, bill)); /* oom.bill alike */
  if (!json_is_object(b)) return false;
  for (int i = 0; i < VL_BILL_N; i++)
    out[i] = vl__rec_u(b, vl_bill_part_names[i]);
  if (acts_known) *acts_known = json_is_integer(json_object_get(b, VL_RF(bill, activations)));
  return true;
}

static struct vl_rec_probe *probe_of(struct vl_record *r, unsigned pid) {
  for (unsigned i = 0; i < r->n_probes; i++)
    if (r->probes[i].pid == pid) return &r->probes[i];
  if (r->n_probes >= VL_REC_MAX_PROBES) return NULL;
  struct vl_rec_probe *p = &r->probes[r->n_probes++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  return p;
}

/* The bound of a process's PyTorch counters: the largest card's memory
 * when the process said it uses CUDA (a CPU job's bytes are host memory);
 * 0, none, otherwise. */
static uint64_t torch_bound(const struct vl_record *r, unsigned pid) {
  for (unsigned i = 0; i < r->n_probes; i++)
    if (r->probes[i].pid == pid) return r->probes[i].cuda ? vl__rec_card_bytes(r) : 0;
  return 0;
}

vl_status vl__probe_event(json_t *o, const char *type, struct vl_record *r,
                          struct vl__probe_caps *caps, size_t line, struct vl_err *err,
                          bool *handled) {
  *handled = true;
  if (strcmp(type, VL_RT(phase)) == 0) {
    if (vl__rec_grow((void **)&r->phases, &caps->phases, r->n_phases, sizeof *r->phases, 1u << 24))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many phase events", line);
    struct vl_rec_phase *p = &r->phases[r->n_phases++];
    memset(p, 0, sizeof *p);
    p->t_ns = vl__rec_u(o, VL_RF(phase, t_ns));
    p->t0_ns = vl__rec_u(o, "t0_ns");
    p->pid = (unsigned)vl__rec_u(o, VL_RF(phase, pid));
    p->rank = (unsigned)vl__rec_u(o, VL_RF(phase, rank));
    p->step = (unsigned)vl__rec_u(o, VL_RF(phase, step));
    vl__rec_str(p->phase, sizeof p->phase, o, VL_RF(phase, phase));
    p->has_alloc = json_is_integer(json_object_get(o, VL_RF(phase, allocated)));
    p->allocated = vl__rec_u(o, VL_RF(phase, allocated));
    p->reserved = vl__rec_u(o, VL_RF(phase, reserved));
    p->active = vl__rec_u(o, VL_RF(phase, active));
    p->inactive_split = vl__rec_u(o, VL_RF(phase, inactive_split));
    p->has_requested = json_is_integer(json_object_get(o, VL_RF(phase, requested)));
    p->requested = vl__rec_u(o, VL_RF(phase, requested));
    p->peak_allocated = vl__rec_u(o, VL_RF(phase, peak_allocated));
    p->peak_reserved = vl__rec_u(o, VL_RF(phase, peak_reserved));
    p->alloc_retries = vl__rec_u(o, VL_RF(phase, alloc_retries));
    p->ooms = vl__rec_u(o, VL_RF(phase, ooms));
    p->has_bill = bill(o, p->bill, &p->acts_known);
    uint64_t card = torch_bound(r, p->pid);
    if (vl__rec_implausible(r, line, "a phase's PyTorch reserved bytes",
                            vl__max(p->reserved, p->peak_reserved), card, "the card (NVML)") ||
        vl__rec_implausible(r, line, "a phase's PyTorch allocated bytes",
                            vl__max(p->allocated, p->peak_allocated), card, "the card (NVML)"))
      r->n_phases--; /* damaged data: not a peak */
  } else if (strcmp(type, VL_RT(step)) == 0) {
    if (vl__rec_grow((void **)&r->steps, &caps->steps, r->n_steps, sizeof *r->steps, 1u << 22))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many step events", line);
    struct vl_rec_step *s = &r->steps[r->n_steps++];
    memset(s, 0, sizeof *s);
    s->t_ns = vl__rec_u(o, VL_RF(step, t_ns));
    s->time_ns = vl__rec_u(o, VL_RF(step, time_ns));
    s->tokens = vl__rec_u(o, VL_RF(step, tokens));
    s->samples = vl__rec_u(o, VL_RF(step, samples));
    s->probe_ns = vl__rec_u(o, VL_RF(step, probe_ns));
    s->pid = (unsigned)vl__rec_u(o, VL_RF(step, pid));
    s->rank = (unsigned)vl__rec_u(o, VL_RF(step, rank));
    s->step = (unsigned)vl__rec_u(o, VL_RF(step, step));
    s->micro_batches = (unsigned)vl__rec_u(o, VL_RF(step, micro_batches));
    s->sampled = json_is_true(json_object_get(o, VL_RF(step, sampled)));
    s->has_peak = json_is_integer(json_object_get(o, VL_RF(step, peak_allocated)));
    s->peak_allocated = vl__rec_u(o, VL_RF(step, peak_allocated));
    s->peak_reserved = vl__rec_u(o, VL_RF(step, peak_reserved));
    vl__rec_str(s->peak_phase, sizeof s->peak_phase, o, VL_RF(step, peak_phase));
    s->has_end = json_is_integer(json_object_get(o, VL_RF(step, allocated)));
    s->allocated = vl__rec_u(o, VL_RF(step, allocated));
    s->reserved = vl__rec_u(o, VL_RF(step, reserved));
    uint64_t card = torch_bound(r, s->pid);
    if (vl__rec_implausible(r, line, "a step's PyTorch reserved bytes",
                            vl__max(s->reserved, s->peak_reserved), card, "the card (NVML)") ||
        vl__rec_implausible(r, line, "a step's PyTorch allocated bytes",
                            vl__max(s->allocated, s->peak_allocated), card, "the card (NVML)")) {
      r->n_steps--; /* damaged data: not a peak, nor its phases */
      return VL_OK;
    }
    /* a step not sampled: its phases' times, as intervals without counters */
    size_t k;
    json_t *ph;
    const struct vl_rec_step copy = *s;
    json_array_foreach(json_object_get(o, VL_RF(step, phases)), k, ph) {
      json_t *nm = json_array_get(ph, 0), *a = json_array_get(ph, 1), *b = json_array_get(ph, 2);
      if (!json_is_string(nm) || !json_is_integer(a) || !json_is_integer(b)) continue;
      if (vl__rec_grow((void **)&r->phases, &caps->phases, r->n_phases, sizeof *r->phases,
                       1u << 24))
        return vl__fail(err, VL_ENOMEM, "line %zu: too many phases", line);
      struct vl_rec_phase *p = &r->phases[r->n_phases++];
      memset(p, 0, sizeof *p);
      vl__utf8_copy(p->phase, sizeof p->phase, json_string_value(nm));
      vl__rec_clean(p->phase);
      p->t0_ns = json_integer_value(a) > 0 ? (uint64_t)json_integer_value(a) : 0;
      p->t_ns = json_integer_value(b) > 0 ? (uint64_t)json_integer_value(b) : 0;
      p->pid = copy.pid;
      p->rank = copy.rank;
      p->step = copy.step;
    }
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(o, VL_RF(step, modules)), i, m) {
      if (s->n_modules >= VL_REC_TOP_MODULES) break;
      vl__rec_str(s->modules[s->n_modules].name, sizeof s->modules[0].name, m,
                  VL_RF(step_modules, name));
      s->modules[s->n_modules++].saved_bytes = vl__rec_u(m, VL_RF(step_modules, saved_bytes));
    }
  } else if (strcmp(type, VL_RT(oom)) == 0) {
    if (vl__rec_grow((void **)&r->ooms, &caps->ooms, r->n_ooms, sizeof *r->ooms, 1u << 16))
      return vl__fail(err, VL_ENOMEM, "line %zu: too many oom events", line);
    struct vl_rec_oom *x = &r->ooms[r->n_ooms++];
    memset(x, 0, sizeof *x);
    x->t_ns = vl__rec_u(o, VL_RF(oom, t_ns));
    x->pid = (unsigned)vl__rec_u(o, VL_RF(oom, pid));
    x->rank = (unsigned)vl__rec_u(o, VL_RF(oom, rank));
    x->step = (unsigned)vl__rec_u(o, VL_RF(oom, step));
    vl__rec_str(x->phase, sizeof x->phase, o, VL_RF(oom, phase));
    x->request_bytes = vl__rec_u(o, VL_RF(oom, request_bytes));
    x->device_allocated_bytes = vl__rec_u(o, VL_RF(oom, device_allocated_bytes));
    x->device_free_bytes = vl__rec_u(o, VL_RF(oom, device_free_bytes));
    x->has_bill = bill(o, x->bill, NULL);
    vl__rec_str(x->snapshot, sizeof x->snapshot, o, VL_RF(oom, snapshot));
  } else if (strcmp(type, VL_RT(probe)) == 0) {
    struct vl_rec_probe *p = probe_of(r, (unsigned)vl__rec_u(o, VL_RF(probe, pid)));
    if (p) {
      p->rank = (unsigned)vl__rec_u(o, VL_RF(probe, rank));
      p->local_rank = (unsigned)vl__rec_u(o, VL_RF(probe, local_rank));
      p->world_size = (unsigned)vl__rec_u(o, VL_RF(probe, world_size));
      p->sample_every = (unsigned)vl__rec_u(o, VL_RF(probe, sample_every));
      p->cuda = json_is_true(json_object_get(o, VL_RF(probe, cuda)));
      vl__rec_str(p->torch, sizeof p->torch, o, VL_RF(probe, torch));
    }
  } else if (strcmp(type, VL_RT(device)) == 0) {
    struct vl_rec_probe *p = probe_of(r, (unsigned)vl__rec_u(o, VL_RF(device, pid)));
    if (p) {
      p->cuda = true;
      vl__rec_str(p->device_name, sizeof p->device_name, o, VL_RF(device, name));
      vl__rec_str(p->capability, sizeof p->capability, o, VL_RF(device, capability));
      p->cublas_workspace_bytes = vl__rec_u(o, VL_RF(device, cublas_workspace_bytes));
    }
  } else if (strcmp(type, VL_RT(note)) == 0) {
    char text[256];
    vl__rec_str(text, sizeof text, o, VL_RF(note, text));
    if (strncmp(text, "probe stopped", 13) == 0 && !r->probe_note[0])
      snprintf(r->probe_note, sizeof r->probe_note, "%s", text);
    *handled = false; /* record.c may want notes too */
  } else {
    *handled = false;
  }
  return VL_OK;
}

void vl__probe_release(struct vl_record *r) {
  vl_free(r->phases);
  vl_free(r->steps);
  vl_free(r->ooms);
  r->phases = NULL;
  r->steps = NULL;
  r->ooms = NULL;
  r->n_phases = r->n_steps = r->n_ooms = 0;
}
