#!/usr/bin/env python3
"""Are the scratch blocks of ATen's CUDA reductions what
vramledger.cuda_reduce says? Each case (an op, a shape, the dimensions
reduced, a dtype, contiguous or transposed) runs once on the GPU with the
caching allocator's history on; every block the op takes beyond its
result is its scratch. One JSON line a case: the blocks seen, the blocks
predicted for this device (its SMs and threads per SM), match or not.

  python3 bench/gpu/jobs/cuda_reduce_check.py > OUT.jsonl
"""
import itertools
import json
import os
import sys

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
