#!/usr/bin/env python3
"""What transformers builds from each bundled config, as facts the
estimator's architecture tables are checked against: the class, every
parameter's name and shape, sum(p.numel()) (tied weights once), the
defaults of each model type's configuration class, and the modeling and
configuration sources of the installed transformers (for reading).

Models are built on the meta device: no GPU memory, no weights.
Usage: python3 bench/gpu/jobs/model_facts.py OUT_DIR

By its first argument, also:

  param-count: Count parameters of every bundled and test config with Hugging
    Face transformers, as PyTorch sees them: sum(p.numel() for p in
    model.parameters()) (tied weights counted once). Models are built on the
    meta device, so a 405B model needs no memory. Writes one JSON object to
    the path given as argv[1].
  basics: Orientation figures for the overhead lines of the bill, on a real
    GPU: CUDA context size (NVML process memory after the first allocation
    minus what PyTorch reserved), cuBLAS workspace (allocated bytes that
    appear on the first matmul), and the caching allocator's rounding of a few
    request sizes. Writes JSON to argv[1].
  type-peaks: What is live at the peak of a training step, by the Python
    line that allocated it, for runs of measure.py's suites: the allocator's
    history (torch.cuda.memory._record_memory_history, Python stacks) of the
    measured run, summarised by bench/gpu/jobs/job_common.py summary() (the
    snapshot itself is too large to bring back).
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


def mode_param_count():
    """Count parameters of every bundled and test config with Hugging Face
    transformers, as PyTorch sees them: sum(p.numel() for p in model.parameters())
    (tied weights counted once). Models are built on the meta device, so a 405B
    model needs no memory. Writes one JSON object to the path given as argv[1].

    Run on the GPU machine (transformers is not on the development machine):
        python3 bench/gpu/jobs/model_facts.py param-count $OUT/param_counts.json"""
    import datetime, glob, json, platform, sys

    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM


    def count(path):
        with open(path) as f:
            d = json.load(f)
        mt = d.pop("model_type")
        d.pop("architectures", None)
        cfg = AutoConfig.for_model(mt, **d)
        cls = AutoModelForMaskedLM if mt == "bert" else AutoModelForCausalLM
        with torch.device("meta"):
            model = cls.from_config(cfg)
        n = sum(p.numel() for p in model.parameters())
        shapes = {}
        for name, p in model.named_parameters():
            shapes[name] = list(p.shape)
        return {"class": type(model).__name__, "params": n,
                "largest_tensor": max(p.numel() for p in model.parameters()),
                "tensors": len(shapes)}


    def main():
        out = {"date": datetime.datetime.utcnow().isoformat() + "Z",
               "host": platform.node(),
               "python": platform.python_version(),
               "torch": torch.__version__,
               "transformers": transformers.__version__,
               "cuda": torch.version.cuda,
               "method": "sum(p.numel() for p in model.parameters()), model built on meta device "
                         "with AutoModelForCausalLM (AutoModelForMaskedLM for bert) from the config",
               "counts": {}}
        paths = sorted(glob.glob("data/models/*.json")) + sorted(glob.glob("tests/data/configs/*.json"))
        for p in paths:
            try:
                out["counts"][p] = count(p)
            except Exception as e:  # record, do not hide
                out["counts"][p] = {"error": repr(e)}
            print(p, out["counts"][p], flush=True)
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")


    if __name__ == "__main__":
        main()


def mode_basics():
    """Orientation figures for the overhead lines of the bill, on a real GPU:
    CUDA context size (NVML process memory after the first allocation minus what
    PyTorch reserved), cuBLAS workspace (allocated bytes that appear on the first
    matmul), and the caching allocator's rounding of a few request sizes.
    Writes JSON to argv[1]."""
    import datetime, json, os, sys


    def nvml_proc_used():
        try:
            import pynvml
        except ImportError:
            return None
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        pid = os.getpid()
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == pid:
                return p.usedGpuMemory
        return None


    def main():
        r = {"date": datetime.datetime.utcnow().isoformat() + "Z", "torch": torch.__version__,
             "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
        free0, total = torch.cuda.mem_get_info()
        r["device_total_bytes"] = total
        x = torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        r["after_first_alloc"] = {"allocated": torch.cuda.memory_allocated(),
                                  "reserved": torch.cuda.memory_reserved(),
                                  "nvml_process": nvml_proc_used()}
        a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        before = torch.cuda.memory_allocated()
        b = a @ a
        torch.cuda.synchronize()
        r["after_first_bf16_matmul"] = {"allocated_delta": torch.cuda.memory_allocated() - before - b.numel() * 2,
                                        "reserved": torch.cuda.memory_reserved(),
                                        "nvml_process": nvml_proc_used()}
        rounding = {}
        for n in [1, 511, 513, 1 << 20, (1 << 20) + 1, 5 << 20, 11 << 20, 100 << 20]:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            s0 = torch.cuda.memory_stats()
            t = torch.empty(n, dtype=torch.uint8, device="cuda")
            s1 = torch.cuda.memory_stats()
            rounding[str(n)] = {"allocated_delta": s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"],
                                "reserved_delta": s1["reserved_bytes.all.current"] - s0["reserved_bytes.all.current"]}
            del t
        r["rounding"] = rounding
        with open(sys.argv[1], "w") as f:
            json.dump(r, f, indent=1, sort_keys=True)
            f.write("\n")
        print(json.dumps(r, indent=1))
        del x  # the first allocation: live through every figure above


    if __name__ == "__main__":
        main()


def mode_type_peaks():
    """What is live at the peak of a training step, by the Python line that
    allocated it, for runs of measure.py's suites: the allocator's history
    (torch.cuda.memory._record_memory_history, Python stacks) of the measured
    run, summarised by bench/gpu/jobs/job_common.py summary() (the snapshot itself is too large
    to bring back).

        python3 bench/gpu/jobs/model_facts.py type-peaks OUT.json NAME...

    With every event of 64 MiB or more (large_events: index, action, size,
    where). Each run is measured as measure.py measures it (its own run_train), in this
    process one after another; the peak of each is its own (statistics reset)."""
    import json
    import os
    import sys


    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "python"))
    from vramledger import measure  # noqa: E402
    from job_common import summary  # noqa: E402


    def main():
        out, names = sys.argv[1], sys.argv[2:]
        data = os.path.join(here, "..", "..", "..", "data")
        by_name = {c["name"]: c for c in measure.CALIBRATION + measure.TYPES}
        res = {"torch": torch.__version__, "runs": {}}
        for name in names:
            c = by_name[name]
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
            try:
                rec = (measure.run_train if c["task"] == "train" else measure.run_infer)(c, data)
                snap = torch.cuda.memory._snapshot()
                s = summary(snap, top=30)
                s["large_events"] = s.get("large_events", [])[:1500]
                res["runs"][name] = {"config": c, "measured": rec, "peak": s}
                del snap
            except Exception as ex:  # noqa: BLE001 - one failed run must not stop the rest
                res["runs"][name] = {"config": c, "error": repr(ex)[:500]}
            torch.cuda.memory._record_memory_history(enabled=None)
            torch.cuda.empty_cache()
            print(name, res["runs"][name].get("error", "ok"), flush=True)
            with open(out, "w") as f:
                json.dump(res, f, indent=1)


    if __name__ == "__main__":
        main()


MODES = {"param-count": mode_param_count, "basics": mode_basics, "type-peaks": mode_type_peaks}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
