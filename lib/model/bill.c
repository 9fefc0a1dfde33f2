/* The training bill: model states, activations, temporaries and overheads of
 * one step on one GPU, and the phase where the peak falls.
 *
 * Sources by line (docs/model.md has them all):
 *  parameters/gradients/master/optimizer: bytes per parameter (Rajbhandari et al. 2019, arXiv
 * 1910.02054); ZeRO (Rajbhandari et al., arXiv 1910.02054) sharding; Megatron-LM
 *    theoretical_memory_usage.py (18 B/param, 6 + 12/DP with the distributed
 *    optimizer); DeepSpeed estimate_zero{2,3}_model_states_mem_needs.
 *  activations: activations.c.
 *  transient: PyTorch torch/optim/adam.py (_multi_tensor_adam keeps one
 *    state-sized list for the denominator), the loss backward, attention
 *    backward, FSDP/ZeRO-3 gathered layers.
 *  workspace, context: measured, struct vl_overheads. */
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "terms.h"
#include "vramledger/alloc.h"
#include "vramledger/caching.h"
#include "pytorch_constants.h"

struct lora {
  bool target[VL_MAX_TENSORS]; /* inventory index -> adapted */
  uint64_t params;             /* adapter elements in the whole model */
  int n_targets;
};

/* PEFT's target_modules when a LoraConfig names none: the type's row
 * (include/vramledger/arch.h). A type it has no default for, where
 * LoraConfig asks for target_modules, takes its query and value
 * projections (Phi-3's and ModernBERT's fused qkv_proj, Wqkv). */
int vl_lora_default_targets(const struct vl_arch *arch, const char **names, bool *peft) {
  const char *const *row = vl__peft_targets(arch->family);
  int n = 0;
  while (row && n < 4 && row[n]) {
    names[n] = row[n];
    n++;
  }
  *peft = n > 0;
  if (n) return n;
  if (arch->family == VL_FAM_PHI3 || arch->family == VL_FAM_MODERNBERT) {
    names[0] = arch->family == VL_FAM_PHI3 ? "qkv_proj" : "Wqkv"; /* fused */
    return 1;
  }
  const bool encoder = arch->family == VL_FAM_DISTILBERT;
  names[0] = encoder ? "query" : "q_proj";
  names[1] = encoder ? "value" : "v_proj";
  return 2;
}

/* transformers' own module names where this inventory calls the linear
 * otherwise: DeBERTa-v2's and DistilBERT's by BERT's names
 * (transformers 5.17 modeling_deberta_v2.py query_proj,
 * modeling_distilbert.py q_lin ... ffn.lin2) */
static const struct {
  const char *type, *hf, *ours;
} alias[] = {
    {"deberta-v2", "query_proj", "query"},
    {"deberta-v2", "key_proj", "key"},
    {"deberta-v2", "value_proj", "value"},
    {"distilbert", "q_lin", "query"},
    {"distilbert", "k_lin", "key"},
    {"distilbert", "v_lin", "value"},
    {"distilbert", "out_lin", "attention.output.dense"},
    {"distilbert", "lin1", "intermediate.dense"},
    {"distilbert", "lin2", "output.dense"},
    {"bart", "q_proj", "q"},
    {"bart", "k_proj", "k"},
    {"bart", "v_proj", "v"},
    {"bart", "out_proj", "o"},
    {"bart", "fc1", "wi"},
    {"bart", "fc2", "wo"},
};

static const char *inventory_name(const struct vl_arch *arch, const char *name) {
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (!strcmp(alias[i].type, arch->model_type) && !strcmp(alias[i].hf, name))
      return alias[i].ours;
  return name;
}

const char *vl_lora_module_name(const struct vl_arch *arch, const char *name) {
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (!strcmp(alias[i].type, arch->model_type) && !strcmp(alias[i].ours, name))
      return alias[i].hf;
  return name;
}

/* the job's target names, or the type's default: n of them in names[] */
static int target_names(const struct vl_arch *arch, const struct vl_job *job, const char **names) {
  if (job->n_lora_targets == 0) {
    bool peft;
    int n = vl_lora_default_targets(arch, names, &peft);
    for (int i = 0; i < n; i++) /* (BART's q_proj is `q` here) */
      names[i] = inventory_name(arch, names[i]);
    return n;
  }
  int n = 0;
  for (int i = 0; i < job->n_lora_targets && i < VL_MAX_LORA_TARGETS; i++)
    names[n++] = inventory_name(arch, job->lora_targets[i]);
  return n;
}

bool vl__lora_is_target(const struct vl_arch *arch, const struct vl_job *job, const char *name) {
  if (!job->lora_rank) return false;
  const char *names[VL_MAX_LORA_TARGETS + 4];
  const int n = target_names(arch, job, names);
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], "all-linear") ? strcmp(name, "gate") != 0 : !strcmp(names[i], name))
      return true;
  return false;
}

static vl_status resolve_lora(const struct vl_arch *arch, const struct vl_inventory *inv,
                              const struct vl_job *job, struct lora *lo, struct vl_err *err) {
  memset(lo, 0, sizeof *lo);
  if (!job->lora_rank) return VL_OK;
  const char *names[VL_MAX_LORA_TARGETS + 4];
  const int n = target_names(arch, job, names);
  struct vl__ck ck = {false};
  for (int k = 0; k < n; k++) {
    bool all = strcmp(names[k], "all-linear") == 0, found = false;
    for (int i = 0; i < inv->n; i++) {
      const struct vl_tensor *t = &inv->t[i];
      if (t->kind != VL_T_LINEAR || !t->per_layer) continue;
      if (all ? strcmp(t->name, "gate") == 0 : strcmp(t->name, names[k]) != 0) continue;
      found = true;
      if (lo->target[i]) continue;
      lo->target[i] = true;
      lo->n_targets++;
      /* lora_A: r x in, lora_B: out x r (PEFT LoraLayer) */
      lo->params =
          vl__add(&ck, lo->params, vl__mul3(&ck, job->lora_rank, t->rows + t->cols, t->count));
    }
    if (!found) {
      char list[256] = "";
      size_t used = 0;
      for (int i = 0; i < inv->n; i++) {
        const struct vl_tensor *t = &inv->t[i];
        if (t->kind != VL_T_LINEAR || !t->per_layer || strcmp(t->name, "gate") == 0) continue;
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", t->name);
        if (w < 0 || (size_t)w >= sizeof list - used) break;
        used += (size_t)w;
      }
      return vl__fail(err, VL_EINVAL,
                      "LoRA target '%.40s' is not a linear layer of %s; valid: %s, all-linear",
                      names[k], arch->model_type, list);
    }
  }
  if (ck.overflow) return vl__fail(err, VL_EOVERFLOW, "LoRA parameter count overflows");
  return VL_OK;
}

static bool name_is(const struct vl_tensor *t, const char *a, const char *b, const char *c) {
  return strcmp(t->name, a) == 0 || (b && strcmp(t->name, b) == 0) ||
         (c && strcmp(t->name, c) == 0);
}

