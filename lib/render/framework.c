/* The framework layer in the run report: the bill at the peak, the ladder,
 * the boundaries' ledger, steps; as text/Markdown, JSON and HTML (the
 * trace's phases: report_trace.c). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/model.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

/* The bill's lines, in the order shown, with the user's words. */
enum { LINES = VL_BILL_N + 2 };
static const char *const line_name[LINES] = {"parameters and buffers",
                                             "gradients",
                                             "optimizer states",
                                             "activations saved for backward",
                                             "autocast weight copies",
                                             "forward outputs (logits, loss)",
                                             "DDP gradient buckets",
                                             "cuBLAS workspaces (estimated)",
                                             "transient (the rest of the peak)"};
static const char *const line_key[LINES] = {"parameters",   "gradients",         "optimizer_states",
                                            "activations",  "autocast_weights",  "outputs",
                                            "comm_buffers", "cublas_workspaces", "transient"};
static const char *const line_colour[LINES] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                               "#d62728", "#9467bd", "#8c564b",
                                               "#bcbd22", "#7f7f7f", "#e377c2"};

/* bytes in the unit that reads best: GiB, MiB or KiB (a CPU test's model
 * is KiB; a GPU job's GiB) */
static const char *size_str(char *buf, size_t n, uint64_t b) {
  if (b >= (1ull << 30))
    snprintf(buf, n, "%.3f GiB", GIB(b));
  else if (b >= (1ull << 20))
    snprintf(buf, n, "%.1f MiB", MIB(b));
  else
    snprintf(buf, n, "%.1f KiB", KIB(b));
  return buf;
}

static uint64_t line_bytes(const struct vl_probe_layer *f, int i) {
  if (i < VL_BILL_N) return f->bill[i];
  return i == VL_BILL_N ? f->cublas_workspaces : f->transient;
}

const char *vl__fw_line_name(int part) { return part >= 0 && part < LINES ? line_name[part] : "?"; }
const char *vl__fw_line_colour(int part) {
  return part >= 0 && part < LINES ? line_colour[part] : "#000000";
}
uint64_t vl__fw_line_bytes(const struct vl_probe_layer *f, int part) { return line_bytes(f, part); }
const char *vl__fw_size_str(char *buf, size_t n, uint64_t b) { return size_str(buf, n, b); }

static uint64_t rank_line_bytes(const struct vl_fw_rank *x, int i) {
  if (i < VL_BILL_N) return x->bill[i];
  return i == VL_BILL_N ? x->cublas_workspaces : x->transient;
}
uint64_t vl__fw_rank_line_bytes(const struct vl_fw_rank *x, int part) {
  return rank_line_bytes(x, part);
}

/* The lowest (up to) 8 ranks with a bill, in rank order, into idx. */
unsigned vl__fw_rank_order(const struct vl_probe_layer *f, unsigned idx[8]) {
  enum { SHOWN = 8 };
  unsigned n = 0;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    if (!f->ranks[k].has_bill) continue;
    unsigned at = n;
    while (at > 0 && f->ranks[idx[at - 1]].rank > f->ranks[k].rank)
      at--;
    if (at == SHOWN) continue;
    for (unsigned j = (n < SHOWN ? n : SHOWN - 1); j > at; j--)
      idx[j] = idx[j - 1];
    idx[at] = k;
    if (n < SHOWN) n++;
  }
  return n;
}

