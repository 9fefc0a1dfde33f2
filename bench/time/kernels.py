#!/usr/bin/env python3
"""What one GPU does per kernel kind, for the step-time model
(docs/model.md, "Time"): GEMM throughput over shapes and dtypes in the
three layouts a linear runs (forward x @ W^T, the input's gradient g @ W,
the weight's gradient g^T @ x), memory-bound kernels by bytes moved, SDPA's
kernels (flash, memory-efficient) forward and backward (and under an explicit
mask: "masked"), the host's cost of
one eager op with and without autograd, and the optimizers' steps.

  python3 bench/time/kernels.py OUT.json [--only=attention,masked,gemm,...]

SDPA is timed as PyTorch picks its kernel by default (what a user's model
gets: cuDNN attention for 16-bit inputs on Hopper with PyTorch 2.11) and
with each backend forced.

Times are CUDA-event medians of repeated launches after a warm-up.
fp32 matmuls run as PyTorch runs them by default (TF32 off:
torch.backends.cuda.matmul.allow_tf32 is False).

By its first argument, also:

  device-times: The kernels' own device time beside kernels.py's event timing,
    for the shapes the step-time tables are built from: how much of each
    event-timed call is the host's dispatch (what bench/time/distill.py takes
    off: the table's smallest time, less KERNEL_MIN_S, and for SDPA's
    forward+backward the forward's kernel added back).
"""
import contextlib, json, sys, time, platform, statistics
import torch
import torch.nn.functional as F

dev = "cuda"


def timed(fn, budget_s=0.03, min_reps=3, max_reps=200):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    one = max(s.elapsed_time(e) / 1e3, 1e-6)
    reps = int(min(max_reps, max(min_reps, budget_s / one)))
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)


DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def gemms():
    torch.backends.cuda.matmul.allow_tf32 = False
    grid = [128, 512, 2048, 8192, 32768]
    nk = [64, 256, 1024, 4096, 16384]
    out = []
    for dt in ("bf16", "fp32", "fp16"):
        for M in grid:
            for N in nk:
                for K in nk:
                    if dt == "fp16" and not (N == K and M in (512, 8192)):
                        continue
                    fl = 2.0 * M * N * K
                    if dt == "fp32" and fl > 3e12:
                        continue
                    t = DT[dt]
                    x = torch.randn(M, K, device=dev, dtype=t)
                    w = torch.randn(N, K, device=dev, dtype=t)
                    g = torch.randn(M, N, device=dev, dtype=t)
                    row = {"dtype": dt, "m": M, "n": N, "k": K}
                    row["fwd_s"] = timed(lambda: F.linear(x, w))      # x @ W^T: M x N, inner K
                    row["dgrad_s"] = timed(lambda: g @ w)             # g @ W:   M x K, inner N
                    row["wgrad_s"] = timed(lambda: g.t() @ x)         # g^T @ x: N x K, inner M
                    out.append(row)
    return out


def align():
    """a GEMM whose inner or output dimension is not a multiple of 8
    elements (GPT-2's vocabulary, 50257): cuBLAS cannot use its aligned
    tensor-core kernels; each shape timed beside its aligned twin"""
    torch.backends.cuda.matmul.allow_tf32 = False
    out = []
    for dt in ("bf16", "fp32"):
        for M, K in ((4096, 768), (8192, 1280), (16384, 1600), (2048, 1024)):
            for N in (50257, 50256, 50304):
                t = DT[dt]
                x = torch.randn(M, K, device=dev, dtype=t)
                w = torch.randn(N, K, device=dev, dtype=t)
                g = torch.randn(M, N, device=dev, dtype=t)
                out.append({"dtype": dt, "m": M, "n": N, "k": K, "fwd_s": timed(lambda: F.linear(x, w)),
                            "dgrad_s": timed(lambda: g @ w), "wgrad_s": timed(lambda: g.t() @ x)})
    return out + align_classes()


