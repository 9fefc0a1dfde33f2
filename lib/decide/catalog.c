/* GPU catalog reader. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/catalog.h"

static vl_status copy_name(char *dst, json_t *v, size_t i, const char *key, struct vl_err *err) {
  if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= VL_GPU_NAME)
    return vl__fail(err, VL_EKEY, "gpus[%zu].%s: expected a name of 1 to %d characters", i, key,
                    VL_GPU_NAME - 1);
  snprintf(dst, VL_GPU_NAME, "%s", json_string_value(v));
  return VL_OK;
}

/* Native bf16 from a compute capability: CUDA 8.0 (Ampere) and later, as
 * torch.cuda.is_bf16_supported(including_emulation=False) checks; AMD's
 * CDNA targets (MI100 gfx908 on: ROCm's GPU hardware specifications).
 * -1 when the capability is not known. */
static int bf16_from_capability(const char *cc) {
  if (!*cc) return -1;
  if (!strncmp(cc, "gfx", 3)) {
    static const char *const cdna[] = {"gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"};
    for (size_t i = 0; i < sizeof cdna / sizeof *cdna; i++)
      if (!strcmp(cc, cdna[i])) return 1;
    return -1; /* another AMD target: say so with "bf16" */
  }
  char *end;
  long major = strtol(cc, &end, 10);
  if (end == cc || (*end && *end != '.')) return -1;
  return major >= 8;
}

/* An optional count of the card, such as "sm_count": 0 when absent. */
static vl_status parse_count(json_t *g, const char *key, size_t i, unsigned *out,
                             struct vl_err *err) {
  json_t *v = json_object_get(g, key);
  if (v && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536))
    return vl__fail(err, VL_EKEY, "gpus[%zu].%s: expected a whole number, 1 to 65536", i, key);
  *out = v ? (unsigned)json_integer_value(v) : 0;
  return VL_OK;
}

/* An optional number of the card, such as "bf16_tflops": def when absent
 * (or null); a string or a boolean is refused, never read as def. */
static vl_status parse_num(json_t *g, const char *key, size_t i, double def, double *out,
                           struct vl_err *err) {
  json_t *v = json_object_get(g, key);
  *out = def;
  if (!v || json_is_null(v)) return VL_OK;
  if (!json_is_number(v)) return vl__fail(err, VL_EKEY, "gpus[%zu].%s: expected a number", i, key);
  *out = json_number_value(v);
  return VL_OK;
}

/* The card's throughputs and price: numbers when given. */
static vl_status parse_rates(json_t *g, size_t i, struct vl_gpu *out, struct vl_err *err) {
  vl_status s;
  if ((s = parse_num(g, "bf16_tflops", i, 0.0, &out->bf16_tflops, err)) ||
      (s = parse_num(g, "fp16_tflops", i, out->bf16_tflops, &out->fp16_tflops, err)) ||
      (s = parse_num(g, "fp32_tflops", i, 0.0, &out->fp32_tflops, err)) ||
      (s = parse_num(g, "fp8_tflops", i, 0.0, &out->fp8_tflops, err)) ||
      (s = parse_num(g, "hbm_gb_s", i, 0.0, &out->hbm_gb_s, err)) ||
      (s = parse_num(g, "interconnect_gb_s", i, 0.0, &out->link_gb_s, err)) ||
      (s = parse_num(g, "usd_per_hour", i, 0.0, &out->usd_per_hour, err)))
    return s;
  const char *strs[] = {"label", "interconnect"};
  for (size_t k = 0; k < 2; k++) {
    json_t *v = json_object_get(g, strs[k]);
    if (v && !json_is_null(v) && !json_is_string(v))
      return vl__fail(err, VL_EKEY, "gpus[%zu].%s: expected a string", i, strs[k]);
  }
  return VL_OK;
}

