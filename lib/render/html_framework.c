/* The framework layer in the run report's page: everything the text
 * report says (framework.c's vl__fw_text), laid out for a browser: the
 * ladder at the peaks as a stacked bar, the bill at the peak of the rank
 * that peaks, the boundaries, the modules that saved the most, every
 * rank's peak and bill, growth, the probe's cost, the first out of memory,
 * and the estimate beside the measurement. */
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

/* size in the unit that reads best, and bytes below a KiB as bytes (a
 * tensor of 4 B is not 0.0 KiB) */
static const char *page_size(char *buf, size_t n, uint64_t b) {
  if (b >= 1024) return vl__fw_size_str(buf, n, b);
  snprintf(buf, n, "%llu B", (unsigned long long)b);
  return buf;
}

/* ---- the ladder ---------------------------------------------------------- */

struct segment {
  const char *name, *colour;
  uint64_t bytes;
};

/* The ladder's gaps from the bottom up: allocated, the cached free blocks
 * (fragmented apart), what other libraries asked the driver for, the CUDA
 * context; a layer not measured leaves its gap to the next one measured,
 * named for both. Returns how many. */
static int ladder_segments(const struct vl_probe_layer *f, struct segment s[6]) {
  int n = 0;
  s[n++] = (struct segment){"allocated (tensors)", "#1f77b4", f->ladder[3]};
  s[n++] = (struct segment){"cached free blocks, inactive split (fragmentation)", "#9edae5",
                            f->gap_fragmented};
  s[n++] = (struct segment){"cached free blocks, whole", "#2ca02c",
                            vl__sub0(f->gap_cached, f->gap_fragmented)};
  if (f->ladder[1]) {
    s[n++] = (struct segment){"allocations outside PyTorch's allocator", "#ff7f0e", f->gap_outside};
    if (f->ladder[0])
      s[n++] =
          (struct segment){"CUDA context, kernels, libraries' handles", "#d62728", f->gap_context};
  } else if (f->ladder[0]) {
    s[n++] = (struct segment){"CUDA context and allocations outside PyTorch (no interposer to "
                              "tell them apart)",
                              "#d62728", vl__sub0(f->ladder[0], f->ladder[2])};
  }
  return n;
}