def align_classes():
    """16-bit GEMMs by the largest power of two (up to 8) dividing N: the
    heads of BERT (30,522 tokens: 2), RoBERTa (50,265: 1), DeBERTa-v3
    (128,100: 4), with the head's bias (F.linear with a bias: addmm) and
    without, beside the aligned twin (N rounded down to 8)"""
    out = []
    for M, K in ((4096, 768), (4096, 1024), (16384, 768)):
        for N in (30522, 30520, 50265, 50264, 128100, 128096):
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            w = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
            b = torch.randn(N, device=dev, dtype=torch.bfloat16)
            g = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
            out.append({"dtype": "bf16", "m": M, "n": N, "k": K, "align": N & -N if N % 8 else 8,
                        "fwd_s": timed(lambda: F.linear(x, w)), "fwd_bias_s": timed(lambda: F.linear(x, w, b)),
                        "dgrad_s": timed(lambda: g @ w), "wgrad_s": timed(lambda: g.t() @ x)})
    return out


def scatter():
    """torch.gather's backward (a scatter-add into zeros) and its forward
    over DeBERTa's relative-position scores: B*H x S x 2k, index S x S
    expanded over B*H (modeling_deberta_v2.py disentangled_attention_bias)"""
    out = []
    for bh, s, span in ((96, 512, 256), (192, 512, 256), (96, 1024, 256), (96, 256, 128)):
        for dt in ("bf16", "fp32"):
            src = torch.randn(bh, s, 2 * span, device=dev, dtype=DT[dt], requires_grad=True)
            idx = torch.randint(0, 2 * span, (1, s, s), device=dev).expand(bh, s, s)
            y = torch.gather(src, -1, idx)
            gy = torch.randn_like(y)
            out.append({"dtype": dt, "bh": bh, "s": s, "span2": 2 * span, "elements": bh * s * s,
                        "gather_s": timed(lambda: torch.gather(src, -1, idx)),
                        "scatter_add_s": timed(lambda: torch.zeros_like(src).scatter_add_(-1, idx, gy)),
                        "zeros_s": timed(lambda: torch.zeros_like(src))})
    return out


def memory_bound():
    out = []
    for mb in (0.25, 1, 4, 16, 64, 256, 1024):
        n = int(mb * 2**20 / 2)
        a = torch.randn(n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, device=dev, dtype=torch.bfloat16)
        t = timed(lambda: torch.add(a, b))
        out.append({"kernel": "add_bf16", "bytes_moved": 3 * n * 2, "s": t})
        t = timed(lambda: a.float())
        out.append({"kernel": "cast_bf16_fp32", "bytes_moved": n * 6, "s": t})
        rows = max(1, n // 4096)
        x = torch.randn(rows, 4096, device=dev, dtype=torch.bfloat16)
        t = timed(lambda: F.layer_norm(x, (4096,)))
        out.append({"kernel": "layer_norm_bf16", "bytes_moved": 2 * x.numel() * 2, "s": t})
        t = timed(lambda: torch.softmax(x, -1))
        out.append({"kernel": "softmax_bf16", "bytes_moved": 2 * x.numel() * 2, "s": t})
    return out


def launch():
    """host time of one eager op: a chain of tiny ops, no sync between them"""
    x = torch.zeros(16, device=dev)
    out = {}
    for name, grad in (("op_no_grad_s", False), ("op_forward_autograd_s", True)):
        y0 = x.clone().requires_grad_(grad)
        torch.cuda.synchronize()
        best = 1e9
        for _ in range(5):
            t0 = time.perf_counter()
            y = y0
            for _ in range(1000):
                y = y * 1.0001
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / 1000)
            if grad:
                y.sum().backward()
        out[name] = best
    y0 = x.clone().requires_grad_(True)
    best = 1e9
    for _ in range(5):
        y = y0
        for _ in range(1000):
            y = y * 1.0001
        l = y.sum()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        l.backward()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / 1000)
    out["op_backward_s"] = best
    # an empty kernel's device time
    out["kernel_device_s"] = timed(lambda: x.add_(0), max_reps=500)
    return out


