/* vramledger audit: a finished run against its commitment, line by line;
 * more than the audit tolerance (5 %) off -> review. docs/cmd/audit.md. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/commitment.h"
#include "vramledger/probe.h"
#include "vramledger/record.h"

enum { O_HELP, O_COMMITMENT, O_RUN, O_PRICE, O_CATALOG };
static const struct cli_opt opts[] = {
    {"help", false, O_HELP},  {"commitment", true, O_COMMITMENT}, {"run", true, O_RUN},
    {"price", true, O_PRICE}, {"catalog", true, O_CATALOG},       {NULL, false, 0}};
struct au {
  bool help;
  const char *commitment, *run, *catalog;
  double price;
};

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct au *a = ctx;
  if (id == O_HELP) a->help = true;
  if (id == O_COMMITMENT) a->commitment = arg;
  if (id == O_RUN) a->run = arg;
  if (id == O_CATALOG) a->catalog = arg;
  if (id == O_PRICE) return cli_double(flag, arg, 0.0, 1e6, &a->price);
  return 0;
}

/* What the run was, read once; each line of the audit is a function of it
 * and the commitment that prints its row and says whether it is off. */
struct run {
  const char *commitment;
  uint64_t peak; /* per GPU, the fullest one's */
  double secs;
  char rec[PATH_MAX];
  struct vl_run_hw hw;
  struct vl_probe_layer fw;
  double step_s; /* median between vl_mark("step") stamps */
  double tps;    /* tokens/s; 0: not stamped */
  char ran[160]; /* "2 x h200" */
};

#define G ((double)(1ull << 30))
#define REVIEW "  <- review"

/* The card and count: the record's device names read against the catalog. */
static int gpus_line(const struct vl_commitment *c, struct run *r, const struct vl_catalog *cat,
                     char *want, size_t wn) {
  snprintf(want, wn, "%llu x %s", (unsigned long long)c->gpus, c->gpu);
  struct vl_drift d[2];
  int n = vl_commitment_hw_diff(c->gpu, c->gpu_memory_bytes, c->gpus, cat, &r->hw, d, 2);
  const struct vl_gpu *g = r->hw.count ? vl_catalog_match_device(cat, r->hw.device) : NULL;
  if (r->hw.count)
    snprintf(r->ran, sizeof r->ran, "%u x %s%s", r->hw.count, g ? g->name : r->hw.device,
             r->hw.mixed ? " and others" : "");
  else
    snprintf(r->ran, sizeof r->ran, "not recorded");
  printf("  %-28s %14s %14s%s\n", "GPUs", want, r->ran, n ? "          " REVIEW : "");
  return n > 0;
}

/* The model: the parameters' bytes the probe counted against the committed
 * ones (a record holds no config; the probe's bill does). */
static int model_line(const struct vl_commitment *c, const struct run *r, double tol) {
  const char *name = "parameters per GPU (probe)";
  if (!c->est_params_bytes || !r->fw.has_bill || !r->fw.bill[VL_BILL_PARAMETERS]) {
    printf("  %-28s %14s %14s\n", name, c->est_params_bytes ? "" : "not committed",
           r->fw.has_bill ? "" : "no probe");
    return 0;
  }
  double p = (double)r->fw.bill[VL_BILL_PARAMETERS], q = (double)c->est_params_bytes;
  double off = (p - q) / q;
  bool bad = fabs(off) > tol;
  printf("  %-28s %10.2f GiB %10.2f GiB %+8.1f%%%s\n", name, q / G, p / G, off * 100,
         bad ? REVIEW : "");
  return bad;
}

/* Where timing decides between two outcomes, the run is held to the one
 * its peak lies nearer (DDP's bucket rebuild). */
static int memory_line(const struct vl_commitment *c, const struct run *r, double tol) {
  bool other;
  uint64_t ref = vl_commitment_reference_bytes(c, r->peak, &other);
  double off = ref ? ((double)r->peak - (double)ref) / (double)ref : 0;
  bool bad = !r->peak || fabs(off) > tol;
  printf("  %-28s %10.2f GiB %10.2f GiB %+8.1f%%%s\n",
         other ? "peak memory per GPU (other)" : "peak memory per GPU", (double)ref / G,
         (double)r->peak / G, off * 100, bad ? REVIEW : "");
  return bad;
}

