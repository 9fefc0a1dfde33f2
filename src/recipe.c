/* Fine-tuning recipes (--recipe FILE): see recipe.h and
 * docs/cmd/estimate.md, "Recipes". The file is read by libyaml (a JSON
 * file is YAML too) into a flat list of dotted keys ("model._component_")
 * with their values and lines; its kind is recognised by the keys that
 * only that kind has; each kind's mapping takes the keys it maps, and the
 * rest are looked up in the kind's table of keys: listed as ignored where
 * they change memory or time and the estimate does not model them, passed
 * over where they change neither, else listed as unknown. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "cli.h"
#include "recipe.h"
#include "vramledger/commitment.h"
#include "vramledger/alloc.h"

/* ---- the keys of a file -------------------------------------------- */

#define MAX_KEYS 512
#define MAX_NODES 20000 /* nodes visited: aliases may repeat a subtree */
#define MAX_DEPTH 12

struct rkey {
  char key[128];
  char value[256];
  unsigned line, col;
  bool null, used, cut, said; /* said: its value was complained of */
};

/* what is wrong with the file, said in the order of its lines */
#define MAX_SAID 16
struct said {
  unsigned line;
  char text[512];
};

struct ctx {
  struct recipe *r;
  struct rkey *keys;
  size_t n, visited;
  bool bad;
  const struct kind *kind;
  struct said said[MAX_SAID];
  size_t n_said;
};

static void complain(struct ctx *c, const struct rkey *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void complain(struct ctx *c, const struct rkey *k, const char *fmt, ...) {
  char text[512];
  int o = k ? snprintf(text, sizeof text, "recipe '%s' line %u: %s: ", c->r->file, k->line, k->key)
            : snprintf(text, sizeof text, "recipe '%s': ", c->r->file);
  size_t at = o < 0 ? 0 : (size_t)o;
  va_list ap;
  va_start(ap, fmt);
  if (at < sizeof text) vsnprintf(text + at, sizeof text - at, fmt, ap);
  va_end(ap);
  c->bad = true;
  if (c->n_said == MAX_SAID) { /* past what is kept: said now */
    cli_error("%s", text);
    return;
  }
  c->said[c->n_said].line = k ? k->line : 0;
  memcpy(c->said[c->n_said++].text, text, sizeof text);
}

/* the complaints, by line (stable: the same line keeps its order) */
static void complaints_flush(struct ctx *c) {
  for (size_t i = 1; i < c->n_said; i++)
    for (size_t j = i; j > 0 && c->said[j - 1].line > c->said[j].line; j--) {
      struct said t = c->said[j];
      c->said[j] = c->said[j - 1];
      c->said[j - 1] = t;
    }
  for (size_t i = 0; i < c->n_said; i++)
    cli_error("%s", c->said[i].text);
  c->n_said = 0;
}

static bool scalar_null(const yaml_node_t *n) {
  const char *v = (const char *)n->data.scalar.value;
  return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         (!*v || !strcmp(v, "~") || !strcasecmp(v, "null"));
}

static struct rkey *add_key(struct ctx *c, const char *path, const yaml_node_t *at) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->keys[i].key, path)) {
      complain(c, &c->keys[i], "given twice (lines %u and %zu): keep one", c->keys[i].line,
               (size_t)at->start_mark.line + 1);
      return NULL;
    }
  if (c->n == MAX_KEYS) {
    if (!c->bad) complain(c, NULL, "more than %d keys: not a recipe", MAX_KEYS);
    return NULL;
  }
  struct rkey *k = &c->keys[c->n++];
  memset(k, 0, sizeof *k);
  k->cut = (size_t)snprintf(k->key, sizeof k->key, "%s", path) >= sizeof k->key;
  k->line = (unsigned)at->start_mark.line + 1;
  k->col = (unsigned)at->start_mark.column + 1;
  return k;
}

/* a sequence's scalars joined by ',' ("q_proj,v_proj"); "[...]" holds
 * mappings (axolotl's datasets), which no mapping reads */
static void join_sequence(struct ctx *c, yaml_document_t *d, const yaml_node_t *n, struct rkey *k) {
  size_t o = 0;
  for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    const yaml_node_t *x = yaml_document_get_node(d, *it);
    c->visited++;
    if (!x || x->type != YAML_SCALAR_NODE) {
      snprintf(k->value, sizeof k->value, "[...]");
      return;
    }
    int w = snprintf(k->value + o, sizeof k->value - o, "%s%s", o ? "," : "",
                     (const char *)x->data.scalar.value);
    if (w < 0 || (size_t)w >= sizeof k->value - o) {
      k->cut = true;
      return;
    }
    o += (size_t)w;
  }
}

static void flatten(struct ctx *c, yaml_document_t *d, const yaml_node_t *map, const char *prefix,
                    int depth) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *kn = yaml_document_get_node(d, p->key);
    const yaml_node_t *vn = yaml_document_get_node(d, p->value);
    if (c->bad || ++c->visited > MAX_NODES || !kn || !vn) return;
    if (kn->type != YAML_SCALAR_NODE) {
      fprintf(stderr, "vramledger: error: recipe '%s' line %zu: a key that is not a name\n",
              c->r->file, (size_t)kn->start_mark.line + 1);
      c->bad = true;
      return;
    }
    char path[160];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "",
             (const char *)kn->data.scalar.value);
    if (vn->type == YAML_MAPPING_NODE &&
        vn->data.mapping.pairs.start != vn->data.mapping.pairs.top && depth < MAX_DEPTH) {
      flatten(c, d, vn, path, depth + 1);
      continue;
    }
    struct rkey *k = add_key(c, path, kn);
    if (!k) return;
    if (vn->type == YAML_SCALAR_NODE) {
      k->null = scalar_null(vn);
      k->cut |= (size_t)snprintf(k->value, sizeof k->value, "%s",
                                 (const char *)vn->data.scalar.value) >= sizeof k->value;
    } else if (vn->type == YAML_SEQUENCE_NODE) {
      join_sequence(c, d, vn, k);
    } else {
      snprintf(k->value, sizeof k->value, "{...}");
    }
  }
  if (c->visited > MAX_NODES && !c->bad)
    complain(c, NULL, "more than %d nodes: not a recipe", MAX_NODES);
}

/* @return 0, or VL_EXIT_ERROR (said: the file, line and column) */
static int read_keys(struct ctx *c, const char *text, size_t len) {
  yaml_parser_t p;
  yaml_document_t d;
  if (!yaml_parser_initialize(&p)) {
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &d)) {
    char where[160] = "";
    if (p.context) /* libyaml: "while parsing a block mapping", where that began */
      snprintf(where, sizeof where, " (%s that begins at line %zu)", p.context,
               (size_t)p.context_mark.line + 1);
    cli_error("cannot read recipe '%s': line %zu column %zu: %s%s", c->r->file,
              (size_t)p.problem_mark.line + 1, (size_t)p.problem_mark.column + 1,
              p.problem ? p.problem : "malformed YAML", where);
    cli_hint("a recipe is an axolotl, torchtune or LLaMA-Factory YAML file, or a "
             "TrainingArguments JSON file");
    yaml_parser_delete(&p);
    return VL_EXIT_ERROR;
  }
  const yaml_node_t *root = yaml_document_get_root_node(&d);
  int rc = 0;
  if (!root || root->type != YAML_MAPPING_NODE) {
    cli_error("cannot read recipe '%s': it is %s, not a mapping of keys to values", c->r->file,
              root ? "a single value or a list" : "empty");
    rc = VL_EXIT_ERROR;
  } else {
    flatten(c, &d, root, "", 0);
    if (c->bad) rc = VL_EXIT_USAGE;
  }
  yaml_document_delete(&d);
  yaml_parser_delete(&p);
  return rc;
}