def attention():
    from torch.nn.attention import sdpa_kernel, SDPBackend
    out = []
    shapes = [(8, 12, 512, 64), (4, 16, 1024, 64), (2, 32, 2048, 128), (1, 32, 4096, 128),
              (1, 32, 8192, 128), (4, 12, 1024, 64), (16, 12, 128, 64), (2, 16, 2048, 64)]
    for be, name, dts in ((None, "default", ("bf16", "fp32")),
                          (SDPBackend.CUDNN_ATTENTION, "cudnn", ("bf16",)),
                          (SDPBackend.FLASH_ATTENTION, "flash", ("bf16",)),
                          (SDPBackend.EFFICIENT_ATTENTION, "efficient", ("bf16", "fp32")),
                          (SDPBackend.MATH, "math", ("bf16", "fp32"))):
        for dt in dts:
            for (b, h, s, d) in shapes:
                if name == "math" and b * h * s * s * 4 > 2**31:
                    continue
                for causal in (True, False):
                    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=DT[dt], requires_grad=True)
                               for _ in range(3))
                    try:
                        with sdpa_kernel([be]) if be is not None else contextlib.nullcontext():
                            fw = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            go = torch.randn_like(o)
                            fb = timed(lambda: torch.autograd.grad(
                                F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), go))
                    except RuntimeError as ex:
                        out.append({"kernel": name, "dtype": dt, "b": b, "h": h, "s": s, "d": d,
                                    "causal": causal, "error": str(ex)[:200]})
                        continue
                    out.append({"kernel": name, "dtype": dt, "b": b, "h": h, "s": s, "d": d,
                                "causal": causal, "fwd_s": fw, "fwd_bwd_s": fb})
    return out


def optimizers():
    out = []
    # a transformer's parameter list: 4 matrices and 2 vectors a layer
    for layers, width in ((12, 768), (24, 2048)):
        ps = []
        for _ in range(layers):
            ps += [torch.randn(width, width, device=dev) for _ in range(4)]
            ps += [torch.randn(width, device=dev) for _ in range(2)]
        for p in ps:
            p.grad = torch.randn_like(p)
        n = sum(p.numel() for p in ps)
        for opt, impl in (("adamw", "foreach"), ("adamw", "fused"), ("adamw", "forloop"),
                          ("sgd", "foreach"), ("sgd-momentum", "foreach"), ("sgd", "forloop")):
            kw = {"fused": True} if impl == "fused" else {"foreach": impl == "foreach"}
            if opt == "adamw":
                o = torch.optim.AdamW(ps, lr=1e-5, **kw)
            else:
                o = torch.optim.SGD(ps, lr=1e-5, momentum=0.9 if opt == "sgd-momentum" else 0.0, **kw)
            o.step()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(5):
                o.step()
            torch.cuda.synchronize()
            out.append({"optimizer": opt, "impl": impl, "tensors": len(ps), "elements": n,
                        "s": (time.perf_counter() - t0) / 5})
            del o
        del ps
    return out


def masked():
    """SDPA with an explicit boolean mask, as transformers hands one where it
    cannot say is_causal (masking_utils.py sdpa_mask: a sliding-window layer
    whose keys reach its window, padding): the (b, 1, q, kv) causal pattern,
    or its sliding window of s/2 keys; with dropout 0 and 0.1 (training's
    attention_dropout). The default backend, and the kernels the profiler
    sees it run (which backend SDPA picked)."""
    from torch.profiler import profile, ProfilerActivity
    out = []
    for dt in ("bf16", "fp32"):
        for (b, h, s, d) in [(1, 32, 2048, 128), (1, 32, 4096, 128), (1, 32, 8192, 128),
                             (4, 16, 1024, 64), (2, 32, 2048, 64)]:
            i = torch.arange(s, device=dev)
            for pattern in ("causal", "window"):
                m = i[None, :] <= i[:, None]
                if pattern == "window":
                    m = m & (i[:, None] - i[None, :] < s // 2)
                mask = m[None, None].expand(b, 1, s, s)
                for p in (0.0, 0.1):
                    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=DT[dt], requires_grad=True)
                               for _ in range(3))
                    f = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # noqa: E731
                    row = {"kernel": "masked", "pattern": pattern, "dropout": p, "dtype": dt, "b": b,
                           "h": h, "s": s, "d": d}
                    try:
                        fw = timed(f)
                        go = torch.randn_like(f())
                        fb = timed(lambda: torch.autograd.grad(f(), (q, k, v), go))
                        with profile(activities=[ProfilerActivity.CUDA]) as prof:
                            torch.autograd.grad(f(), (q, k, v), go)
                            torch.cuda.synchronize()
                        names = sorted({e.name[:80] for e in prof.events()
                                        if e.device_type == torch.autograd.DeviceType.CUDA})
                        row.update(fwd_s=fw, fwd_bwd_s=fb, kernels=names[:12])
                    except RuntimeError as ex:
                        row["error"] = str(ex)[:200]
                    out.append(row)
    return out


