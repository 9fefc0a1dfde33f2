/* estimate --dry-run: see dryrun.h and docs/cmd/estimate.md, "Dry run".
 *
 * The job is python/vramledger/measure.py's, the one the H200 measured
 * (bench/results/dry-run/), given as --config JSON; it runs under
 * `vramledger trace --from-mark measure` on meta tensors (CPU tensors when
 * it needs autocast), in a temporary folder this file removes. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "dryrun.h"
#include "vramledger/alloc.h"
#include "vramledger/model.h"

void dry_run_take_flag(int argc, const char **argv, const char **rest, int *n, bool *dry,
                       bool *no_dry) {
  *n = 0;
  *dry = *no_dry = false;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && strcmp(argv[i], "--dry-run") == 0)
      *dry = true;
    else if (i > 0 && strcmp(argv[i], "--no-dry-run") == 0)
      *no_dry = true;
    else
      rest[(*n)++] = argv[i];
  }
}

/* ---- what the dry run can express ------------------------------------ */

const char *dry_run_unsupported(const struct est *e, char *why, size_t n) {
  const struct vl_job *j = &e->job;
  /* measure.py's job: one GPU, a plain loop (`out = model(...)` held to the
   * step, zero_grad(set_to_none=True)), PyTorch's optimizers */
#define NO(cond, flag, ...)                                                                        \
  do {                                                                                             \
    if (cond) {                                                                                    \
      snprintf(why, n, __VA_ARGS__);                                                               \
      return flag;                                                                                 \
    }                                                                                              \
  } while (0)
  NO(e->search, e->search == 1 ? "--max-batch" : "--max-seq",
     "a dry run traces one job: search with the formula, then dry-run the answer "
     "(--batch N --dry-run)");
  NO(j->dp > 1, "--dp", "the dry run is one process on one GPU");
  NO(j->zero, "--zero", "the dry run is one process on one GPU, without sharding");
  NO(j->tp > 1, "--tp", "the dry run is one process on one GPU");
  NO(j->pp > 1, "--pp", "the dry run is one process on one GPU");
  NO(j->pp_gpipe, "--pp-schedule", "the dry run has no pipeline");
  NO(j->sp, "--sp", "the dry run has no tensor parallelism");
  NO(j->offload != VL_OFFLOAD_NONE, "--offload", "the dry run keeps everything on the GPU");
  NO(j->framework != VL_FW_HF, "--framework",
     "the dry run is PyTorch + transformers (--framework hf)");
  NO(j->loop != VL_LOOP_PLAIN, "--loop", "the dry run's loop is a plain one (--loop plain)");
  NO(j->grads_persist, "--keep-grads", "the dry run's loop zeroes with set_to_none=True");
  NO(j->drop_outputs, "--drop-outputs",
     "the dry run's loop holds the model output through the optimizer step");
  NO(j->ddp_static_graph, "--ddp-static-graph", "the dry run has no DDP");
  NO(j->qlora, "--qlora", "the dry run has no 4-bit base weights (bitsandbytes)");
  NO(j->checkpointing == VL_CKPT_SELECTIVE, "--checkpointing",
     "the dry run recomputes none or full (transformers' gradient checkpointing)");
  NO(j->task == VL_TASK_TRAIN && j->optimizer == VL_OPT_LION, "--optimizer",
     "PyTorch has no Lion: the dry run runs torch.optim's optimizers");
  NO(j->task == VL_TASK_TRAIN && j->optimizer == VL_OPT_ADAM8BIT, "--optimizer",
     "adam8bit's states are bitsandbytes' CUDA kernels, which neither meta nor CPU tensors run");
  NO((j->precision == VL_PREC_MIXED_BF16 || j->precision == VL_PREC_MIXED_FP16) &&
         !j->master_grads_fp32,
     "--precision",
     "the dry run's mixed precision keeps fp32 main gradients, as Megatron-LM does: "
     "add --master-grads fp32");
  NO(j->task == VL_TASK_INFER && j->lora_rank, "--lora-rank",
     "the dry run's generate() has no adapters");
  NO(j->task == VL_TASK_INFER && j->new_tokens == 0, "--new-tokens",
     "the dry run's generate() makes at least one token: give --new-tokens N");
  NO(j->kv_layout != VL_KV_CONTIGUOUS, "--kv-layout",
     "the dry run's generate() has transformers' DynamicCache (contiguous)");
  NO(j->kv_bytes, "--kv-dtype", "the dry run's cache is in the activations' dtype");
#undef NO
  return NULL;
}