void vl__fw_ladder_html(FILE *o, const struct vl_probe_layer *f) {
  if (!f->has_ladder) return;
  char sz[32];
  fputs("<h2>The ladder at the peaks</h2>\n<p>From the process's memory as NVML sees it down to "
        "the tensors PyTorch allocated, every gap named",
        o);
  if (f->ladder_ranks > 1)
    fprintf(o,
            "; reserved and allocated are the %u ranks' peaks summed, as NVML and the interposer "
            "see every rank's process (the ranks peak at different moments: an upper bound)",
            f->ladder_ranks);
  fputs(".</p>\n", o);
  struct segment seg[6];
  int n = ladder_segments(f, seg);
  uint64_t total = 0;
  for (int i = 0; i < n; i++)
    total += seg[i].bytes;
  /* one bar, the bottom of the ladder on the left; each part's width its
   * share, its size written in it where it fits (html_charts.js checks the
   * widths add up to the bar's) */
  fprintf(o, "<div class=\"vl-ladder\" data-total=\"%llu\">", (unsigned long long)total);
  for (int i = 0; i < n; i++) {
    if (!seg[i].bytes) continue;
    double share = total ? 100.0 * (double)seg[i].bytes / (double)total : 0;
    fprintf(o,
            "<div class=\"vl-seg\" data-bytes=\"%llu\" style=\"width:%.4f%%;background:%s\" "
            "title=\"%s: %s\"><span>%s</span></div>",
            (unsigned long long)seg[i].bytes, share, seg[i].colour, seg[i].name,
            page_size(sz, sizeof sz, seg[i].bytes), sz);
  }
  fputs("</div>\n<table class=\"vl-ladder-table\"><tr><th>layer</th><th>at its peak</th>"
        "<th>the gap to the next layer</th><th>size</th></tr>\n",
        o);
  static const char *const lname[4] = {"process memory (NVML)", "driver-allocated (interposer)",
                                       "reserved (PyTorch cache)", "allocated (tensors)"};
  static const char *const why_none[2] = {"not sampled (no NVML samples in this record)",
                                          "not measured (no interposer in this record)"};
  for (int i = 0; i < 4; i++) {
    fprintf(o, "<tr><td>%s</td>", lname[i]);
    if (i < 2 && !f->ladder[i]) { /* the gap under it is not measured either */
      fprintf(o, "<td>%s</td><td>%s</td><td>not measured</td></tr>\n", why_none[i],
              i == 0 ? "CUDA context, kernels, libraries' handles"
                     : "allocations outside PyTorch's allocator");
      continue;
    }
    fprintf(o, "<td class=n>%s</td>", vl__fw_size_str(sz, sizeof sz, f->ladder[i]));
    const char *gap = "";
    uint64_t g = 0;
    if (i == 0) {
      gap = f->ladder[1] ? "CUDA context, kernels, libraries' handles"
                         : "CUDA context and allocations outside PyTorch";
      g = f->ladder[1] ? f->gap_context : vl__sub0(f->ladder[0], f->ladder[2]);
    } else if (i == 1) {
      gap = "allocations outside PyTorch's allocator", g = f->gap_outside;
    } else if (i == 2) {
      gap = "cached free blocks", g = f->gap_cached;
    }
    if (*gap)
      fprintf(o,
              "<td><span class=\"vl-swatch\" style=\"background:%s\"></span>%s</td>"
              "<td class=n>%s</td></tr>\n",
              i == 0   ? "#d62728"
              : i == 1 ? "#ff7f0e"
                       : "#2ca02c",
              gap, vl__fw_size_str(sz, sizeof sz, g));
    else
      fputs("<td></td><td></td></tr>\n", o);
  }
  fprintf(o,
          "<tr><td></td><td></td><td><span class=\"vl-swatch\" style=\"background:#9edae5\">"
          "</span>of the cached free blocks, inactive split blocks (fragmentation)</td>"
          "<td class=n id=\"vl-fragmentation\">%s</td></tr>\n</table>\n",
          vl__fw_size_str(sz, sizeof sz, f->gap_fragmented));
  if (f->n_outside) {
    fputs("<p>Asked of the driver by other libraries (the most each held):", o);
    for (unsigned i = 0; i < f->n_outside; i++) {
      fputs(i ? ", " : " ", o);
      vl__html_text(o, f->outside[i].name);
      fprintf(o, " %s", vl__fw_size_str(sz, sizeof sz, f->outside[i].bytes));
    }
    fputs(".</p>\n", o);
  }
}

/* ---- the bill ------------------------------------------------------------ */

/* The rank whose peak is the most (allocated; named on the CPU), among
 * those with a bill; NULL with one rank or none. */
static const struct vl_fw_rank *peak_rank(const struct vl_probe_layer *f) {
  const struct vl_fw_rank *best = NULL;
  if (f->n_rank_peaks < 2) return NULL;
  for (unsigned k = 0; k < f->n_rank_peaks; k++) {
    const struct vl_fw_rank *x = &f->ranks[k];
    uint64_t v = f->cuda ? x->peak_allocated : x->peak_named;
    if (x->has_bill && (!best || v > (f->cuda ? best->peak_allocated : best->peak_named))) best = x;
  }
  return best;
}

/* The bill as a table with shares: the parts it holds, in the bill's
 * order, each share also a bar; the total is the peak. */
static void bill_table(FILE *o, const uint64_t lines[VL__FW_LINES], bool by_difference) {
  uint64_t total = 0;
  for (int i = 0; i < VL__FW_LINES; i++)
    total += lines[i];
  fputs("<table><tr><th>part</th><th>size</th><th>share</th><th></th></tr>\n", o);
  char sz[32];
  for (int i = 0; i < VL__FW_LINES; i++) {
    uint64_t x = lines[i];
    if (!x) continue;
    double share = total ? 100.0 * (double)x / (double)total : 0;
    fprintf(o,
            "<tr><td><span class=\"vl-swatch\" style=\"background:%s\"></span>%s%s</td>"
            "<td class=n>%s</td><td class=n>%.1f %%</td><td><span class=\"vl-share\" "
            "style=\"width:%.0fpx;background:%s\"></span></td></tr>\n",
            vl__fw_line_colour(i), vl__fw_line_name(i),
            i == VL_BILL_ACTIVATIONS && by_difference ? " (by difference: torch.compile)" : "",
            page_size(sz, sizeof sz, x), share, 3 * share, vl__fw_line_colour(i));
  }
  fprintf(o, "<tr><th>the peak</th><th class=n>%s</th><th class=n>100 %%</th><th></th></tr>\n",
          vl__fw_size_str(sz, sizeof sz, total));
  fputs("</table>\n", o);
}

