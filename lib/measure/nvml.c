/* NVML through dlopen, with our own minimal declarations of the ABI
 * (nvml.h, CUDA 12/13): versioned symbols first, older ones as fallbacks. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/nvml.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ull)

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_v1;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2;
/* NVML_STRUCT_VERSION(Memory, 2) */
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2) | (2u << 24)))
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1;
typedef struct { /* v2 and v3 share this layout */
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2;

/* nvmlPciInfo_t of nvmlDeviceGetPciInfo_v3 (and _v2: the same layout) */
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo;
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2

#define MAX_GPUS 64

struct vl_nvml {
  void *lib;
  nvmlReturn_t (*shutdown)(void);
  const char *(*error_string)(nvmlReturn_t);
  nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned);
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char *, unsigned);
  nvmlReturn_t (*mem_v2)(nvmlDevice_t, nvmlMemory_v2 *);
  nvmlReturn_t (*mem_v1)(nvmlDevice_t, nvmlMemory_v1 *);
  nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization *);
  nvmlReturn_t (*procs_v3)(nvmlDevice_t, unsigned *, nvmlProcessInfo_v2 *);
  nvmlReturn_t (*procs_v2)(nvmlDevice_t, unsigned *, nvmlProcessInfo_v2 *);
  nvmlReturn_t (*procs_v1)(nvmlDevice_t, unsigned *, nvmlProcessInfo_v1 *);
  unsigned count;
  nvmlDevice_t dev[MAX_GPUS];
  char name[MAX_GPUS][96];
  char uuid[MAX_GPUS][96];
  char driver[80];
  int cuda_driver;            /* 13000 for CUDA 13.0; 0 unknown */
  uint64_t util_ns[MAX_GPUS]; /* when utilisation was last read */
  unsigned util_gpu[MAX_GPUS], util_mem[MAX_GPUS];
  /* the process list as last read: read again when the GPU's used memory
   * moved or PROCS_MAX_AGE_NS passed (see vl_nvml_processes) */
  uint64_t used_now[MAX_GPUS]; /* used bytes at the last vl_nvml_sample */
  uint64_t procs_used[MAX_GPUS], procs_ns[MAX_GPUS];
  struct vl_proc_sample *procs[MAX_GPUS]; /* PROCS_CAP each, or NULL */
  unsigned n_procs[MAX_GPUS];
  /* watch's extra readings (vl_nvml_extra) */
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned *);
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned *);
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
  char pci[MAX_GPUS][32];
};

#define PROCS_CAP 1024u
#define PROCS_MAX_AGE_NS 100000000ull

static void *sym(void *lib, const char *name) { return dlsym(lib, name); }

static const char *nvml_err(const struct vl_nvml *n, nvmlReturn_t r) {
  const char *s = n->error_string ? n->error_string(r) : NULL;
  return s ? s : "unknown NVML error";
}