/* ---- values ---------------------------------------------------------- */

static struct rkey *find(struct ctx *c, const char *key) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->keys[i].key, key)) return &c->keys[i];
  return NULL;
}

/* the key, marked as read; NULL when absent */
static struct rkey *take(struct ctx *c, const char *key) {
  struct rkey *k = find(c, key);
  if (k) k->used = true;
  return k;
}

/* YAML 1.1's booleans (JSON's true and false among them): 1, 0, or -1
 * for another value */
static int truth(const struct rkey *k) {
  static const char *const yes[] = {"true", "yes", "on", NULL}, *const no[] = {"false", "no",
                                                                               "off"};
  if (k->null) return 0;
  for (int i = 0; yes[i]; i++) {
    if (!strcasecmp(k->value, yes[i])) return 1;
    if (!strcasecmp(k->value, no[i])) return 0;
  }
  return -1;
}

/* a true/false key (NULL: false) that is true; another value is said once */
static bool is_true(struct ctx *c, struct rkey *k) {
  if (!k) return false;
  int t = truth(k);
  if (t < 0 && !k->said) {
    k->said = true;
    complain(c, k, "expected true or false, got '%s'", k->value);
  }
  return t == 1;
}

/* the value says "nothing": a key that changes nothing is not listed */
static bool off(const struct rkey *k) {
  static const char *const none[] = {"", "0", "0.0", "none", "{...}", "[]", "{}", NULL};
  if (k->null || truth(k) == 0) return true;
  for (int i = 0; none[i]; i++)
    if (!strcasecmp(k->value, none[i])) return true;
  return false;
}

/* a true/false key that is true, marked as read; NULL when absent or
 * false, and when neither after saying what is wrong */
static struct rkey *if_true(struct ctx *c, const char *key) {
  struct rkey *k = take(c, key);
  if (!k) return NULL;
  int t = truth(k);
  if (t < 0) complain(c, k, "expected true or false, got '%s'", k->value);
  return t == 1 ? k : NULL;
}

static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += n)
    if ((p == list || p[-1] == ',' || p[-1] == ' ') && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
      return true;
  return false;
}

/* ---- what a key does ------------------------------------------------- */

/* k sets flag (value NULL for a switch); k NULL: what the kind does
 * whatever its keys say, named by what (a name in parentheses) */
static void set_as(struct ctx *c, const struct rkey *k, const char *what, const char *flag,
                   const char *value) {
  struct recipe *r = c->r;
  if (r->n_set == RECIPE_MAX_SET) return; /* more flags than there are */
  struct recipe_setting *s = &r->set[r->n_set++];
  snprintf(s->key, sizeof s->key, "%s", k ? k->key : what);
  snprintf(s->flag, sizeof s->flag, "%s", flag);
  snprintf(s->value, sizeof s->value, "%s", value ? value : "");
  s->line = k ? k->line : 0;
  if (k && k->cut) complain(c, k, "the value is too long for %s", flag);
}

static void set(struct ctx *c, const struct rkey *k, const char *flag, const char *value) {
  set_as(c, k, "(recipe)", flag, value);
}

static void list(struct recipe_item *items, size_t *n, const struct rkey *k, const char *why) {
  if (*n == RECIPE_MAX_ITEMS) return;
  struct recipe_item *it = &items[(*n)++];
  snprintf(it->key, sizeof it->key, "%s", k->key);
  snprintf(it->value, sizeof it->value, "%s", k->null ? "null" : k->value);
  snprintf(it->why, sizeof it->why, "%s", why ? why : "");
  it->line = k->line;
}

static void ignore(struct ctx *c, const struct rkey *k, const char *why) {
  list(c->r->ignored, &c->r->n_ignored, k, why);
}

static void model_from(struct ctx *c, const struct rkey *k, const char *model) {
  snprintf(c->r->model, sizeof c->r->model, "%s", model);
  snprintf(c->r->model_key, sizeof c->r->model_key, "%s", k->key);
  c->r->model_line = k->line;
}

static void conflict(struct ctx *c, const struct rkey *a, const struct rkey *b, const char *why) {
  if (b->line < a->line) { /* said at the first of the two */
    const struct rkey *t = a;
    a = b;
    b = t;
  }
  complain(c, a, "'%s' and line %u's %s: '%s' contradict: %s", a->value, b->line, b->key, b->value,
           why);
}

/* a number key straight to its flag */
static void number(struct ctx *c, const char *key, const char *flag) {
  struct rkey *k = take(c, key);
  if (k && !k->null) set(c, k, flag, k->value);
}

/* transformers' optim names (training_args.py OptimizerNames), which
 * axolotl's optimizer and LLaMA-Factory's optim take too */
static const struct {
  const char *name, *optimizer, *impl;
} hf_optim[] = {
    {"adamw_torch", "adamw", "foreach"},
    {"adamw_torch_fused", "adamw", "fused"},
    {"adamw_hf", "adamw", "forloop"},
    {"adamw_apex_fused", "adamw", "fused"},
    {"adamw_bnb_8bit", "adam8bit", NULL},
    {"adamw_8bit", "adam8bit", NULL},
    {"paged_adamw_8bit", "adam8bit", NULL},
    {"ao_adamw_8bit", "adam8bit", NULL},
    {"paged_adamw_32bit", "adamw", NULL},
    {"adafactor", "adafactor", NULL},
    {"sgd", "sgd", NULL},
    {"lion_32bit", "lion", NULL},
    {"paged_lion_32bit", "lion", NULL},
};

static void hf_optimizer(struct ctx *c, const char *key) {
  struct rkey *k = take(c, key);
  if (!k || k->null) return;
  for (size_t i = 0; i < sizeof hf_optim / sizeof hf_optim[0]; i++)
    if (!strcmp(k->value, hf_optim[i].name)) {
      set(c, k, "--optimizer", hf_optim[i].optimizer);
      if (hf_optim[i].impl) set(c, k, "--optimizer-impl", hf_optim[i].impl);
      return;
    }
  ignore(c, k, "an optimizer the estimate does not model: it bills adamw");
}

/* the last value the recipe gave flag, or "" */
static const char *last_set(const struct recipe *r, const char *flag) {
  for (size_t i = r->n_set; i-- > 0;)
    if (!strcmp(r->set[i].flag, flag)) return r->set[i].value;
  return "";
}

/* a count the DeepSpeed config gives (0: not, or "auto", which the
 * Trainer fills from the recipe): it must be the recipe's where the
 * recipe gives one, as the Trainer checks */
static void ds_count(struct ctx *c, const struct rkey *k, const char *path, const char *flag,
                     const char *key, uint64_t v) {
  if (!v) return;
  char n[32];
  snprintf(n, sizeof n, "%llu", (unsigned long long)v);
  const char *given = last_set(c->r, flag);
  if (given[0] && strcmp(given, n))
    complain(c, k, "'%s' says %s %s, the recipe %s: give the same, or \"auto\"", path, key, n,
             given);
  else
    set(c, k, flag, n);
}

/* The DeepSpeed config a recipe names (a path relative to the recipe's
 * folder, else to the working directory), read as `check --deepspeed`
 * reads one (lib/decide/deepspeed.c): its ZeRO stage and offloads; its
 * bf16/fp16 sections (the Trainer fills "auto" with the recipe's) keep
 * half weights with an fp32 master copy in the optimizer, mixed-*. */
