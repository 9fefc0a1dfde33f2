#!/usr/bin/env python3
"""Does a TorchDispatchMode change what a job allocates on CUDA? A small
DeBERTa-v3 (2 layers, AMP bf16, batch 8 x 512) runs forward and backward
three ways: plain, under a mode that only calls each op, and under
vramledger's tracer; each with the allocator's history on, C++ and Python
stacks kept. Prints one JSON line a way: allocations, bytes, and for the
allocations the plain run does not make, their innermost C++ frames.

  python3 bench/gpu/jobs/dispatch_mode_allocs.py [EVENTS.json] > OUT.jsonl
EVENTS.json: every allocation and free of each way, with its frames.
"""
import collections
import json
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))


class Bare(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def model():
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM
    c = DebertaV2Config(hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                        intermediate_size=3072, vocab_size=32000, relative_attention=True,
                        pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_buckets=256,
                        norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False)
    torch.manual_seed(0)
    return DebertaV2ForMaskedLM(c).cuda()


def step(m, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = m(input_ids=ids, labels=ids)
    out.loss.backward()


def events(m, ids, mode):
    step(m, ids)  # warm: workspaces, autocast
    m.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=200000, context="alloc", stacks="all")
    if mode is None:
        step(m, ids)
    else:
        with mode:
            step(m, ids)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    m.zero_grad(set_to_none=True)
    return [e for e in snap["device_traces"][0] if e["action"] in ("alloc", "free_completed")]


SKIP = ("c10::cuda", "CUDACachingAllocator", "record_memory", "gather_with_cpp", "torch::unwind",
        "torch::CapturedTraceback", "_PyEval", "PyObject_", "pybind11", "empty_", "empty(", "detail::",
        "resize", "wrapper_CUDA", "c10::impl::", "c10::Dispatcher", "c10::BoxedKernel", "c10::KernelFunction",
        "at::_ops::", "_PyObject", "PyVectorcall", "cfunction", "method_vectorcall")


def frames(e, n=10):
    """the innermost frames that say which op and which caller (C++ then Python)"""
    out = []
    for f in e.get("frames", []):
        name = f.get("name", "")
        if any(k in name for k in SKIP):
            continue
        fn = f.get("filename", "")
        out.append((name[:90] + (" @" + os.path.basename(fn) + ":" + str(f.get("line")) if fn.endswith(".py") else "")))
        if len(out) == n:
            break
    return out


def main():
    m = model()
    ids = torch.randint(0, 32000, (8, 512), device="cuda")
    plain = events(m, ids, None)
    ways = {"plain": plain, "bare-mode": events(m, ids, Bare())}
    try:
        from vramledger import tracer
        tracer.install(torch, "/tmp/dispatch_mode_allocs.trace")
        ways["tracer"] = events(m, ids, None)
        tracer.uninstall()
    except Exception as ex:  # the tracer's own failure is a result too
        ways["tracer"] = []
        sys.stderr.write("tracer: %r\n" % ex)
    if len(sys.argv) > 1:  # every event, with its frames, for an alignment of the ways
        with open(sys.argv[1], "w") as f:
            json.dump({name: [[e["action"][0], int(e["size"]), e.get("addr"), frames(e)] for e in ev]
                       for name, ev in ways.items()}, f)
    ways = {k: [e for e in v if e["action"] == "alloc"] for k, v in ways.items()}
    plain = ways["plain"]
    base = collections.Counter(int(e["size"]) for e in plain)
    for name, ev in ways.items():
        extra = collections.Counter(int(e["size"]) for e in ev) - base
        shown = []
        left = dict(extra)
        for e in ev:
            s = int(e["size"])
            if left.get(s, 0) > 0 and s >= 1 << 20:
                left[s] -= 1
                shown.append({"size": s, "frames": frames(e)})
        print(json.dumps({"way": name, "allocations": len(ev), "bytes": sum(int(e["size"]) for e in ev),
                          "extra_sizes": {str(k): v for k, v in sorted(extra.items())},
                          "extra_large": shown[:12]}))


if __name__ == "__main__":
    main()