static vl_status check_job(const struct vl_arch *arch, const struct vl_job *job,
                           struct vl_err *err) {
  if (job->batch == 0 || job->seq == 0)
    return vl__fail(err, VL_ERANGE, "batch and sequence length must be at least 1");
  if (job->batch > (1u << 20) || job->seq > (1u << 24))
    return vl__fail(err, VL_ERANGE,
                    "batch %llu x seq %llu is beyond any real job (limits 1048576 x 16777216)",
                    (unsigned long long)job->batch, (unsigned long long)job->seq);
  if (job->target_seq > (1u << 24))
    return vl__fail(err, VL_ERANGE, "target length %llu is beyond any real job (limit 16777216)",
                    (unsigned long long)job->target_seq);
  const uint64_t min_side = arch->family == VL_FAM_VIT && arch->patch_size ? arch->patch_size : 1;
  if (vl_arch_is_vision(arch) && (job->image_size > (1u << 16) || job->image_size < min_side))
    return vl__fail(
        err, VL_ERANGE, "image side %llu pixels is outside what %s takes (%llu to 65536)",
        (unsigned long long)job->image_size, arch->model_type, (unsigned long long)min_side);
  if (job->dp == 0 || job->tp == 0 || job->pp == 0 || job->dp > 65536 || job->tp > 1024 ||
      job->pp > 1024)
    return vl__fail(err, VL_ERANGE, "--dp, --tp and --pp must be between 1 and 65536/1024");
  if (job->grad_accum == 0 || job->grad_accum > 65536)
    return vl__fail(err, VL_ERANGE, "--grad-accum must be between 1 and 65536");
  if (job->zero > 3) return vl__fail(err, VL_ERANGE, "--zero must be 0, 1, 2 or 3");
  if (job->zero > 0 && job->dp < 2)
    return vl__fail(err, VL_ECONFLICT,
                    "--zero %u shards across data-parallel ranks, but --dp is 1; give --dp N "
                    "with N >= 2, or drop --zero",
                    job->zero);
  if (job->sp && job->tp < 2)
    return vl__fail(err, VL_ECONFLICT,
                    "--sp splits activations across tensor-parallel ranks; "
                    "it needs --tp 2 or more");
  if (arch->heads % job->tp || arch->kv_heads % job->tp)
    if (!(arch->kv_heads < job->tp && job->tp % arch->kv_heads == 0 && arch->heads % job->tp == 0))
      return vl__fail(err, VL_ECONFLICT,
                      "--tp %llu does not divide the %llu attention heads (%llu key/value heads)",
                      (unsigned long long)job->tp, (unsigned long long)arch->heads,
                      (unsigned long long)arch->kv_heads);
  if (job->pp > arch->layers)
    return vl__fail(err, VL_ECONFLICT, "--pp %llu exceeds the model's %llu layers",
                    (unsigned long long)job->pp, (unsigned long long)arch->layers);
  if (job->offload != VL_OFFLOAD_NONE && job->zero == 0)
    return vl__fail(err, VL_ECONFLICT, "--offload needs ZeRO (--zero 1..3 with --dp >= 2)");
  if (job->offload == VL_OFFLOAD_FULL && job->zero != 3)
    return vl__fail(err, VL_ECONFLICT, "--offload full (parameters too) needs --zero 3");
  if (job->qlora && job->lora_rank == 0)
    return vl__fail(err, VL_ECONFLICT, "--qlora needs --lora-rank R");
  if (job->lora_rank > 65536) return vl__fail(err, VL_ERANGE, "--lora-rank is absurdly large");
  if (job->master_grads_fp32 && job->precision != VL_PREC_MIXED_BF16 &&
      job->precision != VL_PREC_MIXED_FP16)
    return vl__fail(err, VL_ECONFLICT, "--master-grads fp32 applies to mixed-bf16/mixed-fp16");
  if (job->checkpointing == VL_CKPT_SELECTIVE && job->framework != VL_FW_MEGATRON &&
      job->attention == VL_ATTN_SDPA)
    return vl__fail(err, VL_ECONFLICT,
                    "--checkpointing selective recomputes the attention scores, which sdpa "
                    "never keeps; use none or full");
  uint64_t total_seq =
      job->task == VL_TASK_INFER ? job->seq + job->new_tokens : vl__max(job->seq, job->target_seq);
  /* (a ViT interpolates its table to another image side: interpolate_pos_encoding) */
  if (arch->learned_pos && total_seq > arch->max_positions && arch->family != VL_FAM_VIT)
    return vl__fail(
        err, VL_ECONFLICT, "%s has learned positions for %llu tokens, and the job needs %llu",
        arch->model_type, (unsigned long long)arch->max_positions, (unsigned long long)total_seq);
  return VL_OK;
}

/* Per-GPU, per-stage model states. */
struct states {
  uint64_t weights_elems; /* stored elements on this GPU */
  uint64_t weight_bytes;
  uint64_t trainable_elems; /* on this GPU, before ZeRO sharding */
  uint64_t linear_elems;    /* matmul weights on this GPU (autocast copies) */
  uint64_t layer_elems;     /* one layer on this GPU (gathered under ZeRO-3) */
  uint64_t layer_trainable; /* trainable elements of one layer */
  uint64_t head_trainable;  /* trainable elements outside layers */
  uint64_t largest_elems;   /* largest tensor (ZeRO-3 DeepSpeed buffer, forloop) */
  uint64_t factored_elems;  /* Adafactor: rows + cols of matrices, n of vectors */
  uint64_t largest_linear;  /* elements, for QLoRA dequantisation */
  uint64_t seg_waste;       /* bytes the allocator's segments add to the weights */
};

static void model_states(const struct vl_arch *arch, const struct vl_inventory *inv,
                         const struct vl_job *job, const struct lora *lo,
                         const struct vl__policy *pol, uint64_t stage_layers, bool first, bool last,
                         struct vl__ck *ck, struct states *st) {
  memset(st, 0, sizeof *st);
  for (int i = 0; i < inv->n; i++) {
    const struct vl_tensor *t = &inv->t[i];
    uint64_t one = vl__tp_split(t, job->tp, vl__mul(ck, t->rows, t->cols));
    uint64_t count = t->count;
    if (t->per_layer) {
      /* a stage's share; exact where a tensor is not in every layer
       * (MoE beside dense layers) and the stage is the whole model */
      count = vl__mul(ck, count, stage_layers) / arch->layers;
    } else {
      /* embeddings on the first stage; final norm and head on the last; a
       * tied head keeps a copy of the embedding on the last stage (Megatron) */
      bool is_head = t->kind == VL_T_HEAD || (t->kind != VL_T_EMBED && arch->causal);
      if (t->kind == VL_T_EMBED && !first &&
          !(last && arch->tie_embeddings && strstr(t->name, "position") == NULL &&
            strcmp(t->name, "wpe")))
        continue;
      if (is_head && !last) continue;
      if (!arch->causal && t->kind != VL_T_EMBED && !last) continue;
    }
    uint64_t elems = vl__mul(ck, one, count);
    st->weights_elems = vl__add(ck, st->weights_elems, elems);
    if (one > st->largest_elems) st->largest_elems = one;
    bool linear = t->kind == VL_T_LINEAR || t->kind == VL_T_HEAD;
    double wb = (double)pol->weight;
    if (job->qlora && t->kind == VL_T_LINEAR && t->per_layer) {
      /* bitsandbytes NF4 with double quantisation (pytorch_constants.h) */
      wb = VL_BNB_NF4_BYTES_PER_ELEM;
      if (one > st->largest_linear) st->largest_linear = one;
    } else if (job->qlora && job->precision == VL_PREC_FP32) {
      wb = 4.0;
    }
    st->weight_bytes = vl__add(ck, st->weight_bytes, vl__scale(ck, elems, wb));
    if (linear && !job->qlora) st->linear_elems = vl__add(ck, st->linear_elems, elems);
    if (t->per_layer)
      st->layer_elems = vl__add(ck, st->layer_elems, vl__mul(ck, one, t->count / arch->layers));
    /* segment rounding of each weight (and its gradient when trained) */
    uint64_t wbytes = vl__scale(ck, one, wb);
    uint64_t waste = vl__sub0(vl__alloc_segment_bytes(wbytes), wbytes);
    st->seg_waste = vl__add(ck, st->seg_waste, vl__mul(ck, waste, count));
    uint64_t trainable = 0, tr_factored = 0;
    if (!job->lora_rank) {
      trainable = elems;
      tr_factored =
          t->cols > 1 ? vl__mul(ck, vl__add(ck, vl__tp_split(t, job->tp, t->rows), t->cols), count)
                      : elems;
    } else if (lo->target[i]) {
      uint64_t ad = vl__mul(ck, job->lora_rank, t->rows + t->cols);
      trainable = vl__mul(ck, vl__div_ceil(ad, job->tp), count);
      tr_factored = vl__mul(
          ck, vl__add(ck, vl__mul(ck, 2, job->lora_rank), vl__add(ck, t->rows, t->cols)), count);
    }
    st->trainable_elems = vl__add(ck, st->trainable_elems, trainable);
    st->factored_elems = vl__add(ck, st->factored_elems, tr_factored);
    if (t->per_layer)
      st->layer_trainable = vl__add(ck, st->layer_trainable, count ? trainable / stage_layers : 0);
    else
      st->head_trainable = vl__add(ck, st->head_trainable, trainable);
  }
}

/* Optimizer states as large as the parameters, per parameter: SGD none,
 * momentum and Lion one, Adam two (0 for the factored and quantised ones). */
static unsigned full_states(enum vl_optimizer o) {
  switch (o) {
  case VL_OPT_SGD_MOMENTUM:
  case VL_OPT_LION: return 1;
  case VL_OPT_ADAM:
  case VL_OPT_ADAMW: return 2;
  default: return 0;
  }
}

/* The optimizer states of the trainable elements tr over shard ranks, per
 * PyTorch's optimizers (Rajbhandari et al. 2019 for the bytes). */
static enum vl__term optimizer_def(const struct vl_job *job, const struct vl__policy *pol,
                                   const struct states *st, uint64_t shard,
                                   struct vl__in_optimizer *in) {
  *in = (struct vl__in_optimizer){
      .P_train = st->trainable_elems,
      .shard = shard,
      .s = job->lora_rank ? VL__ADAPTER_BYTES : pol->state,
      .n = full_states(job->optimizer),
      /* Adafactor: a row and a column vector per matrix */
      .F = st->trainable_elems ? st->factored_elems : 0,
  };
  if (job->optimizer == VL_OPT_ADAFACTOR)
    return vl__div_ceil(st->trainable_elems, shard) == st->trainable_elems
               ? VL__T_OPTIMIZER_ADAFACTOR
               : VL__T_OPTIMIZER_ADAFACTOR_SHARDED;
  if (job->optimizer == VL_OPT_ADAM8BIT) return VL__T_OPTIMIZER_ADAM8BIT; /* bitsandbytes */
  return VL__T_OPTIMIZER_STATES;
}

struct phase_comp {
  uint64_t line[VL_LINE_COUNT];
};

static uint64_t comp_alloc(const struct phase_comp *p) {
  uint64_t s = 0;
  for (int l = 0; l < VL_LINE_COUNT; l++)
    if (vl_line_in_allocated((enum vl_line)l)) s += p->line[l];
  return s;
}

