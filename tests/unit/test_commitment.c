/* lib/decide/commitment.c and check.c: reading a commitment, a job's
 * settings, drift, the gate. */
#include <jansson.h>

#include "testutil.h"
#include "vramledger/catalog.h"
#include "vramledger/commitment.h"
#include "vramledger/record.h"
#include "vramledger/render.h"

static void reads_and_compares(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/llama3-8b-lora.json", &len);
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  free(text);
  assert_string_equal(c.model, "llama-3-8b");
  assert_string_equal(c.gpu, "h100-80gb");
  assert_int_equal(c.gpus, 1);
  assert_int_equal(c.job.lora_rank, 16);
  assert_int_equal(c.job.checkpointing, VL_CKPT_FULL);
  assert_int_equal(c.job.precision, VL_PREC_BF16);
  assert_true(c.gpu_hours > 99.9 && c.gpu_hours < 100.1);
  assert_true(c.peak_trigger > 1.049 && c.peak_trigger < 1.051);
  struct vl_drift d[8];
  assert_int_equal(vl_commitment_diff(&c, &c.job, d, 8), 0); /* itself: no drift */
  struct vl_job j = c.job;
  j.batch = 8;
  j.attention = VL_ATTN_EAGER;
  j.lora_targets[0] = "all-linear";
  j.n_lora_targets = 1;
  assert_int_equal(vl_commitment_diff(&c, &j, d, 8), 3);
  assert_string_equal(d[0].field, "batch");
  assert_string_equal(d[0].committed, "2");
  assert_string_equal(d[0].now, "8");
  assert_string_equal(d[1].field, "attention");
  assert_string_equal(d[2].field, "lora-targets");
  assert_int_equal(vl_commitment_diff(&c, &j, d, 1), 3); /* counts past the cap */
  /* the runtime guard: 105 % of the estimated total, or of a measured peak */
  assert_int_equal(vl_commitment_peak_threshold(&c), 27270630482ull); /* 25972029030 x 1.05 */
  c.measured = true;
  c.measured_process_bytes = 20000000000ull;
  assert_int_equal(vl_commitment_peak_threshold(&c), 21000000000ull);
  /* where timing decides between two outcomes (DDP's bucket rebuild), the
   * larger total is the budget and the guard's reference */
  c.measured = false;
  assert_int_equal(c.est_other_total_bytes, 0);
  assert_int_equal(vl_commitment_budget_bytes(&c), c.est_total_bytes);
  c.est_other_total_bytes = 30000000000ull;
  assert_int_equal(vl_commitment_budget_bytes(&c), 30000000000ull);
  assert_int_equal(vl_commitment_peak_threshold(&c), 31500000000ull);
  c.est_other_total_bytes = 20000000000ull; /* below the bill: the bill */
  assert_int_equal(vl_commitment_budget_bytes(&c), c.est_total_bytes);
}

/* a DDP job's commitment carries its other outcome's total */
static void ddp_other_outcome(void **state) {
  (void)state;
  static const char doc[] =
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", \"hardware\": {\"gpu\": "
      "\"h200\", \"gpu_memory_bytes\": 150109880320, \"count\": 2}, \"baseline\": {\"task\": "
      "\"train\", \"batch\": 4, \"seq\": 512, \"dp\": 2}, \"estimate\": "
      "{\"peak_allocated_bytes\": 5279100416, \"peak_reserved_bytes\": 5729419264, "
      "\"total_bytes\": 6803161088, \"other_total_bytes\": 7138705408}}";
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(doc, strlen(doc), &c, &err), VL_OK);
  assert_int_equal(c.est_other_total_bytes, 7138705408ull);
  assert_int_equal(vl_commitment_budget_bytes(&c), 7138705408ull);
  /* audit holds a run to the nearer of the committed outcomes: a peak
   * below the bill's total to the bill, one past the other's to it */
  bool other = true;
  assert_int_equal(vl_commitment_reference_bytes(&c, 6900000000ull, &other), 6803161088ull);
  assert_false(other);
  assert_int_equal(vl_commitment_reference_bytes(&c, 7751073792ull, &other), 7138705408ull);
  assert_true(other);
  c.est_other_total_bytes = 0; /* one outcome: always the total */
  assert_int_equal(vl_commitment_reference_bytes(&c, 7751073792ull, &other), 6803161088ull);
  assert_false(other);
  /* a broken one is refused with the key's name */
  static const char bad[] =
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", \"hardware\": {\"gpu\": "
      "\"h200\", \"gpu_memory_bytes\": 150109880320, \"count\": 2}, \"baseline\": {\"task\": "
      "\"train\", \"batch\": 4, \"seq\": 512, \"dp\": 2}, \"estimate\": {\"peak_allocated_bytes\": "
      "1, \"peak_reserved_bytes\": 1, "
      "\"total_bytes\": 1, \"other_total_bytes\": \"many\"}}";
  assert_int_not_equal(vl_commitment_parse(bad, strlen(bad), &c, &err), VL_OK);
  assert_non_null(strstr(err.msg, "other_total_bytes"));
}

