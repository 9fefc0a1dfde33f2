/* vramledger: the system layer, read through NVML.
 *
 * libnvidia-ml.so.1 is loaded with dlopen, never linked: the tool runs (and
 * every command that needs no GPU works) on machines without a driver.
 * $VRAMLEDGER_NVML_LIB names another library (tests use a fake one). */
#ifndef VRAMLEDGER_NVML_H
#define VRAMLEDGER_NVML_H
#include <stdint.h>

#include "vramledger/status.h"

struct vl_nvml; /* opaque: the loaded library and its device handles */

struct vl_gpu_sample {
  unsigned index; /* NVML index */
  char name[96];
  char uuid[96];
  uint64_t total_bytes;
  uint64_t reserved_bytes; /* driver/firmware reserve (memory info v2; 0 with v1) */
  uint64_t used_bytes;
  uint64_t free_bytes;
  unsigned util_gpu_pct; /* UINT32_MAX when not available */
  unsigned util_mem_pct;
};

struct vl_proc_sample {
  unsigned pid;
  unsigned gpu;        /* NVML index */
  uint64_t used_bytes; /* UINT64_MAX when NVML may not tell (containers) */
};

/*! Load NVML and initialise it. @return VL_OK; VL_ENOTFOUND when the
 * library is missing (message says so); VL_EIO when it fails to start (no
 * GPU, driver mismatch; message has NVML's words). Free with vl_nvml_close. */
vl_status vl_nvml_open(struct vl_nvml **out, struct vl_err *err) VL_MUST_USE;
void vl_nvml_close(struct vl_nvml *n); /* accepts NULL */

/*! Number of GPUs NVML sees. */
unsigned vl_nvml_count(const struct vl_nvml *n);
/*! Driver version string ("580.159.04"); "" when unknown. */
const char *vl_nvml_driver(const struct vl_nvml *n);
/*! CUDA version the driver supports (13000 = 13.0); 0 when unknown. */
int vl_nvml_cuda_driver(const struct vl_nvml *n);

/*! One GPU's memory and utilisation now; name and UUID are read once,
 * when the library opens, and copied (no NVML call for them per sample). */
vl_status vl_nvml_sample(struct vl_nvml *n, unsigned index, struct vl_gpu_sample *s) VL_MUST_USE;

/* What dcgm-exporter shows beside memory (watch --metric-names dcgm), read
 * only by watch: vl_nvml_sample stays the few calls `run` pays for at every
 * reading. UINT32_MAX / UINT64_MAX: NVML did not say. */
struct vl_gpu_extra {
  char pci_bus_id[32];    /* nvmlPciInfo_t busId, "00000000:07:00.0"; "" unknown */
  unsigned power_mw;      /* nvmlDeviceGetPowerUsage, milliwatts */
  unsigned temp_c;        /* nvmlDeviceGetTemperature, NVML_TEMPERATURE_GPU, Celsius */
  unsigned sm_clock_mhz;  /* nvmlDeviceGetClockInfo, NVML_CLOCK_SM */
  unsigned mem_clock_mhz; /* nvmlDeviceGetClockInfo, NVML_CLOCK_MEM */
  uint64_t energy_mj;     /* nvmlDeviceGetTotalEnergyConsumption, millijoules since the
                             driver loaded */
};

/*! One GPU's PCI bus id (read once, when the library opens), power, GPU
 * temperature, clocks and energy now, each NVML function looked up by
 * name (a driver without one leaves its field unknown).
 * @return VL_OK, VL_EINVAL (no such GPU). */
vl_status vl_nvml_extra(struct vl_nvml *n, unsigned index, struct vl_gpu_extra *e) VL_MUST_USE;

/*! Compute processes on one GPU (running processes v3 -> v2 -> v1).
 * Writes at most cap entries; *count is how many there were. The list is
 * read from NVML again only when the GPU's used memory (from the last
 * vl_nvml_sample of that GPU) moved or the last reading is 100 ms old;
 * otherwise the last reading is returned (no NVML call).
 * @return VL_OK, VL_EIO. */
vl_status vl_nvml_processes(struct vl_nvml *n, unsigned index, struct vl_proc_sample *buf,
                            unsigned cap, unsigned *count) VL_MUST_USE;

#endif
