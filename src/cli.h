/* The command-line tool: shared helpers. All wording for users lives in src/. */
#ifndef VRAMLEDGER_CLI_H
#define VRAMLEDGER_CLI_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vramledger/probe.h"
#include "vramledger/status.h"

enum { VL_EXIT_OK = 0, VL_EXIT_ERROR = 1, VL_EXIT_USAGE = 2, VL_EXIT_NOFIT = 3 };

/* Messages on stderr: "vramledger: error: ...", "vramledger: hint: ...". */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Options: a table of long names; parse_options walks argv. */
struct cli_opt {
  const char *name; /* without "--" */
  bool has_arg;
  int id;
};

/* Callback per option; return 0 to go on, or an exit code to stop. */
typedef int (*cli_opt_fn)(void *ctx, int id, const char *name, const char *arg);

/*! Parse argv[1..argc) against opts. Unknown options get a "did you mean"
 * hint; positional arguments are refused. @return 0 or an exit code. */
int cli_parse(int argc, const char **argv, const struct cli_opt *opts, cli_opt_fn fn, void *ctx);

/*! Strict number parsers; print the usage error themselves.
 * @return 0, or VL_EXIT_USAGE. */
int cli_u64(const char *flag, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out);
int cli_double(const char *flag, const char *arg, double lo, double hi, double *out);

/*! Index of arg in the NULL-terminated names, or -1 after printing a usage
 * error that lists them and suggests the nearest. */
int cli_choice(const char *flag, const char *arg, const char *const *names);

/*! Nearest of candidates to s by edit distance, or NULL if none is close. */
const char *cli_nearest(const char *s, const char *const *candidates, size_t n);
/*! names[0..n) joined by ", " into out (cap bytes), as many whole names as
 * fit. */
void cli_join(char *out, size_t cap, const char *const *names, size_t n);
/*! A command line's word as a record keeps it: a secret's value written as
 * "<redacted>" (after "--password=", "--hf-token=", "HF_TOKEN=", ..., the
 * word after such a flag, the password after -u/--user, a secret header,
 * a URL's userinfo and secret query values); docs/record.md, "Secrets".
 * buf (n bytes) holds a rewritten word ("<redacted>" whole where it would
 * not fit); the result is arg itself when it holds no secret. */
const char *cli_redact_arg(const char *prev, const char *arg, char *buf, size_t n);

/* Files. */
/*! Read a whole file (at most 64 MiB) into a NUL-terminated heap buffer the
 * caller frees with vl_free. On failure prints the error and returns NULL. */
char *cli_read_file(const char *path, size_t *len);
/* The same without a word on failure (the caller says what it means). */
char *cli_read_file_quiet(const char *path, size_t *len);
/* Both read only a regular file, or the pipe that is stdin (/dev/stdin):
 * a FIFO, a device or a socket is refused, never waited on (opened
 * O_NONBLOCK, then fstat'ed). cli_check_input says the same of a path
 * another reader opens (a run record): 0, or VL_EXIT_ERROR (said). A path
 * that cannot be opened is 0: its reader says why. */
int cli_check_input(const char *path);
/* An output file the user named, opened for writing ("w": truncated,
 * "a": appended), created 0644 when missing, never through a symbolic
 * link (O_NOFOLLOW): a link there is refused and said, with the fix.
 * NULL: said on stderr. */
FILE *cli_create_output(const char *path, const char *mode);
/* The same, created with perm (0600: a file of vramledger's own directory) */
FILE *cli_create_stream(const char *path, const char *mode, mode_t perm);
/* An output file replaced whole (a commitment, a report, a CSV): written
 * to a temporary file beside it (".NAME.XXXXXX", created with O_EXCL, the
 * mode the file has, else perm less the umask), flushed and synced, then
 * renamed over it; on any failure the file is as it was, the temporary
 * removed, and the message names the file. A symbolic link or anything
 * but a regular file at path is refused, as cli_create_fd does. */
struct cli_output {
  FILE *f; /* write here between open and close */
  char path[4096], tmp[4096 + 16];
};
/*! Open o's temporary for path. @return 0, or VL_EXIT_ERROR (said). */
int cli_output_open(struct cli_output *o, const char *path, mode_t perm);
/*! Flush, sync and close the temporary; on failure it is removed.
 * @return 0, or VL_EXIT_ERROR (said). */
