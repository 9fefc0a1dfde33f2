#!/usr/bin/env python3
"""Every measured DDP rank peak on the H200s against the estimate's two
outcomes: the bill (the usual outcome of DDP's bucket rebuild)
and bill->other (the first buckets freed at the rebuild or kept into
step 2, whichever the bill is not).

  bench/accuracy/ddp_outcomes.py BIN [FILE.jsonl ...]

Without files it reads the committed whole-job results of
bench/gpu/jobs/parallel_jobs.py data (2026-11-29 and -30). Prints one row per distinct
(job, measured peak) with its count, the nearer outcome and the error to
it, then the totals.

By its first argument, also:

  trials: Summary of bench/gpu/jobs/parallel_jobs.py rebuild-trials's lines: per
    setting, how many rank trials kept DDP's first buckets at the rebuild
    (jump_b over half the gradient bytes), the gap from the first step's
    backward to the second step (median, min, max; sync and host loops), and
    the prediction 1 - gap / 100 ms (NCCL's watchdog looks every 100 ms) at
    the median gap.
  measured: The whole-job DDP runs of bench/gpu/jobs/parallel_jobs.py data (one
    JSON line per rank) as a measured file `vramledger validate --measured`
    reads: one run per rank, with dp, ZeRO-1 (DDP with a
    ZeroRedundancyOptimizer), static_graph and the loop's kept outputs as
    settings.
"""
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  the results files packed in raw.jsonl

R = "bench/results/"
FILES = [
    R + "nccl-run/nccl-interposer/runs6.jsonl",
    R + "nccl-run/probe-tp-ddp/runs7.jsonl",
    R + "nccl-run/ddp-record-stream/ddp10.jsonl",
    R + "unseen-sets/ddp-two-peaks/ddp8.jsonl",
    R + "unseen-sets/ddp-two-peaks/ddp8-qwen.jsonl",
    R + "replay-histories/ddp-pause/ddp-pause.jsonl",
    R + "ddp-rebuild/first-bucket-trials/jobs.jsonl",
    R + "ddp-rebuild/zero1/zero1.jsonl",
    R + "ddp-rebuild/ddp-replay-unseen/ddp-replay-unseen.jsonl",
]
# parallel_jobs.py data modes that are plain DDP as far as the estimate goes:
# ddp-avoid-record-streams set TORCH_NCCL_AVOID_RECORD_STREAMS=1, which is
# what PyTorch 2.11 does anyway (measured: =0 changes nothing either)
PLAIN = {"ddp", "ddp-default", "ddp-avoid-record-streams"}
# parallel_jobs.py data's model names -> bundled models or config files
MODELS = {"qwen2-0.5b.json": "qwen2-0.5b", "tinyllama-1.1b.json": "bench/configs/tinyllama-1.1b.json"}


def estimate(binary, model, batch, seq, static, zero):
    cmd = [binary, "estimate", "--model", model, "--batch", str(batch), "--seq", str(seq),
           "--precision", "amp-bf16", "--optimizer", "adamw", "--dp", "2", "--drop-outputs",
           "--zero", str(zero), "--format", "json"] + (["--ddp-static-graph"] if static else [])
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    other = out.get("other_outcome", {}).get("peak_allocated_bytes")
    return out["peak_allocated_bytes"], other


