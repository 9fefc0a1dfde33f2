#!/usr/bin/env python3
"""The reserve question's GPU jobs (bench/results/reserved/, step-time/'s
vision section), one by its first argument:

  history: The caching allocator's own history of one configuration, compact
    enough to bring back: where a reservation the estimate misses comes from.
  conv-workspace: cuDNN's convolution workspaces and times, conv by conv: what
    a CNN's training step asks the caching allocator for beyond its tensors,
    and how long each convolution takes.
"""
import sys


def mode_history():
    """The caching allocator's own history of one configuration, compact enough
    to bring back: where a reservation the estimate misses comes from.

        python3 bench/reserved/jobs.py history OUT.jsonl.gz CONFIG_JSON

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
    model, the events say which request made each segment."""
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
            if "/torch/" in fn or fn.endswith(("jobs.py history", "reserved/jobs.py")) or "vramledger/measure.py" in fn:
                continue
            return "%s:%s %s" % (fn.split("site-packages/")[-1], f.get("line"), f.get("name"))
        return ""


    def main():
        out, conf = sys.argv[1], json.loads(sys.argv[2])
        data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")
        measure.DEV = measure.Dev("cuda")
        c = measure.entry_of_config(conf)
        # VL_HISTORY_STACKS=none: no frames (a run whose recording of Python
        # stacks fails, as T5 under SDPA checkpointed did in dropout)
        if os.environ.get("VL_HISTORY_STACKS") == "none":
            torch.cuda.memory._record_memory_history(max_entries=4_000_000, context=None)
        else:
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


def mode_conv_workspace():
    """cuDNN's convolution workspaces and times, conv by conv: what a CNN's
    training step asks the caching allocator for beyond its tensors, and how
    long each convolution takes.

        python3 bench/reserved/jobs.py conv-workspace OUT.jsonl [MODEL_JSON]

    The model (data/models/resnet-50.json by default) is built by transformers
    on the GPU and run once per image side and batch with a forward pre-hook on
    every nn.Conv2d, which notes each convolution's shape. Each distinct shape
    is then run alone, forward and backward, in each dtype (bf16; fp32, where
    cuDNN takes TF32 by default: torch.backends.cudnn.allow_tf32), under
    torch.cuda.memory._record_memory_history: every allocation that is not the
    output (forward), the input's gradient or the weight's gradient (backward)
    is a workspace cuDNN's plan asked for (aten/src/ATen/native/cudnn/
    Conv_v8.cpp: the plan's getWorkspaceSize() bytes through the caching
    allocator, freed when the call returns). Times: CUDA events over 10 calls
    after 3 warm-ups. One JSON object per line and shape:
    {dtype, N, cin, cout, k, stride, pad, H, W, Ho, Wo, grad_input,
     fwd: [bytes...], bwd: [bytes...], fwd_ms, bwd_ms}."""
    import json
    import os
    import sys

    import torch
    import transformers

    SIDES = [64, 128, 224, 320, 512]
    BATCHES = [8, 16, 32, 64]


    def shapes(model, side, batch):
        seen = []

        def hook(mod, args):
            x = args[0]
            seen.append((mod.in_channels, mod.out_channels, mod.kernel_size[0], mod.stride[0],
                         mod.padding[0], x.shape[2], x.shape[3], x.requires_grad))

        hs = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        with torch.no_grad():
            model(pixel_values=torch.zeros(1, 3, side, side, device="cuda"))
        for h in hs:
            h.remove()
        return [(batch,) + s[:-1] + (s[-1] or i > 0,) for i, s in enumerate(seen)]


    def allocs(fn):
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=100000)
        out = fn()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        ev = [e for tr in snap["device_traces"] for e in tr if e["action"] == "alloc"]
        return out, [e["size"] for e in ev]


    def timed(fn, n=10):
        for _ in range(3):
            fn()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / n


    def rounded(n):  # the caching allocator's request rounding (512 bytes)
        return (n + 511) // 512 * 512


    def one(dtype, N, cin, cout, k, stride, pad, H, W, grad_input):
        conv = torch.nn.Conv2d(cin, cout, k, stride, pad, bias=False, device="cuda", dtype=dtype)
        x = torch.randn(N, cin, H, W, device="cuda", dtype=dtype, requires_grad=grad_input)
        y, fwd = allocs(lambda: conv(x))
        gy = torch.randn_like(y)
        _, bwd = allocs(lambda: y.backward(gy))
        esz = torch.tensor([], dtype=dtype).element_size()
        out_b = rounded(y.numel() * esz)
        fwd_ws = list(fwd)
        if out_b in fwd_ws:
            fwd_ws.remove(out_b)
        bwd_ws = list(bwd)
        for t in ([x] if grad_input else []) + [conv.weight]:
            b = rounded(t.numel() * esz)
            if b in bwd_ws:
                bwd_ws.remove(b)
        conv.weight.grad = None
        x.grad = None
        rec = {"N": N, "cin": cin, "cout": cout, "k": k, "stride": stride, "pad": pad, "H": H, "W": W,
               "Ho": y.shape[2], "Wo": y.shape[3], "grad_input": grad_input, "fwd": fwd_ws, "bwd": bwd_ws}

        def f():
            return conv(x)

        def fb():
            conv(x).backward(gy)

        rec["fwd_ms"] = timed(f)
        rec["fwdbwd_ms"] = timed(fb)
        return rec


    def main():
        out = sys.argv[1]
        path = sys.argv[2] if len(sys.argv) > 2 else os.path.join("data", "models", "resnet-50.json")
        cfg = transformers.AutoConfig.for_model(**json.load(open(path)))
        model = transformers.AutoModelForImageClassification.from_config(cfg).cuda().eval()
        todo = []
        for side in SIDES:
            for batch in BATCHES:
                for s in shapes(model, side, batch):
                    if s not in todo:
                        todo.append(s)
        del model
        torch.cuda.empty_cache()
        with open(out, "w") as f:
            for s in todo:
                for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
                    try:
                        rec = one(dtype, *s)
                    except torch.OutOfMemoryError:
                        rec = {"shape": s, "error": "oom"}
                    rec["dtype"] = name
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    torch.cuda.empty_cache()
        print(out, len(todo), "shapes")


    if __name__ == "__main__":
        main()


MODES = {"history": mode_history, "conv-workspace": mode_conv_workspace}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s history|conv-workspace [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