static void never_a_pass_by_accident(void **state) {
  (void)state;
  struct vl_commitment c;
  struct vl_err err = {""};
  const char *bad[] = {
      "{}", "[]", "{\"schema\": \"vramledger.commitment/1\"}",
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", "
      "\"hardware\": {}, \"estimate\": {}, \"baseline\": {\"batch\": 1, \"seq\": 8}}",
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", "
      "\"hardware\": {\"gpu\": \"l4\", \"gpu_memory_bytes\": 5, \"count\": 1}, "
      "\"estimate\": {\"peak_allocated_bytes\": 1, \"peak_reserved_bytes\": 1, "
      "\"total_bytes\": 1}, \"baseline\": {\"batch\": 1, \"seq\": 8, \"precision\": \"fp8\"}}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_not_equal(vl_commitment_parse(bad[i], strlen(bad[i]), &c, &err), VL_OK);
  struct vl_job j;
  char t[64];
  const char *s =
      "{\"settings\": {\"batch\": 4, \"seq\": 128, \"zero\": 2, \"dp\": 8, \"sp\": false, "
      "\"lora_rank\": 8, \"lora_targets\": \"q_proj,v_proj\", \"offload\": \"optimizer\"}}";
  assert_int_equal(vl_job_from_settings(s, strlen(s), &j, t, sizeof t, &err), VL_OK);
  assert_int_equal(j.zero, 2);
  assert_int_equal(j.dp, 8);
  assert_int_equal(j.offload, VL_OFFLOAD_OPTIMIZER);
  assert_int_equal(j.n_lora_targets, 2);
  assert_string_equal(j.lora_targets[1], "v_proj");
  const char *z = "{\"batch\": 4, \"seq\": 128, \"zero\": 7}";
  assert_int_equal(vl_job_from_settings(z, strlen(z), &j, t, sizeof t, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "zero"));
}

/* lora_targets that do not fit are refused, never cut (a cut name is
 * another module) nor dropped (fewer targets, a smaller bill) */
static void settings_targets_whole(void **state) {
  (void)state;
  struct vl_job j;
  struct vl_err err = {""};
  char t[16], s[256];
  snprintf(s, sizeof s, "{\"batch\": 1, \"seq\": 8, \"lora_targets\": \"q_proj,v_proj\"}");
  assert_int_equal(vl_job_from_settings(s, strlen(s), &j, t, sizeof t, &err), VL_OK);
  assert_int_equal(j.n_lora_targets, 2); /* 13 bytes and its NUL fit 16; 16 do not */
  snprintf(s, sizeof s, "{\"batch\": 1, \"seq\": 8, \"lora_targets\": \"q_proj,v_proj,up\"}");
  assert_int_equal(vl_job_from_settings(s, strlen(s), &j, t, sizeof t, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "longer than 15 bytes"));
  char big[512];
  size_t k = (size_t)snprintf(s, sizeof s, "{\"batch\": 1, \"seq\": 8, \"lora_targets\": \"");
  for (int i = 0; i <= VL_MAX_LORA_TARGETS; i++)
    k += (size_t)snprintf(s + k, sizeof s - k, "%sm%d", i ? "," : "", i);
  snprintf(s + k, sizeof s - k, "\"}");
  assert_int_equal(vl_job_from_settings(s, strlen(s), &j, big, sizeof big, &err), VL_EKEY);
  assert_non_null(strstr(err.msg, "at most 16 module names"));
}

/* check --format json lists every "auto" setting, however long the list */
static void check_json_not_checked_whole(void **state) {
  (void)state;
  char autos[2048] = "";
  size_t k = 0;
  for (int i = 0; i < 100; i++)
    k += (size_t)snprintf(autos + k, sizeof autos - k, "%ssetting_%03d", i ? ", " : "", i);
  struct vl_check_view v = {"c.json", NULL, NULL, 0, autos};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(vl_render_check(f, VL_FMT_JSON, &v), 0);
  fclose(f);
  json_error_t je;
  json_t *o = json_loads(buf, 0, &je);
  free(buf);
  json_t *nc = json_object_get(o, "not_checked");
  assert_int_equal(json_array_size(nc), 100);
  assert_string_equal(json_string_value(json_array_get(nc, 0)), "setting_000");
  assert_string_equal(json_string_value(json_array_get(nc, 99)), "setting_099");
  json_decref(o);
}

/* A DeepSpeed configuration as the settings it controls. */
static vl_status ds(const char *text, struct vl_job *j, char *autos) {
  vl_job_init(j);
  j->batch = 7;
  j->grad_accum = 3;
  struct vl_err err = {""};
  return vl_job_apply_deepspeed(text, strlen(text), j, autos, 256, &err);
}

static void deepspeed_settings(void **state) {
  (void)state;
  struct vl_job j;
  char autos[256];
  size_t len = 0;
  char *text = tu_read("tests/data/deepspeed/zero3-offload.json", &len);
  struct vl_err err = {""};
  vl_job_init(&j);
  assert_int_equal(vl_job_apply_deepspeed(text, len, &j, autos, sizeof autos, &err), VL_OK);
  free(text);
  assert_int_equal(j.batch, 2);
  assert_int_equal(j.grad_accum, 4);
  assert_int_equal(j.dp, 8); /* 64 = 2 x 4 x 8 ranks */
  assert_int_equal(j.zero, 3);
  assert_int_equal(j.offload, VL_OFFLOAD_OPTIMIZER);
  assert_int_equal(j.precision, VL_PREC_MIXED_BF16);
  assert_int_equal(j.optimizer, VL_OPT_ADAMW);
  assert_int_equal(j.framework, VL_FW_DEEPSPEED);
  assert_string_equal(autos, "");
  /* "auto": left as it was, and named */
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": \"auto\", \"fp16\": {\"enabled\": "
                      "true}, \"zero_optimization\": {\"stage\": 1, \"offload_param\": "
                      "{\"device\": \"nvme\"}}, \"optimizer\": {\"type\": \"SGD\", "
                      "\"params\": {\"momentum\": 0.9}}}",
                      &j, autos),
                   VL_OK);
  assert_int_equal(j.batch, 7);
  assert_int_equal(j.grad_accum, 3);
  assert_string_equal(autos, "train_micro_batch_size_per_gpu");
  assert_int_equal(j.precision, VL_PREC_MIXED_FP16);
  assert_int_equal(j.zero, 1);
  assert_int_equal(j.offload, VL_OFFLOAD_FULL);
  assert_int_equal(j.optimizer, VL_OPT_SGD_MOMENTUM);
  /* no precision section: fp32; no zero section: stage 0 */
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": 4}", &j, autos), VL_OK);
  assert_int_equal(j.precision, VL_PREC_FP32);
  assert_int_equal(j.zero, 0);
  assert_int_equal(j.batch, 4);
  /* refusals: never a silent pass */
  assert_int_equal(ds("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}", &j, autos),
                   VL_EKEY);
  assert_int_equal(ds("{\"zero_optimization\": {\"stage\": 4}}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"zero_optimization\": 2}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"optimizer\": {\"type\": \"Shampoo\"}}", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4, "
                      "\"gradient_accumulation_steps\": 1}",
                      &j, autos),
                   VL_EKEY);
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": 0}", &j, autos), VL_EKEY);
  assert_int_equal(ds("[1, 2]", &j, autos), VL_EKEY);
  assert_int_equal(ds("{\"train_micro_batch_size_per_gpu\": ", &j, autos), VL_EPARSE);
}