int cli_output_close(struct cli_output *o);
/*! Rename the closed temporary over the file; on failure it is removed.
 * @return 0, or VL_EXIT_ERROR (said). */
int cli_output_rename(struct cli_output *o);
/*! cli_output_close, then cli_output_rename. */
int cli_output_commit(struct cli_output *o);
/*! Give the output up: the temporary closed and removed, the file as it
 * was. Quiet; o may be unopened (zeroed) or already given up. */
void cli_output_discard(struct cli_output *o);
/* The same as a descriptor: path opened write-only with flags (O_TRUNC or
 * O_APPEND), created with perm when missing, never through a symbolic
 * link. -1: said on stderr. */
int cli_create_fd(const char *path, int flags, mode_t perm);
/*! vramledger's own files, each an environment override, else where
 * `cmake --install` puts it beside the executable, else the build tree's
 * (docs/install.md). The bundled data: $VRAMLEDGER_DATA,
 * PREFIX/share/vramledger/data, the source's data/. */
const char *cli_data_dir(void);
/*! The Python side: $VRAMLEDGER_PYTHON_DIR, PREFIX/share/vramledger/python,
 * the source's python/. */
const char *cli_python_dir(void);
/*! The interposer: $VRAMLEDGER_PRELOAD,
 * PREFIX/lib/vramledger/libvramledger-preload.so, the build's. */
const char *cli_preload_path(void);

struct vl_record;
struct vl_commitment;
/*! Read and parse a run record: RUN is a run directory or its
 * record.jsonl; the file's path goes to path[]. Release with
 * vl_record_release. On failure prints the error, returns an exit code. */
int cli_load_record(const char *run, struct vl_record *rec, char *path, size_t path_len);
/* A run read and analysed in all its layers: the record, its summary and
 * findings, the framework layer with its ladder. */
struct cli_run {
  struct vl_record rec;
  struct vl_run_summary sum;
  struct vl_finding findings[VL_MAX_FINDINGS];
  int n_findings;
  struct vl_probe_layer fw;
  char path[4096];
};
/*! cli_load_record, then vl_record_summarize, vl_probe_analyze and
 * vl_probe_ladder. Release with vl_record_release(&run->rec). On failure
 * prints the error, returns an exit code (the record released). */
int cli_load_run(const char *run, struct cli_run *out);
/*! Peak process and driver-allocated bytes (and duration) of a run. */
int cli_run_peaks(const char *run, uint64_t *process, uint64_t *cuda, double *duration_s,
                  char *path, size_t path_len);
/*! Read commitment.json; on failure prints the error, returns an exit code. */
int cli_load_commitment(const char *path, struct vl_commitment *c);

struct vl_arch;
/*! Load --model (a config.json path or a bundled name) into *arch; on
 * failure prints the error (with suggestions) and returns an exit code. */
int cli_load_model(const char *model, struct vl_arch *arch);
/* A --model resolved and read (commit and check identify it by content). */
struct cli_model {
  char path[4096];  /* the file read */
  char bundled[64]; /* the bundled model's name; "" for a file */
  char *text;       /* its content; the caller frees it with vl_free */
  size_t len;
};
/*! cli_load_model, keeping what was read in *m (m->text NULL on failure).
 * A bare name is the bundled model even where a file of that name is in
 * the working directory (a note on stderr names it); a path has a '/' or
 * ends in .json. */
int cli_load_model_file(const char *model, struct vl_arch *arch, struct cli_model *m);
/*! Where --model model lies, without reading it: the file into path (n
 * bytes; PATH_MAX for a Hub id to be looked up), the bundled name into
 * bundled (bn bytes; "" for a file). Notes on stderr say which folder's or
 * cache snapshot's file it is. @return 0, or an exit code (said). */
int cli_locate_model(const char *model, char *path, size_t n, char *bundled, size_t bn);
/*! The name --model model is shown by: its last path component, trailing
 * slashes off (a folder's name), in buf (n bytes). @return buf. */
const char *cli_model_name(const char *model, char *buf, size_t n);
/*! The bundled models with their model_type, and the other ways --model
 * names one, to out. @return 0, -1 when out could not be written. */
int cli_list_models(FILE *out);

#include "vramledger/banned.h"
#endif