/* GPU-hours on the GPUs the run had, not those committed. */
static int hours_line(const struct vl_commitment *c, const struct run *r, double tol,
                      double *hours) {
  unsigned gpus = r->hw.count ? r->hw.count : (unsigned)c->gpus;
  *hours = r->secs / 3600.0 * (double)gpus;
  char name[40];
  snprintf(name, sizeof name, "GPU-hours (%u GPU%s%s)", gpus, gpus == 1 ? "" : "s",
           r->hw.count ? "" : ", committed");
  if (c->gpu_hours <= 0) {
    printf("  %-28s %14s %14.4g\n", name, "not committed", *hours);
    return 0;
  }
  double off = (*hours - c->gpu_hours) / c->gpu_hours;
  bool bad = fabs(off) > tol;
  printf("  %-28s %14.4g %14.4g %+8.1f%%%s\n", name, c->gpu_hours, *hours, off * 100,
         bad ? REVIEW : "");
  return bad;
}

/* Throughput: the probe's steps (the tokens it saw, times the ranks); else
 * the job's vl_mark("step") stamps with the committed batch. Faster than
 * the SLA is no breach. */
static int throughput_line(const struct vl_commitment *c, struct run *r, double tol) {
  const struct vl_job *j = &c->job;
  double per_step =
      (double)j->batch * (double)j->seq * (double)j->grad_accum * (double)(j->dp ? j->dp : 1);
  double probe = r->fw.tokens_per_s * (r->fw.n_ranks ? r->fw.n_ranks : 1);
  r->tps = probe > 0 ? probe : r->step_s > 0 ? per_step / r->step_s : 0;
  char sla[32];
  if (c->sla_tokens_per_s > 0)
    snprintf(sla, sizeof sla, "%.4g", c->sla_tokens_per_s);
  else
    snprintf(sla, sizeof sla, "not committed");
  if (r->tps <= 0) {
    printf("  %-28s %14s %14s\n", "tokens/s", sla, "not stamped");
    return 0;
  }
  if (c->sla_tokens_per_s <= 0) {
    printf("  %-28s %14s %14.4g\n", "tokens/s (median step)", sla, r->tps);
    return 0;
  }
  double off = (r->tps - c->sla_tokens_per_s) / c->sla_tokens_per_s;
  bool bad = off < -tol;
  printf("  %-28s %14s %14.4g %+8.1f%%%s\n", "tokens/s (median step)", sla, r->tps, off * 100,
         bad ? REVIEW : "");
  return bad;
}

/* The run, read: its peaks and duration, its GPUs, the probe's layer. */
static int read_run(const char *run, struct run *r) {
  uint64_t cuda = 0;
  int rc = cli_run_peaks(run, &r->peak, &cuda, &r->secs, r->rec, sizeof r->rec);
  if (rc) return rc;
  struct vl_record rec;
  char path[PATH_MAX];
  if ((rc = cli_load_record(run, &rec, path, sizeof path))) return rc;
  vl_run_hw_read(&rec, &r->hw);
  vl_probe_analyze(&rec, &r->fw);
  r->step_s = vl_record_mark_median_s(&rec, "step");
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
  static struct run r; /* the probe's layer is large: not on the stack */
  memset(&r, 0, sizeof r);
  if ((rc = read_run(a.run, &r))) return rc;
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
  double tol = c.audit_tolerance, hours = 0;
  printf("audit of %s against %s (tolerance %.0f %%)\n\n", r.rec, a.commitment, tol * 100);
  printf("  %-28s %14s %14s %9s\n", "line", "committed", "actual", "off");
  char want[64];
  int hw_off = gpus_line(&c, &r, &cat, want, sizeof want);
  vl_catalog_release(&cat);
  int model_off = model_line(&c, &r, tol);
  int review = hw_off + model_off + memory_line(&c, &r, tol) + hours_line(&c, &r, tol, &hours) +
               throughput_line(&c, &r, tol);
  if (a.price > 0) {
    printf("  %-28s %14s %13.2f$\n", "cost at the given price", "", hours * a.price);
    if (c.gpu_hours > 0) printf("  %-28s %13.2f$\n", "committed cost", c.gpu_hours * a.price);
  }
  if (hw_off)
    printf("\n  the run ran on %s, the commitment is for %s: its memory and time do not measure "
           "the committed hardware\n",
           r.ran, want);
  if (model_off)
    printf("\n  the run's parameters are not the committed model's: another model, or the "
           "baseline's with another precision, LoRA or sharding\n");
  if (!r.peak) printf("\n  the record has no GPU memory samples (no NVML on that machine?)\n");
  if (r.tps <= 0)
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
