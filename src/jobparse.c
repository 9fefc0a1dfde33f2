/* A job from a command's arguments: its flags (jobflags.c), a recipe under
 * them (--recipe FILE, recipe_flags.c), the flags that would change
 * nothing refused, and the task's defaults. The one way in for estimate,
 * plan, commit, check and the others (jobflags.h); it sits above both
 * files, which never call it. */
#include <stdio.h>

#include "cli.h"
#include "jobflags.h"

int est_parse(int argc, const char **argv, struct est *e) {
  int rc = est_parse_flags(argc, argv, e);
  if (rc || e->help) return rc;
  if (e->recipe_file && (rc = est_recipe(e, argc, argv))) return rc;
  if ((rc = est_refuse_inert(e))) return rc;
  if (e->job.task == VL_TASK_INFER && !e->seq_given) e->job.seq = 512;
  /* serving loads half-precision weights; training defaults to AMP */
  if (e->job.task == VL_TASK_INFER && !e->precision_given) e->job.precision = VL_PREC_BF16;
  return 0;
}

int est_parse_with(int argc, const char **argv, const char *const *names, const char **values,
                   struct est *e) {
  const char *rest[256];
  int n = 0, rc;
  if (argc > 255) {
    cli_error("too many arguments");
    return VL_EXIT_USAGE;
  }
  if ((rc = take_flags(argc, argv, names, values, rest, &n))) return rc;
  est_init(e);
  return est_parse(n, rest, e);
}
