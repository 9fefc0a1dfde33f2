/* lib/model/config_decoders.c (and config.c's GPT-2, GPT-NeoX and OPT
 * readers): each decoder model type's keys, its refusals and what it reads
 * from a bundled config. */
#include "config_keys.h"

/* the readers of this file's types (VL_MODEL_TYPES' third column) */
static bool is_mine(const char *reader) {
  return strcmp(reader, "decoder") == 0 || strcmp(reader, "falcon") == 0 ||
         strcmp(reader, "gpt2") == 0 || strcmp(reader, "neox") == 0 || strcmp(reader, "opt") == 0;
}

/* One bundled config of each model type (data/models/, the configs as the
 * Hub publishes them): the keys its reader reads, found by refusal
 * (config_keys.h), and of those the ones whose removal it refuses; every
 * other key of the file is one the reader leaves alone. Written from the
 * readers as of commit ea74862: a reader that starts or stops reading a
 * key, or loses a default, changes its row, and its commit says why. */
static const struct row {
  const char *model_type, *file, *read, *refused_removed;
} rows[] = {
    {"deepseek_v2", "data/models/deepseek-v2-lite.json",
     "vocab_size,hidden_size,intermediate_size,moe_intermediate_size,"
     "num_hidden_layers,num_attention_heads,num_key_value_heads,"
     "n_shared_experts,n_routed_experts,num_experts_per_tok,"
     "first_k_dense_replace,kv_lora_rank,q_lora_rank,qk_nope_head_dim,"
     "qk_rope_head_dim,v_head_dim,max_position_embeddings,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     "num_experts_per_tok"},
    {"deepseek_v3", "data/models/deepseek-v3.json",
     "vocab_size,hidden_size,intermediate_size,moe_intermediate_size,"
     "num_hidden_layers,num_attention_heads,num_key_value_heads,"
     "n_shared_experts,n_routed_experts,num_experts_per_tok,"
     "first_k_dense_replace,kv_lora_rank,q_lora_rank,qk_nope_head_dim,"
     "qk_rope_head_dim,v_head_dim,max_position_embeddings,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     ""},
    {"exaone4", "data/models/exaone-4.0-1.2b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,max_position_embeddings,"
     "sliding_window,sliding_window_pattern,attention_dropout,"
     "tie_word_embeddings",
     ""},
    {"falcon", "data/models/falcon-7b.json",
     "vocab_size,hidden_size,num_hidden_layers,num_attention_heads,"
     "multi_query,parallel_attn,new_decoder_architecture,bias,alibi,"
     "hidden_dropout,attention_dropout,tie_word_embeddings",
     ""},
    {"gemma", "data/models/gemma-2b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,head_dim,vocab_size,max_position_embeddings",
     ""},
    {"gemma2", "data/models/gemma-2-2b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,"
     "max_position_embeddings,sliding_window,attn_logit_softcapping,"
     "final_logit_softcapping,attention_bias,attention_dropout,"
     "tie_word_embeddings",
     ""},
    {"gemma3_text", "data/models/gemma-3-1b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,"
     "max_position_embeddings,sliding_window,sliding_window_pattern,"
     "attn_logit_softcapping,final_logit_softcapping,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     ""},
    {"glm", "data/models/glm-4-9b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,"
     "partial_rotary_factor,max_position_embeddings,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     ""},
    {"glm4", "data/models/glm-4-9b-0414.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,"
     "partial_rotary_factor,max_position_embeddings,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     ""},
    {"gpt2", "data/models/gpt2-large.json",
     "n_embd,n_layer,n_head,n_positions,vocab_size,activation_function,"
     "resid_pdrop,embd_pdrop,attn_pdrop",
     "n_embd,n_head"},
    {"gpt_bigcode", "data/models/starcoderbase-1b.json",
     "vocab_size,n_embd,n_layer,n_head,n_inner,n_positions,multi_query,"
     "activation_function,attn_pdrop,embd_pdrop,resid_pdrop,"
     "tie_word_embeddings",
     "n_head"},
    {"gpt_neox", "data/models/pythia-1.4b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "vocab_size,max_position_embeddings,rotary_pct,use_parallel_residual,"
     "tie_word_embeddings",
     ""},
    {"gpt_oss", "data/models/gpt-oss-20b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,num_local_experts,"
     "num_experts_per_tok,sliding_window,layer_types,"
     "max_position_embeddings,attention_bias,attention_dropout,"
     "tie_word_embeddings",
     ""},
    {"granite", "data/models/granite-3.0-2b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,max_position_embeddings,"
     "embedding_multiplier,residual_multiplier,logits_scaling,"
     "attention_bias,mlp_bias,attention_dropout,tie_word_embeddings",
     ""},
    {"llama", "data/models/llama-2-13b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,vocab_size,max_position_embeddings,"
     "tie_word_embeddings,attention_bias",
     "hidden_size,num_attention_heads"},
    {"mistral", "data/models/mistral-7b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,vocab_size,max_position_embeddings,sliding_window,"
     "tie_word_embeddings",
     ""},
    {"mixtral", "data/models/mixtral-8x7b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,vocab_size,max_position_embeddings,"
     "num_local_experts,num_experts_per_tok,sliding_window,"
     "tie_word_embeddings",
     ""},
    {"olmo2", "data/models/olmo-2-1b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,max_position_embeddings,"
     "attention_bias,attention_dropout,tie_word_embeddings",
     ""},
    {"olmoe", "data/models/olmoe-1b-7b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,num_experts,"
     "num_experts_per_tok,max_position_embeddings,attention_bias,"
     "attention_dropout,tie_word_embeddings",
     ""},
    {"opt", "data/models/opt-1.3b.json",
     "hidden_size,ffn_dim,num_hidden_layers,num_attention_heads,vocab_size,"
     "max_position_embeddings,word_embed_proj_dim,do_layer_norm_before,"
     "dropout,attention_dropout,activation_function",
     "num_attention_heads"},
    {"phi", "data/models/phi-2.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,partial_rotary_factor,"
     "max_position_embeddings,resid_pdrop,embd_pdrop,attention_dropout,"
     "qk_layernorm,tie_word_embeddings",
     ""},
    {"phi3", "data/models/phi-3-mini.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,vocab_size,max_position_embeddings,"
     "attention_dropout,embd_pdrop,resid_pdrop,sliding_window,"
     "tie_word_embeddings",
     ""},
    {"qwen2", "data/models/qwen2-0.5b.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,vocab_size,max_position_embeddings,"
     "tie_word_embeddings",
     "hidden_size"},
    {"qwen2_moe", "data/models/qwen1.5-moe-a2.7b.json",
     "vocab_size,hidden_size,intermediate_size,moe_intermediate_size,"
     "shared_expert_intermediate_size,num_hidden_layers,num_attention_heads,"
     "num_key_value_heads,num_experts,num_experts_per_tok,"
     "decoder_sparse_step,max_position_embeddings,tie_word_embeddings",
     ""},
    {"qwen3", "data/models/qwen3-0.6b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,head_dim,"
     "max_position_embeddings,attention_bias,attention_dropout,"
     "tie_word_embeddings",
     ""},
    {"qwen3_moe", "data/models/qwen3-30b-a3b.json",
     "vocab_size,hidden_size,intermediate_size,moe_intermediate_size,"
     "num_hidden_layers,num_attention_heads,num_key_value_heads,head_dim,"
     "num_experts,num_experts_per_tok,decoder_sparse_step,mlp_only_layers,"
     "max_position_embeddings,attention_bias,tie_word_embeddings",
     ""},
    {"smollm3", "data/models/smollm3-3b.json",
     "hidden_size,intermediate_size,num_attention_heads,num_key_value_heads,"
     "num_hidden_layers,vocab_size,max_position_embeddings,"
     "tie_word_embeddings,no_rope_layer_interval,use_sliding_window,"
     "attention_bias",
     ""},
    {"stablelm", "data/models/stablelm-2-1.6b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,partial_rotary_factor,"
     "max_position_embeddings,use_qkv_bias,qk_layernorm,"
     "use_parallel_residual,hidden_dropout,attention_dropout,"
     "tie_word_embeddings",
     ""},
    {"starcoder2", "data/models/starcoder2-3b.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,num_key_value_heads,max_position_embeddings,"
     "sliding_window,use_bias,residual_dropout,embedding_dropout,"
     "attention_dropout,tie_word_embeddings",
     ""},
};

#include "config_rows.h"

/* the experts each MoE reader finds, against the configs' own numbers
 * (the keys named, in data/models/) */
static void experts_as_the_configs_say(void **state) {
  (void)state;
  static const struct {
    const char *file;
    uint64_t experts, per_token, moe_width, shared_width, dense_layers;
  } moe[] = {
      /* num_local_experts 8, num_experts_per_tok 2, intermediate_size 14336 */
      {"data/models/mixtral-8x7b.json", 8, 2, 14336, 0, 0},
      /* num_experts 60, top 4, moe_intermediate_size 1408,
       * shared_expert_intermediate_size 5632 */
      {"data/models/qwen1.5-moe-a2.7b.json", 60, 4, 1408, 5632, 0},
      /* n_routed_experts 64, 6 a token, moe_intermediate_size 1408, 2 shared
       * of 1408, first_k_dense_replace 1 */
      {"data/models/deepseek-v2-lite.json", 64, 6, 1408, 2 * 1408, 1},
      /* num_experts 64, top 8, intermediate_size 1024 each */
      {"data/models/olmoe-1b-7b.json", 64, 8, 1024, 0, 0},
      /* num_experts 128, top 8, moe_intermediate_size 768 */
      {"data/models/qwen3-30b-a3b.json", 128, 8, 768, 0, 0},
  };
  for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
    struct vl_arch a;
    tu_arch(moe[i].file, &a);
    printf("  %-40s experts %llu top %llu width %llu/%llu shared %llu dense %llu\n", moe[i].file,
           (unsigned long long)a.experts, (unsigned long long)a.experts_per_token,
           (unsigned long long)a.moe_intermediate, (unsigned long long)a.intermediate,
           (unsigned long long)a.shared_intermediate, (unsigned long long)a.dense_layers);
    assert_int_equal(a.experts, moe[i].experts);
    assert_int_equal(a.experts_per_token, moe[i].per_token);
    assert_int_equal(a.moe_intermediate ? a.moe_intermediate : a.intermediate, moe[i].moe_width);
    assert_int_equal(a.shared_intermediate, moe[i].shared_width);
    assert_int_equal(a.dense_layers, moe[i].dense_layers);
  }
}

/* a refusal of a part's key, whole: the key, what it holds, what is wanted */
static void a_parts_refusal_in_full(void **state) {
  (void)state;
  struct vl_err err;
  json_t *v = json_string("8");
  assert_int_equal(ck_read_with("data/models/mixtral-8x7b.json", "num_local_experts", v, &err),
                   VL_EKEY);
  assert_string_equal(err.msg, "key 'num_local_experts': expected an integer, got a string");
  json_decref(v);
  v = json_real(0.5);
  assert_int_equal(ck_read_with("data/models/deepseek-v2-lite.json", "kv_lora_rank", v, &err),
                   VL_EKEY);
  assert_non_null(strstr(err.msg, "'kv_lora_rank'"));
  json_decref(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_type_has_its_row),
      cmocka_unit_test(each_reader_reads_its_keys),
      cmocka_unit_test(experts_as_the_configs_say),
      cmocka_unit_test(a_parts_refusal_in_full),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
