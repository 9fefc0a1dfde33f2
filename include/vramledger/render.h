/* vramledger: renderers. They format what the model computed; they never
 * compute. Output goes to a caller-given FILE. */
#ifndef VRAMLEDGER_RENDER_H
#define VRAMLEDGER_RENDER_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vramledger/arch.h"
#include "vramledger/catalog.h"
#include "vramledger/model.h"

/* Everything an estimate report shows. */
/* A fine-tuning recipe behind an estimate (estimate --recipe): each key
 * with its value (for mapped keys, the flags it set) and its line. */
struct vl_recipe_key {
  const char *key, *value, *why; /* why: NULL, or why it is listed */
  unsigned line;                 /* 1-based; 0: no line */
};
struct vl_recipe_view {
  const char *kind, *file;
  const struct vl_recipe_key *mapped, *ignored, *unknown;
  size_t n_mapped, n_ignored, n_unknown;
};

struct vl_estimate_view {
  const char *model_name; /* bundled name or file path */
  const struct vl_arch *arch;
  const struct vl_job *job;
  const struct vl_bill *bill;
  const struct vl_gpu *gpu; /* NULL: no fit check */
  const struct vl_fit *fit; /* with gpu */
  bool explain;             /* show every formula */
  int searched;             /* 0 none, 1 --max-batch, 2 --max-seq */
  uint64_t search_best;     /* 0: not even 1 fits */
  const char *version;
  const struct vl_context_carry *carry; /* with gpu: its context carried over; NULL none */
  bool context_edge; /* with carry: the headroom or shortfall within the context's range
                      * (vl_fit_near_edge) */
  const struct vl_step_time *time;     /* with gpu, training: the step's time; NULL none */
  const struct vl_recipe_view *recipe; /* --recipe: its keys (--explain, JSON); NULL none */
};

enum vl_format { VL_FMT_TEXT, VL_FMT_JSON, VL_FMT_MD };

struct vl_measured;
struct vl_compare_row;
struct vl_compare_summary;
struct vl_compare_tally;

/* Everything a validate report shows. */
struct vl_validate_view {
  const struct vl_measured *measured;
  const struct vl_compare_row *rows;
  size_t n;
  const struct vl_compare_summary *calibration, *holdout;
  double tol_allocated, tol_total;      /* percent */
  const char *source;                   /* the results file */
  const struct vl_compare_tally *tally; /* rows beyond a tolerance, rows not compared */
  const struct vl_time_summary *time;   /* step time, predicted vs measured; NULL: no card */
  const char *time_card;                /* the card the steps were priced on */
  double tol_time;                      /* percent */
  bool time_gate;                       /* --time-tolerance given: time counts in tally->beyond */
};

struct vl_record;
struct vl_run_summary;
struct vl_finding;

/* Everything a run report shows. */
struct vl_report_view {
  const struct vl_record *rec;
  const struct vl_run_summary *sum;
  const struct vl_finding *findings;
  int n_findings;
  const char *source;
  const struct vl_probe_layer *fw;    /* the probe's layer (fw->present false without it) */
  const struct vl_probe_compare *cmp; /* report --estimate; NULL without */
};

enum vl_report_format { VL_REP_TEXT, VL_REP_JSON, VL_REP_MD, VL_REP_TRACE, VL_REP_HTML };

struct vl_probe_layer;
struct vl_probe_compare;
/*! Map an estimate's bill (vl_bill_compute) onto the probe's lines of f
 * (vramledger/probe.h): master weights go with optimizer states (the probe
 * counts an optimizer's own fp32 copies there), its KV cache with
 * transient. out->present is false when f has no bill. */
void vl_probe_compare(const struct vl_probe_layer *f, const struct vl_bill *b,
                      struct vl_probe_compare *out);

/*! Write the run report; VL_REP_TRACE is Chrome/Perfetto trace JSON;
 * VL_REP_HTML one self-contained page with an SVG timeline.
 * @return 0, -1 on a write error, or -2 when memory ran out (VL_REP_HTML:
 * nothing written then, never a timeline with marks left out). */
int vl_render_report(FILE *out, enum vl_report_format fmt, const struct vl_report_view *v);

struct vl_gpu_sample;
struct vl_proc_sample;
struct vl_gpu_extra;
struct vl_proc_ident;

/* One tick of `watch`: every GPU and the processes on it. */
#define VL_WATCH_MAX_GPUS 64
#define VL_WATCH_MAX_PROCS 256
struct vl_watch_gpu {
  const struct vl_gpu_sample *gpu; /* index, name and uuid even when !up */
  const struct vl_proc_sample *procs;
  unsigned n_procs;
  /* Prometheus text only */
  bool up;                            /* NVML answered for this GPU at this tick; false: only
                                         vramledger_gpu_up is written for it */
  const struct vl_proc_ident *idents; /* procs' command, container, pod (n_procs), or NULL */
  const struct vl_gpu_extra *extra;   /* dcgm-exporter's other fields, or NULL */
  uint64_t used_max_bytes;            /* the most used_bytes sampled since the last scrape */
};
/* A process's most GPU memory on one GPU since the previous scrape: every
 * process NVML listed in that time, those gone since included. */
