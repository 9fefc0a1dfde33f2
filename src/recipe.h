/* Fine-tuning recipes (--recipe FILE): an axolotl, torchtune or
 * LLaMA-Factory YAML, or a TRL / transformers TrainingArguments JSON, read
 * into the job flags it stands for, each with the key it came from. Keys
 * that matter to memory or time but that the estimate does not model are
 * listed as ignored, with their value; keys the kind does not have are
 * listed as unknown. docs/cmd/estimate.md, "Recipes". */
#ifndef VRAMLEDGER_RECIPE_H
#define VRAMLEDGER_RECIPE_H
#include <stdbool.h>
#include <stddef.h>

#include "vramledger/render.h"

#define RECIPE_MAX_SET 48
#define RECIPE_MAX_ITEMS 64

/* One job flag a key sets: `--flag value` (value "" for a switch). */
struct recipe_setting {
  char key[128];
  char flag[32];
  char value[256];
  unsigned line; /* 1-based; 0: the kind's own behaviour, no key */
};

/* A key listed, not applied: its value, and why it is listed. */
struct recipe_item {
  char key[128];
  char value[256];
  char why[160];
  unsigned line;
};

struct recipe {
  const char *kind;  /* "axolotl", "torchtune", "llama-factory", "trl" */
  const char *label; /* "axolotl", ..., "TRL / transformers TrainingArguments" */
  char file[4096];
  char model[512]; /* the model it names ("" none): resolved as --model is */
  char model_key[128];
  unsigned model_line;
  struct recipe_setting set[RECIPE_MAX_SET];
  size_t n_set;
  struct recipe_item ignored[RECIPE_MAX_ITEMS], unknown[RECIPE_MAX_ITEMS];
  size_t n_ignored, n_unknown;
  /* the same for the renderers: mapped grouped by key ("--zero 3 --framework
   * deepspeed"), filled by recipe_load */
  struct vl_recipe_key view_mapped[RECIPE_MAX_SET], view_ignored[RECIPE_MAX_ITEMS],
      view_unknown[RECIPE_MAX_ITEMS];
  char flags_text[RECIPE_MAX_SET][320];
  struct vl_recipe_view view;
};

/*! Read the recipe at path, recognise its kind by its keys and map it.
 * Prints what is wrong (the file, the line, the fix) and warnings for
 * unknown keys on stderr. *out is heap-allocated (release with
 * recipe_free). @return 0, or an exit code (VL_EXIT_ERROR: unreadable or
 * malformed; VL_EXIT_USAGE: no known kind, contradictory keys, bad values). */
int recipe_load(const char *path, struct recipe **out);

/*! The same for a recipe's text (len bytes, NUL-terminated), read
 * already; name is the file it came from (messages, relative paths). */
int recipe_parse(const char *name, const char *text, size_t len, struct recipe **out);

/*! Release a recipe; NULL is fine. */
void recipe_free(struct recipe *r);

#include "vramledger/banned.h"
#endif
