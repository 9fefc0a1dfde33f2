#!/usr/bin/env python3
"""The whole-job DDP runs of bench/gpu/jobs/multi_gpu_job.py (one JSON line per rank)
as a measured file `vramledger validate --measured` reads: one run per
rank, with dp, ZeRO-1 (DDP with a ZeroRedundancyOptimizer), static_graph
and the loop's kept outputs as settings.

  bench/accuracy/ddp_measured.py OUT.json [FILE.jsonl ...]

Without files: the committed whole-job results of 2026-11-29 and -30 (the same
list bench/accuracy/ddp_outcomes.py reads). The runs record no NVML figure
(multi_gpu_job.py reads only the allocator), so validate compares peak
allocated and reserved.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  the results files packed in raw.jsonl

from ddp_outcomes import FILES, PLAIN

MODELS = {"gpt2": "gpt2", "gpt2-medium": "gpt2-medium", "qwen2-0.5b.json": "qwen2-0.5b",
          "tinyllama-1.1b.json": "bench/configs/tinyllama-1.1b.json"}


def main():
    out = sys.argv[1]
    files = sys.argv[2:] or FILES
    runs = []
    for f in files:
        part = f.split("/")[2].split("-")[-1] if f.count("/") > 2 else ""
        for n, line in enumerate(text_of(f).splitlines(True)):
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if d.get("mode") not in PLAIN and d.get("mode") not in ("ddp-static", "zero1"):
                continue
            loop = "async" if d.get("async_loop") else "sync"
            if d.get("pause"):
                loop += "-pause%g" % d["pause"]
            model = MODELS[d["model"]]
            if "/" in model:  # a config file: its path from the results file's folder
                model = os.path.relpath(model, os.path.dirname(os.path.abspath(out)))
            runs.append({
                "name": "%s-%s-%s-%s-l%d-r%d" % (os.path.basename(MODELS[d["model"]]).replace(
                    ".json", ""), d["mode"], loop, part, n + 1, d["rank"]),
                "model": model, "task": "train", "precision": "amp-bf16",
                "optimizer": "adamw", "optimizer_impl": "foreach", "attention": "sdpa",
                "checkpointing": "none", "batch": d["batch"], "seq": d["seq"], "lora": 0,
                "dp": d["world"], "zero": 1 if d["mode"] == "zero1" else 0,
                "ddp_static_graph": d["mode"] == "ddp-static",
                "drop_outputs": True, "holdout": False, "source": f,
                "measured": {"peak_allocated": d["max_allocated"],
                             "peak_reserved": d["max_reserved"]},
            })
    doc = {"schema": "vramledger.measure/1", "date": "2026-11-30",
           "torch": "2.11.0+cu130", "cuda": "13.0", "transformers": "5.17.0",
           "device": "2 x NVIDIA H200 (DDP, NCCL; NCCL_NVLS_ENABLE=0)",
           "suite": "ddp whole jobs, bench/gpu/jobs/multi_gpu_job.py (2026-11-29 and -30)", "runs": runs}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print("%d runs -> %s" % (len(runs), out))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
