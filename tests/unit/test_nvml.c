/* lib/measure/nvml.c through the fake NVML (tests/fake/fake_nvml.c, loaded
 * by the same dlopen path as libnvidia-ml.so.1 through
 * $VRAMLEDGER_NVML_LIB): what each call reads, the fallbacks of an old
 * driver, a lost GPU, a missing library and a driver that does not start. */
#include <unistd.h>

#include "testutil.h"
#include "vramledger/nvml.h"

#define FAKE_TOTAL 141000000000ull /* fake_nvml.c: TOTAL, BASE */
#define FAKE_BASE (1ull << 30)

static char procs_file[256];

static int setup(void **state) {
  (void)state;
  setenv("VRAMLEDGER_NVML_LIB", VL_FAKE_NVML, 1);
  snprintf(procs_file, sizeof procs_file, "/tmp/vl_test_nvml.%d.procs", (int)getpid());
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(procs_file);
  return 0;
}

static void env_clean(void) {
  unsetenv("FAKE_NVML_GPUS");
  unsetenv("FAKE_NVML_OLD");
  unsetenv("FAKE_NVML_LOST");
  unsetenv("FAKE_NVML_PROCS");
  setenv("VRAMLEDGER_NVML_LIB", VL_FAKE_NVML, 1);
}

static struct vl_nvml *open_ok(void) {
  struct vl_nvml *n = NULL;
  struct vl_err err = {""};
  vl_status s = vl_nvml_open(&n, &err);
  if (s != VL_OK) fprintf(stderr, "vl_nvml_open: %s\n", err.msg);
  assert_int_equal(s, VL_OK);
  assert_non_null(n);
  return n;
}

