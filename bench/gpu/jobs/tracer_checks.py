#!/usr/bin/env python3
"""Checks of the tracer's rules and of the allocator's models against what a
job really allocates (bench/results/dry-run/, trace/, cuda-reduce/), one by
its first argument:

  accumulate: Does the tracer's in-place rule for second gradients fire on
    this torch? tests/python/job_accumulate.py traced with the rule on and off
    (the allocations of each), and what the rule sees at each candidate op:
    grad mode, the frame below the dispatch mode, the operand's layout.
  inplace: Does the tracer make in place exactly the sums autograd makes in
    place? For small versions (2 layers) of bundled models, one training step
    runs on CUDA three ways, the allocator's history on with its stacks (C++
    and Python): - plain: autograd sums in place where input_buffer.cpp's
    can_accumulate_inplace allows; - under a bare TorchDispatchMode: every sum
    is out of place there (isTensorSubclassLike), so the blocks it takes
    beyond the plain run's (bare - plain, by size) are the sums the plain run
    made in place; - under vramledger's tracer: the sums its rule wrote in
    place (_Trace.in_place returning True), by size and by what their operands
    looked like (shape, dtype, a view or not). The rule is right when in_place
    = bare - plain, size for size (both sides, their differences, and the
    plain run's own blocks of a size the rule wrote in place beyond them, with
    their stacks). One JSON line a model.
  sdpa-backends: Which kernel scaled_dot_product_attention runs on this CUDA
    device, and what it allocates, for the head layouts, masks and dtypes
    transformers passes: the rules vramledger trace's meta path follows
    (python/vramledger/tracer.py, _meta_sdpa_as_cuda). One JSON line per case:
    the ATen attention ops the call reached (forward and backward), and the
    peak allocated above the inputs in the forward and in the backward
    (bytes).
  sdpa-choice: SDPA's backend as this CUDA device's PyTorch picks it
    (torch._fused_sdp_choice) over a grid of dtypes, head layouts (equal,
    grouped, one key head), head sizes, lengths, masks (none, bool, float,
    float requiring grad), dropout (0, 0.1, 0.125), is_causal and
    requires_grad; with --rule, the tracer's _cuda_sdpa_backend on meta
    tensors of the same grid (runs on any machine). One JSON file:
      python3 bench/gpu/jobs/tracer_checks.py sdpa-choice OUT.json [--rule]
  alloc-counts: How many blocks does the caching allocator hand out in the
    step the suites measure? For each NAME (an entry of measure.py's suites),
    the job python/vramledger/measure.py runs, with the allocator's count of
    allocations (torch.cuda.memory_stats()["allocation.all.allocated"],
    cumulative) read at the mark `measure` (the start of the measured step)
    and after the step: their difference is the number of blocks the step
    took. Against it, a trace's lines after its mark `measure` say how many
    the dry run writes for the same step (python3
    bench/gpu/jobs/tracer_checks.py alloc-counts --trace FILE). One JSON line per NAME.
  dispatch-mode: Does a TorchDispatchMode change what a job allocates on CUDA?
    A small DeBERTa-v3 (2 layers, AMP bf16, batch 8 x 512) runs forward and
    backward three ways: plain, under a mode that only calls each op, and
    under vramledger's tracer; each with the allocator's history on, C++ and
    Python stacks kept. Prints one JSON line a way: allocations, bytes, and
    for the allocations the plain run does not make, their innermost C++
    frames.
  snapshot: memory_viz files on the H200: `vramledger run --snapshot-at
    peak|exit` of a small GPT-2 training job (the probe's dumps of
    torch.cuda.memory._snapshot()), and `vramledger trace --replay
    --snapshot` of the same job's trace; each loaded by PyTorch's own
    torch.cuda._memory_viz (segment_plot and trace_plot: the pages
    pytorch.org/memory_viz draws), the run's dumps also read back by the C
    side through `python -m vramledger.history` and replayed.   python3
    bench/gpu/jobs/tracer_checks.py snapshot VL OUT   -> OUT/snapshot-check.json
  cuda-reduce: Are the scratch blocks of ATen's CUDA reductions what
    vramledger.cuda_reduce says? Each case (an op, a shape, the dimensions
    reduced, a dtype, contiguous or transposed) runs once on the GPU with
    the caching allocator's history on; every block the op takes beyond its
    result is its scratch. One JSON line a case: the blocks seen, the blocks
    predicted for this device (its SMs and threads per SM), match or not.
  trace: A training job for the allocation-replay evidence: the same script
    runs on the GPU (measured) and on the CPU (`vramledger trace`'s dry run,
    predicted). It knows nothing of vramledger.
  history: The caching allocator's own history of calibration runs.
"""
import sys


