#!/usr/bin/env python3
"""A Hugging Face training job for the probe's GPU evidence. It
knows nothing of vramledger: `vramledger run` attaches the probe.

Prints one JSON line: the tensors' bytes counted independently of the probe
(numel x element size over parameters and buffers, .grad, optimizer state)
right after the last optimizer step, the job's own view of
max_memory_allocated/max_memory_reserved, the losses (bit-exact equality
with and without the probe), and the median step time (CUDA-synchronised,
steps after the third).

  --model gpt2|llama|bert  --precision amp-bf16|bf16  [--ckpt] [--lora 16]
  [--compile] [--ddp] [--batch 8 --seq 512 --steps 10] [--oom]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="gpt2")
ap.add_argument("--precision", default="amp-bf16")
ap.add_argument("--ckpt", action="store_true")
ap.add_argument("--lora", type=int, default=0)
ap.add_argument("--compile", action="store_true")
ap.add_argument("--ddp", action="store_true")
ap.add_argument("--attn", default="sdpa")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--oom", action="store_true", help="ask for too much and report the error")
ap.add_argument("--unnamed-out", help="after the last step, list every live block that is not a "
                "parameter, buffer, gradient, optimizer state or the input (allocation history "
                "on: python frames) into this JSON file")
a = ap.parse_args()

if not os.environ.get("PROBE_JOB_NONDETERMINISTIC"):  # bit-exact comparisons
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
torch.manual_seed(0)
if a.unnamed_out:
    torch.cuda.memory._record_memory_history(max_entries=500000, stacks="python")
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, GPT2Config, LlamaConfig

if a.model == "gpt2":
    cfg = GPT2Config(attn_implementation=a.attn)
    targets = ["c_attn"]
elif a.model == "llama":
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=4096, attn_implementation=a.attn)
    targets = ["q_proj", "v_proj"]
elif a.model == "bert":
    cfg = BertConfig(attn_implementation=a.attn)
    targets = ["query", "value"]
else:
    sys.exit("unknown model " + a.model)
with torch.device("cuda"):
    if a.model == "bert":
        model = AutoModelForMaskedLM.from_config(cfg)
    else:
        model = AutoModelForCausalLM.from_config(cfg)
if a.precision == "bf16":
    model.to(torch.bfloat16)
if a.ckpt:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
if a.lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=a.lora, lora_alpha=2 * a.lora,
                                             target_modules=targets, lora_dropout=0.0))
train = model
if a.ddp:
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1)
    train = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
if a.compile:
    train = torch.compile(train)
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
V = cfg.vocab_size
batch = a.batch * (64 if a.oom else 1)
ids = torch.randint(0, V, (batch, a.seq), device="cuda")
losses, times = [], []
err = None
try:
    for step in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if a.precision == "amp-bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = train(input_ids=ids, labels=ids).loss
        else:
            loss = train(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        last = step == a.steps - 1
        if last:
            torch.cuda.synchronize()
            nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
            tensor_bytes = {
                "parameters": nbytes(list(model.parameters()) + list(model.buffers())),
                "gradients": nbytes([p.grad for p in model.parameters() if p.grad is not None]),
                "optimizer_states": nbytes([v for s in opt.state.values() for v in s.values()
                                            if torch.is_tensor(v) and v.is_cuda]),
            }
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
except torch.cuda.OutOfMemoryError:
    err = "OutOfMemoryError"
if a.unnamed_out:
    torch.cuda.synchronize()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from job_common import known_storages, unknown_blocks
    rest = unknown_blocks(torch, known_storages(torch, model, opt, ids))
    with open(a.unnamed_out, "w") as f:
        json.dump({"model": a.model, "precision": a.precision, "probe": "VRAMLEDGER_PROBE" not in os.environ
                   or os.environ["VRAMLEDGER_PROBE"] != "0",
                   "allocated": torch.cuda.memory_allocated(),
                   "unnamed_bytes": sum(r["bytes"] for r in rest), "blocks": len(rest),
                   "top": rest[:30]}, f, indent=1)
print(json.dumps({
    "model": a.model, "precision": a.precision, "ckpt": a.ckpt, "lora": a.lora,
    "compile": a.compile, "ddp": a.ddp, "batch": batch, "seq": a.seq, "error": err,
    "losses": losses, "step_s_median": statistics.median(times[3:]) if len(times) > 4 else None,
    "tensor_bytes": None if err else tensor_bytes,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "torch": torch.__version__}))
if a.ddp:
    torch.distributed.destroy_process_group()