/* DDP: bucket copies of every gradient. PyTorch's ZeRO-1 is DDP with a
 * ZeroRedundancyOptimizer (FSDP has no stage 1), so its buckets too (not
 * Megatron's or DeepSpeed's own data parallelism, not FSDP) */
static bool ddp_buckets(const struct vl_job *job) {
  return job->dp > 1 && job->zero <= 1 && job->framework == VL_FW_HF;
}

/* The state one pipeline stage's bill builds up, section by section: the
 * job and its inputs, then the bytes each section leaves for the next. */
struct train_stage {
  const struct vl_arch *arch;
  const struct vl_inventory *inv;
  const struct vl_job *job;
  const struct vl_overheads *ov;
  const struct lora *lo;
  struct vl_bill *bill;
  uint64_t stage; /* pipeline stage, 0 .. pp - 1 */
  /* the job's policy and shape */
  struct vl__ck ck;
  struct vl__policy pol;
  bool first;
  bool last;
  uint64_t Ls;
  uint64_t dp;
  bool ds;
  bool mg;
  bool mixed;
  struct states st;
  /* model states (bytes on this GPU; host: offloaded) */
  bool fsdp_grad_op;
  uint64_t w_shard;
  uint64_t W_sharded;
  uint64_t tr;
  uint64_t tr_opt;
  uint64_t M;
  uint64_t gb;
  uint64_t G;
  uint64_t O;
  uint64_t host;
  uint64_t G_layer;
  uint64_t G_head;
  /* activations */
  uint64_t in_flight; /* micro-batches whose activations are held at once */
  struct vl__act act;
  uint64_t A_embed;
  uint64_t A_head;
  uint64_t A;
  uint64_t recompute;
  /* autocast's weight copies */
  uint64_t C_layer;
  uint64_t C_ckpt;
  uint64_t C_fwd;
  /* temporaries */
  uint64_t sb; /* bytes of one optimizer state element */
  uint64_t T_opt;
  enum vl_opt_impl impl;
  uint64_t gathered;
  uint64_t gathered_bwd;
  uint64_t qlora_tmp;
  /* communication, context, workspaces */
  uint64_t comm;
  uint64_t ctx;
  uint64_t ws;
  /* each phase's lines, then the allocator's */
  struct phase_comp ph[VL_PH_COUNT];
  unsigned bwd_live;
  bool expandable;
  double churn_frac;
  bool replayable;
  struct vl_cache_stats rs;
  enum vl_phase peak;
};

/* model states: weights, master copy, gradients, optimizer states, what
 * offloading moves to the host */
static void stage_states(struct train_stage *ts) {
  struct vl__ck *ck = &ts->ck;
  const struct vl_job *job = ts->job;
  /* weights kept sharded between steps: ZeRO-3, and FSDP's shard-grad-op
   * when the weights are what the optimizer updates (FSDP shards them and
   * gathers a whole copy for forward and backward; with a separate fp32
   * master copy, that copy is the shard and the half weights the gathered
   * copy, as DeepSpeed's ZeRO-2 and the ZeRO paper count) */
  ts->fsdp_grad_op = job->zero == 2 && !ts->ds && !ts->mg && !ts->mixed;
  ts->w_shard = job->zero >= 3 || ts->fsdp_grad_op ? ts->dp : 1;
  ts->tr = ts->st.trainable_elems;
  const uint64_t opt_shard = job->zero >= 1 ? ts->dp : 1, grad_shard = job->zero >= 2 ? ts->dp : 1;
  ts->tr_opt = vl__div_ceil(ts->tr, opt_shard); /* optimizer shard */
  ts->gb = vl__grad_elem_bytes(job, &ts->pol);
  /* buffers that go to the GPU with the model (GPT-BigCode's mask) sit
   * beside the weights, unsharded */
  const bool buf = ts->arch->buffer_bytes > 0;
  const struct vl__in_parameters w = {.weights = ts->st.weight_bytes,
                                      .P_train = ts->tr,
                                      .shard = ts->w_shard,
                                      .buffers = ts->arch->buffer_bytes};
  const enum vl__term w_term = job->lora_rank
                                   ? (buf ? VL__T_PARAMETERS_LORA_BUFFERS : VL__T_PARAMETERS_LORA)
                                   : (buf ? VL__T_PARAMETERS_BUFFERS : VL__T_PARAMETERS);
  /* mixed precision: 2 + 2 + 4 master; ZeRO-1 shards the master copy */
  const struct vl__in_master m = {.P_train = ts->tr, .shard = opt_shard};
  /* DeepSpeed keeps an fp32 gradient partition for the optimizer. ZeRO-3
   * reduce-scatters half gradients straight into it: 18 B/param over N in
   * all (estimate_zero3_model_states_mem_needs); ZeRO-2 keeps a half
   * partition too (2P + 18P/N) */
  const bool ds_part = ts->ds && ts->mixed;
  const struct vl__in_gradients g = {
      .P_train = ts->tr, .shard = grad_shard, .g = ts->gb, .N = ts->dp};
  const enum vl__term g_term =
      ds_part  ? (job->zero >= 3 ? VL__T_GRADIENTS_DS_ZERO3 : VL__T_GRADIENTS_DS)
      : ts->mg ? VL__T_GRADIENTS_MEGATRON
               : VL__T_GRADIENTS;
  struct vl__in_optimizer o;
  const enum vl__term o_term = optimizer_def(job, &ts->pol, &ts->st, opt_shard, &o);
  ts->W_sharded = vl__value_parameters(ck, w_term, &w);
  ts->M = ts->mixed ? vl__value_master(ck, VL__T_MASTER, &m) : 0;
  ts->G = vl__value_gradients(ck, g_term, &g);
  ts->O = vl__value_optimizer(ck, o_term, &o);
  ts->host = 0;
  const bool off = job->offload != VL_OFFLOAD_NONE, off_full = job->offload == VL_OFFLOAD_FULL;
  if (off) {
    ts->host = vl__add(ck, ts->M, ts->O);
    if (ts->ds) ts->host = vl__add(ck, ts->host, ts->G); /* ZeRO-Offload: gradient partitions */
    if (off_full) ts->host = vl__add(ck, ts->host, ts->W_sharded);
    if (ts->ds) ts->host = vl__scale(ck, ts->host, 1.5); /* DeepSpeed's pinned-buffer factor */
    ts->M = ts->O = 0;
    if (ts->ds) ts->G = 0;
    if (off_full) ts->W_sharded = 0;
  }
  /* gradient bytes of one layer and of the head, in proportion to their
   * trainable elements (ratios in double: products of bytes and elements
   * overflow 64 bits for 100B-parameter models) */
  ts->G_layer = ts->tr ? vl__scale(ck, ts->G, (double)ts->st.layer_trainable / (double)ts->tr) : 0;
  ts->G_head = ts->tr ? vl__scale(ck, ts->G, (double)ts->st.head_trainable / (double)ts->tr) : 0;
  /* a state moved to host memory: its term is a zero on this GPU */
  struct vl_bill *bill = ts->bill;
  vl__note_parameters(bill, ck,
                      !off_full ? w_term
                      : buf     ? VL__T_PARAMETERS_BUFFERS_OFFLOADED
                                : VL__T_PARAMETERS_OFFLOADED,
                      &w);
  if (ts->mixed) vl__note_master(bill, ck, off ? VL__T_MASTER_OFFLOADED : VL__T_MASTER, &m);
  vl__note_gradients(bill, ck, off && ts->ds ? VL__T_GRADIENTS_OFFLOADED : g_term, &g);
  vl__note_optimizer(bill, ck, off ? VL__T_OPTIMIZER_OFFLOADED : o_term, &o);
}

