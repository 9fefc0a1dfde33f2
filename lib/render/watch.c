/* `watch` output: CSV rows, JSON Lines, Prometheus text exposition. */
#include <stdio.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/nvml.h"
#include "vramledger/render.h"

/* Label values: backslash, double quote and newline escaped (exposition
 * format 0.0.4); CSV fields: quotes doubled. */
static void prom_label(FILE *o, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') fputc('\\', o);
    if (*s == '\n') {
      fputs("\\n", o);
      continue;
    }
    fputc(*s, o);
  }
}

static void csv_field(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"') fputc('"', o);
    fputc(*s, o);
  }
  fputc('"', o);
}

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(o, "\\%c", c);
    else if (c < 0x20)
      fprintf(o, "\\u%04x", c);
    else
      fputc(c, o);
  }
  fputc('"', o);
}

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

int vl_render_watch(FILE *o, enum vl_watch_format fmt, const struct vl_watch_view *v) {
  if (fmt == VL_WATCH_CSV) {
    for (unsigned i = 0; i < v->n_gpus; i++) {
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      for (unsigned k = 0; k <= v->gpus[i].n_procs; k++) {
        fprintf(o, "%llu,%u,", (unsigned long long)v->t_unix_ms, g->index);
        csv_field(o, g->name);
        fputc(',', o);
        csv_field(o, g->uuid);
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
    json_str(o, v->host ? v->host : "");
    fputs(",\"gpus\":[", o);
    for (unsigned i = 0; i < v->n_gpus; i++) {
      const struct vl_gpu_sample *g = v->gpus[i].gpu;
      fprintf(o, "%s{\"index\":%u,\"name\":", i ? "," : "", g->index);
      json_str(o, g->name);
      fputs(",\"uuid\":", o);
      json_str(o, g->uuid);
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
    static const struct {
      const char *name, *help, *type;
    } m[] = {
        {"vramledger_gpu_memory_total_bytes", "GPU memory in total, bytes (NVML)", "gauge"},
        {"vramledger_gpu_memory_used_bytes", "GPU memory in use, bytes (NVML)", "gauge"},
        {"vramledger_gpu_utilization_ratio", "fraction of time a kernel ran (NVML)", "gauge"},
        {"vramledger_process_memory_used_bytes", "GPU memory of one process, bytes (NVML)",
         "gauge"},
    };
    for (int k = 0; k < 4; k++) {
      fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
      for (unsigned i = 0; i < v->n_gpus; i++) {
        const struct vl_gpu_sample *g = v->gpus[i].gpu;
        if (k < 3) {
          fprintf(o, "%s{gpu=\"%u\",uuid=\"", m[k].name, g->index);
          prom_label(o, g->uuid);
          fputs("\",name=\"", o);
          prom_label(o, g->name);
          fputs("\"} ", o);
          if (k == 0)
            fprintf(o, "%llu\n", (unsigned long long)g->total_bytes);
          else if (k == 1)
            fprintf(o, "%llu\n", (unsigned long long)g->used_bytes);
          else {
            util(o, g->util_gpu_pct, true);
            fputc('\n', o);
          }
          continue;
        }
        for (unsigned p = 0; p < v->gpus[i].n_procs; p++) {
          const struct vl_proc_sample *ps = &v->gpus[i].procs[p];
          if (ps->used_bytes == UINT64_MAX) continue;
          fprintf(o, "%s{gpu=\"%u\",uuid=\"", m[k].name, g->index);
          prom_label(o, g->uuid);
          fprintf(o, "\",pid=\"%u\"} %llu\n", ps->pid, (unsigned long long)ps->used_bytes);
        }
      }
    }
  }
  return ferror(o) ? -1 : 0;
}
