/* lib/model/config.c: Hugging Face config.json -> struct vl_arch. */
#include "testutil.h"
#include "model/internal.h"

static vl_status parse(const char *text, struct vl_arch *a, struct vl_err *err) {
  return vl_arch_from_json(text, strlen(text), a, err);
}

static void llama_2_7b(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/llama-2-7b.json", &a);
  assert_int_equal(a.family, VL_FAM_LLAMA);
  assert_int_equal(a.hidden, 4096);
  assert_int_equal(a.layers, 32);
  assert_int_equal(a.heads, 32);
  assert_int_equal(a.kv_heads, 32);
  assert_int_equal(a.head_dim, 128);
  assert_int_equal(a.intermediate, 11008);
  assert_int_equal(a.vocab, 32000);
  assert_false(a.tie_embeddings);
  assert_true(a.gated_mlp);
  assert_true(a.rms_norm);
  assert_false(a.qkv_bias);
}

static void defaults_follow_transformers(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  assert_int_equal(parse("{\"model_type\": \"mistral\"}", &a, &err), VL_OK);
  assert_int_equal(a.kv_heads, 8); /* MistralConfig: num_key_value_heads=8 */
  assert_int_equal(a.intermediate, 14336);
  assert_int_equal(parse("{\"model_type\": \"gemma\"}", &a, &err), VL_OK);
  assert_int_equal(a.head_dim, 256);
  assert_true(a.tie_embeddings);
  assert_int_equal(parse("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 4}", &a, &err),
                   VL_OK);
  assert_int_equal(a.intermediate, 256); /* n_inner None -> 4 * n_embd */
  assert_true(a.tie_embeddings);
  assert_true(a.attn_dropout > 0.09 && a.attn_dropout < 0.11);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"num_key_value_heads\": null}", &a, &err),
                   VL_OK);
  assert_int_equal(a.kv_heads, a.heads);
}

static void odd_shapes(void **state) {
  (void)state;
  struct vl_arch a;
  tu_arch("data/models/gemma-7b.json", &a);
  assert_int_equal(a.head_dim, 256); /* not 3072/16 = 192 */
  tu_arch("data/models/opt-350m.json", &a);
  assert_int_equal(a.embed_proj_dim, 512);
  assert_false(a.final_norm); /* do_layer_norm_before=false */
  assert_true(a.relu_act);
  assert_int_equal(a.pos_offset, 2);
  tu_arch("data/models/pythia-160m.json", &a);
  assert_true(a.rotary_pct > 0.24 && a.rotary_pct < 0.26);
  assert_true(a.qkv_bias);
  tu_arch("data/models/mixtral-8x7b.json", &a);
  assert_int_equal(a.experts, 8);
  assert_int_equal(a.experts_per_token, 2);
  tu_arch("data/models/gemma-2b.json", &a);
  assert_int_equal(a.kv_heads, 1); /* multi-query */
  tu_arch("data/models/qwen2-0.5b.json", &a);
  assert_true(a.qkv_bias);
  assert_false(a.o_bias);
  assert_true(a.tie_embeddings);
}

/* The types of the table's last rows: each part read from its keys, and
 * the NoPE layers the replays skip rotary in (lib/model/internal.h) */
