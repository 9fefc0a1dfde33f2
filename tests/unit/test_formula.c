/* lib/model/terms.def, compiled by cmake/terms_gen.c: a term's formula is
 * its definition. The generated code keeps the grammar's operations and
 * overflows (a table of this file's own, test_terms.def, through the same
 * generator, and the generator's refusals); and every term of every bundled
 * model's bill, under job shapes of training, LoRA, ZeRO, FSDP, DeepSpeed,
 * Megatron, pipelines and inference, must give its bytes when its formula
 * is evaluated over the inputs it shows, by an evaluator of this file's own
 * (written apart from the generator, in 128-bit integers), and show only
 * inputs its formula names. */
#include <dirent.h>
#include <math.h>
#include <spawn.h>
#include <sys/wait.h>

#include "testutil.h"
#include "model/terms.h"
#include "test_terms_table.h"

extern char **environ;

/* ---- a reference evaluator, independent of the generator ---- */

struct ref {
  const char *p;
  const struct vl_term *t;
  unsigned used;
  bool bad, unknown;
};
struct rv {
  unsigned __int128 n; /* whole; above 2^64 - 1 is an overflow */
  double x;
  bool real;
};

static const unsigned __int128 U64 = (unsigned __int128)UINT64_MAX;

static void ref_space(struct ref *r) {
  while (*r->p == ' ')
    r->p++;
}

/* an operand's note: "(words)", nesting allowed */
static void ref_notes(struct ref *r) {
  ref_space(r);
  while (*r->p == '(') {
    int depth = 0;
    for (; *r->p && (depth += (*r->p == '(') - (*r->p == ')')) > 0; r->p++) {
    }
    if (!*r->p) {
      r->bad = true;
      return;
    }
    r->p++;
    ref_space(r);
  }
}

static struct rv ref_sum(struct ref *r);

static struct rv ref_atom(struct ref *r) {
  struct rv v = {0, 0, false};
  ref_space(r);
  const char *s = r->p;
  if (*s == '(') {
    r->p++;
    v = ref_sum(r);
    r->bad |= *r->p != ')';
    if (*r->p) r->p++;
  } else if (*s >= '0' && *s <= '9') {
    char *end;
    double d = strtod(s, &end);
    bool point = memchr(s, '.', (size_t)(end - s)) != NULL;
    v = point ? (struct rv){0, d, true} : (struct rv){(unsigned __int128)d, 0, false};
    r->bad |= !point && (double)v.n != d;
    r->p = end;
  } else {
    size_t len = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789");
    r->p += len;
    if (len == 3 && s[3] == '(' && (!strncmp(s, "max", 3) || !strncmp(s, "min", 3))) {
      r->p++;
      struct rv a = ref_sum(r);
      r->bad |= *r->p != ',';
      if (*r->p) r->p++;
      struct rv b = ref_sum(r);
      r->bad |= *r->p != ')' || a.real || b.real;
      if (*r->p) r->p++;
      v.n = (s[1] == 'a') == (a.n > b.n) ? a.n : b.n;
    } else {
      int i = 0;
      while (i < r->t->n_in &&
             !(strlen(r->t->in[i].name) == len && !strncmp(r->t->in[i].name, s, len)))
        i++;
      r->bad |= len == 0 || i == r->t->n_in;
      r->unknown |= i == r->t->n_in;
      if (i < r->t->n_in) {
        r->used |= 1u << i;
        const struct vl_input *in = &r->t->in[i];
        v = in->real ? (struct rv){0, in->value, true} : (struct rv){in->whole, 0, false};
      }
    }
  }
  ref_notes(r);
  if (*r->p == '^') {
    r->p++;
    ref_space(r);
    long k = strtol(r->p, (char **)&r->p, 10);
    unsigned __int128 b = v.n;
    for (long i = 1; i < k; i++)
      v.n = v.n * b > U64 ? U64 + 1 : v.n * b;
    ref_notes(r);
  }
  return v;
}