/* the ranks' bills side by side (the first 8 in text; JSON has them all) */
static void rank_bills_text(FILE *o, const struct vl_probe_layer *f, bool md) {
  unsigned idx[8], n = vl__fw_rank_order(f, idx);
  if (n < 2) return;
  fprintf(o, "\n%sthe bill at each rank's peak (GiB%s):\n", md ? "- " : "  ",
          f->n_rank_peaks > 8 ? "; the first 8 ranks, all in JSON" : "");
  if (md) {
    fprintf(o, "\n| part |");
    for (unsigned j = 0; j < n; j++)
      fprintf(o, " rank %u |", f->ranks[idx[j]].rank);
    fprintf(o, "\n|---|");
    for (unsigned j = 0; j < n; j++)
      fprintf(o, "---:|");
    fprintf(o, "\n");
  } else {
    fprintf(o, "    %-34s", "");
    for (unsigned j = 0; j < n; j++) {
      char h[24];
      snprintf(h, sizeof h, "rank %u", f->ranks[idx[j]].rank);
      fprintf(o, " %11s", h);
    }
    fprintf(o, "\n");
  }
  for (int i = 0; i <= LINES; i++) {
    if (i < LINES && !f->cuda && i >= VL_BILL_N) continue;
    const char *name = i < LINES ? line_name[i] : f->cuda ? "peak allocated" : "named";
    fprintf(o, md ? "| %s |" : "    %-34s", name);
    for (unsigned j = 0; j < n; j++) {
      const struct vl_fw_rank *x = &f->ranks[idx[j]];
      uint64_t v = i < LINES ? rank_line_bytes(x, i) : f->cuda ? x->peak_allocated : x->peak_named;
      fprintf(o, md ? " %.3f |" : " %11.3f", GIB(v));
    }
    fprintf(o, "\n");
  }
  fprintf(o, md ? "| %s |" : "    %-34s", "at (step, phase)");
  for (unsigned j = 0; j < n; j++) {
    char at[32];
    char ph[9];
    vl__utf8_copy(ph, sizeof ph, f->ranks[idx[j]].bill_phase);
    int w = snprintf(at, sizeof at, "%u %s", f->ranks[idx[j]].bill_step, ph);
    fputs(" ", o);
    for (int k = w; !md && k < 11; k++)
      fputc(' ', o);
    vl__text(o, at, md);
    if (md) fputs(" |", o);
  }
  fprintf(o, "\n");
  for (unsigned j = 0; j < n; j++) {
    const struct vl_fw_rank *x = &f->ranks[idx[j]];
    if (x->ddp_extra_in_bill)
      fprintf(o, "%srank %u: %.3f GiB of its transient are DDP's first buckets, kept into step 2\n",
              md ? "\n- " : "    ", x->rank, GIB(x->ddp_step2_extra));
  }
}

json_t *vl__fw_bill_json(const struct vl_probe_layer *f) {
  json_t *b = json_object();
  for (int i = 0; i < LINES; i++)
    json_object_set_new(b, line_key[i], U(line_bytes(f, i)));
  json_object_set_new(b, "step", json_integer(f->bill_step));
  json_object_set_new(b, "phase", vl__json_str(f->bill_phase));
  json_object_set_new(b, "categories_at", vl__json_str(f->bill_taken_at));
  json_object_set_new(b, "activations_by_difference", json_boolean(f->activations_by_difference));
  return b;
}

void vl__fw_bill_lines(FILE *o, const struct vl_probe_layer *f, bool md) {
  char sz[32];
  uint64_t peak = 0;
  for (int i = 0; i < LINES; i++)
    peak += line_bytes(f, i);
  if (md) fprintf(o, "| part | GiB | share |\n|---|---:|---:|\n");
  for (int i = 0; i < LINES; i++) {
    uint64_t x = line_bytes(f, i);
    if (!f->cuda && i >= VL_BILL_N) continue;
    double share = peak ? 100.0 * (double)x / (double)peak : 0;
    const char *note = i == VL_BILL_ACTIVATIONS && f->activations_by_difference
                           ? " (by difference: torch.compile)"
                           : "";
    if (md)
      fprintf(o, "| %s%s | %.3f | %.1f %% |\n", line_name[i], note, GIB(x), share);
    else
      fprintf(o, "    %-34s %13s %6.1f %%%s\n", line_name[i], size_str(sz, sizeof sz, x), share,
              note);
  }
}

static const char *const cmp_key[VL_CMP_LINES] = {
    "parameters", "gradients",    "optimizer_states",  "activations", "autocast_weights",
    "outputs",    "comm_buffers", "cublas_workspaces", "transient",   "peak_allocated_bytes"};
const char *const vl__fw_cmp_name[VL_CMP_LINES] = {"parameters and buffers",
                                                   "gradients",
                                                   "optimizer states",
                                                   "activations",
                                                   "autocast copies",
                                                   "forward outputs",
                                                   "communication buffers",
                                                   "cuBLAS workspaces",
                                                   "transient",
                                                   "peak allocated"};

/* the priced step's error against the probe's median step, percent */
static double step_error_pct(const struct vl_probe_compare *c) {
  return 100.0 * (c->est_step_s - c->measured_step_s) / c->measured_step_s;
}

