#!/usr/bin/env python3
"""What transformers builds from each bundled config, as facts the
estimator's architecture tables are checked against: the class, every
parameter's name and shape, sum(p.numel()) (tied weights once), the
defaults of each model type's configuration class, and the modeling and
configuration sources of the installed transformers (for reading).

Models are built on the meta device: no GPU memory, no weights.
Usage: python3 bench/gpu/jobs/model_facts.py OUT_DIR
"""
import datetime, glob, inspect, json, os, platform, sys, tarfile

import torch
import transformers
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForImageClassification,
                          AutoModelForMaskedLM, AutoModelForSeq2SeqLM)

TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
         "gemma2", "gemma3_text", "phi", "phi3", "olmo2", "olmoe", "granite", "starcoder2",
         "falcon", "gpt_bigcode", "gpt2", "gpt_neox", "opt", "stablelm", "glm", "deepseek_v2",
         "deepseek_v3", "glm4", "smollm3", "gpt_oss", "exaone4",
         "bert", "roberta", "distilbert", "deberta-v2", "modernbert", "t5", "bart", "vit",
         "resnet"]
MLM = {"bert", "roberta", "distilbert", "deberta-v2", "modernbert"}
S2S = {"t5", "bart"}
VISION = {"vit", "resnet"}


def auto_class(mt):
    if mt in MLM:
        return AutoModelForMaskedLM
    if mt in S2S:
        return AutoModelForSeq2SeqLM
    if mt in VISION:
        return AutoModelForImageClassification
    return AutoModelForCausalLM


def build(d):
    d = dict(d)
    mt = d.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype"):
        d.pop(k, None)
    cfg = AutoConfig.for_model(mt, **d)
    with torch.device("meta"):
        m = auto_class(mt).from_config(cfg)
    ps = list(m.named_parameters())
    return {"class": type(m).__name__, "params": sum(p.numel() for _, p in ps),
            "largest_tensor": max(p.numel() for _, p in ps),
            "shapes": [[n, list(p.shape)] for n, p in ps],
            "buffers": [[n, list(b.shape), str(b.dtype)] for n, b in m.named_buffers()]}


def jsonable(v):
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    res = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "host": platform.node(), "python": platform.python_version(),
           "torch": torch.__version__, "transformers": transformers.__version__,
           "method": "sum(p.numel()) of the Auto class built on the meta device from the config",
           "defaults": {}, "defaults_built": {}, "configs": {}}
    srcs = []
    for mt in TYPES:
        try:
            cfg = AutoConfig.for_model(mt)
            res["defaults"][mt] = {k: jsonable(v) for k, v in cfg.to_dict().items()}
            mod = sys.modules[type(cfg).__module__]
            srcs.append(inspect.getsourcefile(mod))
            mm = mod.__name__.replace("configuration_", "modeling_")
            __import__(mm)
            srcs.append(inspect.getsourcefile(sys.modules[mm]))
        except Exception as e:
            res["defaults"][mt] = {"error": repr(e)[:400]}
        try:
            r = build({"model_type": mt})
            res["defaults_built"][mt] = {k: r[k] for k in ("class", "params", "largest_tensor")}
        except Exception as e:
            res["defaults_built"][mt] = {"error": repr(e)[:400]}
    for p in sorted(glob.glob("data/models/*.json")) + sorted(glob.glob("tests/data/configs/*.json")):
        try:
            with open(p) as f:
                res["configs"][p] = build(json.load(f))
        except Exception as e:
            res["configs"][p] = {"error": repr(e)[:400]}
    for extra in ("modeling_utils", "integrations.sdpa_attention", "masking_utils",
                  "activations", "modeling_rope_utils", "cache_utils", "generation.utils"):
        try:
            __import__("transformers." + extra)
            srcs.append(inspect.getsourcefile(sys.modules["transformers." + extra]))
        except Exception:
            pass
    with tarfile.open(os.path.join(out, "transformers-sources.tar.gz"), "w:gz") as t:
        for s in srcs:
            if s:
                t.add(s, arcname=os.path.relpath(s, os.path.dirname(transformers.__file__)))
    with open(os.path.join(out, "model-facts.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("types", len(res["defaults"]), "configs", len(res["configs"]),
          "errors", [k for k, v in res["configs"].items() if "error" in v],
          [k for k, v in res["defaults_built"].items() if "error" in v])


if __name__ == "__main__":
    main()
