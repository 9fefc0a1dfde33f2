/* estimate --dry-run: the job built by transformers on meta tensors (or
 * CPU tensors, under autocast) and traced through the model of the caching
 * allocator, by `vramledger trace` running python/vramledger/measure.py.
 * docs/cmd/estimate.md, "Dry run". */
#ifndef VRAMLEDGER_DRYRUN_H
#define VRAMLEDGER_DRYRUN_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "jobflags.h"
#include "vramledger/arch.h"
#include "vramledger/catalog.h"
#include "vramledger/render.h"

/* The model of an estimate, read for the formula and for a dry run. */
struct dry_model {
  char path[4096];          /* the config file read (the dry run's model) */
  char model_type[64];      /* as the config says */
  bool formula;             /* the estimator reads it: arch is filled */
  bool unknown;             /* a model_type the estimator does not describe */
  char why_no_formula[512]; /* the reader's message, when !formula */
  bool run;                 /* a dry run is to be made */
  bool automatic;           /* ... because the type is unknown, not --dry-run */
  char lora_targets[512];   /* a LoRA job's targets, by transformers' names (traced_targets) */
};

/* What a dry run found: the replay's peaks from the mark 'measure' (the
 * step the GPU run measures) on. */
struct dry_run {
  uint64_t peak_allocated_bytes, peak_reserved_bytes;
  const char *device; /* "meta", or "cpu" for autocast */
  double seconds;     /* the trace, wall time */
  bool complete;      /* the job ran to its end (always, once shown) */
  bool oom;           /* the replay ran out of --gpu's memory */
};

/*! Take --dry-run and --no-dry-run out of argv: the rest go to
 * rest[0..*n) (rest[0] = argv[0]; rest holds argc entries). *dry and
 * *no_dry say whether each was there. */
void dry_run_take_flag(int argc, const char **argv, const char **rest, int *n, bool *dry,
                       bool *no_dry);

/*! The first setting of e's job a dry run cannot express (measure.py runs
 * a plain loop on one GPU): its flag, with why[] saying what the dry run
 * does instead; NULL when it expresses them all. */
const char *dry_run_unsupported(const struct est *e, char *why, size_t n);

/*! Read --model for the formula (into *arch) and decide whether a dry run
 * is made: with want (--dry-run), or on its own for a model_type the
 * estimator does not describe when the Python has torch and transformers
 * (said on stderr; when it has not, a note points to --dry-run), unless
 * refused (--no-dry-run: the formula alone, said). Prints what is wrong.
 * @return 0 or an exit code. */
int dry_run_model(const struct est *e, bool want, bool refused, struct vl_arch *arch,
                  struct dry_model *dm);

/*! Run the dry run of e's job on dm's config: `vramledger trace` of
 * measure.py in a temporary folder, removed afterwards. A job that fails
 * is an error naming its cause (the end of its messages), never a number.
 * @return 0 or an exit code (message printed). */
int dry_run_run(const struct est *e, const struct dry_model *dm, struct dry_run *out);

/* What the output shows. */
struct dry_view {
  const struct vl_estimate_view *formula; /* NULL: no formula (an unknown type refused) */
  const struct dry_model *dm;
  const struct dry_run *d;
  const struct est *e;
  const struct vl_gpu *gpu;    /* NULL: no fit check */
  uint64_t cuda_context_bytes; /* added to the reserved peak for the fit */
};

/*! Write the estimate with its dry run: the formula's output (when there
 * is one) and the dry run's block (text, md) or "dry_run" object (JSON).
 * *fits is the dry run's fit decision with --gpu. @return 0, or -1 on a
 * write error. */
int dry_run_render(FILE *out, enum vl_format fmt, const struct dry_view *v, bool *fits);

#include "vramledger/banned.h"
#endif