static void deepspeed(struct ctx *c, const char *key) {
  struct rkey *k = take(c, key);
  if (!k || off(k)) return;
  char path[4096 + 256];
  const char *slash = strrchr(c->r->file, '/');
  snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - c->r->file + 1) : 0, c->r->file,
           k->value);
  size_t len = 0;
  char *text = k->value[0] == '/' ? NULL : cli_read_file_quiet(path, &len);
  /* a file that is there but could not be read (out of memory, a read
   * error) is an error: left out, the estimate would drop its ZeRO stage */
  bool there = !text && k->value[0] != '/' && access(path, F_OK) == 0;
  if (!text && !there) {
    snprintf(path, sizeof path, "%s", k->value);
    text = cli_read_file_quiet(path, &len);
    there = !text && access(path, F_OK) == 0;
  }
  if (there) {
    complain(c, k,
             "cannot read '%s' (out of memory, or a read error): try again, or give --zero "
             "and --dp instead",
             path);
    return;
  }
  if (!text) {
    ignore(c, k, "cannot read it (beside the recipe or here): give --zero and --dp");
    return;
  }
  struct vl_job j;
  vl_job_init(&j);
  j.batch = j.grad_accum = j.dp = 0; /* left 0: not given, or "auto" */
  j.optimizer = VL_OPT_COUNT;
  char autos[512], z[8];
  struct vl_err err = {""};
  vl_status s = vl_job_apply_deepspeed(text, len, &j, autos, sizeof autos, &err);
  vl_free(text);
  if (s != VL_OK) {
    complain(c, k, "cannot use '%s': %s", path, err.msg);
    return;
  }
  snprintf(z, sizeof z, "%u", j.zero);
  set(c, k, "--framework", "deepspeed");
  set(c, k, "--zero", z);
  ds_count(c, k, path, "--batch", "train_micro_batch_size_per_gpu", j.batch);
  ds_count(c, k, path, "--grad-accum", "gradient_accumulation_steps", j.grad_accum);
  ds_count(c, k, path, "--dp", "train_batch_size", j.dp); /* micro x accumulation x ranks */
  if (j.optimizer != VL_OPT_COUNT) set(c, k, "--optimizer", vl_optimizer_name(j.optimizer));
  if (j.offload != VL_OFFLOAD_NONE) set(c, k, "--offload", vl_offload_name(j.offload));
  const char *p = last_set(c->r, "--precision");
  if (!strstr(autos, "bf16/fp16.enabled"))
    set(c, k, "--precision", vl_precision_name(j.precision));
  else if (strstr(p, "bf16"))
    set(c, k, "--precision", "mixed-bf16");
  else if (strstr(p, "fp16"))
    set(c, k, "--precision", "mixed-fp16");
}

/* FSDP's sharding options (transformers' FSDPOption, axolotl's fsdp) */
static void fsdp(struct ctx *c, const char *key, const char *offload_key) {
  struct rkey *k = take(c, key);
  if (!k || off(k)) return;
  const char *z = has_word(k->value, "full_shard") || has_word(k->value, "hybrid_shard") ? "3"
                  : has_word(k->value, "shard_grad_op") || has_word(k->value, "hybrid_shard_zero2")
                      ? "2"
                      : NULL;
  if (!z) {
    ignore(c, k, "no sharding the estimate knows (full_shard, shard_grad_op)");
    return;
  }
  set(c, k, "--zero", z);
  struct rkey *o = offload_key ? take(c, offload_key) : NULL;
  if (has_word(k->value, "offload"))
    set(c, k, "--offload", "full");
  else if (is_true(c, o))
    set(c, o, "--offload", "full");
}

static void checkpointing(struct ctx *c, const char *key) {
  struct rkey *k = take(c, key);
  if (!k || k->null) return;
  if (!strcmp(k->value, "offload") || !strcmp(k->value, "unsloth")) { /* axolotl's */
    set(c, k, "--checkpointing", "full");
    ignore(c, k, "checkpoints moved to host memory: the estimate keeps them on the GPU");
  } else if (is_true(c, k)) {
    set(c, k, "--checkpointing", "full");
  }
}

/* ---- axolotl (axolotl's docs/config.qmd, examples/llama-3/lora-8b.yml) -- */

static void axolotl_precision(struct ctx *c) {
  struct rkey *b = take(c, "bf16"), *f = take(c, "fp16");
  struct rkey *bb = take(c, "bfloat16"), *ff = take(c, "float16");
  bool bf = b && (!strcasecmp(b->value, "auto") || is_true(c, b)), fp = is_true(c, f);
  if (bf && fp) conflict(c, b, f, "give one of bf16 and fp16");
  /* axolotl loads the weights in the half type (torch_dtype): the
   * optimizer's states follow them, as --precision bf16 bills */
  if (bf)
    set(c, b, "--precision", "bf16");
  else if (fp)
    set(c, f, "--precision", "fp16");
  else if (is_true(c, bb))
    set(c, bb, "--precision", "bf16");
  else if (is_true(c, ff))
    set(c, ff, "--precision", "fp16");
  else if (b || f)
    set(c, b ? b : f, "--precision", "fp32");
}

static void axolotl_lora(struct ctx *c) {
  struct rkey *a = take(c, "adapter"), *l4 = take(c, "load_in_4bit"), *l8 = take(c, "load_in_8bit");
  if (is_true(c, l4) && is_true(c, l8))
    conflict(c, l4, l8, "the base weights are loaded in 4 or in 8 bits: keep one");
  if (is_true(c, l8)) ignore(c, l8, "8-bit base weights are not modelled: billed in the precision");
  if (!a || off(a)) return;
  if (strcmp(a->value, "lora") && strcmp(a->value, "qlora")) {
    ignore(c, a, "an adapter the estimate does not model: billed as full fine-tuning");
    return;
  }
  struct rkey *r = take(c, "lora_r");
  set(c, r ? r : a, "--lora-rank", r ? r->value : "8");
  if (!strcmp(a->value, "qlora") || is_true(c, l4)) set(c, l4 ? l4 : a, "--qlora", NULL);
  struct rkey *lin = if_true(c, "lora_target_linear"), *mods = take(c, "lora_target_modules");
  if (lin)
    set(c, lin, "--lora-targets", "all-linear");
  else if (mods && !off(mods))
    set(c, mods, "--lora-targets", mods->value);
}

static void axolotl_attention(struct ctx *c) {
  static const char *const sdpa[] = {"flash_attention", "sdp_attention", "xformers_attention",
                                     "flex_attention"};
  for (size_t i = 0; i < sizeof sdpa / sizeof sdpa[0]; i++) {
    struct rkey *k = if_true(c, sdpa[i]);
    if (k) {
      set(c, k, "--attention", "sdpa"); /* no s x s scores kept, as SDPA's kernels */
      return;
    }
  }
  struct rkey *e = if_true(c, "eager_attention");
  if (e) set(c, e, "--attention", "eager");
}

