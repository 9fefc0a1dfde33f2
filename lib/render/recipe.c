/* The recipe behind an estimate (estimate --recipe): a section of the text
 * under --explain and an object of the JSON. */
#include "internal.h"
#include "vramledger/render.h"

static void keys_text(FILE *o, const char *title, const struct vl_recipe_key *k, size_t n) {
  if (!n) return;
  fprintf(o, "  %s\n", title);
  for (size_t i = 0; i < n; i++) {
    fputs("    ", o);
    vl__plain_text(o, k[i].key);
    fputs(": ", o);
    vl__plain_text(o, k[i].value);
    if (k[i].line) fprintf(o, " (line %u)", k[i].line);
    if (k[i].why) {
      fputs(": ", o);
      vl__plain_text(o, k[i].why);
    }
    fputc('\n', o);
  }
}

void vl__recipe_text(FILE *o, const struct vl_recipe_view *r) {
  fputs("\nrecipe ", o);
  vl__plain_text(o, r->file);
  fprintf(o, " (%s)\n", r->kind);
  keys_text(o, "mapped (key: the flags it sets)", r->mapped, r->n_mapped);
  keys_text(o, "ignored (matters, not modelled)", r->ignored, r->n_ignored);
  keys_text(o, "unknown (not a key of this kind)", r->unknown, r->n_unknown);
}

static void keys_md(FILE *o, const char *what, const struct vl_recipe_key *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    fprintf(o, "| %s | ", what);
    vl__md_code(o, k[i].key);
    fputs(" | ", o);
    vl__md_code(o, k[i].value);
    fputs(" | ", o);
    if (k[i].line) fprintf(o, "%u", k[i].line);
    fputs(" | ", o);
    vl__md_text(o, k[i].why);
    fputs(" |\n", o);
  }
}

/* one table: each key, what became of it, its value (the flags it set),
 * its line and why it is listed */
void vl__recipe_md(FILE *o, const struct vl_recipe_view *r) {
  fputs("\n### Recipe ", o);
  vl__md_code(o, r->file);
  fprintf(o, " (%s)\n\n| | key | value | line | why |\n|---|---|---|---:|---|\n", r->kind);
  keys_md(o, "mapped", r->mapped, r->n_mapped);
  keys_md(o, "ignored", r->ignored, r->n_ignored);
  keys_md(o, "unknown", r->unknown, r->n_unknown);
}

static json_t *keys_json(const struct vl_recipe_key *k, size_t n) {
  json_t *o = json_object();
  for (size_t i = 0; i < n; i++)
    json_object_set_new(o, k[i].key, vl__json_str(k[i].value));
  return o;
}

json_t *vl__recipe_json(const struct vl_recipe_view *r) {
  json_t *o = json_object();
  json_object_set_new(o, "kind", vl__json_str(r->kind));
  json_object_set_new(o, "file", vl__json_str(r->file));
  json_object_set_new(o, "mapped", keys_json(r->mapped, r->n_mapped));
  json_object_set_new(o, "ignored", keys_json(r->ignored, r->n_ignored));
  json_object_set_new(o, "unknown", keys_json(r->unknown, r->n_unknown));
  return o;
}
