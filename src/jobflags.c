/* The job flags: see jobflags.h and docs/cmd/estimate.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobflags.h"
#include "util/internal.h"
#include "vramledger/alloc.h"

enum {
  O_HELP,
  O_MODEL,
  O_TASK,
  O_BATCH,
  O_SEQ,
  O_PRECISION,
  O_OPTIMIZER,
  O_OPT_IMPL,
  O_ATTENTION,
  O_CKPT,
  O_LORA_RANK,
  O_LORA_TARGETS,
  O_QLORA,
  O_ZERO,
  O_DP,
  O_TP,
  O_PP,
  O_PP_SCHEDULE,
  O_SP,
  O_OFFLOAD,
  O_FRAMEWORK,
  O_GRAD_ACCUM,
  O_KEEP_GRADS,
  O_LOOP,
  O_DROP_OUTPUTS,
  O_DDP_STATIC,
  O_MASTER_GRADS,
  O_NEW_TOKENS,
  O_KV_LAYOUT,
  O_KV_BLOCK,
  O_KV_DTYPE,
  O_ALLOCATOR,
  O_GPU,
  O_MARGIN,
  O_MAX_BATCH,
  O_MAX_SEQ,
  O_FORMAT,
  O_EXPLAIN,
  O_RECIPE,
  O_CATALOG,
  O_IMAGE_SIZE,
  O_TARGET_SEQ
};

static const struct cli_opt opts[] = {
    {"help", false, O_HELP},
    {"model", true, O_MODEL},
    {"task", true, O_TASK},
    {"batch", true, O_BATCH},
    {"seq", true, O_SEQ},
    {"precision", true, O_PRECISION},
    {"optimizer", true, O_OPTIMIZER},
    {"optimizer-impl", true, O_OPT_IMPL},
    {"attention", true, O_ATTENTION},
    {"checkpointing", true, O_CKPT},
    {"lora-rank", true, O_LORA_RANK},
    {"lora-targets", true, O_LORA_TARGETS},
    {"qlora", false, O_QLORA},
    {"zero", true, O_ZERO},
    {"dp", true, O_DP},
    {"tp", true, O_TP},
    {"pp", true, O_PP},
    {"pp-schedule", true, O_PP_SCHEDULE},
    {"sp", false, O_SP},
    {"offload", true, O_OFFLOAD},
    {"framework", true, O_FRAMEWORK},
    {"grad-accum", true, O_GRAD_ACCUM},
    {"keep-grads", false, O_KEEP_GRADS},
    {"loop", true, O_LOOP},
    {"drop-outputs", false, O_DROP_OUTPUTS},
    {"ddp-static-graph", false, O_DDP_STATIC},
    {"master-grads", true, O_MASTER_GRADS},
    {"new-tokens", true, O_NEW_TOKENS},
    {"kv-layout", true, O_KV_LAYOUT},
    {"kv-block", true, O_KV_BLOCK},
    {"kv-dtype", true, O_KV_DTYPE},
    {"allocator", true, O_ALLOCATOR},
    {"gpu", true, O_GPU},
    {"margin", true, O_MARGIN},
    {"max-batch", false, O_MAX_BATCH},
    {"max-seq", false, O_MAX_SEQ},
    {"format", true, O_FORMAT},
    {"explain", false, O_EXPLAIN},
    {"recipe", true, O_RECIPE},
    {"catalog", true, O_CATALOG},
    {"image-size", true, O_IMAGE_SIZE},
    {"target-seq", true, O_TARGET_SEQ},
    {NULL, false, 0},
};

static int choose(const char *flag, const char *arg, const char *(*name)(int), int count,
                  int *out) {
  const char *names[16];
  for (int i = 0; i < count && i < 15; i++)
    names[i] = name(i);
  names[count < 15 ? count : 15] = NULL;
  int k = cli_choice(flag, arg, names);
  if (k < 0) return VL_EXIT_USAGE;
  *out = k;
  return 0;
}

/* adapters: the library's name functions take enums */
static const char *n_prec(int i) { return vl_precision_name((enum vl_precision)i); }
static const char *n_opt(int i) { return vl_optimizer_name((enum vl_optimizer)i); }
static const char *n_impl(int i) { return vl_opt_impl_name((enum vl_opt_impl)i); }
static const char *n_attn(int i) { return vl_attention_name((enum vl_attention)i); }
static const char *n_ckpt(int i) { return vl_ckpt_name((enum vl_ckpt)i); }
static const char *n_loop(int i) { return vl_loop_name((enum vl_loop)i); }
static const char *n_fw(int i) { return vl_framework_name((enum vl_framework)i); }
static const char *n_off(int i) { return vl_offload_name((enum vl_offload)i); }
static const char *n_kv(int i) { return vl_kv_layout_name((enum vl_kv_layout)i); }
static const char *n_sched(int i) { return i == 0 ? "1f1b" : i == 1 ? "gpipe" : NULL; }
static const char *n_task(int i) { return i == 0 ? "train" : i == 1 ? "infer" : NULL; }
static const char *n_fmt(int i) { return i == 0 ? "text" : i == 1 ? "json" : i == 2 ? "md" : NULL; }
static const char *n_kvdt(int i) {
  static const char *const n[] = {"auto", "fp32", "bf16", "fp16", "fp8", "int8"};
  return i >= 0 && i < 6 ? n[i] : NULL;
}
static const char *n_alloc(int i) { return vl_allocator_name((enum vl_allocator)i); }
static const char *n_mg(int i) { return i == 0 ? "half" : i == 1 ? "fp32" : NULL; }

