"""What the bench jobs share: the torchrun process's rank, a model config
from a config.json, the live set at rank 0's peak (parallel_jobs.py data,
parallel_jobs.py tensor, parallel_jobs.py pipeline); what is live at the peak of allocated memory by the
Python line that allocated it (summary, frame_list: bench/gpu/run.sh histories,
tracer_checks.py history, model_facts.py type-peaks); the live blocks no known storage
explains (known_storages, unknown_blocks: the probe jobs)."""
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
        with open(history_path(path, rank), "w") as f:
            json.dump(summary(torch.cuda.memory._snapshot()), f, indent=1)
        torch.cuda.memory._record_memory_history(enabled=None)


# --- what is live at the peak
# What is live at the peak of allocated memory, by the Python line that
# allocated it: from a snapshot of torch.cuda.memory._record_memory_history
# (stacks="python"). Used on the device, where the snapshot is too large to
# bring back; the summary is small.
#
#     from job_common import summary; summary(torch.cuda.memory._snapshot())
#
# Returns {"peak_bytes", "events", "groups": [{"bytes", "count", "sizes",
# "where"}]}: blocks live at the event that reached the highest allocated
# bytes (alloc adds, free_completed removes, as memory_allocated() counts),
# grouped by the innermost frames outside torch's own files.


def frame_list(e, n, skip, short):
    """The innermost n Python frames of a history event, as "FILE:LINE
    FUNCTION" with FILE shortened by short(), leaving out torch's memory
    module and files whose path contains skip (the recorder's own)."""
    out = []
    for f in e.get("frames") or []:
        fn = f.get("filename", "")
        if "torch/cuda/memory" in fn or skip in fn:
            continue
        out.append("%s:%s %s" % (short(fn), f.get("line"), f.get("name")))
        if len(out) == n:
            break
    return out


def where(e, n=3):
    """The innermost n frames, paths from site-packages, "A < B < C"."""
    return " < ".join(frame_list(e, n, "job_common", lambda fn: fn.split("site-packages/")[-1]))


def summary(snap, top=40):
    tr = max(snap.get("device_traces") or [[]], key=len)
    live, alloc, peak, at = {}, 0, 0, -1
    for i, e in enumerate(tr):
        a = e.get("action")
        if a == "alloc":
            live[e["addr"]] = i
            alloc += int(e["size"])
            if alloc > peak:
                peak, at = alloc, i
        elif a == "free_completed":
            if live.pop(e["addr"], None) is not None:
                alloc -= int(e["size"])
    # the live set at the peak: replay up to it
    live = {}
    for e in tr[:at + 1]:
        a = e.get("action")
        if a == "alloc":
            live[e["addr"]] = e
        elif a == "free_completed":
            live.pop(e["addr"], None)
    groups = {}
    for e in live.values():
        k = where(e)
        g = groups.setdefault(k, {"bytes": 0, "count": 0, "sizes": {}, "where": k})
        g["bytes"] += int(e["size"])
        g["count"] += 1
        g["sizes"][str(e["size"])] = g["sizes"].get(str(e["size"]), 0) + 1
    out = sorted(groups.values(), key=lambda g: -g["bytes"])[:top]
    for g in out:
        g["sizes"] = dict(sorted(g["sizes"].items(), key=lambda kv: -int(kv[0]) * kv[1])[:6])
    # blocks freed before the peak that the history never saw allocated
    # (made before recording began), and the events that led to the peak
    seen, unseen = set(), []
    for i, e in enumerate(tr[:at + 1]):
        if e.get("action") == "alloc":
            seen.add(e["addr"])
        elif e.get("action") == "free_completed" and e["addr"] not in seen:
            unseen.append([i, int(e["size"]), where(e)])
    near = [[i, tr[i].get("action"), int(tr[i].get("size", 0)), where(tr[i], 2)]
            for i in range(max(0, at - 24), min(len(tr), at + 4))]
    big = [[i, e.get("action"), int(e.get("size", 0)), where(e, 2)] for i, e in enumerate(tr)
           if int(e.get("size", 0)) >= 64 << 20 and e.get("action") in ("alloc", "free_completed")]
    return {"peak_bytes": peak, "events": len(tr), "peak_event": at,
            "peak_where": where(tr[at], 6) if at >= 0 else None, "groups": out,
            "unseen_frees_before_peak": unseen[:50], "near_peak": near, "large_events": big[:4000]}


# --- the live blocks no known storage explains
# The live blocks of PyTorch's caching allocator that are not among the
# known storages (data pointers), largest first, each with its requested
# size and allocating frames (allocation history must be on for frames).
# Shared by the bench scripts that look for what a ledger leaves unnamed.


def known_storages(torch, model, opt, *extra):
    """The data pointers of a model's parameters, buffers and gradients,
    an optimizer's states, and the extra tensors given."""
    ts = list(model.parameters()) + list(model.buffers())
    ts += [p.grad for p in model.parameters()]
    ts += [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    ts += list(extra)
    return {t.untyped_storage().data_ptr() for t in ts if t is not None and t.is_cuda}


def unknown_blocks(torch, known, frames=8, skip=()):
    snap = torch.cuda.memory._snapshot()
    rest = []
    for seg in snap["segments"]:
        addr = seg["address"]
        for blk in seg["blocks"]:
            if blk["state"] == "active_allocated" and addr not in known:
                fr = [f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}"
                      for f in blk.get("frames", [])
                      if not any(s in f["filename"] for s in skip)][:frames]
                rest.append({"bytes": blk["size"], "requested": blk.get("requested_size"),
                             "frames": fr})
            addr += blk["size"]
    rest.sort(key=lambda r: -r["bytes"])
    return rest
