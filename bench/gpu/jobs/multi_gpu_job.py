#!/usr/bin/env python3
"""A data-parallel training job, one process per GPU (torchrun):
GPT-2 (124 M, random init), AMP bf16, AdamW, under DDP, DDP with a ZeroRedundancyOptimizer
(ZeRO-1), FSDP FULL_SHARD (ZeRO-3) or FSDP SHARD_GRAD_OP (ZeRO-2). Every rank prints one JSON line:
its max_memory_allocated/reserved and its median step time.

  torchrun --nproc-per-node 2 bench/gpu/jobs/multi_gpu_job.py --mode ddp|ddp-static|ddp-bucket-view|zero1|fsdp-full|fsdp-grad-op
      [--model gpt2|gpt2-medium | --config FILE] [--batch 4 --seq 512 --steps 5]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

from job_common import config_from_file, history_start, history_write, init_distributed

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="ddp")
ap.add_argument("--model", default="gpt2")
ap.add_argument("--config", help="a config.json (data/models/ or bench/configs/) instead of --model")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--pause", type=float, default=0.0,
                help="seconds to wait after each step (a data loader's gap; DDP's two peaks)")
ap.add_argument("--pause-first", type=float, default=0.0,
                help="synchronize and wait this long once, after the first step (doctor's "
                     "VL-D015 fix: NCCL's watchdog releases DDP's first buckets)")
ap.add_argument("--async-loop", action="store_true",
                help="no synchronize after each step (the host runs ahead, as most training "
                     "loops); step_s_median is then the mean over steps 3.. after a final sync")
ap.add_argument("--history", help="rank 0 writes what is live at its peak here (bench/gpu/jobs/job_common.py summary())")
ap.add_argument("--history-all", action="store_true",
                help="every rank records, from before the model is built (rank r writes PATH-rank<r>.json)")
a = ap.parse_args()
rank, local, world = init_distributed()
if a.history_all:
    history_start(a.history, rank, True)
torch.manual_seed(0)
from transformers import AutoConfig, AutoModelForCausalLM

if a.config:
    cfg = config_from_file(a.config)
    a.model = os.path.basename(a.config)
elif a.model == "gpt2-medium":
    cfg = AutoConfig.for_model("gpt2", n_embd=1024, n_layer=24, n_head=16)
else:
    cfg = AutoConfig.for_model("gpt2")
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg)
if a.mode.startswith("ddp") or a.mode == "zero1":
    # ddp-static: static_graph=True (buckets built once, never rebuilt);
    # ddp-bucket-view: gradient_as_bucket_view=True (gradients are views
    # into the buckets, no second copy)
    train = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local], static_graph=a.mode == "ddp-static",
        gradient_as_bucket_view=a.mode == "ddp-bucket-view")
else:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    # one FSDP unit per transformer block (the classes transformers keeps whole)
    blocks = {type(m) for m in model.modules() if type(m).__name__ in model._no_split_modules}
    strategy = ShardingStrategy.FULL_SHARD if a.mode == "fsdp-full" else ShardingStrategy.SHARD_GRAD_OP
    train = FSDP(model, sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy(blocks),
                 device_id=local, use_orig_params=True)
if a.mode == "zero1":  # PyTorch's ZeRO-1: DDP with the optimizer's states sharded
    from torch.distributed.optim import ZeroRedundancyOptimizer
    opt = ZeroRedundancyOptimizer(train.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
else:
    opt = torch.optim.AdamW(train.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1 + rank)
gd = torch.Generator(device="cuda").manual_seed(1 + rank)
if not a.history_all:
    history_start(a.history, rank)
times = []
for step in range(a.steps):
    if a.async_loop:  # made on the GPU: a host batch's .cuda() waits for the GPU
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=gd, device="cuda")
    else:
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).cuda()
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = train(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if not a.async_loop:
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    elif step == 2:
        t_async = t0
    if a.pause > 0:
        time.sleep(a.pause)
    if step == 0 and a.pause_first > 0:
        torch.cuda.synchronize()
        time.sleep(a.pause_first)
if a.async_loop:
    torch.cuda.synchronize()
    if a.steps > 2:
        times = [(time.perf_counter() - t_async) / (a.steps - 2)] * 3
history_write(a.history, rank, a.history_all)
print(json.dumps({"mode": a.mode, "model": a.model, "world": world, "rank": rank,
                  "batch": a.batch, "seq": a.seq, "pause": a.pause, "pause_first": a.pause_first,
                  "async_loop": a.async_loop,
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "max_reserved": torch.cuda.max_memory_reserved(),
                  "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
      flush=True)
dist.destroy_process_group()
