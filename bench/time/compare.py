#!/usr/bin/env python3
"""Predicted against measured step time: `vramledger estimate --gpu CARD
--format json`'s step_seconds for each training run of measure.py result
files (step_median_s where the run timed several steps, else step_s).

  python3 bench/time/compare.py VRAMLEDGER CARD RESULTS.json... [--md]

Prints one row a run and the summary (median and worst |error|, how many
within 10 % and 25 %)."""
import json, os, statistics, subprocess, sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
md = "--md" in sys.argv
exe, card, files = args[0], args[1], args[2:]


def flags(r):
    f = ["--model", r["model"], "--batch", str(r["batch"]), "--seq", str(r["seq"]),
         "--precision", r["precision"], "--optimizer", r["optimizer"],
         "--optimizer-impl", r.get("optimizer_impl") or "foreach", "--attention", r["attention"],
         "--checkpointing", r["checkpointing"], "--grad-accum", str(r.get("grad_accum", 1))]
    if r.get("lora"):
        f += ["--lora-rank", str(r["lora"])]
        if r.get("lora_targets"):
            f += ["--lora-targets", r["lora_targets"]]
    return f


rows = []
for path in files:
    d = json.load(open(path))
    for r in d["runs"]:
        m = r.get("measured") or {}
        meas = m.get("step_median_s") or m.get("step_s")
        if r.get("task", "train") != "train" or not meas or r.get("error"):
            continue
        if r["model"].endswith(".json") and not os.path.exists(r["model"]):
            continue
        p = subprocess.run([exe, "estimate", *flags(r), "--gpu", card, "--margin", "0", "--format", "json"],
                           capture_output=True, text=True)
        try:
            est = json.loads(p.stdout)["step_seconds"]
        except (ValueError, KeyError):
            rows.append((r["name"], meas, None, p.stderr.strip().splitlines()[-1:] or ["?"]))
            continue
        rows.append((r["name"], meas, est, None))
errs = []
if md:
    print("| run | measured s | predicted s | error |\n|---|---:|---:|---:|")
for name, meas, est, why in rows:
    if est is None:
        print(("| %s | %.4f | - | %s |" if md else "%-48s %8.4f  -  %s") % (name, meas, why[0]))
        continue
    err = est / meas - 1
    errs.append(abs(err))
    print(("| %s | %.4f | %.4f | %+.1f %% |" if md else "%-48s %8.4f %8.4f %+6.1f %%") % (name, meas, est, 100 * err))
if errs:
    n = len(errs)
    print("\n%d runs on %s: |error| median %.1f %%, worst %.1f %%; %d/%d within 10 %%, %d/%d within 25 %%"
          % (n, card, 100 * statistics.median(errs), 100 * max(errs), sum(e <= 0.10 for e in errs), n,
             sum(e <= 0.25 for e in errs), n))
