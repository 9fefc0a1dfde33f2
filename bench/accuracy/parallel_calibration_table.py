#!/usr/bin/env python3
"""Tables of bench/results/parallel-calibration/README.md: every rank's
measured peak allocated against `vramledger estimate` for the same job
(tensor parallelism, DDP, FSDP), and step times from 1 to 2 GPUs.

  python3 bench/accuracy/parallel_calibration_table.py VRAMLEDGER RESULTS_DIR [GPT2_DIR]

GPT2_DIR: the earlier 2-GPU runs (bench/results/ddp-rebuild/ddp), re-estimated.
A folder of bench/results/ is read from its raw.jsonl (bench/raw.py)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  the results files packed in raw.jsonl

vl, d = sys.argv[1], sys.argv[2]
gpt2 = sys.argv[3] if len(sys.argv) > 3 else None
CONFIGS = {"tinyllama-1.1b.json": "bench/configs/tinyllama-1.1b.json",
           "qwen2-0.5b-untied.json": "bench/configs/qwen2-0.5b-untied.json",
           "qwen2-0.5b.json": "data/models/qwen2-0.5b.json", "gpt2": "gpt2"}
ZERO = {"ddp": 0, "fsdp-full": 3, "fsdp-grad-op": 2}
cache = {}


def estimate(model, *flags, **kw):
    args = [vl, "estimate", "--model", CONFIGS[model], "--format", "json", *flags]
    for k, v in sorted(kw.items()):
        args += ["--" + k.replace("_", "-"), str(v)]
    key = tuple(args)
    if key not in cache:
        cache[key] = json.loads(subprocess.run(args, capture_output=True, text=True,
                                               check=True).stdout)["peak_allocated_bytes"]
    return cache[key]


def rows(path):
    return [json.loads(line) for line in text_of(path).splitlines() if line.startswith("{")]


def dp_estimate(r):
    m, w = r["mode"].replace("-under-vl-run", ""), r["world"]
    # a world of 1: DDP still builds its buckets (compared with 2 ranks);
    # FSDP falls back to NO_SHARD (compared with one GPU)
    dp, zero = (2, 0) if m == "ddp" else ((1, 0) if w == 1 else (w, ZERO[m]))
    kw = dict(batch=r["batch"], seq=r["seq"], dp=dp)
    if zero:
        kw["zero"] = zero
    # the job keeps only the loss (`train(...).loss`)
    return estimate(r.get("model", "gpt2"), "--drop-outputs", **kw)


out, worst = [], {}
print("| job | model | GPUs | rank | settings | measured peak allocated (MiB) | estimate (MiB) | error |")
print("|---|---|---:|---:|---|---:|---:|---:|")
for r in rows(os.path.join(d, "tp", "tp.jsonl")):
    e = estimate(r["config"], batch=r["batch"], seq=r["seq"], tp=r["world"],
                 precision=r["precision"], attention=r["attention"],
                 checkpointing=r["checkpointing"])
    out.append(("tp", r["config"], r["world"], r["rank"],
                "%s %s ckpt=%s b%d s%d" % (r["precision"], r["attention"], r["checkpointing"],
                                           r["batch"], r["seq"]), r["max_allocated"], e))
sources = [os.path.join(d, "dp-fsdp", "dp.jsonl")]
if gpt2:
    sources.append(os.path.join(gpt2, "multi.jsonl"))
for src in sources:
    for r in rows(src):
        out.append((r["mode"], r.get("model", "gpt2"), r["world"], r["rank"],
                    "amp-bf16 adamw b%d s%d" % (r["batch"], r["seq"]), r["max_allocated"],
                    dp_estimate(r)))
for job, model, w, rank, settings, meas, e in out:
    err = 100.0 * (e - meas) / meas
    if w > 1:
        k = job.replace("-under-vl-run", "")
        worst[k] = max(worst.get(k, 0.0), abs(err))
    print("| %s | %s | %d | %d | %s | %.1f | %.1f | %+.1f %% |" % (
        job, model.replace(".json", ""), w, rank, settings, meas / 2**20, e / 2**20, err))
print("\nLargest error over every rank of the 2-GPU runs: " +
      ", ".join("%s %.1f %%" % kv for kv in sorted(worst.items())))
print("\n| job | model | step on 1 GPU (ms) | step on 2 GPUs (ms, mean of ranks) | scaling efficiency |")
print("|---|---|---:|---:|---:|")
for src in sources:
    rs = rows(src)
    for m in ("ddp", "fsdp-grad-op", "fsdp-full"):
        for model in sorted({r.get("model", "gpt2") for r in rs}):
            one = [r["step_s_median"] for r in rs if r["mode"] == m and r["world"] == 1
                   and r.get("model", "gpt2") == model]
            two = [r["step_s_median"] for r in rs if r["mode"] == m and r["world"] == 2
                   and r.get("model", "gpt2") == model]
            if one and two:
                t1, t2 = one[0], sum(two) / len(two)
                print("| %s | %s | %.1f | %.1f | %.2f |" % (m, model.replace(".json", ""),
                                                           1000 * t1, 1000 * t2, t1 / t2))
