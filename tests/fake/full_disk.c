/* A disk that fills up, for tests: an LD_PRELOAD object whose write(),
 * pwrite() and writev() to files under one directory fail with ENOSPC
 * once such a file has reached a size, and that has room again after a
 * number of refused writes or once a file exists. Works where mounting a
 * small tmpfs is not allowed (a CI container), and is exact: it says what
 * it refused.
 *   FAULT_FULL_DIR=DIR     the files under DIR (by /proc/self/fd) are on it
 *   FAULT_FULL_AT=BYTES    full from the first write that would take a file
 *                          there past BYTES on, for writes of any size
 *   FAULT_FULL_REFUSE=K    room again after K refused writes (per process;
 *                          unset or 0: never)
 *   FAULT_FULL_ROOM=FILE   room again once FILE exists
 *   FAULT_FULL_PARTIAL=1   the first write that finds the disk full (in a
 *                          process) writes half of itself (a short write,
 *                          as a disk with a little room left does) instead
 *                          of failing
 *   FAULT_FULL_EXE=NAME    only in processes whose executable's base name
 *                          is NAME
 *   FAULT_FULL_FALLOCATE=BYTES  posix_fallocate() of a file there fails
 *                          with ENOSPC past BYTES (a disk with that much
 *                          room; writes keep FAULT_FULL_AT's rule);
 *                          "none": with EOPNOTSUPP, a file system without
 *                          fallocate. Said in the log (KIND fallocate,
 *                          WANTED the end asked for)
 *   FAULT_FULL_LOG=FILE    one line per short or refused write: "PID EXE
 *                          KIND WANTED WROTE LOST_BYTES SAMPLES_LOST" (EXE:
 *                          the executable's base name; KIND cut,
 *                          refused, rest: the rest of a cut write, gap: a
 *                          refused write that begins with a gap line, which
 *                          is left out of the rest; LOST_BYTES: the bytes
 *                          of the lines it did not write whole,
 *                          SAMPLES_LOST: the sample lines among them)
 * Nothing here writes to stdout or stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static long refused; /* writes refused in this process */
static bool was_cut; /* a write of this process was cut */
static bool is_full; /* the limit was met: full for every write until room */
static const char *last_buf;
static size_t last_rest; /* a cut write's bytes not written, at last_buf */

static write_fn real_write(void) {
  static write_fn f;
  if (!f) f = (write_fn)dlsym(RTLD_NEXT, "write");
  return f;
}

/* this process's executable's base name */
static const char *exe_name(void) {
  static char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "?";
  self[n] = '\0';
  const char *base = strrchr(self, '/');
  return base ? base + 1 : self;
}

static bool on_disk(int fd) {
  const char *dir = getenv("FAULT_FULL_DIR");
  if (!dir || !*dir) return false;
  const char *exe = getenv("FAULT_FULL_EXE");
  if (exe && *exe && strcmp(exe_name(), exe) != 0) return false;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  size_t k = strlen(dir);
  return strncmp(path, dir, k) == 0 && path[k] == '/';
}

static bool has_room(void) {
  const char *room = getenv("FAULT_FULL_ROOM");
  struct stat st;
  if (room && *room && stat(room, &st) == 0) return true;
  const char *k = getenv("FAULT_FULL_REFUSE");
  long most = k ? strtol(k, NULL, 10) : 0;
  return most > 0 && refused >= most;
}

static size_t count(const char *buf, size_t n, const char *what) {
  size_t c = 0, w = strlen(what);
  for (size_t i = 0; i + w <= n; i++)
    if (memcmp(buf + i, what, w) == 0) c++;
  return c;
}

/* what a write of buf[0, n) that wrote `wrote` bytes left out: the lines
 * not written whole */
static void say(const char *kind, const char *buf, size_t n, size_t wrote) {
  const char *log = getenv("FAULT_FULL_LOG");
  if (!log || !*log) return;
  size_t whole = 0; /* bytes up to the last newline written */
  for (size_t i = wrote; i > 0; i--)
    if (buf[i - 1] == '\n') {
      whole = i;
      break;
    }
  char line[4200];
  int len =
      snprintf(line, sizeof line, "%d %s %s %zu %zu %zu %zu\n", (int)getpid(), exe_name(), kind, n,
               wrote, n - whole, count(buf + whole, n - whole, "\"type\":\"sample\""));
  int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (real_write()(fd, line, (size_t)len) != len) {
    /* the test finds the log short */
  }
  close(fd);
}

