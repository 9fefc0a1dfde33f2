/* lib/render/watch.c: watch's CSV rows, JSON Lines and Prometheus text
 * (vramledger's names and dcgm-exporter's) from one tick's view. */
#include "testutil.h"
#include "vramledger/nvml.h"
#include "vramledger/procinfo.h"
#include "vramledger/render.h"

/* one tick: GPU 0 read with two processes, GPU 1 lost (not up) */
static const struct vl_gpu_sample g0 = {0, "NVIDIA H100 80GB HBM3", "GPU-aaaa",     85899345920ull,
                                        0, 42949672960ull,          42949672960ull, 73,
                                        31};
static const struct vl_gpu_sample g1 = {
    1, "NVIDIA H100 80GB HBM3", "GPU-bbbb", 85899345920ull, 0, 0, 0, UINT32_MAX, UINT32_MAX};
static const struct vl_proc_sample p0[] = {
    {4242, 0, 30000000000ull}, {4343, 0, UINT64_MAX}, {4444, 0, 1048576}};
static const struct vl_proc_ident id0[] = {
    {"python", "containerd://0123abcd", "8d3e6a0c-pod"}, {"bash", "", ""}, {"a\"b\\c\nd", "", ""}};
static const struct vl_gpu_extra x0 = {"00000000:07:00.0", 251000, 41, 1980, 2619, 1000000};

static char *render(enum vl_watch_format fmt, bool header, unsigned unread) {
  struct vl_watch_gpu gpus[2] = {
      {&g0, p0, 3, true, id0, &x0, 45000000000ull},
      {&g1, NULL, 0, false, NULL, NULL, 0},
  };
  struct vl_watch_peak peaks[] = {{0, "GPU-aaaa", 4242, &id0[0], 31000000000ull}};
  struct vl_watch_view v = {1764000000123ull, gpus, 2, "node-1", unread, "0.1.0", peaks, 1};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  if (header) assert_int_equal(vl_render_watch_csv_header(f), 0);
  assert_int_equal(vl_render_watch(f, fmt, &v), 0);
  fclose(f);
  return buf;
}

static void has(const char *text, const char *line) {
  if (!strstr(text, line)) fail_msg("missing:\n%s\nin:\n%s", line, text);
}

/* a row per GPU NVML answered for, then one per process; a byte count
 * NVML did not give is an empty field, never 0; a lost GPU has no row */
static void csv_rows(void **state) {
  (void)state;
  char *t = render(VL_WATCH_CSV, true, 0);
  assert_string_equal(
      t, "t_unix_ms,gpu,name,uuid,total_bytes,used_bytes,util_gpu_pct,pid,process_bytes\n"
         "1764000000123,0,\"NVIDIA H100 80GB HBM3\",\"GPU-aaaa\",85899345920,42949672960,73,,\n"
         "1764000000123,0,\"NVIDIA H100 80GB HBM3\",\"GPU-aaaa\",85899345920,42949672960,73,"
         "4242,30000000000\n"
         "1764000000123,0,\"NVIDIA H100 80GB HBM3\",\"GPU-aaaa\",85899345920,42949672960,73,4343,\n"
         "1764000000123,0,\"NVIDIA H100 80GB HBM3\",\"GPU-aaaa\",85899345920,42949672960,73,"
         "4444,1048576\n");
  free(t);
}

/* one JSON line a tick; an unknown process size is left out */
static void jsonl(void **state) {
  (void)state;
  char *t = render(VL_WATCH_JSONL, false, 0);
  assert_string_equal(t, "{\"t_unix_ms\":1764000000123,\"host\":\"node-1\",\"gpus\":[{\"index\":0,"
                         "\"name\":\"NVIDIA H100 80GB HBM3\",\"uuid\":\"GPU-aaaa\",\"total_bytes\":"
                         "85899345920,\"used_bytes\":42949672960,\"util_gpu_pct\":73,\"procs\":[{"
                         "\"pid\":4242,\"bytes\":30000000000},{\"pid\":4343},{\"pid\":4444,"
                         "\"bytes\":1048576}]}]}\n");
  free(t);
}

