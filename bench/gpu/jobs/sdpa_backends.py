#!/usr/bin/env python3
"""Which kernel scaled_dot_product_attention runs on this CUDA device, and
what it allocates, for the head layouts, masks and dtypes transformers
passes: the rules vramledger trace's meta path follows
(python/vramledger/tracer.py, _meta_sdpa_as_cuda). One JSON line per case:
the ATen attention ops the call reached (forward and backward), and the
peak allocated above the inputs in the forward and in the backward (bytes).

  python3 bench/gpu/jobs/sdpa_backends.py > sdpa.jsonl
"""
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