/* activations kept at the end of the forward */
static void stage_activations(struct train_stage *ts) {
  struct vl__ck *ck = &ts->ck;
  const struct vl_arch *arch = ts->arch;
  const struct vl_inventory *inv = ts->inv;
  const struct vl_job *job = ts->job;
  const struct lora *lo = ts->lo;
  struct vl_bill *bill = ts->bill;
  struct vl__shape sh = {
      .b = job->batch,
      .s = job->seq,
      .h = arch->hidden,
      .a = arch->heads,
      .g = arch->kv_heads,
      .d = arch->head_dim,
      .I = arch->intermediate,
      .V = arch->vocab,
      .tp = job->tp,
      .sp = job->sp,
      .lora_rank = job->lora_rank,
  };
  if (!job->lora_rank) {
    sh.attn_in_saved = sh.o_in_saved = sh.mlp_in_saved = sh.down_in_saved = true;
  } else {
    for (int i = 0; i < inv->n; i++) {
      if (!lo->target[i]) continue;
      const struct vl_tensor *t = &inv->t[i];
      sh.lora_in += t->cols * (arch->layers ? t->count / arch->layers : 0);
      /* a half input (or autocast's) is copied by each adapter, counted
       * with the adapters (activations.c); only an fp32 one is shared */
      if (vl__lora_input_copy_bytes(&ts->pol)) continue;
      if (name_is(t, "q_proj", "k_proj", "v_proj") ||
          name_is(t, "c_attn", "query_key_value", "qkv_proj") ||
          name_is(t, "query", "key", "value"))
        sh.attn_in_saved = true;
      else if (name_is(t, "o_proj", "out_proj", "attn.c_proj") ||
               name_is(t, "dense", "attention.output.dense", NULL))
        sh.o_in_saved = true;
      else if (name_is(t, "down_proj", "fc2", "mlp.c_proj") ||
               name_is(t, "dense_4h_to_h", "output.dense", "w2"))
        sh.down_in_saved = true;
      else
        sh.mlp_in_saved = true;
    }
  }
  /* micro-batches whose activations a stage holds at once. 1F1B: the
   * first stage min(pp, micro-batches), the others one; GPipe runs every
   * forward before any backward: every stage holds them all (measured,
   * GPT-2 over 2 H200s: bench/results/unseen-sets/raw.jsonl:pp-stages) */
  const uint64_t micro = vl__max(job->grad_accum, 1);
  ts->in_flight = job->pp > 1 && job->pp_gpipe ? micro : ts->first ? vl__min(job->pp, micro) : 1;
  if (vl_arch_is_conv(arch))
    vl__act_conv(arch, job, &ts->pol, bill, ck, &ts->act);
  else if (ts->mg)
    vl__act_megatron(arch, job, &sh, ts->in_flight, ts->last, bill, ck, &ts->act);
  else
    vl__act_hf(arch, job, &ts->pol, &sh, bill, ck, &ts->act);
  ts->A_embed =
      ts->first ? (ts->mg ? ts->act.embed : vl__mul(ck, ts->act.embed, ts->in_flight)) : 0;
  /* only the last stage computes the loss */
  if (!ts->last) ts->act.head_fwd_tmp = ts->act.loss_bwd_tmp = 0;
  ts->A_head = ts->last ? ts->act.head : 0;
  if (job->pp > 1 && ts->last && job->pp_gpipe && job->grad_accum > 1) {
    /* GPipe: every micro-batch's forward, loss included, before any
     * backward */
    ts->A_head = vl__mul(ck, ts->act.head, job->grad_accum);
  } else if (job->pp > 1 && ts->last && !ts->mg && !ts->ds && job->grad_accum > 1) {
    /* torch.distributed.pipelining keeps the last stage's output of every
     * micro-batch (the logits) until the step merges them (measured,
     * GPT-2 over 2 H200s, 1F1B, 4 micro-batches: the last stage 0.32 GB
     * over one micro-batch's bill, 3 x logits = 0.31 GB, bench/results/
     * unseen-sets/pp-stages) */
    uint64_t kept =
        vl__note_pipeline_outputs(bill, ck, VL__T_PIPELINE_OUTPUTS,
                                  &(struct vl__in_pipeline_outputs){
                                      .logits = ts->act.logits, .micro_batches = job->grad_accum});
    ts->A_head = vl__add(ck, ts->A_head, kept);
  }
  if (vl_arch_is_conv(arch)) { /* no layers of tokens: the feature maps, then the head */
    ts->A = vl__note_conv_activations(bill, ck, VL__T_CONV_ACTIVATIONS,
                                      &(struct vl__in_conv_activations){
                                          .feature_maps = ts->act.embed,
                                          .in_flight = ts->in_flight,
                                          .head = ts->A_head,
                                      });
    ts->recompute = 0;
    return;
  }
  ts->A = vl__note_activations(bill, ck, ts->mg ? VL__T_ACTIVATIONS_MEGATRON : VL__T_ACTIVATIONS,
                               &(struct vl__in_activations){
                                   .L_stage = ts->Ls,
                                   .per_layer = ts->act.layer_kept,
                                   .in_flight = ts->in_flight,
                                   .embeddings = ts->A_embed,
                                   .head = ts->A_head,
                               });
  ts->recompute =
      job->checkpointing == VL_CKPT_FULL ? vl__sub0(ts->act.layer, ts->act.layer_kept) : 0;
}

/* autocast's half copies of the matmul weights */
static void stage_autocast(struct train_stage *ts) {
  const struct vl_arch *arch = ts->arch;
  const struct vl_job *job = ts->job;
  /* autocast keeps a half copy of every fp32 matmul weight it casts; the
   * linear saves it for backward (torch/csrc/autograd autocast_mode.cpp) */
  uint64_t C = 0;
  ts->C_layer = 0;
  if (ts->pol.autocast) {
    /* a tied LM head casts the embedding matrix too. DeepSpeed ZeRO-3
     * casts gathered partitions layer by layer. Under FSDP the cast copies
     * of every layer's gathered weights stay cached and saved for backward
     * after FSDP frees the gathered fp32 weights: the whole model's half
     * copy, as without sharding (measured on 2 H200s: TinyLlama, all 22
     * layers' MLP casts live at the peak, bench/results/
     * parallel-calibration/live-at-peak/fsdp-full-ll.json) */
    const bool tied = arch->causal && arch->tie_embeddings && ts->last;
    C = vl__note_autocast(ts->bill, &ts->ck,
                          job->zero >= 3 && ts->ds ? VL__T_AUTOCAST_DS_ZERO3
                          : tied                   ? VL__T_AUTOCAST_TIED
                                                   : VL__T_AUTOCAST,
                          &(struct vl__in_autocast){
                              .P_matmul = ts->st.linear_elems,
                              .P_layer = ts->st.layer_elems,
                              .V = arch->vocab,
                              .h = arch->embed_proj_dim,
                              .t = job->tp,
                          });
    ts->C_layer = ts->Ls ? C / (ts->Ls + 1) : 0;
  }
  ts->C_ckpt = job->checkpointing == VL_CKPT_FULL ? 0 : C; /* not saved when recomputed */
  /* autocast caches casts of trainable leaves only (cached_cast in
   * autocast_mode.cpp); frozen LoRA bases are cast per use, and kept only
   * when a linear saves the copy for backward, which recomputation avoids */
  ts->C_fwd = job->lora_rank ? ts->C_ckpt : C;
}

/* temporaries: the optimizer step's lists, gathered parameters, QLoRA's
 * dequantized weight */
static void stage_temporaries(struct train_stage *ts) {
  const struct vl_job *job = ts->job;
  ts->sb = job->lora_rank ? 4 : ts->pol.state;
  /* Megatron-LM and DeepSpeed step with fused multi-tensor kernels (apex or
   * Transformer Engine FusedAdam, DeepSpeed FusedAdam): no state-sized lists */
  ts->impl = job->framework == VL_FW_HF ? job->opt_impl : VL_IMPL_FUSED;
  const bool list = ts->impl == VL_IMPL_FOREACH &&
                    (job->optimizer == VL_OPT_ADAM || job->optimizer == VL_OPT_ADAMW ||
                     job->optimizer == VL_OPT_LION || job->optimizer == VL_OPT_ADAFACTOR);
  const bool each = ts->impl == VL_IMPL_FORLOOP && job->optimizer != VL_OPT_SGD;
  struct vl_bill *bill = ts->bill;
  struct vl__ck *ck = &ts->ck;
  ts->T_opt = vl__note_step(
      bill, ck,
      list && job->offload != VL_OFFLOAD_NONE ? VL__T_STEP_HOST
      : list                                  ? VL__T_STEP_LIST
      : each                                  ? VL__T_STEP_FORLOOP
                                              : VL__T_STEP_FUSED,
      &(struct vl__in_step){.largest = ts->st.largest_elems, .P_shard = ts->tr_opt, .s = ts->sb});
  ts->gathered = ts->gathered_bwd = 0;
  if (job->zero >= 3 && ts->ds) { /* DeepSpeed: 4 bytes an element of the largest tensor */
    ts->gathered = ts->gathered_bwd = vl__note_ds_gathered(
        bill, ck, VL__T_DS_GATHERED, &(struct vl__in_ds_gathered){.largest = ts->st.largest_elems});
  } else if (job->zero >= 3) {
    /* FSDP: the current and the prefetched unit, one unit's unsharded
     * gradients in backward, and the root unit (embeddings, final norm,
     * head: what is outside the layers), which FSDP gathers at the
     * forward's start and keeps until its backward ends (measured: its
     * 524,296,192-byte flat parameter live at TinyLlama's peak,
     * bench/results/parallel-calibration/raw.jsonl:live-at-peak/fsdp-full-ll.json) */
    ts->gathered = vl__note_fsdp_gathered(bill, ck, VL__T_FSDP_GATHERED,
                                          &(struct vl__in_fsdp_gathered){
                                              .P_layer = ts->st.layer_elems,
                                              .P = ts->st.weights_elems,
                                              .L_stage = ts->Ls,
                                              .w = ts->pol.weight,
                                          });
    ts->gathered_bwd = vl__note_fsdp_gathered_bwd(
        bill, ck, VL__T_FSDP_GATHERED_BWD,
        &(struct vl__in_fsdp_gathered_bwd){
            .forward = ts->gathered, .P_layer = ts->st.layer_elems, .g = ts->gb});
  } else if (ts->fsdp_grad_op) {
    /* FSDP SHARD_GRAD_OP keeps the sharded fp32 parameters (the optimizer's)
     * and, from each unit's forward until the backward ends, the unit's
     * gathered copy: the whole model once more in forward and backward
     * (measured on 2 H200s: TinyLlama -10.2 % without it, bench/results/
     * parallel-calibration/dp-fsdp/dp.jsonl) */
    ts->gathered = ts->gathered_bwd = vl__note_fsdp_grad_op(
        bill, ck, job->lora_rank ? VL__T_FSDP_GRAD_OP_LORA : VL__T_FSDP_GRAD_OP,
        &(struct vl__in_fsdp_grad_op){.weights = ts->st.weight_bytes, .P_train = ts->tr});
  }
  /* bitsandbytes dequantises a 4-bit weight into the compute dtype before
   * its matmul, one linear at a time: the activations' dtype, 2 B under
   * half and AMP, 4 B under fp32 */
  ts->qlora_tmp = 0;
  if (job->qlora)
    ts->qlora_tmp =
        vl__note_qlora_dequant(bill, ck, VL__T_QLORA_DEQUANT,
                               &(struct vl__in_qlora_dequant){
                                   .largest_linear = ts->st.largest_linear, .act = ts->pol.act});
}