def mode_accumulate():
    """Does the tracer's in-place rule for second gradients fire on this
    torch? tests/python/job_accumulate.py traced with the rule on and off
    (the allocations of each), and what the rule sees at each candidate op:
    grad mode, the frame below the dispatch mode, the operand's layout.

      python3 bench/gpu/jobs/tracer_checks.py accumulate"""
    import json
    import os
    import subprocess
    import sys

    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    JOB = os.path.join(ROOT, "tests", "python", "job_accumulate.py")
    PROBE = r'''
    import sys, torch
    sys.path.insert(0, sys.argv[1])
    from vramledger import tracer
    seen = []
    orig = tracer._reused_operand
    def look(torch_, tr, func, args, kwargs):
        f = sys._getframe(2)
        chain = []
        while f is not None and len(chain) < 4:
            chain.append("%s:%s" % (f.f_code.co_filename.split("site-packages/")[-1], f.f_code.co_name))
            f = f.f_back
        r = orig(torch_, tr, func, args, kwargs)
        seen.append({"op": str(func), "grad": torch_.is_grad_enabled(), "frames": chain,
                     "contiguous": args[0].is_contiguous(), "key_live": r is not None})
        return r
    tracer._reused_operand = look
    tracer.install(torch, "/tmp/acc_probe.trace")
    lin = torch.nn.Linear(256, 256, bias=False, device="meta")
    x = torch.empty(512, 256, device="meta", requires_grad=True)
    h = lin(x)
    y = h * 3 + lin(h) * 2
    (y * y).sum().backward()
    tracer.uninstall()
    import json
    print(json.dumps(seen))
    '''


    def main():
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        out = {}
        for rule in ("on", "off"):
            subprocess.run([sys.executable, JOB, "/tmp/acc_%s.trace" % rule, rule], env=env, check=True)
            with open("/tmp/acc_%s.trace" % rule) as f:
                out[rule] = sum(1 for l in f if l[:1] in "ab")
        p = subprocess.run([sys.executable, "-c", PROBE, os.path.join(ROOT, "python")], env=env,
                           capture_output=True, text=True)
        out["candidates"] = json.loads(p.stdout) if p.returncode == 0 else p.stderr[-2000:]
        print(json.dumps(out, indent=1))


    if __name__ == "__main__":
        main()