struct vl_watch_peak {
  unsigned gpu; /* NVML index */
  const char *uuid;
  unsigned pid;
  const struct vl_proc_ident *ident; /* or NULL */
  uint64_t max_bytes;
};
struct vl_watch_view {
  uint64_t t_unix_ms;
  const struct vl_watch_gpu *gpus; /* every GPU NVML counts */
  unsigned n_gpus;
  const char *host;
  /* Prometheus text only */
  unsigned n_gpus_unread; /* GPUs NVML counts but could not read this tick:
                             vramledger_up is 0 when there are any */
  const char *version;    /* vramledger_build_info's version label; NULL: none */
  const struct vl_watch_peak *peaks;
  size_t n_peaks;
};

/* VL_WATCH_PROMETHEUS_DCGM: the GPUs under dcgm-exporter's names, units
 * and labels (DCGM_FI_DEV_FB_USED in MiB, gpu, UUID, pci_bus_id, device,
 * modelName, Hostname), so dashboards made for it read vramledger's
 * samples. */
enum vl_watch_format {
  VL_WATCH_CSV,
  VL_WATCH_JSONL,
  VL_WATCH_PROMETHEUS,
  VL_WATCH_PROMETHEUS_DCGM
};

/*! Write one tick. CSV rows carry no header (vl_render_watch_csv_header);
 * Prometheus text is the exposition format 0.0.4. @return 0 or -1. */
int vl_render_watch(FILE *out, enum vl_watch_format fmt, const struct vl_watch_view *v);
int vl_render_watch_csv_header(FILE *out);

/* Everything a Training Resource Commitment holds. */
struct vl_commit_view {
  const char *model_name;
  const struct vl_arch *arch;
  const struct vl_job *job;
  const struct vl_bill *bill;
  const struct vl_gpu *gpu;
  const struct vl_fit *fit;
  const char *created; /* ISO 8601 UTC, given by the caller */
  const char *run;     /* record of a measured run, or NULL */
  uint64_t run_peak_process_bytes;
  uint64_t run_peak_cuda_alloc_bytes;
  double sla_tokens_per_s; /* 0: none */
  double gpu_hours;        /* 0: none */
  const char *version;
  /* what the model is (commitment.h, "what the model is") */
  const char *config_canonical; /* the canonical config.json; NULL: none recorded */
  const char *config_sha256;    /* of it */
  const char *config_file;      /* relative to the commitment's folder; NULL if bundled */
  const char *config_bundled;   /* the bundled name; NULL for a file */
  /* the fallbacks that fit this job (vl_commitment_peak_action, _throughput_action) */
  const char *peak_action, *throughput_action;
  const char *run_hardware; /* with run, where the run differs from the committed
                               hardware: what it ran on ("2 x h200"); else NULL */
};

/*! commitment.json (md = false) or COMMITMENT.md (md = true). */
int vl_render_commitment(FILE *out, bool md, const struct vl_commit_view *v);

struct vl_check_view;
/*! The gate's verdict: text (one line per problem, then what to do) or
 * JSON (schema vramledger.check/1: every problem with its kind, field,
 * committed and current values and action). fmt is VL_FMT_TEXT or
 * VL_FMT_JSON. @return 0, or -1 on a write error. */
int vl_render_check(FILE *out, enum vl_format fmt, const struct vl_check_view *v);

struct vl_audit;
/*! The audit as text (a table, then notes and the verdict) or JSON
 * (schema vramledger.audit/1). fmt is VL_FMT_TEXT or VL_FMT_JSON.
 * @return 0, or -1 on a write error. */
int vl_render_audit(FILE *out, enum vl_format fmt, const struct vl_audit *a);

struct vl_plan_query;
struct vl_plan_result;

/* A plan: the query, the ranked feasible candidates, the trace. */
struct vl_plan_view {
  const char *model_name;
  const struct vl_plan_query *q;
  const struct vl_plan_result *r;
  size_t top; /* rows shown in text/md */
  const char *prices_date;
  const char *model; /* JSON's "model", as `commit --plan` reads it from any folder: the
                      * bundled name, or the config's absolute path; NULL: model_name */
  const struct vl_context_carry *carry; /* one per q->gpus card; NULL: none said */
};

/*! The plan as a cost table (text, md) or JSON (best, candidates). */
int vl_render_plan(FILE *out, enum vl_format fmt, const struct vl_plan_view *v);
/*! One self-contained page: time against cost of every plan that fits
 * (SVG, the Pareto front and the best marked), the table, the why. */
int vl_render_plan_html(FILE *out, const struct vl_plan_view *v);

struct vl_points;
struct vl_term_spec;
struct vl_fit_result;
struct vl_fit_prediction;
struct vl_fit_curve;
struct vl_fit_est_summary;