/* FIPS 180-4's examples (NIST CSRC "SHA256.pdf"): one block, two blocks
 * (the padding spills over), and the empty message. */
static void sha256_vectors(void **state) {
  (void)state;
  char hex[VL_SHA256_HEX];
  vl_sha256_hex("abc", 3, hex);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  vl_sha256_hex(two, strlen(two), hex);
  assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  vl_sha256_hex("", 0, hex);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* A model is what its config says, not how or where it was written. */
static void config_identity(void **state) {
  (void)state;
  const char *a = "{\"model_type\": \"llama\", \"num_hidden_layers\": 28, "
                  "\"rope_scaling\": {\"factor\": 8.0, \"type\": \"llama3\"}}";
  const char *b = "{\n  \"_name_or_path\": \"/home/me/llama\",\n  \"rope_scaling\": {\"type\": "
                  "\"llama3\", \"factor\": 8.0},\n  \"transformers_version\": \"4.44.0\",\n"
                  "  \"num_hidden_layers\": 28,\n  \"model_type\": \"llama\"\n}\n";
  const char *edited = "{\"model_type\": \"llama\", \"num_hidden_layers\": 34, "
                       "\"rope_scaling\": {\"factor\": 4.0, \"type\": \"llama3\"}, \"tie\": true}";
  struct vl_err err = {""};
  char ha[VL_SHA256_HEX], hb[VL_SHA256_HEX], he[VL_SHA256_HEX];
  assert_int_equal(vl_config_sha256(a, strlen(a), ha, &err), VL_OK);
  assert_int_equal(vl_config_sha256(b, strlen(b), hb, &err), VL_OK);
  assert_int_equal(vl_config_sha256(edited, strlen(edited), he, &err), VL_OK);
  assert_string_equal(ha, hb); /* order, spaces, _name_or_path, transformers_version */
  assert_string_not_equal(ha, he);
  char *canon = NULL;
  size_t n = 0;
  assert_int_equal(vl_config_canonical(b, strlen(b), &canon, &n, &err), VL_OK);
  assert_string_equal(canon, "{\"model_type\":\"llama\",\"num_hidden_layers\":28,"
                             "\"rope_scaling\":{\"factor\":8.0,\"type\":\"llama3\"}}");
  assert_int_equal(n, strlen(canon));
  /* the commitment keeps that copy; what changed is named key by key */
  char doc[1024];
  snprintf(doc, sizeof doc, "{\"model_config\": {\"sha256\": \"%s\", \"content\": %s}}", ha, canon);
  vl_free(canon);
  struct vl_drift d[8];
  int nd = -1;
  assert_int_equal(
      vl_commitment_config_diff(doc, strlen(doc), edited, strlen(edited), d, 8, &nd, &err), VL_OK);
  assert_int_equal(nd, 3);
  assert_string_equal(d[0].field, "num_hidden_layers");
  assert_string_equal(d[0].committed, "28");
  assert_string_equal(d[0].now, "34");
  assert_string_equal(d[1].field, "rope_scaling.factor");
  assert_string_equal(d[1].committed, "8.0");
  assert_string_equal(d[1].now, "4.0");
  assert_string_equal(d[2].field, "tie");
  assert_string_equal(d[2].committed, "(absent)");
  assert_string_equal(d[2].now, "true");
  assert_int_equal(vl_commitment_config_diff(doc, strlen(doc), b, strlen(b), d, 8, &nd, &err),
                   VL_OK);
  assert_int_equal(nd, 0);
  const char *nocopy = "{\"model_config\": {\"sha256\": \"00\"}}";
  assert_int_equal(vl_commitment_config_diff(nocopy, strlen(nocopy), a, strlen(a), d, 8, &nd, &err),
                   VL_EKEY);
  assert_int_equal(vl_config_sha256("[1]", 3, ha, &err), VL_EKEY);
  assert_int_equal(vl_config_sha256("{", 1, ha, &err), VL_EPARSE);
}

/* A commitment reads its model's identity back; a broken one is refused. */
static void commitment_identity(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/llama3-8b-lora.json", &len);
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  assert_true(c.has_identity);
  assert_string_equal(c.config_bundled, "llama-3-8b");
  assert_string_equal(c.config_file, "");
  assert_string_equal(c.model_type, "llama");
  assert_int_equal(c.params, 8030261248ull);
  /* the bundled config is the committed one: the same hash */
  size_t ml = 0;
  char *model = tu_read("data/models/llama-3-8b.json", &ml);
  char sha[VL_SHA256_HEX];
  assert_int_equal(vl_config_sha256(model, ml, sha, &err), VL_OK);
  assert_string_equal(sha, c.config_sha256);
  int nd = -1;
  struct vl_drift d[4];
  assert_int_equal(vl_commitment_config_diff(text, len, model, ml, d, 4, &nd, &err), VL_OK);
  assert_int_equal(nd, 0);
  free(model);
  free(text);
  static const char head[] =
      "{\"schema\": \"vramledger.commitment/1\", \"model\": \"gpt2\", \"hardware\": {\"gpu\": "
      "\"h200\", \"gpu_memory_bytes\": 150109880320, \"count\": 1}, \"baseline\": {\"batch\": 4, "
      "\"seq\": 512}, \"estimate\": {\"peak_allocated_bytes\": 1, \"peak_reserved_bytes\": 1, "
      "\"total_bytes\": 1}, \"model_config\": ";
  const char *bad[] = {"{\"sha256\": \"abc\", \"bundled\": \"gpt2\"}}",
                       "{\"sha256\": \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b785"
                       "2b855\"}}",
                       "\"gpt2\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char doc[1024];
    snprintf(doc, sizeof doc, "%s%s", head, bad[i]);
    assert_int_equal(vl_commitment_parse(doc, strlen(doc), &c, &err), VL_EKEY);
    assert_non_null(strstr(err.msg, "model_config"));
  }
}

/* Every setting a job's flags set is in the baseline and compared; the
 * loop's defaults are the same job however they were spelled. */
static void every_setting_compared(void **state) {
  (void)state;
  const char *s = "{\"batch\": 4, \"seq\": 128, \"keep_grads\": true, \"drop_outputs\": true, "
                  "\"ddp_static_graph\": true, \"pp\": 2, \"pp_schedule\": \"gpipe\", \"loop\": "
                  "\"trainer\", \"optimizer_impl\": \"fused\"}";
  struct vl_commitment c;
  memset(&c, 0, sizeof c);
  struct vl_err err = {""};
  assert_int_equal(
      vl_job_from_settings(s, strlen(s), &c.job, c.lora_targets, sizeof c.lora_targets, &err),
      VL_OK);
  assert_true(c.job.grads_persist);
  assert_true(c.job.drop_outputs);
  assert_true(c.job.ddp_static_graph);
  assert_true(c.job.pp_gpipe);
  assert_int_equal(c.job.loop, VL_LOOP_TRAINER);
  struct vl_drift d[16];
  /* the same job from flags: --loop trainer (fused AdamW, outputs dropped by the loop) */
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 4;
  j.seq = 128;
  j.grads_persist = j.ddp_static_graph = j.pp_gpipe = true;
  j.pp = 2;
  j.loop = VL_LOOP_TRAINER;
  assert_int_equal(vl_commitment_diff(&c, &j, d, 16), 0);
  /* each one of them drifts on its own */
  struct vl_job k = j;
  k.grads_persist = false;
  assert_int_equal(vl_commitment_diff(&c, &k, d, 16), 1);
  assert_string_equal(d[0].field, "keep-grads");
  k = j;
  k.pp_gpipe = false;
  assert_int_equal(vl_commitment_diff(&c, &k, d, 16), 1);
  assert_string_equal(d[0].field, "pp-schedule");
  assert_string_equal(d[0].committed, "gpipe");
  assert_string_equal(d[0].now, "1f1b");
  k = j;
  k.ddp_static_graph = false;
  assert_int_equal(vl_commitment_diff(&c, &k, d, 16), 1);
  assert_string_equal(d[0].field, "ddp-static-graph");
  k = j; /* a plain loop keeps the outputs and the foreach AdamW */
  k.loop = VL_LOOP_PLAIN;
  assert_int_equal(vl_commitment_diff(&c, &k, d, 16), 3);
  assert_string_equal(d[0].field, "optimizer-impl");
  assert_string_equal(d[1].field, "loop");
  assert_string_equal(d[2].field, "drop-outputs");
  const char *bad = "{\"batch\": 4, \"seq\": 128, \"pp_schedule\": \"zigzag\"}";
  assert_int_equal(
      vl_job_from_settings(bad, strlen(bad), &j, c.lora_targets, sizeof c.lora_targets, &err),
      VL_EKEY);
  assert_non_null(strstr(err.msg, "pp_schedule"));
  const char *inf = "{\"task\": \"infer\", \"batch\": 4, \"seq\": 128, \"kv_layout\": \"paged\", "
                    "\"kv_bytes_per_element\": 1, \"kv_block_tokens\": 32}";
  assert_int_equal(
      vl_job_from_settings(inf, strlen(inf), &j, c.lora_targets, sizeof c.lora_targets, &err),
      VL_OK);
  assert_int_equal(j.kv_layout, VL_KV_PAGED);
  assert_int_equal(j.kv_bytes, 1);
  assert_int_equal(j.kv_block_tokens, 32);
}

/* What a run ran on against what was committed. */
static void run_hardware(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("data/gpus.json", &len);
  struct vl_catalog cat;
  struct vl_err err = {""};
  assert_int_equal(vl_catalog_parse(text, len, &cat, &err), VL_OK);
  free(text);
  static struct vl_record r;
  memset(&r, 0, sizeof r);
  r.n_gpus = 4; /* four H200s visible, two used */
  for (unsigned i = 0; i < 4; i++) {
    r.gpus[i].index = i;
    snprintf(r.gpus[i].name, sizeof r.gpus[i].name, "NVIDIA H200");
    r.gpus[i].total_bytes = 150109880320ull;
  }
  struct vl_rec_sample s[2] = {{0}};
  s[0].gpu_tree[1] = 1u << 30;
  s[1].gpu_tree[3] = 2u << 30;
  r.samples = s;
  r.n_samples = 2;
  struct vl_run_hw hw;
  vl_run_hw_read(&r, &hw);
  assert_int_equal(hw.count, 2);
  assert_true(hw.used);
  assert_false(hw.mixed);
  assert_string_equal(hw.device, "NVIDIA H200");
  struct vl_drift d[2];
  assert_int_equal(vl_commitment_hw_diff("h200", 150109880320ull, 2, &cat, &hw, d, 2), 0);
  assert_int_equal(vl_commitment_hw_diff("h200-sxm", 1, 2, &cat, &hw, d, 2), 0); /* an alias */
  assert_int_equal(vl_commitment_hw_diff("h100-80gb", 85520809984ull, 1, &cat, &hw, d, 2), 2);
  assert_string_equal(d[0].field, "gpu");
  assert_string_equal(d[0].committed, "h100-80gb");
  assert_string_equal(d[0].now, "h200");
  assert_string_equal(d[1].field, "gpus");
  assert_string_equal(d[1].committed, "1");
  assert_string_equal(d[1].now, "2");
  /* a device the catalog does not know: by its memory */
  snprintf(r.gpus[1].name, sizeof r.gpus[1].name, "Fake GPU 1");
  snprintf(r.gpus[3].name, sizeof r.gpus[3].name, "Fake GPU 3");
  vl_run_hw_read(&r, &hw);
  assert_true(hw.mixed); /* "Fake GPU 1" and "Fake GPU 3": not one name */
  snprintf(r.gpus[3].name, sizeof r.gpus[3].name, "Fake GPU 1");
  vl_run_hw_read(&r, &hw);
  assert_false(hw.mixed);
  assert_int_equal(vl_commitment_hw_diff("h200", 150109880320ull, 2, &cat, &hw, d, 2), 0);
  assert_int_equal(vl_commitment_hw_diff("h100-80gb", 85520809984ull, 2, &cat, &hw, d, 2), 1);
  /* no GPU samples: the GPUs it could see; none named: nothing to compare */
  r.n_samples = 0;
  vl_run_hw_read(&r, &hw);
  assert_int_equal(hw.count, 4);
  assert_false(hw.used);
  r.n_gpus = 0;
  vl_run_hw_read(&r, &hw);
  assert_int_equal(hw.count, 0);
  assert_int_equal(vl_commitment_hw_diff("h100-80gb", 85520809984ull, 1, &cat, &hw, d, 2), 0);
  vl_catalog_release(&cat);
}

/* The gate (vl_check_compute): nothing against the job as committed; then
 * one problem a rule, in the order shown: hardware, budget, the run. */
static void gate_rules(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/llama3-8b-lora.json", &len);
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  free(text);
  static struct vl_bill b;
  memset(&b, 0, sizeof b);
  const uint64_t G = 1ull << 30;
  b.total_bytes = 10 * G;
  struct vl_check_model m = {.file = "config.json",
                             .model_type = c.model_type,
                             .params = c.params,
                             .sha256 = c.config_sha256};
  struct vl_check_job j = {.job = &c.job, .bill = &b, .margin = c.margin};
  static struct vl_check g;
  vl_check_compute(&c, &m, &j, &g);
  assert_int_equal(g.n, 0);
  j.margin = c.margin + 0.05;
  b.total_bytes = 200 * G;   /* over the committed 80 GiB card */
  struct vl_run_hw hw = {0}; /* a record naming no GPU: nothing to compare */
  j.run_hw = &hw;
  j.run_peak_bytes = 2 * vl_commitment_budget_bytes(&c);
  vl_check_compute(&c, &m, &j, &g);
  assert_int_equal(g.n, 3);
  assert_int_equal(g.items[0].kind, VL_CHECK_HARDWARE);
  assert_string_equal(g.items[0].d.field, "margin");
  assert_string_equal(g.items[0].d.committed, "10 %");
  assert_string_equal(g.items[0].d.now, "15 %");
  assert_int_equal(g.items[1].kind, VL_CHECK_BUDGET);
  assert_string_equal(g.items[1].d.now, "200.00 GiB per GPU");
  assert_true(g.items[1].action[0]);
  assert_int_equal(g.items[2].kind, VL_CHECK_TRIGGER);
  assert_string_equal(g.items[2].d.field, "measured peak");
}

/* The fallback is the next rung of the decision tree for this job, never
 * one it already stands on. */
static void fallback_fits_the_job(void **state) {
  (void)state;
  static struct vl_bill b;
  memset(&b, 0, sizeof b);
  const uint64_t G = 1ull << 30, card = 80 * G;
  struct vl_job j;
  vl_job_init(&j);
  j.batch = 4;
  j.grad_accum = 2;
  char buf[320];
  /* activations are most of what is left */
  b.line_max[VL_LINE_PARAMETERS] = 10 * G;
  b.line_max[VL_LINE_ACTIVATIONS] = 60 * G;
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "--checkpointing full"));
  j.checkpointing = VL_CKPT_FULL; /* already on: the micro-batch next */
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_null(strstr(buf, "checkpointing"));
  assert_non_null(strstr(buf, "--batch 2 --grad-accum 4"));
  j.batch = 1; /* and at micro-batch 1: more GPUs */
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "more GPUs"));
  /* the model states over 80 % of the card: ZeRO with ranks, else LoRA,
   * then QLoRA, then offload */
  b.line_max[VL_LINE_PARAMETERS] = 20 * G;
  b.line_max[VL_LINE_OPTIMIZER] = 50 * G;
  j.batch = 4;
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "--lora-rank"));
  j.dp = 8;
  j.zero = 1;
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "--zero 2"));
  j.lora_rank = 16;
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "--qlora"));
  j.qlora = true;
  vl_commitment_peak_action(&j, &b, card, buf, sizeof buf);
  assert_non_null(strstr(buf, "--offload optimizer"));
  /* throughput: the kernel the job does not use yet */
  vl_job_init(&j);
  j.attention = VL_ATTN_EAGER;
  vl_commitment_throughput_action(&j, buf, sizeof buf);
  assert_non_null(strstr(buf, "--attention sdpa"));
  j.attention = VL_ATTN_SDPA;
  vl_commitment_throughput_action(&j, buf, sizeof buf);
  assert_null(strstr(buf, "--attention sdpa"));
  assert_non_null(strstr(buf, "flash_attention_2"));
}

