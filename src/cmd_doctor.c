/* vramledger doctor: what is wrong with a run's memory. docs/cmd/doctor.md. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "util/internal.h"
#include "vramledger/doctor.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

enum { O_HELP, O_FORMAT, O_FAIL_ON };
static const struct cli_opt opts[] = {{"help", false, O_HELP},
                                      {"format", true, O_FORMAT},
                                      {"fail-on", true, O_FAIL_ON},
                                      {NULL, false, 0}};

struct doc {
  bool help;
  int fmt;
  const char *fail_on;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct doc *d = ctx;
  static const char *const formats[] = {"text", "json", NULL};
  if (id == O_HELP) d->help = true;
  if (id == O_FORMAT && (d->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
  if (id == O_FAIL_ON) d->fail_on = arg;
  return 0;
}

/* --fail-on's longest value */
#define FAIL_ON_MAX 512

/* Is finding k named in LIST (ids or codes, comma-separated; "all";
 * "warn" = warnings and errors)? */
static bool listed(const char *list, const struct vl_diag *d) {
  char buf[FAIL_ON_MAX];
  struct vl__list l;
  if (!vl__list_init_in(&l, list, ',', buf, sizeof buf)) return true; /* check_list refuses it */
  l.empty = true; /* empty items are skipped, as strtok did, not the end of the list */
  for (char *t; (t = vl__list_next(&l, NULL));) {
    if (!*t) continue;
    if (strcmp(t, "all") == 0 || strcmp(t, vl_diag_id(d->kind)) == 0 ||
        strcmp(t, vl_diag_slug(d->kind)) == 0)
      return true;
    if (strcmp(t, "warn") == 0 && d->severity >= VL_SEV_WARN) return true;
    if (strcmp(t, "error") == 0 && d->severity >= VL_SEV_ERROR) return true;
  }
  return false;
}

/* --fail-on's allowed values, for its messages: "all, warn, error, leak, ..." */
static void allowed(char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "all, warn, error");
  for (int k = 0; k < VL_D_COUNT && o < n; k++)
    o += (size_t)snprintf(buf + o, n - o, ", %s", vl_diag_slug((enum vl_diag_kind)k));
}

/* Every item of --fail-on names something, and at least one does: an
 * empty list (--fail-on '', or ',') would turn the gate off. Empty items
 * beside named ones are skipped. */
static int check_list(const char *list) {
  char buf[FAIL_ON_MAX], names[1024];
  struct vl__list l;
  if (!vl__list_init_in(&l, list, ',', buf, sizeof buf)) { /* never cut: a finding would go */
    cli_error("--fail-on is longer than %zu bytes: name fewer findings, or use warn, error or all",
              sizeof buf - 1);
    return VL_EXIT_USAGE;
  }
  allowed(names, sizeof names);
  l.empty = true;
  int named = 0;
  for (char *t; (t = vl__list_next(&l, NULL));) {
    if (!*t) continue;
    bool ok = strcmp(t, "all") == 0 || strcmp(t, "warn") == 0 || strcmp(t, "error") == 0;
    for (int k = 0; k < VL_D_COUNT && !ok; k++)
      ok = strcmp(t, vl_diag_id((enum vl_diag_kind)k)) == 0 ||
           strcmp(t, vl_diag_slug((enum vl_diag_kind)k)) == 0;
    if (!ok) {
      cli_error("--fail-on: unknown finding '%s'; give ids (VL-D001..VL-D%03d) or: %s", t,
                VL_D_COUNT, names);
      return VL_EXIT_USAGE;
    }
    named++;
  }
  if (!named) {
    cli_error("--fail-on '%s' names no finding, which would pass every run; give ids "
              "(VL-D001..VL-D%03d) or: %s",
              list, VL_D_COUNT, names);
    return VL_EXIT_USAGE;
  }
  return 0;
}

int cmd_doctor(int argc, const char **argv) {
  struct doc d = {0};
  const char *args[64], *run = NULL;
  int n = 0;
  for (int i = 0; i < argc && n < 63; i++) {
    bool value =
        i > 1 && (strcmp(argv[i - 1], "--format") == 0 || strcmp(argv[i - 1], "--fail-on") == 0);
    if (i > 0 && argv[i][0] != '-' && !run && !value) {
      run = argv[i];
      continue;
    }
    args[n++] = argv[i];
  }
  int rc = cli_parse(n, args, opts, on_opt, &d);
  if (rc) return rc;
  if (d.help) {
    fputs(vl_help_doctor, stdout);
    return VL_EXIT_OK;
  }
  if (d.fail_on && (rc = check_list(d.fail_on))) return rc;
  if (!run) {
    cli_error("doctor needs a run: a directory made by 'vramledger run' or its record.jsonl");
    return VL_EXIT_USAGE;
  }
  struct cli_run *rr = malloc(sizeof *rr);
  if (!rr) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  if ((rc = cli_load_run(run, rr))) {
    free(rr);
    return rc;
  }
  struct vl_diag diags[VL_MAX_DIAGS];
  int nd = vl_doctor(&rr->rec, &rr->sum, &rr->fw, diags);
  struct vl_doctor_verdict v = {d.fail_on, {false}, 0};
  for (int i = 0; i < nd && d.fail_on; i++)
    if ((v.listed[i] = listed(d.fail_on, &diags[i]))) v.n_listed++;
  rc = vl_render_doctor(stdout, d.fmt == 1, rr->path, diags, nd, d.fail_on ? &v : NULL) == 0
           ? VL_EXIT_OK
           : VL_EXIT_ERROR;
  if (rc) cli_error("cannot write the output");
  if (rc == VL_EXIT_OK && v.n_listed) rc = VL_EXIT_NOFIT;
  vl_record_release(&rr->rec);
  free(rr);
  return rc;
}
