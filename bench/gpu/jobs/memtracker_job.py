#!/usr/bin/env python3
"""The peer of `vramledger trace` on a dry run: PyTorch's MemTracker
(torch.distributed._tools.mem_tracker) under FakeTensorMode, on one entry of
measure.py's suites (the same job the H200 measured and the tracer dry-runs).
Needs a PyTorch built with CUDA (fake CUDA tensors), no GPU memory used.
Prints one JSON line: the tracker's peak per device (bytes), or the error.

  python3 bench/gpu/jobs/memtracker_job.py NAME [--data DIR]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python", "vramledger"))
import measure  # noqa: E402
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data"))
    a = ap.parse_args()
    todo = [c for c in measure.CALIBRATION + measure.TYPES if c["name"] == a.name]
    unseen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "types-unseen.jsonl")
    for line in open(unseen):
        if json.loads(line)["name"] == a.name:
            todo.append(measure.entry_of_config(json.loads(line)))
    if not todo:
        sys.exit("memtracker_job: no entry %r in measure.py's suites" % a.name)
    c = todo[0]
    measure.DEV = measure.Dev("cuda", measures=False)
    out = {"name": a.name, "torch": torch.__version__}
    t0 = time.time()
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker
        with FakeTensorMode(allow_non_fake_inputs=True):
            mt = MemTracker()
            zero_grad = torch.optim.Optimizer.zero_grad

            def zero_grad_then_reset(self, *args, **kwargs):  # one step's module stats at a time
                zero_grad(self, *args, **kwargs)
                mt.reset_mod_stats()
            torch.optim.Optimizer.zero_grad = zero_grad_then_reset
            with mt:
                (measure.run_train if c["task"] == "train" else measure.run_infer)(c, a.data)
            snap = mt.get_tracker_snapshot("peak")
        out["peak"] = {str(dev): int(v.get("Total", 0)) if isinstance(v, dict) else None
                       for dev, v in snap.items()}
    except Exception as ex:  # the peer's failure is a result of the comparison
        out["error"] = ("%s: %s" % (type(ex).__name__, ex))[:400]
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
