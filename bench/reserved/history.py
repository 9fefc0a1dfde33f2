"""The caching allocator's own history of one configuration, compact enough
to bring back: where a reservation the estimate misses comes from.

    python3 bench/reserved/history.py OUT.jsonl.gz CONFIG_JSON

CONFIG_JSON is one line of bench/configs/reserved.jsonl (or any
--config python/vramledger/measure.py takes). The run is measured as
measure.py measures it (the same function), with
torch.cuda.memory._record_memory_history(stacks="python") on. OUT holds
one JSON object per line: first {"config", "measured"}, then every event
of the device trace as [action, size, addr, stream, where], where is the
innermost frame outside torch's own files ("FILE:LINE FUNCTION", paths from
site-packages). Actions are PyTorch's (torch/cuda/memory.py _snapshot):
alloc, free_requested, free_completed, segment_alloc, segment_free,
segment_map, segment_unmap, oom. Replayed against vramledger's allocator
model, the events say which request made each segment.
"""
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from vramledger import measure  # noqa: E402


def where(e):
    for f in e.get("frames") or []:
        fn = f.get("filename", "")
        if "/torch/" in fn or fn.endswith("history.py") or "vramledger/measure.py" in fn:
            continue
        return "%s:%s %s" % (fn.split("site-packages/")[-1], f.get("line"), f.get("name"))
    return ""


def main():
    out, conf = sys.argv[1], json.loads(sys.argv[2])
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")
    measure.DEV = measure.Dev("cuda")
    c = measure.entry_of_config(conf)
    torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks="python")
    try:
        rec = (measure.run_train if c["task"] == "train" else measure.run_infer)(c, data)
    except Exception as ex:  # noqa: BLE001 - the file says the run failed
        rec = {"error": repr(ex)[:500]}
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    tr = max(snap.get("device_traces") or [[]], key=len)
    with gzip.open(out, "wt") as f:
        f.write(json.dumps({"config": c, "measured": rec}) + "\n")
        for e in tr:
            f.write(json.dumps([e.get("action"), int(e.get("size", 0)), int(e.get("addr", 0)),
                                int(e.get("stream", 0)), where(e)]) + "\n")
    print(c["name"], len(tr), "events", json.dumps({k: rec.get(k) for k in
                                                  ("peak_allocated", "peak_reserved", "error")}))


if __name__ == "__main__":
    main()
