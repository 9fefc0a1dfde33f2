#!/usr/bin/env python3
"""What is live at the peak of a training step, by the Python line that
allocated it, for runs of measure.py's suites: the allocator's history
(torch.cuda.memory._record_memory_history, Python stacks) of the measured
run, summarised by bench/gpu/jobs/job_common.py summary() (the snapshot itself is too large
to bring back).

    python3 bench/gpu/jobs/type_peaks.py OUT.json NAME...

With every event of 64 MiB or more (large_events: index, action, size,
where). Each run is measured as measure.py measures it (its own run_train), in this
process one after another; the peak of each is its own (statistics reset).
"""
import json
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "python"))
from vramledger import measure  # noqa: E402
from job_common import summary  # noqa: E402


def main():
    out, names = sys.argv[1], sys.argv[2:]
    data = os.path.join(here, "..", "..", "..", "data")
    by_name = {c["name"]: c for c in measure.CALIBRATION + measure.TYPES}
    res = {"torch": torch.__version__, "runs": {}}
    for name in names:
        c = by_name[name]
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
        try:
            rec = (measure.run_train if c["task"] == "train" else measure.run_infer)(c, data)
            snap = torch.cuda.memory._snapshot()
            s = summary(snap, top=30)
            s["large_events"] = s.get("large_events", [])[:1500]
            res["runs"][name] = {"config": c, "measured": rec, "peak": s}
            del snap
        except Exception as ex:  # noqa: BLE001 - one failed run must not stop the rest
            res["runs"][name] = {"config": c, "error": repr(ex)[:500]}
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.empty_cache()
        print(name, res["runs"][name].get("error", "ok"), flush=True)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