static vl_status parse_gpu(json_t *g, size_t i, struct vl_gpu *out, struct vl_err *err) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(g)) return vl__fail(err, VL_EKEY, "gpus[%zu]: expected an object", i);
  vl_status s = copy_name(out->name, json_object_get(g, "name"), i, "name", err);
  if (s != VL_OK) return s;
  json_t *al = json_object_get(g, "aliases");
  if (al && !json_is_array(al))
    return vl__fail(err, VL_EKEY, "gpus[%zu].aliases: expected an array of names", i);
  size_t k;
  json_t *v;
  json_array_foreach(al, k, v) {
    if (k >= VL_GPU_ALIASES)
      return vl__fail(err, VL_ERANGE, "gpus[%zu].aliases: at most %d", i, VL_GPU_ALIASES);
    s = copy_name(out->aliases[k], v, i, "aliases", err);
    if (s != VL_OK) return s;
    out->n_aliases = (int)k + 1;
  }
  json_t *label = json_object_get(g, "label");
  if (json_is_string(label))
    snprintf(out->label, sizeof out->label, "%s", json_string_value(label));
  json_t *mem = json_object_get(g, "memory_bytes");
  if (!json_is_integer(mem) || json_integer_value(mem) < (1ll << 30) ||
      json_integer_value(mem) > (1ll << 44))
    return vl__fail(err, VL_EKEY,
                    "gpus[%zu].memory_bytes: expected an integer between 1 GiB "
                    "and 16 TiB",
                    i);
  out->memory_bytes = (uint64_t)json_integer_value(mem);
  if ((s = parse_rates(g, i, out, err)) != VL_OK) return s;
  json_t *cc = json_object_get(g, "compute_capability"), *b16 = json_object_get(g, "bf16");
  if (cc && (!json_is_string(cc) || json_string_length(cc) >= sizeof out->compute_capability))
    return vl__fail(err, VL_EKEY,
                    "gpus[%zu].compute_capability: expected a string such as \"8.0\" or "
                    "\"gfx942\"",
                    i);
  if (cc)
    snprintf(out->compute_capability, sizeof out->compute_capability, "%s", json_string_value(cc));
  if (b16 && !json_is_boolean(b16))
    return vl__fail(err, VL_EKEY, "gpus[%zu].bf16: expected true or false", i);
  out->no_bf16 = b16 ? json_is_false(b16) : bf16_from_capability(out->compute_capability) == 0;
  json_t *ic = json_object_get(g, "interconnect");
  if (json_is_string(ic))
    snprintf(out->interconnect, sizeof out->interconnect, "%s", json_string_value(ic));
  json_t *ws = json_object_get(g, "cublas_workspace_bytes"),
         *ctx = json_object_get(g, "cuda_context");
  if (ws &&
      (!json_is_integer(ws) || json_integer_value(ws) < 0 || json_integer_value(ws) > (1ll << 34)))
    return vl__fail(err, VL_EKEY, "gpus[%zu].cublas_workspace_bytes: expected bytes, 0 to 16 GiB",
                    i);
  out->cublas_workspace_bytes = ws ? (uint64_t)json_integer_value(ws) : 0;
  json_t *lt = json_object_get(g, "cublaslt_workspace_bytes");
  if (lt &&
      (!json_is_integer(lt) || json_integer_value(lt) < 0 || json_integer_value(lt) > (1ll << 34)))
    return vl__fail(err, VL_EKEY, "gpus[%zu].cublaslt_workspace_bytes: expected bytes, 0 to 16 GiB",
                    i);
  out->cublaslt_workspace_bytes = lt ? (uint64_t)json_integer_value(lt) : 0;
  if (ctx && !json_is_string(ctx))
    return vl__fail(err, VL_EKEY,
                    "gpus[%zu].cuda_context: expected \"measured\" or \"measured on H200 only\"",
                    i);
  out->context_measured = ctx && !strcmp(json_string_value(ctx), "measured");
  if ((s = parse_count(g, "sm_count", i, &out->sm_count, err)) != VL_OK ||
      (s = parse_count(g, "max_threads_per_sm", i, &out->max_threads_per_sm, err)) != VL_OK)
    return s;
  if (out->bf16_tflops < 0 || out->fp16_tflops < 0 || out->fp32_tflops < 0 || out->fp8_tflops < 0 ||
      out->hbm_gb_s < 0 || out->link_gb_s < 0 || out->usd_per_hour < 0)
    return vl__fail(err, VL_ERANGE, "gpus[%zu]: negative throughput", i);
  return VL_OK;
}

