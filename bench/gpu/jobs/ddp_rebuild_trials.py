#!/usr/bin/env python3
"""DDP's bucket rebuild, many times over: does the second step
hold the first step's buckets as well as the rebuilt ones?

DDP builds its gradient buckets in parameter order, and after the first
step rebuilds them in the order the gradients arrived (_rebuild_buckets,
from _pre_forward, with a broadcast of the new bucket order). The first
buckets were the inputs of the first step's all-reduces; ProcessGroupNCCL
keeps a reference to every collective's inputs (its "stash", for the
allocator's safety) until its watchdog thread sees the collective finished
(it looks every 100 ms) *and* a later collective is enqueued from the main
thread. If the watchdog has not looked between the first step's last
all-reduce finishing and the rebuild's broadcast, the first buckets live on
until the second step's first all-reduce, in its backward: past the
activation peak, which then holds both bucket sets.

So the prediction: the second set is held with probability about
1 - gap / 100 ms, where gap is the time from the first step's gradients
being reduced on the GPU to the host reaching the second forward.

Each trial builds the model anew in a fresh allocator (empty_cache), wraps
it in DDP with a new AdamW, runs two steps, and reports per rank:
  gap_ms   GPU time from the end of step 1's backward (all-reduces waited
           on) to the start of step 2 (sync and host loops: the GPU is
           idle when the host records it)
  jump_b   bytes allocated right after DDP's _pre_forward in step 2 minus
           just before it: 0 when the first buckets were freed at the
           rebuild, the bucket bytes when they were kept
  step2_peak_b  max_memory_allocated() over step 2 alone
Configurations are interleaved trial by trial, so drift in the machine
falls on all of them alike.

  torchrun --nproc-per-node 2 bench/gpu/jobs/ddp_rebuild_trials.py --trials 20 \
      --loops sync:0,sync:0.02,async:0 [--model gpt2 | --config FILE]
  (--smoke: CPU, gloo, a tiny model: checks the script, measures nothing)
"""
import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="gpt2")
ap.add_argument("--config", help="a config.json instead of --model gpt2")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--trials", type=int, default=10)
ap.add_argument("--loops", default="sync:0",
                help="comma-separated LOOP:PAUSE_S; LOOP sync (synchronize after each "
                     "step, as bench/gpu/jobs/multi_gpu_job.py), host (no synchronize, the batch "
                     "copied from the host, which waits for the GPU: most loops) or async (no "
                     "synchronize, the batch made on the GPU: the host runs ahead)")
ap.add_argument("--tag", default="", help="copied into every line (e.g. an env setting)")
ap.add_argument("--smoke", action="store_true")
a = ap.parse_args()

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])
cuda = not a.smoke
if cuda:
    torch.cuda.set_device(local)
dist.init_process_group("nccl" if cuda else "gloo")
dev = torch.device("cuda", local) if cuda else torch.device("cpu")


def build():
    if a.smoke:
        m = torch.nn.Sequential(torch.nn.Embedding(100, 32), torch.nn.Linear(32, 32),
                                torch.nn.Linear(32, 100)).to(dev)
        return m, 100
    from transformers import AutoConfig, AutoModelForCausalLM
    if a.config:
        sys_path = os.path.dirname(os.path.abspath(__file__))
        import sys
        sys.path.insert(0, sys_path)
        from job_common import config_from_file
        cfg = config_from_file(a.config)
    else:
        cfg = AutoConfig.for_model("gpt2")
    with dev:
        m = AutoModelForCausalLM.from_config(cfg)
    return m, cfg.vocab_size


def loss_of(train, ids):
    if a.smoke:
        out = train(ids)
        return torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]), ids.view(-1))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return train(input_ids=ids, labels=ids).loss


def allocated():
    return torch.cuda.memory_allocated() if cuda else 0


def sync():
    if cuda:
        torch.cuda.synchronize()


def event():
    if not cuda:
        return None
    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e


def trial(loop, pause, n):
    torch.manual_seed(0)
    model, vocab = build()
    train = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local] if cuda else None)
    opt = torch.optim.AdamW(train.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1 + rank)
    gd = torch.Generator(device=dev).manual_seed(1 + rank) if cuda else None
    seen = {}

    def pre(_mod, _args):  # runs after DDP's _pre_forward (the rebuild)
        seen["after_pre"] = allocated()

    hook = model.register_forward_pre_hook(pre)
    marks = {}
    for step in (1, 2):
        if loop == "async" and cuda:
            # made on the GPU: a host tensor's .to() would wait for the GPU
            ids = torch.randint(0, vocab, (a.batch, a.seq), generator=gd, device=dev)
        else:
            ids = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
        if step == 2:
            marks["start"] = event()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            before = allocated()
        loss = loss_of(train, ids)
        loss.backward()
        if step == 1:
            marks["bwd_end"] = event()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if loop == "sync":
            sync()
        if pause > 0:
            time.sleep(pause)
    sync()
    hook.remove()
    line = {"model": "tiny (smoke)" if a.smoke else a.config and os.path.basename(a.config) or a.model, "tag": a.tag,
            "loop": loop, "pause": pause, "trial": n, "rank": rank, "world": world,
            "batch": a.batch, "seq": a.seq,
            "gap_ms": (marks["bwd_end"].elapsed_time(marks["start"])
                       if cuda and loop != "async" else None),
            "jump_b": seen["after_pre"] - before,
            "step2_peak_b": torch.cuda.max_memory_allocated() if cuda else None,
            "grad_b": sum(p.numel() * p.element_size() for p in model.parameters()),
            "loss": float(loss)}
    print(json.dumps(line), flush=True)
    del train, opt, model, loss
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    dist.barrier()


loops = []
for spec in a.loops.split(","):
    loop, pause = spec.split(":")
    if loop not in ("sync", "host", "async"):
        raise SystemExit("--loops: %r is not sync, host or async" % loop)
    loops.append((loop, float(pause)))
for n in range(a.trials):
    for loop, pause in loops:
        trial(loop, pause, n)
dist.destroy_process_group()