/* A commitment written now holds each baseline key once and reads back
 * the job it was written for, every setting check compares; one written
 * before the settings carried keep_grads, drop_outputs, ddp_static_graph,
 * pp_schedule and loop (tests/data/commitments/llama3-8b-lora.json) is
 * still read, those at their defaults. */
static void old_and_new_commitments(void **state) {
  (void)state;
  struct vl_catalog cat;
  assert_int_equal(tu_catalog(&cat), 0);
  struct vl_arch a;
  tu_arch("data/models/gpt2.json", &a);
  for (int task = 0; task < 2; task++) {
    struct vl_job j;
    vl_job_init(&j);
    j.batch = 4;
    j.seq = 256;
    if (task) {
      j.task = VL_TASK_INFER;
      j.new_tokens = 64;
      j.kv_layout = VL_KV_PAGED;
      j.kv_block_tokens = 32;
    } else {
      j.dp = 2;
      j.pp = 2;
      j.grads_persist = j.drop_outputs = j.ddp_static_graph = j.pp_gpipe = true;
      j.loop = VL_LOOP_TRAINER;
    }
    struct vl_bill b;
    tu_bill(&a, &j, &b);
    const struct vl_gpu *g = vl_catalog_find(&cat, "h200");
    struct vl_fit fit;
    vl_fit_check(vl_bill_budget_bytes(&b), g, 0.10, &fit);
    struct vl_commit_view v = {.model_name = "gpt2",
                               .arch = &a,
                               .job = &j,
                               .bill = &b,
                               .gpu = g,
                               .fit = &fit,
                               .created = "2026-12-01T00:00:00Z",
                               .version = "test"};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(vl_render_commitment(f, false, &v), 0);
    fclose(f);
    static const char *const once[] = {"\"keep_grads\"",       "\"drop_outputs\"",
                                       "\"ddp_static_graph\"", "\"pp_schedule\"",
                                       "\"kv_block_tokens\"",  "\"batch\""};
    for (size_t k = 0; k < sizeof once / sizeof once[0]; k++) {
      int n = 0;
      for (const char *p = text; (p = strstr(p, once[k])); p++)
        n++;
      bool train_only = k < 4, infer_only = k == 4;
      assert_int_equal(n, (train_only && task) || (infer_only && !task) ? 0 : 1);
    }
    struct vl_commitment c;
    struct vl_err err = {""};
    assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
    free(text);
    struct vl_drift d[8];
    assert_int_equal(vl_commitment_diff(&c, &j, d, 8), 0);
    assert_int_equal(c.job.kv_block_tokens, j.kv_block_tokens);
    assert_int_equal(c.gpus, task ? 1 : 4);
  }
  vl_catalog_release(&cat);
  /* the old one: none of the later keys, read with their defaults */
  size_t len = 0;
  char *text = tu_read("tests/data/commitments/llama3-8b-lora.json", &len);
  assert_null(strstr(text, "keep_grads"));
  assert_null(strstr(text, "pp_schedule"));
  struct vl_commitment c;
  struct vl_err err = {""};
  assert_int_equal(vl_commitment_parse(text, len, &c, &err), VL_OK);
  free(text);
  assert_false(c.job.grads_persist || c.job.drop_outputs || c.job.ddp_static_graph);
  assert_false(c.job.pp_gpipe);
  assert_int_equal(c.job.loop, VL_LOOP_PLAIN);
  assert_int_equal(c.job.lora_rank, 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(reads_and_compares),
                                     cmocka_unit_test(ddp_other_outcome),
                                     cmocka_unit_test(never_a_pass_by_accident),
                                     cmocka_unit_test(deepspeed_settings),
                                     cmocka_unit_test(sha256_vectors),
                                     cmocka_unit_test(config_identity),
                                     cmocka_unit_test(commitment_identity),
                                     cmocka_unit_test(every_setting_compared),
                                     cmocka_unit_test(run_hardware),
                                     cmocka_unit_test(fallback_fits_the_job),
                                     cmocka_unit_test(old_and_new_commitments),
                                     cmocka_unit_test(settings_targets_whole),
                                     cmocka_unit_test(check_json_not_checked_whole),
                                     cmocka_unit_test(gate_rules)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