/* report --estimate's comparison, line by line and the step time */
static json_t *cmp_json(const struct vl_probe_compare *cmp) {
  json_t *c = json_object();
  for (int i = 0; i < VL_CMP_LINES; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "measured", U(cmp->measured[i]));
    json_object_set_new(x, "estimate", U(cmp->estimate[i]));
    json_object_set_new(x, "difference",
                        json_integer((json_int_t)cmp->estimate[i] - (json_int_t)cmp->measured[i]));
    json_object_set_new(c, cmp_key[i], x);
  }
  json_object_set_new(c, "estimate_peak_phase", vl__json_str(cmp->estimate_phase));
  if (cmp->est_step_s > 0 && cmp->measured_step_s > 0) {
    json_t *t = json_object();
    json_object_set_new(t, "card", vl__json_str(cmp->card));
    json_object_set_new(t, "estimate_seconds", json_real(cmp->est_step_s));
    json_object_set_new(t, "estimate_forward_seconds", json_real(cmp->est_forward_s));
    json_object_set_new(t, "estimate_backward_seconds", json_real(cmp->est_backward_s));
    json_object_set_new(t, "estimate_optimizer_seconds", json_real(cmp->est_optimizer_s));
    json_object_set_new(t, "measured_median_seconds", json_real(cmp->measured_step_s));
    json_object_set_new(t, "error_pct", json_real(step_error_pct(cmp)));
    json_object_set_new(c, "step_time", t);
  }
  return c;
}

/* the ladder at the peaks and the gaps between its layers */
static json_t *ladder_json(const struct vl_probe_layer *f) {
  json_t *l = json_object();
  json_object_set_new(l, "process_bytes", U(f->ladder[0]));
  json_object_set_new(l, "driver_allocated_bytes", U(f->ladder[1]));
  json_object_set_new(l, "reserved_bytes", U(f->ladder[2]));
  json_object_set_new(l, "allocated_bytes", U(f->ladder[3]));
  json_object_set_new(l, "ranks_summed", U(f->ladder_ranks));
  json_object_set_new(l, "context_and_other_bytes", U(f->gap_context));
  json_object_set_new(l, "outside_pytorch_bytes", U(f->gap_outside));
  json_object_set_new(l, "cached_free_bytes", U(f->gap_cached));
  json_object_set_new(l, "fragmented_bytes", U(f->gap_fragmented));
  json_t *libs = json_object();
  for (unsigned i = 0; i < f->n_outside; i++)
    json_object_set_new(libs, f->outside[i].name, U(f->outside[i].bytes));
  json_object_set_new(l, "outside_by_library", libs);
  return l;
}

/* each rank's peaks and bill */
static json_t *ranks_json(const struct vl_probe_layer *f) {
  json_t *rk = json_array();
  for (unsigned i = 0; i < f->n_rank_peaks; i++) {
    json_t *m = json_object();
    json_object_set_new(m, "rank", json_integer(f->ranks[i].rank));
    json_object_set_new(m, "pid", json_integer(f->ranks[i].pid));
    /* a CPU job has no allocator to read: null, not 0 */
    json_object_set_new(m, "peak_allocated_bytes",
                        f->cuda ? U(f->ranks[i].peak_allocated) : json_null());
    json_object_set_new(m, "peak_reserved_bytes",
                        f->cuda ? U(f->ranks[i].peak_reserved) : json_null());
    json_object_set_new(m, "peak_named_bytes", U(f->ranks[i].peak_named));
    json_object_set_new(m, "ddp_step2_extra_bytes", U(f->ranks[i].ddp_step2_extra));
    if (f->ranks[i].has_bill) {
      json_t *rb = json_object();
      for (int l = 0; l < LINES; l++)
        json_object_set_new(rb, line_key[l], U(rank_line_bytes(&f->ranks[i], l)));
      json_object_set_new(rb, "step", json_integer(f->ranks[i].bill_step));
      json_object_set_new(rb, "phase", vl__json_str(f->ranks[i].bill_phase));
      json_object_set_new(m, "bill", rb);
    }
    json_array_append_new(rk, m);
  }
  return rk;
}

