/* vramledger estimate: the memory bill of a training step or a generation.
 * docs/cmd/estimate.md is the manual and the --help text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/render.h"

int cmd_estimate(int argc, const char **argv) {
  struct est e;
  est_init(&e);
  int rc = est_parse(argc, argv, &e);
  if (rc) return rc;
  if (e.help) {
    fputs(vl_help_estimate, stdout);
    return VL_EXIT_OK;
  }
  if (!e.model) {
    cli_error("estimate needs --model FILE|NAME");
    cli_hint("for example: vramledger estimate --model llama-3-8b --batch 4 --seq 2048");
    return VL_EXIT_USAGE;
  }
  if (e.search && !e.gpu) {
    cli_error("--%s needs --gpu NAME to know what must fit",
              e.search == 1 ? "max-batch" : "max-seq");
    return VL_EXIT_USAGE;
  }

  struct vl_arch arch;
  if ((rc = cli_load_model(e.model, &arch))) return rc;
  struct vl_err err = {""};
  vl_status s;

  struct vl_catalog cat;
  const struct vl_gpu *gpu;
  if ((rc = est_gpu(&e, &cat, &gpu))) return rc;

  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill *bill = vl_calloc(1, sizeof *bill);
  if (!bill) {
    cli_error("out of memory");
    vl_catalog_release(&cat);
    return VL_EXIT_ERROR;
  }
  uint64_t best = 0;
  if (e.search) {
    s = vl_search_max(&arch, &e.job, &ov, gpu, e.margin,
                      e.search == 1 ? VL_SEARCH_BATCH : VL_SEARCH_SEQ, &best, bill, &err);
    if (s == VL_OK && best == 0) /* show the bill of 1 to say why */
      s = vl_bill_compute(&arch, &e.job, &ov, bill, &err);
    if (s == VL_OK && best) {
      if (e.search == 1)
        e.job.batch = best;
      else
        e.job.seq = best;
    }
  } else {
    s = vl_bill_compute(&arch, &e.job, &ov, bill, &err);
  }
  if (s != VL_OK) {
    cli_error("cannot estimate '%s': %s", e.model, err.msg);
    vl_free(bill);
    vl_catalog_release(&cat);
    return s == VL_EOVERFLOW || s == VL_ERANGE || s == VL_ECONFLICT || s == VL_EINVAL
               ? VL_EXIT_USAGE
               : VL_EXIT_ERROR;
  }
  struct vl_fit fit;
  if (gpu) vl_fit_check(vl_bill_budget_bytes(bill), gpu, e.margin, &fit);
  const char *slash = strrchr(e.model, '/');
  struct vl_estimate_view view = {
      .model_name = slash ? slash + 1 : e.model,
      .arch = &arch,
      .job = &e.job,
      .bill = bill,
      .gpu = gpu,
      .fit = gpu ? &fit : NULL,
      .explain = e.explain,
      .searched = e.search,
      .search_best = best,
      .version = VL_VERSION,
  };
  if (vl_render_estimate(stdout, e.fmt, &view) != 0) {
    cli_error("cannot write the output");
    rc = VL_EXIT_ERROR;
  } else if (e.search) {
    rc = best ? VL_EXIT_OK : VL_EXIT_NOFIT;
  } else {
    rc = gpu && !fit.fits ? VL_EXIT_NOFIT : VL_EXIT_OK;
  }
  vl_free(bill);
  vl_catalog_release(&cat);
  return rc;
}
