/* A recipe under the job flags (--recipe FILE): its flags first, the
 * flags given beside it over them. See jobflags.h and recipe.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "jobflags.h"
#include "recipe.h"

/* the recipe of this process: struct est points into it until exit */
static struct recipe *loaded;

static bool flag_given(int argc, const char **argv, const char *flag) {
  size_t n = strlen(flag);
  for (int i = 1; i < argc; i++)
    if (!strncmp(argv[i], flag, n) && (argv[i][n] == '\0' || argv[i][n] == '=')) return true;
  return false;
}

/* the recipe's flags into a job of their own, then copied into e's */
static int apply_settings(const struct recipe *r, struct est *e) {
  struct est base;
  est_init(&base);
  for (size_t i = 0; i < r->n_set; i++) {
    const struct recipe_setting *s = &r->set[i];
    const char *av[] = {"vramledger", s->flag, s->value};
    int rc = est_parse_flags(s->value[0] ? 3 : 2, av, &base);
    if (rc) {
      if (s->line) cli_hint("from recipe '%s' line %u: %s", r->file, s->line, s->key);
      return rc;
    }
  }
  e->job = base.job;
  memcpy(e->targets, base.targets, sizeof e->targets);
  for (int i = 0; i < e->job.n_lora_targets; i++)
    e->job.lora_targets[i] = e->targets + (base.job.lora_targets[i] - base.targets);
  e->seq_given |= base.seq_given;
  e->precision_given |= base.precision_given;
  return 0;
}

/* the flags given beside the recipe win: a note names each key they pass over */
static void overrides(const struct recipe *r, const struct est *e, int argc, const char **argv) {
  for (size_t i = 0; i < r->n_set; i++) {
    const struct recipe_setting *s = &r->set[i];
    if (!flag_given(argc, argv, s->flag)) continue;
    fprintf(stderr, "vramledger: note: %s given beside --recipe: the recipe's %s", s->flag, s->key);
    if (s->line) fprintf(stderr, " (line %u)", s->line);
    fprintf(stderr, ", %s%s%s, is not used\n", s->flag, s->value[0] ? " " : "", s->value);
  }
  if (r->model[0] && e->model && e->model != r->model)
    fprintf(stderr,
            "vramledger: note: --model %s given beside --recipe: the recipe's %s (line %u), '%s', "
            "is not used\n",
            e->model, r->model_key, r->model_line, r->model);
}

/* the model the recipe names, found as --model finds one */
/* cli_locate_model with stderr on /dev/null (the command's own load of
 * the model says which file it is, once): 0, or errno where it is not
 * found or its file cannot be read (looked for again aloud) */
static int found_quietly(const char *model, char *path, size_t n) {
  char bundled[64];
  fflush(stderr);
  int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved < 0 || null < 0 || dup2(null, STDERR_FILENO) < 0) {
    if (saved >= 0) close(saved);
    if (null >= 0) close(null);
    return EIO;
  }
  close(null);
  int rc = cli_locate_model(model, path, n, bundled, sizeof bundled);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  if (rc) return ENOENT;
  return access(path, R_OK) ? errno : 0;
}

/* the model the recipe names, found as --model finds one */
static int recipe_model(const struct recipe *r, struct est *e) {
  if (e->model || !r->model[0]) return 0;
  char path[4096], bundled[64];
  int err = found_quietly(r->model, path, sizeof path);
  if (err) {
    if (!cli_locate_model(r->model, path, sizeof path, bundled, sizeof bundled))
      cli_error("cannot read '%s': %s", path, strerror(err));
    cli_hint("recipe '%s' line %u: %s names '%s': give --model NAME|FILE beside --recipe (a "
             "bundled name or a config.json), which is used instead",
             r->file, r->model_line, r->model_key, r->model);
    return VL_EXIT_ERROR;
  }
  e->model = r->model;
  return 0;
}

/* ZeRO shards across GPUs the recipe does not count: --dp is needed */
static int sharded(const struct recipe *r, const struct est *e, int argc, const char **argv) {
  if (e->job.zero == 0 || e->job.dp >= 2 || flag_given(argc, argv, "--zero")) return 0;
  for (size_t i = 0; i < r->n_set; i++)
    if (!strcmp(r->set[i].flag, "--zero")) {
      cli_error("recipe '%s' line %u: %s shards with ZeRO stage %u across the job's GPUs, which a "
                "recipe does not say: give --dp N (N >= 2) beside --recipe",
                r->file, r->set[i].line, r->set[i].key, e->job.zero);
      cli_hint("or --zero 0 for one GPU without sharding");
      return VL_EXIT_USAGE;
    }
  return 0;
}

static void summary(const struct recipe *r, const struct est *e) {
  fprintf(stderr, "vramledger: recipe '%s' (%s): %zu key%s mapped, %zu ignored", r->file, r->label,
          r->view.n_mapped, r->view.n_mapped == 1 ? "" : "s", r->n_ignored);
  for (size_t i = 0; i < r->n_ignored && i < 6; i++)
    fprintf(stderr, "%s%s", i ? ", " : " (", r->ignored[i].key);
  fprintf(stderr, "%s", r->n_ignored > 6 ? ", ...)" : r->n_ignored ? ")" : "");
  if (r->n_unknown) fprintf(stderr, ", %zu unknown", r->n_unknown);
  if (!e->model) fprintf(stderr, "; it names no model: give --model");
  fprintf(stderr, "%s\n", e->explain ? "" : "; estimate --explain lists them");
}

int est_recipe(struct est *e, int argc, const char **argv) {
  recipe_free(loaded);
  loaded = NULL;
  int rc = recipe_load(e->recipe_file, &loaded);
  if (rc) return rc;
  if ((rc = apply_settings(loaded, e))) return rc;
  if ((rc = est_parse_flags(argc, argv, e))) return rc; /* the flags given win */
  overrides(loaded, e, argc, argv);
  if ((rc = recipe_model(loaded, e)) || (rc = sharded(loaded, e, argc, argv))) return rc;
  e->recipe = &loaded->view;
  summary(loaded, e);
  return 0;
}
