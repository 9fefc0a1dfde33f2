#!/usr/bin/env python3
"""How exact is the dry run? Every entry of bench/configs/dry-run.txt traced
with `vramledger trace` on its device (meta or cpu): the same job
(python/vramledger/measure.py) the H200 measured, with its model built from
the bundled config on that device. With --memtracker, PyTorch's MemTracker
under FakeTensorMode runs the same entries (bench/gpu/jobs/dry_run.py memtracker), the
peer to compare with. Writes OUT/dry-run.jsonl (one line per entry: the
trace's JSON, its exit status, seconds, the end of its stderr),
OUT/memtracker.jsonl and OUT/traces.tar.xz (each alloc.trace, to replay
again with other options). bench/accuracy/dry_run_table.py compares them with the
measurements.

  python3 bench/gpu/jobs/dry_run.py OUT [--entries FILE | --configs JSONL] [--jobs N] [--only NAME,...] [--memtracker]
Needs build-rel/vramledger (or VL) and transformers, peft.

By its first argument, also:

  memtracker: The peer of `vramledger trace` on a dry run: PyTorch's
    MemTracker (torch.distributed._tools.mem_tracker) under FakeTensorMode, on
    one entry of measure.py's suites (the same job the H200 measured and the
    tracer dry-runs). Needs a PyTorch built with CUDA (fake CUDA tensors), no
    GPU memory used. Prints one JSON line: the tracker's peak per device
    (bytes), or the error.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MEASURE = os.path.join(ROOT, "python", "vramledger", "measure.py")
UNSEEN = os.path.join(ROOT, "bench", "configs", "types-unseen.jsonl")


def entries(path, only):
    out = []
    for line in open(path):
        line = line.split("#")[0].split()
        if len(line) == 2 and (not only or line[0] in only):
            out.append((line[0], line[1]))
    return out


CONFIGS = [UNSEEN]  # JSON-lines files of configurations, looked up by name (--configs adds one)


def config_entries(path, only):
    """(name, device) of each line of a configurations file whose line
    says its dry run's device ("dry_run": "meta" or "cpu")"""
    out = []
    for line in open(path):
        c = json.loads(line)
        if not only or c["name"] in only:
            out.append((c["name"], c["dry_run"]))
    return out


def job_args(name):
    """measure.py's arguments for a suite entry or a line of a configurations file"""
    for path in CONFIGS:
        for line in open(path):
            c = json.loads(line)
            if c["name"] == name:
                return ["--config", json.dumps(c)]
    return ["--suite", name]


def trace_one(vl, work, name, device):
    d = os.path.join(work, name)
    env = dict(os.environ, OMP_NUM_THREADS="1" if device == "meta" else os.environ.get("VL_CPU_THREADS", "3"),
               CUDA_VISIBLE_DEVICES="")
    cmd = [vl, "trace", "--out", d, "--format", "json", "--gpu", "h200", "--from-mark", "measure", "--",
           sys.executable, MEASURE,
           os.path.join(work, name + ".measure.json"), "--in-process", "--device", device] + job_args(name)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as ex:
        rc, so, se = "timeout", ex.stdout or "", ex.stderr or ""
        so, se = (x.decode() if isinstance(x, bytes) else x for x in (so, se))
    r = {"name": name, "device": device, "rc": rc, "seconds": round(time.time() - t0, 1),
         "stderr_tail": se[-1500:]}
    try:
        r["trace"] = json.loads(so)
    except ValueError:
        r["trace"] = None
    return r


def memtracker_one(name):
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu", "jobs", "dry_run.py"), "memtracker", name],
                           capture_output=True, text=True, timeout=400,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception as ex:
        r = {"name": name, "error": "no result: %s" % ex}
    r["wall_s"] = round(time.time() - t0, 1)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--entries", default=os.path.join(ROOT, "bench", "configs", "dry-run.txt"))
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--configs", help="entries from this JSON-lines file instead (each with its dry_run device)")
    ap.add_argument("--only", default="")
    ap.add_argument("--memtracker", action="store_true")
    ap.add_argument("--work", default="/tmp/vl-dry-run")
    a = ap.parse_args()
    vl = os.environ.get("VL", os.path.join(ROOT, "build-rel", "vramledger"))
    only = set(filter(None, a.only.split(",")))
    if a.configs:
        CONFIGS.append(a.configs)
        todo = config_entries(a.configs, only)
    else:
        todo = entries(a.entries, only)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    # cpu dry runs compute: start them first, fewer at once
    todo.sort(key=lambda e: e[1] != "cpu")
    with cf.ThreadPoolExecutor(a.jobs) as ex, open(os.path.join(a.out, "dry-run.jsonl"), "w") as f:
        futs = [ex.submit(trace_one, vl, a.work, n, d) for n, d in todo]
        if a.memtracker:
            mfuts = [ex.submit(memtracker_one, n) for n, d in todo]
        for fu in futs:
            r = fu.result()
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(r["name"], r["rc"], r["seconds"], flush=True)
        if a.memtracker:
            with open(os.path.join(a.out, "memtracker.jsonl"), "w") as g:
                for fu in mfuts:
                    g.write(json.dumps(fu.result()) + "\n")
    with tarfile.open(os.path.join(a.out, "traces.tar.xz"), "w:xz") as t:
        for n, _ in todo:
            p = os.path.join(a.work, n, "alloc.trace")
            if os.path.exists(p):
                t.add(p, arcname=n + ".trace")


def mode_memtracker():
    """The peer of `vramledger trace` on a dry run: PyTorch's MemTracker
    (torch.distributed._tools.mem_tracker) under FakeTensorMode, on one entry of
    measure.py's suites (the same job the H200 measured and the tracer dry-runs).
    Needs a PyTorch built with CUDA (fake CUDA tensors), no GPU memory used.
    Prints one JSON line: the tracker's peak per device (bytes), or the error.

      python3 bench/gpu/jobs/dry_run.py memtracker NAME [--data DIR]"""

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


MODES = {"memtracker": mode_memtracker}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
