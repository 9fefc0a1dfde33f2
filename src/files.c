#define _XOPEN_SOURCE 700 /* realpath, readlink, mkstemp, fsync */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cli.h"
#include "vramledger/alloc.h"

/* The most read of a file other than a run record (records are streamed):
 * far above any config, catalog, plan, commitment or CSV of points. */
#define MAX_FILE_MIB 64
#define MAX_FILE ((size_t)MAX_FILE_MIB << 20)
#define STR_(x) #x
#define STR(x) STR_(x)
static const char too_large[] = "larger than " STR(MAX_FILE_MIB) " MiB";

/* What a file that is not a regular one is, for the message; NULL for a
 * regular file, and for the pipe or terminal that is this process's stdin
 * (`... | vramledger fit --csv /dev/stdin`: given on purpose, with a
 * writer). A FIFO in the file system would block a reader until some
 * process opens it for writing, a device never ends: both are refused; so
 * is a file of /proc or /sys (stat calls it regular), which no config,
 * commitment or CSV is (a commitment naming /proc/self/environ as its
 * model's config would have check read the environment). */
static const char *not_regular(int fd, const struct stat *st) {
  struct stat in;
  struct statfs fs;
  if (S_ISREG(st->st_mode) && fstatfs(fd, &fs) == 0 &&
      (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC))
    return "it is a file of /proc or /sys, not a regular file"; /* stat says regular, size 0 */
  if (S_ISREG(st->st_mode)) return NULL;
  if (S_ISDIR(st->st_mode)) return "it is a directory";
  if (fstat(0, &in) == 0 && in.st_dev == st->st_dev && in.st_ino == st->st_ino) return NULL;
  return S_ISFIFO(st->st_mode)   ? "it is a FIFO, not a regular file"
         : S_ISCHR(st->st_mode)  ? "it is a character device, not a regular file"
         : S_ISBLK(st->st_mode)  ? "it is a block device, not a regular file"
         : S_ISSOCK(st->st_mode) ? "it is a socket, not a regular file"
                                 : "it is not a regular file";
}

/* path opened for reading without blocking on a FIFO (O_NONBLOCK, cleared
 * once fstat says what it is), refused unless regular (not_regular). -1
 * with why (a static string, or NULL for errno's). */
