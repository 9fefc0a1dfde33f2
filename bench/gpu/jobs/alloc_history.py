"""The caching allocator's own history of calibration runs.

    python3 bench/gpu/jobs/alloc_history.py OUTDIR NAME...

NAME is a run of python/vramledger/measure.py's suites (calibration, types) or of
bench/configs/unseen*.jsonl (configurations outside it). Each is
measured as measure.py measures it (the same function), with
torch.cuda.memory._record_memory_history on (Python stacks only), and
leaves in OUTDIR/NAME/:
- measured.json: measure.py's record of the run (max allocated/reserved,
  NVML), taken with the history on;
- hist.pickle: the snapshot (pytorch.org/memory_viz reads it);
- segments.json: every segment the allocator took from the driver, in
  order: size, the request that made it (size, the innermost frames of the
  Python stack), the bytes allocated and reserved just before — where
  reserved - allocated comes from.
"""
import glob
import json
import os
import pickle
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
from vramledger import measure  # noqa: E402
from job_common import frame_list  # noqa: E402  (bench/ is this script's directory)


def frames(e, n=4):
    return frame_list(e, n, "alloc_history", os.path.basename)


def segments(snap):
    tr = max(snap.get("device_traces") or [[]], key=len)
    alloc = reserved = 0
    segs, pending = [], None
    for e in tr:
        a, size = e.get("action"), int(e.get("size", 0))
        if a == "segment_alloc":
            pending = {"size": size, "allocated_before": alloc, "reserved_before": reserved}
            reserved += size
            segs.append(pending)
        elif a in ("segment_free", "segment_unmap"):
            reserved -= size
            segs.append({"freed": size})
        elif a == "alloc":
            if pending is not None:
                pending["request"] = size
                pending["frames"] = frames(e)
                pending = None
            alloc += size
        elif a == "free_completed":
            alloc -= size
    return segs


def main():
    out, names = sys.argv[1], sys.argv[2:]
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data")
    by_name = {c["name"]: c for c in measure.CALIBRATION + measure.TYPES}
    measure.DEV = measure.Dev("cuda")
    here = os.path.dirname(os.path.abspath(__file__))
    for lst in sorted(glob.glob(os.path.join(here, "..", "..", "configs", "unseen*.jsonl"))):
        with open(lst) as f:
            for line in f:
                u = json.loads(line)  # "set" (unseen-sets.jsonl) is not a field of the job
                by_name[u["name"]] = measure.T(
                    u["name"], u["model"], u.get("precision", "amp-bf16"),
                    u.get("optimizer", "adamw"), u.get("optimizer_impl", "foreach"),
                    u.get("attention", "sdpa"), u.get("checkpointing", "none"), u["batch"],
                    u["seq"], lora=u.get("lora", 0), holdout=True, targets=u.get("lora_targets"))
    for name in names:
        c = by_name[name]
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        torch.cuda.empty_cache()
        torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks="python")
        try:
            rec = (measure.run_train if c["task"] == "train" else measure.run_infer)(c, data)
        except Exception as ex:  # noqa: BLE001 - one failed run must not stop the rest
            rec = {"error": repr(ex)[:500]}
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(os.path.join(d, "hist.pickle"), "wb") as f:
            pickle.dump(snap, f)
        with open(os.path.join(d, "measured.json"), "w") as f:
            json.dump({"config": c, "measured": rec}, f, indent=1)
        with open(os.path.join(d, "segments.json"), "w") as f:
            json.dump(segments(snap), f, indent=1)
        print(name, json.dumps(rec), flush=True)
        del snap
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
