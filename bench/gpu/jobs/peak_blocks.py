"""What is live at the peak of allocated memory, by the Python line that
allocated it: from a snapshot of torch.cuda.memory._record_memory_history
(stacks="python"). Used on the device, where the snapshot is too large to
bring back; the summary is small.

    from peak_blocks import summary; summary(torch.cuda.memory._snapshot())

Returns {"peak_bytes", "events", "groups": [{"bytes", "count", "sizes",
"where"}]}: blocks live at the event that reached the highest allocated
bytes (alloc adds, free_completed removes, as memory_allocated() counts),
grouped by the innermost frames outside torch's own files."""


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
    return " < ".join(frame_list(e, n, "peak_blocks", lambda fn: fn.split("site-packages/")[-1]))


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
