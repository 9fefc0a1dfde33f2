#!/usr/bin/env python3
"""The estimator's known misses against the H200: for each entry of
bench/configs/known-misses.json, the measured peaks (DIR/NAME.measured.json,
bench/gpu/run.sh known-misses; the committed ones in data/reference/h200-torch-2.11/), the dry run's (DIR/NAME.dry.json, `vramledger
trace` on meta or CPU) and the formula's (`vramledger estimate`, run now
with VL). Prints a Markdown table.
  python3 bench/accuracy/known_misses_table.py DIR [--vl build/vramledger]"""
import argparse
import json
import os
import subprocess

from dry_run_table import OTHER, ROOT, measured, pct

G = float(1 << 30)


def flags(c):
    a = ["--model", c["model"], "--batch", str(c["batch"]), "--seq", str(c["seq"]), "--precision",
         c["precision"], "--attention", c["attention"]]
    if c["task"] == "infer":
        return a + ["--task", "infer", "--new-tokens", str(c["new_tokens"])]
    return a + ["--optimizer", c["optimizer"], "--optimizer-impl", c["optimizer_impl"], "--checkpointing",
                c["checkpointing"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--vl", default=os.path.join(ROOT, "build", "vramledger"))
    a = ap.parse_args()
    print("| entry | measured alloc / reserved GiB | dry run alloc, reserved | formula alloc, reserved |")
    print("|---|---:|---:|---:|")
    committed = measured(OTHER)
    for c in json.load(open(os.path.join(ROOT, "bench", "configs", "known-misses.json"))):
        n = c["name"]
        mp = os.path.join(a.dir, n + ".measured.json")
        m = json.load(open(mp))["runs"][0]["measured"] if os.path.exists(mp) else committed[n]
        r = json.load(open(os.path.join(a.dir, n + ".dry.json")))["replays"][0]
        e = json.loads(subprocess.run([a.vl, "estimate"] + flags(c) + ["--format", "json"],
                                      capture_output=True, text=True).stdout)
        ma, mr = m["peak_allocated"], m["peak_reserved"]
        print("| %s | %.2f / %.2f | %+.1f %%, %+.1f %% | %+.1f %%, %+.1f %% |" % (
            n, ma / G, mr / G, pct(r["peak_allocated_bytes"], ma), pct(r["peak_reserved_bytes"], mr),
            pct(e["peak_allocated_bytes"], ma), pct(e["peak_reserved_bytes"], mr)))


if __name__ == "__main__":
    main()