static struct rv ref_product(struct ref *r) {
  struct rv a = ref_atom(r);
  while (!r->bad && (*r->p == '*' || *r->p == '/')) {
    char op = *r->p++;
    struct rv b = ref_atom(r);
    if (op == '/') {
      r->bad |= a.real || b.real;
      a.n = b.n ? (a.n + b.n - 1) / b.n : 0;
    } else if (a.real && b.real) {
      a.x *= b.x;
    } else if (a.real || b.real) {
      /* rounded to nearest at once, as vl__scale */
      double d = (double)(uint64_t)(a.real ? b.n : a.n) * (a.real ? a.x : b.x) + 0.5;
      a = (struct rv){d >= 18446744073709551615.0 ? U64 + 1 : d >= 0 ? (uint64_t)d : 0, 0, false};
    } else {
      a.n = a.n && b.n > U64 / a.n ? U64 + 1 : a.n * b.n;
    }
    r->bad |= a.n > U64;
  }
  return a;
}

static struct rv ref_sum(struct ref *r) {
  struct rv a = ref_product(r);
  while (!r->bad && (*r->p == '+' || *r->p == '-')) {
    char op = *r->p++;
    struct rv b = ref_product(r);
    r->bad |= a.real || b.real;
    a.n = op == '+' ? a.n + b.n : a.n > b.n ? a.n - b.n : 0;
    r->bad |= a.n > U64;
  }
  return a;
}

/* the term's formula over its shown inputs into *bytes; NULL, or what is
 * wrong with it */
static const char *ref_eval(const struct vl_term *t, uint64_t *bytes) {
  struct ref r = {t->formula, t, 0, false, false};
  struct rv v = ref_sum(&r);
  ref_space(&r);
  *bytes = (uint64_t)v.n;
  if (r.unknown) return "names an input the term does not show";
  if (r.bad || *r.p || v.real) return "does not parse, or overflows";
  if (r.used != (1u << t->n_in) - 1) return "shows an input its formula does not name";
  return NULL;
}

/* ---- the generated code of the grammar's own table ---- */

static const struct test_in_grammar grammar_in = {10, 3, 2, 0.25, 10000000000000000000ull};

static uint64_t eval(enum test_term t, const struct test_in_grammar *in, bool *ok) {
  struct vl__ck ck = {false};
  uint64_t bytes = test_value_grammar(&ck, t, in);
  *ok = !ck.overflow;
  return bytes;
}

static void grammar(void **state) {
  (void)state;
  static const struct {
    enum test_term t;
    uint64_t want;
  } good[] = {
      {TEST_T_LEFT_TO_RIGHT, 8},           /* P / N * g: ceil(10/3) * 2 */
      {TEST_T_CEILING, 7},                 /* P * g / N: ceil(20/3) */
      {TEST_T_PRECEDENCE, 16},             /* P + N * g */
      {TEST_T_GROUPING, 26},               /* (P + N) * g */
      {TEST_T_FLOOR_ZERO, 0},              /* N - P: never below zero */
      {TEST_T_FUNCTIONS, 14},              /* max(P, N * 4) + min(P, g) */
      {TEST_T_POWERS, 18},                 /* N^2 * g */
      {TEST_T_REAL_INPUT, 3},              /* P * f: 2.5 rounded to nearest */
      {TEST_T_REAL_LITERAL, 1},            /* P * 0.05: 0.5 rounds up */
      {TEST_T_REALS_FIRST, 2},             /* f * f * P * g: (0.0625 * 10 -> 1) * 2 */
      {TEST_T_EXPONENT, 500000000},        /* 5e8 */
      {TEST_T_EXPONENT_DIV, 200000000000}, /* 2e12 / P */
      {TEST_T_NOTES, 20},                  /* notes, nested */
      {TEST_T_ZERO, 0},                    /* 0 (nothing) */
      {TEST_T_LONG_ONE, 20 * 30 + 78},     /* 20 products and 12 literals */
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    bool ok;
    uint64_t got = eval(good[i].t, &grammar_in, &ok);
    printf("  %-40s = %llu\n", test_terms[good[i].t].formula, (unsigned long long)got);
    assert_true(ok);
    assert_int_equal(got, good[i].want);
  }
  /* an overflow sets it and gives 0, never a wrapped number */
  static const enum test_term over[] = {TEST_T_OVERFLOW, TEST_T_OVERFLOW_ADD,
                                        TEST_T_OVERFLOW_POWER};
  for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
    bool ok;
    uint64_t got = eval(over[i], &grammar_in, &ok);
    printf("  overflows: %s (%llu)\n", test_terms[over[i]].formula, (unsigned long long)got);
    assert_false(ok);
  }
  /* a factor that is not a number, and a struct of another group */
  struct test_in_grammar nan_in = grammar_in;
  nan_in.f = NAN;
  bool ok;
  assert_int_equal(eval(TEST_T_REAL_INPUT, &nan_in, &ok), 0);
  assert_false(ok);
  struct vl__ck ck = {false};
  assert_int_equal(
      vl__term_value(&ck, &test_terms[TEST_T_CEILING], TEST_G_GRAMMAR + 1, &grammar_in), 0);
  assert_true(ck.overflow);
}