vl_status vl_catalog_parse(const char *text, size_t len, struct vl_catalog *cat,
                           struct vl_err *err) {
  memset(cat, 0, sizeof *cat);
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
  vl_status s = VL_OK;
  json_t *gpus = json_object_get(root, "gpus");
  if (!json_is_array(gpus) || json_array_size(gpus) == 0 || json_array_size(gpus) > 4096) {
    s = vl__fail(err, VL_EKEY, "expected a non-empty array 'gpus'");
    goto done;
  }
  json_t *date = json_object_get(root, "date");
  if (json_is_string(date)) snprintf(cat->date, sizeof cat->date, "%s", json_string_value(date));
  json_t *pd = json_object_get(root, "prices_date");
  if (json_is_string(pd))
    snprintf(cat->prices_date, sizeof cat->prices_date, "%s", json_string_value(pd));
  cat->gpus = vl_calloc(json_array_size(gpus), sizeof *cat->gpus);
  if (!cat->gpus) {
    s = vl__fail(err, VL_ENOMEM, "out of memory reading the catalog");
    goto done;
  }
  size_t i;
  json_t *g;
  json_array_foreach(gpus, i, g) {
    s = parse_gpu(g, i, &cat->gpus[i], err);
    if (s != VL_OK) break;
    cat->n = i + 1;
  }
  if (s != VL_OK) vl_catalog_release(cat);
done:
  json_decref(root);
  return s;
}

void vl_catalog_release(struct vl_catalog *cat) {
  if (!cat) return;
  vl_free(cat->gpus);
  cat->gpus = NULL;
  cat->n = 0;
}

const struct vl_gpu *vl_catalog_find(const struct vl_catalog *cat, const char *name) {
  for (size_t i = 0; i < cat->n; i++) {
    const struct vl_gpu *g = &cat->gpus[i];
    if (strcasecmp(g->name, name) == 0) return g;
    for (int k = 0; k < g->n_aliases; k++)
      if (strcasecmp(g->aliases[k], name) == 0) return g;
  }
  return NULL;
}

const struct vl_gpu *vl_catalog_match_device(const struct vl_catalog *cat, const char *device) {
  /* "NVIDIA H100 80GB HBM3" -> tokens h100, 80gb, hbm3; try every run of
   * consecutive tokens joined by '-', longest first */
  char tok[8][32];
  int n = 0;
  const char *p = device;
  while (*p && n < 8) {
    while (*p == ' ' || *p == '-' || *p == '_')
      p++;
    size_t k = 0;
    while (*p && *p != ' ' && *p != '-' && *p != '_') {
      if (k + 1 < sizeof tok[0]) tok[n][k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
      p++;
    }
    tok[n][k] = '\0';
    if (k && strcmp(tok[n], "nvidia") && strcmp(tok[n], "geforce") && strcmp(tok[n], "tesla") &&
        strcmp(tok[n], "amd") && strcmp(tok[n], "instinct"))
      n++;
  }
  for (int len = n; len >= 1; len--)
    for (int at = 0; at + len <= n; at++) {
      char name[VL_GPU_NAME * 2] = "";
      size_t used = 0;
      for (int i = at; i < at + len && used < sizeof name; i++)
        used +=
            (size_t)snprintf(name + used, sizeof name - used, "%s%s", i > at ? "-" : "", tok[i]);
      const struct vl_gpu *g = vl_catalog_find(cat, name);
      if (g) return g;
    }
  return NULL;
}

vl_status vl_prices_apply(const char *text, size_t len, struct vl_catalog *cat,
                          struct vl_err *err) {
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return vl__fail(err, VL_EPARSE, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
  vl_status s = VL_OK;
  json_t *date = json_object_get(root, "date"), *prices = json_object_get(root, "usd_per_hour");
  if (!json_is_string(date) || strlen(json_string_value(date)) >= sizeof cat->prices_date) {
    s = vl__fail(err, VL_EKEY, "'date' (when the prices were taken, \"YYYY-MM-DD\") is missing");
  } else if (!json_is_object(prices) || !json_object_size(prices)) {
    s = vl__fail(err, VL_EKEY,
                 "'usd_per_hour' (GPU name -> dollars per GPU-hour) is missing or "
                 "empty");
  }
  /* check everything before changing anything: all or nothing */
  const char *name;
  json_t *v;
  json_object_foreach(prices, name, v) {
    if (s != VL_OK) break;
    if (!vl_catalog_find(cat, name))
      s = vl__fail(err, VL_EKEY, "usd_per_hour.%s: no such GPU in the catalog", name);
    else if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) < 1e6))
      s = vl__fail(err, VL_ERANGE, "usd_per_hour.%s: expected dollars per hour, 0 to 10^6", name);
  }
  if (s == VL_OK) {
    json_object_foreach(prices, name, v) {
      struct vl_gpu *g = (struct vl_gpu *)vl_catalog_find(cat, name);
      g->usd_per_hour = json_number_value(v);
    }
    snprintf(cat->prices_date, sizeof cat->prices_date, "%s", json_string_value(date));
  }
  json_decref(root);
  return s;
}

