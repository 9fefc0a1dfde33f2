/* lib/util/alloc.c: every allocation can fail, and the library says so
 * instead of crashing or leaking (curl's torture tests).
 *
 * Every reader (a config.json of each reader family, the GPU catalog and
 * its prices, run records parsed and streamed, a commitment and what check
 * reads beside it, a DeepSpeed config, measured results and validate's
 * summaries of them, fitted formulas, points and terms, an allocation trace
 * (replayed, scaled, its snapshot and what is live at its peak), the step
 * tracer's op lines, a fine-tuning recipe, sensitivity's --vary) and the
 * bill (training with its replay for each replayed family, LoRA and MoE,
 * generation with its replay, a pipeline stage), with what calls it
 * (estimate's step time and --max-batch search, plan, sensitivity), and
 * what analyses and draws a run record (the probe's layer, the step time
 * from the job's stamps, the HTML run page) or a fit (--by-phase's curves)
 * runs once to count its allocations, then once per allocation with that one
 * failing: each run must answer with an error (never a pass built on a
 * lost allocation) or, where the library or jansson takes another path,
 * with the answer of the run where nothing failed. Under the sanitizer build (VL_SANITIZE)
 * LeakSanitizer and ASan see every error path these runs take.
 *
 * Jansson's own allocations are not failed: the library leaves them to
 * malloc, and jansson 2.14 (Debian's) crashes in json_loadb's clean-up
 * (json_delete of a half-built object) when one of them fails, which is
 * not ours to test (a standalone loop over json_loadb alone does it). A
 * reader whose every allocation is jansson's (or that allocates nothing:
 * sensitivity's --vary) is marked so in the table,
 * and the mark is checked: once it allocates on its own, its allocations
 * are failed like the others'. */
#include <time.h>

#include "testutil.h"
#include "vramledger/caching.h"
#include "vramledger/catalog.h"
#include "vramledger/commitment.h"
#include "vramledger/validate.h"
#include "vramledger/record.h"
#include "vramledger/regress.h"
#include "vramledger/plan.h"
#include "vramledger/probe.h"
#include "vramledger/render.h"
#include "vramledger/sensitivity.h"
#include "vramledger/steptime.h"

#include "cli.h"
#include "recipe.h"

/* One reader's run over one input: VL_OK or its error; *answer is a
 * fingerprint of what it read (a count, a byte total), compared with the
 * run where nothing failed. */
struct torture {
  const char *name;
  const char *file; /* relative to the source tree; NULL: none */
  vl_status (*run)(const char *text, size_t len, uint64_t *answer);
  bool none_to_fail; /* all its allocations are jansson's, or it has none */
};

static vl_status t_config(const char *text, size_t len, uint64_t *answer) {
  struct vl_arch a;
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(text, len, &a, &err);
  if (s == VL_OK) *answer = a.hidden * 1000003u + a.layers * 101u + a.vocab;
  return s;
}

static vl_status t_catalog(const char *text, size_t len, uint64_t *answer) {
  struct vl_catalog c;
  struct vl_err err = {""};
  vl_status s = vl_catalog_parse(text, len, &c, &err);
  if (s != VL_OK) return s;
  *answer = c.n;
  for (size_t i = 0; i < c.n; i++)
    *answer += c.gpus[i].memory_bytes;
  vl_catalog_release(&c);
  return VL_OK;
}

static vl_status t_prices(const char *text, size_t len, uint64_t *answer) {
  struct vl_catalog c;
  struct vl_err err = {""};
  size_t clen = 0;
  char *cat = tu_read("data/gpus.json", &clen);
  vl_status s = cat ? vl_catalog_parse(cat, clen, &c, &err) : VL_EIO;
  free(cat);
  if (s != VL_OK) return s;
  s = vl_prices_apply(text, len, &c, &err);
  if (s == VL_OK)
    for (size_t i = 0; i < c.n; i++)
      *answer += (uint64_t)(c.gpus[i].usd_per_hour * 1000.0);
  vl_catalog_release(&c);
  return s;
}

static vl_status t_record(const char *text, size_t len, uint64_t *answer) {
  struct vl_record r;
  struct vl_err err = {""};
  vl_status s = vl_record_parse(text, len, &r, &err);
  if (s != VL_OK) return s;
  *answer = r.n_samples * 7u + r.n_marks + r.n_phases * 3u + r.n_steps * 5u;
  vl_record_release(&r);
  return VL_OK;
}

