#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "vramledger/alloc.h"

#define MAX_FILE (64u << 20)

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_error("cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    cli_error("cannot read '%s': it is a directory", path);
    fclose(f);
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = vl_malloc(cap);
  while (buf) {
    if (n + 1 >= cap) {
      if (cap >= MAX_FILE) {
        cli_error("cannot read '%s': larger than 64 MiB", path);
        vl_free(buf);
        fclose(f);
        return NULL;
      }
      char *nb = vl_realloc(buf, cap * 2);
      if (!nb) {
        vl_free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  if (!buf) {
    cli_error("cannot read '%s': out of memory", path);
    fclose(f);
    return NULL;
  }
  if (ferror(f)) {
    cli_error("cannot read '%s': %s", path, strerror(errno));
    vl_free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
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
