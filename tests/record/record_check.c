/* record_check FILE...: every line of each file (a record's own file, or
 * one of its streams) checked against the record's schema
 * (lib/measure/record_schema.def): the C writers' lines as `vramledger
 * run` and the interposer write them (tests/cli/run_tests.sh). Says each
 * line that does not conform (file, line, what) on stderr.
 * record_check --marks N RECORD: the record read as vramledger reads it
 * (its streams merged): N marks, in time order.
 * Exit 0: all conform; 1: some do not, or a file cannot be read. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure/record_schema.h"
#include "vramledger/record.h"

static int check_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return 1;
  }
  char *line = NULL;
  size_t cap = 0, n = 0;
  int bad = 0;
  while (getline(&line, &cap, f) > 0) {
    n++;
    json_error_t jerr;
    json_t *o = json_loads(line, 0, &jerr);
    char why[256];
    if (!o) {
      fprintf(stderr, "%s: line %zu: not JSON: %s\n", path, n, jerr.text);
      bad = 1;
    } else if (!vl__rec_check(o, NULL, why, sizeof why)) {
      fprintf(stderr, "%s: line %zu: %s\n", path, n, why);
      bad = 1;
    }
    json_decref(o);
  }
  free(line);
  fclose(f);
  if (n == 0) {
    fprintf(stderr, "%s: empty\n", path);
    bad = 1;
  }
  return bad;
}

/* The merged read of the record at path: n marks, none before the one
 * read before it. */
static int check_marks(const char *path, size_t n) {
  struct vl_record r;
  struct vl_err err = {""};
  if (vl_record_read(path, &r, &err) != VL_OK) {
    fprintf(stderr, "%s: %s\n", path, err.msg);
    return 1;
  }
  int bad = r.n_marks != n;
  if (bad) fprintf(stderr, "%s: %zu marks, not %zu\n", path, r.n_marks, n);
  for (size_t i = 1; i < r.n_marks; i++)
    if (r.marks[i].t_ns < r.marks[i - 1].t_ns) {
      fprintf(stderr, "%s: mark %zu is before mark %zu\n", path, i, i - 1);
      bad = 1;
      break;
    }
  if (r.damaged || r.truncated || r.gaps) {
    fprintf(stderr, "%s: damaged %u, truncated %d, gaps %u\n", path, r.damaged, r.truncated,
            r.gaps);
    bad = 1;
  }
  vl_record_release(&r);
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--marks") == 0)
    return check_marks(argv[3], strtoul(argv[2], NULL, 10));
  int bad = argc < 2;
  for (int i = 1; i < argc; i++)
    bad |= check_file(argv[i]);
  return bad;
}
