"""The live blocks of PyTorch's caching allocator that are not among the
known storages (data pointers), largest first, each with its requested
size and allocating frames (allocation history must be on for frames).
Shared by the bench scripts that look for what a ledger leaves unnamed."""


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