_Static_assert(O_TARGET_SEQ < 64, "est.given has a bit per option");

static int on_opt(void *ctx, int id, const char *flag, const char *arg) {
  struct est *e = ctx;
  struct vl_job *j = &e->job;
  int k = 0, rc = 0;
  uint64_t v = 0;
  e->given |= UINT64_C(1) << id;
  switch (id) {
  case O_HELP: e->help = true; return 0;
  case O_MODEL: e->model = arg; return 0;
  case O_TASK:
    if ((rc = choose(flag, arg, n_task, 2, &k))) return rc;
    j->task = k ? VL_TASK_INFER : VL_TASK_TRAIN;
    return 0;
  case O_BATCH: return cli_u64(flag, arg, 1, 1u << 20, &j->batch);
  case O_SEQ: e->seq_given = true; return cli_u64(flag, arg, 1, 1u << 24, &j->seq);
  case O_PRECISION:
    if ((rc = choose(flag, arg, n_prec, VL_PREC_COUNT, &k))) return rc;
    e->precision_given = true;
    j->precision = (enum vl_precision)k;
    return 0;
  case O_OPTIMIZER:
    if ((rc = choose(flag, arg, n_opt, VL_OPT_COUNT, &k))) return rc;
    j->optimizer = (enum vl_optimizer)k;
    return 0;
  case O_OPT_IMPL:
    if ((rc = choose(flag, arg, n_impl, VL_IMPL_COUNT, &k))) return rc;
    j->opt_impl = (enum vl_opt_impl)k;
    j->opt_impl_given = true;
    return 0;
  case O_ATTENTION:
    if ((rc = choose(flag, arg, n_attn, VL_ATTN_COUNT, &k))) return rc;
    j->attention = (enum vl_attention)k;
    return 0;
  case O_CKPT:
    if ((rc = choose(flag, arg, n_ckpt, VL_CKPT_COUNT, &k))) return rc;
    j->checkpointing = (enum vl_ckpt)k;
    return 0;
  case O_LORA_RANK: return cli_u64(flag, arg, 1, 65536, &j->lora_rank);
  case O_LORA_TARGETS: {
    if (strlen(arg) >= sizeof e->targets) {
      cli_error("--lora-targets is too long");
      return VL_EXIT_USAGE;
    }
    snprintf(e->targets, sizeof e->targets, "%s", arg);
    j->n_lora_targets = 0;
    char *p = e->targets;
    while (*p) {
      char *c = strchr(p, ',');
      if (c) *c = '\0';
      if (*p == '\0' || j->n_lora_targets == VL_MAX_LORA_TARGETS) {
        cli_error("--lora-targets: expected up to %d comma-separated module names, got '%s'",
                  VL_MAX_LORA_TARGETS, arg);
        return VL_EXIT_USAGE;
      }
      j->lora_targets[j->n_lora_targets++] = p;
      if (!c) break;
      p = c + 1;
    }
    return 0;
  }
  case O_QLORA: j->qlora = true; return 0;
  case O_ZERO:
    if ((rc = cli_u64(flag, arg, 0, 3, &v))) return rc;
    j->zero = (unsigned)v;
    return 0;
  case O_DP: return cli_u64(flag, arg, 1, 65536, &j->dp);
  case O_TP: return cli_u64(flag, arg, 1, 1024, &j->tp);
  case O_PP: return cli_u64(flag, arg, 1, 1024, &j->pp);
  case O_PP_SCHEDULE:
    if ((rc = choose(flag, arg, n_sched, 2, &k))) return rc;
    j->pp_gpipe = k == 1;
    return 0;
  case O_SP: j->sp = true; return 0;
  case O_OFFLOAD:
    if ((rc = choose(flag, arg, n_off, VL_OFFLOAD_COUNT, &k))) return rc;
    j->offload = (enum vl_offload)k;
    return 0;
  case O_FRAMEWORK:
    if ((rc = choose(flag, arg, n_fw, VL_FW_COUNT, &k))) return rc;
    j->framework = (enum vl_framework)k;
    return 0;
  case O_GRAD_ACCUM: return cli_u64(flag, arg, 1, 65536, &j->grad_accum);
  case O_KEEP_GRADS: j->grads_persist = true; return 0;
  case O_LOOP:
    if ((rc = choose(flag, arg, n_loop, VL_LOOP_COUNT, &k))) return rc;
    j->loop = (enum vl_loop)k;
    return 0;
  case O_DROP_OUTPUTS: j->drop_outputs = true; return 0;
  case O_DDP_STATIC: j->ddp_static_graph = true; return 0;
  case O_MASTER_GRADS:
    if ((rc = choose(flag, arg, n_mg, 2, &k))) return rc;
    j->master_grads_fp32 = k == 1;
    return 0;
  case O_NEW_TOKENS: return cli_u64(flag, arg, 0, 1u << 24, &j->new_tokens);
  case O_KV_LAYOUT:
    if ((rc = choose(flag, arg, n_kv, VL_KV_COUNT, &k))) return rc;
    j->kv_layout = (enum vl_kv_layout)k;
    return 0;
  case O_KV_BLOCK: return cli_u64(flag, arg, 1, 4096, &j->kv_block_tokens);
  case O_ALLOCATOR:
    if ((rc = choose(flag, arg, n_alloc, VL_ALLOC_COUNT, &k))) return rc;
    j->allocator = (enum vl_allocator)k;
    return 0;
  case O_KV_DTYPE: {
    static const uint64_t bytes[] = {0, 4, 2, 2, 1, 1};
    if ((rc = choose(flag, arg, n_kvdt, 6, &k))) return rc;
    j->kv_bytes = bytes[k];
    return 0;
  }
  case O_GPU: e->gpu = arg; return 0;
  case O_MARGIN: {
    double pct;
    if ((rc = cli_double(flag, arg, 0.0, 50.0, &pct))) return rc;
    e->margin = pct / 100.0;
    return 0;
  }
  case O_MAX_BATCH: e->search = 1; return 0;
  case O_MAX_SEQ: e->search = 2; return 0;
  case O_FORMAT:
    if ((rc = choose(flag, arg, n_fmt, 3, &k))) return rc;
    e->fmt = (enum vl_format)k;
    return 0;
  case O_EXPLAIN: e->explain = true; return 0;
  case O_RECIPE: e->recipe_file = arg; return 0;
  case O_CATALOG: e->catalog = arg; return 0;
  case O_IMAGE_SIZE: return cli_u64(flag, arg, 1, 1u << 16, &j->image_size);
  case O_TARGET_SEQ: return cli_u64(flag, arg, 1, 1u << 24, &j->target_seq);
  default: return 0;
  }
}

