#!/usr/bin/env python3
"""Count parameters of every bundled and test config with Hugging Face
transformers, as PyTorch sees them: sum(p.numel() for p in model.parameters())
(tied weights counted once). Models are built on the meta device, so a 405B
model needs no memory. Writes one JSON object to the path given as argv[1].

Run on the GPU machine (transformers is not on the development machine):
    python3 bench/gpu/jobs/param_count.py $OUT/param_counts.json
"""
import datetime, glob, json, platform, sys

import torch
import transformers
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
