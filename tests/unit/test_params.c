/* lib/model/params.c: the parameter inventory. Whole-model counts against
 * PyTorch are in tests/ref/test_param_counts.c; here, structure. */
#include "testutil.h"

static uint64_t count(const char *text) {
  struct vl_arch a;
  tu_arch_text(text, &a);
  struct vl_inventory inv;
  struct vl_err err = {""};
  assert_int_equal(vl_inventory_build(&a, &inv, &err), VL_OK);
  uint64_t sum = 0;
  for (int i = 0; i < inv.n; i++)
    sum += inv.t[i].rows * inv.t[i].cols * inv.t[i].count;
  assert_int_equal(sum, inv.total); /* the total is the sum of its tensors */
  return inv.total;
}

static void tying_removes_one_vocab_matrix(void **state) {
  (void)state;
  uint64_t tied = count("{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,"
                        "\"num_hidden_layers\":2,\"intermediate_size\":512,\"vocab_size\":1000,"
                        "\"tie_word_embeddings\":true}");
  uint64_t untied = count("{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,"
                          "\"num_hidden_layers\":2,\"intermediate_size\":512,\"vocab_size\":1000,"
                          "\"tie_word_embeddings\":false}");
  assert_int_equal(untied - tied, 1000 * 256);
}

static void gqa_shrinks_k_and_v(void **state) {
  (void)state;
  uint64_t mha = count("{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":8,"
                       "\"num_key_value_heads\":8,\"num_hidden_layers\":3,\"vocab_size\":100,"
                       "\"intermediate_size\":64}");
  uint64_t gqa = count("{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":8,"
                       "\"num_key_value_heads\":2,\"num_hidden_layers\":3,\"vocab_size\":100,"
                       "\"intermediate_size\":64}");
  /* k and v: 256 x 256 each -> 64 x 256 each, in 3 layers */
  assert_int_equal(mha - gqa, 3 * 2 * (256 * 256 - 64 * 256));
}

static void biases_are_counted(void **state) {
  (void)state;
  const char *base = "{\"model_type\":\"llama\",\"hidden_size\":128,\"num_attention_heads\":4,"
                     "\"num_hidden_layers\":2,\"vocab_size\":100,\"intermediate_size\":300";
  char with[512];
  snprintf(with, sizeof with, "%s,\"attention_bias\":true,\"mlp_bias\":true}", base);
  char without[512];
  snprintf(without, sizeof without, "%s}", base);
  /* q, k, v, o biases of 128 and gate, up (300) + down (128) per layer */
  assert_int_equal(count(with) - count(without), 2 * (4 * 128 + 2 * 300 + 128));
}

static void experts_multiply_the_mlp(void **state) {
  (void)state;
  const char *fmt = "{\"model_type\":\"mixtral\",\"hidden_size\":64,\"num_attention_heads\":4,"
                    "\"num_key_value_heads\":4,\"num_hidden_layers\":1,\"vocab_size\":10,"
                    "\"intermediate_size\":32,\"num_local_experts\":%d,\"num_experts_per_tok\":1}";
  char one[512], four[512];
  snprintf(one, sizeof one, fmt, 1);
  snprintf(four, sizeof four, fmt, 4);
  /* 3 more experts of 3 * 64 * 32, and the router grows by 3 rows of 64 */
  assert_int_equal(count(four) - count(one), 3 * 3 * 64 * 32 + 3 * 64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tying_removes_one_vocab_matrix),
      cmocka_unit_test(gqa_shrinks_k_and_v),
      cmocka_unit_test(biases_are_counted),
      cmocka_unit_test(experts_multiply_the_mlp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