int est_catalog(const char *file, struct vl_catalog *cat) {
  char path[4096];
  if (file)
    snprintf(path, sizeof path, "%s", file);
  else
    snprintf(path, sizeof path, "%s/gpus.json", cli_data_dir());
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_catalog_parse(text, len, cat, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use GPU catalog '%s': %s", path, err.msg);
    return VL_EXIT_ERROR;
  }
  return 0;
}

static int unknown_gpu(const struct vl_catalog *cat, const char *name) {
  const char *cand[256];
  size_t n = 0;
  for (size_t i = 0; i < cat->n && n < 256; i++)
    cand[n++] = cat->gpus[i].name;
  cli_error("unknown GPU '%s'", name);
  const char *near = cli_nearest(name, cand, n);
  if (near) cli_hint("did you mean '%s'?", near);
  char list[1024];
  cli_join(list, sizeof list, cand, n);
  cli_hint("known GPUs: %s (or add one with --catalog FILE)", list);
  return VL_EXIT_USAGE;
}

void est_init(struct est *e) {
  memset(e, 0, sizeof *e);
  vl_job_init(&e->job);
  e->margin = VL_FIT_MARGIN_DEFAULT;
}

bool est_given(const struct est *e, const char *flag) {
  for (const struct cli_opt *o = opts; o->name; o++)
    if (strcmp(o->name, flag) == 0) return e->given >> o->id & 1;
  return false;
}

