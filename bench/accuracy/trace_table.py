#!/usr/bin/env python3
"""The table of bench/results/trace/README.md, from the raw
files there. Usage: python3 bench/accuracy/trace_table.py DIR

For each configuration: the job's own max_memory_allocated/reserved on the
H200 (job.json), the replay of the allocator's own history (hist-replay.json;
the allocator model alone), the replay of the tracer's trace of the GPU run
(gpu-trace.json; the tracer alone) and of the CPU dry run (cpu-trace.json;
the prediction). Errors are (replayed - measured) / measured.

By its first argument, also:

  batch: The table of bench/results/trace/README.md#trace-batch from its
    batch.jsonl: for each configuration, the CPU dry run at the first batch
    replayed at every batch (`vramledger trace --batch`) against the job's own
    max_memory_allocated/reserved on the H200 at that batch. Usage: python3
    bench/accuracy/trace_table.py batch batch.jsonl
  fit-holdout: Fit on part of a real sweep, predict the held-out points,
    print a Markdown table. Usage: python3 bench/accuracy/trace_table.py fit-holdout VL
    CSV HOLD [COLUMN] HOLD: a batch (an integer: that batch's points are
    held out), or "seq=S" (that sequence length's points). COLUMN: the
    measured peak to fit (default peak_bytes, the process; or
    peak_allocated_bytes, ...), or "by-phase": `fit --by-phase`
    (forward/backward and optimizer peaks fitted apart), judged on
    peak_allocated_bytes.
"""
import json
import os
import tempfile
import sys


def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def replay(doc, key):
    try:
        return doc["replays"][0][key]
    except (TypeError, KeyError, IndexError):
        return None


def err(x, m):
    return None if not x or not m else 100.0 * (x - m) / m


def cell(e):
    return "n/a" if e is None else "%+.2f %%" % e


# folded into bench/results/trace/ beside the configurations: not rows
OTHER_QUESTIONS = ("trace-batch", "memory-viz")


def main(d):
    if os.path.exists(os.path.join(d, "raw.jsonl")):  # the committed folder: its packed files
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        import raw
        with tempfile.TemporaryDirectory() as tmp:
            raw.unpack(d, tmp)
            return main(tmp)
    fails = {"history": 0, "cpu": 0}
    names = sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)) and n not in OTHER_QUESTIONS)
    print("| configuration | max allocated (MiB) | max reserved (MiB) | history replay: reserved "
          "| tracer on GPU: allocated / reserved | CPU dry run: allocated / reserved |")
    print("|---|---:|---:|---:|---:|---:|")
    n_hist = n_cpu = 0
    for n in names:
        p = os.path.join(d, n)
        job = load(p + "/job.json") or {}
        ma, mr = job.get("max_allocated"), job.get("max_reserved")
        h = err(replay(load(p + "/hist-replay.json"), "peak_reserved_bytes"), mr)
        g = load(p + "/gpu-trace.json")
        c = load(p + "/cpu-trace.json")
        ga, gr = err(replay(g, "peak_allocated_bytes"), ma), err(replay(g, "peak_reserved_bytes"), mr)
        ca, cr = err(replay(c, "peak_allocated_bytes"), ma), err(replay(c, "peak_reserved_bytes"), mr)
        if h is not None:
            n_hist += 1
            fails["history"] += abs(h) > 1.0
        if ca is not None:
            n_cpu += 1
            fails["cpu"] += abs(ca) > 5.0 or abs(cr) > 7.0
        print("| %s | %.1f | %.1f | %s | %s / %s | %s / %s |" % (
            n, (ma or 0) / 2**20, (mr or 0) / 2**20, cell(h), cell(ga), cell(gr), cell(ca), cell(cr)))
    print()
    print("History replays within 1 %% of max_memory_reserved: %d of %d." % (n_hist - fails["history"], n_hist))
    print("CPU dry runs within 5 %% (allocated) and 7 %% (reserved): %d of %d." % (n_cpu - fails["cpu"], n_cpu))


