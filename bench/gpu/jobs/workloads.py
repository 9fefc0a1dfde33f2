#!/usr/bin/env python3
"""Small GPU workloads the suites run under `vramledger run`
(bench/gpu/interposer.sh, probe.sh, parallel.sh), one by its first argument:

  spike: A 2 GiB allocation held for 50 ms in the middle of a quiet second:
    the sampler (at 10 ms) and the interposer's peak must both see it.
  gpt2-loop: A GPT-2 training loop that prints its median step time (ms) as
    JSON: the workload of the interposer overhead benchmark
    (bench/gpu/interposer.sh).
  scatter: The smallest job that crashed under the interposer on 2 H200s
    (bench/results/parallel-calibration): a NCCL scatter, the first
    point-to-point operation (DTensor's distribute_tensor uses it). torchrun
    --nproc-per-node 2 bench/gpu/jobs/workloads.py scatter
  interposer-check: Run under `vramledger run` (the interposer preloaded): at
    quiet points of a GPT-2 training loop, compare the interposer's live bytes
    with torch.cuda.memory_reserved(). One allocator mode per process, chosen
    by PYTORCH_CUDA_ALLOC_CONF (default, expandable_segments:True,
    backend:cudaMallocAsync). Prints one JSON line per quiet point.
"""
import sys


def mode_spike():
    """A 2 GiB allocation held for 50 ms in the middle of a quiet second: the
    sampler (at 10 ms) and the interposer's peak must both see it."""
    import time

    import torch

    torch.empty(1, device="cuda")
    time.sleep(0.5)
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    time.sleep(0.05)
    del x
    torch.cuda.empty_cache()
    time.sleep(0.5)


def mode_gpt2_loop():
    """A GPT-2 training loop that prints its median step time (ms) as JSON:
    the workload of the interposer overhead benchmark (bench/gpu/interposer.sh)."""
    import json, statistics, sys, time

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    cfg = AutoConfig.for_model("gpt2")
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg)
    o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, cfg.vocab_size, (8, 1024), device="cuda")
    times = []
    for i in range(steps + 5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        o.step()
        o.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 5:
            times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"median_step_ms": statistics.median(times), "steps": steps}))


def mode_scatter():
    """The smallest job that crashed under the interposer on 2 H200s
    (bench/results/parallel-calibration): a NCCL scatter, the first
    point-to-point operation (DTensor's distribute_tensor uses it).
      torchrun --nproc-per-node 2 bench/gpu/jobs/workloads.py scatter"""
    import os
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    x = torch.zeros(1 << 20, device="cuda")
    dist.all_reduce(x)
    parts = [torch.full((1 << 20,), float(i), device="cuda") for i in range(dist.get_world_size())]
    out = torch.empty(1 << 20, device="cuda")
    dist.scatter(out, parts if rank == 0 else None, src=0)
    torch.cuda.synchronize()
    print("rank %d scatter ok %.1f" % (rank, out[0].item()), flush=True)
    dist.destroy_process_group()


def mode_interposer_check():
    """Run under `vramledger run` (the interposer preloaded): at quiet points of
    a GPT-2 training loop, compare the interposer's live bytes with
    torch.cuda.memory_reserved(). One allocator mode per process, chosen by
    PYTORCH_CUDA_ALLOC_CONF (default, expandable_segments:True,
    backend:cudaMallocAsync). Prints one JSON line per quiet point."""
    import ctypes, json, os

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    lib = ctypes.CDLL(None)
    counts = lib.vl_preload_counts  # exported by libvramledger-preload.so
    counts.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]


    def live():
        l, p = ctypes.c_uint64(), ctypes.c_uint64()
        counts(ctypes.byref(l), ctypes.byref(p))
        return l.value, p.value


    def point(tag):
        torch.cuda.synchronize()
        l, p = live()
        r = torch.cuda.memory_reserved()
        print(json.dumps({"mode": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default") or "default",
                          "point": tag, "interposer_live": l, "interposer_peak": p, "torch_reserved": r,
                          "torch_max_reserved": torch.cuda.max_memory_reserved(),
                          "diff": l - r}), flush=True)


    def main():
        cfg = AutoConfig.for_model("gpt2")
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(cfg)
        o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
        point("after-model")
        ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")
        for step in range(4):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
            point(f"after-step-{step}")
        del loss
        torch.cuda.empty_cache()
        point("after-empty-cache")


    if __name__ == "__main__":
        main()


MODES = {"spike": mode_spike, "gpt2-loop": mode_gpt2_loop, "scatter": mode_scatter, "interposer-check": mode_interposer_check}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s spike|gpt2-loop|scatter|interposer-check [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