/* the main process's steps */
static json_t *steps_json(const struct vl_probe_layer *f, const struct vl_record *r) {
  json_t *steps = json_array();
  for (size_t i = 0; i < r->n_steps; i++) {
    const struct vl_rec_step *s = &r->steps[i];
    if (s->pid != f->main_pid) continue;
    json_t *x = json_object();
    json_object_set_new(x, "step", json_integer(s->step));
    json_object_set_new(x, "time_s", json_real((double)s->time_ns * 1e-9));
    json_object_set_new(x, "tokens", s->tokens ? U(s->tokens) : json_null());
    json_object_set_new(x, "tokens_per_s",
                        s->time_ns && s->tokens
                            ? json_real((double)s->tokens / ((double)s->time_ns * 1e-9))
                            : json_null());
    json_object_set_new(x, "micro_batches", json_integer(s->micro_batches));
    json_object_set_new(x, "peak_allocated_bytes",
                        s->has_peak ? U(s->peak_allocated) : json_null());
    json_object_set_new(x, "peak_reserved_bytes", s->has_peak ? U(s->peak_reserved) : json_null());
    json_object_set_new(x, "peak_phase",
                        s->has_peak && s->peak_phase[0] ? vl__json_str(s->peak_phase)
                                                        : json_null());
    json_object_set_new(x, "sampled", json_boolean(s->sampled));
    json_array_append_new(steps, x);
  }
  return steps;
}

void vl__fw_json(json_t *o, json_t *peak, const struct vl_probe_layer *f, const struct vl_record *r,
                 const struct vl_probe_compare *cmp) {
  if (cmp && cmp->present) json_object_set_new(o, "estimate_vs_measured", cmp_json(cmp));
  json_object_set_new(o, "framework", json_boolean(f->present));
  if (!f->present) {
    json_object_set_new(o, "bill", json_null());
    json_object_set_new(o, "peak_phase", json_null());
    json_object_set_new(o, "steps", json_array());
    return;
  }
  if (f->cuda) {
    json_object_set_new(peak, "allocated_bytes", U(f->peak_allocated));
    json_object_set_new(peak, "reserved_bytes", U(f->peak_reserved));
    json_object_set_new(peak, "step", json_integer(f->peak_step));
  } else {
    json_object_set_new(peak, "allocated_bytes", json_null());
    json_object_set_new(peak, "reserved_bytes", json_null());
  }
  json_object_set_new(o, "peak_phase",
                      f->peak_phase[0] ? vl__json_str(f->peak_phase) : json_null());
  if (f->has_bill) {
    json_object_set_new(o, "bill", vl__fw_bill_json(f));
    json_t *led = json_array();
    for (unsigned i = 0; i < f->n_ledger; i++) {
      const struct vl_fw_boundary *e = &f->ledger[i];
      json_t *x = json_object();
      json_object_set_new(x, "after", vl__json_str(e->phase));
      json_object_set_new(x, "allocated_bytes", U(e->allocated));
      json_object_set_new(x, "named_bytes", U(e->named));
      json_object_set_new(x, "cublas_workspaces_bytes", U(e->cublas_workspaces));
      json_object_set_new(x, "rounding_bytes", U(e->rounding));
      json_object_set_new(x, "unnamed_bytes", json_integer(e->unnamed));
      json_array_append_new(led, x);
    }
    json_object_set_new(o, "ledger", led);
    json_object_set_new(o, "worst_unnamed_share", json_real(f->worst_unnamed_share));
  } else {
    json_object_set_new(o, "bill", json_null());
  }
  json_t *fw = json_object();
  json_object_set_new(fw, "torch", vl__json_str(f->torch));
  json_object_set_new(fw, "device", vl__json_str(f->device));
  json_object_set_new(fw, "ranks", json_integer(f->n_ranks));
  json_object_set_new(fw, "step_s_median", json_real(f->step_s_median));
  json_object_set_new(fw, "tokens_per_s",
                      f->tokens_per_s > 0 ? json_real(f->tokens_per_s) : json_null());
  json_object_set_new(fw, "samples_per_s", json_real(f->samples_per_s));
  json_object_set_new(fw, "probe_share", json_real(f->probe_share_light));
  json_object_set_new(fw, "probe_share_sampled", json_real(f->probe_share_sampled));
  json_object_set_new(fw, "load_bytes", U(f->load_bytes));
  json_object_set_new(fw, "first_forward_bytes", U(f->first_forward_bytes));
  json_object_set_new(fw, "growth_bytes_per_step", json_real(f->growth_bytes_per_step));
  json_object_set_new(fw, "alloc_retries", U(f->alloc_retries));
  json_object_set_new(fw, "ooms", U(f->ooms));
  if (f->has_ladder) json_object_set_new(fw, "ladder", ladder_json(f));
  json_t *mods = json_array();
  for (unsigned i = 0; i < f->n_modules; i++) {
    json_t *m = json_object();
    json_object_set_new(m, "name", vl__json_str(f->modules[i].name));
    json_object_set_new(m, "saved_bytes", U(f->modules[i].saved_bytes));
    json_array_append_new(mods, m);
  }
  json_object_set_new(fw, "top_modules", mods);
  json_object_set_new(fw, "ranks_peaks", ranks_json(f));
  json_object_set_new(fw, "rank_imbalance", json_real(f->rank_imbalance));
  json_object_set_new(fw, "steady_rank_imbalance", json_real(f->steady_rank_imbalance));
  if (f->oom) {
    json_t *x = json_object();
    json_object_set_new(x, "step", json_integer(f->first_oom.step));
    json_object_set_new(x, "phase", vl__json_str(f->first_oom.phase));
    json_object_set_new(x, "request_bytes", U(f->first_oom.request_bytes));
    json_object_set_new(x, "device_allocated_bytes", U(f->first_oom.device_allocated_bytes));
    json_object_set_new(x, "device_free_bytes", U(f->first_oom.device_free_bytes));
    json_object_set_new(x, "snapshot", vl__json_str(f->first_oom.snapshot));
    json_object_set_new(fw, "oom", x);
  }
  json_object_set_new(o, "framework_layer", fw);
  json_object_set_new(o, "steps", steps_json(f, r));
}

