/* vramledger: who a GPU process is, for watch's labels: its command and,
 * from its cgroup, the container and Kubernetes pod it runs in.
 *
 * A process's cgroup path names its container wherever a runtime made one
 * (cgroup(7), /proc/PID/cgroup: "HIERARCHY:CONTROLLERS:PATH" a line; v2 has
 * the one line "0::PATH"). The runtimes' spellings read here:
 *   Docker, systemd driver     .../docker-<64 hex>.scope
 *   Docker, cgroupfs driver    /docker/<64 hex>
 *   containerd (CRI), systemd  .../cri-containerd-<64 hex>.scope
 *   CRI-O, systemd             .../crio-<64 hex>.scope
 *   Podman                     .../libpod-<64 hex>.scope
 *   kubelet, systemd driver    .../kubepods-burstable-pod<uid, '_' for '-'>.slice/...
 *   kubelet, cgroupfs driver   /kubepods/burstable/pod<uid>/<64 hex>
 * The container id is written as Kubernetes writes a container's
 * containerID (docker://, containerd://, cri-o://; the pod status of
 * k8s.io/api core/v1 ContainerStatus), so that a dashboard joins it with
 * kube-state-metrics' kube_pod_container_info{container_id}; the pod's uid
 * as kube_pod_info{uid} has it. */
#ifndef VRAMLEDGER_PROCINFO_H
#define VRAMLEDGER_PROCINFO_H
#include <stdbool.h>
#include <stddef.h>

struct vl_proc_ident {
  char command[64];       /* argv[0]'s last path element, else comm; "" unknown */
  char container_id[112]; /* "containerd://<64 hex>"; "" none found */
  char pod_uid[40];       /* "8d3e6a0c-1b2f-4c1e-9a3e-2f5d6c7b8a90"; "" none found */
};

/*! Read the container and the pod from the text of a /proc/PID/cgroup
 * (len bytes, not NUL-ended; any number of lines, v1 or v2) into
 * id->container_id and id->pod_uid, each left "" where no line names one.
 * Pure. @return true when either was found. */
bool vl_cgroup_parse(const char *text, size_t len, struct vl_proc_ident *id);

/*! The command of a /proc/PID/cmdline (len bytes, arguments NUL-separated):
 * argv[0] after its last '/', into out (cap bytes, cut to fit). Pure.
 * @return false (out "") when argv[0] is empty. */
bool vl_cmdline_command(const char *cmdline, size_t len, char *out, size_t cap);

/*! Fill *id for process pid from procfs (a mount of proc(5): "/proc", or
 * a host's seen from a container, such as "/host/proc"): its cmdline
 * (else its comm) and its cgroup. A process that is gone, or one this
 * user may not read, leaves the fields it could not read "". */
void vl_proc_ident_read(const char *procfs, unsigned pid, struct vl_proc_ident *id);

#endif