static void map_axolotl(struct ctx *c) {
  struct rkey *m = take(c, "base_model"), *cfg = take(c, "base_model_config");
  if (cfg && !off(cfg))
    model_from(c, cfg, cfg->value);
  else if (m && !off(m))
    model_from(c, m, m->value);
  struct rkey *mb = take(c, "micro_batch_size"), *hf = find(c, "per_device_train_batch_size");
  if (mb && hf) {
    hf->used = true;
    conflict(c, mb, hf, "axolotl reads micro_batch_size: drop per_device_train_batch_size");
  }
  if (mb) set(c, mb, "--batch", mb->value);
  number(c, "sequence_len", "--seq");
  struct rkey *ga = take(c, "gradient_accumulation_steps"), *bs = take(c, "batch_size");
  if (ga)
    set(c, ga, "--grad-accum", ga->value);
  else if (bs && mb) { /* axolotl: gradient_accumulation_steps = batch_size // micro_batch_size */
    char v[32];
    unsigned long long b = strtoull(bs->value, NULL, 10), u = strtoull(mb->value, NULL, 10);
    snprintf(v, sizeof v, "%llu", u ? b / u : 0);
    set(c, bs, "--grad-accum", v);
  }
  axolotl_precision(c);
  axolotl_lora(c);
  axolotl_attention(c);
  checkpointing(c, "gradient_checkpointing");
  hf_optimizer(c, "optimizer");
  deepspeed(c, "deepspeed");
  fsdp(c, "fsdp", "fsdp_config.fsdp_offload_params");
  set_as(c, NULL, "(HF Trainer)", "--loop", "trainer"); /* axolotl trains with it */
}

/* ---- torchtune (recipes/configs/llama3_1/8B_lora_single_device.yaml) -- */

/* torchtune's model builders (torchtune/models/<family>/_model_builders.py)
 * and the bundled model of each */
static const struct {
  const char *builder, *model;
} tt_models[] = {
    {"llama3_1_8b", "llama-3.1-8b"},
    {"llama3_1_70b", "llama-3.1-70b"},
    {"llama3_1_405b", "llama-3.1-405b"},
    {"llama3_8b", "llama-3-8b"},
    {"llama3_70b", "llama-3-70b"},
    {"llama2_7b", "llama-2-7b"},
    {"llama2_13b", "llama-2-13b"},
    {"llama2_70b", "llama-2-70b"},
    {"mistral_7b", "mistral-7b"},
    {"gemma_2b", "gemma-2b"},
    {"gemma_7b", "gemma-7b"},
    {"gemma2_2b", "gemma-2-2b"},
    {"qwen2_0_5b", "qwen2-0.5b"},
    {"qwen2_7b", "qwen2-7b"},
    {"phi3_mini", "phi-3-mini"},
};

static void torchtune_lora(struct ctx *c, const struct rkey *m, bool qlora) {
  struct rkey *r = take(c, "model.lora_rank"), *attn = take(c, "model.lora_attn_modules");
  set(c, r ? r : m, "--lora-rank", r ? r->value : "8");
  if (qlora) set(c, m, "--qlora", NULL);
  char t[256] = "";
  size_t o = 0;
  static const char *const names[][2] = {
      {"q_proj", "q_proj"}, {"k_proj", "k_proj"}, {"v_proj", "v_proj"}, {"output_proj", "o_proj"}};
  for (size_t i = 0; attn && i < 4; i++)
    if (has_word(attn->value, names[i][0]))
      o += (size_t)snprintf(t + o, sizeof t - o, "%s%s", o ? "," : "", names[i][1]);
  if (attn && o) set(c, attn, "--lora-targets", t);
  struct rkey *mlp = if_true(c, "model.apply_lora_to_mlp");
  struct rkey *out = if_true(c, "model.apply_lora_to_output");
  if (mlp) {
    snprintf(t + o, sizeof t - o, "%sgate_proj,up_proj,down_proj", o ? "," : "");
    set(c, mlp, "--lora-targets", t);
  }
  if (out) ignore(c, out, "LoRA on the output projection is not modelled");
}

static void torchtune_optimizer(struct ctx *c) {
  static const char *const names[][2] = {
      {"torch.optim.AdamW", "adamw"},
      {"torch.optim.Adam", "adam"},
      {"torch.optim.SGD", "sgd"},
      {"bitsandbytes.optim.PagedAdamW8bit", "adam8bit"},
      {"bitsandbytes.optim.AdamW8bit", "adam8bit"},
      {"torchao.optim.AdamW8bit", "adam8bit"},
      {"bitsandbytes.optim.PagedAdamW", "adamw"},
  };
  struct rkey *k = take(c, "optimizer._component_");
  if (!k) return;
  const char *o = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(k->value, names[i][0])) o = names[i][1];
  if (!o) {
    ignore(c, k, "an optimizer the estimate does not model: it bills adamw");
    return;
  }
  struct rkey *mom = take(c, "optimizer.momentum");
  set(c, k, "--optimizer", !strcmp(o, "sgd") && mom && !off(mom) ? "sgd-momentum" : o);
  struct rkey *fu = take(c, "optimizer.fused"), *fe = take(c, "optimizer.foreach");
  if (is_true(c, fu))
    set(c, fu, "--optimizer-impl", "fused");
  else if (fe)
    set(c, fe, "--optimizer-impl", is_true(c, fe) ? "foreach" : "forloop");
}

static void map_torchtune(struct ctx *c) {
  struct rkey *m = take(c, "model._component_");
  const char *b = m ? strrchr(m->value, '.') : NULL;
  b = b ? b + 1 : "";
  bool qlora = !strncmp(b, "qlora_", 6), lora = qlora || !strncmp(b, "lora_", 5);
  const char *base = qlora ? b + 6 : lora ? b + 5 : b;
  for (size_t i = 0; m && i < sizeof tt_models / sizeof tt_models[0]; i++)
    if (!strcmp(base, tt_models[i].builder)) model_from(c, m, tt_models[i].model);
  if (m && !c->r->model[0]) ignore(c, m, "a builder with no bundled model: give --model");
  if (m && lora) torchtune_lora(c, m, qlora);
  number(c, "batch_size", "--batch");
  number(c, "gradient_accumulation_steps", "--grad-accum");
  struct rkey *s = take(c, "tokenizer.max_seq_len"), *ds = take(c, "dataset.max_seq_len");
  if (s && ds && !s->null && !ds->null && strcmp(s->value, ds->value))
    conflict(c, s, ds, "the tokenizer cuts sequences to tokenizer.max_seq_len: give one");
  if (!s || s->null) s = ds;
  if (s && !s->null)
    set(c, s, "--seq", s->value);
  else if (s)
    ignore(c, s, "no cut: sequences as long as the data's; --seq is the default");
  struct rkey *dt = take(c, "dtype");
  if (dt &&
      (!strcmp(dt->value, "bf16") || !strcmp(dt->value, "fp32") || !strcmp(dt->value, "fp16")))
    set(c, dt, "--precision", dt->value); /* torchtune trains in the one dtype, no autocast */
  else if (dt)
    complain(c, dt, "expected bf16 or fp32, got '%s'", dt->value);
  struct rkey *ck = if_true(c, "enable_activation_checkpointing");
  if (ck) set(c, ck, "--checkpointing", "full");
  torchtune_optimizer(c);
  /* the recipe deletes the logits once the loss is computed */
  set_as(c, NULL, "(torchtune recipe)", "--drop-outputs", NULL);
}

/* ---- LLaMA-Factory (examples/train_lora/llama3_lora_sft.yaml) -------- */

static void llamafactory_precision(struct ctx *c, bool full) {
  struct rkey *b = take(c, "bf16"), *f = take(c, "fp16"), *p = take(c, "pure_bf16");
  bool bf = is_true(c, b), fp = is_true(c, f), pure = is_true(c, p);
  if (bf && fp) conflict(c, b, f, "give one of bf16 and fp16");
  if (pure && fp) conflict(c, p, f, "pure_bf16 trains in bf16: drop fp16");
  /* the weights load in the compute type; full and freeze tuning cast
   * the trained ones back to fp32 (model/adapter.py) unless pure_bf16 */
  if (pure)
    set(c, p, "--precision", "bf16");
  else if (bf)
    set(c, b, "--precision", full ? "amp-bf16" : "bf16");
  else if (fp)
    set(c, f, "--precision", full ? "amp-fp16" : "fp16");
}