static int open_input(const char *path, struct stat *st, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  int fl = fcntl(fd, F_GETFL);
  if (fstat(fd, st) != 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
      (*why = not_regular(fd, st))) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int cli_check_input(const char *path) {
  struct stat st;
  const char *why;
  int fd = open_input(path, &st, &why);
  if (fd >= 0) close(fd);
  if (!why) return 0; /* a file that cannot be opened: its reader says why */
  cli_error("cannot read '%s': %s", path, why);
  return VL_EXIT_ERROR;
}

/* Read path whole; on failure NULL with why in *why (a static string, or
 * NULL for errno's). A file of MAX_FILE bytes is read; one byte more is
 * refused, before reading when fstat says its size. */
static char *read_whole(const char *path, size_t *len, const char **why) {
  struct stat st;
  int fd = open_input(path, &st, why);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 4096, n = 0;
  if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > MAX_FILE) {
    *why = too_large;
    goto fail;
  }
  if (!(buf = vl_malloc(cap))) goto oom;
  for (;;) {
    if (n + 1 >= cap) {
      if (cap > MAX_FILE) { /* n == MAX_FILE: the most, unless more follows (a pipe) */
        if (fgetc(f) == EOF) break;
        *why = too_large;
        goto fail;
      }
      size_t grown = cap * 2 > MAX_FILE + 1 ? MAX_FILE + 1 : cap * 2;
      char *nb = vl_realloc(buf, grown);
      if (!nb) goto oom;
      buf = nb;
      cap = grown;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) goto fail;
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
oom:
  *why = "out of memory";
fail:
  vl_free(buf);
  fclose(f);
  return NULL;
}

char *cli_read_file_quiet(const char *path, size_t *len) {
  const char *why;
  return read_whole(path, len, &why);
}

char *cli_read_file(const char *path, size_t *len) {
  const char *why;
  errno = 0;
  char *buf = read_whole(path, len, &why);
  if (!buf) cli_error("cannot read '%s': %s", path, why ? why : strerror(errno ? errno : EIO));
  if (!buf && why == too_large)
    cli_hint("vramledger reads at most %d MiB of a file other than a run record: check that "
             "'%s' is the file meant (a config, catalog, plan, commitment or CSV of points is far "
             "smaller), or cut it below the limit (an alloc.trace: trace a shorter run)",
             MAX_FILE_MIB, path);
  return buf;
}

/* Where vramledger's own files are (docs/install.md): the environment's
 * override, else beside the executable as `cmake --install` lays them out
 * (PREFIX/bin/vramledger: PREFIX/share/vramledger/{data,python},
 * PREFIX/lib/vramledger/), else, for an executable that is not installed
 * (no PREFIX/share/vramledger), the build tree's (compiled in). An
 * installed one never falls back on a build tree: a file missing there is
 * missing, and messages name the installed place. */
static const char *own_file(char *buf, size_t n, const char *env, const char *installed,
                            const char *built) {
  const char *e = getenv(env);
  if (e && *e) return e;
  char exe[PATH_MAX], real[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash = k > 0 ? (exe[k] = 0, strrchr(exe, '/')) : NULL;
  if (!slash) return built;
  *slash = 0; /* exe: the executable's directory */
  snprintf(buf, n, "%s/../share/vramledger", exe);
  bool is_installed = access(buf, R_OK) == 0;
  snprintf(buf, n, "%s/../%s", exe, installed);
  if (access(buf, R_OK) == 0 && realpath(buf, real)) snprintf(buf, n, "%s", real);
  if (is_installed || access(buf, R_OK) == 0) return buf;
  return built;
}

const char *cli_data_dir(void) {
  static char buf[PATH_MAX + 32];
  return own_file(buf, sizeof buf, "VRAMLEDGER_DATA", "share/vramledger/data", VL_DATA_DIR);
}

const char *cli_python_dir(void) {
  static char buf[PATH_MAX + 32];
  return own_file(buf, sizeof buf, "VRAMLEDGER_PYTHON_DIR", "share/vramledger/python",
                  VL_PYTHON_DIR);
}

const char *cli_preload_path(void) {
  static char buf[PATH_MAX + 48];
  return own_file(buf, sizeof buf, "VRAMLEDGER_PRELOAD", "lib/vramledger/libvramledger-preload.so",
                  VL_PRELOAD_PATH);
}

int cli_create_fd(const char *path, int flags, mode_t perm) {
  int fd = open(path, flags | O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, perm);
  if (fd >= 0) return fd;
  if (errno == ELOOP) {
    cli_error("cannot write '%s': it is a symbolic link (vramledger does not write through one)",
              path);
    cli_hint("give the file itself, or remove the link");
  } else {
    cli_error("cannot write '%s': %s", path, strerror(errno));
  }
  return -1;
}

FILE *cli_create_output(const char *path, const char *mode) {
  return cli_create_stream(path, mode, 0644);
}

FILE *cli_create_stream(const char *path, const char *mode, mode_t perm) {
  int fd = cli_create_fd(path, mode[0] == 'a' ? O_APPEND : O_TRUNC, perm);
  if (fd < 0) return NULL;
  if (mode[0] == 'a') lseek(fd, 0, SEEK_END); /* as fopen "a" does: ftell() says what is there */
  FILE *f = fdopen(fd, mode);
  if (!f) {
    cli_error("cannot write '%s': %s", path, strerror(errno));
    close(fd);
  }
  return f;
}

/* ---- an output replaced whole: temporary, sync, rename ------------------ */

int cli_output_open(struct cli_output *o, const char *path, mode_t perm) {
  memset(o, 0, sizeof *o);
  struct stat st;
  bool there = lstat(path, &st) == 0;
  if (there && S_ISLNK(st.st_mode)) {
    cli_error("cannot write '%s': it is a symbolic link (vramledger does not write through one)",
              path);
    cli_hint("give the file itself, or remove the link");
    return VL_EXIT_ERROR;
  }
  if (there && !S_ISREG(st.st_mode)) {
    cli_error("cannot write '%s': it is not a regular file", path);
    return VL_EXIT_ERROR;
  }
  const char *slash = strrchr(path, '/');
  int w = snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.XXXXXX", slash ? (int)(slash - path + 1) : 0,
                   path, slash ? slash + 1 : path);
  if (w < 0 || (size_t)w >= sizeof o->tmp || strlen(path) >= sizeof o->path) {
    cli_error("cannot write '%.200s...': the path is too long", path);
    return VL_EXIT_ERROR;
  }
  snprintf(o->path, sizeof o->path, "%s", path);
  mode_t mask = umask(0);
  umask(mask);
  mode_t mode = there ? st.st_mode & 07777 : perm & ~mask;
  int fd = mkstemp(o->tmp); /* O_EXCL, 0600 until the mode below */
  if (fd < 0 || fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "w"))) {
    cli_error("cannot write '%s': %s (creating '%s')", path, strerror(errno), o->tmp);
    if (fd >= 0) {
      close(fd);
      unlink(o->tmp);
    }
    o->tmp[0] = '\0';
    return VL_EXIT_ERROR;
  }
  return 0;
}

/* the message of a failed output: the file is as it was */
static int output_failed(struct cli_output *o, const char *what, int e) {
  cli_error("cannot %s '%s': %s; '%s' is as it was", what, o->path, strerror(e ? e : EIO), o->path);
  cli_output_discard(o);
  return VL_EXIT_ERROR;
}

int cli_output_close(struct cli_output *o) {
  FILE *f = o->f;
  o->f = NULL;
  errno = 0;
  bool ok = fflush(f) == 0 && !ferror(f);
  int e = errno;
  if (ok && fsync(fileno(f)) != 0) {
    ok = false;
    e = errno;
  }
  if (fclose(f) != 0 && ok) {
    ok = false;
    e = errno;
  }
  return ok ? 0 : output_failed(o, "write", e);
}

int cli_output_rename(struct cli_output *o) {
  if (rename(o->tmp, o->path) != 0) return output_failed(o, "replace", errno);
  o->tmp[0] = '\0';
  char dir[4096]; /* the rename itself on disk: the folder synced, where it can be */
  const char *slash = strrchr(o->path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o->path + 1) : 1, slash ? o->path : ".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  return 0;
}

int cli_output_commit(struct cli_output *o) {
  int rc = cli_output_close(o);
  return rc ? rc : cli_output_rename(o);
}

void cli_output_discard(struct cli_output *o) {
  if (o->f) fclose(o->f);
  o->f = NULL;
  if (o->tmp[0]) unlink(o->tmp);
  o->tmp[0] = '\0';
}