/* The bill at the peak: the rank that peaks (with several ranks, the main
 * rank's is only one of them), or the layer's own. */
static void bill_html(FILE *o, const struct vl_probe_layer *f) {
  const struct vl_fw_rank *x = peak_rank(f);
  uint64_t lines[VL__FW_LINES];
  char sz[32];
  if (x) {
    for (int i = 0; i < VL__FW_LINES; i++)
      lines[i] = vl__fw_rank_line_bytes(x, i);
    fprintf(o,
            "<h3 id=\"vl-bill-at-peak\" data-rank=\"%u\">The bill at the peak: rank %u, %s %s, "
            "step %u, ",
            x->rank, x->rank,
            vl__fw_size_str(sz, sizeof sz, f->cuda ? x->peak_allocated : x->peak_named),
            f->cuda ? "allocated" : "named", x->bill_step);
    vl__html_text(o, x->bill_phase); /* a record's phase name */
    fprintf(o,
            "</h3>\n<p>Rank %u peaks highest of the %u ranks (every rank's bill is below).</p>\n",
            x->rank, f->n_rank_peaks);
    bill_table(o, lines, false);
    return;
  }
  for (int i = 0; i < VL__FW_LINES; i++)
    lines[i] = f->cuda || i < VL_BILL_N ? vl__fw_line_bytes(f, i) : 0;
  if (f->cuda) {
    fprintf(o,
            "<h3 id=\"vl-bill-at-peak\" data-rank=\"0\">The bill at the peak: %s allocated, step "
            "%u, in ",
            vl__fw_size_str(sz, sizeof sz, f->peak_allocated), f->bill_step);
    vl__html_text(o, f->bill_phase);
    fputs(" (categories at its ", o);
    vl__html_text(o, f->bill_taken_at);
    fputs(")</h3>\n", o);
  } else {
    fprintf(o,
            "<h3 id=\"vl-bill-at-peak\" data-rank=\"0\">The bill at its largest boundary (no "
            "allocator on the CPU): step %u, after ",
            f->bill_step);
    vl__html_text(o, f->bill_phase);
    fputs("</h3>\n", o);
  }
  bill_table(o, lines, f->activations_by_difference);
}

/* Every rank's bill at its peak: one stacked bar a rank, side by side on
 * one scale, and the table; the parts no rank holds are left out. */