/* a signed difference in the unit that reads best ("+0.366 GiB",
 * "-12.0 KiB"), "0" when there is none: never "-0.000 GiB" */
static const char *signed_size(char *buf, size_t n, uint64_t est, uint64_t meas) {
  if (est == meas) {
    snprintf(buf, n, "0");
    return buf;
  }
  char sz[24];
  size_str(sz, sizeof sz, est > meas ? est - meas : meas - est);
  snprintf(buf, n, "%c%s", est > meas ? '+' : '-', sz);
  return buf;
}

/* The priced step against the probe's median step, as words after "step
 * time on CARD: " (the card is the caller's to write, escaped for its
 * format); false when the step was not priced or not timed. */
bool vl__fw_step_time_words(char *buf, size_t n, const struct vl_probe_compare *c) {
  if (c->est_step_s <= 0 || c->measured_step_s <= 0) return false;
  snprintf(buf, n,
           "estimated %.1f ms (forward %.1f, backward %.1f, optimizer %.1f), measured median "
           "%.1f ms: %+.1f %%",
           1e3 * c->est_step_s, 1e3 * c->est_forward_s, 1e3 * c->est_backward_s,
           1e3 * c->est_optimizer_s, 1e3 * c->measured_step_s, step_error_pct(c));
  return true;
}

static void cmp_time_text(FILE *o, const struct vl_probe_compare *c, bool md) {
  char w[192];
  if (!vl__fw_step_time_words(w, sizeof w, c)) return;
  fprintf(o, "\n%sstep time on ", md ? "- " : "  ");
  vl__text(o, c->card, md);
  fprintf(o, ": %s\n", w);
}

/* The estimate beside the measurement, with its column headers; a line the
 * record cannot measure (on the CPU: no allocator, so no workspaces,
 * transient or peak allocated) says so instead of a 0 and a -100 %. */
static void cmp_text(FILE *o, const struct vl_probe_compare *c, bool cuda, bool md) {
  fprintf(o, "\n%sthe estimate for the same settings, line by line (its peak in ",
          md ? "- " : "  ");
  vl__text(o, c->estimate_phase, md);
  fputs("):\n\n", o);
  if (md)
    fprintf(o, "| line | measured | estimate | estimate - measured | |\n"
               "|---|---:|---:|---:|---:|\n");
  else
    fprintf(o, "    %-24s %13s %13s %13s %s\n", "line", "measured", "estimate", "difference",
            "(% of measured)");
  for (int i = 0; i < VL_CMP_LINES; i++) {
    char m[32], e[32], diff[40], pct[40] = "";
    bool measured = cuda || i < VL_BILL_N;
    size_str(e, sizeof e, c->estimate[i]);
    if (!measured) {
      snprintf(m, sizeof m, "not measured");
      snprintf(diff, sizeof diff, "-");
      snprintf(pct, sizeof pct, "(no allocator on the CPU)");
    } else {
      size_str(m, sizeof m, c->measured[i]);
      signed_size(diff, sizeof diff, c->estimate[i], c->measured[i]);
      if (c->measured[i])
        snprintf(pct, sizeof pct, "%+.1f %%",
                 100.0 * ((double)c->estimate[i] - (double)c->measured[i]) /
                     (double)c->measured[i]);
      else if (c->estimate[i])
        snprintf(pct, sizeof pct, "(none measured)");
    }
    if (md)
      fprintf(o, "| %s | %s | %s | %s | %s |\n", vl__fw_cmp_name[i], m, e, diff, pct);
    else
      fprintf(o, "    %-24s %13s %13s %13s %s\n", vl__fw_cmp_name[i], m, e, diff, pct);
  }
  cmp_time_text(o, c, md);
}

