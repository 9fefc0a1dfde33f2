#!/usr/bin/env python3
"""A pipeline-parallel training job, one process per stage
(torchrun): GPT-2 (random init, transformers' blocks) split into as many
stages as ranks, the first with the embeddings, the last with the final
norm and the head (untied: the stages are on different GPUs), run by
torch.distributed.pipelining (Schedule1F1B or ScheduleGPipe) in bf16 with
AdamW. Every rank prints one JSON line: its max_memory_allocated/reserved
and its median step time.

  torchrun --nproc-per-node 2 bench/gpu/jobs/pp_job.py [--model gpt2|gpt2-medium]
      [--schedule 1f1b|gpipe] [--batch 8 --micro 4 --seq 512 --steps 5]

--batch is the global batch of one step, split into --micro micro-batches
(the estimate's --batch is the micro-batch, --grad-accum the count).
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from job_common import history_start, history_write, init_distributed

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="gpt2")
ap.add_argument("--schedule", default="1f1b")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--micro", type=int, default=4)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--history", help="every rank writes what is live at its peak (PATH, PATH-rank1.json; "
                                  "bench/gpu/jobs/job_common.py summary())")
a = ap.parse_args()
rank, local, world = init_distributed()
torch.manual_seed(0)
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from transformers import AutoConfig, AutoModelForCausalLM

if a.model == "gpt2-medium":
    cfg = AutoConfig.for_model("gpt2", n_embd=1024, n_layer=24, n_head=16)
else:
    cfg = AutoConfig.for_model("gpt2")
full = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)  # on the CPU
blocks = full.transformer.h
per = (len(blocks) + world - 1) // world
mine = blocks[rank * per:(rank + 1) * per]


def hidden(out):
    return out[0] if isinstance(out, tuple) else out


class Stage(torch.nn.Module):
    def __init__(self, full):
        super().__init__()
        self.first, self.last = rank == 0, rank == world - 1
        if self.first:
            self.wte, self.wpe, self.drop = full.transformer.wte, full.transformer.wpe, full.transformer.drop
        self.h = torch.nn.ModuleList(mine)
        if self.last:
            self.ln_f = full.transformer.ln_f
            self.head = torch.nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, dtype=torch.bfloat16)
            self.head.weight.data.copy_(full.lm_head.weight.data)

    def forward(self, x):
        if self.first:
            pos = torch.arange(x.shape[1], device=x.device)
            x = self.drop(self.wte(x) + self.wpe(pos))
        for b in self.h:
            x = hidden(b(x))
        if self.last:
            x = self.head(self.ln_f(x))
        return x


def loss_fn(logits, labels):  # as transformers' ForCausalLMLoss: shifted, fp32
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())


dev = torch.device("cuda", local)
history_start(a.history, rank, True)
mod = Stage(full).to(dev)
del full
stage = PipelineStage(mod, rank, world, dev)
sched = (Schedule1F1B if a.schedule == "1f1b" else ScheduleGPipe)(stage, a.micro, loss_fn=loss_fn)
opt = torch.optim.AdamW(mod.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1)
times = []
for step in range(a.steps):
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).to(dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if rank == 0:
        sched.step(ids)
    elif rank == world - 1:
        sched.step(target=ids, losses=[])
    else:
        sched.step()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
history_write(a.history, rank, True)
print(json.dumps({"mode": "pp-" + a.schedule, "model": a.model, "world": world, "rank": rank,
                  "layers": len(mine), "batch": a.batch, "micro": a.micro, "seq": a.seq,
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "max_reserved": torch.cuda.max_memory_reserved(),
                  "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
      flush=True)
dist.destroy_process_group()
