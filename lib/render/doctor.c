/* doctor's findings in words: evidence and a concrete fix for each. */
#include <jansson.h>
#include <stdio.h>

#include "internal.h" /* first: it includes <jansson.h> */
#include "vramledger/doctor.h"
#include "vramledger/render.h"

static const char *const sev_name[] = {"info", "warn", "error"};

/* the words of the findings on what the allocator and the memory do; false: not one of them */
static bool words_memory(const struct vl_diag *d, char *title, size_t nt, char *ev, size_t ne,
                         char *fix, size_t nf) {
  switch (d->kind) {
  case VL_D_EXTRA_CONTEXTS:
    snprintf(title, nt, "more processes hold GPU memory than run the model");
    snprintf(ev, ne,
             "%.0f processes of the job held GPU memory at once, %.0f with the model; each "
             "CUDA context costs about %.0f MiB",
             d->a, d->b, MIB(d->c) / (d->a > 0 ? d->a : 1));
    snprintf(fix, nf,
             "keep CUDA out of DataLoader workers and helpers: no .cuda()/.to('cuda') in a "
             "Dataset or collate_fn, pin_memory in the main process, "
             "multiprocessing_context='spawn' if a worker must import CUDA code");
    break;
  case VL_D_FRAGMENTATION:
    snprintf(title, nt, "the caching allocator holds memory it cannot use");
    snprintf(ev, ne,
             "at the peak %.1f %% of the %.2f GiB reserved is inactive split blocks and %.1f %% "
             "is cached but free",
             100 * d->a, GIB(d->c), 100 * d->b);
    snprintf(fix, nf,
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:128 on "
             "older PyTorch); keep tensor shapes steady between steps");
    break;
  case VL_D_ALLOC_RETRIES:
    snprintf(title, nt, "the allocator ran out and retried");
    snprintf(ev, ne,
             "%.0f allocation retries: each freed the whole cache (cudaFree, a device-wide "
             "synchronisation) to satisfy one request",
             d->a);
    snprintf(fix, nf,
             "the job is at the edge of the card: expandable_segments:True, a smaller "
             "micro-batch with gradient accumulation, or activation checkpointing");
    break;
  case VL_D_LEAK: {
    /* each layer's evidence, the one that shows the leak first */
    const struct vl_leak *l = &d->leak;
    char sys[200], fw[200];
    if (l->system)
      snprintf(sys, sizeof sys, "NVML: the job's memory floor rises %.1f MiB/s (%.0f MiB in all)",
               MIB(l->floor_bytes_per_s), MIB(l->floor_grown_bytes));
    else if (l->floor_grown_bytes > 0)
      snprintf(sys, sizeof sys,
               "NVML: the job's memory floor rises %.0f MiB in all, not more than 5 %% of its peak",
               MIB(l->floor_grown_bytes));
    else
      snprintf(sys, sizeof sys, "NVML: the job's memory floor does not rise");
    if (l->framework)
      snprintf(fw, sizeof fw,
               "probe: allocated at the start of a step rises %.2f MiB per step (%.1f MiB over "
               "%u steps)",
               MIB(l->step_bytes), MIB((double)l->step_total_bytes), l->steps);
    else if (l->probed)
      snprintf(fw, sizeof fw,
               "probe: allocated at the start of steps 4 on does not rise by more than 1 MiB "
               "and 0.5 %% of the peak");
    else
      snprintf(fw, sizeof fw, "probe: no framework layer in this record");
    snprintf(title, nt, "memory grows through the run");
    snprintf(ev, ne, "%s; %s", l->system ? sys : fw, l->system ? fw : sys);
    snprintf(fix, nf,
             "something keeps tensors across steps: a loss summed without .item() or "
             ".detach(), outputs appended to a list, a hook or a cache holding references");
    break;
  }
  case VL_D_CLIP_PEAK:
    snprintf(title, nt, "gradient clipping (or unscaling) sets the peak");
    snprintf(ev, ne, "the peak, %.2f GiB in step %.0f, falls between backward and the optimizer",
             GIB(d->a), d->c);
    snprintf(fix, nf,
             "clip_grad_norm_(..., foreach=False) makes no whole-model temporaries; or clip "
             "inside the fused optimizer step");
    break;
  case VL_D_OPTIMIZER_PEAK:
    snprintf(title, nt, "the optimizer step's temporaries set the peak");
    snprintf(ev, ne, "%.2f GiB of the %.2f GiB peak are the optimizer step's temporaries",
             GIB(d->a), GIB(d->b));
    snprintf(fix, nf,
             "fused=True (one kernel, no per-group copies) or foreach=False (one tensor at a "
             "time)");
    break;
  case VL_D_EMPTY_CACHE:
    snprintf(title, nt, "the cache is emptied and refilled");
    snprintf(ev, ne, "reserved memory dropped %.0f times between phases", d->a);
    snprintf(fix, nf,
             "remove torch.cuda.empty_cache() from the training loop: every refill is a "
             "cudaMalloc and the memory is needed again at once");
    break;
  default: return false;
  }
  return true;
}