static vl_status t_record_read(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/records/sample.jsonl", VL_SOURCE_DIR);
  struct vl_record r;
  struct vl_err err = {""};
  vl_status s = vl_record_read(path, &r, &err);
  if (s != VL_OK) return s;
  *answer = r.n_samples * 7u + r.n_marks + r.n_phases * 3u + r.n_steps * 5u;
  vl_record_release(&r);
  return VL_OK;
}

static vl_status t_commitment(const char *text, size_t len, uint64_t *answer) {
  struct vl_commitment c;
  struct vl_err err = {""};
  vl_status s = vl_commitment_parse(text, len, &c, &err);
  if (s == VL_OK) *answer = c.job.batch * 100003u + c.job.seq + c.gpus;
  return s;
}

/* what check reads beside a commitment: the job's settings (--config), the
 * config's identity (its canonical form's SHA-256) and the keys that drifted
 * from the config the commitment holds */
static vl_status t_check(const char *text, size_t len, uint64_t *answer) {
  struct vl_job j;
  char targets[256], hex[VL_SHA256_HEX];
  struct vl_err err = {""};
  vl_status s = vl_job_from_settings(text, len, &j, targets, sizeof targets, &err);
  if (s != VL_OK) return s;
  size_t clen = 0, mlen = 0;
  char *commitment = tu_read("tests/data/commitments/by-file/qwen05-l4.json", &clen);
  char *config = tu_read("tests/data/commitments/configs/qwen2-0.5b-edited.json", &mlen);
  assert_true(commitment && config);
  s = vl_config_sha256(config, mlen, hex, &err);
  struct vl_drift d[16];
  int n = 0;
  if (s == VL_OK) s = vl_commitment_config_diff(commitment, clen, config, mlen, d, 16, &n, &err);
  free(commitment);
  free(config);
  if (s == VL_OK) *answer = j.batch * 100003u + j.seq * 31u + (unsigned char)hex[0] + (unsigned)n;
  return s;
}

static vl_status t_deepspeed(const char *text, size_t len, uint64_t *answer) {
  struct vl_job j;
  vl_job_init(&j);
  char autos[256] = "";
  struct vl_err err = {""};
  vl_status s = vl_job_apply_deepspeed(text, len, &j, autos, sizeof autos, &err);
  if (s == VL_OK) *answer = j.zero * 1000u + j.batch + j.grad_accum * 10u;
  return s;
}

static vl_status t_measured(const char *text, size_t len, uint64_t *answer) {
  struct vl_measured m;
  struct vl_err err = {""};
  vl_status s = vl_measured_parse(text, len, &m, &err);
  if (s != VL_OK) return s;
  *answer = m.n;
  vl_measured_release(&m);
  return VL_OK;
}

/* validate: the measured runs' rows summarised (each set, the step times) */
static vl_status t_validate_summary(const char *text, size_t len, uint64_t *answer) {
  struct vl_measured m;
  struct vl_err err = {""};
  vl_status s = vl_measured_parse(text, len, &m, &err);
  if (s != VL_OK) return s;
  struct vl_compare_row *rows = calloc(m.n + 1, sizeof *rows);
  assert_non_null(rows);
  for (size_t i = 0; i < m.n; i++)
    rows[i] = (struct vl_compare_row){.run = &m.runs[i],
                                      .estimated = true,
                                      .err_allocated = (double)i - 2.5,
                                      .err_total = 1.5 * (double)i,
                                      .err_step = 10.0 - (double)i};
  struct vl_compare_summary cal, hold;
  struct vl_time_summary ts;
  s = vl_compare_summarize(rows, m.n, false, 5.0, 7.0, &cal);
  if (s == VL_OK) s = vl_compare_summarize(rows, m.n, true, 5.0, 7.0, &hold);
  if (s == VL_OK) s = vl_compare_time_summarize(rows, m.n, 25.0, &ts);
  if (s == VL_OK)
    *answer = (uint64_t)(cal.n * 1000 + hold.n * 100 + ts.n) * 1000003u +
              (uint64_t)(cal.median_allocated * 1000 + hold.max_total * 1000 + ts.median * 1000);
  free(rows);
  vl_measured_release(&m);
  return s;
}