vl_status vl_nvml_open(struct vl_nvml **out, struct vl_err *err) {
  *out = NULL;
  const char *path = getenv("VRAMLEDGER_NVML_LIB");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return vl__fail(err, VL_ENOTFOUND,
                    "NVML ('%s') is not available: no NVIDIA driver on this machine (%s)", path,
                    dlerror());
  struct vl_nvml *n = vl_calloc(1, sizeof *n);
  if (!n) {
    dlclose(lib);
    return vl__fail(err, VL_ENOMEM, "out of memory");
  }
  n->lib = lib;
  nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))sym(lib, "nvmlInit_v2");
  if (!init) init = (nvmlReturn_t(*)(void))sym(lib, "nvmlInit");
  nvmlReturn_t (*count)(unsigned *) =
      (nvmlReturn_t(*)(unsigned *))sym(lib, "nvmlDeviceGetCount_v2");
  if (!count) count = (nvmlReturn_t(*)(unsigned *))sym(lib, "nvmlDeviceGetCount");
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *) =
      (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))sym(lib, "nvmlDeviceGetHandleByIndex_v2");
  if (!handle)
    handle = (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))sym(lib, "nvmlDeviceGetHandleByIndex");
  nvmlReturn_t (*driver)(char *, unsigned) =
      (nvmlReturn_t(*)(char *, unsigned))sym(lib, "nvmlSystemGetDriverVersion");
  *(void **)&n->shutdown = sym(lib, "nvmlShutdown");
  *(void **)&n->error_string = sym(lib, "nvmlErrorString");
  *(void **)&n->get_name = sym(lib, "nvmlDeviceGetName");
  *(void **)&n->get_uuid = sym(lib, "nvmlDeviceGetUUID");
  *(void **)&n->mem_v2 = sym(lib, "nvmlDeviceGetMemoryInfo_v2");
  *(void **)&n->mem_v1 = sym(lib, "nvmlDeviceGetMemoryInfo");
  *(void **)&n->util = sym(lib, "nvmlDeviceGetUtilizationRates");
  *(void **)&n->procs_v3 = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  *(void **)&n->procs_v2 = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  *(void **)&n->procs_v1 = sym(lib, "nvmlDeviceGetComputeRunningProcesses");
  *(void **)&n->power = sym(lib, "nvmlDeviceGetPowerUsage");
  *(void **)&n->temp = sym(lib, "nvmlDeviceGetTemperature");
  *(void **)&n->clock = sym(lib, "nvmlDeviceGetClockInfo");
  *(void **)&n->energy = sym(lib, "nvmlDeviceGetTotalEnergyConsumption");
  if (!init || !count || !handle || (!n->mem_v2 && !n->mem_v1)) {
    vl_nvml_close(n);
    return vl__fail(err, VL_EIO, "'%s' lacks the NVML functions vramledger needs", path);
  }
  nvmlReturn_t r = init();
  if (r != NVML_SUCCESS) {
    vl__fail(err, VL_EIO, "NVML did not start: %s", nvml_err(n, r));
    n->shutdown = NULL; /* nothing to shut down */
    vl_nvml_close(n);
    return VL_EIO;
  }
  unsigned c = 0;
  if ((r = count(&c)) != NVML_SUCCESS) {
    vl__fail(err, VL_EIO, "NVML cannot count GPUs: %s", nvml_err(n, r));
    vl_nvml_close(n);
    return VL_EIO;
  }
  n->count = c > MAX_GPUS ? MAX_GPUS : c;
  for (unsigned i = 0; i < n->count; i++)
    if ((r = handle(i, &n->dev[i])) != NVML_SUCCESS) {
      vl__fail(err, VL_EIO, "NVML cannot open GPU %u: %s", i, nvml_err(n, r));
      vl_nvml_close(n);
      return VL_EIO;
    }
  if (!driver || driver(n->driver, sizeof n->driver) != NVML_SUCCESS) n->driver[0] = '\0';
  nvmlReturn_t (*cuda)(int *) =
      (nvmlReturn_t(*)(int *))sym(lib, "nvmlSystemGetCudaDriverVersion_v2");
  if (!cuda) cuda = (nvmlReturn_t(*)(int *))sym(lib, "nvmlSystemGetCudaDriverVersion");
  if (!cuda || cuda(&n->cuda_driver) != NVML_SUCCESS) n->cuda_driver = 0;
  for (unsigned i = 0; i < n->count; i++) { /* fixed for the device's life: read once */
    if (!n->get_name || n->get_name(n->dev[i], n->name[i], sizeof n->name[i]) != NVML_SUCCESS)
      n->name[i][0] = '\0';
    if (!n->get_uuid || n->get_uuid(n->dev[i], n->uuid[i], sizeof n->uuid[i]) != NVML_SUCCESS)
      n->uuid[i][0] = '\0';
    n->name[i][sizeof n->name[i] - 1] = n->uuid[i][sizeof n->uuid[i] - 1] = '\0';
  }
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo *) =
      (nvmlReturn_t(*)(nvmlDevice_t, nvmlPciInfo *))sym(lib, "nvmlDeviceGetPciInfo_v3");
  if (!pci) pci = (nvmlReturn_t(*)(nvmlDevice_t, nvmlPciInfo *))sym(lib, "nvmlDeviceGetPciInfo_v2");
  for (unsigned i = 0; i < n->count && pci; i++) {
    nvmlPciInfo p;
    memset(&p, 0, sizeof p);
    if (pci(n->dev[i], &p) == NVML_SUCCESS) {
      p.busId[sizeof p.busId - 1] = '\0';
      memcpy(n->pci[i], p.busId, sizeof n->pci[i]);
    }
  }
  *out = n;
  return VL_OK;
}