const char *est_first_given(const struct est *e, const char *const *except) {
  for (const struct cli_opt *o = opts; o->name; o++) {
    bool skip = false;
    for (size_t i = 0; except[i] && !skip; i++)
      skip = strcmp(o->name, except[i]) == 0;
    if (!skip && (e->given >> o->id & 1)) return o->name;
  }
  return NULL;
}

int est_refuse_given(const struct est *e, const char *const *flags, const char *why) {
  for (size_t i = 0; flags[i]; i++)
    if (est_given(e, flags[i])) {
      cli_error("--%s is not taken here: %s", flags[i], why);
      return VL_EXIT_USAGE;
    }
  return 0;
}

static const char *opt_name(int id) {
  for (const struct cli_opt *o = opts; o->name; o++)
    if (o->id == id) return o->name;
  return "?";
}

/* A flag that changes nothing in the job as the other flags give it is
 * refused, naming what it needs: ignored, the answer would be for a job
 * other than the one meant (--lora-targets without --lora-rank bills no
 * adapters). The first rule a flag breaks is said. */
int est_refuse_inert(const struct est *e) {
  const struct vl_job *j = &e->job;
  bool infer = j->task == VL_TASK_INFER;
  bool ddp = j->dp > 1 && j->zero <= 1 && j->framework == VL_FW_HF; /* bill.c ddp_buckets */
  static const int train_only[] = {
      O_OPTIMIZER,  O_OPT_IMPL,     O_GRAD_ACCUM, O_LOOP,      O_KEEP_GRADS,   O_DROP_OUTPUTS,
      O_DDP_STATIC, O_MASTER_GRADS, O_CKPT,       O_LORA_RANK, O_LORA_TARGETS, O_QLORA,
      O_ZERO,       O_OFFLOAD,      O_FRAMEWORK,  O_SP,        O_PP_SCHEDULE,  O_TARGET_SEQ};
  static const int infer_only[] = {O_NEW_TOKENS, O_KV_LAYOUT, O_KV_BLOCK, O_KV_DTYPE};
  const struct {
    int id;
    bool inert;
    const char *needs;
  } rules[] = {
      {O_LORA_TARGETS, !j->lora_rank, "--lora-rank R (the adapters' rank)"},
      {O_PP_SCHEDULE, j->pp < 2, "a pipeline: --pp 2 or more"},
      {O_KV_BLOCK, j->kv_layout != VL_KV_PAGED,
       "--kv-layout paged (a contiguous cache has no "
       "blocks)"},
      {O_DDP_STATIC, !ddp, "DDP: --dp 2 or more, with --zero 0 or 1 and --framework hf"},
  };
  const char *what = NULL, *needs = NULL;
  for (size_t i = 0; !what && infer && i < sizeof train_only / sizeof train_only[0]; i++)
    if (e->given >> train_only[i] & 1) {
      what = opt_name(train_only[i]);
      needs = "--task train (inference has no optimizer, gradients or activations kept for "
              "backward)";
    }
  for (size_t i = 0; !what && !infer && i < sizeof infer_only / sizeof infer_only[0]; i++)
    if (e->given >> infer_only[i] & 1) {
      what = opt_name(infer_only[i]);
      needs = "--task infer (a training step has no KV cache)";
    }
  for (size_t i = 0; !what && i < sizeof rules / sizeof rules[0]; i++)
    if (e->given >> rules[i].id & 1 && rules[i].inert) {
      what = opt_name(rules[i].id);
      needs = rules[i].needs;
    }
  if (!what) return 0;
  cli_error("--%s has no effect in this job: it needs %s", what, needs);
  return VL_EXIT_USAGE;
}

int est_shape(struct est *e, const struct vl_arch *arch) {
  struct vl_job *j = &e->job;
  if (vl_arch_is_vision(arch)) {
    if (e->seq_given || e->search == 2) {
      cli_error("--%s is not taken by %s, a vision model: its input is an image, not tokens",
                e->seq_given ? "seq" : "max-seq", arch->model_type);
      cli_hint("give the image side in pixels with --image-size N");
      return VL_EXIT_USAGE;
    }
    if (!j->image_size) {
      j->image_size = arch->image_size;
      fprintf(stderr,
              "vramledger: --image-size not given: the image side of the config, %llu pixels\n",
              (unsigned long long)j->image_size);
    }
    j->seq = j->image_size; /* what the records and the dry run's seq carry for an image */
  } else if (j->image_size) {
    cli_error("--image-size is for vision models (vit, resnet): %s takes tokens", arch->model_type);
    cli_hint("give its sequence length with --seq N");
    return VL_EXIT_USAGE;
  }
  if (j->target_seq && !vl_arch_is_seq2seq(arch)) {
    cli_error("--target-seq is for encoder-decoders (t5, bart): %s has no decoder of its own "
              "beside its input",
              arch->model_type);
    cli_hint("give its sequence length with --seq N");
    return VL_EXIT_USAGE;
  }
  return 0;
}

