/* vramledger estimate: the memory bill of a training step or a generation.
 * docs/cmd/estimate.md is the manual and the --help text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vramledger/steptime.h"
#include "commands.h"
#include "dryrun.h"
#include "jobflags.h"
#include "vramledger/alloc.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/render.h"

/* The formula's bill of e's job (with --max-batch/--max-seq, of the best
 * value, left in e's job). @return 0 or an exit code (message printed). */
static int formula(struct est *e, const struct vl_arch *arch, const struct vl_gpu *gpu,
                   struct vl_bill *bill, uint64_t *best) {
  struct vl_err err = {""};
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  if (gpu) vl_overheads_for_gpu(&ov, gpu); /* the card's cuBLAS workspaces */
  vl_status s;
  *best = 0;
  if (e->search) {
    s = vl_search_max(arch, &e->job, &ov, gpu, e->margin,
                      e->search == 1 ? VL_SEARCH_BATCH : VL_SEARCH_SEQ, best, bill, &err);
    if (s == VL_OK && *best == 0) /* show the bill of 1 to say why */
      s = vl_bill_compute(arch, &e->job, &ov, bill, &err);
    if (s == VL_OK && *best) {
      if (e->search == 1)
        e->job.batch = *best;
      else
        e->job.seq = *best;
    }
  } else {
    s = vl_bill_compute(arch, &e->job, &ov, bill, &err);
  }
  if (s == VL_OK) s = vl_bill_representable(bill, &err); /* every number printed exact */
  if (s == VL_OK) return 0;
  cli_error("cannot estimate '%s': %s", e->model, err.msg);
  return s == VL_EOVERFLOW || s == VL_ERANGE || s == VL_ECONFLICT || s == VL_EINVAL ? VL_EXIT_USAGE
                                                                                    : VL_EXIT_ERROR;
}

/* --seq not given: the default (2048 for training, 512 for a prompt) unless
 * the model's learned positions hold fewer, then as many as they hold
 * (a generate()'s new tokens included), said on stderr */
static void default_seq(struct est *e, const struct vl_arch *arch) {
  if (e->seq_given || vl_arch_is_vision(arch)) return; /* an image: est_shape */
  if (!arch->learned_pos) return;
  uint64_t extra = e->job.task == VL_TASK_INFER ? e->job.new_tokens : 0;
  if (e->job.seq + extra <= arch->max_positions || arch->max_positions <= extra) return;
  e->job.seq = arch->max_positions - extra;
  fprintf(stderr,
          "vramledger: --seq not given: %llu tokens, what %s's learned positions hold "
          "(the default is the smaller of 2048 and that)\n",
          (unsigned long long)e->job.seq, arch->model_type);
}

/* A model transformers has no SDPA path for (gpt-oss's attention sinks,
 * DeBERTa-v2) runs eagerly (vl_arch_eager_only), so the job is estimated,
 * echoed and dry-run as eager, said on stderr */
static void eager_only(struct est *e, const struct vl_arch *arch) {
  if (!vl_arch_eager_only(arch) || e->job.attention == VL_ATTN_EAGER) return;
  e->job.attention = VL_ATTN_EAGER;
  fprintf(stderr, "vramledger: %s runs eager attention: transformers has no SDPA path for %s\n",
          arch->model_type, arch->attn_sinks ? "its attention sinks" : "it");
}

/* --dry-run given: refuse what it cannot express. @return 0 or VL_EXIT_USAGE. */
static int check_dry_run(const struct est *e) {
  char why[256];
  const char *flag = dry_run_unsupported(e, why, sizeof why);
  if (!flag) return 0;
  cli_error("--dry-run cannot express %s: %s", flag, why);
  if (strstr(why, ": give ") || strstr(why, ": add ")) /* why says what to give */
    cli_hint("or drop --dry-run for the formula alone");
  else
    cli_hint("drop %s for the dry run, or drop --dry-run for the formula alone", flag);
  return VL_EXIT_USAGE;
}

/* --list-models, alone. @return -1 when not given, else an exit code. */
static int list_models(int argc, const char **argv) {
  int at = -1;
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--list-models") == 0) at = i;
  if (at < 0) return -1;
  if (argc != 2) {
    cli_error("--list-models takes no other flag (it lists the models --model names)");
    return VL_EXIT_USAGE;
  }
  return cli_list_models(stdout) == 0 ? VL_EXIT_OK : VL_EXIT_ERROR;
}

