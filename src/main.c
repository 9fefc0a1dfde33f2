/* vramledger: how much GPU memory a training job takes, and where it goes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const struct command {
  const char *name;
  int (*fn)(int argc, const char **argv);
  const char *help;
  const char *summary;
} commands[] = {
    {"estimate", cmd_estimate, vl_help_estimate,
     "the per-GPU memory bill of a training step or a generation, with no GPU"},
    {"run", cmd_run, vl_help_run,
     "run a command unchanged and record its GPU memory (NVML + every allocation)"},
    {"report", cmd_report, vl_help_report, "what a run record says: peaks, layers, findings"},
    {"doctor", cmd_doctor, vl_help_doctor,
     "what is wrong with a run's memory: evidence and a fix, stable ids for CI"},
    {"trace", cmd_trace, vl_help_trace,
     "a job's every allocation, replayed through PyTorch's caching allocator"},
    {"watch", cmd_watch, vl_help_watch,
     "sample every GPU and process: CSV, JSON Lines, Prometheus, textfiles"},
    {"sweep", cmd_sweep, vl_help_sweep, "run a command over a grid of values, each point recorded"},
    {"sensitivity", cmd_sensitivity, vl_help_sensitivity,
     "Monte Carlo over the inputs: percentiles, P(out of memory) per card, drivers"},
    {"fit", cmd_fit, vl_help_fit, "the memory formula fitted on measured points, with predictions"},
    {"plan", cmd_plan, vl_help_plan, "which GPUs, how many, which strategy, how long, what cost"},
    {"commit", cmd_commit, vl_help_commit,
     "write the Training Resource Commitment (commitment.json, COMMITMENT.md)"},
    {"check", cmd_check, vl_help_check, "CI gate: does the job still match its commitment?"},
    {"audit", cmd_audit, vl_help_audit, "a finished run against its commitment"},
    {"validate", cmd_validate, vl_help_validate,
     "check the estimator against measurements on this machine's GPU"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *o) {
  fprintf(o, "usage: vramledger <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(o, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(o, "\n'vramledger <command> --help' shows a command's options; 'vramledger --version'\n"
             "its version, 'vramledger --paths' where its data, Python side and interposer are.\n");
}

static const struct command *find(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int unknown(const char *name) {
  const char *names[N_COMMANDS];
  for (size_t i = 0; i < N_COMMANDS; i++)
    names[i] = commands[i].name;
  cli_error("unknown command '%s'", name);
  const char *near = cli_nearest(name, names, N_COMMANDS);
  if (near)
    cli_hint("did you mean '%s'?", near);
  else
    cli_hint("run 'vramledger --help' for the list of commands");
  return VL_EXIT_USAGE;
}

int main(int argc, const char **argv) {
  if (argc < 2) {
    usage(stderr);
    return VL_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage(stdout);
    return VL_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("vramledger %s\n", VL_VERSION);
    return VL_EXIT_OK;
  }
  if (strcmp(cmd, "--paths") == 0) { /* where its own files were found: docs/install.md */
    printf("data        %s\npython      %s\ninterposer  %s\n", cli_data_dir(), cli_python_dir(),
           cli_preload_path());
    return VL_EXIT_OK;
  }
  if (strcmp(cmd, "help") == 0) {
    if (argc < 3) {
      usage(stdout);
      return VL_EXIT_OK;
    }
    const struct command *c = find(argv[2]);
    if (!c) return unknown(argv[2]);
    fputs(c->help, stdout);
    return VL_EXIT_OK;
  }
  const struct command *c = find(cmd);
  if (!c) return unknown(cmd);
  int rc = c->fn(argc - 1, argv + 1);
  if (fflush(stdout) != 0 && rc == VL_EXIT_OK) {
    cli_error("cannot write the output");
    return VL_EXIT_ERROR;
  }
  return rc;
}
