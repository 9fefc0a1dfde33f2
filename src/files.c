#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "vramledger/alloc.h"

#define MAX_FILE (64u << 20)

/* Read path whole; on failure NULL with why in *why (a static string, or
 * NULL for errno's). */
static char *read_whole(const char *path, size_t *len, const char **why) {
  *why = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct stat st;
  char *buf = NULL;
  size_t cap = 4096, n = 0;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    *why = "it is a directory";
    goto fail;
  }
  if (!(buf = vl_malloc(cap))) goto oom;
  for (;;) {
    if (n + 1 >= cap) {
      if (cap >= MAX_FILE) {
        *why = "larger than 64 MiB";
        goto fail;
      }
      char *nb = vl_realloc(buf, cap * 2);
      if (!nb) goto oom;
      buf = nb;
      cap *= 2;
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
  return buf;
}

const char *cli_data_dir(void) {
  const char *env = getenv("VRAMLEDGER_DATA");
  if (env && *env) return env;
  return VL_DATA_DIR;
}

const char *cli_python_dir(void) {
  const char *env = getenv("VRAMLEDGER_PYTHON_DIR");
  if (env && *env) return env;
  return VL_PYTHON_DIR;
}