static void rank_bills_html(FILE *o, const struct vl_probe_layer *f) {
  unsigned idx[8], n = vl__fw_rank_order(f, idx);
  if (n < 2) return;
  bool held[VL__FW_LINES] = {false};
  for (int i = 0; i < VL__FW_LINES; i++)
    for (unsigned j = 0; j < n; j++)
      held[i] |= vl__fw_rank_line_bytes(&f->ranks[idx[j]], i) > 0;
  fprintf(o, "<h3>The bill at each rank's peak%s</h3>\n",
          f->n_rank_peaks > 8 ? " (the first 8 ranks; JSON has them all)" : "");
  json_t *c = vl__chart_new("stack", "rank", "", "memory", "bytes");
  char names[8][24];
  const char *cats[8];
  for (unsigned j = 0; j < n; j++) {
    snprintf(names[j], sizeof names[j], "rank %u", f->ranks[idx[j]].rank);
    cats[j] = names[j];
  }
  vl__chart_categories(c, cats, n);
  int ser[VL__FW_LINES];
  for (int i = 0; i < VL__FW_LINES; i++)
    ser[i] = held[i] ? vl__chart_series(c, vl__fw_line_name(i), vl__fw_line_colour(i), 0) : -1;
  for (unsigned j = 0; j < n; j++) {
    json_t *row = vl__chart_row(c, j);
    for (int i = 0; i < VL__FW_LINES; i++)
      if (ser[i] >= 0)
        vl__chart_set(row, ser[i], (double)vl__fw_rank_line_bytes(&f->ranks[idx[j]], i));
  }
  vl__html_chart(o, "the bill at each rank's peak", c, 300);
  fputs("<table><tr><th>part (GiB)</th>", o);
  for (unsigned j = 0; j < n; j++)
    fprintf(o, "<th>rank %u</th>", f->ranks[idx[j]].rank);
  fputs("</tr>\n", o);
  for (int i = 0; i <= VL__FW_LINES + 1; i++) {
    if (i < VL__FW_LINES && !held[i]) continue;
    if (i == VL__FW_LINES) {
      fprintf(o, "<tr><td>%s</td>", f->cuda ? "peak allocated" : "named");
    } else if (i == VL__FW_LINES + 1) {
      fputs("<tr><td>at (step, phase)</td>", o);
      for (unsigned j = 0; j < n; j++) {
        fprintf(o, "<td class=n>%u ", f->ranks[idx[j]].bill_step);
        vl__html_text(o, f->ranks[idx[j]].bill_phase);
        fputs("</td>", o);
      }
      fputs("</tr>\n", o);
      continue;
    } else {
      fprintf(o, "<tr><td>%s</td>", vl__fw_line_name(i));
    }
    for (unsigned j = 0; j < n; j++) {
      const struct vl_fw_rank *x = &f->ranks[idx[j]];
      uint64_t v = i < VL__FW_LINES ? vl__fw_rank_line_bytes(x, i)
                   : f->cuda        ? x->peak_allocated
                                    : x->peak_named;
      fprintf(o, "<td class=n>%.3f</td>", GIB(v));
    }
    fputs("</tr>\n", o);
  }
  fputs("</table>\n", o);
}

/* Each rank's peak, with DDP's first buckets where a rank kept them into
 * step 2 (docs/model.md, DDP's two outcomes), and how far apart they are. */
static void ranks_html(FILE *o, const struct vl_probe_layer *f) {
  if (f->n_rank_peaks < 2) return;
  char sz[32], sz2[32];
  fprintf(o, "<h3>Ranks</h3>\n<table><tr><th>rank</th><th>pid</th><th>%s</th><th></th></tr>\n",
          f->cuda ? "peak allocated" : "the most named at a boundary (no allocator on the CPU)");
  for (unsigned i = 0; i < f->n_rank_peaks; i++) {
    const struct vl_fw_rank *x = &f->ranks[i];
    fprintf(o, "<tr><td>%u</td><td>%u</td><td class=n>%s</td><td>", x->rank, x->pid,
            vl__fw_size_str(sz, sizeof sz, f->cuda ? x->peak_allocated : x->peak_named));
    if (x->ddp_step2_extra)
      fprintf(o,
              "in step 2: DDP's first buckets kept (+%s; later steps %s). DDP rebuilds its "
              "buckets at the second step; NCCL keeps the first step's all-reduce inputs until "
              "its watchdog (every 100 ms) has seen them finish, so where the rebuild comes "
              "first they live into step 2's backward, one more copy of the gradients at its "
              "peak (docs/model.md, DDP's two outcomes)",
              vl__fw_size_str(sz, sizeof sz, x->ddp_step2_extra),
              vl__fw_size_str(sz2, sizeof sz2, x->steady_peak_allocated));
    if (x->ddp_extra_in_bill)
      fprintf(o, "%s%s of its transient are DDP's first buckets, kept into step 2",
              x->ddp_step2_extra ? "; " : "", vl__fw_size_str(sz, sizeof sz, x->ddp_step2_extra));
    fputs("</td></tr>\n", o);
  }
  fprintf(o, "</table>\n<p>The ranks' peaks are %.1f %% apart", 100 * f->rank_imbalance);
  if (f->ddp_kept_ranks)
    fprintf(o, "; %.1f %% without DDP's first buckets in step 2", 100 * f->steady_rank_imbalance);
  fputs(".</p>\n", o);
}

/* Every boundary of the billed step: named + workspaces + rounding
 * against memory_allocated(). */