static vl_status t_fitted(const char *text, size_t len, uint64_t *answer) {
  struct vl_fitted f;
  struct vl_err err = {""};
  vl_status s = vl_fitted_parse(text, len, &f, &err);
  if (s == VL_OK) *answer = f.nt;
  return s;
}

static vl_status t_points(const char *text, size_t len, uint64_t *answer) {
  struct vl_points p;
  struct vl_err err = {""};
  vl_status s = vl_points_parse(text, len, NULL, 0, &p, &err);
  if (s != VL_OK) return s;
  *answer = p.n * 31u + p.nvars;
  vl_points_release(&p);
  return VL_OK;
}

static vl_status t_trace(const char *text, size_t len, uint64_t *answer) {
  struct vl_trace t;
  struct vl_err err = {""};
  vl_status s = vl_trace_parse(text, len, &t, &err);
  if (s != VL_OK) return s;
  struct vl_cache_conf conf = {0, 0, 0, false};
  struct vl_replay r;
  s = vl_trace_replay(&t, -1, &conf, &r);
  if (s == VL_OK) *answer = r.peak_allocated + r.peak_reserved + t.n_marks;
  /* each event's names too: an allocation's module lost to a failed
   * allocation once passed here (the peaks alone were the same) */
  for (size_t i = 0; s == VL_OK && i < t.n; i++)
    *answer += (t.ev[i].module * 3u + t.ev[i].at * 5u + t.ev[i].dtype * 7u) * (i + 1);
  vl_trace_release(&t);
  return s;
}

/* trace --snapshot and what is live at the peak (trace's report), on the
 * trace scaled to another batch */
static vl_status t_trace_views(const char *text, size_t len, uint64_t *answer) {
  struct vl_trace t;
  struct vl_err err = {""};
  vl_status s = vl_trace_parse(text, len, &t, &err);
  if (s != VL_OK) return s;
  struct vl_cache_conf conf = {0, 0, 0, false};
  struct vl_replay r;
  s = vl_trace_replay_scaled(&t, -1, &conf, 2.0, &r);
  struct vl_snapshot snap;
  if (s == VL_OK) s = vl_trace_snapshot(&t, -1, &conf, 2.0, r.peak_event, &snap);
  if (s == VL_OK) {
    *answer = r.peak_allocated + snap.n_segs * 7u + snap.n_blocks * 11u + snap.n_ev * 13u;
    vl_snapshot_release(&snap);
    struct vl_live_at l;
    s = vl_trace_live_at(&t, -1, 2.0, r.peak_event, &l);
    if (s == VL_OK) {
      *answer += l.bytes + l.n_mark * 17u + l.n_module * 19u;
      vl_trace_live_release(&l);
    }
  }
  vl_trace_release(&t);
  return s;
}

/* the recipe reader is the tool's (src/recipe.c): it says what is wrong on
 * stderr and answers an exit code */
static char recipe_path[1024]; /* the file's path: it names files beside it */

static vl_status t_recipe(const char *text, size_t len, uint64_t *answer) {
  struct recipe *r = NULL;
  int rc = recipe_parse(recipe_path, text, len, &r);
  if (rc) {
    assert_null(r);
    return VL_ENOMEM;
  }
  *answer = r->n_set * 1000u + r->n_ignored * 10u + r->n_unknown;
  recipe_free(r);
  return VL_OK;
}

static vl_status bill_of(const char *config, void (*shape)(struct vl_job *), uint64_t *answer) {
  size_t len = 0;
  char *text = tu_read(config, &len);
  struct vl_arch a;
  struct vl_err err = {""};
  vl_status s = text ? vl_arch_from_json(text, len, &a, &err) : VL_EIO;
  free(text);
  if (s != VL_OK) return s;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 2;
  j.seq = 256;
  shape(&j);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  s = vl_bill_compute(&a, &j, &ov, b, &err);
  if (s == VL_OK) *answer = b->total_bytes + b->peak_allocated_bytes;
  free(b);
  return s;
}

static void zero3(struct vl_job *j) {
  j->dp = 4;
  j->zero = 3;
}
static void infer(struct vl_job *j) {
  j->task = VL_TASK_INFER;
  j->precision = VL_PREC_BF16;
  j->new_tokens = 16;
}
static void one_gpu(struct vl_job *j) { (void)j; }
static void checkpointed(struct vl_job *j) { j->checkpointing = VL_CKPT_FULL; }
static void pipeline(struct vl_job *j) {
  j->pp = 2;
  j->dp = 2;
  j->zero = 1;
}