def main():
    res = {"schema": "vramledger.kernels/1", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cpu": platform.processor(), "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    parts = (("launch", launch), ("memory_bound", memory_bound), ("optimizers", optimizers),
             ("attention", attention), ("masked", masked), ("gemm", gemms), ("align", align), ("scatter", scatter))
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")]
    for name, fn in parts:
        if only and name not in only[0].split(","):
            continue
        t0 = time.time()
        try:
            res[name] = fn()
        except Exception as ex:  # one part failing keeps the others
            res[name + "_error"] = repr(ex)[:500]
        res[name + "_wall_s"] = round(time.time() - t0, 1)
        print(name, res[name + "_wall_s"], "s", flush=True)
        torch.cuda.empty_cache()
        with open(sys.argv[1], "w") as f:
            json.dump(res, f, indent=0)


def mode_device_times():
    """The kernels' own device time beside kernels.py's event timing, for the
    shapes the step-time tables are built from: how much of each event-timed
    call is the host's dispatch (what bench/time/distill.py takes off: the
    table's smallest time, less KERNEL_MIN_S, and for SDPA's
    forward+backward the forward's kernel added back).

    Each call runs 20 times under torch.profiler; a call's device time is the
    sum of its CUDA kernels' durations (CUPTI), the median over the 20. The
    event time is kernels.py's timed() on the same call.

      python3 bench/time/kernels.py device-times OUT.json

    Output: {"gemm": [{m, n, k, layout, event_s, device_s}], "attention":
    [{b, h, s, d, causal, fwd_event_s, fwd_device_s, fwd_bwd_event_s,
    fwd_bwd_device_s}]} (bf16; SDPA as PyTorch picks it)."""
    import json, statistics, sys, time
    from torch.profiler import profile, ProfilerActivity


    dev = "cuda"


    def device_s(fn, reps=20):
        """median over reps of the CUDA kernels' summed duration of one call"""
        fn()
        torch.cuda.synchronize()
        per = []
        for _ in range(reps):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            per.append(sum(e.device_time_total for e in prof.key_averages()
                           if e.device_type.name == "CUDA") / 1e6)
        return statistics.median(per)


    def gemms():
        out = []
        for M in (128, 512, 2048, 8192, 32768):
            for N in (64, 256, 1024, 4096, 16384):
                for K in (64, 1024, 4096):
                    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
                    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
                    g = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
                    for lay, fn in (("fwd", lambda: F.linear(x, w)), ("dgrad", lambda: g @ w),
                                    ("wgrad", lambda: g.t() @ x)):
                        out.append({"m": M, "n": N, "k": K, "layout": lay, "event_s": timed(fn),
                                    "device_s": device_s(fn)})
        return out


    def attention():
        out = []
        for (b, h, s, d) in ((8, 12, 512, 64), (4, 16, 1024, 64), (2, 32, 2048, 128), (1, 32, 4096, 128),
                             (4, 12, 1024, 64), (16, 12, 128, 64), (64, 12, 197, 64), (2, 16, 2048, 64)):
            for causal in (True, False):
                q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                fw = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                go = torch.randn_like(fw())
                fb = lambda: torch.autograd.grad(fw(), (q, k, v), go)  # noqa: E731
                out.append({"b": b, "h": h, "s": s, "d": d, "causal": causal,
                            "fwd_event_s": timed(fw), "fwd_device_s": device_s(fw),
                            "fwd_bwd_event_s": timed(fb), "fwd_bwd_device_s": device_s(fb)})
        return out


    def main():
        res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
        for name, fn in (("gemm", gemms), ("attention", attention)):
            t0 = time.time()
            res[name] = fn()
            print(name, round(time.time() - t0, 1), "s", flush=True)
            with open(sys.argv[1], "w") as f:
                json.dump(res, f, indent=0)


    if __name__ == "__main__":
        main()


MODES = {"device-times": mode_device_times}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
