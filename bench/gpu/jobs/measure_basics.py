#!/usr/bin/env python3
"""Orientation figures for the overhead lines of the bill, on a real GPU:
CUDA context size (NVML process memory after the first allocation minus what
PyTorch reserved), cuBLAS workspace (allocated bytes that appear on the first
matmul), and the caching allocator's rounding of a few request sizes.
Writes JSON to argv[1]."""
import datetime, json, os, sys
import torch


def nvml_proc_used():
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    pid = os.getpid()
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
        if p.pid == pid:
            return p.usedGpuMemory
    return None


def main():
    r = {"date": datetime.datetime.utcnow().isoformat() + "Z", "torch": torch.__version__,
         "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    free0, total = torch.cuda.mem_get_info()
    r["device_total_bytes"] = total
    x = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    r["after_first_alloc"] = {"allocated": torch.cuda.memory_allocated(),
                              "reserved": torch.cuda.memory_reserved(),
                              "nvml_process": nvml_proc_used()}
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    before = torch.cuda.memory_allocated()
    b = a @ a
    torch.cuda.synchronize()
    r["after_first_bf16_matmul"] = {"allocated_delta": torch.cuda.memory_allocated() - before - b.numel() * 2,
                                    "reserved": torch.cuda.memory_reserved(),
                                    "nvml_process": nvml_proc_used()}
    rounding = {}
    for n in [1, 511, 513, 1 << 20, (1 << 20) + 1, 5 << 20, 11 << 20, 100 << 20]:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        s0 = torch.cuda.memory_stats()
        t = torch.empty(n, dtype=torch.uint8, device="cuda")
        s1 = torch.cuda.memory_stats()
        rounding[str(n)] = {"allocated_delta": s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"],
                            "reserved_delta": s1["reserved_bytes.all.current"] - s0["reserved_bytes.all.current"]}
        del t
    r["rounding"] = rounding
    with open(sys.argv[1], "w") as f:
        json.dump(r, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(r, indent=1))
    del x  # the first allocation: live through every figure above


if __name__ == "__main__":
    main()