static vl_status t_bill_zero3(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/gpt2.json", zero3, answer);
}
static vl_status t_bill_train(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/gpt2.json", one_gpu, answer);
}
static vl_status t_bill_train_ckpt(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/falcon-7b.json", checkpointed, answer);
}
static vl_status t_bill_infer(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/qwen2-0.5b.json", infer, answer);
}
static vl_status t_bill_pipeline(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/llama-2-7b.json", pipeline, answer);
}

/* a card of the bundled catalog, by value (the catalog released) */
static vl_status card(const char *name, struct vl_gpu *g) {
  size_t clen = 0;
  char *cat = tu_read("data/gpus.json", &clen);
  struct vl_catalog c;
  struct vl_err err = {""};
  vl_status s = cat ? vl_catalog_parse(cat, clen, &c, &err) : VL_EIO;
  free(cat);
  if (s != VL_OK) return s;
  const struct vl_gpu *found = vl_catalog_find(&c, name);
  assert_non_null(found);
  *g = *found;
  vl_catalog_release(&c);
  return VL_OK;
}

/* trace --gpu: the tracer's op lines priced on a card */
static vl_status t_steptrace(const char *text, size_t len, uint64_t *answer) {
  struct vl_gpu g;
  vl_status s = card("h100-80gb", &g);
  if (s != VL_OK) return s;
  struct vl_trace_time t;
  struct vl_err err = {""};
  s = vl_trace_step_time(text, len, &g, &t, &err);
  if (s == VL_OK) *answer = (uint64_t)(t.time.step_s * 1e9);
  return s;
}

/* fit over several CSVs: the second's points appended to the first's */
static vl_status t_points_append(const char *text, size_t len, uint64_t *answer) {
  struct vl_points a, b;
  struct vl_err err = {""};
  vl_status s = vl_points_parse(text, len, NULL, 0, &a, &err);
  if (s != VL_OK) return s;
  s = vl_points_parse(text, len, NULL, 0, &b, &err);
  if (s == VL_OK) {
    s = vl_points_append(&a, &b, &err);
    vl_points_release(&b);
  }
  if (s == VL_OK) {
    *answer = a.n * 31u + a.nvars;
    for (size_t i = 0; i < a.n; i++)
      *answer += (uint64_t)a.y[i] + (uint64_t)a.x[i * VL_FIT_MAX_VARS];
  }
  vl_points_release(&a);
  return s;
}

/* fit --terms: the terms over the points' variables */
static vl_status t_terms(const char *text, size_t len, uint64_t *answer) {
  struct vl_points p;
  struct vl_err err = {""};
  vl_status s = vl_points_parse(text, len, NULL, 0, &p, &err);
  if (s != VL_OK) return s;
  struct vl_term_spec terms[VL_FIT_MAX_TERMS];
  size_t n = 0;
  s = vl_terms_parse("1,batch,seq,batch*seq", &p, terms, &n, &err);
  vl_points_release(&p);
  if (s == VL_OK) *answer = n;
  return s;
}

/* sensitivity --vary */
static vl_status t_vary(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_vary v;
  struct vl_err err = {""};
  vl_status s = vl_vary_parse("precision=bf16,fp16,amp-bf16", false, &v, &err);
  if (s == VL_OK) *answer = (uint64_t)v.n_values;
  return s;
}

