#!/usr/bin/env python3
"""How many blocks does the caching allocator hand out in the step the
suites measure? For each NAME (an entry of measure.py's suites), the job
python/vramledger/measure.py runs, with the allocator's count of
allocations (torch.cuda.memory_stats()["allocation.all.allocated"],
cumulative) read at the mark `measure` (the start of the measured step)
and after the step: their difference is the number of blocks the step
took. Against it, a trace's lines after its mark `measure` say how many
the dry run writes for the same step (python3 bench/gpu/jobs/alloc_counts.py
--trace FILE). One JSON line per NAME.

    python3 bench/gpu/jobs/alloc_counts.py NAME...
    python3 bench/gpu/jobs/alloc_counts.py --trace FILE...
"""
import json
import os
import sys


def trace_counts(path):
    """(allocations, frees) a trace writes after its mark `measure`, the
    GPU's side only: a meta trace's cpu lines are the job's own CPU
    tensors; a CPU trace's are all the GPU's"""
    meta = any(" meta " in line for line in open(path))
    on, a, f = False, 0, 0
    for line in open(path):
        w = line.split()
        if not w:
            continue
        if w[0] == "m" and w[1:2] == ["measure"]:
            on = True
        elif on and w[0] in ("a", "b") and len(w) > 3 and not (meta and w[3] == "cpu"):
            a += 1
        elif on and w[0] == "f":
            f += 1
    return a, f


def main():
    if sys.argv[1:2] == ["--trace"]:
        for p in sys.argv[2:]:
            a, f = trace_counts(p)
            print(json.dumps({"trace": os.path.basename(p), "allocations": a, "frees": f}))
        return
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    from vramledger import measure
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data")
    by_name = {c["name"]: c for c in measure.CALIBRATION + measure.TYPES}
    seen = {}

    def mark(self, name):
        seen[name] = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    measure.Dev.mark = mark
    measure.DEV = measure.Dev("cuda")
    for name in sys.argv[1:]:
        seen.clear()
        torch.cuda.empty_cache()
        rec = measure.run_train(by_name[name], data)
        end = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
        print(json.dumps({"name": name, "step_allocations": end - seen["measure"],
                          "peak_reserved": rec.get("peak_reserved"),
                          "peak_allocated": rec.get("peak_allocated")}), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
