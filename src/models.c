/* Models for the commands: a config.json path or a bundled name. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "vramledger/alloc.h"
#include "vramledger/arch.h"

/* Names of the bundled models (data/models/<name>.json), sorted. */
static size_t bundled_models(char names[][48], size_t cap) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/models", cli_data_dir());
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < cap) {
    size_t l = strlen(de->d_name);
    if (l < 6 || l - 5 >= 48 || strcmp(de->d_name + l - 5, ".json")) continue;
    snprintf(names[n++], 48, "%.*s", (int)(l - 5), de->d_name);
  }
  closedir(d);
  for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen names */
    for (size_t k = i; k > 0 && strcmp(names[k - 1], names[k]) > 0; k--) {
      char t[48];
      memcpy(t, names[k], 48);
      memcpy(names[k], names[k - 1], 48);
      memcpy(names[k - 1], t, 48);
    }
  return n;
}

/* Resolve --model to a file. A path is spelled as one (it has a '/' or
 * ends in .json); a bare name is the bundled model of that name, whatever
 * files the working directory holds (a note names the one not read, so that
 * the same command means the same model in every folder); else a file of
 * that name. */
static int model_path(const char *model, char *path, size_t n, char *bundled, size_t bn) {
  struct stat st;
  bundled[0] = '\0';
  size_t ml = strlen(model);
  bool spelled = strchr(model, '/') || (ml >= 5 && strcmp(model + ml - 5, ".json") == 0);
  bool here = stat(model, &st) == 0;
  if (spelled) {
    snprintf(path, n, "%s", model);
    return 0;
  }
  static char names[128][48];
  size_t count = bundled_models(names, 128);
  for (size_t i = 0; i < count; i++)
    if (strcmp(names[i], model) == 0) {
      snprintf(path, n, "%s/models/%s.json", cli_data_dir(), model);
      snprintf(bundled, bn, "%s", model);
      if (here)
        fprintf(stderr,
                "vramledger: note: '%s' is the bundled model (%s); the file '%s' in this folder "
                "is not read: give './%s' for it\n",
                model, path, model, model);
      return 0;
    }
  if (here) {
    snprintf(path, n, "%s", model);
    return 0;
  }
  cli_error("cannot find model '%s': no such file, and no bundled model of that name", model);
  const char *cand[128];
  for (size_t i = 0; i < count; i++)
    cand[i] = names[i];
  const char *near = cli_nearest(model, cand, count);
  if (near) cli_hint("did you mean '%s'?", near);
  char list[2048] = "";
  size_t o = 0;
  for (size_t i = 0; i < count; i++) {
    int w = snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", names[i]);
    if (w < 0 || (size_t)w >= sizeof list - o) break;
    o += (size_t)w;
  }
  if (count) cli_hint("bundled models: %s", list);
  cli_hint("or give the path of a Hugging Face config.json");
  return VL_EXIT_ERROR;
}

int cli_load_model_file(const char *model, struct vl_arch *arch, struct cli_model *m) {
  struct cli_model local;
  struct cli_model *r = m ? m : &local;
  memset(r, 0, sizeof *r);
  int rc = model_path(model, r->path, sizeof r->path, r->bundled, sizeof r->bundled);
  if (rc) return rc;
  r->text = cli_read_file(r->path, &r->len);
  if (!r->text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(r->text, r->len, arch, &err);
  if (s != VL_OK) {
    cli_error("cannot use '%s': %s", r->path, err.msg);
    if (s == VL_EPARSE) cli_hint("the file must be a Hugging Face config.json (JSON)");
  }
  if (s != VL_OK || !m) {
    vl_free(r->text);
    r->text = NULL;
  }
  return s == VL_OK ? 0 : VL_EXIT_ERROR;
}

int cli_load_model(const char *model, struct vl_arch *arch) {
  return cli_load_model_file(model, arch, NULL);
}