/* estimate's step time (its kernel tables are compiled in: none to read) */
static vl_status t_step_time(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_arch a;
  tu_arch("data/models/qwen2-0.5b.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 4;
  j.seq = 512;
  struct vl_gpu g;
  vl_status s = card("h100-80gb", &g);
  if (s != VL_OK) return s;
  struct vl_step_time t;
  struct vl_err err = {""};
  s = vl_step_time(&a, &j, &g, &t, &err);
  if (s == VL_OK) *answer = (uint64_t)(t.step_s * 1e9);
  return s;
}

/* estimate --max-batch: bills until the card is full */
static vl_status t_search(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_job j;
  vl_job_init(&j);
  j.seq = 1024;
  struct vl_gpu g;
  vl_status s = card("l4", &g);
  if (s != VL_OK) return s;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  uint64_t best = 0;
  struct vl_err err = {""};
  s = vl_search_max(&a, &j, &ov, &g, 0.0, VL_SEARCH_BATCH, &best, b, &err);
  if (s == VL_OK) *answer = best * 1000003u + b->peak_allocated_bytes;
  free(b);
  return s;
}

/* plan: GPT-2 priced on one card (each candidate's bill replayed,
 * its step priced, the decision tree's bill); small, for each of its
 * allocations is a whole search */
static vl_status t_plan(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  struct vl_gpu gpus[1];
  vl_status s = card("h100-80gb", &gpus[0]);
  if (s != VL_OK) return s;
  struct vl_plan_query q;
  vl_plan_query_init(&q);
  q.arch = &a;
  q.base.seq = 1024;
  q.tokens = 1000000;
  q.global_batch = 2;
  q.gpus = gpus;
  q.n_gpus = 1;
  q.max_gpus = 1;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_plan_result r;
  struct vl_err err = {""};
  s = vl_plan_search(&q, &ov, &r, &err);
  if (s != VL_OK) return s;
  /* the candidates, their hours (each step priced) and the decision tree */
  *answer = r.n * 1000003u + r.n_trace;
  for (size_t i = 0; i < r.n; i++)
    *answer += (uint64_t)(r.c[i].hours * 1e6);
  vl_plan_release(&r);
  return VL_OK;
}

/* sensitivity: GPT-2 with its sequence drawn, each draw's bill replayed */
static vl_status t_sensitivity(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_sens_query q;
  memset(&q, 0, sizeof q);
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  q.arch = &a;
  vl_job_init(&q.job);
  q.job.seq = 512;
  q.samples = 24;
  q.seed = 7;
  q.max_estimates = 6; /* the first draws, then the surface: both paths */
  q.vary[0] = (struct vl_vary){.var = VL_VARY_SEQ, .dist = VL_DIST_UNIFORM, .pct = 0.2};
  q.n_vary = 1;
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  struct vl_sens_result *r = calloc(1, sizeof *r);
  assert_non_null(r);
  struct vl_err err = {""};
  vl_status s = vl_sensitivity_run(&q, &ov, r, &err);
  if (s == VL_OK) *answer = r->drawn * 1000003u + r->failed * 1009u + r->estimates + r->p95;
  free(r);
  return s;
}

/* Records read once, before the loop: their own reader is tortured above
 * ("record"); what reads them below is what the loop fails. A two-rank DDP
 * run (a bill per rank, samples of both GPUs) and one with the job's marks. */
static struct vl_record ddp_rec, marks_rec;

static void load_records(void) {
  static const struct {
    const char *file;
    struct vl_record *rec;
  } recs[] = {{"tests/data/records/h200x2-gpt2-ddp-kept-rank1.jsonl", &ddp_rec},
              {"tests/data/records/sample.jsonl", &marks_rec}};
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
    size_t len = 0;
    char *text = tu_read(recs[i].file, &len);
    struct vl_err err = {""};
    if (!text || vl_record_parse(text, len, recs[i].rec, &err) != VL_OK)
      fail_msg("cannot read %s: %s", recs[i].file, err.msg);
    free(text);
  }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211u;
  return h;
}

/* the probe's layer (report, doctor, audit, sweep, plan --run): a failed
 * allocation once left the bill, the ranks' bills or the step times out
 * and answered as if the run had none */
static vl_status t_probe(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_probe_layer *f = calloc(1, sizeof *f);
  assert_non_null(f);
  vl_status s = vl_probe_analyze(&ddp_rec, f);
  if (s == VL_OK) {
    assert_true(f->has_bill && f->n_rank_peaks > 1 && f->ranks[1].has_bill && f->step_s_median > 0);
    uint64_t h = fnv(14695981039346656037u, f->bill, sizeof f->bill);
    h = fnv(h, &f->transient, sizeof f->transient);
    h = fnv(h, &f->n_ledger, sizeof f->n_ledger);
    h = fnv(h, &f->step_s_median, sizeof f->step_s_median);
    h = fnv(h, &f->tokens_per_s, sizeof f->tokens_per_s);
    h = fnv(h, &f->peak_allocated, sizeof f->peak_allocated);
    for (unsigned k = 0; k < f->n_rank_peaks; k++) {
      h = fnv(h, &f->ranks[k].has_bill, sizeof f->ranks[k].has_bill);
      h = fnv(h, f->ranks[k].bill, sizeof f->ranks[k].bill);
      h = fnv(h, &f->ranks[k].transient, sizeof f->ranks[k].transient);
    }
    *answer = h;
  }
  free(f);
  return s;
}