static void newer_decoders(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  tu_arch("data/models/glm-4-9b-0414.json", &a);
  assert_int_equal(a.family, VL_FAM_GLM4);
  assert_true(a.sandwich_norm && a.fused_gate_up && a.qkv_bias && !a.o_bias);
  assert_false(vl_arch_approximate(&a) != NULL);

  /* SmolLM3: every 4th layer without rotary by default, or as listed */
  assert_int_equal(parse("{\"model_type\": \"smollm3\", \"num_hidden_layers\": 8}", &a, &err),
                   VL_OK);
  assert_int_equal(a.nope_layers, 2);
  assert_true(vl__rope_layer(&a, 0) && vl__rope_layer(&a, 2));
  assert_false(vl__rope_layer(&a, 3));
  assert_false(vl__rope_layer(&a, 7));
  assert_int_equal(parse("{\"model_type\": \"smollm3\", \"num_hidden_layers\": 4, "
                         "\"no_rope_layers\": [1, 0, 0, 1]}",
                         &a, &err),
                   VL_OK);
  assert_int_equal(a.nope_layers, 2);
  assert_int_equal(a.sliding_window, 0); /* use_sliding_window false */
  assert_int_equal(parse("{\"model_type\": \"smollm3\", \"no_rope_layers\": 3}", &a, &err),
                   VL_EKEY);
  assert_non_null(strstr(err.msg, "no_rope_layers"));

  /* EXAONE-4: 3 sliding layers of 4, the global one without rotary; no
   * window: rotary everywhere */
  assert_int_equal(parse("{\"model_type\": \"exaone4\", \"num_hidden_layers\": 8, "
                         "\"sliding_window_pattern\": \"LLLG\"}",
                         &a, &err),
                   VL_OK);
  assert_int_equal(a.sliding_layers, 6);
  assert_true(a.nope_global && a.post_norm && a.qk_norm == 1);
  int rope = 0;
  for (uint64_t l = 0; l < a.layers; l++)
    rope += vl__rope_layer(&a, l);
  assert_int_equal(rope, 6);
  assert_int_equal(parse("{\"model_type\": \"exaone4\", \"sliding_window\": null}", &a, &err),
                   VL_OK);
  assert_false(a.nope_global);
  assert_int_equal(a.sliding_layers, 0);
  assert_true(vl__rope_layer(&a, 3));

  /* DeepSeek-V3's defaults: 256 experts, 8 a token, 1 shared, 3 dense */
  assert_int_equal(parse("{\"model_type\": \"deepseek_v3\"}", &a, &err), VL_OK);
  assert_int_equal(a.experts, 256);
  assert_int_equal(a.experts_per_token, 8);
  assert_int_equal(a.shared_intermediate, 2048);
  assert_int_equal(a.dense_layers, 3);
  assert_true(a.mla);

  /* gpt-oss: sinks, biased experts, the clamped GLU, alternating windows */
  tu_arch("data/models/gpt-oss-20b.json", &a);
  assert_true(a.attn_sinks && a.expert_bias && a.gate_clamp && a.qkv_bias && a.o_bias);
  assert_int_equal(a.experts, 32);
  assert_int_equal(a.experts_per_token, 4);
  assert_int_equal(a.moe_intermediate, 2880);
  assert_int_equal(a.sliding_window, 128);
  assert_int_equal(a.sliding_layers, 12);
}

/* A type nobody described: its experts read under the MoE keys of the
 * described types, or refused without the experts a token goes to */
static void generic_experts(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  const char *base = "{\"model_type\": \"newmoe\", \"vocab_size\": 1000, \"hidden_size\": 64, "
                     "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
                     "\"intermediate_size\": 256, ";
  char text[512];
  snprintf(text, sizeof text,
           "%s\"moe_num_experts\": 8, \"moe_k\": 2, "
           "\"moe_intermediate_size\": 32, \"moe_num_shared_experts\": 2, "
           "\"moe_layer_start_index\": 1}",
           base);
  assert_int_equal(parse(text, &a, &err), VL_OK);
  assert_true(a.approximate);
  assert_int_equal(a.experts, 8);
  assert_int_equal(a.experts_per_token, 2);
  assert_int_equal(a.moe_intermediate, 32);
  assert_int_equal(a.shared_intermediate, 64);
  assert_int_equal(a.dense_layers, 1);
  snprintf(text, sizeof text,
           "%s\"num_experts\": 16384, \"num_experts_per_tok\": 64, "
           "\"is_moe\": false}",
           base);
  assert_int_equal(parse(text, &a, &err), VL_OK);
  assert_int_equal(a.experts, 0);
  snprintf(text, sizeof text, "%s\"num_local_experts\": 8}", base);
  assert_int_equal(parse(text, &a, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "num_experts_per_tok"));
}

static void malformed_json_names_line_and_column(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  assert_int_equal(parse("{\"model_type\": \"llama\",\n  \"hidden_size\": 4096,,\n}", &a, &err),
                   VL_EPARSE);
  assert_non_null(strstr(err.msg, "line 2"));
  assert_non_null(strstr(err.msg, "column"));
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_si", &a, &err), VL_EPARSE);
  assert_int_equal(parse("", &a, &err), VL_EPARSE);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"model_type\": \"gpt2\"}", &a, &err),
                   VL_EPARSE); /* duplicate keys are refused */
}

