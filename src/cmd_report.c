/* vramledger report: what a run record says. docs/cmd/report.md. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "vramledger/alloc.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

enum { O_HELP, O_FORMAT };
static const struct cli_opt opts[] = {
    {"help", false, O_HELP}, {"format", true, O_FORMAT}, {NULL, false, 0}};

struct rep {
  bool help;
  int fmt;
  const char *run;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct rep *r = ctx;
  static const char *const formats[] = {"text", "json", "md", "trace", "html", NULL};
  if (id == O_HELP) r->help = true;
  if (id == O_FORMAT && (r->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
  return 0;
}

int cmd_report(int argc, const char **argv) {
  struct rep r = {0};
  /* one positional argument: the run directory or record file */
  const char *args[64];
  int n = 0;
  for (int i = 0; i < argc && n < 63; i++) {
    if (i > 0 && argv[i][0] != '-' && !r.run && !(i > 1 && strcmp(argv[i - 1], "--format") == 0)) {
      r.run = argv[i];
      continue;
    }
    args[n++] = argv[i];
  }
  int rc = cli_parse(n, args, opts, on_opt, &r);
  if (rc) return rc;
  if (r.help) {
    fputs(vl_help_report, stdout);
    return VL_EXIT_OK;
  }
  if (!r.run) {
    cli_error("report needs a run: a directory made by 'vramledger run' or its record.jsonl");
    return VL_EXIT_USAGE;
  }
  char path[PATH_MAX];
  struct vl_record rec;
  if ((rc = cli_load_record(r.run, &rec, path, sizeof path))) return rc;
  struct vl_run_summary sum;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&rec, &sum, f, &nf);
  struct vl_probe_layer fw;
  vl_probe_analyze(&rec, &fw);
  vl_probe_ladder(&fw, &sum);
  struct vl_report_view v = {&rec, &sum, f, nf, path, &fw};
  static const enum vl_report_format map[] = {VL_REP_TEXT, VL_REP_JSON, VL_REP_MD, VL_REP_TRACE,
                                              VL_REP_HTML};
  rc = vl_render_report(stdout, map[r.fmt], &v) == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
  if (rc) cli_error("cannot write the output");
  vl_record_release(&rec);
  return rc;
}
