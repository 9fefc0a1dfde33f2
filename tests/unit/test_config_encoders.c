/* lib/model/config_encoders.c: the encoders', encoder-decoders' and
 * vision models' keys, their refusals and what they read from a bundled
 * config. */
#include "config_keys.h"

/* the readers of this file's types (VL_MODEL_TYPES' third column) */
static bool is_mine(const char *reader) {
  return strcmp(reader, "encoder") == 0 || strcmp(reader, "seq2seq") == 0 ||
         strcmp(reader, "vision") == 0;
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
    {"bart", "data/models/bart-base.json",
     "vocab_size,d_model,encoder_layers,decoder_layers,"
     "encoder_attention_heads,decoder_attention_heads,encoder_ffn_dim,"
     "decoder_ffn_dim,max_position_embeddings,dropout,attention_dropout,"
     "activation_dropout",
     "d_model,encoder_attention_heads,decoder_attention_heads,encoder_ffn_dim,decoder_ffn_dim"},
    {"bert", "data/models/bert-base-uncased.json",
     "hidden_size,intermediate_size,num_hidden_layers,num_attention_heads,"
     "vocab_size,max_position_embeddings,type_vocab_size,"
     "hidden_dropout_prob,attention_probs_dropout_prob",
     ""},
    {"deberta-v2", "data/models/deberta-v3-base.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,max_position_embeddings,type_vocab_size,"
     "hidden_dropout_prob,attention_probs_dropout_prob,relative_attention,"
     "norm_rel_ebd,share_att_key,pos_att_type,position_biased_input",
     ""},
    {"distilbert", "data/models/distilbert-base-uncased.json",
     "vocab_size,dim,hidden_dim,n_layers,n_heads,max_position_embeddings,"
     "dropout,attention_dropout",
     ""},
    {"modernbert", "data/models/modernbert-base.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,max_position_embeddings,"
     "global_attn_every_n_layers,local_attention,norm_bias,attention_bias,"
     "mlp_bias,attention_dropout,embedding_dropout,mlp_dropout,decoder_bias,"
     "tie_word_embeddings",
     ""},
    {"resnet", "data/models/resnet-50.json",
     "num_channels,embedding_size,hidden_sizes,depths,layer_type,"
     "downsample_in_first_stage,num_labels",
     ""},
    {"roberta", "data/models/roberta-base.json",
     "vocab_size,hidden_size,intermediate_size,num_hidden_layers,"
     "num_attention_heads,max_position_embeddings,type_vocab_size,"
     "hidden_dropout_prob,attention_probs_dropout_prob",
     ""},
    {"t5", "data/models/t5-base.json",
     "vocab_size,d_model,d_kv,d_ff,num_layers,num_decoder_layers,num_heads,"
     "relative_attention_num_buckets,dropout_rate,feed_forward_proj,"
     "tie_word_embeddings",
     ""},
    {"vit", "data/models/vit-base-patch16-224.json",
     "hidden_size,num_hidden_layers,num_attention_heads,intermediate_size,"
     "hidden_dropout_prob,attention_probs_dropout_prob,image_size,"
     "patch_size,num_channels,qkv_bias,num_labels",
     ""},
};

#include "config_rows.h"

/* what the readers take from the configs (the keys named, data/models/) */
static void shapes_as_the_configs_say(void **state) {
  (void)state;
  struct vl_arch a;
  /* t5-base: num_layers 12, num_decoder_layers 12, d_model 768, d_ff 3072,
   * num_heads 12, d_kv 64, relative_attention_num_buckets 32 */
  tu_arch("data/models/t5-base.json", &a);
  assert_int_equal(a.enc_layers, 12);
  assert_int_equal(a.layers, 12);
  assert_int_equal(a.hidden, 768);
  assert_int_equal(a.intermediate, 3072);
  assert_int_equal(a.heads, 12);
  assert_int_equal(a.head_dim, 64);
  assert_int_equal(a.rel_buckets, 32);
  assert_true(a.rel_bias);
  /* bart-base: encoder_layers 6, decoder_layers 6, d_model 768,
   * max_position_embeddings 1024 (+2 rows: BartLearnedPositionalEmbedding) */
  tu_arch("data/models/bart-base.json", &a);
  assert_int_equal(a.enc_layers, 6);
  assert_int_equal(a.layers, 6);
  assert_int_equal(a.hidden, 768);
  assert_int_equal(a.max_positions, 1024);
  /* vit-base-patch16-224: image_size 224, patch_size 16, 3 channels,
   * num_labels 1000 */
  tu_arch("data/models/vit-base-patch16-224.json", &a);
  assert_int_equal(a.image_size, 224);
  assert_int_equal(a.patch_size, 16);
  assert_int_equal(a.channels, 3);
  assert_int_equal(a.labels, 1000);
  /* resnet-50: depths [3, 4, 6, 3], hidden_sizes [256, 512, 1024, 2048],
   * embedding_size 64, bottleneck layers */
  tu_arch("data/models/resnet-50.json", &a);
  assert_int_equal(a.stages, 4);
  const uint64_t depth[] = {3, 4, 6, 3}, width[] = {256, 512, 1024, 2048};
  for (int s = 0; s < 4; s++) {
    assert_int_equal(a.stage_depth[s], depth[s]);
    assert_int_equal(a.stage_width[s], width[s]);
  }
  assert_int_equal(a.stem_width, 64);
  assert_true(a.bottleneck);
  /* bert-base-uncased: type_vocab_size 2, post-norm, not causal */
  tu_arch("data/models/bert-base-uncased.json", &a);
  assert_int_equal(a.type_vocab, 2);
  assert_false(a.causal);
}

/* a list's refusal names the key and the entry */
static void a_list_refusal_in_full(void **state) {
  (void)state;
  struct vl_err err;
  json_t *v = json_pack("[i, s, i, i]", 3, "4", 6, 3);
  assert_int_equal(ck_read_with("data/models/resnet-50.json", "depths", v, &err), VL_ERANGE);
  printf("  %s\n", err.msg);
  assert_non_null(strstr(err.msg, "key 'depths': entry 1 is not an integer"));
  json_decref(v);
  v = json_string("t5");
  assert_int_equal(ck_read_with("data/models/t5-base.json", "d_ff", v, &err), VL_EKEY);
  assert_string_equal(err.msg, "key 'd_ff': expected an integer, got a string");
  json_decref(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_type_has_its_row),
      cmocka_unit_test(each_reader_reads_its_keys),
      cmocka_unit_test(shapes_as_the_configs_say),
      cmocka_unit_test(a_list_refusal_in_full),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