/* communication buffers, CUDA context and cuBLAS workspaces */
static void stage_comm(struct train_stage *ts) {
  const struct vl_job *job = ts->job;
  const struct vl_overheads *ov = ts->ov;
  struct vl_bill *bill = ts->bill;
  struct vl__ck *ck = &ts->ck;
  ts->comm = 0;
  uint64_t ranks = vl__mul3(ck, job->dp, job->tp, job->pp);
  if (ddp_buckets(job)) {
    /* DDP buckets copy every gradient (gradient_as_bucket_view=False) */
    const struct vl__in_ddp_buckets G = {.G = ts->G};
    ts->comm = vl__note_ddp_buckets(bill, ck, VL__T_DDP_BUCKETS, &G);
    /* DDP rebuilds its buckets after the first step; the first ones were
     * the first step's all-reduce inputs, which ProcessGroupNCCL keeps until
     * its watchdog (every 100 ms) has seen them finish and a later
     * collective is enqueued. Seen before the rebuild's broadcast: freed
     * there; not: kept to step 2's first all-reduce, past its peak, which
     * then holds G more (GPT-2 on 2 H200s, 192 trials: 1 - gap / 100 ms;
     * whole jobs 21 of 66 rank peaks:
     * bench/results/ddp-rebuild/). With static_graph=True usually kept (GPT-2 8
     * of 8, Qwen2-0.5B 2 of 4: unseen-sets/ddp-two-peaks): summed then. The bill is
     * the more common outcome, bill->other the other one. */
    uint64_t kept = vl__note_ddp_buckets(
        bill, ck, job->ddp_static_graph ? VL__T_DDP_FIRST_KEPT : VL__T_DDP_FIRST_IF_KEPT, &G);
    if (job->ddp_static_graph) ts->comm = vl__add(ck, ts->comm, kept);
  } else if (ts->dp > 1 && ts->ds && job->zero <= 2) {
    ts->comm = vl__note_zero_bucket(
        bill, ck, VL__T_ZERO_BUCKET,
        &(struct vl__in_zero_bucket){
            .bucket = VL_DS_REDUCE_BUCKET_ELEMS, .P_train = ts->tr, .g = ts->pol.grad});
  } else if (ts->dp > 1 && job->zero >= 1 && !ts->mg) {
    ts->comm = vl__note_fsdp_reduce(
        bill, ck, VL__T_FSDP_REDUCE,
        &(struct vl__in_fsdp_reduce){.P_layer = ts->st.layer_elems, .g = ts->gb});
  }
  ts->ctx = vl__note_context(bill, ck, ranks > 1 ? VL__T_CONTEXT_RANKS : VL__T_CONTEXT,
                             &(struct vl__in_context){
                                 .context = vl_context_bytes(ov, job),
                                 .nccl = ranks > 1 ? ov->nccl_bytes : 0,
                             });
  /* one cuBLAS handle, and its workspace, per thread that runs matmuls
   * (CublasHandlePool.cpp keys them by handle and stream): the forward's
   * and, once a backward ran, autograd's backward thread; both live through
   * every later step (measured: bench/results/probe/unexplained.json). The
   * card's size comes in ov (data/gpus.json through
   * vl_overheads_for_gpu); a separate cuBLASLt workspace (ROCm) is one more
   * a thread */
  const uint64_t lt = ov->cublaslt_workspace_bytes;
  ts->ws = vl__note_workspaces(bill, ck, lt ? VL__T_WORKSPACES_LT : VL__T_WORKSPACES,
                               &(struct vl__in_workspaces){
                                   .threads = vl_workspace_threads(job),
                                   .workspace = ov->cublas_workspace_bytes,
                                   .cublaslt = lt,
                               });
}

/* each phase's lines: forward, backward (its four points), optimizer step */
static void stage_phases(struct train_stage *ts) {
  struct vl__ck *ck = &ts->ck;
  const struct vl_arch *arch = ts->arch;
  const struct vl_job *job = ts->job;
  /* gradients alive through the forward: kept from the last step, or
   * accumulated over micro-batches. Not under GPipe: every micro-batch's
   * forward runs before any backward, so at the end of the forwards (where
   * A holds them all) no gradient of the step exists yet (GPT-2 over 2
   * H200s: both stages' live sets at their peaks hold every micro-batch's
   * activations and no gradient; estimated with them +9.0 / +5.4 %:
   * bench/results/ddp-rebuild/raw.jsonl:pp-histories) */
  const bool gpipe = job->pp > 1 && job->pp_gpipe;
  bool persist = job->grads_persist || (job->grad_accum > 1 && !gpipe);
  memset(ts->ph, 0, sizeof ts->ph);
  for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++) {
    ts->ph[p].line[VL_LINE_PARAMETERS] = ts->W_sharded;
    ts->ph[p].line[VL_LINE_MASTER] = ts->M;
    ts->ph[p].line[VL_LINE_OPTIMIZER] = ts->O;
    ts->ph[p].line[VL_LINE_COMM] = ts->comm;
    ts->ph[p].line[VL_LINE_WORKSPACE] = ts->ws;
    ts->ph[p].line[VL_LINE_CONTEXT] = ts->ctx;
  }
  /* forward: the larger of the loss (all activations) and the top layer */
  struct phase_comp *f = &ts->ph[VL_PH_FORWARD];
  f->line[VL_LINE_GRADIENTS] = persist || job->grads_to_backward ? ts->G : 0;
  f->line[VL_LINE_AUTOCAST] = ts->C_fwd;
  uint64_t at_loss = vl__add(ck, ts->A, ts->act.head_fwd_tmp);
  uint64_t at_layer =
      vl__add(ck, vl__add(ck, vl__sub0(ts->A, ts->A_head), ts->recompute), ts->act.layer_fwd_tmp);
  uint64_t f_tmp = vl__add(ck, ts->gathered, ts->qlora_tmp);
  if (at_loss >= at_layer) {
    f->line[VL_LINE_ACTIVATIONS] = ts->A;
    f->line[VL_LINE_TRANSIENT] = vl__add(ck, ts->act.head_fwd_tmp, f_tmp);
  } else {
    f->line[VL_LINE_ACTIVATIONS] = vl__sub0(ts->A, ts->A_head);
    f->line[VL_LINE_TRANSIENT] =
        vl__add(ck, vl__add(ck, ts->recompute, ts->act.layer_fwd_tmp), f_tmp);
  }
  /* backward: points at the loss, the top layer, the bottom layer, the end */
  struct phase_comp *bw = &ts->ph[VL_PH_BACKWARD];
  uint64_t G0 = persist ? ts->G : 0;
  /* a tied embedding's gradients meet at its AccumulateGrad node: the
   * head's waits in the node's input buffer, the embedding's comes last
   * and the two are summed out of place (torch/csrc/autograd/
   * input_buffer.cpp) before the sum becomes .grad: two more matrices at
   * the end of the backward (Gemma-7B bf16: 2.93 GiB over the gradients,
   * bench/results/unseen-sets/raw.jsonl:unseen3); under autocast of fp32
   * weights the head's arrives through the cast's backward, a tensor
   * nothing else holds, and the embedding's is added into it: one more
   * (Gemma-7B AMP, x-gemma7b-amp-sgd-ckpt-b1s1024) */
  uint64_t tied_sum = 0;
  if (arch->causal && arch->tie_embeddings && ts->first && ts->last && !job->lora_rank &&
      !job->qlora) {
    /* in the weights' dtype: a hook's fp32 main gradient comes after */
    const bool inplace = ts->pol.autocast && ts->pol.weight > ts->pol.act;
    tied_sum = vl__note_tied_grads(
        ts->bill, ck, inplace ? VL__T_TIED_GRADS_INPLACE : VL__T_TIED_GRADS,
        &(struct vl__in_tied_grads){
            .V = arch->vocab, .h = arch->embed_proj_dim, .t = job->tp, .w = ts->pol.weight});
  }
  /* the model output (its logits) lives until the loop drops it */
  uint64_t out_held = ts->last && !job->drop_outputs ? ts->act.logits : 0;
  /* accelerate under autocast: the output's logits converted to fp32 */
  if (job->loop == VL_LOOP_ACCELERATE && ts->pol.autocast && ts->pol.act < 4)
    out_held = out_held / ts->pol.act * 4;
  /* gradients of the tensors outside the layers that the backward meets
   * before the layers: the head and final norm, on the last stage; a
   * pipeline's first stage meets its embeddings only after its layers
   * (GPT-2 GPipe stage 0 +4.8 % with them at the top layer, +0.3 % without:
   * bench/results/ddp-rebuild/raw.jsonl:pp-histories) */
  const uint64_t G_top = ts->last ? ts->G_head : 0;
  struct {
    uint64_t act, cast, grads, tmp;
  } pts[4] = {
      {vl__sub0(ts->A, ts->last && job->drop_outputs ? ts->act.logits : 0), ts->C_ckpt, G0,
       ts->act.loss_bwd_tmp},
      {vl__sub0(ts->A, ts->A_head), ts->C_ckpt, vl__max(G0, vl__add(ck, G_top, ts->G_layer)),
       vl__add(ck, ts->recompute, ts->act.layer_bwd_tmp)},
      {vl__add(ck, ts->A_embed, vl__mul(ck, ts->act.layer_kept, ts->in_flight)),
       job->checkpointing == VL_CKPT_FULL ? 0 : ts->C_layer,
       vl__max(G0, vl__add(ck, G_top, vl__mul(ck, ts->G_layer, ts->Ls))),
       vl__add(ck, ts->recompute, ts->act.layer_bwd_tmp)},
      {vl__add(ck, ts->A_embed, out_held), 0, ts->G, tied_sum},
  };
  uint64_t best = 0;
  ts->bwd_live = 0; /* lines present at any point of the backward */
  for (int i = 0; i < 4; i++) {
    uint64_t tmp = vl__add(ck, pts[i].tmp, vl__add(ck, ts->gathered_bwd, ts->qlora_tmp));
    uint64_t live =
        vl__add(ck, vl__add(ck, pts[i].act, pts[i].cast), vl__add(ck, pts[i].grads, tmp));
    if (pts[i].act) ts->bwd_live |= 1u << VL_LINE_ACTIVATIONS;
    if (pts[i].cast) ts->bwd_live |= 1u << VL_LINE_AUTOCAST;
    if (pts[i].grads) ts->bwd_live |= 1u << VL_LINE_GRADIENTS;
    if (tmp) ts->bwd_live |= 1u << VL_LINE_TRANSIENT;
    if (i == 0 || live > best) {
      best = live;
      bw->line[VL_LINE_ACTIVATIONS] = pts[i].act;
      bw->line[VL_LINE_AUTOCAST] = pts[i].cast;
      bw->line[VL_LINE_GRADIENTS] = pts[i].grads;
      bw->line[VL_LINE_TRANSIENT] = tmp;
    }
  }
  /* optimizer step: a plain loop (`out = model(...)`) still holds the model
   * output with its logits (measured: data/reference/h200-torch-2.11/calibration.json) */
  struct phase_comp *op = &ts->ph[VL_PH_OPTIMIZER];
  op->line[VL_LINE_GRADIENTS] = ts->G;
  op->line[VL_LINE_TRANSIENT] = ts->T_opt;
  op->line[VL_LINE_ACTIVATIONS] = job->drop_outputs || !ts->last ? 0 : ts->act.logits;
  /* Megatron's 5 % temporaries ride on the activations */
  if (ts->act.misc_fraction > 0) {
    uint64_t misc =
        vl__note_misc(ts->bill, ck, VL__T_MISC,
                      &(struct vl__in_misc){.activations = ts->A, .f = ts->act.misc_fraction});
    f->line[VL_LINE_TRANSIENT] = vl__add(ck, f->line[VL_LINE_TRANSIENT], misc);
  }
}

