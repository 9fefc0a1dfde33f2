"""The live blocks of PyTorch's caching allocator that are not among the
known storages (data pointers), largest first, each with its allocating
frames (allocation history must be on for frames). Shared by the bench
scripts that look for what a ledger leaves unnamed."""


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
                rest.append({"bytes": blk["size"], "frames": fr})
            addr += blk["size"]
    rest.sort(key=lambda r: -r["bytes"])
    return rest
