/* Models for the commands: a config.json path, a folder holding one (a
 * Hugging Face snapshot), a Hub id found in the local Hugging Face cache,
 * or a bundled name. */
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- the Hugging Face cache ------------------------------------------- */

/* snprintf into out (n bytes). @return false where it did not fit. */
__attribute__((format(printf, 3, 4))) static bool fits(char *out, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(out, n, fmt, ap);
  va_end(ap);
  return w >= 0 && (size_t)w < n;
}

/* The hub cache folder huggingface_hub reads (huggingface_hub/constants.py):
 * HF_HUB_CACHE, the older HUGGINGFACE_HUB_CACHE, HF_HOME/hub,
 * XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; the first set
 * decides. */
static bool hub_cache(char *dir, size_t n) {
  const char *v, *home = getenv("HOME");
  if ((v = getenv("HF_HUB_CACHE")) && *v) return fits(dir, n, "%s", v);
  if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v) return fits(dir, n, "%s", v);
  if ((v = getenv("HF_HOME")) && *v) return fits(dir, n, "%s/hub", v);
  if ((v = getenv("XDG_CACHE_HOME")) && *v) return fits(dir, n, "%s/huggingface/hub", v);
  return fits(dir, n, "%s/.cache/huggingface/hub", home ? home : "");
}

/* Is id a Hub model id: NAME or ORG/NAME of letters, digits, '-', '_' and
 * '.', neither part starting with '.' or '-', no ".." (huggingface_hub's
 * validate_repo_id)? */
static bool hub_id(const char *id) {
  int slashes = 0;
  size_t part = 0;
  for (const char *p = id; *p; p++) {
    if (*p == '/') {
      if (!part || ++slashes > 1) return false;
      part = 0;
      continue;
    }
    bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.';
    if (!ok || (!part && (*p == '.' || *p == '-'))) return false;
    part++;
  }
  return part > 0 && strstr(id, "..") == NULL;
}

