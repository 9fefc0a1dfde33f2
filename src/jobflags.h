/* The flags that describe a job, shared by estimate, commit and check:
 * one parser, one meaning. */
#ifndef VRAMLEDGER_JOBFLAGS_H
#define VRAMLEDGER_JOBFLAGS_H
#include <stdbool.h>
#include <stdint.h>

#include "vramledger/catalog.h"
#include "vramledger/model.h"
#include "vramledger/render.h"

struct est {
  struct vl_job job;
  const char *model;
  const char *gpu;
  const char *catalog;
  double margin;
  int search; /* 0, 1 batch, 2 seq */
  enum vl_format fmt;
  bool explain, help;
  char targets[256];
  bool seq_given;
  bool precision_given;
  const char *recipe_file;             /* --recipe FILE, or NULL */
  const struct vl_recipe_view *recipe; /* its keys, for the renderers; NULL none */
  uint64_t given;                      /* the flags given, a bit per option (est_given) */
};

/*! Was the job flag (its name without "--", as "batch") given? */
bool est_given(const struct est *e, const char *flag);

/*! Refuse, naming the first, any of flags[] (names without "--",
 * NULL-terminated) that was given: a command's flags that it does not
 * take, because it chooses them itself (why: "plan searches it").
 * @return 0 or VL_EXIT_USAGE (said). */
int est_refuse_given(const struct est *e, const char *const *flags, const char *why);

/*! The input's shape against the model's type, once it is loaded: a
 * vision model takes --image-size (default the config's image_size, said
 * on stderr; job.seq set to the side) and refuses --seq and --max-seq; a
 * text model refuses --image-size, one without an encoder and a decoder
 * --target-seq, naming its model type. @return 0 or VL_EXIT_USAGE (said). */
int est_shape(struct est *e, const struct vl_arch *arch);
/*! An encoder-decoder's training without --target-seq: the decoder's
 * tokens are --seq's (its final value), said on stderr. */
void est_target_seq(struct est *e, const struct vl_arch *arch);

/*! The first job flag given (its name without "--", in the table's
 * order) that is not in except[] (NULL-terminated), or NULL. */
const char *est_first_given(const struct est *e, const char *const *except);

/*! Defaults: vl_job_init, margin 10 %. */
void est_init(struct est *e);
/*! Parse estimate flags (all of argv[1..argc)), a recipe under them
 * (est_recipe), refuse the inert (est_refuse_inert); applies the task's
 * defaults afterwards (src/jobparse.c). @return 0 or an exit code (message
 * printed). */
int est_parse(int argc, const char **argv, struct est *e);
/*! The job flags of argv[1..argc) into e, nothing else (no defaults, no
 * recipe). @return 0 or an exit code (message printed). */
int est_parse_flags(int argc, const char **argv, struct est *e);
/*! A flag given that changes nothing in the job as the others give it
 * (--lora-targets without --lora-rank, a training flag in inference, ...)
 * refused, naming what it needs. @return 0 or VL_EXIT_USAGE (said). */
int est_refuse_inert(const struct est *e);
/*! --recipe given (e->recipe_file): the recipe's flags, then argv's over
 * them (src/recipe_flags.c); e->recipe set, a summary on stderr. @return 0 or an
 * exit code (message printed). */
int est_recipe(struct est *e, int argc, const char **argv);
/*! Load the GPU catalog: file, else the bundled data/gpus.json. The
 * caller releases cat. @return 0 or an exit code (message printed). */
int est_catalog(const char *file, struct vl_catalog *cat);
/*! Load the catalog and find e->gpu in it (NULL when no --gpu). The caller
 * releases cat. @return 0 or an exit code (message printed). */
int est_gpu(const struct est *e, struct vl_catalog *cat, const struct vl_gpu **gpu);

/*! The cards of a --gpu LIST ("a100-80gb,h100"; plan's and sensitivity's
 * --gpus is its alias): pointers into cat in out[0..*n), at most cap.
 * @return 0, or VL_EXIT_USAGE after naming a card the catalog does not
 * have (with the nearest name and the known ones), or more than cap. */
int est_gpu_list(const struct vl_catalog *cat, const char *list, const struct vl_gpu **out,
                 size_t cap, size_t *n);

/*! Take a command's own flags (each with a value) out of argv: names[i]
 * ("--out") gets its value in values[i] (NULL when absent); the other
 * arguments are left in rest[0..*n_rest) with rest[0] = argv[0], for
 * est_parse. @return 0 or VL_EXIT_USAGE (a flag without its value). */
int take_flags(int argc, const char **argv, const char *const *names, const char **values,
               const char **rest, int *n_rest);

/*! A command's own flags (names[], values[] as take_flags) and the job
 * flags of the rest: est_init + est_parse (src/jobparse.c). @return 0 or an
 * exit code. */
int est_parse_with(int argc, const char **argv, const char *const *names, const char **values,
                   struct est *e);

/*! The bill of `job` on card gpu (its cuBLAS workspaces and SMs, as
 * `estimate --gpu` bills them; NULL: the H200's default overheads): *out
 * is allocated (release with vl_free; NULL on failure). Prints nothing:
 * err says why. @return vl_bill_compute's status, or VL_ENOMEM. */
struct vl_bill;
vl_status est_bill(const struct vl_arch *arch, const struct vl_job *job, const struct vl_gpu *gpu,
                   struct vl_bill **out, struct vl_err *err);

#include "vramledger/banned.h"
#endif