static void write_procs(const char *text) {
  FILE *f = fopen(procs_file, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
  setenv("FAKE_NVML_PROCS", procs_file, 1);
}

/* memory info v2: the driver's reserve apart from used and free */
static void reads_each_gpu(void **state) {
  (void)state;
  env_clean();
  setenv("FAKE_NVML_GPUS", "2", 1);
  struct vl_nvml *n = open_ok();
  assert_int_equal(vl_nvml_count(n), 2);
  assert_string_equal(vl_nvml_driver(n), "999.99-fake");
  assert_int_equal(vl_nvml_cuda_driver(n), 13000);
  struct vl_gpu_sample s;
  assert_int_equal(vl_nvml_sample(n, 1, &s), VL_OK);
  assert_int_equal(s.index, 1);
  assert_string_equal(s.name, "Fake GPU 1");
  assert_string_equal(s.uuid, "GPU-fake-0001");
  assert_true(s.total_bytes == FAKE_TOTAL);
  assert_true(s.reserved_bytes == 512ull << 20);
  assert_true(s.used_bytes == FAKE_BASE);
  assert_true(s.free_bytes == FAKE_TOTAL - (512ull << 20) - FAKE_BASE);
  assert_int_equal(s.util_gpu_pct, 51);
  assert_int_equal(s.util_mem_pct, 20);
  /* no third GPU */
  assert_int_not_equal(vl_nvml_sample(n, 2, &s), VL_OK);
  vl_nvml_close(n);
}

/* an old driver: memory info v1 (no reserve) and the v1 process list */
static void old_driver_falls_back(void **state) {
  (void)state;
  env_clean();
  setenv("FAKE_NVML_OLD", "1", 1);
  write_procs("4242 3000000 0\n");
  struct vl_nvml *n = open_ok();
  struct vl_gpu_sample s;
  assert_int_equal(vl_nvml_sample(n, 0, &s), VL_OK);
  assert_true(s.reserved_bytes == 0);
  assert_true(s.used_bytes == FAKE_BASE + 3000000);
  assert_true(s.free_bytes == FAKE_TOTAL - FAKE_BASE - 3000000);
  struct vl_proc_sample p[4];
  unsigned count = 0;
  assert_int_equal(vl_nvml_processes(n, 0, p, 4, &count), VL_OK);
  assert_int_equal(count, 1);
  assert_int_equal(p[0].pid, 4242);
  assert_int_equal(p[0].gpu, 0);
  assert_true(p[0].used_bytes == 3000000);
  vl_nvml_close(n);
}

/* processes by GPU; more than the buffer holds: the count says how many */
static void processes_by_gpu(void **state) {
  (void)state;
  env_clean();
  setenv("FAKE_NVML_GPUS", "2", 1);
  write_procs("100 2000000 0\n101 1000000 0\n102 5000000 0\n200 7000000 1\n");
  struct vl_nvml *n = open_ok();
  struct vl_gpu_sample s;
  assert_int_equal(vl_nvml_sample(n, 1, &s), VL_OK);
  assert_true(s.used_bytes == FAKE_BASE + 7000000);
  struct vl_proc_sample p[2];
  unsigned count = 0;
  assert_int_equal(vl_nvml_processes(n, 1, p, 2, &count), VL_OK);
  assert_int_equal(count, 1);
  assert_int_equal(p[0].pid, 200);
  assert_int_equal(p[0].gpu, 1);
  assert_true(p[0].used_bytes == 7000000);
  assert_int_equal(vl_nvml_sample(n, 0, &s), VL_OK);
  count = 0;
  assert_int_equal(vl_nvml_processes(n, 0, p, 2, &count), VL_OK);
  assert_int_equal(count, 3); /* three there, two written */
  assert_int_equal(p[0].pid, 100);
  assert_int_equal(p[1].pid, 101);
  vl_nvml_close(n);
}

/* what watch shows beside memory (dcgm-exporter's fields) */
static void extra_fields(void **state) {
  (void)state;
  env_clean();
  setenv("FAKE_NVML_GPUS", "2", 1);
  struct vl_nvml *n = open_ok();
  struct vl_gpu_extra e;
  assert_int_equal(vl_nvml_extra(n, 1, &e), VL_OK);
  assert_string_equal(e.pci_bus_id, "00000000:01:00.0");
  assert_int_equal(e.power_mw, 251000);
  assert_int_equal(e.temp_c, 41);
  assert_int_equal(e.sm_clock_mhz, 1980);
  assert_int_equal(e.mem_clock_mhz, 2619);
  assert_true(e.energy_mj == 1000000);
  assert_int_equal(vl_nvml_extra(n, 5, &e), VL_EINVAL);
  vl_nvml_close(n);
}

/* a lost GPU fails its own readings only */
static void lost_gpu(void **state) {
  (void)state;
  env_clean();
  setenv("FAKE_NVML_GPUS", "2", 1);
  setenv("FAKE_NVML_LOST", "1", 1);
  struct vl_nvml *n = open_ok();
  struct vl_gpu_sample s;
  assert_int_equal(vl_nvml_sample(n, 0, &s), VL_OK);
  assert_int_not_equal(vl_nvml_sample(n, 1, &s), VL_OK);
  vl_nvml_close(n);
}

/* no library: VL_ENOTFOUND naming it; a driver that does not start:
 * VL_EIO with NVML's own words */
static void missing_and_failing(void **state) {
  (void)state;
  env_clean();
  setenv("VRAMLEDGER_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  struct vl_nvml *n = NULL;
  struct vl_err err = {""};
  assert_int_equal(vl_nvml_open(&n, &err), VL_ENOTFOUND);
  assert_null(n);
  assert_non_null(strstr(err.msg, "/nonexistent/libnvidia-ml.so.1"));
  env_clean();
  setenv("FAKE_NVML_GPUS", "0", 1);
  err.msg[0] = '\0';
  assert_int_equal(vl_nvml_open(&n, &err), VL_EIO);
  assert_null(n);
  assert_non_null(strstr(err.msg, "Driver Not Loaded (fake)"));
  vl_nvml_close(NULL); /* accepts NULL */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_each_gpu),   cmocka_unit_test(old_driver_falls_back),
      cmocka_unit_test(processes_by_gpu), cmocka_unit_test(extra_fields),
      cmocka_unit_test(lost_gpu),         cmocka_unit_test(missing_and_failing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