/* the words of the findings on the job: its ranks, phases, probe and
 * processes, and of a kind not known (no probe's) */
static void words_job(const struct vl_diag *d, char *title, size_t nt, char *ev, size_t ne,
                      char *fix, size_t nf) {
  switch (d->kind) {
  case VL_D_RANK_IMBALANCE:
    snprintf(title, nt, "ranks use different amounts of memory");
    if (d->part >= 0)
      snprintf(ev, ne,
               "the %.0f ranks' peaks are %.1f %% apart; most of it %s: rank %u holds "
               "%.2f GiB more than rank %u",
               d->b, 100 * d->a, vl__fw_line_name(d->part), d->rank_hi, GIB(d->c), d->rank_lo);
    else
      snprintf(ev, ne, "the %.0f ranks' peaks are %.1f %% apart", d->b, 100 * d->a);
    if (d->part == VL_BILL_OUTPUTS)
      snprintf(fix, nf,
               "the fullest rank decides the card: a pipeline's last stage keeps every "
               "micro-batch's logits (vramledger estimate --pp shows it): give it fewer layers, "
               "or fewer micro-batches in flight");
    else
      snprintf(fix, nf,
               "the fullest rank decides the card: even out uneven batches (packing, "
               "bucketing by length), rank-0-only work (logging, evaluation, checkpoints)");
    break;
  case VL_D_DDP_FIRST_BUCKETS:
    snprintf(title, nt, "DDP kept its first gradient buckets into step 2");
    snprintf(ev, ne,
             "%.0f of %.0f ranks (rank %s): the second step's peak %.2f GiB above every later "
             "step's, the size of the parameters (DDP's bucket copy of the gradients)",
             d->b, d->c, d->text, GIB(d->a));
    snprintf(fix, nf,
             "timing, not the job: NCCL had not yet released the first step's buckets when DDP "
             "rebuilt them; budget for it (vramledger estimate prints it as the other "
             "outcome), or torch.cuda.synchronize() and time.sleep(0.1) once after the first "
             "step, which lets NCCL's watchdog release them (on 2 H200s: 0 of 32 trials, 0 of 8 "
             "rank peaks kept)");
    break;
  case VL_D_OOM:
    snprintf(title, nt, "the job ran out of memory");
    snprintf(ev, ne, "step %.0f, in %s: asked for %.2f GiB with %.2f GiB free", d->c, d->text,
             GIB(d->a), GIB(d->b));
    snprintf(fix, nf,
             "see the bill at that moment in the record (vramledger report); run again with "
             "--snapshot for pytorch.org/memory_viz; then vramledger estimate --gpu for a "
             "configuration that fits");
    break;
  case VL_D_ACTIVATIONS:
    snprintf(title, nt, "activations are most of the peak");
    snprintf(ev, ne, "%.2f GiB saved for backward of a %.2f GiB peak", GIB(d->a), GIB(d->b));
    snprintf(fix, nf,
             "activation checkpointing (model.gradient_checkpointing_enable()), a smaller "
             "micro-batch with gradient accumulation, or SDPA/FlashAttention");
    break;
  case VL_D_CASTS:
    snprintf(title, nt, "weights are cast to half precision more than once");
    snprintf(ev, ne,
             "%.2f GiB of autocast weight copies for %.2f GiB of weights (one copy is half)",
             GIB(d->a), GIB(d->b));
    snprintf(fix, nf,
             "one autocast region around the whole forward, one dtype; or keep the weights in "
             "bf16 (mixed precision with an fp32 master copy)");
    break;
  case VL_D_CACHE_GROWS:
    snprintf(title, nt, "reserved memory grows while allocated does not");
    snprintf(ev, ne, "reserved at the start of a step rose %.1f %% (%.2f to %.2f GiB)", 100 * d->a,
             GIB(d->b), GIB(d->c));
    snprintf(fix, nf,
             "changing shapes or CUDA graphs' private pools grow the cache: pad to fixed "
             "shapes, expandable_segments:True, reuse graphs");
    break;
  case VL_D_PROBE_STOPPED:
    snprintf(title, nt, "the probe stopped itself");
    snprintf(ev, ne, "%s", d->text);
    snprintf(fix, nf,
             "the job ran on unchanged; please report this with the record to the vramledger "
             "developers");
    break;
  case VL_D_DESCENDANTS_LEFT:
    snprintf(title, nt, "processes the job started outlived the record");
    snprintf(ev, ne,
             "%.0f of the %.0f process%s that outlived the job's own%s%s%s still ran when the "
             "record closed (%s): their GPU memory after that is not in this record",
             d->a, d->b, d->b == 1 ? "" : "es", *d->text ? " (" : "", d->text, *d->text ? ")" : "",
             d->c ? "run stopped waiting for them: a second Ctrl-C" : "run --no-wait-descendants");
    snprintf(fix, nf,
             "wait for them: drop --no-wait-descendants, and run samples until the last ends; "
             "or stop them before the job exits (join DataLoader workers and the processes it "
             "starts, terminate servers it launched)");
    break;
  case VL_D_NO_PROBE:
  default:
    snprintf(title, nt, "no framework layer in this record");
    snprintf(ev, ne,
             "no PyTorch probe wrote into the record (not Python, no torch, or "
             "--no-probe / VRAMLEDGER_PROBE=0)");
    snprintf(fix, nf,
             "run the job under vramledger run without --no-probe for the bill, "
             "phases and the findings that need them");
    break;
  }
}

