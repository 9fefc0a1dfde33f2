#!/usr/bin/env python3
"""The smallest job that crashed under the interposer on 2 H200s
(bench/results/parallel-calibration): a NCCL scatter, the first
point-to-point operation (DTensor's distribute_tensor uses it).
  torchrun --nproc-per-node 2 bench/gpu/jobs/scatter_job.py"""
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