/* what report, doctor and trace read of a run (src/records.c): the record
 * streamed, summarised, the probe's layer; an error said and an exit code,
 * never a run without its bill */
static vl_status t_load_run(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct cli_run *run = calloc(1, sizeof *run);
  assert_non_null(run);
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/records/h200x2-gpt2-ddp-kept-rank1.jsonl",
           VL_SOURCE_DIR);
  int rc = cli_load_run(path, run);
  if (!rc) {
    assert_true(run->fw.has_bill && run->fw.ranks[1].has_bill && run->fw.has_ladder);
    *answer = fnv(run->rec.n_samples + run->rec.n_phases * 7u + (uint64_t)run->n_findings * 11u,
                  run->fw.bill, sizeof run->fw.bill);
    *answer = fnv(*answer, run->fw.ladder, sizeof run->fw.ladder);
    vl_record_release(&run->rec);
  }
  free(run);
  return rc ? VL_ENOMEM : VL_OK;
}

/* audit's and sweep's step time from the job's stamps: 0 once stood for a
 * failed allocation, read as "too few stamps" */
static vl_status t_mark_median(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  double med = -1;
  vl_status s = vl_record_mark_median_s(&marks_rec, "forward", &med);
  if (s == VL_OK) *answer = (uint64_t)(med * 1e9);
  return s;
}

/* report --format html: the page whole (each rank's reserved and allocated
 * marks on the timeline, the samples they stand on), or nothing and
 * VL_ENOMEM; fewer marks were once drawn */
static vl_status t_report_html(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  struct vl_run_summary sum;
  struct vl_finding findings[VL_MAX_FINDINGS];
  int nf = 0;
  vl_record_summarize(&ddp_rec, &sum, findings, &nf);
  struct vl_probe_layer *f = calloc(1, sizeof *f);
  assert_non_null(f);
  vl_status s = vl_probe_analyze(&ddp_rec, f);
  char *page = NULL;
  size_t n = 0;
  if (s == VL_OK) {
    vl_probe_ladder(f, &sum);
    struct vl_report_view v = {&ddp_rec, &sum, findings, nf, "run.jsonl", f, NULL};
    FILE *o = open_memstream(&page, &n);
    assert_non_null(o);
    int w = vl_render_report(o, VL_REP_HTML, &v);
    assert_int_equal(fclose(o), 0);
    s = w == 0 ? VL_OK : w == -2 ? VL_ENOMEM : VL_EIO;
    if (s == VL_ENOMEM && n) fail_msg("out of memory, and %zu bytes of the page written", n);
    if (s == VL_OK) *answer = fnv(14695981039346656037u, page, n);
  }
  free(page);
  free(f);
  return s;
}

/* fit --by-phase's curves: the larger of the two fits; the first fit's
 * alone were once drawn when an allocation failed */
static vl_status t_curves_larger(const char *text, size_t len, uint64_t *answer) {
  struct vl_points p;
  struct vl_err err = {""};
  vl_status s = vl_points_parse(text, len, NULL, 0, &p, &err);
  if (s != VL_OK) return s;
  struct vl_term_spec t[VL_FIT_MAX_TERMS], to[VL_FIT_MAX_TERMS];
  size_t nt = 0, nto = 0, n = 0, axis = 0;
  for (size_t k = 0; k < p.nvars; k++)
    if (!strcmp(p.var[k], "seq")) axis = k;
  struct vl_fit_result r, ro;
  s = vl_terms_parse("const,b,bs,bs2", &p, t, &nt, &err);
  if (s == VL_OK) nto = vl_terms_without_squares(t, nt, to);
  if (s == VL_OK) s = vl_fit_points(&p, t, nt, &r, &err);
  if (s == VL_OK) s = vl_fit_points(&p, to, nto, &ro, &err);
  struct vl_fit_curve *c = calloc(2 * VL_FIT_MAX_CURVES, sizeof *c), *first = c + VL_FIT_MAX_CURVES;
  assert_non_null(c);
  if (s == VL_OK)
    s = vl_fit_curves_larger(&p, &r, t, nt, &ro, to, nto, NULL, 0, axis, c, VL_FIT_MAX_CURVES, &n);
  if (s == VL_OK) {
    /* the second fit is above the first somewhere: its curves are not the first's */
    size_t m = vl_fit_curves(&p, &r, t, nt, NULL, 0, axis, first, VL_FIT_MAX_CURVES);
    assert_int_equal(m, n);
    bool above = false;
    for (size_t k = 0; k < n; k++)
      for (size_t i = 0; i < c[k].n; i++)
        above |= c[k].y[i] > first[k].y[i];
    assert_true(above);
    *answer = n;
    for (size_t k = 0; k < n; k++)
      *answer = fnv(*answer, c[k].y, c[k].n * sizeof c[k].y[0]);
  }
  free(c);
  vl_points_release(&p);
  return s;
}