def main():
    binary = sys.argv[1]
    files = sys.argv[2:] or FILES
    rows = collections.Counter()
    for f in files:
        for line in text_of(f).splitlines(True):
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            mode = d.get("mode", "")
            if mode not in PLAIN and mode not in ("ddp-static", "zero1"):
                continue
            model = MODELS.get(d["model"], d["model"])
            loop = "async" if d.get("async_loop") else "sync"
            if d.get("pause"):
                loop += " +%.1fs" % d["pause"]
            rows[(model, mode == "ddp-static", 1 if mode == "zero1" else 0, loop, d["batch"],
                  d["seq"], d["max_allocated"], os.path.basename(f))] += 1
    est = {}
    tot = collections.Counter()
    print("%-11s %-6s %-4s %-11s %-18s %5s %15s %-6s %7s %7s" % (
        "model", "static", "zero", "loop", "file", "ranks", "measured B", "nearer", "error",
        "point"))
    for (model, static, zero, loop, b, s, meas, fname), n in sorted(rows.items()):
        key = (model, b, s, static, zero)
        if key not in est:
            est[key] = estimate(binary, model, b, s, static, zero)
        low, other = est[key]
        outcomes = [("bill", low)] + ([("other", other)] if other else [])
        name, val = min(outcomes, key=lambda o: abs(meas / o[1] - 1))
        err = 100 * (val / meas - 1)
        point = 100 * (low / meas - 1)
        print("%-11s %-6s %-4d %-11s %-18s %5d %15d %-6s %+6.1f%% %+6.1f%%" % (
            model, "yes" if static else "no", zero, loop, fname[:18], n, meas, name, err, point))
        tot["ranks"] += n
        tot[name] += n
        tot["nearer within 7 %"] += n if abs(err) <= 7 else 0
        tot["nearer within 2 %"] += n if abs(err) <= 2 else 0
        tot["point within 7 %"] += n if abs(point) <= 7 else 0
        tot["larger outcome >= 98 %"] += n if max(low, other or 0) >= meas * 0.98 else 0
    print()
    for k in ("ranks", "bill", "other", "nearer within 2 %", "nearer within 7 %",
              "point within 7 %", "larger outcome >= 98 %"):
        print("%-20s %d" % (k, tot[k]))


def mode_trials():
    """Summary of bench/gpu/jobs/parallel_jobs.py rebuild-trials's lines: per setting, how many rank
    trials kept DDP's first buckets at the rebuild (jump_b over half the
    gradient bytes), the gap from the first step's backward to the second step
    (median, min, max; sync and host loops), and the prediction
    1 - gap / 100 ms (NCCL's watchdog looks every 100 ms) at the median gap.

      bench/accuracy/ddp_outcomes.py trials trials.jsonl"""

    groups = collections.defaultdict(list)
    for line in open(sys.argv[1]):
        if line.startswith("{"):
            d = json.loads(line)
            groups[(d["model"], d["tag"], d["loop"], d["pause"])].append(d)
    print("%-16s %-34s %-5s %5s %6s %5s %9s %17s %9s %6s" % (
        "model", "tag", "loop", "pause", "trials", "kept", "kept/all", "gap ms med [range]",
        "predicted", "agree"))
    for (model, tag, loop, pause), v in groups.items():
        kept = sum(d["jump_b"] > d["grad_b"] / 2 for d in v)
        # the rebuild's jump and the second step's peak tell the same story
        low = min(d["step2_peak_b"] for d in v)
        agree = sum((d["jump_b"] > d["grad_b"] / 2) == (d["step2_peak_b"] > low + d["grad_b"] / 2)
                    for d in v)
        gaps = sorted(d["gap_ms"] for d in v if d["gap_ms"] is not None)
        if gaps:
            med = gaps[len(gaps) // 2]
            gap = "%5.1f [%5.1f, %5.1f]" % (med, gaps[0], gaps[-1])
            pred = "%.2f" % max(0.0, 1 - med / 100)
        else:
            gap, pred = "-", "-"
        print("%-16s %-34s %-5s %5.2f %6d %5d %9.2f %17s %9s %6d" % (
            model[:16], tag or "-", loop, pause, len(v), kept, kept / len(v), gap, pred, agree))



def mode_measured():
    """The whole-job DDP runs of bench/gpu/jobs/parallel_jobs.py data (one JSON line per rank)
    as a measured file `vramledger validate --measured` reads: one run per
    rank, with dp, ZeRO-1 (DDP with a ZeroRedundancyOptimizer), static_graph
    and the loop's kept outputs as settings.

      bench/accuracy/ddp_outcomes.py measured OUT.json [FILE.jsonl ...]

    Without files: the committed whole-job results of 2026-11-29 and -30 (the same
    list bench/accuracy/ddp_outcomes.py reads). The runs record no NVML figure
    (parallel_jobs.py data reads only the allocator), so validate compares peak
    allocated and reserved."""

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


MODES = {"trials": mode_trials, "measured": mode_measured}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