void est_target_seq(struct est *e, const struct vl_arch *arch) {
  struct vl_job *j = &e->job;
  if (!vl_arch_is_seq2seq(arch) || j->target_seq || j->task != VL_TASK_TRAIN) return;
  j->target_seq = j->seq;
  fprintf(stderr,
          "vramledger: --target-seq not given: the decoder's labels as long as --seq, %llu "
          "tokens\n",
          (unsigned long long)j->target_seq);
}

int est_parse_flags(int argc, const char **argv, struct est *e) {
  return cli_parse(argc, argv, opts, on_opt, e);
}

int est_gpu(const struct est *e, struct vl_catalog *cat, const struct vl_gpu **gpu) {
  *gpu = NULL;
  memset(cat, 0, sizeof *cat);
  if (!e->gpu) return 0;
  int rc = est_catalog(e->catalog, cat);
  if (rc) return rc;
  *gpu = vl_catalog_find(cat, e->gpu);
  if (!*gpu) {
    rc = unknown_gpu(cat, e->gpu);
    vl_catalog_release(cat);
  }
  return rc;
}

/* --gpu's longest list: the catalog's names, far more than a list names */
#define GPU_LIST_MAX 4096

int est_gpu_list(const struct vl_catalog *cat, const char *list, const struct vl_gpu **out,
                 size_t cap, size_t *n) {
  char buf[GPU_LIST_MAX];
  struct vl__list l;
  *n = 0;
  if (!vl__list_init_in(&l, list, ',', buf, sizeof buf)) { /* never cut: a cut name is another */
    cli_error("--gpu is longer than %zu bytes: name fewer GPUs (a catalog name once each)",
              sizeof buf - 1);
    return VL_EXIT_USAGE;
  }
  for (char *t; (t = vl__list_next(&l, NULL));) {
    const struct vl_gpu *g = vl_catalog_find(cat, t);
    if (!g) return unknown_gpu(cat, t);
    if (*n == cap) { /* never dropped: the answer would leave out a GPU asked for */
      cli_error("--gpu names more than %zu GPUs: name fewer", cap);
      return VL_EXIT_USAGE;
    }
    out[(*n)++] = g;
  }
  return 0;
}

int take_flags(int argc, const char **argv, const char *const *names, const char **values,
               const char **rest, int *n_rest) {
  int n = 0;
  for (int k = 0; names[k]; k++)
    values[k] = NULL;
  for (int i = 0; i < argc; i++) {
    int k = -1;
    size_t len = 0;
    for (int m = 0; i > 0 && names[m]; m++) {
      len = strlen(names[m]);
      if (strncmp(argv[i], names[m], len) == 0 && (argv[i][len] == '\0' || argv[i][len] == '=')) {
        k = m;
        break;
      }
    }
    if (k < 0) {
      rest[n++] = argv[i];
      continue;
    }
    if (argv[i][len] == '=') {
      values[k] = argv[i] + len + 1;
    } else if (i + 1 < argc) {
      values[k] = argv[++i];
    } else {
      cli_error("option '%s' needs a value", names[k]);
      return VL_EXIT_USAGE;
    }
  }
  *n_rest = n;
  return 0;
}

vl_status est_bill(const struct vl_arch *arch, const struct vl_job *job, const struct vl_gpu *gpu,
                   struct vl_bill **out, struct vl_err *err) {
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  if (gpu) vl_overheads_for_gpu(&ov, gpu); /* its workspaces and SMs, as estimate --gpu bills */
  struct vl_bill *bill = vl_calloc(1, sizeof *bill);
  vl_status s = bill ? vl_bill_compute(arch, job, &ov, bill, err) : VL_ENOMEM;
  if (s == VL_ENOMEM && !bill) snprintf(err->msg, sizeof err->msg, "out of memory");
  if (s != VL_OK) {
    vl_free(bill);
    bill = NULL;
  }
  *out = bill;
  return s;
}