static void map_llamafactory(struct ctx *c) {
  struct rkey *m = take(c, "model_name_or_path");
  if (m && !off(m)) model_from(c, m, m->value);
  struct rkey *st = take(c, "stage");
  if (st && strcmp(st->value, "sft") && strcmp(st->value, "pt"))
    ignore(c, st, "a stage with a reference or reward model: the estimate bills the policy alone");
  struct rkey *ft = take(c, "finetuning_type");
  bool lora = !ft || !strcmp(ft->value, "lora"); /* LLaMA-Factory's default */
  if (ft && strcmp(ft->value, "lora") && strcmp(ft->value, "full"))
    ignore(c, ft, "a tuning the estimate does not model: billed as full fine-tuning");
  struct rkey *q = take(c, "quantization_bit"), *qm = take(c, "quantization_method");
  if (qm && !off(qm) && strcmp(qm->value, "bitsandbytes") && strcmp(qm->value, "bnb"))
    ignore(c, qm, "only bitsandbytes 4-bit (QLoRA) is modelled: billed as bitsandbytes");
  if (lora) {
    struct rkey *r = take(c, "lora_rank"), *t = take(c, "lora_target");
    set(c, r ? r : ft, "--lora-rank", r ? r->value : "8");
    if (t && !off(t))
      set(c, t, "--lora-targets", strcmp(t->value, "all") ? t->value : "all-linear");
    else /* finetuning_args.py: lora_target defaults to "all" */
      set_as(c, t, "(LLaMA-Factory default)", "--lora-targets", "all-linear");
    if (q && !strcmp(q->value, "4")) set(c, q, "--qlora", NULL);
  }
  if (q && !q->null && !(lora && !strcmp(q->value, "4")))
    ignore(c, q, "only 4-bit bitsandbytes under LoRA (QLoRA) is modelled");
  number(c, "cutoff_len", "--seq");
  number(c, "per_device_train_batch_size", "--batch");
  number(c, "gradient_accumulation_steps", "--grad-accum");
  llamafactory_precision(c, !lora);
  struct rkey *fa = take(c, "flash_attn");
  if (fa && !fa->null) set(c, fa, "--attention", strcmp(fa->value, "disabled") ? "sdpa" : "eager");
  /* LLaMA-Factory turns gradient checkpointing on unless told not to */
  struct rkey *gc = take(c, "disable_gradient_checkpointing");
  if (!is_true(c, gc)) set_as(c, gc, "(LLaMA-Factory default)", "--checkpointing", "full");
  hf_optimizer(c, "optim");
  deepspeed(c, "deepspeed");
  set_as(c, NULL, "(HF Trainer)", "--loop", "trainer");
}

/* ---- TRL / transformers (TrainingArguments.to_json_string, SFTConfig) -- */

static void trl_precision(struct ctx *c) {
  struct rkey *b = take(c, "bf16"), *f = take(c, "fp16"),
              *d = take(c, "model_init_kwargs.torch_dtype"), *md = take(c, "torch_dtype");
  if (!d) d = md; /* TRL's ModelConfig, in a `trl ... --config` YAML */
  bool bf = is_true(c, b), fp = is_true(c, f);
  if (bf && fp) conflict(c, b, f, "give one of bf16 and fp16");
  if (d && (!strcmp(d->value, "bfloat16") || !strcmp(d->value, "float16")))
    set(c, d, "--precision", d->value[0] == 'b' ? "bf16" : "fp16"); /* half weights */
  else if (bf)
    set(c, b, "--precision", "amp-bf16"); /* autocast over fp32 weights */
  else if (fp)
    set(c, f, "--precision", "amp-fp16");
  else if (b || f)
    set(c, b ? b : f, "--precision", "fp32");
}

/* TRL's ModelConfig (trl/trainer/model_config.py): PEFT's LoRA */
static void trl_peft(struct ctx *c) {
  struct rkey *p = if_true(c, "use_peft"), *l4 = if_true(c, "load_in_4bit");
  struct rkey *l8 = if_true(c, "load_in_8bit");
  if (l4 && l8) conflict(c, l4, l8, "the base weights are loaded in 4 or in 8 bits: keep one");
  if (l8) ignore(c, l8, "8-bit base weights are not modelled: billed in the precision");
  if (!p) return;
  struct rkey *r = take(c, "lora_r"), *t = take(c, "lora_target_modules");
  set(c, r ? r : p, "--lora-rank", r ? r->value : "16"); /* ModelConfig's default */
  if (t && !off(t)) set(c, t, "--lora-targets", t->value);
  if (l4) set(c, l4, "--qlora", NULL);
}

static void map_trl(struct ctx *c) {
  struct rkey *m = take(c, "model_name_or_path");
  if (m && !off(m)) model_from(c, m, m->value);
  trl_peft(c);
  number(c, "per_device_train_batch_size", "--batch");
  number(c, "gradient_accumulation_steps", "--grad-accum");
  struct rkey *a = take(c, "max_seq_length"), *b = take(c, "max_length");
  if (a && b && !a->null && !b->null && strcmp(a->value, b->value))
    conflict(c, a, b, "SFTConfig's max_length replaced max_seq_length: keep one");
  if (a && !a->null)
    set(c, a, "--seq", a->value);
  else if (b && !b->null)
    set(c, b, "--seq", b->value);
  trl_precision(c);
  checkpointing(c, "gradient_checkpointing");
  struct rkey *at = take(c, "model_init_kwargs.attn_implementation");
  struct rkey *mat = take(c, "attn_implementation");
  if (!at) at = mat;
  if (at && !at->null) set(c, at, "--attention", strcmp(at->value, "eager") ? "sdpa" : "eager");
  hf_optimizer(c, "optim");
  struct rkey *ds = find(c, "deepspeed"), *fs = find(c, "fsdp");
  if (ds && fs && !off(ds) && !off(fs)) conflict(c, ds, fs, "the Trainer takes one of them");
  deepspeed(c, "deepspeed");
  fsdp(c, "fsdp", NULL);
  set_as(c, NULL, "(HF Trainer)", "--loop", "trainer");
}

/* ---- the keys each kind has ---------------------------------------- */

/* why: NULL, the key changes neither memory nor time; else what it
 * changes that the estimate does not model (listed when set). A name
 * ending in '*' is a prefix. */
struct known {
  const char *key, *why;
};

static const char W_DROPOUT[] =
    "dropout on the adapters' inputs keeps a mask and a copy: not billed";
static const char W_COMPILE[] = "torch.compile fuses kernels: memory and time not modelled";
static const char W_TF32[] = "TF32 matmuls: the step time prices fp32 matmuls without it";
static const char W_KERNELS[] =
    "fused kernels (Liger, Unsloth, cut cross-entropy) are not modelled";
static const char W_OFFLOAD[] = "activation offloading to host memory is not modelled";

