/* vramledger audit: a finished run against its commitment, line by line;
 * more than the audit tolerance (the commitment's, 5 %, or --tolerance)
 * off -> review, exit 3. The clauses are decided in lib/decide/audit.c.
 * docs/cmd/audit.md. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/audit.h"
#include "vramledger/commitment.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

enum { O_HELP, O_COMMITMENT, O_RUN, O_PRICE, O_CATALOG, O_FORMAT, O_TOLERANCE };
static const struct cli_opt opts[] = {{"help", false, O_HELP},
                                      {"commitment", true, O_COMMITMENT},
                                      {"run", true, O_RUN},
                                      {"price", true, O_PRICE},
                                      {"catalog", true, O_CATALOG},
                                      {"format", true, O_FORMAT},
                                      {"tolerance", true, O_TOLERANCE},
                                      {NULL, false, 0}};
struct au {
  bool help;
  const char *commitment, *run, *catalog;
  double price;
  int fmt;          /* 0 text, 1 json */
  double tolerance; /* a fraction; 0: the commitment's */
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct au *a = ctx;
  if (id == O_HELP) a->help = true;
  if (id == O_COMMITMENT) a->commitment = arg;
  if (id == O_RUN) a->run = arg;
  if (id == O_CATALOG) a->catalog = arg;
  if (id == O_PRICE) return cli_double(flag, arg, 0.0, 1e6, &a->price);
  if (id == O_FORMAT) {
    static const char *const formats[] = {"text", "json", NULL};
    if ((a->fmt = cli_choice(flag, arg, formats)) < 0) return VL_EXIT_USAGE;
  }
  if (id == O_TOLERANCE) {
    double pct = 0;
    int rc = cli_double(flag, arg, 0, 100, &pct);
    if (rc) return rc;
    if (pct == 0) { /* as a commitment's audit.tolerance: above 0 */
      cli_error("--tolerance 0 would mark every line that is off at all for review: give a "
                "percentage above 0, at most 100 (such as 5)");
      return VL_EXIT_USAGE;
    }
    a->tolerance = pct / 100;
  }
  return 0;
}

/* The run, read: its peaks and duration, its GPUs, the probe's layer. */
static int read_run(const char *run, struct vl_audit_run *r, char *rec_path, size_t n) {
  uint64_t cuda = 0;
  int rc = cli_run_peaks(run, &r->peak_bytes, &cuda, &r->seconds, rec_path, n);
  if (rc) return rc;
  struct vl_record rec;
  char path[PATH_MAX];
  if ((rc = cli_load_record(run, &rec, path, sizeof path))) return rc;
  vl_run_hw_read(&rec, &r->hw);
  static struct vl_probe_layer fw; /* large: not on the stack */
  memset(&fw, 0, sizeof fw);
  vl_status s = vl_probe_analyze(&rec, &fw);
  if (s == VL_OK) s = vl_record_mark_median_s(&rec, "step", &r->step_s);
  if (s != VL_OK) {
    cli_error("cannot analyse the record '%s': %s", path, vl_strerror(s));
    vl_record_release(&rec);
    return VL_EXIT_ERROR;
  }
  r->probe = fw.has_bill;
  r->params_bytes = fw.has_bill ? fw.bill[VL_BILL_PARAMETERS] : 0;
  r->probe_tokens_per_s = fw.tokens_per_s;
  r->probe_ranks = fw.n_ranks;
  vl_record_release(&rec);
  return 0;
}

int cmd_audit(int argc, const char **argv) {
  struct au a = {0};
  int rc = cli_parse(argc, argv, opts, on_opt, &a);
  if (rc) return rc;
  if (a.help) {
    fputs(vl_help_audit, stdout);
    return VL_EXIT_OK;
  }
  if (!a.commitment || !a.run) {
    cli_error("audit needs --commitment FILE and --run RUN");
    return VL_EXIT_USAGE;
  }
  struct vl_commitment c;
  if ((rc = cli_load_commitment(a.commitment, &c))) return rc;
  struct vl_audit_run r;
  memset(&r, 0, sizeof r);
  char rec[PATH_MAX];
  if ((rc = read_run(a.run, &r, rec, sizeof rec))) return rc;
  struct est ce; /* the committed card in the catalog, to read the record's device names */
  est_init(&ce);
  ce.gpu = c.gpu;
  ce.catalog = a.catalog;
  struct vl_catalog cat;
  const struct vl_gpu *card;
  if ((rc = est_gpu(&ce, &cat, &card))) {
    cli_hint("the commitment's card '%s' is not in the catalog: give the one it was committed "
             "with (--catalog FILE)",
             c.gpu);
    return rc;
  }
  struct vl_audit au;
  double tol = a.tolerance > 0 ? a.tolerance : c.audit_tolerance;
  vl_audit_compute(&c, &r, &cat, tol, a.tolerance > 0, a.price, &au);
  vl_catalog_release(&cat);
  au.commitment = a.commitment;
  au.record = rec;
  if (vl_render_audit(stdout, a.fmt == 1 ? VL_FMT_JSON : VL_FMT_TEXT, &au)) {
    cli_error("cannot write the output");
    return VL_EXIT_ERROR;
  }
  return au.review ? VL_EXIT_NOFIT : VL_EXIT_OK;
}