static bool needs_autocast(enum vl_precision p) {
  return p == VL_PREC_AMP_BF16 || p == VL_PREC_AMP_FP16;
}

/* ---- the Python that runs it ------------------------------------------ */

static const char *python(void) {
  const char *p = getenv("VRAMLEDGER_PYTHON");
  return p && *p ? p : "python3";
}

/* Which of torch, transformers (and peft) the Python cannot import, into
 * missing[] ("" when none; "python" when it does not run). Looks the
 * modules up without importing them (find_spec: a few milliseconds). */
static void python_missing(bool lora, char *missing, size_t n) {
  char code[256];
  snprintf(code, sizeof code,
           "import importlib.util as u\n"
           "print(', '.join(m for m in ('torch', 'transformers'%s) if u.find_spec(m) is None))",
           lora ? ", 'peft'" : "");
  snprintf(missing, n, "python");
  int fd[2];
  if (pipe(fd) != 0) return;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return;
  }
  if (pid == 0) {
    close(fd[0]);
    int null = open("/dev/null", O_WRONLY);
    if (dup2(fd[1], 1) < 0 || (null >= 0 && dup2(null, 2) < 0)) _exit(126);
    execlp(python(), python(), "-c", code, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[256];
  size_t got = 0;
  while (got + 1 < sizeof buf) {
    ssize_t r = read(fd[0], buf + got, sizeof buf - 1 - got);
    if (r > 0)
      got += (size_t)r;
    else if (r == 0 || errno != EINTR)
      break;
  }
  buf[got] = '\0';
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return; /* "python": it does not run */
  buf[strcspn(buf, "\n")] = '\0';
  snprintf(missing, n, "%.60s", buf);
}

/* "python3 has no torch, transformers" or "'python3' does not run" */
static void say_missing(const char *missing, char *out, size_t n) {
  if (strcmp(missing, "python") == 0)
    snprintf(out, n, "'%s' does not run", python());
  else
    snprintf(out, n, "%s cannot import %s", python(), missing);
}

/* ---- the model ------------------------------------------------------- */

/* Is model_type one vl_arch_supported() lists? */
static bool described(const char *model_type) {
  const char *list = vl_arch_supported();
  size_t len = strlen(model_type);
  for (const char *p = list; *p;) {
    size_t w = strcspn(p, ",");
    if (w == len && strncmp(p, model_type, len) == 0) return true;
    p += w;
    while (*p == ',' || *p == ' ')
      p++;
  }
  return false;
}

/* The config's model_type into dm (a string, or left ""). */
static void peek_type(const char *text, size_t len, struct dry_model *dm) {
  json_t *root = json_loadb(text, len, 0, NULL);
  json_t *mt = root ? json_object_get(root, "model_type") : NULL;
  if (mt && json_is_string(mt))
    snprintf(dm->model_type, sizeof dm->model_type, "%s", json_string_value(mt));
  json_decref(root);
}

/* A config spelled as a path, read here without a word: an unknown
 * model_type is the dry run's to answer, not an error yet. @return 0 when
 * done (dm filled), 1 when cli_load_model_file must read it (and say what
 * is wrong). */
static int read_spelled(const char *model, struct vl_arch *arch, struct dry_model *dm) {
  size_t len = 0;
  char *text = cli_read_file_quiet(model, &len);
  if (!text) return 1;
  snprintf(dm->path, sizeof dm->path, "%s", model);
  peek_type(text, len, dm);
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(text, len, arch, &err);
  vl_free(text);
  dm->unknown = dm->model_type[0] && !described(dm->model_type);
  if (s == VL_OK) {
    dm->formula = true;
    return 0;
  }
  if (!dm->unknown) return 1;
  snprintf(dm->why_no_formula, sizeof dm->why_no_formula, "%s", err.msg);
  return 0;
}

/* A LoRA job's targets as the traced job names them: --lora-targets, or
 * without it the targets the estimate takes (PEFT's default for the type),
 * so that both describe one job (measure.py would otherwise take PEFT's
 * mapping, or fail on a type PEFT has no default for), each by
 * transformers' module name (PEFT matches those: DistilBERT's q_lin, not
 * the inventory's query) */
static void traced_targets(const struct vl_job *j, const struct vl_arch *arch,
                           struct dry_model *dm) {
  if (!j->lora_rank) return;
  const char *names[VL_MAX_LORA_TARGETS + 4];
  bool peft;
  int n = j->n_lora_targets;
  for (int i = 0; i < n && i < VL_MAX_LORA_TARGETS; i++)
    names[i] = j->lora_targets[i];
  if (!n) n = vl_lora_default_targets(arch, names, &peft);
  size_t o = 0;
  for (int i = 0; i < n; i++) {
    int w = snprintf(dm->lora_targets + o, sizeof dm->lora_targets - o, "%s%s", i ? "," : "",
                     vl_lora_module_name(arch, names[i]));
    if (w < 0 || (size_t)w >= sizeof dm->lora_targets - o) break;
    o += (size_t)w;
  }
}

int dry_run_model(const struct est *e, bool want, bool refused, struct vl_arch *arch,
                  struct dry_model *dm) {
  memset(dm, 0, sizeof *dm);
  char where[PATH_MAX], bundled[64];
  int rc = cli_locate_model(e->model, where, sizeof where, bundled, sizeof bundled);
  if (rc) return rc;
  if (bundled[0] || read_spelled(where, arch, dm)) {
    struct cli_model m;
    rc = cli_load_model_file(where, arch, &m); /* a path: no second note */
    vl_free(m.text);
    if (rc) return rc;
    dm->formula = true;
    snprintf(dm->path, sizeof dm->path, "%s", m.path);
    snprintf(dm->model_type, sizeof dm->model_type, "%s", arch->model_type);
    dm->unknown = !described(arch->model_type);
    traced_targets(&e->job, arch, dm);
  }
  dm->run = want;
  if (want || !dm->unknown) return 0;
  if (refused) { /* --no-dry-run: the formula, whatever is installed */
    if (!dm->formula) {
      cli_error("cannot use '%s': %s", dm->path, dm->why_no_formula);
      cli_hint("only a dry run can describe it: drop --no-dry-run");
      return VL_EXIT_ERROR;
    }
    fprintf(stderr,
            "vramledger: note: model_type '%s' is not described, so the estimate is approximate "
            "(--no-dry-run: no dry run)\n",
            dm->model_type);
    return 0;
  }

  /* a model_type nobody described: transformers knows it, if it is there.
   * On its own only on meta tensors: autocast's dry run computes on the
   * CPU and holds the job's tensors in host memory, so it is asked for. */
  char why[256], missing[64] = "", cause[512], said[160];
  const char *flag = dry_run_unsupported(e, why, sizeof why);
  bool autocast = needs_autocast(e->job.precision);
  if (!flag) python_missing(e->job.lora_rank > 0, missing, sizeof missing);
  if (!flag && !autocast && !missing[0]) {
    fprintf(stderr,
            "vramledger: note: model_type '%s' is not described: a dry run builds it with "
            "transformers (%s) on meta tensors and traces it, which takes a while\n",
            dm->model_type, python());
    dm->run = dm->automatic = true;
    return 0;
  }
  size_t o = 0;
  cause[0] = '\0';
  if (flag)
    o += (size_t)snprintf(cause, sizeof cause, "but it cannot express %s: %.250s", flag, why);
  if (!flag && missing[0]) {
    say_missing(missing, said, sizeof said);
    o += (size_t)snprintf(cause, sizeof cause,
                          "it needs a Python with torch and transformers: %s, and "
                          "VRAMLEDGER_PYTHON names another",
                          said);
  }
  if (!flag && autocast && o < sizeof cause)
    snprintf(cause + o, sizeof cause - o,
             "%s%s runs on the CPU (autocast has no meta tensors), so only when asked for",
             o ? "; " : "", vl_precision_name(e->job.precision));
  if (!dm->formula) {
    cli_error("cannot use '%s': %s", dm->path, dm->why_no_formula);
    cli_hint("or let transformers build it with --dry-run: %s", cause);
    return VL_EXIT_ERROR;
  }
  fprintf(stderr,
          "vramledger: note: model_type '%s' is not described, so the estimate is approximate; "
          "--dry-run builds it with transformers for the exact one: %s\n",
          dm->model_type, cause);
  return 0;
}

/* ---- running it ------------------------------------------------------ */

/* measure.py's --config: the fields of its suite entries (entry_of_config).
 * The caller frees the result with free(). */
static char *job_config(const struct est *e, const struct dry_model *dm, const char *model) {
  const struct vl_job *j = &e->job;
  json_t *c = json_object();
  json_object_set_new(c, "name", json_string("estimate-dry-run"));
  json_object_set_new(c, "model", json_string(model));
  json_object_set_new(c, "task", json_string(j->task == VL_TASK_INFER ? "infer" : "train"));
  json_object_set_new(c, "precision", json_string(vl_precision_name(j->precision)));
  json_object_set_new(c, "attention", json_string(vl_attention_name(j->attention)));
  json_object_set_new(c, "batch", json_integer((json_int_t)j->batch));
  json_object_set_new(c, "seq", json_integer((json_int_t)j->seq));
  if (j->image_size) /* a vision model's side (measure.py: interpolate_pos_encoding if needed) */
    json_object_set_new(c, "image_size", json_integer((json_int_t)j->image_size));
  if (j->target_seq && j->task == VL_TASK_TRAIN) /* an encoder-decoder's labels: B x target_seq */
    json_object_set_new(c, "target_seq", json_integer((json_int_t)j->target_seq));
  if (j->task == VL_TASK_INFER) {
    json_object_set_new(c, "new_tokens", json_integer((json_int_t)j->new_tokens));
  } else {
    json_object_set_new(c, "optimizer", json_string(vl_optimizer_name(j->optimizer)));
    json_object_set_new(c, "optimizer_impl", json_string(vl_opt_impl_name(j->opt_impl)));
    json_object_set_new(c, "checkpointing", json_string(vl_ckpt_name(j->checkpointing)));
    json_object_set_new(c, "grad_accum", json_integer((json_int_t)j->grad_accum));
    json_object_set_new(c, "lora", json_integer((json_int_t)j->lora_rank));
    char t[512];
    vl_job_lora_targets(j, t, sizeof t); /* a type the estimator does not read: as given */
    if (j->lora_rank && (dm->lora_targets[0] || t[0]))
      json_object_set_new(c, "lora_targets",
                          json_string(dm->lora_targets[0] ? dm->lora_targets : t));
  }
  char *s = json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(c);
  return s;
}

/* Remove a folder this file made, with what the trace left in it. */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char p[PATH_MAX];
      struct stat st;
      snprintf(p, sizeof p, "%.3000s/%s", dir, de->d_name);
      if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
        remove_tree(p);
      else
        unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* Run argv with stdout and stderr into files; SIGINT and SIGQUIT go to
 * the child alone while we wait, so the folder is removed after a ^C.
 * @return the exit status, 128 + a signal, or -1 when it did not start. */
static int run_child(const char *const *argv, const char *out, const char *err) {
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
    setenv("CUDA_VISIBLE_DEVICES", "", 1); /* a dry run never touches a GPU */
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status = 0, w = pid > 0 ? 0 : -1;
  while (pid > 0 && (w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (pid < 0 || w < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The line of the job's messages that names the cause: the last Python
 * exception ("ModuleNotFoundError: No module named 'transformers'"), else
 * the last error vramledger said, else the last line. */
static void find_cause(char *text, char *cause, size_t n) {
  const char *exc = NULL, *ours = NULL, *last = NULL;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    if (!*line) continue;
    last = line;
    size_t w = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
    if (w > 5 && line[w] == ':' &&
        (strstr(line, "Error:") == line + w - 5 || strstr(line, "Exception:") == line + w - 9))
      exc = line;
    if (strncmp(line, "vramledger: error: ", 19) == 0) ours = line + 19;
  }
  snprintf(cause, n, "%.400s", exc ? exc : ours ? ours : last ? last : "it said nothing");
}

/* The job failed: say why, with the end of its messages. An automatic
 * dry run of a type the formula reads approximately says it as a note:
 * the approximate estimate follows. */
static int failed(const char *model, const struct dry_model *dm, int rc, const char *errfile) {
  size_t len = 0;
  char *text = cli_read_file_quiet(errfile, &len);
  char *tail = text ? text + (len > 2000 ? len - 2000 : 0) : NULL;
  if (tail && tail != text) { /* from a line's start */
    size_t w = strcspn(tail, "\n");
    tail += w + (tail[w] != '\0');
  }
  if (tail && *tail) {
    fprintf(stderr, "vramledger: the dry run's last messages:\n");
    fputs(tail, stderr);
    if (tail[strlen(tail) - 1] != '\n') fputc('\n', stderr);
  }
  char cause[512], end[64];
  if (tail && *tail)
    find_cause(tail, cause, sizeof cause); /* tail is printed: it may be cut now */
  else
    snprintf(cause, sizeof cause, "it said nothing");
  if (rc > 128)
    snprintf(end, sizeof end, "was killed by signal %d", rc - 128);
  else
    snprintf(end, sizeof end, "exited with status %d", rc);
  if (dm->automatic && dm->formula)
    fprintf(stderr,
            "vramledger: note: the dry run of '%s' failed (the trace %s): %s; the approximate "
            "estimate follows\n",
            model, end, cause);
  else
    cli_error("the dry run of '%s' failed (the trace %s): %s", model, end, cause);
  if (strstr(cause, "No module named"))
    cli_hint("the dry run needs a Python with torch and transformers (and peft for "
             "--lora-rank): install them, or name another with VRAMLEDGER_PYTHON (now %s)",
             python());
  vl_free(text);
  return VL_EXIT_ERROR;
}

/* The trace's JSON: the first replay's peaks. @return true when it is one. */
static bool read_trace(const char *file, struct dry_run *d) {
  json_t *root = json_load_file(file, 0, NULL);
  json_t *r0 = root ? json_array_get(json_object_get(root, "replays"), 0) : NULL;
  json_t *a = r0 ? json_object_get(r0, "peak_allocated_bytes") : NULL;
  json_t *r = r0 ? json_object_get(r0, "peak_reserved_bytes") : NULL;
  bool ok = a && r && json_is_integer(a) && json_is_integer(r);
  if (ok) {
    d->peak_allocated_bytes = (uint64_t)json_integer_value(a);
    d->peak_reserved_bytes = (uint64_t)json_integer_value(r);
    d->complete = json_is_true(json_object_get(root, "complete"));
    d->oom = json_is_true(json_object_get(r0, "oom"));
  }
  json_decref(root);
  return ok;
}

int dry_run_run(const struct est *e, const struct dry_model *dm, struct dry_run *out) {
  memset(out, 0, sizeof *out);
  char script[4096], self[PATH_MAX], model[PATH_MAX];
  snprintf(script, sizeof script, "%s/vramledger/measure.py", cli_python_dir());
  if (access(script, R_OK) != 0) {
    cli_error("cannot find the dry run's job '%s'", script);
    cli_hint("set VRAMLEDGER_PYTHON_DIR to the python/ folder of vramledger");
    return VL_EXIT_ERROR;
  }
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    cli_error("cannot find the vramledger executable: %s", strerror(errno));
    return VL_EXIT_ERROR;
  }
  self[sl] = '\0';
  if (!realpath(dm->path, model)) snprintf(model, sizeof model, "%s", dm->path);
  char missing[64], cause[128];
  python_missing(e->job.lora_rank > 0, missing, sizeof missing);
  if (missing[0]) { /* said before a trace that would end the same way */
    say_missing(missing, cause, sizeof cause);
    cli_error("the dry run needs a Python with torch and transformers%s: %s",
              e->job.lora_rank ? " (and peft for --lora-rank)" : "", cause);
    cli_hint("install them, or name another Python with VRAMLEDGER_PYTHON");
    return VL_EXIT_ERROR;
  }
  out->device = needs_autocast(e->job.precision) ? "cpu" : "meta";
  if (strcmp(out->device, "cpu") == 0)
    fprintf(stderr,
            "vramledger: note: %s needs autocast, which meta tensors do not have: the dry run "
            "computes on the CPU, which takes longer and holds the job's tensors in this "
            "machine's memory\n",
            vl_precision_name(e->job.precision));

  const char *tmp = getenv("TMPDIR");
  char dir[PATH_MAX], run[PATH_MAX], res[PATH_MAX], so[PATH_MAX], se[PATH_MAX];
  snprintf(dir, sizeof dir, "%.3000s/vramledger-dry-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    cli_error("cannot make a folder for the dry run ('%s'): %s", dir, strerror(errno));
    return VL_EXIT_ERROR;
  }
  snprintf(run, sizeof run, "%.3000s/run", dir);
  snprintf(res, sizeof res, "%.3000s/measure.json", dir);
  snprintf(so, sizeof so, "%.3000s/trace.json", dir);
  snprintf(se, sizeof se, "%.3000s/messages.txt", dir);
  char *config = job_config(e, dm, model);
  /* --gpu: the replay runs out of that card's memory as the GPU would (a
   * card of another --catalog: trace reads the bundled one, so not there) */
  const char *gpu = e->gpu && !e->catalog ? e->gpu : NULL;
  const char *argv[24];
  int k = 0;
  argv[k++] = self;
  argv[k++] = "trace";
  argv[k++] = "--out";
  argv[k++] = run;
  argv[k++] = "--format";
  argv[k++] = "json";
  argv[k++] = "--from-mark";
  argv[k++] = "measure";
  if (gpu) {
    argv[k++] = "--gpu";
    argv[k++] = gpu;
  }
  if (e->job.allocator == VL_ALLOC_EXPANDABLE) argv[k++] = "--expandable";
  argv[k++] = "--";
  argv[k++] = python();
  argv[k++] = script;
  argv[k++] = res;
  argv[k++] = "--in-process";
  argv[k++] = "--device";
  argv[k++] = out->device;
  argv[k++] = "--config";
  argv[k++] = config ? config : "{}";
  argv[k] = NULL;

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = config ? run_child(argv, so, se) : -1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  out->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  free(config);
  int ret = 0;
  if (rc < 0) {
    cli_error("cannot start the dry run ('%s trace'): %s", self, strerror(errno));
    ret = VL_EXIT_ERROR;
  } else if ((rc != 0 && rc != VL_EXIT_NOFIT) || !read_trace(so, out) || !out->complete ||
             (rc == VL_EXIT_NOFIT && !out->oom)) {
    ret = failed(e->model, dm, rc ? rc : 1, se);
  }
  remove_tree(dir);
  return ret;
}

/* ---- showing it ------------------------------------------------------ */

/* (formula - dry) / dry, in percent */
static double pct(uint64_t formula, uint64_t dry) {
  return dry ? 100.0 * ((double)formula - (double)dry) / (double)dry : 0.0;
}

static const char *what_ran(const struct dry_run *d) {
  return strcmp(d->device, "cpu") == 0 ? "CPU tensors under autocast" : "meta tensors";
}

/* The dry run's fit on --gpu: its reserved peak and the CUDA context, as
 * the formula's total counts them. */
static void dry_fit(const struct dry_view *v, struct vl_fit *fit) {
  vl_fit_check(v->d->peak_reserved_bytes + v->cuda_context_bytes, v->gpu, v->e->margin, fit);
  if (v->d->oom) fit->fits = false;
}

static void text_block(FILE *o, bool md, const struct dry_view *v, const struct vl_fit *fit) {
  const struct dry_run *d = v->d;
  const struct vl_bill *b = v->formula ? v->formula->bill : NULL;
  char g1[32], g2[32], by[32];
  uint64_t dry[2] = {d->peak_allocated_bytes, d->peak_reserved_bytes};
  uint64_t formula[2] = {b ? b->peak_allocated_bytes : 0, b ? b->peak_reserved_bytes : 0};
  const char *names[2] = {"peak allocated", "peak reserved"};
  if (md) {
    fprintf(o, "\n**Dry run** (%s, PyTorch's own modules; %.1f s)\n\n", what_ran(d), d->seconds);
    fprintf(o, "| | bytes | dry run | formula | formula vs dry run |\n|---|---:|---:|---:|---:|\n");
  } else {
    fprintf(o, "\n  dry run (%s, PyTorch's own modules), %.1f s\n", what_ran(d), d->seconds);
  }
  for (int i = 0; i < 2; i++) {
    vl_fmt_gib(g1, sizeof g1, dry[i]);
    if (md && b)
      fprintf(o, "| %s | %s | %s | %s | %+.1f %% |\n", names[i], vl_fmt_int(by, sizeof by, dry[i]),
              g1, vl_fmt_gib(g2, sizeof g2, formula[i]), pct(formula[i], dry[i]));
    else if (md)
      fprintf(o, "| %s | %s | %s | | |\n", names[i], vl_fmt_int(by, sizeof by, dry[i]), g1);
    else if (b)
      fprintf(o, "  %-30s %10s   formula %s (%+.1f %%)\n", names[i], g1,
              vl_fmt_gib(g2, sizeof g2, formula[i]), pct(formula[i], dry[i]));
    else
      fprintf(o, "  %-30s %10s\n", names[i], g1);
  }
  if (!v->gpu) return;
  const char *name = v->gpu->name;
  if (d->oom)
    fprintf(o,
            md ? "\n**%s**: the dry run's replay ran out of its memory: does not fit.\n"
               : "  %s: the replay ran out of its memory: does not fit\n",
            name);
  else if (fit->fits)
    fprintf(o,
            md ? "\n**%s** (dry run + %s CUDA context): fits, headroom %s.\n"
               : "  %s (dry run + %s CUDA context): fits, headroom %s\n",
            name, vl_fmt_gib(g1, sizeof g1, v->cuda_context_bytes),
            vl_fmt_gib(g2, sizeof g2, (uint64_t)fit->headroom_bytes));
  else
    fprintf(o,
            md ? "\n**%s** (dry run + %s CUDA context): does not fit, short by %s.\n"
               : "  %s (dry run + %s CUDA context): does not fit, short by %s\n",
            name, vl_fmt_gib(g1, sizeof g1, v->cuda_context_bytes),
            vl_fmt_gib(g2, sizeof g2, (uint64_t)-fit->headroom_bytes));
}

static json_t *dry_json(const struct dry_view *v, const struct vl_fit *fit) {
  const struct dry_run *d = v->d;
  const struct vl_bill *b = v->formula ? v->formula->bill : NULL;
  json_t *o = json_object();
  json_object_set_new(o, "device", json_string(d->device));
  json_object_set_new(o, "peak_allocated_bytes", json_integer((json_int_t)d->peak_allocated_bytes));
  json_object_set_new(o, "peak_reserved_bytes", json_integer((json_int_t)d->peak_reserved_bytes));
  json_object_set_new(o, "seconds", json_real(d->seconds));
  json_object_set_new(o, "complete", json_boolean(d->complete));
  json_object_set_new(o, "automatic", json_boolean(v->dm->automatic));
  if (b) {
    json_t *p = json_object();
    json_object_set_new(p, "peak_allocated",
                        json_real(pct(b->peak_allocated_bytes, d->peak_allocated_bytes)));
    json_object_set_new(p, "peak_reserved",
                        json_real(pct(b->peak_reserved_bytes, d->peak_reserved_bytes)));
    json_object_set_new(o, "formula_vs_dry_run_pct", p);
  } else {
    json_object_set_new(o, "formula_vs_dry_run_pct", json_null());
  }
  if (v->gpu) {
    json_object_set_new(o, "oom", json_boolean(d->oom));
    json_object_set_new(o, "fits", json_boolean(fit->fits));
    json_object_set_new(o, "headroom_bytes", json_integer((json_int_t)fit->headroom_bytes));
  }
  return o;
}

/* The estimate's JSON with "dry_run" added: the formula's object is the
 * library's rendering, read back (the library's view has no dry run); an
 * unknown type refused has the model, the job and why there is no formula. */
static int json_out(FILE *out, const struct dry_view *v, const struct vl_fit *fit) {
  json_t *root = NULL;
  if (v->formula) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return -1;
    int rc = vl_render_estimate(m, VL_FMT_JSON, v->formula);
    if (fclose(m) != 0 || rc != 0) {
      free(buf);
      return -1;
    }
    root = json_loadb(buf, len, 0, NULL);
    free(buf);
  } else {
    root = json_object();
    json_object_set_new(root, "schema", json_string("vramledger.estimate/1"));
    json_object_set_new(root, "version", json_string(VL_VERSION));
    json_object_set_new(root, "approximate", json_false());
    json_t *m = json_object();
    char name[256];
    json_object_set_new(m, "name", json_string(cli_model_name(v->e->model, name, sizeof name)));
    json_object_set_new(m, "model_type", json_string(v->dm->model_type));
    json_object_set_new(root, "model", m);
    char *config = job_config(v->e, v->dm, v->dm->path);
    json_t *s = config ? json_loads(config, 0, NULL) : NULL;
    free(config);
    if (s) json_object_del(s, "name");
    if (s) json_object_del(s, "model");
    json_object_set_new(root, "settings", s ? s : json_null());
    json_object_set_new(root, "no_formula", json_string(v->dm->why_no_formula));
    if (v->gpu) {
      json_object_set_new(root, "gpu", json_string(v->gpu->name));
      json_object_set_new(root, "fits", json_boolean(fit->fits));
    }
  }
  if (!root) return -1;
  json_object_set_new(root, "dry_run", dry_json(v, fit));
  int rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(root);
  return rc != 0 || fputc('\n', out) == EOF ? -1 : 0;
}

/* The heading of an estimate without a formula (an unknown type refused):
 * the model, the job, why. */
static void head(FILE *out, bool md, const struct dry_view *v) {
  const struct vl_job *j = &v->e->job;
  char buf[256];
  const char *name = cli_model_name(v->e->model, buf, sizeof buf);
  const char *task = j->task == VL_TASK_TRAIN ? "training step" : "generation";
  const char *why = v->dm->why_no_formula; /* up to its advice: the dry run is the answer */
  int why_len = (int)strcspn(why, ";");
  if (md)
    fprintf(out,
            "## Memory estimate: %s (%s)\n\n%s, micro-batch %llu x seq %llu, %s.\n\nNo formula: "
            "%.*s.\n",
            name, v->dm->model_type, task, (unsigned long long)j->batch, (unsigned long long)j->seq,
            vl_precision_name(j->precision), why_len, why);
  else
    fprintf(out, "%s (%s): %s, per GPU\n  micro-batch %llu x seq %llu, %s\n  no formula: %.*s\n",
            name, v->dm->model_type, task, (unsigned long long)j->batch, (unsigned long long)j->seq,
            vl_precision_name(j->precision), why_len, why);
}

int dry_run_render(FILE *out, enum vl_format fmt, const struct dry_view *v, bool *fits) {
  struct vl_fit fit = {0};
  if (v->gpu) dry_fit(v, &fit);
  *fits = !v->gpu || fit.fits;
  if (fmt == VL_FMT_JSON) return json_out(out, v, &fit);
  if (v->formula) {
    if (vl_render_estimate(out, fmt, v->formula) != 0) return -1;
  } else {
    head(out, fmt == VL_FMT_MD, v);
  }
  text_block(out, fmt == VL_FMT_MD, v, &fit);
  return ferror(out) ? -1 : 0;
}
