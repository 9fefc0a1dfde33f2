#!/usr/bin/env python3
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