/* the probe's bill at the peak, the estimate's beside it, every boundary's ledger and the modules
 * that saved most */
static void fw_bill_text(FILE *o, const struct vl_probe_layer *f,
                         const struct vl_probe_compare *cmp, bool md) {
  char sz[32];
  const char *b = md ? "- " : "  ";
  const struct vl_fw_rank *self = NULL; /* with several ranks: whose bill this is */
  for (unsigned k = 0; f->n_rank_peaks > 1 && k < f->n_rank_peaks; k++)
    if (f->ranks[k].pid == f->main_pid) self = &f->ranks[k];
  if (f->cuda && self) {
    fprintf(o,
            "\n%sthe bill at rank %u's peak (each rank's below): %.2f GiB allocated, step %u, in ",
            b, self->rank, GIB(f->peak_allocated), f->bill_step);
    vl__text(o, f->bill_phase, md);
    fputs(" (categories at its ", o);
    vl__text(o, f->bill_taken_at, md);
    fputs(")\n\n", o);
  } else if (f->cuda) {
    fprintf(o, "\n%sthe bill at the peak: %.2f GiB allocated, step %u, in ", b,
            GIB(f->peak_allocated), f->bill_step);
    vl__text(o, f->bill_phase, md);
    fputs(" (categories at its ", o);
    vl__text(o, f->bill_taken_at, md);
    fputs(")\n\n", o);
  } else {
    fprintf(o, "\n%sthe bill at its largest boundary (no allocator on the CPU): step %u, after ", b,
            f->bill_step);
    vl__text(o, f->bill_phase, md);
    fputs("\n\n", o);
  }
  vl__fw_bill_lines(o, f, md);
  if (cmp && cmp->present) cmp_text(o, cmp, f->cuda, md);
  if (f->n_ledger) {
    fprintf(o,
            "\n%severy boundary of step %u: named + cuBLAS workspaces + the allocator's "
            "rounding vs memory_allocated() (worst unnamed %.2f %%)\n",
            b, f->bill_step, 100 * f->worst_unnamed_share);
    if (md)
      fprintf(o, "\n| after | allocated GiB | named GiB | workspaces GiB | rounding MiB | "
                 "unnamed MiB |\n|---|---:|---:|---:|---:|---:|\n");
    for (unsigned i = 0; i < f->n_ledger; i++) {
      const struct vl_fw_boundary *e = &f->ledger[i];
      const char *fmt = md ? " | %.3f | %.3f | %.3f | %.1f | %.1f |\n"
                           : " allocated %8.3f GiB  named %8.3f GiB  workspaces "
                             "%6.3f GiB  rounding %6.1f MiB  unnamed %8.1f MiB\n";
      fputs(md ? "| " : "    ", o);
      vl__text_pad(o, e->phase, md ? 0 : 10, md);
      fprintf(o, fmt, GIB(e->allocated), GIB(e->named), GIB(e->cublas_workspaces), MIB(e->rounding),
              MIB(e->unnamed));
    }
  }
  if (f->n_modules) {
    fprintf(o, "\n%smodules that saved the most for backward (step %u):\n", b, f->bill_step);
    for (unsigned i = 0; i < f->n_modules && i < 5; i++) {
      fprintf(o, "%s  ", md ? "  -" : "  ");
      vl__text_pad(o, f->modules[i].name, 40, md);
      fprintf(o, " %13s\n", size_str(sz, sizeof sz, f->modules[i].saved_bytes));
    }
  }
}

