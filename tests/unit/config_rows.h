/* The two checks every config reader's unit runs over its rows
 * (test_config_decoders.c, test_config_encoders.c): included after the
 * file's `rows[]` (model_type, file, read, refused_removed) and its
 * is_mine(reader), which says which readers of VL_MODEL_TYPES it covers. */
#ifndef VL_TEST_CONFIG_ROWS_H
#define VL_TEST_CONFIG_ROWS_H

/* the rows name every model type the file's readers read */
#define TYPE_READER_(id, name, read, parts, defaults, attn, peft) {name, #read},
static const struct { const char *name, *reader; } types[] = {VL_MODEL_TYPES(TYPE_READER_)};
#undef TYPE_READER_

static void every_type_has_its_row(void **state) {
  (void)state;
  size_t mine = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    if (!is_mine(types[t].reader)) continue;
    mine++;
    size_t i = 0;
    while (i < sizeof rows / sizeof rows[0] && strcmp(rows[i].model_type, types[t].name))
      i++;
    if (i == sizeof rows / sizeof rows[0]) fail_msg("model type %s has no row", types[t].name);
  }
  assert_int_equal(mine, sizeof rows / sizeof rows[0]);
}

static void each_reader_reads_its_keys(void **state) {
  (void)state;
  char read[4096], refused[4096];
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct vl_arch a;
    tu_arch(rows[i].file, &a);
    assert_string_equal(a.model_type, rows[i].model_type);
    ck_keys_read(rows[i].file, read, sizeof read);
    if (strcmp(read, rows[i].read))
      fail_msg("%s reads:\n  %s\nnot:\n  %s", rows[i].file, read, rows[i].read);
    ck_keys_required(rows[i].file, read, refused, sizeof refused);
    if (strcmp(refused, rows[i].refused_removed))
      fail_msg("%s refuses without:\n  %s\nnot:\n  %s", rows[i].file, refused,
               rows[i].refused_removed);
  }
}

#endif