static void ledger_html(FILE *o, const struct vl_probe_layer *f) {
  if (!f->n_ledger) return;
  fprintf(o,
          "<h3>Every boundary of step %u</h3>\n<p>What the probe named, the cuBLAS workspaces and "
          "the allocator's rounding against memory_allocated() (worst unnamed %.2f %%).</p>\n"
          "<table><tr><th>after</th><th>allocated GiB</th><th>named GiB</th><th>workspaces "
          "GiB</th><th>rounding MiB</th><th>unnamed MiB</th></tr>\n",
          f->bill_step, 100 * f->worst_unnamed_share);
  for (unsigned i = 0; i < f->n_ledger; i++) {
    const struct vl_fw_boundary *e = &f->ledger[i];
    fputs("<tr><td>", o);
    vl__html_text(o, e->phase);
    fprintf(o,
            "</td><td class=n>%.3f</td><td class=n>%.3f</td><td class=n>%.3f</td>"
            "<td class=n>%.1f</td><td class=n>%.1f</td></tr>\n",
            GIB(e->allocated), GIB(e->named), GIB(e->cublas_workspaces), MIB(e->rounding),
            MIB(e->unnamed));
  }
  fputs("</table>\n", o);
}

static void modules_html(FILE *o, const struct vl_probe_layer *f) {
  if (!f->n_modules) return;
  char sz[32];
  fprintf(o,
          "<h3>Modules that saved the most for backward (step %u)</h3>\n<table id=\"vl-modules\">"
          "<tr><th>module</th><th>saved</th></tr>\n",
          f->bill_step);
  for (unsigned i = 0; i < f->n_modules && i < 5; i++) {
    fputs("<tr><td>", o);
    vl__html_text(o, f->modules[i].name); /* a record's module name */
    fprintf(o, "</td><td class=n>%s</td></tr>\n",
            page_size(sz, sizeof sz, f->modules[i].saved_bytes));
  }
  fputs("</table>\n", o);
}

/* a signed difference in the unit that reads best; "0" when none */
static const char *signed_size(char *buf, size_t n, uint64_t est, uint64_t meas) {
  if (est == meas) {
    snprintf(buf, n, "0");
    return buf;
  }
  char sz[24];
  page_size(sz, sizeof sz, est > meas ? est - meas : meas - est);
  snprintf(buf, n, "%s%s", est > meas ? "+" : "&minus;", sz);
  return buf;
}

/* The estimate and the measurement side by side, line by line (the lines
 * both put at zero left out), and the table with its headers; a line the
 * record cannot measure says so. */
static void cmp_html(FILE *o, const struct vl_probe_compare *cmp, bool cuda) {
  fputs("<h3>Estimate vs measured (the estimate's peak in ", o);
  vl__html_text(o, cmp->estimate_phase);
  fputs(")</h3>\n", o);
  const char *cats[VL_CMP_LINES];
  size_t n = 0;
  for (int i = 0; i < VL_CMP_LINES; i++)
    if ((cuda || i < VL_BILL_N) && (cmp->measured[i] || cmp->estimate[i]))
      cats[n++] = vl__fw_cmp_name[i];
  json_t *c = vl__chart_new("bars", "", "", "memory", "bytes");
  vl__chart_categories(c, cats, n);
  int m = vl__chart_series(c, "measured", "#1f77b4", 0);
  int e = vl__chart_series(c, "estimate", "#ff7f0e", 0);
  n = 0;
  for (int i = 0; i < VL_CMP_LINES; i++) {
    if (!(cuda || i < VL_BILL_N) || (!cmp->measured[i] && !cmp->estimate[i])) continue;
    json_t *row = vl__chart_row(c, (double)n++);
    vl__chart_set(row, m, (double)cmp->measured[i]);
    vl__chart_set(row, e, (double)cmp->estimate[i]);
  }
  vl__html_chart(o, "estimate vs measured", c, 320);
  fputs("<table id=\"vl-compare\"><tr><th>line</th><th>measured</th><th>estimate</th>"
        "<th>estimate &minus; measured</th><th>of measured</th></tr>\n",
        o);
  for (int i = 0; i < VL_CMP_LINES; i++) {
    if (!cmp->measured[i] && !cmp->estimate[i]) continue;
    char ms[32], es[32], d[40];
    page_size(es, sizeof es, cmp->estimate[i]);
    if (!cuda && i >= VL_BILL_N) {
      fprintf(o,
              "<tr><td>%s</td><td>not measured (no allocator on the CPU)</td><td class=n>%s</td>"
              "<td></td><td></td></tr>\n",
              vl__fw_cmp_name[i], es);
      continue;
    }
    page_size(ms, sizeof ms, cmp->measured[i]);
    signed_size(d, sizeof d, cmp->estimate[i], cmp->measured[i]);
    fprintf(o, "<tr><td>%s</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td>",
            vl__fw_cmp_name[i], ms, es, d);
    if (cmp->measured[i])
      fprintf(o, "<td class=n>%+.1f %%</td></tr>\n",
              100.0 * ((double)cmp->estimate[i] - (double)cmp->measured[i]) /
                  (double)cmp->measured[i]);
    else
      fputs("<td>none measured</td></tr>\n", o);
  }
  fputs("</table>\n", o);
  char w[192];
  if (vl__fw_step_time_words(w, sizeof w, cmp)) {
    fputs("<p>Step time on ", o);
    vl__html_text(o, cmp->card);
    fprintf(o, ": %s.</p>\n", w);
  }
}