/* a term shows the inputs its formula names, in its group's order */
static void record(void **state) {
  (void)state;
  struct vl_bill *b = calloc(1, sizeof *b);
  assert_non_null(b);
  struct vl__ck ck = {false};
  assert_int_equal(test_note_grammar(b, &ck, TEST_T_REALS_FIRST, &grammar_in), 2);
  assert_int_equal(test_note_grammar(b, &ck, TEST_T_ZERO, &grammar_in), 0);
  assert_false(ck.overflow);
  assert_int_equal(b->n_terms, 2);
  const struct vl_term *t = &b->terms[0];
  assert_string_equal(t->formula, "f * f * P * g");
  assert_string_equal(t->name, "reals multiplied first");
  assert_int_equal(t->line, VL_LINE_TRANSIENT);
  assert_false(t->detail);
  assert_int_equal(t->bytes, 2);
  assert_int_equal(t->n_in, 3);
  assert_string_equal(t->in[0].name, "P");
  assert_int_equal(t->in[0].whole, 10);
  assert_string_equal(t->in[1].name, "g");
  assert_string_equal(t->in[1].unit, "bytes");
  assert_string_equal(t->in[2].name, "f");
  assert_true(t->in[2].real);
  assert_true(t->in[2].value == 0.25);
  assert_true(b->terms[1].detail);
  assert_int_equal(b->terms[1].n_in, 0);
  free(b);
}

/* what the generator refuses at build time: not a formula, an unknown
 * name, a real result or a real where a whole number is needed, a literal
 * that overflows */
