/* `watch` output: CSV rows, JSON Lines, Prometheus text exposition. */
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/nvml.h"
#include "vramledger/procinfo.h"
#include "vramledger/render.h"

int vl_render_watch_csv_header(FILE *o) {
  fputs("t_unix_ms,gpu,name,uuid,total_bytes,used_bytes,util_gpu_pct,pid,process_bytes\n", o);
  return ferror(o) ? -1 : 0;
}

static void util(FILE *o, unsigned u, bool ratio) {
  if (u == UINT32_MAX)
    fputs(ratio ? "NaN" : "", o);
  else if (ratio)
    fprintf(o, "%.2f", u / 100.0);
  else
    fprintf(o, "%u", u);
}

/* The GPU metrics, each once: vramledger's name in bytes or a ratio, and
 * dcgm-exporter's (its etc/default-counters.csv, github.com/NVIDIA/
 * dcgm-exporter, with its help text and type; FB_TOTAL is DCGM's field
 * list's: the same NVML readings in its units, MiB, %, MHz, C, W, mJ).
 * NULL: not under that naming. The _max_bytes gauge, which neither DCGM
 * nor NVML has, goes under vramledger's name under both. */
enum gpu_value {
  V_TOTAL,
  V_USED,
  V_USED_MAX,
  V_FREE,
  V_UTIL,
  V_MEM_UTIL,
  V_SM_CLOCK,
  V_MEM_CLOCK,
  V_TEMP,
  V_POWER,
  V_ENERGY
};
static const struct gpu_metric {
  const char *name, *help;
  const char *dcgm, *dcgm_help, *dcgm_type;
  enum gpu_value value;
} gpu_metrics[] = {
    {"vramledger_gpu_memory_total_bytes", "GPU memory in total, bytes (NVML)",
     "DCGM_FI_DEV_FB_TOTAL", "Total framebuffer memory (in MiB).", "gauge", V_TOTAL},
    {"vramledger_gpu_memory_used_bytes", "GPU memory in use, bytes (NVML)", "DCGM_FI_DEV_FB_USED",
     "Framebuffer memory used (in MiB).", "gauge", V_USED},
    {"vramledger_gpu_memory_used_max_bytes",
     "the most GPU memory in use at any sample since the previous scrape by any client, bytes "
     "(NVML)",
     "vramledger_gpu_memory_used_max_bytes",
     "the most GPU memory in use at any sample since the previous scrape by any client, bytes "
     "(NVML)",
     "gauge", V_USED_MAX},
    {NULL, NULL, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", V_FREE},
    {"vramledger_gpu_utilization_ratio", "fraction of time a kernel ran (NVML)",
     "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", V_UTIL},
    {NULL, NULL, "DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge", V_MEM_UTIL},
    {NULL, NULL, "DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", V_SM_CLOCK},
    {NULL, NULL, "DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge", V_MEM_CLOCK},
    {NULL, NULL, "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", V_TEMP},
    {NULL, NULL, "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", V_POWER},
    {NULL, NULL, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
     "Total energy consumption since boot (in mJ).", "counter", V_ENERGY},
};

/* A GPU's labels. vramledger's: gpu, uuid, name. dcgm-exporter's, in its
 * order (internal/pkg/rendermetrics/render_metrics.go): gpu, UUID,
 * pci_bus_id, device ("nvidia" and the index), modelName, Hostname. */
static void gpu_labels(FILE *o, const struct vl_watch_gpu *w, const char *host, bool dcgm) {
  const struct vl_gpu_sample *g = w->gpu;
  fprintf(o, "{gpu=\"%u\",%s=\"", g->index, dcgm ? "UUID" : "uuid");
  vl__prom_label(o, g->uuid);
  if (dcgm) {
    if (w->extra && w->extra->pci_bus_id[0]) {
      fputs("\",pci_bus_id=\"", o);
      vl__prom_label(o, w->extra->pci_bus_id);
    }
    fprintf(o, "\",device=\"nvidia%u\",modelName=\"", g->index);
    vl__prom_label(o, g->name);
    if (host && *host) {
      fputs("\",Hostname=\"", o);
      vl__prom_label(o, host);
    }
  } else {
    fputs("\",name=\"", o);
    vl__prom_label(o, g->name);
  }
  fputs("\"}", o);
}

/* One GPU's value of m into buf (cap bytes); false when it has none (NVML
 * did not say: the series is left out, as dcgm-exporter leaves out a blank
 * field). */
static bool gpu_value(char *buf, size_t cap, const struct gpu_metric *m,
                      const struct vl_watch_gpu *w, bool dcgm) {
  const struct vl_gpu_sample *g = w->gpu;
  const struct vl_gpu_extra *x = w->extra;
  unsigned u = UINT32_MAX;
  switch (m->value) {
  case V_TOTAL:
  case V_USED:
  case V_FREE: { /* DCGM: whole MiB, NVML's bytes / 2^20 truncated */
    uint64_t b = m->value == V_TOTAL  ? g->total_bytes
                 : m->value == V_USED ? g->used_bytes
                                      : g->free_bytes;
    snprintf(buf, cap, "%llu", (unsigned long long)(dcgm ? b >> 20 : b));
    return true;
  }
  case V_USED_MAX: snprintf(buf, cap, "%llu", (unsigned long long)w->used_max_bytes); return true;
  case V_UTIL:
  case V_MEM_UTIL: /* a ratio, or DCGM's whole % */
    u = m->value == V_UTIL ? g->util_gpu_pct : g->util_mem_pct;
    if (u == UINT32_MAX && dcgm) return false;
    if (u == UINT32_MAX)
      snprintf(buf, cap, "NaN");
    else if (!dcgm)
      snprintf(buf, cap, "%.2f", u / 100.0);
    else
      snprintf(buf, cap, "%u", u);
    return true;
  case V_SM_CLOCK: u = x ? x->sm_clock_mhz : UINT32_MAX; break;
  case V_MEM_CLOCK: u = x ? x->mem_clock_mhz : UINT32_MAX; break;
  case V_TEMP: u = x ? x->temp_c : UINT32_MAX; break;
  case V_POWER: /* NVML's milliwatts, DCGM's watts */
    if (!x || x->power_mw == UINT32_MAX) return false;
    snprintf(buf, cap, "%u.%03u", x->power_mw / 1000, x->power_mw % 1000);
    return true;
  case V_ENERGY:
    if (!x || x->energy_mj == UINT64_MAX) return false;
    snprintf(buf, cap, "%llu", (unsigned long long)x->energy_mj);
    return true;
  }
  if (u == UINT32_MAX) return false;
  snprintf(buf, cap, "%u", u);
  return true;
}

/* A process's labels: the GPU's index and uuid, its pid, command, and
 * where it runs (container_id and pod_uid, only when its cgroup names
 * them: an empty label is no label in Prometheus). */
static void proc_labels(FILE *o, unsigned gpu, const char *uuid, unsigned pid,
                        const struct vl_proc_ident *id, bool dcgm) {
  fprintf(o, "{gpu=\"%u\",%s=\"", gpu, dcgm ? "UUID" : "uuid");
  vl__prom_label(o, uuid);
  fprintf(o, "\",pid=\"%u\"", pid);
  if (id && id->command[0]) {
    fputs(",command=\"", o);
    vl__prom_label(o, id->command);
    fputc('"', o);
  }
  if (id && id->container_id[0]) {
    fputs(",container_id=\"", o);
    vl__prom_label(o, id->container_id);
    fputc('"', o);
  }
  if (id && id->pod_uid[0]) {
    fputs(",pod_uid=\"", o);
    vl__prom_label(o, id->pod_uid);
    fputc('"', o);
  }
  fputc('}', o);
}

static void help(FILE *o, const char *name, const char *text, const char *type) {
  fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void prometheus(FILE *o, const struct vl_watch_view *v, bool dcgm) {
  help(o, "vramledger_up", "1: every GPU NVML counts was read at the last sample", "gauge");
  fprintf(o, "vramledger_up %d\n", v->n_gpus_unread ? 0 : 1);
  if (v->version) {
    help(o, "vramledger_build_info", "the vramledger that serves these metrics", "gauge");
    fputs("vramledger_build_info{version=\"", o);
    vl__prom_label(o, v->version);
    fputs("\"} 1\n", o);
  }
  help(o, "vramledger_gpu_up", "1: NVML answered for this GPU at the last sample, 0: it did not",
       "gauge");
  for (unsigned i = 0; i < v->n_gpus; i++) {
    fputs("vramledger_gpu_up", o);
    gpu_labels(o, &v->gpus[i], v->host, dcgm);
    fprintf(o, " %d\n", v->gpus[i].up ? 1 : 0);
  }
  for (size_t k = 0; k < sizeof gpu_metrics / sizeof gpu_metrics[0]; k++) {
    const struct gpu_metric *m = &gpu_metrics[k];
    const char *name = dcgm ? m->dcgm : m->name;
    if (!name) continue;
    help(o, name, dcgm ? m->dcgm_help : m->help, dcgm ? m->dcgm_type : "gauge");
    for (unsigned i = 0; i < v->n_gpus; i++) {
      const struct vl_watch_gpu *w = &v->gpus[i];
      if (!w->up) continue;
      char val[32]; /* the value first: a series without one is left out */
      if (!gpu_value(val, sizeof val, m, w, dcgm)) continue;
      fputs(name, o);
      gpu_labels(o, w, v->host, dcgm);
      fprintf(o, " %s\n", val);
    }
  }
  /* no DCGM field for a process's memory: vramledger's names under either */
  help(o, "vramledger_process_memory_used_bytes", "GPU memory of one process, bytes (NVML)",
       "gauge");
  for (unsigned i = 0; i < v->n_gpus; i++) {
    const struct vl_watch_gpu *w = &v->gpus[i];
    for (unsigned p = 0; w->up && p < w->n_procs; p++) {
      const struct vl_proc_sample *ps = &w->procs[p];
      if (ps->used_bytes == UINT64_MAX) continue;
      fputs("vramledger_process_memory_used_bytes", o);
      proc_labels(o, w->gpu->index, w->gpu->uuid, ps->pid, w->idents ? &w->idents[p] : NULL, dcgm);
      fprintf(o, " %llu\n", (unsigned long long)ps->used_bytes);
    }
  }
  help(o, "vramledger_process_memory_used_max_bytes",
       "the most GPU memory of one process at any sample since the previous scrape by any "
       "client, bytes (NVML); a process that ended since is still here once",
       "gauge");
  for (size_t k = 0; k < v->n_peaks; k++) {
    const struct vl_watch_peak *pk = &v->peaks[k];
    fputs("vramledger_process_memory_used_max_bytes", o);
    proc_labels(o, pk->gpu, pk->uuid, pk->pid, pk->ident, dcgm);
    fprintf(o, " %llu\n", (unsigned long long)pk->max_bytes);
  }
}

int vl_render_watch(FILE *o, enum vl_watch_format fmt, const struct vl_watch_view *v) {
  if (fmt == VL_WATCH_CSV) {
    for (unsigned i = 0; i < v->n_gpus; i++) {
      if (!v->gpus[i].up) continue; /* NVML did not answer: no row */
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      for (unsigned k = 0; k <= v->gpus[i].n_procs; k++) {
        fprintf(o, "%llu,%u,", (unsigned long long)v->t_unix_ms, g->index);
        vl__csv_field(o, g->name);
        fputc(',', o);
        vl__csv_field(o, g->uuid);
        fprintf(o, ",%llu,%llu,", (unsigned long long)g->total_bytes,
                (unsigned long long)g->used_bytes);
        util(o, g->util_gpu_pct, false);
        if (k == 0) { /* the GPU's own row */
          fputs(",,\n", o);
          continue;
        }
        const struct vl_proc_sample *p = &v->gpus[i].procs[k - 1];
        fprintf(o, ",%u,", p->pid);
        if (p->used_bytes != UINT64_MAX) fprintf(o, "%llu", (unsigned long long)p->used_bytes);
        fputc('\n', o);
      }
    }
  } else if (fmt == VL_WATCH_JSONL) {
    fprintf(o, "{\"t_unix_ms\":%llu,\"host\":", (unsigned long long)v->t_unix_ms);
    vl__json_text(o, v->host ? v->host : "");
    fputs(",\"gpus\":[", o);
    for (unsigned i = 0, n = 0; i < v->n_gpus; i++) {
      if (!v->gpus[i].up) continue;
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      fprintf(o, "%s{\"index\":%u,\"name\":", n++ ? "," : "", g->index);
      vl__json_text(o, g->name);
      fputs(",\"uuid\":", o);
      vl__json_text(o, g->uuid);
      fprintf(o, ",\"total_bytes\":%llu,\"used_bytes\":%llu", (unsigned long long)g->total_bytes,
              (unsigned long long)g->used_bytes);
      if (g->util_gpu_pct != UINT32_MAX) fprintf(o, ",\"util_gpu_pct\":%u", g->util_gpu_pct);
      fputs(",\"procs\":[", o);
      for (unsigned k = 0; k < v->gpus[i].n_procs; k++) {
        const struct vl_proc_sample *p = &v->gpus[i].procs[k];
        fprintf(o, "%s{\"pid\":%u", k ? "," : "", p->pid);
        if (p->used_bytes != UINT64_MAX)
          fprintf(o, ",\"bytes\":%llu", (unsigned long long)p->used_bytes);
        fputc('}', o);
      }
      fputs("]}", o);
    }
    fputs("]}\n", o);
  } else {
    prometheus(o, v, fmt == VL_WATCH_PROMETHEUS_DCGM);
  }
  return ferror(o) ? -1 : 0;
}