void vl__fw_html(FILE *o, const struct vl_probe_layer *f, const struct vl_probe_compare *cmp) {
  char sz[32];
  if (!f->present) {
    fputs("<h2>Framework layer</h2>\n<p>No PyTorch probe in this record (not Python, no torch, "
          "or run --no-probe): reserved, allocated and the bill are not measured.</p>\n",
          o);
    return;
  }
  fputs("<h2>Framework layer (PyTorch probe)</h2>\n<p>torch ", o);
  vl__html_text(o, f->torch);
  if (f->device[0]) {
    fputs(" on ", o);
    vl__html_text(o, f->device);
  }
  fprintf(o, ", %u process%s with the probe, %u steps", f->n_ranks, f->n_ranks == 1 ? "" : "es",
          f->n_steps);
  if (f->step_s_median > 0) fprintf(o, ", median step %.1f ms", f->step_s_median * 1e3);
  if (f->tokens_per_s > 0)
    fprintf(o, ", %.0f tokens/s", f->tokens_per_s);
  else
    fputs(", tokens/s not measured (the steps counted no tokens)", o);
  fputs(".", o);
  if (f->cuda)
    fprintf(o,
            " Loading the model: %s allocated before the first forward; the first forward "
            "added %s.",
            vl__fw_size_str(sz, sizeof sz, f->load_bytes),
            vl__fw_size_str(sz, sizeof sz, f->first_forward_bytes));
  else
    fputs(" On the CPU: no allocator counters, so reserved, allocated and the ladder are not "
          "measured; the bill is the probe's named storages.",
          o);
  fputs("</p>\n", o);
  if (f->has_bill) {
    bill_html(o, f);
    if (cmp && cmp->present) cmp_html(o, cmp, f->cuda);
    ledger_html(o, f);
    modules_html(o, f);
  }
  ranks_html(o, f);
  rank_bills_html(o, f);
  bool more = f->growth_steps >= 3 || f->probe_share_light > 0 || f->probe_share_sampled > 0;
  if (more) fputs("<ul>\n", o);
  if (f->growth_steps >= 3)
    fprintf(o,
            "<li>Growth: %+.1f MiB per step in what is allocated after each step (steps 4 on, %u "
            "points).</li>\n",
            MIB(f->growth_bytes_per_step), f->growth_steps);
  if (f->probe_share_light > 0 || f->probe_share_sampled > 0)
    fprintf(o, "<li>The probe's own time: %.2f %% of a step, %.1f %% of a sampled step.</li>\n",
            100 * f->probe_share_light, 100 * f->probe_share_sampled);
  if (more) fputs("</ul>\n", o);
  if (f->oom) {
    fprintf(o, "<p><b>Out of memory</b> at step %u in ", f->first_oom.step);
    vl__html_text(o, f->first_oom.phase);
    fprintf(o, ": asked for %.2f GiB with %.2f GiB free", GIB(f->first_oom.request_bytes),
            GIB(f->first_oom.device_free_bytes));
    if (f->first_oom.snapshot[0]) {
      fputs("; snapshot ", o);
      vl__html_text(o, f->first_oom.snapshot);
    }
    fputs(".</p>\n", o);
  }
}