/* the ladder at the peaks: process, driver, reserved, allocated and the gaps between */
static void fw_ladder_text(FILE *o, const struct vl_probe_layer *f, bool md) {
  char sz[32];
  const char *b = md ? "- " : "  ";
  fprintf(o, "\n%sthe ladder at the peaks", b);
  if (f->ladder_ranks > 1)
    fprintf(o, " (every rank: reserved and allocated are the %u ranks' peaks summed)",
            f->ladder_ranks);
  fputs(":\n", o);
  if (md) fprintf(o, "\n| layer | GiB | the gap to the next | GiB |\n|---|---:|---|---:|\n");
  static const char *const lname[4] = {"process (NVML)", "driver-allocated (interposer)",
                                       "reserved (PyTorch cache)", "allocated (tensors)"};
  const uint64_t gap[4] = {f->gap_context, f->gap_outside, f->gap_cached, 0};
  static const char *const gname[4] = {"CUDA context, kernels, libraries' handles",
                                       "allocations outside PyTorch's allocator",
                                       "cached free blocks", ""};
  for (int i = 0; i < 4; i++) {
    if (i < 2 && f->ladder[i] == 0) { /* no NVML, no interposer */
      const char *why = i == 0 ? "not sampled" : "not measured";
      fprintf(o, md ? "| %s | %s | | |\n" : "    %-32s %s\n", lname[i], why);
      continue;
    }
    if (md)
      fprintf(o, "| %s | %.2f | %s | %.2f |\n", lname[i], GIB(f->ladder[i]), gname[i], GIB(gap[i]));
    else if (i < 3)
      fprintf(o, "    %-32s %8.2f GiB   - %-42s %6.2f GiB\n", lname[i], GIB(f->ladder[i]), gname[i],
              GIB(gap[i]));
    else
      fprintf(o, "    %-32s %8.2f GiB\n", lname[i], GIB(f->ladder[i]));
  }
  fprintf(o, "%sof the cached free blocks, %.2f GiB are inactive split blocks (fragmentation)\n",
          md ? "\n" : "    ", GIB(f->gap_fragmented));
  if (f->n_outside) {
    fprintf(o,
            "%sasked of the driver by other libraries (the most each held):", md ? "\n" : "    ");
    for (unsigned i = 0; i < f->n_outside; i++) {
      fprintf(o, "%s ", i ? "," : "");
      vl__text(o, f->outside[i].name, md);
      fprintf(o, " %s", size_str(sz, sizeof sz, f->outside[i].bytes));
    }
    fputs("\n", o);
  }
}

/* each rank's peak, how far apart, their bills */
static void fw_ranks_text(FILE *o, const struct vl_probe_layer *f, bool md) {
  char sz[32], sz2[32];
  const char *b = md ? "- " : "  ";
  fprintf(o, "\n%sranks (%s):\n", b,
          f->cuda ? "peak allocated" : "the most named at a boundary; no allocator on the CPU");
  for (unsigned i = 0; i < f->n_rank_peaks; i++) {
    const struct vl_fw_rank *x = &f->ranks[i];
    fprintf(o, "%s  rank %-3u pid %-8u %13s", md ? "  -" : "  ", x->rank, x->pid,
            size_str(sz, sizeof sz, f->cuda ? x->peak_allocated : x->peak_named));
    if (x->ddp_step2_extra)
      fprintf(o, "  in step 2: DDP's first buckets kept (+%s; later steps %s)",
              size_str(sz, sizeof sz, x->ddp_step2_extra),
              size_str(sz2, sizeof sz2, x->steady_peak_allocated));
    fputs("\n", o);
  }
  fprintf(o, "%s  %.1f %% apart", md ? "  -" : "  ", 100 * f->rank_imbalance);
  if (f->ddp_kept_ranks)
    fprintf(o, "; %.1f %% without DDP's first buckets in step 2", 100 * f->steady_rank_imbalance);
  fputs("\n", o);
  rank_bills_text(o, f, md);
}