def mode_inplace():
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

      python3 bench/gpu/jobs/tracer_checks.py inplace NAME[:ckpt]..."""
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


def mode_sdpa_backends():
    """Which kernel scaled_dot_product_attention runs on this CUDA device, and
    what it allocates, for the head layouts, masks and dtypes transformers
    passes: the rules vramledger trace's meta path follows
    (python/vramledger/tracer.py, _meta_sdpa_as_cuda). One JSON line per case:
    the ATen attention ops the call reached (forward and backward), and the
    peak allocated above the inputs in the forward and in the backward (bytes).

      python3 bench/gpu/jobs/tracer_checks.py sdpa-backends > sdpa.jsonl"""
    import itertools
    import json

    import torch
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    OPS = ("flash", "efficient", "cudnn", "math", "bmm", "softmax", "matmul", "repeat_interleave", "expand")


    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            n = func.overloadpacket.__name__
            if any(k in n for k in OPS) and n not in self.seen:
                self.seen.append(n)
            return func(*args, **(kwargs or {}))


    def case(dtype, hq, hkv, d, sq, sk, mask, causal, gqa, grad, b=2):
        dev = "cuda"
        q = torch.randn(b, hq, sq, d, device=dev, dtype=dtype, requires_grad=grad)
        k = torch.randn(b, hkv, sk, d, device=dev, dtype=dtype, requires_grad=grad)
        v = torch.randn(b, hkv, sk, d, device=dev, dtype=dtype, requires_grad=grad)
        m = None
        if mask == "bool":
            m = torch.ones(b, 1, sq, sk, device=dev, dtype=torch.bool).tril(sk - sq)
        elif mask == "float":
            m = torch.zeros(b, 1, sq, sk, device=dev, dtype=dtype)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd, bwd = Ops(), Ops()
        out = {"dtype": str(dtype).replace("torch.", ""), "hq": hq, "hkv": hkv, "d": d, "sq": sq, "sk": sk,
               "b": b, "mask": mask, "causal": causal, "enable_gqa": gqa, "grad": grad}
        try:
            with fwd:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, enable_gqa=gqa)
            torch.cuda.synchronize()
            out["fwd_ops"] = fwd.seen
            out["fwd_peak"] = torch.cuda.max_memory_allocated() - base
            out["fwd_kept"] = torch.cuda.memory_allocated() - base
            out["out_bytes"] = o.numel() * o.element_size()
            if grad:
                g = torch.ones_like(o)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base2 = torch.cuda.memory_allocated()
                with bwd:
                    o.backward(g)
                torch.cuda.synchronize()
                out["bwd_ops"] = bwd.seen
                out["bwd_peak"] = torch.cuda.max_memory_allocated() - base2
        except Exception as ex:
            out["error"] = ("%s: %s" % (type(ex).__name__, ex))[:300]
        print(json.dumps(out), flush=True)


    def main():
        print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                          "capability": torch.cuda.get_device_capability(0)}))
        for dtype, (hq, hkv), d, mask, grad in itertools.product(
                (torch.bfloat16, torch.float16, torch.float32), ((16, 16), (16, 4), (16, 1)), (64, 128, 256),
                ("none", "bool", "float"), (True, False)):
            for gqa in ((False,) if hq == hkv else (True,)):
                causal = mask == "none"
                case(dtype, hq, hkv, d, 512, 512, None if mask == "none" else mask, causal, gqa, grad)
        # generate(): one new query against a cache, with and without a mask
        for dtype, (hq, hkv), mask in itertools.product((torch.bfloat16, torch.float32), ((16, 16), (16, 4)),
                                                        ("none", "bool")):
            for sq in (1, 7):
                case(dtype, hq, hkv, 128, sq, 1024, None if mask == "none" else mask, False, hq != hkv, False)
        # no causal flag and no mask (encoders)
        for dtype in (torch.bfloat16, torch.float32):
            case(dtype, 12, 12, 64, 512, 512, None, False, False, True)


    if __name__ == "__main__":
        main()


def mode_alloc_counts():
    """How many blocks does the caching allocator hand out in the step the
    suites measure? For each NAME (an entry of measure.py's suites), the job
    python/vramledger/measure.py runs, with the allocator's count of
    allocations (torch.cuda.memory_stats()["allocation.all.allocated"],
    cumulative) read at the mark `measure` (the start of the measured step)
    and after the step: their difference is the number of blocks the step
    took. Against it, a trace's lines after its mark `measure` say how many
    the dry run writes for the same step (python3 bench/gpu/jobs/tracer_checks.py alloc-counts
    --trace FILE). One JSON line per NAME.

        python3 bench/gpu/jobs/tracer_checks.py alloc-counts NAME...
        python3 bench/gpu/jobs/tracer_checks.py alloc-counts --trace FILE..."""
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


def mode_dispatch_mode():
    """Does a TorchDispatchMode change what a job allocates on CUDA? A small
    DeBERTa-v3 (2 layers, AMP bf16, batch 8 x 512) runs forward and backward
    three ways: plain, under a mode that only calls each op, and under
    vramledger's tracer; each with the allocator's history on, C++ and Python
    stacks kept. Prints one JSON line a way: allocations, bytes, and for the
    allocations the plain run does not make, their innermost C++ frames.

      python3 bench/gpu/jobs/tracer_checks.py dispatch-mode [EVENTS.json] > OUT.jsonl
    EVENTS.json: every allocation and free of each way, with its frames."""
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


def mode_snapshot():
    """memory_viz files on the H200: `vramledger run --snapshot-at peak|exit` of a
    small GPT-2 training job (the probe's dumps of torch.cuda.memory._snapshot()),
    and `vramledger trace --replay --snapshot` of the same job's trace; each
    loaded by PyTorch's own torch.cuda._memory_viz (segment_plot and trace_plot:
    the pages pytorch.org/memory_viz draws), the run's dumps also read back by
    the C side through `python -m vramledger.history` and replayed.
      python3 bench/gpu/jobs/tracer_checks.py snapshot VL OUT   -> OUT/snapshot-check.json"""
    import glob
    import json
    import os
    import pickle
    import subprocess

    import torch.cuda._memory_viz as mv

    vl, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    job = [sys.executable, "-c", """
    import torch, transformers
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=4096)).cuda()
    o = torch.optim.AdamW(m.parameters())
    for i in range(4):
        x = torch.randint(0, 4096, (8, 128), device='cuda')
        m(input_ids=x, labels=x).loss.backward(); o.step(); o.zero_grad(set_to_none=True)
    print(torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
    """]
    res = {}
    for at in ("peak", "exit"):
        d = os.path.join("/tmp", "snap-" + at)
        p = subprocess.run([vl, "run", "--quiet", "--out", d, "--snapshot-at", at, "--"] + job,
                           capture_output=True, text=True)
        files = sorted(glob.glob(os.path.join(d, "*_snapshot_pid*.pickle")))
        r = {"rc": p.returncode, "stdout": p.stdout.strip(), "files": [os.path.basename(f) for f in files]}
        if files:
            snap = pickle.load(open(files[-1], "rb"))
            r["segments"] = len(snap["segments"])
            r["segment_plot_bytes"] = len(mv.segment_plot(snap))
            r["trace_plot_bytes"] = len(mv.trace_plot(snap))
            h = subprocess.run([sys.executable, "-m", "vramledger.history", files[-1]], capture_output=True,
                               text=True)
            r["history"] = h.stderr.strip()[-400:]
            tr = os.path.join(out, at + ".hist.trace")
            open(tr, "w").write(h.stdout)
            rp = subprocess.run([vl, "trace", "--replay", tr, "--format", "json"], capture_output=True, text=True)
            r["replay"] = json.loads(rp.stdout)["replays"][0] if rp.returncode == 0 else rp.stderr[-300:]
            os.remove(tr)
        res["run-" + at] = r
    # the trace of the same job, and its replay as a snapshot
    d = "/tmp/snap-trace"
    p = subprocess.run([vl, "trace", "--out", d, "--format", "json"] + ["--"] + job, capture_output=True, text=True)
    snapf = os.path.join(out, "trace-replay.pickle")
    rp = subprocess.run([vl, "trace", "--replay", os.path.join(d, "alloc.trace"), "--format", "json",
                         "--snapshot", snapf], capture_output=True, text=True)
    r = {"rc": rp.returncode, "stderr": rp.stderr[-300:]}
    if rp.returncode == 0:
        snap = pickle.load(open(snapf, "rb"))
        r["segments"] = len(snap["segments"])
        r["replay"] = json.loads(rp.stdout)["replays"][0]
        r["segment_plot_bytes"] = len(mv.segment_plot(snap))
        r["trace_plot_bytes"] = len(mv.trace_plot(snap))
    res["trace-snapshot"] = r
    json.dump(res, open(os.path.join(out, "snapshot-check.json"), "w"), indent=1)
    print(json.dumps(res)[:3000])


def mode_cuda_reduce():
    """Are the scratch blocks of ATen's CUDA reductions what
    vramledger.cuda_reduce says? Each case (an op, a shape, the dimensions
    reduced, a dtype, contiguous or transposed) runs once on the GPU with the
    caching allocator's history on; every block the op takes beyond its
    result is its scratch. One JSON line a case: the blocks seen, the blocks
    predicted for this device (its SMs and threads per SM), match or not.

      python3 bench/gpu/jobs/tracer_checks.py cuda-reduce > OUT.jsonl"""
    import itertools
    import json
    import os

    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    from vramledger import cuda_reduce  # noqa: E402

    P = torch.cuda.get_device_properties(0)
    SMS, TPS = P.multi_processor_count, P.max_threads_per_multi_processor
    OPS = {
        "sum": lambda x, d: x.sum(d),
        "mean": lambda x, d: x.mean(d),
        "amax": lambda x, d: x.amax(d),
        "norm": lambda x, d: torch.linalg.vector_norm(x, dim=d),
    }
    DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


    def seen(op, x, dims):
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=1000)
        y = OPS[op](x, dims)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        ev = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
        del y
        return [int(e["size"]) for e in ev[1:]]  # the first is the result


    def predicted(op, x, dims):
        acc = x.element_size() if op == "amax" else 4
        red = {d % x.dim() for d in dims}
        return cuda_reduce.transients(list(x.shape), list(x.stride()), red, acc, x.element_size(), SMS, TPS)


    def cases():
        rows = (1, 7, 64, 512, 2048, 8192, 16384)
        cols = (3, 256, 768, 3072, 12288, 50257)
        for m, n, op, dt in itertools.product(rows, cols, OPS, DTYPES):
            for dims, t in (((0,), False), ((1,), False), ((0, 1), False), ((0,), True)):
                yield op, dt, (m, n), dims, t
        for b, s, h in ((2, 1024, 4096), (8, 512, 768), (4, 2048, 3072)):
            for op in ("sum", "mean"):
                yield op, "bf16", (b, s, h), (0, 1), False
                yield op, "fp32", (b, s, h), (0, 1), False
                yield op, "bf16", (b, s, h), (2,), False
                yield op, "bf16", (b, s, h), (0, 2), False


    def main():
        bad = 0
        for op, dt, shape, dims, transposed in cases():
            x = torch.randn(shape, device="cuda", dtype=DTYPES[dt])
            if transposed:
                x = x.t()
            got, want = seen(op, x, dims), predicted(op, x, dims)
            bad += got != want
            print(json.dumps({"op": op, "dtype": dt, "shape": list(x.shape), "stride": list(x.stride()),
                              "dims": list(dims), "seen": got, "predicted": want, "match": got == want}))
            del x
        # a Linear layer's bias gradient in autograd: the column sum over batch x sequence
        lin = torch.nn.Linear(3072, 12288, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(1, 2048, 3072, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = lin(x)
        g = torch.randn_like(y)
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=1000)
        y.backward(g)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        sizes = [int(e["size"]) for e in snap["device_traces"][0] if e["action"] == "alloc"]
        print(json.dumps({"op": "linear-backward", "shape": [1, 2048, 3072, 12288], "seen_all": sizes,
                          "predicted_scratch": cuda_reduce.transients([2048, 12288], [12288, 1], {0}, 4, 2, SMS, TPS)}))
        sys.stderr.write("device %s: %d SMs, %d threads/SM; %d mismatches\n" % (P.name, SMS, TPS, bad))


    if __name__ == "__main__":
        main()


def mode_trace():
    """A training job for the allocation-replay evidence: the same
    script runs on the GPU (measured) and on the CPU (`vramledger trace`'s dry
    run, predicted). It knows nothing of vramledger.

      --device cuda|cpu|meta  --model gpt2|llama|llama70b|bert|mlp|conv  --precision fp32|bf16|amp-bf16
      [--opt adamw|adamw-fused|adamw-loop|sgd|adam] [--ckpt] [--lora 16] [--attn sdpa|eager]
      [--batch 4 --seq 256 --steps 3] [--history FILE]

    mlp and conv are models no estimator knows: a residual MLP with a custom
    loss, and a small convolutional network. With --history on CUDA, the
    caching allocator's own event history (torch.cuda.memory's
    _record_memory_history) is dumped to FILE, for the replay's exactness
    check. Prints one JSON line: the job's max_memory_allocated/reserved."""
    import argparse
    import contextlib
    import json

    import torch
    import torch.utils.checkpoint

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--precision", default="amp-bf16")
    ap.add_argument("--opt", default="adamw")
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--lora", type=int, default=0)
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--history")
    a = ap.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda and a.history:
        torch.cuda.memory._record_memory_history(max_entries=4_000_000)
    torch.manual_seed(0)


    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d)
            self.up = torch.nn.Linear(d, 4 * d)
            self.down = torch.nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


    class ResidualMLP(torch.nn.Module):
        """Not a transformer: 8 residual blocks on 1024 features, 10 classes."""
        def __init__(self, d=1024, n=8):
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))
            self.head = torch.nn.Linear(d, 10)

        def forward(self, x):
            for b in self.blocks:
                if a.ckpt:
                    x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
                else:
                    x = b(x)
            return self.head(x)


    class ConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layers, c = [], 3
            for w in (64, 128, 256):
                layers += [torch.nn.Conv2d(c, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                           torch.nn.Conv2d(w, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                           torch.nn.MaxPool2d(2)]
                c = w
            self.body = torch.nn.Sequential(*layers)
            self.head = torch.nn.Linear(256 * 8 * 8, 10)

        def forward(self, x):
            return self.head(self.body(x).flatten(1))


    def hf_model():
        from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, GPT2Config,
                                  LlamaConfig)
        if a.model == "gpt2":
            cfg, targets = GPT2Config(attn_implementation=a.attn), ["c_attn"]
        elif a.model == "llama70b":  # Llama-2-70B's shape: for meta tensors only
            cfg = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                              num_attention_heads=64, num_key_value_heads=8, vocab_size=32000,
                              max_position_embeddings=4096, attn_implementation=a.attn)
            targets = ["q_proj", "v_proj"]
        elif a.model == "llama":
            cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                              num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                              max_position_embeddings=4096, attn_implementation=a.attn)
            targets = ["q_proj", "v_proj"]
        else:
            cfg, targets = BertConfig(attn_implementation=a.attn), ["query", "value"]
        with dev:
            m = (AutoModelForMaskedLM if a.model == "bert" else AutoModelForCausalLM).from_config(cfg)
        return m, targets, cfg.vocab_size


    hf = a.model in ("gpt2", "llama", "llama70b", "bert")
    if hf:
        model, targets, vocab = hf_model()
    elif a.model == "mlp":
        model = ResidualMLP().to(dev)
    elif a.model == "conv":
        model = ConvNet().to(dev)
    else:
        sys.exit("unknown model " + a.model)
    if a.precision == "bf16":
        model.to(torch.bfloat16)
    if a.ckpt and hf:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if a.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=a.lora, lora_alpha=2 * a.lora,
                                                 target_modules=targets, lora_dropout=0.0))
    params = [p for p in model.parameters() if p.requires_grad]
    if a.opt == "adamw":  # PyTorch's default implementation for the device
        opt = torch.optim.AdamW(params, lr=1e-4)
    elif a.opt == "adamw-fused":
        opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    elif a.opt == "adamw-loop":
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)
    elif a.opt == "adam":
        opt = torch.optim.Adam(params, lr=1e-4)
    elif a.opt == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    else:
        sys.exit("unknown optimizer " + a.opt)

    g = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        if hf:
            ids = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
            batch = {"input_ids": ids, "labels": ids}
            if dev.type == "meta":  # transformers reads position ids' values to find packed
                batch["attention_mask"] = torch.ones_like(ids)  # sequences when no mask is given
        elif a.model == "mlp":
            x = torch.randn(a.batch, 1024, generator=g).to(dev)
            y = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
        else:
            x = torch.randn(a.batch, 3, 64, 64, generator=g).to(dev)
            y = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
        if a.precision == "bf16" and not hf:
            x = x.to(torch.bfloat16)
        amp = a.precision == "amp-bf16"  # (there is no autocast for meta tensors)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16) if amp else contextlib.nullcontext():
            if hf:
                loss = model(**batch).loss
            else:
                logits = model(x).float()
                # a loss of our own: softmax cross-entropy plus a margin term
                logp = torch.log_softmax(logits, dim=-1)
                loss = -logp.gather(1, y[:, None]).mean() + 0.01 * logits.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    out = {"device": a.device, "params": sum(p.numel() for p in model.parameters()),
           "loss": None if dev.type == "meta" else float(loss), "torch": torch.__version__}
    if cuda:
        torch.cuda.synchronize()
        out["max_allocated"] = torch.cuda.max_memory_allocated()
        out["max_reserved"] = torch.cuda.max_memory_reserved()
        if a.history:
            torch.cuda.memory._dump_snapshot(a.history)
            torch.cuda.memory._record_memory_history(enabled=None)
    print(json.dumps(out))


