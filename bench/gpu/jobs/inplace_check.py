#!/usr/bin/env python3
"""Does the tracer make in place exactly the sums autograd makes in place?
For small versions (2 layers) of bundled models, one training step runs on
CUDA three ways, the allocator's history on with its stacks (C++ and Python):
- plain: autograd sums in place where input_buffer.cpp's
  can_accumulate_inplace allows;
- under a bare TorchDispatchMode: every sum is out of place there
  (isTensorSubclassLike), so the blocks it takes beyond the plain run's
  (bare - plain, by size) are the sums the plain run made in place;
- under vramledger's tracer: the sums its rule wrote in place
  (_Trace.in_place returning True), by size and by what their operands
  looked like (shape, dtype, a view or not).
The rule is right when in_place = bare - plain, size for size (both
sides, their differences, and the plain run's own blocks of a size the
rule wrote in place beyond them, with their stacks). One JSON line a model.

  python3 bench/gpu/jobs/inplace_check.py NAME[:ckpt]...
"""
import collections
import json
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))


def _block(n):
    """the caching allocator's rounding of a request (CUDACachingAllocator.cpp round_size:
    512 B multiples), the size its history shows"""
    return max(512, (n + 511) // 512 * 512)


class Bare(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def model(name, ckpt):
    import transformers
    d = json.load(open(os.path.join(ROOT, "data", "models", name + ".json")))
    mt = d.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype"):
        d.pop(k, None)
    d["num_hidden_layers"] = 2
    cfg = transformers.AutoConfig.for_model(mt, **d)
    torch.manual_seed(0)
    cls = transformers.AutoModelForMaskedLM if mt in ("deberta-v2", "bert", "roberta") else \
        transformers.AutoModelForCausalLM
    with torch.device("cuda"):
        m = cls.from_config(cfg, dtype=torch.bfloat16, attn_implementation="eager" if mt == "deberta-v2" else "sdpa")
    if ckpt:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.config.use_cache = False
    m.train()
    return m, cfg


def step(m, ids):
    m(input_ids=ids, labels=ids).loss.backward()
    m.zero_grad(set_to_none=True)


def allocs(m, ids, mode):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=400000, context="alloc", stacks="all")
    if mode is None:
        step(m, ids)
    else:
        with mode:
            step(m, ids)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return [e for e in snap["device_traces"][0] if e["action"] == "alloc"]


def top(e, n=6):
    """the innermost frames that name the op and the caller"""
    skip = ("c10::", "CUDACachingAllocator", "torch::unwind", "CapturedTraceback", "_Py", "PyObject",
            "pybind11", "at::_ops::", "empty", "c10::impl", "Dispatcher", "KernelFunction", "record_memory")
    out = []
    for f in e.get("frames", []):
        name = f.get("name", "")
        if not any(k in name for k in skip):
            out.append(name[:100])
        if len(out) == n:
            break
    return out


def main():
    from vramledger import tracer
    fired = []
    orig = tracer._Trace.in_place
    seen = {}  # storage key -> what the operand looked like at its sum
    reused = tracer._reused_operand

    def look(torch_, tr, func, args, kwargs):
        k = reused(torch_, tr, func, args, kwargs)
        if k is not None:
            x, y = args[0], args[1] if len(args) > 1 else None
            seen[k] = {"op": str(func), "shape": list(x.shape), "dtype": str(x.dtype).split(".")[-1],
                       "x_view": x._is_view(), "x_whole": x.untyped_storage().nbytes() == x.nbytes,
                       "y_view": bool(isinstance(y, torch.Tensor) and y._is_view()),
                       "param_shape": tuple(x.shape) in shapes}
        return k
    tracer._reused_operand = look

    class Sys:  # sys for the tracer, with _reused_operand's frames seen past `look`
        def __getattr__(self, name):
            return getattr(sys, name)

        @staticmethod
        def _getframe(n=0):
            if sys._getframe(1).f_code is reused.__code__:
                return sys._getframe(n + 2)
            return sys._getframe(n + 1)
    tracer.sys = Sys()

    def counted(self, k):
        e = self.live.get(k)
        r = orig(self, k)
        if r:
            fired.append(e[2] if e else -1)
            kinds[json.dumps(seen.get(k), sort_keys=True)] += 1
        return r
    tracer._Trace.in_place = counted
    for arg in sys.argv[1:]:
        name, _, opt = arg.partition(":")
        m, cfg = model(name, opt == "ckpt")
        shapes = {tuple(p.shape) for p in m.parameters()}
        kinds = collections.Counter()
        ids = torch.randint(0, cfg.vocab_size, (2, 512), device="cuda")
        step(m, ids)  # warm: workspaces
        plain = allocs(m, ids, None)
        bare = allocs(m, ids, Bare())
        del fired[:]
        tracer.install(torch, "/tmp/inplace_check.trace")
        try:
            step(m, ids)
        finally:
            tracer.uninstall()
        extra = collections.Counter(int(e["size"]) for e in bare) - \
            collections.Counter(int(e["size"]) for e in plain)
        sizes = collections.Counter()
        for n in fired:  # the block the caching allocator would give that tensor
            sizes[_block(n)] += 1
        left = dict(extra)
        shown = []
        for e in bare:
            if left.get(int(e["size"]), 0) > 0:
                left[int(e["size"])] -= 1
                shown.append({"size": int(e["size"]), "frames": top(e)})
        print(json.dumps({"model": arg, "plain_allocations": len(plain), "bare_allocations": len(bare),
                          "tracer_in_place": len(fired), "expected_in_place": len(bare) - len(plain),
                          "bare_extra_sizes": {str(k): v for k, v in sorted(extra.items())},
                          "tracer_in_place_sizes": {str(k): v for k, v in sorted(sizes.items())},
                          "fired_not_extra": {str(k): v for k, v in sorted((sizes - extra).items())},
                          "extra_not_fired": {str(k): v for k, v in sorted((extra - sizes).items())},
                          "bare_extra": shown,
                          "tracer_in_place_kinds": [[json.loads(a), n] for a, n in sorted(kinds.items())],
                          # the plain run's own blocks of the sizes the rule wrote in place
                          # but the plain run did not: where they come from
                          "plain_of_fired_not_extra": [{"size": int(e["size"]), "frames": top(e, 14)}
                                                       for e in plain if int(e["size"]) in
                                                       (sizes - extra)][:8]}), flush=True)
        del m
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
