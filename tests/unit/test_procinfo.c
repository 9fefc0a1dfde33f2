/* lib/measure/procinfo.c: a process's container and pod from the lines of
 * its /proc/PID/cgroup, as the runtimes write them (cgroup v1: a line per
 * hierarchy; v2: "0::PATH"), its command from its cmdline, and the reading
 * of both from a procfs folder. */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "vramledger/procinfo.h"

#define ID "3f9b0e4d5c6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e"
#define UID "8d3e6a0c-1b2f-4c1e-9a3e-2f5d6c7b8a90"
#define UID_ "8d3e6a0c_1b2f_4c1e_9a3e_2f5d6c7b8a90"

static void parsed(const char *text, const char *container, const char *pod) {
  struct vl_proc_ident id;
  memset(&id, 'x', sizeof id);
  bool found = vl_cgroup_parse(text, strlen(text), &id);
  assert_string_equal(id.container_id, container);
  assert_string_equal(id.pod_uid, pod);
  assert_int_equal(found, *container || *pod);
}

/* Docker 20+ on a cgroup v2 host (systemd driver), and Docker on a v1
 * host with the cgroupfs driver (CentOS 7's docker: every hierarchy) */
static void docker(void **state) {
  (void)state;
  parsed("0::/system.slice/docker-" ID ".scope\n", "docker://" ID, "");
  parsed("12:pids:/docker/" ID "\n11:memory:/docker/" ID "\n10:cpu,cpuacct:/docker/" ID
         "\n1:name=systemd:/docker/" ID "\n",
         "docker://" ID, "");
  /* dockerd itself is no container */
  parsed("0::/system.slice/docker.service\n", "", "");
}

/* Kubernetes: the kubelet's systemd driver on cgroup v2 with containerd;
 * its cgroupfs driver on v1 (the container's runtime not in the path);
 * systemd on v1 with dockershim; CRI-O in a Guaranteed pod */
static void kubernetes(void **state) {
  (void)state;
  parsed("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
         ".slice/cri-containerd-" ID ".scope\n",
         "containerd://" ID, UID);
  parsed("12:hugetlb:/kubepods/burstable/pod" UID "/" ID "\n11:memory:/kubepods/burstable/pod" UID
         "/" ID "\n",
         "containerd://" ID, UID);
  parsed("10:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
         ".slice/docker-" ID ".scope\n",
         "docker://" ID, UID);
  parsed("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" ID ".scope\n", "cri-o://" ID, UID);
  /* a pod's own slice, no container under it yet */
  parsed("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice\n", "",
         UID);
}

/* no container: a login session, the root of a cgroup namespace, Podman's
 * container, and near misses that are none */
static void none_and_near(void **state) {
  (void)state;
  parsed("0::/user.slice/user-1000.slice/session-2.scope\n", "", "");
  parsed("0::/\n", "", "");
  parsed("", "", "");
  parsed("0::/machine.slice/libpod-" ID ".scope/container\n", "podman://" ID, "");
  /* 63 hex digits; a bare id that is under nothing of a runtime's */
  parsed("0::/system.slice/docker-"
         "3f9b0e4d5c6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
         ".scope\n",
         "", "");
  parsed("0::/some/" ID "\n", "", "");
  /* a uid that is not one */
  parsed("0::/kubepods/burstable/podnot-a-uid/" ID "\n", "", "");
  /* no newline at the end, a line without colons */
  parsed("garbage\n0::/system.slice/docker-" ID ".scope", "docker://" ID, "");
}

static void commands(void **state) {
  (void)state;
  char out[64];
  static const char py[] = "/usr/bin/python3\0train.py\0--lr\0";
  assert_true(vl_cmdline_command(py, sizeof py - 1, out, sizeof out));
  assert_string_equal(out, "python3");
  assert_true(vl_cmdline_command("torchrun", 8, out, sizeof out));
  assert_string_equal(out, "torchrun");
  assert_false(vl_cmdline_command("\0x", 2, out, sizeof out)); /* argv[0] empty */
  assert_string_equal(out, "");
  char small[4];
  assert_true(vl_cmdline_command("/bin/python3", 12, small, sizeof small));
  assert_string_equal(small, "pyt");
}

static void put(const char *dir, const char *name, const char *text, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(text, 1, len, f);
  fclose(f);
}

/* a procfs folder: cmdline first, comm when argv[0] is empty, a process
 * that is gone */
static void read_procfs(void **state) {
  (void)state;
  char root[] = "/tmp/vl-procfs-XXXXXX", dir[600];
  assert_non_null(mkdtemp(root));
  snprintf(dir, sizeof dir, "%s/4242", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  put(dir, "cmdline", "/opt/venv/bin/python\0-m\0x\0", 26);
  put(dir, "comm", "pt_main_thread\n", 15);
  const char cg[] = "0::/system.slice/docker-" ID ".scope\n";
  put(dir, "cgroup", cg, sizeof cg - 1);
  struct vl_proc_ident id;
  vl_proc_ident_read(root, 4242, &id);
  assert_string_equal(id.command, "python");
  assert_string_equal(id.container_id, "docker://" ID);
  assert_string_equal(id.pod_uid, "");
  put(dir, "cmdline", "", 0); /* a kernel thread, or a zombie */
  vl_proc_ident_read(root, 4242, &id);
  assert_string_equal(id.command, "pt_main_thread");
  vl_proc_ident_read(root, 4243, &id);
  assert_string_equal(id.command, "");
  assert_string_equal(id.container_id, "");
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(docker), cmocka_unit_test(kubernetes),
                                     cmocka_unit_test(none_and_near), cmocka_unit_test(commands),
                                     cmocka_unit_test(read_procfs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