static const struct known axolotl_keys[] = {
    {"lora_dropout", W_DROPOUT},
    {"lora_modules_to_save", "whole trained copies of these modules are not billed"},
    {"peft_use_dora", "DoRA's magnitude vectors and their activations are not billed"},
    {"tf32", W_TF32},
    {"torch_compile", W_COMPILE},
    {"s2_attention", "shifted sparse attention is not modelled"},
    {"flash_attn_cross_entropy", W_KERNELS},
    {"flash_attn_rms_norm", W_KERNELS},
    {"flash_attn_fuse_qkv", W_KERNELS},
    {"flash_attn_fuse_mlp", W_KERNELS},
    {"unsloth_*", W_KERNELS},
    {"liger_*", W_KERNELS},
    {"cut_cross_entropy", W_KERNELS},
    {"plugins", "plugins change the model's kernels: not modelled"},
    {"rl", "preference training keeps a reference model: not billed"},
    {"relora_steps", "ReLoRA is not modelled"},
    {"gptq", "GPTQ base weights are not modelled"},
    {"unfrozen_parameters", "partly frozen training is not modelled: billed as full"},
    {"activation_offloading", W_OFFLOAD},
    {"sequence_parallel_degree", "sequence parallelism across GPUs is not modelled"},
    {"tensor_parallel_size", "give --tp N for tensor parallelism"},
    {"ddp_bucket_cap_mb", "the estimate bills DDP's default 25 MiB buckets"},
    {"lora_on_cpu", "adapters on the CPU are not modelled"},
    {"fsdp_config.*", NULL},
    {"fsdp_version", NULL},
    {"lora_r", NULL},
    {"lora_target_modules", NULL},
    {"lora_target_linear", NULL},
    {"model_type", NULL},
    {"tokenizer_type", NULL},
    {"tokenizer_config", NULL},
    {"trust_remote_code", NULL},
    {"strict", NULL},
    {"datasets", NULL},
    {"test_datasets", NULL},
    {"dataset_prepared_path", NULL},
    {"val_set_size", NULL},
    {"output_dir", NULL},
    {"chat_template*", NULL},
    {"special_tokens*", NULL},
    {"tokens", NULL},
    {"sample_packing", NULL},
    {"eval_sample_packing", NULL},
    {"pad_to_sequence_len", NULL},
    {"lora_alpha", NULL},
    {"lora_fan_in_fan_out", NULL},
    {"peft_use_rslora", NULL},
    {"lora_model_dir", NULL},
    {"wandb_*", NULL},
    {"mlflow_*", NULL},
    {"comet_*", NULL},
    {"hub_*", NULL},
    {"num_epochs", NULL},
    {"max_steps", NULL},
    {"learning_rate", NULL},
    {"lr_*", NULL},
    {"cosine_*", NULL},
    {"warmup_*", NULL},
    {"weight_decay", NULL},
    {"adam_*", NULL},
    {"max_grad_norm", NULL},
    {"train_on_inputs", NULL},
    {"group_by_length", NULL},
    {"early_stopping_patience", NULL},
    {"resume_from_checkpoint", NULL},
    {"auto_resume_from_checkpoints", NULL},
    {"local_rank", NULL},
    {"logging_steps", NULL},
    {"evals_per_epoch", NULL},
    {"eval_*", NULL},
    {"saves_per_epoch", NULL},
    {"save_*", NULL},
    {"debug", NULL},
    {"seed", NULL},
    {"gradient_checkpointing_kwargs*", NULL},
    {"default_system_message", NULL},
    {"shuffle_merged_datasets", NULL},
    {"dataset_*", NULL},
    {"is_*_derived_model", NULL},
    {"loss_watchdog_*", NULL},
    {"ddp_timeout", NULL},
    {"ddp_broadcast_buffers", NULL},
    {"embeddings_skip_upcast", NULL},
    {"noisy_embedding_alpha", NULL},
    {"neftune_noise_alpha", NULL},
    {"use_tensorboard", NULL},
    {"optim_args", NULL},
    {"optim_target_modules", NULL},
    {"profiler_steps", NULL},
    {"include_tokens_per_second", NULL},
    {"dataloader_*", NULL},
    {"remove_unused_columns", NULL},
    {"low_cpu_mem_usage", NULL},
    {"special_tokens", NULL},
    {"xformers_attention", NULL},
    {"gpu_memory_limit", NULL},
    {"max_packed_sequence_len", NULL},
    {"rope_scaling*", NULL},
    {NULL, NULL},
};

static const struct known torchtune_keys[] = {
    {"model.lora_dropout", W_DROPOUT},
    {"model.use_dora", "DoRA's magnitude vectors and their activations are not billed"},
    {"loss._component_", "the loss as torchtune computes it (CEWithChunkedOutputLoss: the logits' "
                         "fp32 copy a chunk at a time) is not modelled: billed whole"},
    {"compile", W_COMPILE},
    {"optimizer_in_bwd", "the optimizer step inside backward frees each gradient at once: not "
                         "modelled"},
    {"enable_activation_offloading", W_OFFLOAD},
    {"fsdp_cpu_offload", "give --dp N --zero 3 --offload full for torchtune's FSDP"},
    {"custom_sharded_layers", NULL},
    {"fsdp_reshard_after_forward", NULL},
    {"output_dir", NULL},
    {"tokenizer.*", NULL},
    {"checkpointer.*", NULL},
    {"resume_from_checkpoint", NULL},
    {"save_adapter_weights_only", NULL},
    {"dataset*", NULL},
    {"seed", NULL},
    {"shuffle", NULL},
    {"optimizer.*", NULL},
    {"lr_scheduler.*", NULL},
    {"epochs", NULL},
    {"max_steps_per_epoch", NULL},
    {"metric_logger.*", NULL},
    {"log_every_n_steps", NULL},
    {"log_peak_memory_stats", NULL},
    {"profiler.*", NULL},
    {"model.lora_alpha", NULL},
    {"clip_grad_norm", NULL},
    {"device", NULL},
    {"run_val_every_n_steps", NULL},
    {"quantizer.*", NULL},
    {"log_level", NULL},
    {"model.*", NULL},
    {NULL, NULL},
};

static const struct known llamafactory_keys[] = {
    {"lora_dropout", W_DROPOUT},
    {"use_dora", "DoRA's magnitude vectors and their activations are not billed"},
    {"additional_target", "whole trained copies of these modules are not billed"},
    {"enable_liger_kernel", W_KERNELS},
    {"use_unsloth", W_KERNELS},
    {"use_unsloth_gc", W_OFFLOAD},
    {"shift_attn", "shifted sparse attention is not modelled"},
    {"torch_compile", W_COMPILE},
    {"tf32", W_TF32},
    {"freeze_trainable_layers", "freeze tuning is billed as full fine-tuning"},
    {"ref_model", "preference training keeps a reference model: not billed"},
    {"trust_remote_code", NULL},
    {"do_train", NULL},
    {"do_eval", NULL},
    {"do_predict", NULL},
    {"dataset", NULL},
    {"dataset_dir", NULL},
    {"eval_dataset", NULL},
    {"template", NULL},
    {"max_samples", NULL},
    {"overwrite_cache", NULL},
    {"preprocessing_num_workers", NULL},
    {"dataloader_num_workers", NULL},
    {"output_dir", NULL},
    {"logging_steps", NULL},
    {"save_*", NULL},
    {"plot_loss", NULL},
    {"overwrite_output_dir", NULL},
    {"report_to", NULL},
    {"learning_rate", NULL},
    {"num_train_epochs", NULL},
    {"max_steps", NULL},
    {"lr_scheduler_type", NULL},
    {"warmup_*", NULL},
    {"ddp_timeout", NULL},
    {"resume_from_checkpoint", NULL},
    {"val_size", NULL},
    {"per_device_eval_batch_size", NULL},
    {"eval_*", NULL},
    {"lora_alpha", NULL},
    {"use_rslora", NULL},
    {"weight_decay", NULL},
    {"seed", NULL},
    {"tokenized_path", NULL},
    {"streaming", NULL},
    {"packing", NULL},
    {"neat_packing", NULL},
    {"run_name", NULL},
    {"logging_dir", NULL},
    {"max_grad_norm", NULL},
    {"push_to_hub", NULL},
    {"hub_*", NULL},
    {"adapter_name_or_path", NULL},
    {"upcast_layernorm", NULL},
    {"upcast_lmhead_output", NULL},
    {"rope_scaling", NULL},
    {"pref_*", NULL},
    {"predict_with_generate", NULL},
    {"include_num_input_tokens_seen", NULL},
    {"image_*", NULL},
    {"video_*", NULL},
    {"create_new_adapter", NULL},
    {"pissa_*", NULL},
    {"train_on_prompt", NULL},
    {"mask_history", NULL},
    {"buffer_size", NULL},
    {"mix_strategy", NULL},
    {"interleave_probs", NULL},
    {"cache_dir", NULL},
    {"lora_rank", NULL},
    {"lora_target", NULL},
    {NULL, NULL},
};