static bool regular(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The snapshot of repo (the cache's models--ORG--NAME folder) that holds a
 * config.json: the one refs/main names, else the newest. @return true with
 * the file in path (PATH_MAX bytes) and the snapshot in rev (rn bytes). */
static bool hub_snapshot(const char *repo, char *path, char *rev, size_t rn) {
  char file[PATH_MAX], hash[128] = "";
  FILE *f = fits(file, sizeof file, "%s/refs/main", repo) ? fopen(file, "r") : NULL;
  if (f) {
    if (!fgets(hash, sizeof hash, f)) hash[0] = '\0';
    fclose(f);
    hash[strcspn(hash, "\r\n")] = '\0';
  }
  if (hash[0] && !strchr(hash, '/') &&
      fits(path, PATH_MAX, "%s/snapshots/%s/config.json", repo, hash) && regular(path))
    return fits(rev, rn, "%.64s (refs/main)", hash) || true;
  DIR *d = fits(file, sizeof file, "%s/snapshots", repo) ? opendir(file) : NULL;
  if (!d) return false;
  struct dirent *de;
  time_t newest = 0;
  bool found = false;
  while ((de = readdir(d))) {
    char cfg[PATH_MAX];
    struct stat st;
    if (de->d_name[0] == '.' || !fits(cfg, sizeof cfg, "%s/%s/config.json", file, de->d_name) ||
        stat(cfg, &st) != 0 || !S_ISREG(st.st_mode) || (found && st.st_mtime <= newest))
      continue;
    newest = st.st_mtime;
    found = true;
    memcpy(path, cfg, sizeof cfg);
    fits(rev, rn, "%.64s (the newest snapshot)", de->d_name);
  }
  closedir(d);
  return found;
}

/* id in the local Hugging Face cache: the config.json of its snapshot in
 * path (PATH_MAX bytes), said on stderr. @return true, or false with the
 * folder looked in, in tried (PATH_MAX bytes). */
static bool hub_find(const char *id, char *path, char *tried) {
  char cache[PATH_MAX], rev[160];
  if (!hub_cache(cache, sizeof cache)) return false;
  if (!fits(tried, PATH_MAX, "%s/models--", cache)) return false;
  size_t w = strlen(tried);
  for (const char *p = id; *p; p++) /* '/' is "--" */
    if (w + 3 >= PATH_MAX || !fits(tried + w, PATH_MAX - w, *p == '/' ? "--" : "%c", *p))
      return false;
    else
      w = strlen(tried);
  if (!hub_snapshot(tried, path, rev, sizeof rev)) return false;
  fprintf(stderr, "vramledger: note: '%s' is the Hugging Face cache's snapshot %s: %s\n", id, rev,
          path);
  return true;
}

/* A folder's config.json in path. @return 0, or VL_EXIT_ERROR (said). */
static int folder_config(const char *dir, char *path, size_t n) {
  size_t l = strlen(dir);
  if (fits(path, n, "%s%sconfig.json", dir, l && dir[l - 1] == '/' ? "" : "/") && regular(path))
    return 0;
  cli_error("'%s' is a folder without a config.json", dir);
  cli_hint("give a Hugging Face model folder (a snapshot holding config.json), or the file itself");
  return VL_EXIT_ERROR;
}

/* Say that model was found nowhere, with the bundled names (count of
 * names) and the Hub cache folder looked in. @return VL_EXIT_ERROR. */
static int not_found(const char *model, char names[][48], size_t count, const char *tried) {
  cli_error("cannot find model '%s': no such file or folder, no bundled model of that name%s",
            model, tried[0] ? ", and not in the Hugging Face cache" : "");
  if (tried[0])
    cli_hint("looked for it in %s (the hub cache: HF_HUB_CACHE, else HF_HOME/hub, else "
             "~/.cache/huggingface/hub)",
             tried);
  const char *cand[128];
  for (size_t i = 0; i < count; i++)
    cand[i] = names[i];
  const char *near = cli_nearest(model, cand, count);
  if (near) cli_hint("did you mean '%s'?", near);
  char list[2048];
  cli_join(list, sizeof list, cand, count);
  if (count) cli_hint("bundled models: %s (--list-models)", list);
  cli_hint("or give a Hugging Face config.json, a model folder holding one, or a Hub id "
           "downloaded before (huggingface-cli download ORG/NAME config.json)");
  return VL_EXIT_ERROR;
}

/* Resolve --model to a file. A path is spelled as one (it has a '/' or
 * ends in .json); a bare name is the bundled model of that name, whatever
 * files the working directory holds (a note names the one not read, so that
 * the same command means the same model in every folder). Else, in order:
 * a file, a folder's config.json, the Hub id's snapshot in the local
 * Hugging Face cache (offline: nothing is downloaded). */
static int model_path(const char *model, char *path, size_t n, char *bundled, size_t bn) {
  struct stat st;
  bundled[0] = '\0';
  size_t ml = strlen(model);
  bool spelled = strchr(model, '/') || (ml >= 5 && strcmp(model + ml - 5, ".json") == 0);
  bool here = stat(model, &st) == 0;
  static char names[128][48];
  size_t count = spelled ? 0 : bundled_models(names, 128);
  for (size_t i = 0; i < count; i++)
    if (strcmp(names[i], model) == 0) {
      snprintf(path, n, "%s/models/%s.json", cli_data_dir(), model);
      snprintf(bundled, bn, "%s", model);
      if (here)
        fprintf(stderr,
                "vramledger: note: '%s' is the bundled model (%s); the %s '%s' in this folder "
                "is not read: give './%s' for it\n",
                model, path, S_ISDIR(st.st_mode) ? "folder" : "file", model, model);
      return 0;
    }
  if (here && S_ISDIR(st.st_mode)) return folder_config(model, path, n);
  char tried[PATH_MAX] = "";
  if (here || (spelled && !hub_id(model))) { /* read, or said missing, as a file */
    snprintf(path, n, "%s", model);
    return 0;
  }
  if (hub_id(model) && n >= PATH_MAX && hub_find(model, path, tried)) return 0;
  if (spelled && !count) count = bundled_models(names, 128);
  return not_found(model, names, count, tried);
}

const char *cli_model_name(const char *model, char *buf, size_t n) {
  size_t end = strlen(model), start;
  while (end > 1 && model[end - 1] == '/')
    end--;
  for (start = end; start > 0 && model[start - 1] != '/';)
    start--;
  snprintf(buf, n, "%.*s", (int)(end - start), model + start);
  return buf;
}

int cli_locate_model(const char *model, char *path, size_t n, char *bundled, size_t bn) {
  return model_path(model, path, n, bundled, bn);
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

int cli_list_models(FILE *out) {
  static char names[128][48];
  size_t count = bundled_models(names, 128);
  fputs("bundled models (--model NAME):\n", out);
  for (size_t i = 0; i < count; i++) {
    char path[PATH_MAX], type[64] = "?";
    size_t len = 0;
    char *text = fits(path, sizeof path, "%s/models/%s.json", cli_data_dir(), names[i])
                     ? cli_read_file_quiet(path, &len)
                     : NULL;
    struct vl_arch arch;
    struct vl_err err = {""};
    if (text && vl_arch_from_json(text, len, &arch, &err) == VL_OK)
      snprintf(type, sizeof type, "%s", arch.model_type);
    vl_free(text);
    fprintf(out, "  %-26s %s\n", names[i], type);
  }
  fputs("also: --model FILE (a Hugging Face config.json), --model FOLDER (one holding "
        "config.json),\n      --model ORG/NAME (its snapshot in the local Hugging Face cache: "
        "HF_HUB_CACHE,\n      else HF_HOME/hub, else ~/.cache/huggingface/hub; nothing is "
        "downloaded)\n",
        out);
  return ferror(out) ? -1 : 0;
}
