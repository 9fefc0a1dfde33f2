"""What the multi-GPU bench jobs (bench/gpu/jobs/multi_gpu_job.py, bench/gpu/jobs/tp_job.py)
share: the torchrun process's rank, a model config from a config.json, and
the live set at rank 0's peak (bench/gpu/jobs/peak_blocks.py)."""
import json
import os

import torch
import torch.distributed as dist


def init_distributed():
    """(rank, local rank, world size) of this torchrun process, its GPU set
    and NCCL started."""
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    return rank, local, world


def config_from_file(path):
    """A transformers config from a config.json (data/models/, bench/configs/)."""
    from transformers import AutoConfig
    with open(path) as f:
        raw = json.load(f)
    return AutoConfig.for_model(raw.pop("model_type"),
                                **{k: v for k, v in raw.items()
                                   if k not in ("architectures", "torch_dtype")})


def history_path(path, rank):
    """Rank 0 writes PATH, rank r PATH with -rank<r> before .json."""
    return path if rank == 0 else path.replace(".json", "") + "-rank%d.json" % rank


def history_start(path, rank, all_ranks=False):
    """Record the allocator's history on rank 0 (every rank with
    all_ranks) when PATH is given."""
    if path and (rank == 0 or all_ranks):
        torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks="python")


def history_write(path, rank, all_ranks=False):
    """Write what was live at the peak since history_start to PATH."""
    if path and (rank == 0 or all_ranks):
        from peak_blocks import summary
        with open(history_path(path, rank), "w") as f:
            json.dump(summary(torch.cuda.memory._snapshot()), f, indent=1)
        torch.cuda.memory._record_memory_history(enabled=None)
