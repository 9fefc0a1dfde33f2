/* A fake libnvidia-ml.so.1 for tests: the NVML ABI subset vramledger uses,
 * with scripted values.
 *   FAKE_NVML_GPUS=N        number of GPUs (default 1; 0 makes init fail)
 *   FAKE_NVML_PROCS=FILE    lines "PID BYTES [GPU]": compute processes,
 *                           re-read at every query
 *   FAKE_NVML_OLD=1         the v2/v3 process queries and memory info v2
 *                           report "function not found" (fallback paths)
 *   FAKE_NVML_LOST=I        GPU I's memory queries fail (GPU is lost)
 *   FAKE_NVML_SPIKE=FILE    "BYTES [GPU]": the next memory query of that GPU
 *                           (default 0) says BYTES more used, once; the file
 *                           is removed by that query (a one-sample spike)
 *   FAKE_NVML_READS=FILE    the number of memory queries of GPU 0 so far,
 *                           rewritten at each (tests wait on it, not on time)
 * Power 250 W + 1 W per index, 40 C + index, SM clock 1980 MHz, memory
 * clock 2619 MHz, energy 1000000 mJ, PCI bus id 00000000:0I:00.0.
 * Device used memory = 1 GiB + the processes' bytes; total 141 GB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_v1;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2;

#define TOTAL 141000000000ull
#define BASE (1ull << 30)
static struct nvmlDevice_st { int index; } devs[8];

static int gpus(void) {
  const char *s = getenv("FAKE_NVML_GPUS");
  int n = s ? (int)strtol(s, NULL, 10) : 1;
  return n < 0 ? 0 : n > 8 ? 8 : n;
}
static int old(void) { return getenv("FAKE_NVML_OLD") != NULL; }
static int lost(unsigned i) {
  const char *s = getenv("FAKE_NVML_LOST");
  return s && *s && strtoul(s, NULL, 10) == i;
}

/* Processes of one GPU from the script file. */
static unsigned procs(int gpu, unsigned *pids, unsigned long long *bytes, unsigned cap) {
  const char *path = getenv("FAKE_NVML_PROCS");
  FILE *f = path ? fopen(path, "r") : NULL;
  unsigned n = 0;
  if (!f) return 0;
  unsigned pid, g;
  unsigned long long b;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    int k = sscanf(line, "%u %llu %u", &pid, &b, &g);
    if (k < 2) continue;
    if (k == 2) g = 0;
    if ((int)g != gpu) continue;
    if (n < cap) {
      pids[n] = pid;
      bytes[n] = b;
    }
    n++;
  }
  fclose(f);
  return n;
}

nvmlReturn_t nvmlInit_v2(void) {
  return gpus() > 0 ? 0 : 12; /* NVML_ERROR_DRIVER_NOT_LOADED-ish */
}
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t r) {
  return r == 12 ? "Driver Not Loaded (fake)" : "fake error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *c) {
  *c = (unsigned)gpus();
  return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
  if ((int)i >= gpus()) return 2;
  devs[i].index = (int)i;
  *d = &devs[i];
  return 0;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
  *v = 13000;
  return 0;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned n) {
  snprintf(buf, n, "999.99-fake");
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned n) {
  snprintf(buf, n, "Fake GPU %d", d->index);
  return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned n) {
  snprintf(buf, n, "GPU-fake-%04d", d->index);
  return 0;
}
/* FAKE_NVML_SPIKE's bytes for gpu, once; FAKE_NVML_READS counted */
static unsigned long long spike(int gpu) {
  static unsigned long long reads;
  const char *rpath = getenv("FAKE_NVML_READS");
  if (rpath && gpu == 0) { /* written whole, then renamed: never read half */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", rpath);
    FILE *r = fopen(tmp, "w");
    if (r) {
      fprintf(r, "%llu\n", ++reads);
      if (fclose(r) == 0) rename(tmp, rpath);
    }
  }
  const char *path = getenv("FAKE_NVML_SPIKE");
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return 0;
  unsigned long long b = 0;
  unsigned g = 0;
  int k = fscanf(f, "%llu %u", &b, &g);
  fclose(f);
  if (k < 1 || (int)g != gpu) return 0;
  remove(path);
  return b;
}
static unsigned long long used(int gpu) {
  unsigned pids[256];
  unsigned long long b[256], sum = BASE + spike(gpu);
  unsigned n = procs(gpu, pids, b, 256);
  for (unsigned i = 0; i < n && i < 256; i++)
    sum += b[i];
  return sum;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2 *m) {
  if (old()) return 13;          /* NVML_ERROR_FUNCTION_NOT_FOUND */
  if (lost(d->index)) return 15; /* NVML_ERROR_GPU_IS_LOST */
  if (m->version != (unsigned)(sizeof *m | (2u << 24))) return 25; /* ARGUMENT_VERSION_MISMATCH */
  m->total = TOTAL;
  m->reserved = 512ull << 20;
  m->used = used(d->index);
  m->free = TOTAL - m->reserved - m->used;
  return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_v1 *m) {
  if (lost(d->index)) return 15;
  m->total = TOTAL;
  m->used = used(d->index);
  m->free = TOTAL - m->used;
  return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization *u) {
  u->gpu = 50 + (unsigned)d->index;
  u->memory = 20;
  return 0;
}
static nvmlReturn_t procs_v2(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_v2 *info) {
  if (old()) return 13;
  unsigned pids[256];
  unsigned long long b[256];
  unsigned n = procs(d->index, pids, b, 256);
  if (n > *count) {
    *count = n;
    return 7; /* INSUFFICIENT_SIZE */
  }
  for (unsigned i = 0; i < n; i++)
    info[i] = (nvmlProcessInfo_v2){pids[i], b[i], 0, 0};
  *count = n;
  return 0;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *c,
                                                     nvmlProcessInfo_v2 *i) {
  return procs_v2(d, c, i);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned *c,
                                                     nvmlProcessInfo_v2 *i) {
  return procs_v2(d, c, i);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned *count,
                                                  nvmlProcessInfo_v1 *info) {
  unsigned pids[256];
  unsigned long long b[256];
  unsigned n = procs(d->index, pids, b, 256);
  if (n > *count) {
    *count = n;
    return 7;
  }
  for (unsigned i = 0; i < n; i++)
    info[i] = (nvmlProcessInfo_v1){pids[i], b[i]};
  *count = n;
  return 0;
}
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
  memset(p, 0, sizeof *p);
  p->bus = (unsigned)d->index;
  snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", (unsigned)d->index);
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw) {
  *mw = 250000u + 1000u * (unsigned)d->index;
  return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *c) {
  if (sensor != 0) return 2;
  *c = 40u + (unsigned)d->index;
  return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *mhz) {
  (void)d;
  if (type != 1 && type != 2) return 2;
  *mhz = type == 1 ? 1980u : 2619u;
  return 0;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
  (void)d;
  *mj = 1000000ull;
  return 0;
}