static void refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      "P *", "P + q",       "f",   "P * f * f + f", "P g",       "max(P)",
      "(P",  "P (unclosed", "f^2", "P / f",         "max(f, P)", "P * 99999999999999999999",
      "P^9", "P * 1.5e3",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *argv[] = {(char *)VL_TERMS_GEN, (char *)"check", (char *)"grammar", (char *)bad[i], NULL};
    pid_t pid;
    int st;
    assert_int_equal(posix_spawn(&pid, VL_TERMS_GEN, NULL, NULL, argv, environ), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    printf("  refused: %s\n", bad[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  }
  char *argv[] = {(char *)VL_TERMS_GEN, (char *)"check", (char *)"grammar", (char *)"P / N * g",
                  NULL};
  pid_t pid;
  int st;
  assert_int_equal(posix_spawn(&pid, VL_TERMS_GEN, NULL, NULL, argv, environ), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- every term of every bundled model ---- */

static void s_train(struct vl_job *j) { j->precision = VL_PREC_FP32; }
static void s_amp_eager(struct vl_job *j) {
  j->precision = VL_PREC_AMP_BF16;
  j->attention = VL_ATTN_EAGER;
}
static void s_ckpt(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->checkpointing = VL_CKPT_FULL;
  j->optimizer = VL_OPT_SGD_MOMENTUM;
}
static void s_lora(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->lora_rank = 16;
}
static void s_lora_amp_all(struct vl_job *j) {
  j->precision = VL_PREC_AMP_FP16;
  j->lora_rank = 8;
  j->lora_targets[0] = "all-linear";
  j->n_lora_targets = 1;
  j->opt_impl = VL_IMPL_FORLOOP;
}
static void s_qlora(struct vl_job *j) {
  s_lora(j);
  j->qlora = true;
  j->optimizer = VL_OPT_ADAM8BIT;
}
static void s_ddp(struct vl_job *j) {
  j->precision = VL_PREC_AMP_BF16;
  j->dp = 2;
}
static void s_ddp_static(struct vl_job *j) {
  s_ddp(j);
  j->ddp_static_graph = true;
}
static void s_zero1(struct vl_job *j) {
  j->precision = VL_PREC_MIXED_BF16;
  j->dp = 4;
  j->zero = 1;
}
static void s_zero2_fsdp(struct vl_job *j) {
  j->dp = 2;
  j->zero = 2;
}
static void s_zero3_fsdp(struct vl_job *j) {
  j->precision = VL_PREC_AMP_BF16;
  j->dp = 2;
  j->zero = 3;
}
static void s_ds_zero2(struct vl_job *j) {
  s_zero1(j);
  j->zero = 2;
  j->framework = VL_FW_DEEPSPEED;
}
static void s_ds_zero3_offload(struct vl_job *j) {
  s_ds_zero2(j);
  j->zero = 3;
  j->offload = VL_OFFLOAD_OPTIMIZER;
}
static void s_ds_full_offload(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->dp = 4;
  j->zero = 3;
  j->framework = VL_FW_DEEPSPEED;
  j->offload = VL_OFFLOAD_FULL;
}
static void s_ds_amp_zero3(struct vl_job *j) {
  s_zero3_fsdp(j);
  j->framework = VL_FW_DEEPSPEED;
}
static void s_ds_zero3(struct vl_job *j) {
  s_ds_zero2(j);
  j->zero = 3;
}
static void s_fsdp_offload(struct vl_job *j) {
  s_zero3_fsdp(j);
  j->offload = VL_OFFLOAD_OPTIMIZER;
}
static void s_fsdp_grad_op_lora(struct vl_job *j) {
  s_zero2_fsdp(j);
  j->lora_rank = 8;
}
static void s_adafactor(struct vl_job *j) { j->optimizer = VL_OPT_ADAFACTOR; }
static void s_adafactor_zero1(struct vl_job *j) {
  j->optimizer = VL_OPT_ADAFACTOR;
  j->dp = 2;
  j->zero = 1;
}
static void s_megatron_sp(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->framework = VL_FW_MEGATRON;
  j->tp = 2;
  j->sp = true;
  j->pp = 2;
  j->grad_accum = 4;
}
static void s_megatron_eager(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->framework = VL_FW_MEGATRON;
  j->attention = VL_ATTN_EAGER;
  j->tp = 2;
}
static void s_megatron_ckpt(struct vl_job *j) {
  s_megatron_eager(j);
  j->checkpointing = VL_CKPT_FULL;
}
static void s_megatron_sp_ckpt(struct vl_job *j) {
  s_megatron_sp(j);
  j->checkpointing = VL_CKPT_FULL;
}
static void s_pipeline(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->pp = 2;
  j->grad_accum = 4;
}
static void s_gpipe(struct vl_job *j) {
  s_pipeline(j);
  j->pp_gpipe = true;
}
static void s_tp_eager(struct vl_job *j) {
  j->precision = VL_PREC_BF16;
  j->tp = 2;
  j->attention = VL_ATTN_EAGER;
}
static void s_trainer(struct vl_job *j) {
  j->optimizer = VL_OPT_LION;
  j->loop = VL_LOOP_TRAINER;
}
static void s_accelerate(struct vl_job *j) {
  j->precision = VL_PREC_AMP_BF16;
  j->loop = VL_LOOP_ACCELERATE;
  j->allocator = VL_ALLOC_EXPANDABLE;
}
static void s_infer(struct vl_job *j) {
  j->task = VL_TASK_INFER;
  j->new_tokens = 64;
}
static void s_infer_paged(struct vl_job *j) {
  s_infer(j);
  j->kv_layout = VL_KV_PAGED;
  j->attention = VL_ATTN_EAGER;
  j->precision = VL_PREC_FP16;
}
static void s_infer_prefill(struct vl_job *j) {
  j->task = VL_TASK_INFER;
  j->tp = 2;
  j->kv_bytes = 1;
}

static const struct {
  const char *name;
  void (*set)(struct vl_job *);
} shapes[] = {
    {"fp32 adamw", s_train},
    {"amp eager", s_amp_eager},
    {"bf16 checkpointing momentum", s_ckpt},
    {"lora", s_lora},
    {"lora all-linear amp for-loop", s_lora_amp_all},
    {"qlora adam8bit", s_qlora},
    {"ddp", s_ddp},
    {"ddp static graph", s_ddp_static},
    {"zero-1 mixed", s_zero1},
    {"fsdp zero-2", s_zero2_fsdp},
    {"fsdp zero-3", s_zero3_fsdp},
    {"fsdp zero-3 optimizer offload", s_fsdp_offload},
    {"fsdp shard-grad-op lora", s_fsdp_grad_op_lora},
    {"deepspeed zero-2 mixed", s_ds_zero2},
    {"deepspeed zero-3 mixed", s_ds_zero3},
    {"deepspeed zero-3 offload", s_ds_zero3_offload},
    {"deepspeed zero-3 full offload", s_ds_full_offload},
    {"deepspeed zero-3 amp", s_ds_amp_zero3},
    {"adafactor", s_adafactor},
    {"adafactor zero-1", s_adafactor_zero1},
    {"megatron tp sp pp", s_megatron_sp},
    {"megatron eager", s_megatron_eager},
    {"megatron checkpointing", s_megatron_ckpt},
    {"megatron tp sp pp checkpointing", s_megatron_sp_ckpt},
    {"pipeline 1f1b", s_pipeline},
    {"pipeline gpipe", s_gpipe},
    {"tp eager", s_tp_eager},
    {"trainer lion", s_trainer},
    {"accelerate expandable", s_accelerate},
    {"infer", s_infer},
    {"infer paged", s_infer_paged},
    {"infer prefill tp fp8", s_infer_prefill},
};

#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* the distinct formulas met, to print how many cases the shapes reach */
static const char *met[256];
static int n_met;

static void meet(const char *f) {
  for (int i = 0; i < n_met; i++)
    if (!strcmp(met[i], f)) return;
  if (n_met < 256) met[n_met++] = f;
}

/* every term of b: its formula over its inputs is its bytes */
static int check_terms(const char *model, const char *shape, const struct vl_bill *b) {
  int bad = 0;
  for (int i = 0; i < b->n_terms; i++) {
    const struct vl_term *t = &b->terms[i];
    meet(t->formula);
    uint64_t got;
    const char *why = ref_eval(t, &got);
    if (!why && got == t->bytes) continue;
    printf("  %s, %s: '%s' = %s: %s (%llu over its inputs, %llu recorded)\n", model, shape, t->name,
           t->formula, why ? why : "not its bytes", (unsigned long long)got,
           (unsigned long long)t->bytes);
    bad++;
  }
  return bad;
}

static void every_term_is_its_formula(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/data/models", VL_SOURCE_DIR);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct vl_overheads ov;
  vl_overheads_default(&ov);
  int models = 0, bills = 0, terms = 0, bad = 0, per_shape[N_SHAPES] = {0};
  /* under the sanitizers (tests/CMakeLists.txt) the lines alone: the
   * replays' terms are checked by the main build, their memory by the
   * replays' own tests there */
  const bool analytic = getenv("VL_FORMULA_ANALYTIC") != NULL;
  struct vl_bill *b = malloc(sizeof *b);
  assert_non_null(b);
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 5, ".json")) continue;
    char rel[512];
    snprintf(rel, sizeof rel, "data/models/%s", e->d_name);
    struct vl_arch arch;
    tu_arch(rel, &arch);
    models++;
    for (size_t s = 0; s < N_SHAPES; s++) {
      struct vl_job j;
      vl_job_init(&j);
      j.batch = 2;
      j.seq = 512;
      shapes[s].set(&j);
      j.analytic_only = analytic;
      struct vl_err err = {""};
      vl_status rc = vl_bill_compute(&arch, &j, &ov, b, &err);
      /* a job the model refuses (an encoder's generate(), heads that tp
       * does not divide) is skipped; an overflow would be a formula that
       * does not parse */
      assert_int_not_equal(rc, VL_EOVERFLOW);
      if (rc != VL_OK) continue;
      bills++;
      per_shape[s]++;
      terms += b->n_terms;
      bad += check_terms(e->d_name, shapes[s].name, b);
    }
  }
  closedir(d);
  free(b);
  printf("  %d models, %d bills, %d terms (%d formulas), %d not their formula\n", models, bills,
         terms, n_met, bad);
  assert_true(models >= 50);
  for (size_t s = 0; s < N_SHAPES; s++) {
    if (!per_shape[s]) printf("  no model takes the shape '%s'\n", shapes[s].name);
    assert_true(per_shape[s] > 0);
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grammar),
      cmocka_unit_test(record),
      cmocka_unit_test(refused),
      cmocka_unit_test(every_term_is_its_formula),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
