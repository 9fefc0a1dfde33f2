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


MODES = {"batch": mode_batch}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/trace")