/* the training replay, where it applies */
static vl_status stage_replay(struct train_stage *ts, struct vl_err *err) {
  struct vl__ck *ck = &ts->ck;
  const struct vl_arch *arch = ts->arch;
  const struct vl_inventory *inv = ts->inv;
  const struct vl_job *job = ts->job;
  const struct vl_overheads *ov = ts->ov;
  const struct lora *lo = ts->lo;
  struct vl_bill *bill = ts->bill;
  /* allocator: for one GPU (or each of DDP's and ZeRO-1's), transformers'
   * modules and full training the loop's allocations replayed through the
   * allocator model (train_replay.c); elsewhere the persistent tensors'
   * rounding + churn among the rest */
  ts->expandable = job->allocator == VL_ALLOC_EXPANDABLE;
  ts->churn_frac = ts->expandable ? ov->allocator_churn_expandable : ov->allocator_churn;
  /* the replay gives LoRA adapters to at most VL__MAX_LAYER_LINEARS
   * linears a layer: a layer with more takes the analytic path whole
   * rather than a replay that leaves some without their adapters */
  unsigned layer_linears = 0;
  for (int i = 0; i < inv->n; i++)
    if (inv->t[i].kind == VL_T_LINEAR && inv->t[i].per_layer) layer_linears++;
  /* several GPUs: DDP and ZeRO-1 (DDP with a ZeroRedundancyOptimizer),
   * their buckets and rank 0's share of the states replayed; not with LoRA
   * or a master copy (not measured) */
  const bool ddp_replay = ts->dp > 1 && ddp_buckets(job) && !job->lora_rank && !ts->pol.master;
  /* T5 and BART: full training or LoRA, with or without checkpointing
   * (train_replay_seq2seq.c; T5 under SDPA: its math path) */
  const bool seq2seq_replayed = arch->enc_layers;
  /* an encoder with LoRA, whose frozen linears save no input: Python's
   * references keep its tensors (train_replay_encoder.c); within 0.7 % of
   * the dry runs' peak allocated on meta tensors (BERT, RoBERTa, DistilBERT,
   * ModernBERT; bench/results/dry-run/estimate-vs-dry-run.txt); DeBERTa-v3
   * where its attention is train_replay_deberta.c's (query_proj's and
   * key_proj's adapters on the relative embeddings too; share_att_key, not
   * under autocast: vl__tr_deberta_replayed); not ViT */
  const bool deberta_lora = !arch->rel_pos_proj && !ts->pol.autocast;
  const bool encoder_lora =
      arch->family != VL_FAM_VIT && (arch->family != VL_FAM_DEBERTA_V2 || deberta_lora);
  /* a job whose analytic peak is past VL_EXACT_MAX is refused by every
   * renderer: a replay of its layers (ten thousand, in
   * tests/data/configs/huge-llama.json) would cost a second for nothing */
  uint64_t analytic = 0;
  for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++)
    analytic = vl__max(analytic, comp_alloc(&ts->ph[p]));
  ts->replayable =
      !ck->overflow && analytic <= VL_EXACT_MAX &&
      (arch->causal || (vl_arch_replays_encoder(arch) && (!job->lora_rank || encoder_lora)) ||
       seq2seq_replayed ||
       (arch->family == VL_FAM_RESNET && !job->lora_rank && job->checkpointing == VL_CKPT_NONE)) &&
      !ts->mg && !ts->ds && (ts->dp == 1 || ddp_replay) && job->tp == 1 &&
      !(job->lora_rank && layer_linears > VL__MAX_LAYER_LINEARS) && job->pp == 1 &&
      (job->zero == 0 || ddp_replay) && job->offload == VL_OFFLOAD_NONE && !job->qlora &&
      !(job->lora_rank && (ts->pol.master || (arch->experts && ts->pol.autocast))) &&
      (job->grad_accum <= 1 || (ts->dp == 1 && job->loop == VL_LOOP_PLAIN)) &&
      !job->grads_persist && job->optimizer != VL_OPT_ADAM8BIT && !job->analytic_only;
  if (arch->family == VL_FAM_RESNET && !ts->replayable)
    bill->approximate = "is replayed for full training without checkpointing only; this "
                        "job's activations are not modelled";
  /* DeBERTa-v2 and ViT with LoRA: not replayed (above) */
  if (arch->family == VL_FAM_VIT && job->lora_rank && !ts->replayable)
    bill->approximate = "is replayed for full training only; with LoRA its activations are "
                        "read analytically";
  if (arch->family == VL_FAM_DEBERTA_V2 && job->lora_rank && !ts->replayable)
    bill->approximate = "is replayed with LoRA in fp32 and half precision only (DeBERTa-v3); "
                        "under autocast or with pos_key_proj its activations are read "
                        "analytically, which was 12 to 20 % above the dry run's peak allocated "
                        "on meta tensors in bf16 (deberta-v3-base, 8 x 128 to 16 x 512; "
                        "--dry-run traces the job itself)";
  if (arch->enc_layers && !ts->replayable)
    bill->approximate = "is replayed op by op for one GPU's loop; this job's activations are "
                        "read as an encoder's of the decoder's depth";
  /* replayed, with the gaps the dry runs on meta tensors measured
   * (bench/results/shapes-vision-seq2seq/) */
  if (arch->family == VL_FAM_RESNET && ts->replayable)
    bill->approximate =
        "is replayed op by op, cuDNN's convolution workspaces as measured for ResNet-50's "
        "shapes (data/reference/h100-torch-2.11/conv-workspace.json), other shapes' at the "
        "median for their kernel and stride: resnet-50's peak reserved within 0.6 % of six "
        "runs at 16 to 64 images of 64 to 512 pixels on an H100 and an H200, but 4.1 % under "
        "at 16 x 224 (bench/results/reserved/)";
  if (ts->replayable) {
    struct vl__train_sizes z = {
        .B = job->batch,
        .P = job->seq,
        .T = job->batch * job->seq,
        .Pd = vl_job_target_seq(arch, job),
        .side = job->image_size,
        .h = arch->hidden,
        .I = arch->intermediate,
        .V = arch->family == VL_FAM_VIT || arch->family == VL_FAM_RESNET ? arch->labels
                                                                         : arch->vocab,
        .wb = ts->pol.weight,
        .gb = ts->gb,
        .mb = ts->pol.master,
        .sb = ts->sb,
        .states = full_states(job->optimizer),
        .impl = ts->impl,
        .step_temp = ts->T_opt > 0,
        .autocast = ts->pol.autocast,
        .ckpt = job->checkpointing == VL_CKPT_FULL,
        .eager = job->attention == VL_ATTN_EAGER,
        .e = ts->pol.act,
        .r = ts->pol.resid,
        .workspace = vl_workspace_thread_bytes(ov),
        .sms = ov->sm_count,
        .tps = ov->threads_per_sm,
        .expandable = ts->expandable,
        .lora_rank = job->lora_rank,
        .ab = VL__ADAPTER_BYTES,
        .ddp = ddp_replay,
        .ddp_kept = ddp_replay && job->ddp_static_graph,
        .drop_outputs = job->drop_outputs,
        .grads_late = job->grads_to_backward,
        .accum = job->grad_accum,
        .outputs_fp32 = job->loop == VL_LOOP_ACCELERATE && !job->drop_outputs,
        .zero1_ranks = ddp_replay && job->zero == 1 ? ts->dp : 0,
    };
    for (int i = 0; i < inv->n && job->lora_rank; i++) {
      const struct vl_tensor *t = &inv->t[i];
      if (t->kind != VL_T_LINEAR || !t->per_layer) continue;
      z.lin[z.n_lin].name = t->name;
      z.lin[z.n_lin].out = t->rows;
      z.lin[z.n_lin].in = t->cols;
      z.lin[z.n_lin].count = t->count;
      z.lin[z.n_lin++].adapted = lo->target[i];
    }
    vl_status rc = vl__train_replay(arch, inv, &z, &ts->rs, err);
    if (rc != VL_OK) return rc;
  }
  return VL_OK;
}