const char *vl_gpu_architecture(const struct vl_gpu *g) {
  const char *cc = g->compute_capability;
  if (!strncmp(cc, "gfx94", 5)) return "CDNA 3";
  if (!strcmp(cc, "gfx90a")) return "CDNA 2";
  if (!strcmp(cc, "gfx908")) return "CDNA";
  char *end;
  long major = strtol(cc, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
  if (end == cc) return "unknown";
  switch (major) {
  case 7: return minor >= 5 ? "Turing" : "Volta";
  case 8: return minor == 9 ? "Ada" : "Ampere";
  case 9: return "Hopper";
  case 10:
  case 12: return "Blackwell";
  default: return "unknown";
  }
}

void vl_overheads_for_gpu(struct vl_overheads *ov, const struct vl_gpu *g) {
  /* PyTorch sizes its workspaces by the card (CublasHandlePool.cpp,
   * parseChosenWorkspaceSize, parseCUDABlasLtWorkspaceSize): a card the
   * catalog gives no figure keeps ov's */
  if (g->cublas_workspace_bytes) {
    ov->cublas_workspace_bytes = g->cublas_workspace_bytes;
    ov->cublaslt_workspace_bytes = g->cublaslt_workspace_bytes;
  }
  /* ATen's reductions split their rows over as many thread blocks as the
   * card's SMs hold (Reduce.cuh, setReductionConfig), which sizes their
   * scratch: a card without the figures (ROCm's, whose kernels the
   * catalog does not describe) keeps ov's, the H200's by default */
  if (g->sm_count && g->max_threads_per_sm) {
    ov->sm_count = g->sm_count;
    ov->threads_per_sm = g->max_threads_per_sm;
  }
}

/* the H200's kernels and libraries are Hopper's (sm_90): an H100 runs the
 * same */
static bool context_measured(const struct vl_gpu *g) {
  return g->context_measured || !strcmp(vl_gpu_architecture(g), "Hopper");
}

uint64_t vl_context_range_bytes(const struct vl_gpu *g) {
  return context_measured(g) ? 0 : VL_CONTEXT_RANGE_BYTES;
}

void vl_context_carry(const struct vl_gpu *g, const struct vl_overheads *ov,
                      const struct vl_job *job, struct vl_context_carry *out) {
  bool same = context_measured(g);
  struct vl_overheads og = *ov; /* the card's workspaces, whichever ov came in */
  vl_overheads_for_gpu(&og, g);
  unsigned threads = vl_workspace_threads(job);
  *out = (struct vl_context_carry){.carried = !same,
                                   .architecture = vl_gpu_architecture(g),
                                   .context_bytes = vl_context_bytes(ov, job),
                                   .range_bytes = vl_context_range_bytes(g),
                                   .workspace_billed_bytes = vl_workspace_thread_bytes(&og),
                                   .workspace_card_bytes = g->cublas_workspace_bytes,
                                   .lt_workspace_bytes = g->cublaslt_workspace_bytes,
                                   .workspaces = threads};
}
