/* A process's command, container and pod: see vramledger/procinfo.h. */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vramledger/procinfo.h"

/* n hex digits at s, none more after them */
static bool hex_run(const char *s, const char *end, size_t n) {
  if ((size_t)(end - s) < n) return false;
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return s + n == end || !isxdigit((unsigned char)s[n]);
}

/* The container runtimes' path elements: a prefix, a 64-hex id, a suffix
 * (see the header). The kubelet's cgroupfs driver names a container by its
 * bare id under the pod's folder; Docker's cgroupfs driver under /docker. */
static const struct runtime {
  const char *prefix, *suffix, *scheme;
} runtimes[] = {
    {"docker-", ".scope", "docker://"},
    {"cri-containerd-", ".scope", "containerd://"},
    {"crio-", ".scope", "cri-o://"},
    {"libpod-", ".scope", "podman://"},
};

/* The pod uid of one path element: "pod<uid>" (cgroupfs) or
 * "kubepods[-<qos>]-pod<uid with _>.slice" (systemd). */
static bool pod_of(const char *s, const char *end, struct vl_proc_ident *id) {
  const char *p = NULL;
  size_t n = (size_t)(end - s);
  if (n >= 6 + 36 && !memcmp(end - 6, ".slice", 6) && !memcmp(s, "kubepods", 8)) {
    for (const char *c = s; c + 4 <= end - 6; c++)
      if (!memcmp(c, "-pod", 4)) p = c + 4;
    end -= 6;
  } else if (n == 3 + 36 && !memcmp(s, "pod", 3)) {
    p = s + 3;
  }
  if (!p || end - p != 36) return false;
  char uid[37];
  for (int i = 0; i < 36; i++) {
    char c = p[i] == '_' ? '-' : p[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !isxdigit((unsigned char)c)) return false;
    uid[i] = c;
  }
  uid[36] = '\0';
  snprintf(id->pod_uid, sizeof id->pod_uid, "%s", uid);
  return true;
}

/* The container of one path element [s, end) (parent: the element before
 * it), into id. @return whether it named one. */
static bool container_of(const char *s, const char *end, const char *parent, size_t parent_len,
                         struct vl_proc_ident *id) {
  size_t n = (size_t)(end - s);
  for (size_t k = 0; k < sizeof runtimes / sizeof *runtimes; k++) {
    const struct runtime *r = &runtimes[k];
    size_t p = strlen(r->prefix), q = strlen(r->suffix);
    if (n == p + 64 + q && !memcmp(s, r->prefix, p) && !memcmp(end - q, r->suffix, q) &&
        hex_run(s + p, end - q, 64)) {
      snprintf(id->container_id, sizeof id->container_id, "%s%.64s", r->scheme, s + p);
      return true;
    }
  }
  if (n != 64 || !hex_run(s, end, 64) || !parent) return false;
  /* a bare id: Docker's /docker/<id>, or a pod's container (its runtime is
   * not in the path: containerd is Kubernetes' default since 1.24) */
  bool docker = parent_len == 6 && !memcmp(parent, "docker", 6);
  struct vl_proc_ident scratch;
  bool pod = pod_of(parent, parent + parent_len, &scratch);
  if (!docker && !pod) return false;
  snprintf(id->container_id, sizeof id->container_id, "%s%.64s",
           docker ? "docker://" : "containerd://", s);
  return true;
}

bool vl_cgroup_parse(const char *text, size_t len, struct vl_proc_ident *id) {
  id->container_id[0] = id->pod_uid[0] = '\0';
  const char *end = text + len;
  for (const char *line = text; line < end;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    /* the path: after the second ':' */
    const char *c1 = memchr(line, ':', (size_t)(eol - line)), *c2 = NULL;
    if (c1 && c1 + 1 < eol) c2 = memchr(c1 + 1, ':', (size_t)(eol - (c1 + 1)));
    const char *parent = NULL;
    size_t parent_len = 0;
    for (const char *s = c2 ? c2 + 1 : eol; s < eol;) {
      while (s < eol && *s == '/')
        s++;
      const char *e = s;
      while (e < eol && *e != '/')
        e++;
      if (e > s) {
        if (!id->pod_uid[0]) pod_of(s, e, id);
        if (!id->container_id[0]) container_of(s, e, parent, parent_len, id);
        parent = s;
        parent_len = (size_t)(e - s);
      }
      s = e;
    }
    if (id->container_id[0] && id->pod_uid[0]) break;
    line = eol + 1;
  }
  return id->container_id[0] || id->pod_uid[0];
}

bool vl_cmdline_command(const char *cmdline, size_t len, char *out, size_t cap) {
  size_t n = strnlen(cmdline, len);
  const char *base = cmdline;
  for (size_t i = 0; i < n; i++)
    if (cmdline[i] == '/' && i + 1 < n) base = cmdline + i + 1;
  size_t b = n - (size_t)(base - cmdline);
  if (cap) snprintf(out, cap, "%.*s", (int)b, base);
  return b > 0;
}

/* up to cap - 1 bytes of a file, NUL-ended; @return how many */
static size_t slurp(const char *procfs, unsigned pid, const char *what, char *buf, size_t cap) {
  char path[4200];
  snprintf(path, sizeof path, "%.4000s/%u/%s", procfs, pid, what);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t n = 0;
  if (fd >= 0) {
    for (ssize_t r; n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0;)
      n += (size_t)r;
    close(fd);
  }
  buf[n] = '\0';
  return n;
}

void vl_proc_ident_read(const char *procfs, unsigned pid, struct vl_proc_ident *id) {
  char buf[4096];
  size_t n = slurp(procfs, pid, "cmdline", buf, sizeof buf);
  if (!vl_cmdline_command(buf, n, id->command, sizeof id->command)) {
    n = slurp(procfs, pid, "comm", buf, sizeof buf);
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(id->command, sizeof id->command, "%.63s", buf);
  }
  n = slurp(procfs, pid, "cgroup", buf, sizeof buf);
  vl_cgroup_parse(buf, n, id);
}
