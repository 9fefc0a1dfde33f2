/* libFuzzer harness: a fine-tuning recipe (estimate --recipe), YAML or
 * JSON, through the reader: its kind, its mapping to job flags and its
 * lists of ignored and unknown keys. A recipe that is read holds every
 * list within its bounds, each mapped key with a flag; one that is not
 * read leaves nothing behind. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  struct recipe *r = NULL;
  int rc = recipe_parse("fuzz.yml", text, size, &r);
  if (rc != 0 && r) __builtin_trap();
  if (rc == 0) {
    if (!r || !r->kind || r->n_set > RECIPE_MAX_SET || r->view.n_mapped > r->n_set ||
        r->n_ignored > RECIPE_MAX_ITEMS || r->n_unknown > RECIPE_MAX_ITEMS)
      __builtin_trap();
    for (size_t i = 0; i < r->view.n_mapped; i++)
      if (strncmp(r->view.mapped[i].value, "--", 2) != 0) __builtin_trap();
  }
  recipe_free(r);
  free(text);
  return 0;
}
