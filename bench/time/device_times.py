#!/usr/bin/env python3
"""The kernels' own device time beside kernels.py's event timing, for the
shapes the step-time tables are built from: how much of each event-timed
call is the host's dispatch (what bench/time/distill.py takes off: the
table's smallest time, less KERNEL_MIN_S, and for SDPA's
forward+backward the forward's kernel added back).

Each call runs 20 times under torch.profiler; a call's device time is the
sum of its CUDA kernels' durations (CUPTI), the median over the 20. The
event time is kernels.py's timed() on the same call.

  python3 bench/time/device_times.py OUT.json

Output: {"gemm": [{m, n, k, layout, event_s, device_s}], "attention":
[{b, h, s, d, causal, fwd_event_s, fwd_device_s, fwd_bwd_event_s,
fwd_bwd_device_s}]} (bf16; SDPA as PyTorch picks it)."""
import json, statistics, sys, time
import torch
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from kernels import timed  # noqa: E402  (the tables' own timing)

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
