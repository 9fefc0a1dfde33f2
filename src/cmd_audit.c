/* vramledger audit: a finished run against its commitment, line by line;
 * more than the audit tolerance (5 %) off -> review. docs/cmd/audit.md. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "vramledger/commitment.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

enum { O_HELP, O_COMMITMENT, O_RUN, O_PRICE };
static const struct cli_opt opts[] = {{"help", false, O_HELP},
                                      {"commitment", true, O_COMMITMENT},
                                      {"run", true, O_RUN},
                                      {"price", true, O_PRICE},
                                      {NULL, false, 0}};
struct au {
  bool help;
  const char *commitment, *run;
  double price;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct au *a = ctx;
  if (id == O_HELP) a->help = true;
  if (id == O_COMMITMENT) a->commitment = arg;
  if (id == O_RUN) a->run = arg;
  if (id == O_PRICE) return cli_double(flag, arg, 0.0, 1e6, &a->price);
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
  uint64_t mp = 0, mc = 0;
  double secs = 0;
  char rec[PATH_MAX];
  if ((rc = cli_run_peaks(a.run, &mp, &mc, &secs, rec, sizeof rec))) return rc;
  double G = (double)(1ull << 30), tol = c.audit_tolerance;
  int review = 0;
  printf("audit of %s against %s (tolerance %.0f %%)\n\n", rec, a.commitment, tol * 100);
  printf("  %-28s %14s %14s %9s\n", "line", "committed", "actual", "off");
  /* where timing decides between two outcomes, the run is held to the one
   * its peak lies nearer (DDP's bucket rebuild) */
  bool other;
  uint64_t ref = vl_commitment_reference_bytes(&c, mp, &other);
  double off = ref ? ((double)mp - (double)ref) / (double)ref : 0;
  bool bad = !mp || fabs(off) > tol;
  printf("  %-28s %10.2f GiB %10.2f GiB %+8.1f%%%s\n",
         other ? "peak memory per GPU (other)" : "peak memory per GPU", (double)ref / G,
         (double)mp / G, off * 100, bad ? "  <- review" : "");
  review += bad;
  double hours = secs / 3600.0 * (double)c.gpus;
  if (c.gpu_hours > 0) {
    off = (hours - c.gpu_hours) / c.gpu_hours;
    bad = fabs(off) > tol;
    printf("  %-28s %14.4g %14.4g %+8.1f%%%s\n", "GPU-hours", c.gpu_hours, hours, off * 100,
           bad ? "  <- review" : "");
    review += bad;
  } else {
    printf("  %-28s %14s %14.4g\n", "GPU-hours", "not committed", hours);
  }
  /* throughput: the probe's steps (the tokens it saw, times the ranks);
   * else the job's vl_mark("step") stamps with the committed batch */
  struct vl_record r;
  char rp[PATH_MAX];
  double step_s = 0, measured_tps = 0;
  if (cli_load_record(a.run, &r, rp, sizeof rp) == 0) {
    struct vl_probe_layer fw;
    vl_probe_analyze(&r, &fw);
    if (fw.tokens_per_s > 0) measured_tps = fw.tokens_per_s * (fw.n_ranks ? fw.n_ranks : 1);
    step_s = vl_record_mark_median_s(&r, "step");
    vl_record_release(&r);
  }
  const struct vl_job *j = &c.job;
  double tokens_per_step =
      (double)j->batch * (double)j->seq * (double)j->grad_accum * (double)(j->dp ? j->dp : 1);
  double tps = measured_tps > 0 ? measured_tps : step_s > 0 ? tokens_per_step / step_s : 0;
  if (c.sla_tokens_per_s > 0 && tps > 0) {
    off = (tps - c.sla_tokens_per_s) / c.sla_tokens_per_s;
    bad = off < -tol; /* faster than the SLA is no breach */
    printf("  %-28s %14.4g %14.4g %+8.1f%%%s\n", "tokens/s (median step)", c.sla_tokens_per_s, tps,
           off * 100, bad ? "  <- review" : "");
    review += bad;
  } else if (tps > 0) {
    printf("  %-28s %14s %14.4g\n", "tokens/s (median step)", "not committed", tps);
  } else {
    printf("  %-28s %14s %14s\n", "tokens/s", c.sla_tokens_per_s > 0 ? "committed" : "",
           "not stamped");
  }
  if (a.price > 0) {
    printf("  %-28s %14s %13.2f$\n", "cost at the given price", "", hours * a.price);
    if (c.gpu_hours > 0) printf("  %-28s %13.2f$\n", "committed cost", c.gpu_hours * a.price);
  }
  if (!mp) printf("\n  the record has no GPU memory samples (no NVML on that machine?)\n");
  if (tps <= 0)
    printf(
        "\n  the job stamped no steps: call vl_mark(\"step\") (Python: vramledger.mark(\"step\")) "
        "once per optimizer step to audit throughput\n");
  if (review) {
    printf("\nreview: %d line%s more than %.0f %% off the commitment; update the commitment or "
           "explain the difference\n",
           review, review == 1 ? "" : "s", tol * 100);
    return VL_EXIT_NOFIT;
  }
  printf("\nwithin the commitment\n");
  return VL_EXIT_OK;
}
