#!/usr/bin/env python3
"""Host seconds per op the step-time model enumerates, and per step: the
tiny models' measured steps (bench/time/host.sh: no kernel long enough to
hide the host) against the ops `vramledger estimate` counts for them
(time.eager_ops), a line through them by Theil-Sen (the median of the
pairwise slopes; robust to the odd model whose Python costs more).

  python3 bench/time/host_fit.py VRAMLEDGER HOST.json
  python3 bench/time/host_fit.py --write-configs

The tiny models' configs are the "config" of each line of
bench/configs/host.jsonl; the runs name them by the path in "model"
(bench/configs/host/tiny-NAME.json, not tracked), which write_configs()
writes from those lines where it is missing: host.sh before it measures,
this fit before it estimates, trace_compare.py before it traces."""
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl

HOST_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "host.jsonl")


def write_configs(jsonl=HOST_CONFIGS):
    """write each line's "config" to its "model" path (relative to the
    repository's root) where that file is missing"""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for line in open(jsonl):
        r = json.loads(line) if line.strip() else {}
        p = os.path.join(root, r.get("model", ""))
        if "config" in r and not os.path.exists(p):
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                json.dump(r["config"], f, indent=1)


def main():
    if sys.argv[1:] == ["--write-configs"]:
        write_configs()
        return
    exe, path = sys.argv[1], sys.argv[2]
    write_configs()
    ratios, xs, ys = [], [], []
    for r in json.loads(text_of(path))["runs"]:
        m = (r.get("measured") or {}).get("step_median_s")
        if not m:
            continue
        f = ["--model", r["model"], "--batch", str(r["batch"]), "--seq", str(r["seq"]), "--precision", r["precision"],
             "--optimizer", r["optimizer"], "--attention", r["attention"], "--checkpointing", r["checkpointing"]]
        if r.get("lora"):
            f += ["--lora-rank", str(r["lora"])]
        d = json.loads(subprocess.run([exe, "estimate", *f, "--gpu", "h100-80gb", "--format", "json"],
                                      capture_output=True, text=True, check=True).stdout)
        ops = d["time"]["eager_ops"]
        ratios.append(m / ops)
        xs.append(ops)
        ys.append(m)
        print("%-34s %.4f s %6d ops %.2f us/op" % (r["name"], m, ops, 1e6 * m / ops))
    print("median %.3g s an op over %d runs (min %.3g, max %.3g)" % (statistics.median(ratios), len(ratios),
          min(ratios), max(ratios)))
    n = len(xs)
    slope = statistics.median([(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n)
                               if xs[j] != xs[i]])
    step = statistics.median([y - slope * x for x, y in zip(xs, ys)])
    print("Theil-Sen: %.4g s an op, %.4g s a step" % (slope, step))


if __name__ == "__main__":
    main()