/* the analytic reserve of phase p: a churn fraction of what comes and
 * goes, and the persistent tensors' segment rounding */
static void reserve_def(struct train_stage *ts, int p, struct vl__in_reserve *d) {
  const struct vl_job *job = ts->job;
  const uint64_t *line = ts->ph[p].line;
  /* weights' rounding, and the same for gradients and each fp32 copy of
   * the trained weights when they are present */
  uint64_t seg_waste = job->zero >= 3 ? vl__div_ceil(ts->st.seg_waste, ts->dp) : ts->st.seg_waste;
  if (!job->lora_rank && line[VL_LINE_GRADIENTS]) seg_waste = vl__mul(&ts->ck, seg_waste, 2);
  if (ts->expandable) seg_waste = 0; /* pages are mapped as needed: no per-segment rounding */
  *d = (struct vl__in_reserve){
      .churn = ts->churn_frac,
      .activations = line[VL_LINE_ACTIVATIONS],
      .temporaries = line[VL_LINE_TRANSIENT],
      .autocast = line[VL_LINE_AUTOCAST],
      .rounding = seg_waste,
  };
}

/* the allocator reserve of each phase and the peak phase */
static void stage_reserve(struct train_stage *ts) {
  struct vl__ck *ck = &ts->ck;
  const struct vl__in_replay_reserve replayed = {
      .replay_reserved = ts->rs.peak_reserved,
      .replay_allocated = ts->rs.peak_allocated,
  };
  const uint64_t replay_reserve = vl__value_replay_reserve(ck, VL__T_REPLAY_RESERVE, &replayed);
  ts->peak = VL_PH_FORWARD;
  for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++) {
    struct vl__in_reserve d;
    if (!ts->replayable) reserve_def(ts, p, &d);
    ts->ph[p].line[VL_LINE_RESERVE] =
        ts->replayable ? replay_reserve : vl__value_reserve(ck, VL__T_RESERVE, &d);
    if (comp_alloc(&ts->ph[p]) > comp_alloc(&ts->ph[ts->peak])) ts->peak = (enum vl_phase)p;
  }
  if (ts->replayable && ts->rs.peak_allocated) {
    /* the replay writes each layer op by op and keeps what autograd keeps:
     * its peak allocated is the estimate's (within median 0.1 %, worst
     * 4.3 %, of 139 measured training runs; the lines above 0.7 % and
     * 7.6 %: bench/results/replay-histories/raw.jsonl:replay-vs-bill-
     * allocated.txt). The difference goes to the peak phase's activations
     * (then its temporaries), and no phase stays above it. */
    const uint64_t analytic = comp_alloc(&ts->ph[ts->peak]), want = ts->rs.peak_allocated;
    static const enum vl_line trim[] = {VL_LINE_ACTIVATIONS, VL_LINE_TRANSIENT};
    for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++) {
      uint64_t have = comp_alloc(&ts->ph[p]);
      if (p == (int)ts->peak && want > have) ts->ph[p].line[VL_LINE_ACTIVATIONS] += want - have;
      for (size_t k = 0; k < sizeof trim / sizeof trim[0] && have > want; k++) {
        uint64_t cut = vl__min(have - want, ts->ph[p].line[trim[k]]);
        ts->ph[p].line[trim[k]] -= cut;
        have -= cut;
      }
    }
    const bool above = want >= analytic;
    vl__note_replay_gap(
        ts->bill, ck, above ? VL__T_REPLAY_ABOVE : VL__T_REPLAY_BELOW,
        &(struct vl__in_replay_gap){.replay_allocated = want, .analytic = analytic});
  }
  if (ts->replayable) {
    vl__note_replay_reserve(ts->bill, ck, VL__T_REPLAY_RESERVE, &replayed);
  } else {
    struct vl__in_reserve d;
    reserve_def(ts, ts->peak, &d);
    vl__note_reserve(ts->bill, ck, VL__T_RESERVE, &d);
  }
}

/* the bill from the peak phase's lines */
static vl_status stage_finish(struct train_stage *ts, struct vl_err *err) {
  struct vl__ck *ck = &ts->ck;
  const struct vl_job *job = ts->job;
  struct vl_bill *bill = ts->bill;
  if (ck->overflow)
    return vl__fail(err, VL_EOVERFLOW,
                    "the bill overflows 64 bits (batch %llu x seq %llu is too large to model)",
                    (unsigned long long)job->batch, (unsigned long long)job->seq);

  memset(bill->lines, 0, sizeof bill->lines);
  memset(bill->line_max, 0, sizeof bill->line_max);
  memset(bill->live, 0, sizeof bill->live);
  for (int p = VL_PH_FORWARD; p <= VL_PH_OPTIMIZER; p++) {
    bill->phase_peak[p] = comp_alloc(&ts->ph[p]);
    for (int l = 0; l < VL_LINE_COUNT; l++) {
      if (ts->ph[p].line[l] || (p == VL_PH_BACKWARD && (ts->bwd_live >> l & 1u)))
        bill->live[l] |= 1u << p;
      bill->line_max[l] = vl__max(bill->line_max[l], ts->ph[p].line[l]);
    }
  }
  memcpy(bill->lines, ts->ph[ts->peak].line, sizeof bill->lines);
  bill->peak_phase = ts->peak;
  bill->peak_allocated_bytes = comp_alloc(&ts->ph[ts->peak]);
  bill->peak_reserved_bytes = bill->peak_allocated_bytes + ts->ph[ts->peak].line[VL_LINE_RESERVE];
  bill->cuda_context_bytes = ts->ctx;
  bill->total_bytes = bill->peak_reserved_bytes + ts->ctx;
  bill->host_bytes = ts->host;
  bill->params_per_gpu = vl__div_ceil(ts->st.weights_elems, ts->w_shard);
  bill->tokens = job->batch * job->seq;
  bill->pp_stage = ts->stage;
  return VL_OK;
}

