/* The CI gate's rules (vramledger check): a job, its model and a run
 * against the commitment, one problem each, with what to do. Pure: the
 * caller reads the files, estimates the job and renders the result
 * (vl_render_check). docs/cmd/check.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "vramledger/commitment.h"

static const char fix_setting[] =
    "set it back, or commit the new configuration (vramledger commit --force) and have the "
    "commitment reviewed";
static const char fix_hardware[] =
    "run on the committed hardware, or commit for this one (vramledger commit --gpu NAME --force) "
    "and have the commitment reviewed";
static const char fix_margin[] =
    "keep the committed margin, or commit with this one (vramledger commit --margin PCT --force) "
    "and have the commitment reviewed";
static const char fix_run_hardware[] =
    "the run was measured on other hardware: measure on the committed hardware, or commit for "
    "the run's (vramledger commit --force)";

/* s into dst[n], cut to fit (a field or value too long for the table) */
static void put(char *dst, size_t n, const char *s) {
  size_t k = strnlen(s, n - 1);
  memcpy(dst, s, k);
  dst[k] = '\0';
}

/* One problem; past VL_CHECK_MAX_ITEMS, none. */
static void add(struct vl_check *g, enum vl_check_kind kind, const char *field,
                const char *committed, const char *now, const char *action) {
  if (g->n == VL_CHECK_MAX_ITEMS) return;
  struct vl_check_item *it = &g->items[g->n++];
  it->kind = kind;
  put(it->d.field, sizeof it->d.field, field);
  put(it->d.committed, sizeof it->d.committed, committed);
  put(it->d.now, sizeof it->d.now, now);
  put(it->action, sizeof it->action, action);
}

static void params_differ(struct vl_check *g, const struct vl_commitment *c, uint64_t params,
                          const char *fix) {
  char a[32], b[32];
  snprintf(a, sizeof a, "%llu", (unsigned long long)c->params);
  snprintf(b, sizeof b, "%llu", (unsigned long long)params);
  if (c->params && c->params != params) add(g, VL_CHECK_MODEL, "parameter count", a, b, fix);
}

/* The model by what it is: its canonical config against the committed
 * one, key by key; for a commitment written before model_config, its
 * model_type and parameter count. */
static void model(struct vl_check *g, const struct vl_commitment *c,
                  const struct vl_check_model *m) {
  char fix[320 + 4096];
  snprintf(fix, sizeof fix,
           "restore it in '%s', or commit this config (vramledger commit --force) and have the "
           "commitment reviewed",
           m->file);
  if (!c->has_identity) {
    if (c->model_type[0] && strcmp(c->model_type, m->model_type))
      add(g, VL_CHECK_MODEL, "model_type", c->model_type, m->model_type, fix);
    params_differ(g, c, m->params, fix);
    if (!c->model_type[0] && !c->params && m->model_flag && strcmp(m->model_flag, c->model))
      add(g, VL_CHECK_SETTING, "model", c->model, m->model_flag, fix_setting);
    return;
  }
  if (strcmp(m->sha256, c->config_sha256) == 0) return;
  if (!m->keys_known || m->n_keys == 0) /* no key to name it by */
    add(g, VL_CHECK_MODEL, "sha256", c->config_sha256, m->sha256, fix);
  for (int i = 0; m->keys_known && i < m->n_keys && i < m->n_keys_given; i++)
    add(g, VL_CHECK_MODEL, m->keys[i].field, m->keys[i].committed, m->keys[i].now, fix);
  if (m->n_keys > m->n_keys_given) {
    char more[32];
    snprintf(more, sizeof more, "%d more keys", m->n_keys - m->n_keys_given);
    add(g, VL_CHECK_MODEL, "...", "", more, fix);
  }
  params_differ(g, c, m->params, fix);
}

/* The hardware the job runs on now (--gpu, --margin) against the
 * committed. */
static void hardware(struct vl_check *g, const struct vl_commitment *c,
                     const struct vl_check_job *j) {
  const struct vl_gpu *card = j->card;
  if (card && !(vl_catalog_find(j->cat, c->gpu) == card || strcasecmp(card->name, c->gpu) == 0))
    add(g, VL_CHECK_HARDWARE, "gpu", c->gpu, card->name, fix_hardware);
  if (fabs(j->margin - c->margin) > 1e-9) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%g %%", c->margin * 100);
    snprintf(b, sizeof b, "%g %%", j->margin * 100);
    add(g, VL_CHECK_HARDWARE, "margin", a, b, fix_margin);
  }
}

/* A run's GPUs against the committed ones, then its peak against the
 * peak trigger. */
static void run(struct vl_check *g, const struct vl_commitment *c, const struct vl_check_job *j,
                const char *action) {
  struct vl_drift d[2];
  int nd = vl_commitment_hw_diff(c->gpu, c->gpu_memory_bytes, c->gpus, j->run_cat, j->run_hw, d, 2);
  for (int i = 0; i < nd; i++) {
    char field[sizeof d[i].field + 16];
    snprintf(field, sizeof field, "the run's %.80s", d[i].field);
    add(g, VL_CHECK_HARDWARE, field, d[i].committed, d[i].now, fix_run_hardware);
  }
  double budget = (double)vl_commitment_budget_bytes(c), G = (double)(1ull << 30);
  if ((double)j->run_peak_bytes > c->peak_trigger * budget) {
    char a[128], b[64];
    snprintf(a, sizeof a, "%.0f %% of the committed %.2f GiB", c->peak_trigger * 100, budget / G);
    snprintf(b, sizeof b, "%.2f GiB", (double)j->run_peak_bytes / G);
    add(g, VL_CHECK_TRIGGER, "measured peak", a, b, action);
  }
}

void vl_check_compute(const struct vl_commitment *c, const struct vl_check_model *m,
                      const struct vl_check_job *j, struct vl_check *out) {
  out->n = 0;
  model(out, c, m);
  struct vl_drift d[48];
  int nd = vl_commitment_diff(c, j->job, d, 48);
  for (int i = 0; i < nd && i < 48; i++)
    add(out, VL_CHECK_SETTING, d[i].field, d[i].committed, d[i].now, fix_setting);
  hardware(out, c, j);

  /* does the job as it is still fit the card? */
  uint64_t card_bytes = j->card ? j->card->memory_bytes : c->gpu_memory_bytes;
  const char *card_name = j->card ? j->card->name : c->gpu;
  char action[320];
  vl_commitment_peak_action(j->job, j->bill, card_bytes, action, sizeof action);
  double usable = (double)card_bytes * (1.0 - j->margin), G = (double)(1ull << 30);
  double need = (double)vl_bill_budget_bytes(j->bill);
  if (need > usable) {
    char a[128], b[128];
    snprintf(a, sizeof a, "%.2f GiB on %s with %g %% kept free", usable / G, card_name,
             j->margin * 100);
    snprintf(b, sizeof b, "%.2f GiB per GPU%s", need / G,
             need > (double)j->bill->total_bytes ? " in its worse outcome" : "");
    add(out, VL_CHECK_BUDGET, "memory per GPU", a, b, action);
  }
  if (j->run_hw) run(out, c, j, action);
}
