"""cuDNN's convolution workspaces and times, conv by conv: what a CNN's
training step asks the caching allocator for beyond its tensors, and how
long each convolution takes.

    python3 bench/reserved/conv_workspace.py OUT.jsonl [MODEL_JSON]

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
 fwd: [bytes...], bwd: [bytes...], fwd_ms, bwd_ms}.
"""
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