/* How much of a write of n bytes to fd goes out: n, what fits, or -1
 * (ENOSPC), said in the log. */
static ssize_t allowed(int fd, const void *buf, size_t n) {
  if (n == 0 || !on_disk(fd) || has_room()) return (ssize_t)n;
  if (!is_full) {
    const char *at = getenv("FAULT_FULL_AT");
    struct stat st;
    if (!at || fstat(fd, &st) != 0) return (ssize_t)n;
    if (st.st_size + (off_t)n <= (off_t)strtoll(at, NULL, 10)) return (ssize_t)n;
    is_full = true;
  }
  const char *p = buf;
  const char *partial = getenv("FAULT_FULL_PARTIAL");
  if (partial && *partial == '1' && !was_cut) {
    size_t fits = n / 2 ? n / 2 : 1;
    was_cut = true;
    say("cut", p, n, fits);
    last_buf = p + fits;
    last_rest = n - fits;
    return (ssize_t)fits;
  }
  refused++;
  const char *kind = "refused";
  if (p == last_buf && n == last_rest)
    kind = "rest";
  else if (count(p, n < 16 ? n : 16, "{\"type\":\"gap\"") ||
           (n > 1 && p[0] == '\n' && count(p + 1, n - 1 < 16 ? n - 1 : 16, "{\"type\":\"gap\"")))
    kind = "gap";
  size_t skip = 0; /* a gap line's write: the lines after it are what it loses */
  if (strcmp(kind, "gap") == 0) {
    const char *nl = memchr(p + (p[0] == '\n'), '\n', n - (p[0] == '\n'));
    skip = nl ? (size_t)(nl + 1 - p) : n;
  }
  say(kind, p + skip, n - skip, 0);
  last_buf = NULL;
  last_rest = 0;
  errno = ENOSPC;
  return -1;
}

ssize_t write(int fd, const void *buf, size_t n) {
  ssize_t a = allowed(fd, buf, n);
  if (a < 0) return -1;
  return real_write()(fd, buf, (size_t)a);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  static pwrite_fn f;
  if (!f) f = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
  ssize_t a = allowed(fd, buf, n);
  if (a < 0) return -1;
  return f(fd, buf, (size_t)a, off);
}

int posix_fallocate(int fd, off_t off, off_t len) {
  typedef int (*fallocate_fn)(int, off_t, off_t);
  static fallocate_fn f;
  if (!f) f = (fallocate_fn)dlsym(RTLD_NEXT, "posix_fallocate");
  const char *room = getenv("FAULT_FULL_FALLOCATE");
  if (!room || !*room || !on_disk(fd)) return f(fd, off, len);
  int e = strcmp(room, "none") == 0                    ? EOPNOTSUPP
          : off + len > (off_t)strtoll(room, NULL, 10) ? ENOSPC
                                                       : 0;
  if (e == 0) return f(fd, off, len);
  const char *log = getenv("FAULT_FULL_LOG");
  int lfd = log && *log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
  if (lfd >= 0) {
    char line[256];
    int n = snprintf(line, sizeof line, "%d %s fallocate %lld 0 0 0\n", (int)getpid(), exe_name(),
                     (long long)(off + len));
    if (real_write()(lfd, line, (size_t)n) != n) {
      /* the test finds the log short */
    }
    close(lfd);
  }
  return e;
}

/* writev as one write of its buffers joined (what lands is the same) */
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
  size_t n = 0;
  for (int i = 0; i < cnt; i++)
    n += iov[i].iov_len;
  char *buf = malloc(n ? n : 1);
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  size_t at = 0;
  for (int i = 0; i < cnt; i++) {
    memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
  ssize_t w = write(fd, buf, n);
  free(buf);
  return w;
}
