/* `watch` output: CSV rows, JSON Lines, Prometheus text exposition. */
#include <stdio.h>
#include <string.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "../util/internal.h"
#include "vramledger/nvml.h"
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
 * dcgm-exporter's (its etc/default-counters.csv and DCGM's field list: the
 * same NVML readings in MiB or %). NULL: not under that naming. */
enum gpu_value { V_TOTAL, V_USED, V_FREE, V_UTIL, V_MEM_UTIL };
static const struct gpu_metric {
  const char *name, *help;
  const char *dcgm, *dcgm_help;
  enum gpu_value value;
} gpu_metrics[] = {
    {"vramledger_gpu_memory_total_bytes", "GPU memory in total, bytes (NVML)",
     "DCGM_FI_DEV_FB_TOTAL", "Total framebuffer memory (in MiB).", V_TOTAL},
    {"vramledger_gpu_memory_used_bytes", "GPU memory in use, bytes (NVML)", "DCGM_FI_DEV_FB_USED",
     "Framebuffer memory used (in MiB).", V_USED},
    {NULL, NULL, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", V_FREE},
    {"vramledger_gpu_utilization_ratio", "fraction of time a kernel ran (NVML)",
     "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", V_UTIL},
    {NULL, NULL, "DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", V_MEM_UTIL},
};

/* A GPU's labels. vramledger's: gpu, uuid, name. dcgm-exporter's, in its
 * order (internal/pkg/rendermetrics/render_metrics.go): gpu, UUID, device
 * ("nvidia" and the index), modelName, Hostname; no pci_bus_id. */
static void gpu_labels(FILE *o, const struct vl_gpu_sample *g, const char *host, bool dcgm) {
  fprintf(o, "{gpu=\"%u\",%s=\"", g->index, dcgm ? "UUID" : "uuid");
  vl__prom_label(o, g->uuid);
  if (dcgm) {
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

static void prometheus(FILE *o, const struct vl_watch_view *v, bool dcgm) {
  fputs("# HELP vramledger_up 1: every GPU NVML counts was read at the last sample\n"
        "# TYPE vramledger_up gauge\n",
        o);
  fprintf(o, "vramledger_up %d\n", v->n_gpus_unread ? 0 : 1);
  if (v->version) {
    fputs("# HELP vramledger_build_info the vramledger that serves these metrics\n"
          "# TYPE vramledger_build_info gauge\nvramledger_build_info{version=\"",
          o);
    vl__prom_label(o, v->version);
    fputs("\"} 1\n", o);
  }
  for (size_t k = 0; k < sizeof gpu_metrics / sizeof gpu_metrics[0]; k++) {
    const struct gpu_metric *m = &gpu_metrics[k];
    const char *name = dcgm ? m->dcgm : m->name;
    if (!name) continue;
    fprintf(o, "# HELP %s %s\n# TYPE %s gauge\n", name, dcgm ? m->dcgm_help : m->help, name);
    for (unsigned i = 0; i < v->n_gpus; i++) {
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      bool pct = m->value == V_UTIL || m->value == V_MEM_UTIL;
      unsigned u = m->value == V_UTIL ? g->util_gpu_pct : g->util_mem_pct;
      if (pct && u == UINT32_MAX && dcgm) continue; /* dcgm-exporter leaves a blank out */
      fputs(name, o);
      gpu_labels(o, g, v->host, dcgm);
      fputc(' ', o);
      uint64_t bytes = m->value == V_TOTAL  ? g->total_bytes
                       : m->value == V_USED ? g->used_bytes
                                            : g->free_bytes;
      if (pct)
        util(o, u, !dcgm); /* a ratio, or DCGM's whole % */
      else                 /* DCGM: whole MiB, NVML's bytes / 2^20 truncated */
        fprintf(o, "%llu", (unsigned long long)(dcgm ? bytes >> 20 : bytes));
      fputc('\n', o);
    }
  }
  /* no DCGM field for a process's memory: vramledger's name under either */
  fputs("# HELP vramledger_process_memory_used_bytes GPU memory of one process, bytes (NVML)\n"
        "# TYPE vramledger_process_memory_used_bytes gauge\n",
        o);
  for (unsigned i = 0; i < v->n_gpus; i++) {
    const struct vl_gpu_sample *g = v->gpus[i].gpu;
    for (unsigned p = 0; p < v->gpus[i].n_procs; p++) {
      const struct vl_proc_sample *ps = &v->gpus[i].procs[p];
      if (ps->used_bytes == UINT64_MAX) continue;
      fprintf(o, "vramledger_process_memory_used_bytes{gpu=\"%u\",%s=\"", g->index,
              dcgm ? "UUID" : "uuid");
      vl__prom_label(o, g->uuid);
      fprintf(o, "\",pid=\"%u\"} %llu\n", ps->pid, (unsigned long long)ps->used_bytes);
    }
  }
}

int vl_render_watch(FILE *o, enum vl_watch_format fmt, const struct vl_watch_view *v) {
  if (fmt == VL_WATCH_CSV) {
    for (unsigned i = 0; i < v->n_gpus; i++) {
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
    for (unsigned i = 0; i < v->n_gpus; i++) {
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      fprintf(o, "%s{\"index\":%u,\"name\":", i ? "," : "", g->index);
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