def mode_history():
    """The caching allocator's own history of calibration runs.

        python3 bench/gpu/jobs/tracer_checks.py history OUTDIR NAME...

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
      reserved - allocated comes from."""
    import glob
    import json
    import os
    import pickle

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


def mode_sdpa_choice():
    """SDPA's backend as this device's PyTorch picks it, or (--rule) as the
    tracer's rule picks it on meta tensors, over one grid (module doc)."""
    import itertools
    import json
    import os

    import torch
    rule = "--rule" in sys.argv
    if rule:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                        "python"))
        from vramledger import tracer
    # torch.nn.attention.SDPBackend's values (sdp_utils.h SDPBackend)
    names = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
    dev = "meta" if rule else "cuda"
    rows = []
    for dt, (hq, hk), d, s, mk, drop, causal, rg in itertools.product(
            ("bf16", "fp16", "fp32"), ((16, 16), (16, 2), (16, 1)), (64, 128, 256), (128, 1024),
            ("none", "bool", "float", "float_grad"), (0.0, 0.1, 0.125), (False, True), (True, False)):
        if mk != "none" and causal:
            continue
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dt]
        q = torch.empty(2, hq, s, d, device=dev, dtype=dtype, requires_grad=rg)
        k = torch.empty(2, hk, s, d, device=dev, dtype=dtype, requires_grad=rg)
        v = torch.empty(2, hk, s, d, device=dev, dtype=dtype, requires_grad=rg)
        m = None
        if mk == "bool":
            m = torch.ones(2, 1, s, s, device=dev, dtype=torch.bool)
        elif mk.startswith("float"):
            m = torch.zeros(2, 1, s, s, device=dev, dtype=dtype, requires_grad=mk == "float_grad")
        if rule:
            r = tracer._cuda_sdpa_backend(torch, q, k, v, m, drop, causal, hq != hk)
        else:
            r = names.get(int(torch._fused_sdp_choice(q, k, v, m, drop, causal, scale=None,
                                                      enable_gqa=hq != hk)))
        rows.append([dt, hq, hk, d, s, mk, drop, causal, rg, r])
    out = {"torch": torch.__version__, "rows": rows}
    if not rule:
        out.update(cudnn=torch.backends.cudnn.version(), device=torch.cuda.get_device_name(0))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)


MODES = {
    "accumulate": mode_accumulate,
    "inplace": mode_inplace,
    "sdpa-backends": mode_sdpa_backends,
    "sdpa-choice": mode_sdpa_choice,
    "alloc-counts": mode_alloc_counts,
    "dispatch-mode": mode_dispatch_mode,
    "snapshot": mode_snapshot,
    "cuda-reduce": mode_cuda_reduce,
    "trace": mode_trace,
    "history": mode_history,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s accumulate|inplace|sdpa-backends|sdpa-choice|alloc-counts|dispatch-mode|snapshot|cuda-reduce|trace|history [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