void vl_nvml_close(struct vl_nvml *n) {
  if (!n) return;
  for (unsigned i = 0; i < MAX_GPUS; i++)
    vl_free(n->procs[i]);
  if (n->shutdown) n->shutdown();
  if (n->lib) dlclose(n->lib);
  vl_free(n);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned vl_nvml_count(const struct vl_nvml *n) { return n ? n->count : 0; }
const char *vl_nvml_driver(const struct vl_nvml *n) { return n ? n->driver : ""; }
int vl_nvml_cuda_driver(const struct vl_nvml *n) { return n ? n->cuda_driver : 0; }

vl_status vl_nvml_sample(struct vl_nvml *n, unsigned index, struct vl_gpu_sample *s) {
  memset(s, 0, sizeof *s);
  if (index >= n->count) return VL_EINVAL;
  nvmlDevice_t d = n->dev[index];
  s->index = index;
  memcpy(s->name, n->name[index], sizeof s->name);
  memcpy(s->uuid, n->uuid[index], sizeof s->uuid);
  nvmlReturn_t r = -1;
  if (n->mem_v2) {
    nvmlMemory_v2 m = {.version = NVML_MEMORY_V2};
    if ((r = n->mem_v2(d, &m)) == NVML_SUCCESS) {
      s->total_bytes = m.total;
      s->reserved_bytes = m.reserved;
      s->free_bytes = m.free;
      s->used_bytes = m.used;
    }
  }
  if (r != NVML_SUCCESS && n->mem_v1) {
    nvmlMemory_v1 m;
    if ((r = n->mem_v1(d, &m)) == NVML_SUCCESS) {
      s->total_bytes = m.total;
      s->free_bytes = m.free;
      s->used_bytes = m.used;
    }
  }
  if (r != NVML_SUCCESS) return VL_EIO;
  n->used_now[index] = s->used_bytes;
  /* NVML averages utilisation over 1/6 s to 1 s: reading it more often
   * than every 100 ms only costs ioctls (measured: the sampler at 100 Hz) */
  uint64_t now = mono_ns();
  if (!n->util_ns[index] || now - n->util_ns[index] >= 100000000ull) {
    nvmlUtilization u;
    if (n->util && n->util(d, &u) == NVML_SUCCESS) {
      n->util_gpu[index] = u.gpu;
      n->util_mem[index] = u.memory;
    } else {
      n->util_gpu[index] = n->util_mem[index] = UINT32_MAX;
    }
    n->util_ns[index] = now;
  }
  s->util_gpu_pct = n->util_gpu[index];
  s->util_mem_pct = n->util_mem[index];
  return VL_OK;
}

vl_status vl_nvml_extra(struct vl_nvml *n, unsigned index, struct vl_gpu_extra *e) {
  memset(e, 0xff, sizeof *e);
  e->pci_bus_id[0] = '\0';
  if (index >= n->count) return VL_EINVAL;
  nvmlDevice_t d = n->dev[index];
  memcpy(e->pci_bus_id, n->pci[index], sizeof e->pci_bus_id);
  unsigned v;
  unsigned long long mj;
  if (n->power && n->power(d, &v) == NVML_SUCCESS) e->power_mw = v;
  if (n->temp && n->temp(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) e->temp_c = v;
  if (n->clock && n->clock(d, NVML_CLOCK_SM, &v) == NVML_SUCCESS) e->sm_clock_mhz = v;
  if (n->clock && n->clock(d, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) e->mem_clock_mhz = v;
  if (n->energy && n->energy(d, &mj) == NVML_SUCCESS) e->energy_mj = mj;
  return VL_OK;
}

static vl_status read_processes(struct vl_nvml *n, unsigned index, struct vl_proc_sample *buf,
                                unsigned cap, unsigned *count);

/* The process list costs several driver calls; at 100 Hz it set the
 * sampler's CPU time. A process's memory cannot change without the GPU's
 * used memory changing, so the list is read again only when the used bytes
 * of the last vl_nvml_sample differ from those of the last reading, or the
 * reading is PROCS_MAX_AGE_NS old (a process that came and went with the
 * same bytes, or two that traded bytes, shows within that time). */
vl_status vl_nvml_processes(struct vl_nvml *n, unsigned index, struct vl_proc_sample *buf,
                            unsigned cap, unsigned *count) {
  *count = 0;
  if (index >= n->count) return VL_EINVAL;
  uint64_t now = mono_ns();
  if (!n->procs[index]) n->procs[index] = vl_calloc(PROCS_CAP, sizeof *n->procs[index]);
  struct vl_proc_sample *c = n->procs[index];
  if (!c) return read_processes(n, index, buf, cap, count);
  if (!n->procs_ns[index] || n->used_now[index] != n->procs_used[index] ||
      now - n->procs_ns[index] >= PROCS_MAX_AGE_NS) {
    unsigned k = 0;
    vl_status st = read_processes(n, index, c, PROCS_CAP, &k);
    if (st != VL_OK) {
      n->procs_ns[index] = 0;
      return st;
    }
    n->n_procs[index] = k;
    n->procs_used[index] = n->used_now[index];
    n->procs_ns[index] = now;
  }
  unsigned k = n->n_procs[index];
  for (unsigned i = 0; i < k && i < cap && i < PROCS_CAP; i++)
    buf[i] = c[i];
  *count = k;
  return VL_OK;
}

static vl_status read_processes(struct vl_nvml *n, unsigned index, struct vl_proc_sample *buf,
                                unsigned cap, unsigned *count) {
  *count = 0;
  enum { CAP = 1024 };
  static __thread nvmlProcessInfo_v2 v2[CAP]; /* per sampling thread; 24 KiB */
  unsigned c = CAP;
  nvmlReturn_t r = -1;
  if (n->procs_v3) r = n->procs_v3(n->dev[index], &c, v2);
  if (r != NVML_SUCCESS && n->procs_v2) {
    c = CAP;
    r = n->procs_v2(n->dev[index], &c, v2);
  }
  if (r == NVML_SUCCESS) {
    for (unsigned i = 0; i < c && i < cap; i++)
      buf[i] = (struct vl_proc_sample){v2[i].pid, index, v2[i].usedGpuMemory};
    *count = c;
    return VL_OK;
  }
  if (n->procs_v1) {
    static __thread nvmlProcessInfo_v1 v1[CAP];
    c = CAP;
    if ((r = n->procs_v1(n->dev[index], &c, v1)) == NVML_SUCCESS) {
      for (unsigned i = 0; i < c && i < cap; i++)
        buf[i] = (struct vl_proc_sample){v1[i].pid, index, v1[i].usedGpuMemory};
      *count = c;
      return VL_OK;
    }
  }
  return VL_EIO;
}
