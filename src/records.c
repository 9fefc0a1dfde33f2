/* Run records and commitments for the commands: read, parse, report
 * errors in the commands' words. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "vramledger/alloc.h"
#include "vramledger/commitment.h"
#include "vramledger/record.h"

int cli_load_record(const char *run, struct vl_record *rec, char *path, size_t path_len) {
  struct stat st;
  if (stat(run, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(path, path_len, "%.3900s/record.jsonl", run);
  else
    snprintf(path, path_len, "%s", run);
  /* streamed: a record has no size limit (a day of 8 GPUs at 100 ms is
   * over 600 MiB) */
  if (cli_check_input(path)) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_record_read(path, rec, &err);
  if (s == VL_EIO) {
    cli_error("cannot read '%s': %s", path, err.msg);
    return VL_EXIT_ERROR;
  }
  if (s != VL_OK) {
    cli_error("cannot read the record '%s': %s", path, err.msg);
    return VL_EXIT_ERROR;
  }
  if (rec->damaged) /* docs/record.md: skipped, the rest read */
    fprintf(stderr,
            "vramledger: warning: the record '%s': %u line%s could not be read and %s skipped "
            "(line %zu%s%s: %s)\n",
            path, rec->damaged, rec->damaged == 1 ? "" : "s", rec->damaged == 1 ? "was" : "were",
            rec->damaged_line, rec->damaged_file[0] ? " of " : "", rec->damaged_file,
            rec->damaged_why);
  if (rec->implausible) /* past the card's memory: damaged data, skipped */
    fprintf(stderr,
            "vramledger: warning: the record '%s': line %zu%s%s: %s: damaged data, left out (%u "
            "event%s in all)\n",
            path, rec->implausible_line, rec->implausible_file[0] ? " of " : "",
            rec->implausible_file, rec->implausible_what, rec->implausible,
            rec->implausible == 1 ? "" : "s");
  return 0;
}

int cli_run_peaks(const char *run, uint64_t *process, uint64_t *cuda, double *duration_s,
                  char *path, size_t path_len) {
  struct vl_record rec;
  int rc = cli_load_record(run, &rec, path, path_len);
  if (rc) return rc;
  struct vl_run_summary sum;
  struct vl_finding f[VL_MAX_FINDINGS];
  int nf;
  vl_record_summarize(&rec, &sum, f, &nf);
  /* per GPU, as commitments are: the job's largest per-GPU peak when it
   * used several GPUs (the process tree's peak sums them) */
  *process = sum.gpus_used > 1 && sum.peak_gpu_bytes ? sum.peak_gpu_bytes : sum.peak_process_bytes;
  *cuda = sum.peak_cuda_alloc_bytes;
  if (duration_s) *duration_s = (double)sum.duration_ns * 1e-9;
  vl_record_release(&rec);
  return 0;
}

/* commitment.json -> struct; prints the error. */
int cli_load_commitment(const char *path, struct vl_commitment *c) {
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_commitment_parse(text, len, c, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use the commitment '%s': %s", path, err.msg);
    return VL_EXIT_ERROR;
  }
  return 0;
}

int cli_load_run(const char *run, struct cli_run *r) {
  int rc = cli_load_record(run, &r->rec, r->path, sizeof r->path);
  if (rc) return rc;
  r->n_findings = 0;
  vl_record_summarize(&r->rec, &r->sum, r->findings, &r->n_findings);
  vl_status s = vl_probe_analyze(&r->rec, &r->fw);
  if (s != VL_OK) {
    cli_error("cannot analyse the record '%s': %s", r->path, vl_strerror(s));
    vl_record_release(&r->rec);
    return VL_EXIT_ERROR;
  }
  vl_probe_ladder(&r->fw, &r->sum);
  return 0;
}