static void moe(struct vl_job *j) { j->batch = 1; }
static void lora(struct vl_job *j) {
  j->lora_rank = 16;
  j->lora_targets[0] = "all-linear";
  j->n_lora_targets = 1;
}
static void eager(struct vl_job *j) { j->attention = VL_ATTN_EAGER; }

static vl_status t_bill_moe(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/olmoe-1b-7b.json", moe, answer);
}
static vl_status t_bill_mla(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/deepseek-v2-lite.json", moe, answer);
}
static vl_status t_bill_lora(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/qwen2-0.5b.json", lora, answer);
}
static vl_status t_bill_encoder(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/bert-base-uncased.json", one_gpu, answer);
}
static vl_status t_bill_t5(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/t5-base.json", eager, answer);
}
static vl_status t_bill_bart(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/bart-base.json", one_gpu, answer);
}
static vl_status t_bill_vit(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/vit-base-patch16-224.json", one_gpu, answer);
}
static vl_status t_bill_resnet(const char *text, size_t len, uint64_t *answer) {
  (void)text, (void)len;
  return bill_of("data/models/resnet-50.json", one_gpu, answer);
}

static const struct torture readers[] = {
    {"config (mixtral)", "data/models/mixtral-8x7b.json", t_config, true},
    {"config (t5)", "data/models/t5-base.json", t_config, true},
    {"config (resnet)", "data/models/resnet-50.json", t_config, true},
    {"config (llama: decoder)", "data/models/llama-3-8b.json", t_config, true},
    {"config (deepseek-v2: MLA, MoE)", "data/models/deepseek-v2-lite.json", t_config, true},
    {"config (bert: encoder)", "data/models/bert-base-uncased.json", t_config, true},
    {"config (bart: seq2seq)", "data/models/bart-base.json", t_config, true},
    {"config (vit: vision)", "data/models/vit-base-patch16-224.json", t_config, true},
    {"config (gpt2)", "data/models/gpt2.json", t_config, true},
    {"catalog", "data/gpus.json", t_catalog, false},
    {"prices", "tests/fuzz/corpus_prices/example.json", t_prices, false},
    {"record", "tests/data/records/sample.jsonl", t_record, false},
    {"record, streamed", NULL, t_record_read, false},
    {"commitment", "tests/data/commitments/llama3-8b-lora.json", t_commitment, true},
    {"check's settings and config identity", "tests/data/commitments/job-estimate-output.json",
     t_check, false},
    {"deepspeed", "tests/data/deepspeed/zero3-offload.json", t_deepspeed, true},
    {"measured", "tests/data/measured/h200-within.json", t_measured, false},
    {"validate's summaries", "tests/data/measured/h200-subset.json", t_validate_summary, false},
    {"fitted", "tests/data/fit/gpt2-eager-h200.fit.json", t_fitted, true},
    {"points", "tests/data/fit/gpt2-eager-h200.csv", t_points, false},
    {"trace", "tests/data/traces/batch.trace", t_trace, false},
    {"trace scaled: snapshot, live at the peak", "tests/data/traces/where.trace", t_trace_views,
     false},
    {"step trace (trace --gpu)", "tests/data/traces/custom-ops.trace", t_steptrace, false},
    {"fit's terms", "tests/data/fit/gpt2-eager-h200.csv", t_terms, false},
    {"points appended", "tests/data/fit/gpt2-eager-h200.csv", t_points_append, false},
    {"sensitivity's --vary", NULL, t_vary, true},
    {"recipe (axolotl, its deepspeed file)", "tests/data/recipes/qlora-zero2.yml", t_recipe, false},
    {"recipe (torchtune)", "tests/data/recipes/8B_lora_single_device.yaml", t_recipe, false},
    {"recipe (trl)", "tests/data/recipes/sft_config.json", t_recipe, false},
    /* the analytic bill allocates nothing of its own (its formulas are
     * compiled: lib/model/terms.def) */
    {"bill (training, zero-3)", NULL, t_bill_zero3, true},
    {"bill (training, one GPU: the step replayed)", NULL, t_bill_train, false},
    {"bill (training, checkpointed, replayed)", NULL, t_bill_train_ckpt, false},
    {"bill (generation, replayed)", NULL, t_bill_infer, false},
    {"bill (pipeline stage)", NULL, t_bill_pipeline, false},
    {"bill (MoE, replayed)", NULL, t_bill_moe, false},
    {"bill (MLA and MoE, replayed)", NULL, t_bill_mla, false},
    {"bill (LoRA all-linear, replayed)", NULL, t_bill_lora, false},
    {"bill (encoder, replayed)", NULL, t_bill_encoder, false},
    {"bill (t5 eager, replayed)", NULL, t_bill_t5, false},
    {"bill (bart, replayed)", NULL, t_bill_bart, false},
    {"bill (vit, replayed)", NULL, t_bill_vit, false},
    {"bill (resnet, replayed)", NULL, t_bill_resnet, false},
    {"step time (estimate on a card)", NULL, t_step_time, false},
    {"max batch (estimate --max-batch)", NULL, t_search, false},
    {"plan", NULL, t_plan, false},
    {"sensitivity", NULL, t_sensitivity, false},
    {"probe's layer (two ranks, their bills)", NULL, t_probe, false},
    {"a run read (report, doctor, trace)", NULL, t_load_run, false},
    {"step time from the job's stamps", NULL, t_mark_median, false},
    {"run page (report --format html)", NULL, t_report_html, false},
    {"fit --by-phase's curves", "tests/data/fit/gpt2-eager-h200.csv", t_curves_larger, false},
};

