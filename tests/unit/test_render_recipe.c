/* lib/render/recipe.c: the recipe behind an estimate (estimate --recipe
 * --explain), a view built by hand (one key mapped to the flags it set,
 * one ignored with why, one unknown whose name holds a quote and a pipe),
 * rendered inside GPT-2's estimate: the text's section a line a key with
 * its line number, Markdown's table a row a key with the names as code,
 * JSON's "recipe" object each key with its value; without --explain the
 * text and Markdown leave it out, JSON does not. */
#include "render_capture.h"
#include "vramledger/render.h"

static const struct vl_recipe_key mapped[] = {{"lora_r", "--lora-rank 16", NULL, 5}};
static const struct vl_recipe_key ignored[] = {
    {"learning_rate", "2e-4", "the step's memory does not depend on it", 9}};
static const struct vl_recipe_key unknown[] = {{"my \"key\" | x", "1", NULL, 0}};
static const struct vl_recipe_view recipe = {.kind = "axolotl",
                                             .file = "qlora.yml",
                                             .mapped = mapped,
                                             .ignored = ignored,
                                             .unknown = unknown,
                                             .n_mapped = 1,
                                             .n_ignored = 1,
                                             .n_unknown = 1};

static struct vl_arch arch;
static struct vl_job job;
static struct vl_bill bill;
static struct vl_estimate_view view;

static int setup(void **state) {
  (void)state;
  tu_arch("data/models/gpt2.json", &arch);
  vl_job_init(&job);
  job.batch = 1;
  job.seq = 128;
  tu_bill(&arch, &job, &bill);
  view = (struct vl_estimate_view){.model_name = "gpt2",
                                   .arch = &arch,
                                   .job = &job,
                                   .bill = &bill,
                                   .explain = true,
                                   .version = "test",
                                   .recipe = &recipe};
  return 0;
}

static void text_section(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_estimate(rc_f, VL_FMT_TEXT, &view));
  const char *want = "\nrecipe qlora.yml (axolotl)\n"
                     "  mapped (key: the flags it sets)\n"
                     "    lora_r: --lora-rank 16 (line 5)\n"
                     "  ignored (matters, not modelled)\n"
                     "    learning_rate: 2e-4 (line 9): the step's memory does not depend on it\n"
                     "  unknown (not a key of this kind)\n"
                     "    my \"key\" | x: 1\n";
  if (!strstr(text, want)) fail_msg("no recipe section in:\n%s", text);
  free(text);
  struct vl_estimate_view plain = view;
  plain.explain = false;
  RC_CAPTURE(text, vl_render_estimate(rc_f, VL_FMT_TEXT, &plain));
  assert_null(strstr(text, "recipe qlora.yml"));
  free(text);
}

static void markdown_table(void **state) {
  (void)state;
  char *text = NULL;
  RC_CAPTURE(text, vl_render_estimate(rc_f, VL_FMT_MD, &view));
  assert_non_null(strstr(text, "\n### Recipe `qlora.yml` (axolotl)\n\n"
                               "| | key | value | line | why |\n|---|---|---|---:|---|\n"
                               "| mapped | `lora_r` | `--lora-rank 16` | 5 |  |\n"));
  assert_non_null(strstr(text, "| ignored | `learning_rate` | `2e-4` | 9 | the step's memory"));
  /* the unknown key's pipe cannot end its cell */
  const char *row = strstr(text, "| unknown | ");
  assert_non_null(row);
  int cells = 0;
  for (const char *s = row; *s && *s != '\n'; s++)
    cells += *s == '|' && (s == row || s[-1] != '\\');
  assert_int_equal(cells, 6);
  free(text);
}

static void json_holds_it_always(void **state) {
  (void)state;
  struct vl_estimate_view plain = view;
  plain.explain = false; /* JSON holds it either way */
  char *text = NULL;
  RC_CAPTURE(text, vl_render_estimate(rc_f, VL_FMT_JSON, &plain));
  json_t *root = rc_json(text);
  json_t *r = json_object_get(root, "recipe");
  assert_true(json_is_object(r));
  assert_string_equal(rc_str(r, "kind"), "axolotl");
  assert_string_equal(rc_str(r, "file"), "qlora.yml");
  assert_string_equal(rc_str(json_object_get(r, "mapped"), "lora_r"), "--lora-rank 16");
  assert_string_equal(rc_str(json_object_get(r, "ignored"), "learning_rate"), "2e-4");
  assert_string_equal(rc_str(json_object_get(r, "unknown"), "my \"key\" | x"), "1");
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(text_section),
      cmocka_unit_test(markdown_table),
      cmocka_unit_test(json_holds_it_always),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
