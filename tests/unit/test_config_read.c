/* The config.json key readers (lib/model/config_read.c) under each model
 * type's reader (config.c, config_decoders.c, config_encoders.c): a wrong
 * value is refused with its status and a message that names the key as the
 * file spells it, what it holds and what is wanted; an integral float (as
 * Python writes 4096.0) and null (transformers' default) are taken. */
#include "testutil.h"

struct bad {
  const char *json;
  vl_status status;
  const char *message; /* the whole message */
};

static const struct bad cases[] = {
    /* vl__get_u64: the type, then the range, each naming the key */
    {"{\"model_type\": \"llama\", \"hidden_size\": \"4096\"}", VL_EKEY,
     "key 'hidden_size': expected an integer, got a string"},
    {"{\"model_type\": \"llama\", \"num_hidden_layers\": [32]}", VL_EKEY,
     "key 'num_hidden_layers': expected an integer, got an array"},
    {"{\"model_type\": \"llama\", \"num_hidden_layers\": 0}", VL_ERANGE,
     "key 'num_hidden_layers': 0 is out of range [1, 10000]"},
    {"{\"model_type\": \"llama\", \"vocab_size\": -1}", VL_ERANGE,
     "key 'vocab_size': -1 is out of range [1, 67108864]"},
    /* vl__get_bool */
    {"{\"model_type\": \"llama\", \"tie_word_embeddings\": \"yes\"}", VL_EKEY,
     "key 'tie_word_embeddings': expected true or false, got a string"},
    /* vl__get_prob and vl__get_num, through one ranged reader */
    {"{\"model_type\": \"llama\", \"attention_dropout\": 1.5}", VL_ERANGE,
     "key 'attention_dropout': 1.5 is not in [0, 1]"},
    {"{\"model_type\": \"gpt2\", \"resid_pdrop\": {}}", VL_EKEY,
     "key 'resid_pdrop': expected a number, got an object"},
    {"{\"model_type\": \"granite\", \"residual_multiplier\": -0.5}", VL_ERANGE,
     "key 'residual_multiplier': -0.5 is out of range [0, 1e12)"},
    {"{\"model_type\": \"gemma2\", \"final_logit_softcapping\": true}", VL_EKEY,
     "key 'final_logit_softcapping': expected a number, got a boolean"},
    /* vl__get_str */
    {"{\"model_type\": \"t5\", \"feed_forward_proj\": 3}", VL_EKEY,
     "key 'feed_forward_proj': expected a string, got an integer"},
    {"{\"model_type\": \"gpt2\", \"activation_function\": 1.0}", VL_EKEY,
     "key 'activation_function': expected a string, got a number"},
    /* vl__get_u64_list: not a list, too long, an entry by its index */
    {"{\"model_type\": \"resnet\", \"depths\": 3}", VL_EKEY,
     "key 'depths': expected an array, got an integer"},
    {"{\"model_type\": \"resnet\", \"depths\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", VL_ERANGE,
     "key 'depths': 9 entries, at most 8 are read"},
    {"{\"model_type\": \"resnet\", \"depths\": [3, 0, 6, 3]}", VL_ERANGE,
     "key 'depths': entry 1 is not an integer in [1, 1024]"},
    /* vl__read_shape, under each family's own key names */
    {"{\"model_type\": \"gpt2\", \"n_embd\": 100, \"n_head\": 3}", VL_ERANGE,
     "n_embd 100 is not a multiple of n_head 3"},
    {"{\"model_type\": \"opt\", \"hidden_size\": 100, \"num_attention_heads\": 7}", VL_ERANGE,
     "hidden_size 100 is not a multiple of num_attention_heads 7"},
    /* the heads every reader checks last (config.c) */
    {"{\"model_type\": \"qwen2\", \"hidden_size\": 3584, \"num_attention_heads\": 28, "
     "\"num_key_value_heads\": 3}",
     VL_ERANGE, "num_attention_heads 28 is not a multiple of num_key_value_heads 3"},
};

static void bad_values_named(void **state) {
  (void)state;
  int wrong = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct vl_arch a;
    struct vl_err err = {""};
    vl_status s = vl_arch_from_json(cases[i].json, strlen(cases[i].json), &a, &err);
    if (s == cases[i].status && strcmp(err.msg, cases[i].message) == 0) continue;
    printf("  %s\n    got %s '%s'\n    want %s '%s'\n", cases[i].json, vl_strerror(s), err.msg,
           vl_strerror(cases[i].status), cases[i].message);
    wrong++;
  }
  assert_int_equal(wrong, 0);
}

/* null is transformers' default; an integral float is an integer */
static void null_and_integral_floats(void **state) {
  (void)state;
  struct vl_arch a, d;
  tu_arch_text("{\"model_type\": \"llama\"}", &d);
  tu_arch_text("{\"model_type\": \"llama\", \"hidden_size\": null, \"tie_word_embeddings\": null, "
               "\"attention_dropout\": null}",
               &a);
  assert_true(a.hidden == d.hidden && a.tie_embeddings == d.tie_embeddings);
  tu_arch_text("{\"model_type\": \"llama\", \"hidden_size\": 2048.0, \"num_attention_heads\": 16}",
               &a);
  assert_true(a.hidden == 2048 && a.head_dim == 128);
  /* a list keeps its default where it is null: ResNet-50's stages */
  tu_arch_text("{\"model_type\": \"resnet\", \"depths\": null}", &a);
  tu_arch_text("{\"model_type\": \"resnet\"}", &d);
  assert_true(a.stage_depth[0] == d.stage_depth[0] && a.stage_depth[3] == d.stage_depth[3]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_values_named),
      cmocka_unit_test(null_and_integral_floats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