static const struct known trl_keys[] = {
    {"auto_find_batch_size",
     "the batch halves after an out-of-memory error: the estimate bills the "
     "one given"},
    {"torch_compile", W_COMPILE},
    {"tf32", W_TF32},
    {"use_liger_kernel", W_KERNELS},
    {"activation_offloading", W_OFFLOAD},
    {"torch_empty_cache_steps", "emptying the cache lowers what stays reserved: not modelled"},
    {"ddp_bucket_cap_mb", "the estimate bills DDP's default 25 MiB buckets"},
    {"fsdp_config.*", NULL},
    {"deepspeed.*", "an inline DeepSpeed config: give --zero and --dp"},
    {"model_init_kwargs.*", NULL},
    {"gradient_checkpointing_kwargs*", NULL},
    {"output_dir", NULL},
    {"overwrite_output_dir", NULL},
    {"do_*", NULL},
    {"eval_*", NULL},
    {"per_device_eval_batch_size", NULL},
    {"per_gpu_*", NULL},
    {"prediction_loss_only", NULL},
    {"learning_rate", NULL},
    {"weight_decay", NULL},
    {"adam_*", NULL},
    {"max_grad_norm", NULL},
    {"num_train_epochs", NULL},
    {"max_steps", NULL},
    {"lr_scheduler_*", NULL},
    {"warmup_*", NULL},
    {"log_*", NULL},
    {"logging_*", NULL},
    {"save_*", NULL},
    {"seed", NULL},
    {"data_seed", NULL},
    {"jit_mode_eval", NULL},
    {"use_ipex", NULL},
    {"use_cpu", NULL},
    {"no_cuda", NULL},
    {"use_mps_device", NULL},
    {"local_rank", NULL},
    {"tpu_*", NULL},
    {"debug", NULL},
    {"past_index", NULL},
    {"run_name", NULL},
    {"disable_tqdm", NULL},
    {"remove_unused_columns", NULL},
    {"label_names", NULL},
    {"load_best_model_at_end", NULL},
    {"metric_for_best_model", NULL},
    {"greater_is_better", NULL},
    {"ignore_data_skip", NULL},
    {"accelerator_config*", NULL},
    {"label_smoothing_factor", NULL},
    {"group_by_length", NULL},
    {"length_column_name", NULL},
    {"report_to", NULL},
    {"ddp_*", NULL},
    {"dataloader_*", NULL},
    {"skip_memory_metrics", NULL},
    {"use_legacy_prediction_loop", NULL},
    {"push_to_hub*", NULL},
    {"resume_from_checkpoint", NULL},
    {"hub_*", NULL},
    {"include_*", NULL},
    {"full_determinism", NULL},
    {"torchdynamo", NULL},
    {"ray_scope", NULL},
    {"torch_compile_*", NULL},
    {"dispatch_batches", NULL},
    {"split_batches", NULL},
    {"optim_args", NULL},
    {"optim_target_modules", NULL},
    {"batch_eval_metrics", NULL},
    {"restore_callback_states_from_checkpoint", NULL},
    {"mp_parameters", NULL},
    {"neftune_noise_alpha", NULL},
    {"half_precision_backend", NULL},
    {"bf16_full_eval", NULL},
    {"fp16_full_eval", NULL},
    {"fp16_opt_level", NULL},
    {"fp16_backend", NULL},
    {"xpu_backend", NULL},
    {"fsdp_min_num_params", NULL},
    {"fsdp_transformer_layer_cls_to_wrap", NULL},
    {"average_tokens_across_devices", NULL},
    {"liger_kernel_config", NULL},
    {"dataset_*", NULL},
    {"packing*", NULL},
    {"padding_free", NULL},
    {"pad_to_multiple_of", NULL},
    {"pad_token", NULL},
    {"eos_token", NULL},
    {"completion_only_loss", NULL},
    {"assistant_only_loss", NULL},
    {"chat_template_path", NULL},
    {"num_of_sequences", NULL},
    {"chars_per_token", NULL},
    {"shuffle_dataset", NULL},
    {"loss_type", NULL},
    {"use_cpu", NULL},
    {"hf_*", NULL},
    {"gradient_accumulation_kwargs*", NULL},
    {"sortish_sampler", NULL},
    {"predict_with_generate", NULL},
    {"generation_*", NULL},
    {"adafactor", NULL},
    {"eval_packing", NULL},
    {"trackio_*", NULL},
    {"lora_dropout", W_DROPOUT},
    {"lora_modules_to_save", "whole trained copies of these modules are not billed"},
    {"use_dora", "DoRA's magnitude vectors and their activations are not billed"},
    {"use_rslora", NULL},
    {"lora_r", NULL},
    {"lora_alpha", NULL},
    {"lora_task_type", NULL},
    {"lora_target_modules", NULL},
    {"use_bnb_nested_quant", NULL},
    {"bnb_4bit_quant_type", NULL},
    {"model_revision", NULL},
    {"trust_remote_code", NULL},
    {"tokenizer_name_or_path", NULL},
    {"chat_template", NULL},
    {"preprocessing_num_workers", NULL},
    {"auto_insert_empty_system_msg", NULL},
    {"project", NULL},
    {NULL, NULL},
};

static const struct known *known_find(const struct known *t, const char *key) {
  for (; t->key; t++) {
    size_t n = strlen(t->key);
    if (t->key[n - 1] == '*' ? !strncmp(key, t->key, n - 1) : !strcmp(key, t->key)) return t;
    /* "fsdp_config.*" holds "fsdp_config:" with no value too */
    if (n > 2 && !strcmp(t->key + n - 2, ".*") && strlen(key) == n - 2 &&
        !strncmp(key, t->key, n - 2))
      return t;
  }
  return NULL;
}

/* ---- the kinds ------------------------------------------------------- */

struct kind {
  const char *name, *label;
  const char *maps;           /* the keys its mapping reads (a "did you mean" finds them) */
  const char *const ident[5]; /* keys only this kind has (any one) */
  const char *ident_text;     /* the same, as the error lists them */
  void (*map)(struct ctx *);
  const struct known *keys;
};

