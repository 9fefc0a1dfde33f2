#!/usr/bin/env python3
"""A tensor-parallel training job, one process per GPU
(torchrun): a Hugging Face causal LM built from a config file (random
weights), its linears split the Megatron way with PyTorch's DTensor
(torch.distributed.tensor.parallel): q/k/v and gate/up column-wise, o and
down row-wise, the embedding and the LM head split over the vocabulary, the
loss computed on the vocabulary-split logits (loss_parallel). Norms and the
residual stream stay replicated, or with --sp are split over the sequence
(sequence parallelism: the norms SequenceParallel, attention and MLP gather
their input, o and down reduce-scatter their output, as PyTorch's recipe
for Llama). Every rank prints one JSON line: its max_memory_allocated/
reserved, its median step time.

  torchrun --nproc-per-node 2 bench/gpu/jobs/tp_job.py --config FILE
      [--precision amp-bf16|bf16|fp32] [--attention sdpa|eager]
      [--checkpointing none|full] [--sp] [--batch 4 --seq 1024 --steps 5]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from job_common import config_from_file, history_start, history_write, init_distributed

ap = argparse.ArgumentParser()
ap.add_argument("--config", required=True)
ap.add_argument("--precision", default="amp-bf16")
ap.add_argument("--attention", default="sdpa")
ap.add_argument("--checkpointing", default="none")
ap.add_argument("--sp", action="store_true", help="sequence parallelism over the TP group")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--history", help="rank 0 writes what is live at its peak here (bench/gpu/jobs/job_common.py summary())")
a = ap.parse_args()
rank, local, world = init_distributed()
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel, loss_parallel,
                                               parallelize_module)
from transformers import AutoModelForCausalLM

mesh = init_device_mesh("cuda", (world,))
cfg = config_from_file(a.config)
cfg.attn_implementation = a.attention
cfg._attn_implementation = a.attention
cfg.use_cache = False
torch.manual_seed(0)  # every rank the same weights before the split
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=a.attention)
if a.precision in ("bf16",):
    model.to(torch.bfloat16)
if a.checkpointing == "full":
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model.train()
seq_out = Shard(1) if a.sp else Replicate()
for layer in model.model.layers:
    plan = {
        "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(output_layouts=seq_out),
        "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=seq_out),
    }
    if a.sp:
        plan.update({
            "input_layernorm": SequenceParallel(), "post_attention_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                            desired_input_kwarg_layouts={"hidden_states": Replicate()}),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        })
    parallelize_module(layer, mesh, plan)
top = {
    "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq_out),
    "lm_head": ColwiseParallel(input_layouts=seq_out, output_layouts=Shard(-1), use_local_output=False),
}
if a.sp:
    top["model.norm"] = SequenceParallel()
parallelize_module(model, mesh, top)
# foreach kernels take one kind of tensor at a time: split parameters (DTensor)
# and replicated ones (norms) into two groups; same update
split = [p for p in model.parameters() if hasattr(p, "to_local")]
whole = [p for p in model.parameters() if not hasattr(p, "to_local")]
opt = torch.optim.AdamW([{"params": split}, {"params": whole}], lr=1e-4)
torch.cuda.reset_peak_memory_stats()
g = torch.Generator().manual_seed(1)  # every rank the same batch
history_start(a.history, rank)
times = []
for step in range(a.steps):
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).cuda()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision.startswith("amp")):
        # positions of the whole sequence: under --sp the embeddings' output
        # is this rank's slice of it, from which transformers would count
        pos = torch.arange(a.seq, device="cuda")
        hidden = model.model(input_ids=ids, position_ids=pos[None], cache_position=pos).last_hidden_state
        logits = model.lm_head(hidden)
    # transformers' ForCausalLMLoss: fp32 logits, labels shifted by padding
    labels = F.pad(ids, (0, 1), value=-100)[..., 1:]
    with loss_parallel():
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
history_write(a.history, rank)
print(json.dumps({"mode": "tp-sp" if a.sp else "tp", "config": os.path.basename(a.config), "world": world, "rank": rank,
                  "precision": a.precision, "attention": a.attention,
                  "checkpointing": a.checkpointing, "batch": a.batch, "seq": a.seq,
                  "loss": float(loss.item()),
                  "local_params": sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                                      for p in model.parameters()),
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "max_reserved": torch.cuda.max_memory_reserved(),
                  "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
      flush=True)
dist.destroy_process_group()