int cmd_estimate(int argc, const char **argv) {
  int listed = list_models(argc, argv);
  if (listed >= 0) return listed;
  const char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  int n = 0;
  bool dry = false, no_dry = false;
  dry_run_take_flag(argc, argv, args, &n, &dry, &no_dry);
  struct est e;
  est_init(&e);
  int rc = est_parse(n, args, &e);
  free(args); /* e keeps pointers into argv, not into args */
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
  if (dry && no_dry) {
    cli_error("--dry-run and --no-dry-run ask for opposite things");
    cli_hint("give one: --dry-run traces the job, --no-dry-run keeps the formula alone");
    return VL_EXIT_USAGE;
  }
  if (dry && (rc = check_dry_run(&e))) return rc;

  struct vl_arch arch;
  struct dry_model dm;
  if ((rc = dry_run_model(&e, dry, no_dry, &arch, &dm))) return rc;
  if (dm.formula && (rc = est_shape(&e, &arch))) return rc;
  default_seq(&e, &arch);
  eager_only(&e, &arch);
  if (dm.formula) est_target_seq(&e, &arch);
  struct vl_catalog cat;
  const struct vl_gpu *gpu;
  if ((rc = est_gpu(&e, &cat, &gpu))) return rc;
  struct vl_bill *bill = vl_calloc(1, sizeof *bill);
  if (!bill) {
    cli_error("out of memory");
    vl_catalog_release(&cat);
    return VL_EXIT_ERROR;
  }
  uint64_t best = 0;
  if (dm.formula && (rc = formula(&e, &arch, gpu, bill, &best))) goto done;

  struct dry_run d;
  if (dm.run && (rc = dry_run_run(&e, &dm, &d))) {
    if (!(dm.automatic && dm.formula)) goto done;
    dm.run = false; /* an automatic dry run failed: the approximate estimate, as said */
  }
  struct vl_fit fit;
  if (gpu && dm.formula) vl_fit_check(vl_bill_budget_bytes(bill), gpu, e.margin, &fit);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  if (gpu) vl_overheads_for_gpu(&ov, gpu);
  struct vl_context_carry carry;
  if (gpu) vl_context_carry(gpu, &ov, &e.job, &carry);
  struct vl_step_time time;
  bool timed = gpu && e.job.task == VL_TASK_TRAIN && dm.formula;
  if (timed) {
    struct vl_err err = {0};
    if (vl_step_time(&arch, &e.job, gpu, &time, &err) != VL_OK) {
      cli_error("%s", err.msg);
      rc = VL_EXIT_USAGE;
      goto done;
    }
  }
  char name[256];
  struct vl_estimate_view view = {
      .model_name = cli_model_name(e.model, name, sizeof name),
      .arch = &arch,
      .job = &e.job,
      .bill = bill,
      .gpu = gpu,
      .fit = gpu ? &fit : NULL,
      .explain = e.explain,
      .searched = e.search,
      .search_best = best,
      .version = VL_VERSION,
      .carry = gpu ? &carry : NULL,
      .context_edge = gpu && dm.formula && vl_fit_near_edge(&fit, carry.range_bytes),
      .time = timed ? &time : NULL,
      .recipe = e.recipe,
  };
  struct dry_view dv = {dm.formula ? &view : NULL, &dm, &d, &e, gpu, vl_context_bytes(&ov, &e.job)};
  bool fits = gpu ? dm.formula && fit.fits : true;
  int w =
      dm.run ? dry_run_render(stdout, e.fmt, &dv, &fits) : vl_render_estimate(stdout, e.fmt, &view);
  if (w != 0) {
    cli_error("cannot write the output");
    rc = VL_EXIT_ERROR;
  } else if (e.search) {
    rc = best ? VL_EXIT_OK : VL_EXIT_NOFIT;
  } else {
    rc = fits ? VL_EXIT_OK : VL_EXIT_NOFIT; /* with a dry run, its fit decides */
  }
done:
  vl_free(bill);
  vl_catalog_release(&cat);
  return rc;
}