/* vramledger's names: up 0 while a GPU was not read, each GPU's up, bytes
 * as bytes, utilisation as a ratio, a process's labels escaped (", \ and a
 * newline, exposition format 0.0.4), one of unknown size left out */
static void prometheus(void **state) {
  (void)state;
  char *t = render(VL_WATCH_PROMETHEUS, false, 1);
  has(t, "\nvramledger_up 0\n");
  has(t, "vramledger_build_info{version=\"0.1.0\"} 1\n");
  has(t, "vramledger_gpu_up{gpu=\"0\",uuid=\"GPU-aaaa\",name=\"NVIDIA H100 80GB HBM3\"} 1\n");
  has(t, "vramledger_gpu_up{gpu=\"1\",uuid=\"GPU-bbbb\",name=\"NVIDIA H100 80GB HBM3\"} 0\n");
  has(t, "vramledger_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-aaaa\",name=\"NVIDIA H100 80GB "
         "HBM3\"} 42949672960\n");
  has(t, "vramledger_gpu_memory_used_max_bytes{gpu=\"0\",uuid=\"GPU-aaaa\",name=\"NVIDIA H100 "
         "80GB HBM3\"} 45000000000\n");
  has(t, "vramledger_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-aaaa\",name=\"NVIDIA H100 80GB "
         "HBM3\"} 0.73\n");
  has(t, "vramledger_process_memory_used_bytes{gpu=\"0\",uuid=\"GPU-aaaa\",pid=\"4242\","
         "command=\"python\",container_id=\"containerd://0123abcd\",pod_uid=\"8d3e6a0c-pod\"} "
         "30000000000\n");
  has(t, "pid=\"4444\",command=\"a\\\"b\\\\c\\nd\"} 1048576\n");
  assert_null(strstr(t, "pid=\"4343\"} "));
  assert_null(strstr(t, "pid=\"4343\",")); /* no size: no sample */
  has(t, "vramledger_process_memory_used_max_bytes{gpu=\"0\",uuid=\"GPU-aaaa\",pid=\"4242\","
         "command=\"python\",container_id=\"containerd://0123abcd\",pod_uid=\"8d3e6a0c-pod\"} "
         "31000000000\n");
  /* no GPU of this tick's GPU 1 but its up */
  assert_null(strstr(t, "vramledger_gpu_memory_used_bytes{gpu=\"1\""));
  free(t);
  t = render(VL_WATCH_PROMETHEUS, false, 0);
  has(t, "\nvramledger_up 1\n");
  free(t);
}

/* dcgm-exporter's names, units (MiB, %, W, mJ) and labels */
static void prometheus_dcgm(void **state) {
  (void)state;
  char *t = render(VL_WATCH_PROMETHEUS_DCGM, false, 0);
  const char *l = "{gpu=\"0\",UUID=\"GPU-aaaa\",pci_bus_id=\"00000000:07:00.0\",device=\"nvidia0\","
                  "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} ";
  char line[512];
  static const struct {
    const char *name, *value;
  } want[] = {
      {"DCGM_FI_DEV_FB_TOTAL", "81920"},
      {"DCGM_FI_DEV_FB_USED", "40960"},
      {"DCGM_FI_DEV_FB_FREE", "40960"},
      {"DCGM_FI_DEV_GPU_UTIL", "73"},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "31"},
      {"DCGM_FI_DEV_SM_CLOCK", "1980"},
      {"DCGM_FI_DEV_MEM_CLOCK", "2619"},
      {"DCGM_FI_DEV_GPU_TEMP", "41"},
      {"DCGM_FI_DEV_POWER_USAGE", "251.000"},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "1000000"},
      {"vramledger_gpu_memory_used_max_bytes", "45000000000"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    snprintf(line, sizeof line, "\n%s%s%s\n", want[i].name, l, want[i].value);
    has(t, line);
  }
  has(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n");
  has(t, "vramledger_gpu_up{gpu=\"1\",UUID=\"GPU-bbbb\",device=\"nvidia1\",modelName=\"NVIDIA H100 "
         "80GB HBM3\",Hostname=\"node-1\"} 0\n");
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(csv_rows),
      cmocka_unit_test(jsonl),
      cmocka_unit_test(prometheus),
      cmocka_unit_test(prometheus_dcgm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
