/* Models for the commands: a config.json path or a bundled name. */
#include <dirent.h>
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

/* Resolve --model to a file: an existing path, or a bundled name. */
static int model_path(const char *model, char *path, size_t n) {
  struct stat st;
  if (stat(model, &st) == 0 || strchr(model, '/') || strstr(model, ".json")) {
    snprintf(path, n, "%s", model);
    return 0;
  }
  static char names[128][48];
  size_t count = bundled_models(names, 128);
  for (size_t i = 0; i < count; i++)
    if (strcmp(names[i], model) == 0) {
      snprintf(path, n, "%s/models/%s.json", cli_data_dir(), model);
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

int cli_load_model(const char *model, struct vl_arch *arch) {
  char path[4096];
  int rc = model_path(model, path, sizeof path);
  if (rc) return rc;
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return VL_EXIT_ERROR;
  struct vl_err err = {""};
  vl_status s = vl_arch_from_json(text, len, arch, &err);
  vl_free(text);
  if (s != VL_OK) {
    cli_error("cannot use '%s': %s", path, err.msg);
    if (s == VL_EPARSE) cli_hint("the file must be a Hugging Face config.json (JSON)");
    return VL_EXIT_ERROR;
  }
  return 0;
}