/* At most this many runs a reader: past it, a stride over its allocations
 * (the first 64 and the last always), to keep the test a few seconds. */
#define MAX_RUNS 1500u

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void torture(const struct torture *t) {
  double t0 = now_s();
  size_t len = 0;
  char *text = NULL;
  if (t->file) {
    snprintf(recipe_path, sizeof recipe_path, "%s/%s", VL_SOURCE_DIR, t->file);
    text = tu_read(t->file, &len);
    if (!text) fail_msg("%s: cannot read %s", t->name, t->file);
  }
  uint64_t want = 0, got;
  unsigned long before = vl_alloc_calls();
  vl_status s = t->run(text, len, &want);
  unsigned long n = vl_alloc_calls() - before;
  if (s != VL_OK) fail_msg("%s: %s without a failed allocation", t->name, vl_strerror(s));
  if (t->none_to_fail) {
    if (n) fail_msg("%s: %lu allocations of its own: take its none_to_fail mark off", t->name, n);
    printf("  %-40s no allocation of its own\n", t->name);
    free(text);
    return;
  }
  if (n == 0) fail_msg("%s: no allocation to fail", t->name);
  unsigned long stride = n > MAX_RUNS ? n / MAX_RUNS : 1, failed = 0, other = 0;
  for (unsigned long k = 1; k <= n; k += (k < 64 || k + stride > n) ? 1 : stride) {
    got = 0;
    vl_alloc_fail_at(k);
    s = t->run(text, len, &got);
    vl_alloc_fail_at(0);
    if (s == VL_OK) {
      /* another path taken: it must come to the same answer */
      if (got != want)
        fail_msg("%s: allocation %lu of %lu failed, and it answered %llu instead of %llu", t->name,
                 k, n, (unsigned long long)got, (unsigned long long)want);
      other++;
      continue;
    }
    if (s != VL_ENOMEM && s != VL_EIO)
      fail_msg("%s: allocation %lu of %lu failed: %s", t->name, k, n, vl_strerror(s));
    failed++;
  }
  printf("  %-40s %6lu allocations, %lu runs refused, %lu recovered, %.2f s\n", t->name, n, failed,
         other, now_s() - t0);
  assert_true(failed + other > 0);
  free(text);
}

static void every_reader_survives_every_failed_allocation(void **state) {
  (void)state;
  load_records();
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
    torture(&readers[i]);
  vl_record_release(&ddp_rec);
  vl_record_release(&marks_rec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_reader_survives_every_failed_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