void vl__fw_text(FILE *o, const struct vl_probe_layer *f, const struct vl_probe_compare *cmp,
                 bool md) {
  const char *b = md ? "- " : "  ";
  if (!f->present) {
    fprintf(o,
            "\n%sframework layer: no PyTorch probe in this record (not Python, no torch, "
            "or run --no-probe)\n",
            b);
    return;
  }
  fprintf(o, "\n%s\n",
          md ? "### Framework layer (PyTorch probe)\n" : "framework layer (PyTorch probe):");
  fprintf(o, "%storch ", b);
  vl__text(o, f->torch, md);
  if (f->device[0]) {
    fputs(" on ", o);
    vl__text(o, f->device, md);
  }
  fprintf(o, ", %u process%s with the probe, %u steps", f->n_ranks, f->n_ranks == 1 ? "" : "es",
          f->n_steps);
  if (f->step_s_median > 0) fprintf(o, ", median step %.1f ms", f->step_s_median * 1e3);
  if (f->tokens_per_s > 0) fprintf(o, ", %.0f tokens/s", f->tokens_per_s);
  fprintf(o, "\n");
  if (f->cuda)
    fprintf(o,
            "%sloading the model: %.2f GiB allocated before the first forward; the first "
            "forward added %.2f GiB\n",
            b, GIB(f->load_bytes), GIB(f->first_forward_bytes));
  if (f->has_bill) fw_bill_text(o, f, cmp, md);
  if (f->has_ladder) fw_ladder_text(o, f, md);
  if (f->n_rank_peaks > 1) fw_ranks_text(o, f, md);
  if (f->growth_steps >= 3)
    fprintf(o,
            "\n%sgrowth: %+.1f MiB per step in what is allocated after each step (steps 4 on, %u "
            "points)\n",
            b, MIB(f->growth_bytes_per_step), f->growth_steps);
  if (f->probe_share_light > 0 || f->probe_share_sampled > 0)
    fprintf(o, "%sthe probe's own time: %.2f %% of a step, %.1f %% of a sampled step\n", b,
            100 * f->probe_share_light, 100 * f->probe_share_sampled);
  if (f->oom) {
    fprintf(o, "\n%sout of memory at step %u in ", b, f->first_oom.step);
    vl__text(o, f->first_oom.phase, md);
    fprintf(o, ": asked for %.2f GiB with %.2f GiB free", GIB(f->first_oom.request_bytes),
            GIB(f->first_oom.device_free_bytes));
    if (f->first_oom.snapshot[0]) {
      fputs("; snapshot ", o);
      vl__text(o, f->first_oom.snapshot, md);
    }
    fputs("\n", o);
  }
}

/* report --estimate's table: the estimate's lines laid under the probe's.
 * It is here because the design lets only the renderers read both a bill
 * (lib/model) and a record's probe layer (lib/measure); it adds two pairs
 * of lines the probe counts as one and copies the rest. */
void vl_probe_compare(const struct vl_probe_layer *f, const struct vl_bill *b,
                      struct vl_probe_compare *out) {
  memset(out, 0, sizeof *out);
  if (!f->present || !f->has_bill) return;
  out->present = true;
  for (int i = 0; i < VL_BILL_N; i++)
    out->measured[i] = f->bill[i];
  out->measured[VL_BILL_N] = f->cublas_workspaces;
  out->measured[VL_BILL_N + 1] = f->transient;
  out->measured[VL_BILL_N + 2] = f->peak_allocated;
  const uint64_t *l = b->lines;
  out->estimate[VL_BILL_PARAMETERS] = l[VL_LINE_PARAMETERS];
  out->estimate[VL_BILL_GRADIENTS] = l[VL_LINE_GRADIENTS];
  out->estimate[VL_BILL_OPTIMIZER_STATES] = l[VL_LINE_OPTIMIZER] + l[VL_LINE_MASTER];
  out->estimate[VL_BILL_ACTIVATIONS] = l[VL_LINE_ACTIVATIONS];
  out->estimate[VL_BILL_AUTOCAST] = l[VL_LINE_AUTOCAST];
  out->estimate[VL_BILL_OUTPUTS] = 0; /* the estimator keeps logits in activations */
  out->estimate[VL_BILL_N] = l[VL_LINE_WORKSPACE];
  out->estimate[VL_BILL_COMM] = l[VL_LINE_COMM];
  out->estimate[VL_BILL_N + 1] = l[VL_LINE_TRANSIENT] + l[VL_LINE_KV_CACHE];
  out->estimate[VL_BILL_N + 2] = b->peak_allocated_bytes;
  snprintf(out->estimate_phase, sizeof out->estimate_phase, "%s", vl_phase_name(b->peak_phase));
}