static void words(const struct vl_diag *d, char *title, size_t nt, char *ev, size_t ne, char *fix,
                  size_t nf) {
  if (!words_memory(d, title, nt, ev, ne, fix, nf)) words_job(d, title, nt, ev, ne, fix, nf);
}

/* the gate's line: which listed findings fail the run */
static void verdict_text(FILE *o, const struct vl_diag *d, int n,
                         const struct vl_doctor_verdict *v) {
  if (!v) return;
  fputs("\ngate (--fail-on ", o);
  vl__plain_text(o, v->fail_on);
  fprintf(o, "): %s", v->n_listed ? "fail:" : "pass: no listed finding");
  for (int i = 0; i < n; i++)
    if (v->listed[i]) fprintf(o, " %s", vl_diag_id(d[i].kind));
  fputc('\n', o);
}

int vl_render_doctor(FILE *o, bool json, const char *source, const struct vl_diag *d, int n,
                     const struct vl_doctor_verdict *v) {
  char title[160], ev[512], fix[512];
  if (json) {
    json_t *root = json_object();
    json_object_set_new(root, "schema", vl__json_str("vramledger.doctor/1"));
    json_object_set_new(root, "record", vl__json_str(source));
    json_object_set_new(root, "verdict",
                        v ? vl__json_str(v->n_listed ? "fail" : "pass") : json_null());
    json_object_set_new(root, "fail_on", v ? vl__json_str(v->fail_on) : json_null());
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
      words(&d[i], title, sizeof title, ev, sizeof ev, fix, sizeof fix);
      json_t *x = json_object();
      json_object_set_new(x, "id", vl__json_str(vl_diag_id(d[i].kind)));
      json_object_set_new(x, "code", vl__json_str(vl_diag_slug(d[i].kind)));
      json_object_set_new(x, "severity", vl__json_str(sev_name[d[i].severity]));
      json_object_set_new(x, "title", vl__json_str(title));
      json_object_set_new(x, "evidence", vl__json_str(ev));
      json_object_set_new(x, "fix", vl__json_str(fix));
      if (v) json_object_set_new(x, "result", vl__json_str(v->listed[i] ? "fail" : "pass"));
      json_array_append_new(a, x);
    }
    json_object_set_new(root, "findings", a);
    int rc = json_dumpf(root, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    fputc('\n', o);
    return rc == 0 && !ferror(o) ? 0 : -1;
  }
  fputs("doctor: ", o);
  vl__plain_text(o, source); /* a path from the command line */
  fputc('\n', o);
  if (n == 0) fprintf(o, "  nothing wrong found\n");
  for (int i = 0; i < n; i++) {
    words(&d[i], title, sizeof title, ev, sizeof ev, fix, sizeof fix);
    /* the words hold the record's own (a phase, a module): control
     * characters as '?', as report writes them */
    fprintf(o, "\n  %s %s [%s] ", vl_diag_id(d[i].kind), sev_name[d[i].severity],
            vl_diag_slug(d[i].kind));
    vl__plain_text(o, title);
    fputs("\n    evidence: ", o);
    vl__plain_text(o, ev);
    fputs("\n    fix: ", o);
    vl__plain_text(o, fix);
    fputc('\n', o);
  }
  verdict_text(o, d, n, v);
  return ferror(o) ? -1 : 0;
}