/* A fit and its predictions. */
struct vl_fit_view {
  const struct vl_points *pts;
  const struct vl_term_spec *terms;
  size_t n_terms;
  const struct vl_fit_result *fit;
  const struct vl_fit_prediction *predictions;
  size_t n_predict;
  const char *source;
  const double *estimate;                       /* the estimator at each point (pts->n), or NULL */
  const struct vl_fit_est_summary *est_summary; /* with estimate */
  const char *model;                            /* the estimator's model, when estimate */
  const char *measure;                          /* which peak: "total", "reserved", "allocated" */
  const struct vl_fit_curve *curves;            /* the fit along `axis`, for the plot */
  size_t n_curves, axis;
  /* fit --by-phase: `fit` is the forward/backward phases' peak, fit_opt
   * the optimizer step's, fitted apart; pts hold the measured overall
   * peak; each prediction is the larger, phase[i] names it. NULL when not. */
  const struct vl_fit_result *fit_opt;
  const struct vl_term_spec *opt_terms; /* its terms: those without a square */
  size_t n_opt_terms;
  const char *const *phase;
  double phase_rel_max; /* max |larger fit - measured| / measured over the points */
};

/*! The fitted formula, its quality and the predictions. */
int vl_render_fit(FILE *out, enum vl_format fmt, const struct vl_fit_view *v);
/*! One self-contained HTML page: the points, the fitted curves and the
 * predictions with their intervals (SVG), and the coefficients. */
int vl_render_fit_html(FILE *out, const struct vl_fit_view *v);

struct vl_sens_query;
struct vl_sens_result;
struct vl_sens_verdict;

/*! The sensitivity report: percentiles, P(exceed) per card, tornado,
 * fallbacks; the seed is printed. v: the gate's verdict (vl_sens_judge),
 * NULL or none given: no gate, JSON's verdict null. */
int vl_render_sensitivity(FILE *out, enum vl_format fmt, const struct vl_sens_query *q,
                          const struct vl_sens_result *r, const struct vl_sens_verdict *v);

/*! Write the validate report. @return 0, or -1 on a write error. */
int vl_render_validate(FILE *out, enum vl_format fmt, const struct vl_validate_view *v);

/*! VL_OK when every count and byte count of the bill is at most
 * VL_EXACT_MAX (vramledger/model.h); else VL_ERANGE, err naming the first past it (its JSON
 * field and what it is) and saying the configuration is beyond what can
 * be represented. Commands check it before they render a bill. */
vl_status vl_bill_representable(const struct vl_bill *b, struct vl_err *err) VL_MUST_USE;

/*! Write the estimate report. @return 0, or -1 on a write error. */
int vl_render_estimate(FILE *out, enum vl_format fmt, const struct vl_estimate_view *v);

/*! Format bytes as GiB with two decimals into buf ("12.34 GiB"). */
const char *vl_fmt_gib(char *buf, size_t n, uint64_t bytes);
/*! Format an integer with thousands separators ("6,738,415,616"). */
const char *vl_fmt_int(char *buf, size_t n, uint64_t v);

struct vl_diag;
struct vl_doctor_verdict;
/*! Write doctor's findings (text, or JSON with id, code, severity, title,
 * evidence, fix); v: the --fail-on gate's verdict (NULL: no gate; JSON's
 * verdict null). @return 0, or -1 on a write error. */
int vl_render_doctor(FILE *out, bool json, const char *source, const struct vl_diag *d, int n,
                     const struct vl_doctor_verdict *v);

struct vl_trace;
struct vl_live_at;
struct vl_replay;
/* Everything `vramledger trace` shows. */
struct vl_trace_view {
  const char *trace;  /* the file */
  const char *device; /* "cuda", "cpu", "meta", "all" */
  const struct vl_trace *tr;
  int job_exit_status;
  const char *const *names; /* one allocator setting per replay */
  const struct vl_replay *replays;
  int n;
  const uint64_t *batches; /* per replay: the micro-batch it stands for; 0: the traced one */
  /* the probe's layer of the traced job's record, whose bill is shown
   * (activations by difference: see tracer.py), or NULL (a replayed file) */
  const struct vl_probe_layer *fw;
  const char *from_mark;         /* the peaks are from this mark on (trace --from-mark), or NULL */
  const struct vl_live_at *live; /* what is live at the first replay's peak, or NULL */
  /* trace --gpu: the traced step's ops priced on gpu (lib/decide/steptrace.c),
   * or NULL; without, ops > 0 says --gpu would price that many */
  const struct vl_trace_time *time;
  const char *gpu;
  double ops;
};
/*! Write the replays side by side (text) or as JSON (schema
 * vramledger.trace/1). @return 0, or -1 on a write error. */
int vl_render_trace(FILE *out, bool json, const struct vl_trace_view *v);
/*! The same as Markdown: the replays' peaks and the step time.
 * @return 0, or -1 on a write error. */
int vl_render_trace_md(FILE *out, const struct vl_trace_view *v);

struct vl_snapshot;
/*! The allocator's state as a memory snapshot pickle, the file
 * torch.cuda.memory._dump_snapshot() writes and pytorch.org/memory_viz
 * loads. @return 0, or -1 on a write error. */
int vl_render_snapshot(FILE *out, const struct vl_snapshot *s);

#endif