static void unknown_and_missing(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  /* a type nobody described, without the usual keys: refused, naming the
   * keys it lacks and the dry run */
  assert_int_equal(parse("{\"model_type\": \"mamba\", \"hidden_size\": 768}", &a, &err), VL_EARCH);
  assert_non_null(strstr(err.msg, "'mamba'"));
  assert_non_null(strstr(err.msg, "'num_hidden_layers'"));
  assert_non_null(strstr(err.msg, "'vocab_size'"));
  assert_null(strstr(err.msg, "'hidden_size'"));
  assert_non_null(strstr(err.msg, "vramledger trace"));
  /* ... with them: a generic decoder, marked approximate */
  assert_int_equal(parse("{\"model_type\": \"newlm\", \"hidden_size\": 512, "
                         "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
                         "\"vocab_size\": 1000, \"intermediate_size\": 2048}",
                         &a, &err),
                   VL_OK);
  assert_int_equal(a.family, VL_FAM_GENERIC);
  assert_true(a.approximate);
  assert_string_equal(a.model_type, "newlm");
  assert_int_equal(a.head_dim, 64);
  /* every described type is not approximate */
  assert_int_equal(parse("{\"model_type\": \"t5\"}", &a, &err), VL_OK);
  assert_false(a.approximate);
  assert_int_equal(a.enc_layers, 6);
  /* contradictory keys: the key named */
  assert_int_equal(parse("{\"model_type\": \"qwen3_moe\", \"num_experts\": 4, "
                         "\"num_experts_per_tok\": 8}",
                         &a, &err),
                   VL_ERANGE);
  assert_non_null(strstr(err.msg, "num_experts_per_tok"));
  assert_int_equal(
      parse("{\"model_type\": \"vit\", \"image_size\": 8, \"patch_size\": 16}", &a, &err),
      VL_ERANGE);
  assert_non_null(strstr(err.msg, "patch_size"));
  assert_int_equal(parse("{\"model_type\": \"resnet\", \"depths\": [1, 2], "
                         "\"hidden_sizes\": [8]}",
                         &a, &err),
                   VL_ERANGE);
  assert_non_null(strstr(err.msg, "depths"));
  assert_int_equal(parse("{\"model_type\": \"falcon\", \"hidden_size\": 100, "
                         "\"num_attention_heads\": 7}",
                         &a, &err),
                   VL_ERANGE);
  assert_non_null(strstr(err.msg, "hidden_size"));
  assert_int_equal(parse("{\"hidden_size\": 4096}", &a, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "model_type"));
  assert_int_equal(parse("[1, 2]", &a, &err), VL_EKEY);
  assert_int_equal(parse("{\"model_type\": 7}", &a, &err), VL_EKEY);
}

static void wrong_types_and_absurd_sizes(void **state) {
  (void)state;
  struct vl_arch a;
  struct vl_err err = {""};
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": \"big\"}", &a, &err),
                   VL_EKEY);
  assert_non_null(strstr(err.msg, "hidden_size"));
  assert_int_equal(parse("{\"model_type\": \"llama\", \"num_hidden_layers\": 0}", &a, &err),
                   VL_ERANGE);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"num_hidden_layers\": -3}", &a, &err),
                   VL_ERANGE);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 1e15}", &a, &err),
                   VL_ERANGE);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 4096.5}", &a, &err),
                   VL_EKEY);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 1099511627776}", &a, &err),
                   VL_ERANGE);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"num_key_value_heads\": 5}", &a, &err),
                   VL_ERANGE);
  assert_non_null(strstr(err.msg, "num_key_value_heads"));
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 1000}", &a, &err),
                   VL_ERANGE); /* 1000 / 32 heads, no head_dim */
  assert_int_equal(parse("{\"model_type\": \"llama\", \"tie_word_embeddings\": 1}", &a, &err),
                   VL_EKEY);
  assert_int_equal(parse("{\"model_type\": \"llama\", \"attention_dropout\": 2}", &a, &err),
                   VL_ERANGE);
  assert_int_equal(parse("{\"model_type\": \"mixtral\", \"num_local_experts\": 2, "
                         "\"num_experts_per_tok\": 3}",
                         &a, &err),
                   VL_ERANGE);
  /* an integral float is accepted, as Python writes 4096.0 */
  assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 4096.0}", &a, &err), VL_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(llama_2_7b),          cmocka_unit_test(defaults_follow_transformers),
      cmocka_unit_test(odd_shapes),          cmocka_unit_test(malformed_json_names_line_and_column),
      cmocka_unit_test(unknown_and_missing), cmocka_unit_test(wrong_types_and_absurd_sizes),
      cmocka_unit_test(newer_decoders),      cmocka_unit_test(generic_experts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