def mode_batch():
    """The table of bench/results/trace/README.md#trace-batch from its
    batch.jsonl: for each configuration, the CPU dry run at the first batch
    replayed at every batch (`vramledger trace --batch`) against the job's own
    max_memory_allocated/reserved on the H200 at that batch.
    Usage: python3 bench/accuracy/trace_table.py batch batch.jsonl"""

    print("| configuration | traced at | batch | H200 max allocated (MiB) | replay: allocated | "
          "H200 max reserved (MiB) | replay: reserved |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst_a = worst_r = 0.0
    for line in open(sys.argv[1]):
        r = json.loads(line)
        reps = {x["batch"]: x for x in r["cpu"]["replays"]}
        traced = r["cpu"]["batch"]
        for b, g in r["gpu"].items():
            x = reps[int(b)]
            ea = 100 * (x["peak_allocated_bytes"] - g["max_allocated"]) / g["max_allocated"]
            er = 100 * (x["peak_reserved_bytes"] - g["max_reserved"]) / g["max_reserved"]
            if int(b) != traced:
                worst_a, worst_r = max(worst_a, abs(ea)), max(worst_r, abs(er))
            print("| %s | %d | %s | %.1f | %+.2f %% | %.1f | %+.2f %% |" % (
                r["name"], traced, b, g["max_allocated"] / 2**20, ea, g["max_reserved"] / 2**20, er))
    print("\nReplayed at another batch than traced: allocated within %.2f %%, reserved within %.2f %%."
          % (worst_a, worst_r))


def mode_fit_holdout():
    """Fit on part of a real sweep, predict the held-out points, print a
    Markdown table. Usage: python3 bench/accuracy/trace_table.py fit-holdout VL CSV HOLD [COLUMN]
    HOLD: a batch (an integer: that batch's points are held out), or
    "seq=S" (that sequence length's points). COLUMN: the measured peak to fit
    (default peak_bytes, the process; or peak_allocated_bytes, ...), or
    "by-phase": `fit --by-phase` (forward/backward and optimizer peaks
    fitted apart), judged on peak_allocated_bytes."""
    import csv, json, subprocess, sys, tempfile

    vl, name, hold = sys.argv[1], sys.argv[2], sys.argv[3]
    col = sys.argv[4] if len(sys.argv) > 4 else "peak_bytes"
    var, val = hold.split("=") if "=" in hold else ("batch", hold)
    rows = list(csv.DictReader(open(name)))
    train = [r for r in rows if int(r[var]) != int(val)]
    test = [r for r in rows if int(r[var]) == int(val)]
    phase = col == "by-phase"
    if phase:
        col = "peak_allocated_bytes"
        cols = ["batch", "seq", "peak_allocated_bytes", "peak_fwd_bwd_bytes", "peak_optimizer_bytes", "status"]
    else:
        cols = ["batch", "seq", col, "status"]
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(",".join(cols if phase else ["batch", "seq", "peak_bytes", "status"]) + "\n")
        for r in train:
            f.write(",".join(r[c] for c in cols) + "\n")
    args = [vl, "fit", "--csv", f.name, "--format", "json"] + (["--by-phase"] if phase else [])
    for r in test:
        args += ["--predict", f"batch={r['batch']},seq={r['seq']}"]
    d = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    how = "by phase, " if phase else ""
    print(f"`{name}` ({how}{col}): fit on {d['points']} points (terms {', '.join(d['coefficients'])}), R² {d['r2']:.5f}, "
          f"leave-one-out {100 * d['loo_rel_rms']:.2f} % rms; held out: {var} {val}\n")
    print("| batch | seq | measured bytes | predicted bytes | error |" + (" peak in |" if phase else "")
          + "\n|---:|---:|---:|---:|---:|" + ("---|" if phase else ""))
    for r, p in zip(test, d["predictions"]):
        m = int(r[col])
        print(f"| {r['batch']} | {r['seq']} | {m:,} | {p['peak_bytes']:,} | {100 * (p['peak_bytes'] - m) / m:+.2f} % |"
              + (f" {p['phase']} |" if phase else ""))


MODES = {
    "batch": mode_batch,
    "fit-holdout": mode_fit_holdout,
}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/trace")
