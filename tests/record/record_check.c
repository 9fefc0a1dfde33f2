/* record_check RECORD...: every line of each record checked against the
 * record's schema (lib/measure/record_schema.def): the C writers' lines as
 * `vramledger run` and the interposer write them (tests/cli/run_tests.sh).
 * Says each line that does not conform (file, line, what) on stderr.
 * Exit 0: all conform; 1: some do not, or a file cannot be read. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure/record_schema.h"

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

int main(int argc, char **argv) {
  int bad = argc < 2;
  for (int i = 1; i < argc; i++)
    bad |= check_file(argv[i]);
  return bad;
}