static const struct kind kinds[] = {
    {.name = "torchtune",
     .label = "torchtune",
     .maps = "model._component_ model.lora_rank model.lora_attn_modules model.apply_lora_to_mlp "
             "model.apply_lora_to_output batch_size gradient_accumulation_steps "
             "tokenizer.max_seq_len dataset.max_seq_len dtype enable_activation_checkpointing "
             "optimizer._component_ optimizer.fused optimizer.foreach optimizer.momentum",
     .ident = {"model._component_"},
     .ident_text = "model: _component_: torchtune.models...",
     .map = map_torchtune,
     .keys = torchtune_keys},
    {.name = "axolotl",
     .label = "axolotl",
     .maps = "base_model base_model_config micro_batch_size sequence_len "
             "gradient_accumulation_steps batch_size bf16 fp16 bfloat16 float16 adapter "
             "load_in_4bit load_in_8bit lora_r lora_target_linear lora_target_modules "
             "flash_attention sdp_attention xformers_attention flex_attention eager_attention "
             "gradient_checkpointing optimizer deepspeed fsdp fsdp_config.fsdp_offload_params",
     .ident = {"base_model", "micro_batch_size", "sequence_len", "lora_target_linear"},
     .ident_text = "base_model, micro_batch_size, sequence_len",
     .map = map_axolotl,
     .keys = axolotl_keys},
    {.name = "llama-factory",
     .label = "LLaMA-Factory",
     .maps =
         "model_name_or_path stage finetuning_type quantization_bit quantization_method lora_rank "
         "lora_target cutoff_len per_device_train_batch_size gradient_accumulation_steps bf16 fp16 "
         "pure_bf16 flash_attn disable_gradient_checkpointing optim deepspeed",
     .ident = {"finetuning_type", "stage", "cutoff_len", "lora_target"},
     .ident_text = "stage, finetuning_type, cutoff_len",
     .map = map_llamafactory,
     .keys = llamafactory_keys},
    {.name = "trl",
     .label = "TRL / transformers TrainingArguments",
     .maps = "per_device_train_batch_size gradient_accumulation_steps max_seq_length max_length "
             "bf16 fp16 model_init_kwargs.torch_dtype model_init_kwargs.attn_implementation "
             "gradient_checkpointing optim deepspeed fsdp "
             "model_name_or_path torch_dtype attn_implementation use_peft lora_r "
             "lora_target_modules load_in_4bit load_in_8bit",
     .ident = {"per_device_train_batch_size", "gradient_checkpointing_kwargs", "optim",
               "logging_strategy"},
     .ident_text = "per_device_train_batch_size, optim",
     .map = map_trl,
     .keys = trl_keys},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

static const struct rkey *ident_key(struct ctx *c, const struct kind *k) {
  for (int i = 0; i < 5 && k->ident[i]; i++) {
    const struct rkey *r = find(c, k->ident[i]);
    if (r && (strcmp(k->name, "torchtune") || !strncmp(r->value, "torchtune.", 10))) return r;
  }
  return NULL;
}

/* torchtune, else axolotl or LLaMA-Factory (not both), else TRL: the
 * later kinds' keys are the Trainer's, which the earlier ones share */
static const struct kind *detect(struct ctx *c) {
  const struct rkey *hit[N_KINDS];
  for (size_t i = 0; i < N_KINDS; i++)
    hit[i] = ident_key(c, &kinds[i]);
  if (hit[0]) return &kinds[0];
  if (hit[1] && hit[2]) {
    cli_error("recipe '%s' has keys of two kinds: %s (line %u, axolotl) and %s (line %u, "
              "LLaMA-Factory)",
              c->r->file, hit[1]->key, hit[1]->line, hit[2]->key, hit[2]->line);
    cli_hint("keep the keys of one of them");
    return NULL;
  }
  for (size_t i = 1; i < N_KINDS; i++)
    if (hit[i]) return &kinds[i];
  cli_error("recipe '%s' is none of the kinds --recipe reads", c->r->file);
  for (size_t i = 0; i < N_KINDS; i++)
    cli_hint("%s: a file with %s", kinds[i].label, kinds[i].ident_text);
  return NULL;
}

/* the keys no mapping took: ignored, passed over, or unknown (said) */
static void rest(struct ctx *c) {
  const char *cand[256];
  char maps[1024];
  size_t nc = 0;
  snprintf(maps, sizeof maps, "%s", c->kind->maps);
  for (char *p = maps, *sp; p && *p && nc < 128; p = sp ? sp + 1 : NULL) {
    if ((sp = strchr(p, ' '))) *sp = '\0';
    cand[nc++] = p;
  }
  for (const struct known *t = c->kind->keys; t->key && nc < 256; t++)
    if (!strchr(t->key, '*')) cand[nc++] = t->key;
  for (size_t i = 0; i < c->n; i++) {
    struct rkey *k = &c->keys[i];
    if (k->used) continue;
    const struct known *t = known_find(c->kind->keys, k->key);
    if (t) {
      if (t->why && !off(k)) ignore(c, k, t->why);
      continue;
    }
    list(c->r->unknown, &c->r->n_unknown, k, NULL);
    const char *near = cli_nearest(k->key, cand, nc);
    fprintf(stderr, "vramledger: warning: recipe '%s' line %u: '%s' is not a key %s reads%s%s%s\n",
            c->r->file, k->line, k->key, c->kind->label, near ? ": did you mean '" : "",
            near ? near : "", near ? "'?" : "");
  }
}

/* the mapped keys grouped ("--framework deepspeed --zero 3"), and the
 * lists, as the renderers take them */
static void make_view(struct recipe *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->n_set; i++) {
    const struct recipe_setting *s = &r->set[i];
    size_t g = 0;
    while (g < n && strcmp(r->view_mapped[g].key, s->key))
      g++;
    if (g == n) {
      r->view_mapped[n] = (struct vl_recipe_key){r->set[i].key, r->flags_text[n], NULL, s->line};
      r->flags_text[n][0] = '\0';
      n++;
    }
    char *t = r->flags_text[g];
    size_t o = strlen(t);
    snprintf(t + o, sizeof r->flags_text[g] - o, "%s%s%s%s", o ? " " : "", s->flag,
             s->value[0] ? " " : "", s->value);
  }
  for (size_t i = 0; i < r->n_ignored; i++)
    r->view_ignored[i] = (struct vl_recipe_key){r->ignored[i].key, r->ignored[i].value,
                                                r->ignored[i].why, r->ignored[i].line};
  for (size_t i = 0; i < r->n_unknown; i++)
    r->view_unknown[i] =
        (struct vl_recipe_key){r->unknown[i].key, r->unknown[i].value, NULL, r->unknown[i].line};
  r->view = (struct vl_recipe_view){r->kind,         r->file, r->view_mapped, r->view_ignored,
                                    r->view_unknown, n,       r->n_ignored,   r->n_unknown};
}

int recipe_parse(const char *name, const char *text, size_t len, struct recipe **out) {
  *out = NULL;
  struct recipe *r = vl_calloc(1, sizeof *r);
  struct rkey *keys = vl_calloc(MAX_KEYS, sizeof *keys);
  if (!r || !keys) {
    vl_free(r);
    vl_free(keys);
    cli_error("out of memory");
    return VL_EXIT_ERROR;
  }
  snprintf(r->file, sizeof r->file, "%s", name);
  struct ctx c = {.r = r, .keys = keys};
  int rc = read_keys(&c, text, len);
  if (!rc && !(c.kind = detect(&c))) rc = VL_EXIT_USAGE;
  if (!rc) {
    r->kind = c.kind->name;
    r->label = c.kind->label;
    c.kind->map(&c);
    rest(&c);
    if (c.bad) rc = VL_EXIT_USAGE;
  }
  complaints_flush(&c);
  vl_free(keys);
  if (rc) {
    vl_free(r);
    return rc;
  }
  make_view(r);
  *out = r;
  return 0;
}

int recipe_load(const char *path, struct recipe **out) {
  *out = NULL;
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  int rc = recipe_parse(path, text, len, out);
  vl_free(text);
  return rc;
}

void recipe_free(struct recipe *r) { vl_free(r); }