/* Bill of one pipeline stage. */
static vl_status train_stage(const struct vl_arch *arch, const struct vl_inventory *inv,
                             const struct vl_job *job, const struct vl_overheads *ov,
                             const struct lora *lo, uint64_t stage, struct vl_bill *bill,
                             struct vl_err *err) {
  struct train_stage ts = {
      .arch = arch, .inv = inv, .job = job, .ov = ov, .lo = lo, .bill = bill, .stage = stage};
  vl__policy_get(job->precision, &ts.pol);
  ts.first = stage == 0;
  ts.last = stage == job->pp - 1;
  ts.Ls = vl__div_ceil(arch->layers, job->pp);
  ts.dp = job->dp;
  ts.ds = job->framework == VL_FW_DEEPSPEED;
  ts.mg = job->framework == VL_FW_MEGATRON;
  ts.mixed = ts.pol.master != 0;
  model_states(arch, inv, job, lo, &ts.pol, ts.Ls, ts.first, ts.last, &ts.ck, &ts.st);
  stage_states(&ts);
  stage_activations(&ts);
  stage_autocast(&ts);
  stage_temporaries(&ts);
  stage_comm(&ts);
  stage_phases(&ts);
  vl_status rc = stage_replay(&ts, err);
  if (rc != VL_OK) return rc;
  stage_reserve(&ts);
  return stage_finish(&ts, err);
}

/* a training bill: one stage, or for a pipeline whichever of the first
 * (micro-batches in flight) and the last (the LM head and logits) needs
 * more */
/* A bill emptied: everything before its terms (n_terms 0); the terms are
 * written whole as they are recorded (terms.c), so the 96 slots (52 KiB)
 * are not cleared each time: a plan estimates 10^5 jobs, some twice. */
static void bill_clear(struct vl_bill *b) { memset(b, 0, offsetof(struct vl_bill, terms)); }

/* *dst = *src, the terms recorded only */
static void bill_copy(struct vl_bill *dst, const struct vl_bill *src) {
  memcpy(dst, src, offsetof(struct vl_bill, terms) + (size_t)src->n_terms * sizeof src->terms[0]);
}

static vl_status train_bill(const struct vl_arch *arch, const struct vl_inventory *inv,
                            const struct vl_job *job, const struct vl_overheads *ov,
                            const struct lora *lo, struct vl_bill *bill, struct vl_err *err) {
  vl_status s = train_stage(arch, inv, job, ov, lo, 0, bill, err);
  if (s != VL_OK || job->pp == 1) return s;
  struct vl_bill last;
  bill_clear(&last);
  last.task = bill->task;
  last.params = bill->params;
  last.trainable_params = bill->trainable_params;
  s = train_stage(arch, inv, job, ov, lo, job->pp - 1, &last, err);
  if (s != VL_OK) return s;
  const struct vl_bill_stage first_stage = {bill->peak_allocated_bytes, bill->peak_reserved_bytes,
                                            bill->total_bytes},
                             last_stage = {last.peak_allocated_bytes, last.peak_reserved_bytes,
                                           last.total_bytes};
  if (last.total_bytes > bill->total_bytes) bill_copy(bill, &last);
  bill->pp_first = first_stage;
  bill->pp_last = last_stage;
  return VL_OK;
}

void vl_job_lora_targets(const struct vl_job *j, char *buf, size_t n) {
  if (!n) return;
  buf[0] = '\0';
  size_t o = 0;
  for (int i = 0; i < j->n_lora_targets; i++) {
    int w = snprintf(buf + o, n - o, "%s%s", i ? "," : "", j->lora_targets[i]);
    if (w < 0 || (size_t)w >= n - o) break;
    o += (size_t)w;
  }
}

void vl_job_apply_loop(const struct vl_job *in, struct vl_job *out) {
  *out = *in;
  if (in->task != VL_TASK_TRAIN) return;
  /* what the loop keeps alive. HF Trainer: training_step keeps only the
   * loss; its default optimizer is fused AdamW (TrainingArguments optim
   * adamw_torch_fused); clip_grad_norm_ (max_grad_norm 1.0) scales the
   * gradients in place. Lightning's automatic optimization: training_step
   * returns the loss, and its closure zeroes the gradients after the
   * forward, just before the backward, so the last step's live through the
   * forward. accelerate: accelerator.backward as a plain loop, the output's
   * logits converted to fp32 under mixed precision (the replay and the
   * lines). Measured: bench/results/loops/. */
  out->drop_outputs =
      in->drop_outputs || in->loop == VL_LOOP_TRAINER || in->loop == VL_LOOP_LIGHTNING;
  if (in->loop == VL_LOOP_TRAINER && !in->opt_impl_given &&
      (in->optimizer == VL_OPT_ADAMW || in->optimizer == VL_OPT_ADAM))
    out->opt_impl = VL_IMPL_FUSED;
  out->grads_to_backward = in->loop == VL_LOOP_LIGHTNING;
}

/* The job as it is billed (*vj): the loop's defaults, a vision model's
 * tokens, a seq2seq decoder's length, attention sinks run eagerly. */
bool vl_arch_eager_only(const struct vl_arch *arch) { return arch->eager_only; }

static const struct vl_job *billed_job(const struct vl_arch *arch, const struct vl_job *job,
                                       struct vl_job *vj) {
  *vj = *job;
  if (job->loop != VL_LOOP_PLAIN && job->task == VL_TASK_TRAIN) {
    vl_job_apply_loop(job, vj);
    job = vj;
  }
  /* a vision model's input is its image, side x side pixels (--image-size,
   * else the config's image_size); a ViT's tokens are its patches and the
   * [CLS] token (modeling_vit.py ViTEmbeddings; another side than the
   * config's interpolates the position embeddings:
   * interpolate_pos_encoding); a ResNet's one row a sample */
  if (vl_arch_is_vision(arch)) {
    vj->image_size = vl_job_image_side(arch, job);
    if (arch->family == VL_FAM_VIT && arch->patch_size) {
      uint64_t side = vj->image_size / arch->patch_size;
      vj->seq = side * side + 1;
    }
    job = vj;
  }
  if (vl_arch_is_seq2seq(arch)) { /* the decoder's tokens: --target-seq, else --seq */
    vj->target_seq = vl_job_target_seq(arch, job);
    job = vj;
  }
  /* a type transformers has no SDPA path for runs eagerly, whatever was
   * asked (from_pretrained picks "eager"): attention sinks
   * (modeling_gpt_oss.py GptOssPreTrainedModel: _supports_sdpa = False) and
   * DeBERTa-v2's disentangled attention (modeling_deberta_v2.py: no
   * _supports_sdpa, PreTrainedModel's False) */
  if (vl_arch_eager_only(arch) && job->attention != VL_ATTN_EAGER) {
    vj->attention = VL_ATTN_EAGER;
    job = vj;
  }
  return job;
}

vl_status vl_bill_check(const struct vl_arch *arch, const struct vl_job *job, struct vl_err *err) {
  struct vl_job vj;
  struct vl_inventory inv;
  job = billed_job(arch, job, &vj);
  vl_status s = check_job(arch, job, err);
  if (s == VL_OK) s = vl_inventory_build(arch, &inv, err);
  if (s != VL_OK) return s;
  if (job->task == VL_TASK_INFER) return vl__infer_check(arch, job, err);
  struct lora lo;
  return resolve_lora(arch, &inv, job, &lo, err);
}

vl_status vl_bill_compute(const struct vl_arch *arch, const struct vl_job *job,
                          const struct vl_overheads *ov, struct vl_bill *bill, struct vl_err *err) {
  bill_clear(bill);
  bill->task = job->task;
  struct vl_job vj;
  job = billed_job(arch, job, &vj);
  vl_status s = check_job(arch, job, err);
  if (s != VL_OK) return s;
  struct vl_inventory inv;
  s = vl_inventory_build(arch, &inv, err);
  if (s != VL_OK) return s;
  bill->params = inv.total;
  if (job->task == VL_TASK_INFER) return vl__bill_infer(arch, &inv, job, ov, bill, err);
  struct lora lo;
  s = resolve_lora(arch, &inv, job, &lo, err);
  if (s != VL_OK) return s;
  bill->trainable_params = job->lora_rank ? lo.params : inv.total;
  s = train_bill(arch, &inv, job, ov, &lo, bill, err);
  if (s != VL_OK || !ddp_buckets(job)) return s;
  /* DDP's rebuild has two outcomes: the first buckets freed there, or kept
   * into step 2 (the bill counts them with static_graph=True, where that is
   * the usual outcome); the other one goes to bill->other */
  struct vl_job flip = *job;
  flip.ddp_static_graph = !job->ddp_static_graph;
  struct vl_bill *w = vl_malloc(sizeof *w);
  if (!w) return vl__fail(err, VL_ENOMEM, "out of memory");
  bill_clear(w);
  w->task = bill->task;
  w->params = bill->params;
  w->trainable_params = bill->trainable_params;
  s = train_bill(arch, &inv, &flip, ov, &lo, w, err);
  if (s == VL_OK)
    bill->other = (struct vl_bill_other){
        .peak_allocated_bytes = w->peak_allocated_bytes,
        .peak_reserved_bytes = w->peak_reserved_bytes,
        .total_bytes = w->total_bytes,
        .why = job->ddp_static_graph
                   ? "DDP's first buckets freed at the rebuild: NCCL's watchdog (100 ms) had "
                     "released them"
                   : "DDP's first buckets kept into step 2: NCCL's watchdog (100 ms) had not "
                     "yet released them",
    };
  vl_free(w);
  return s;
}

uint64_t vl_bill_budget_bytes(const struct vl_bill *bill) {
  return vl__max(bill->total_bytes, bill->other.total_bytes);
}
