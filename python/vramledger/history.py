"""A PyTorch memory snapshot's allocator history as a vramledger trace.

    python3 -m vramledger.history SNAPSHOT.pickle [--device N] > alloc.trace
    vramledger trace --replay alloc.trace

SNAPSHOT is what torch.cuda.memory._dump_snapshot() writes after
torch.cuda.memory._record_memory_history() (the file pytorch.org/memory_viz
reads; `vramledger run --snapshot` writes one at an out-of-memory error).
Its device_traces hold the CUDA caching allocator's own events: every block
handed out (`alloc`, with the block's size), every block given back
(`free_completed`), every segment taken from and returned to the driver.
The trace keeps the blocks' allocations and frees, in order, so the replay
sees exactly what the allocator saw; the segments are kept aside as the
allocator's own answer (peak reserved) that the replay must reproduce.

Where an allocation's frames say where it came from, its trace line says
so too: `at=FILE:LINE` from the innermost Python frame outside PyTorch's
own files (torch/...: the layer's forward, not the op's), and the module
when a frame's name is a module's path in the model (`model.layers.0.mlp`,
as `vramledger trace --snapshot` writes them; a function's name, such as
`forward`, is not one): `trace --replay` then names them as it names a
traced job's.

On stderr, one JSON line: events kept, and what the history itself says
(peak allocated, peak reserved from its segment events, events that the
segments freed: the job emptied the cache, or the allocator released its
cache before retrying a failed cudaMalloc; each run of such frees is an
`e` line, which the replay carries out as empty_cache()).
"""
import json
import pickle
import sys


def _where(frames):
    """' MODULE at=FILE:LINE' (either part when known) of an event's frames"""
    words = ""
    for f in frames or ():
        name = str(f.get("name", ""))
        if "." in name and " " not in name and not name.startswith("<"):
            words += " " + name
            break
    for f in frames or ():
        fn, line = str(f.get("filename", "")), f.get("line", 0)
        if fn.endswith(".py") and "torch/" not in fn and " " not in fn and line:
            return words + " at=%s:%d" % (fn, int(line))
    return words


def convert(snap, out, device=None):
    traces = snap.get("device_traces") or []
    if device is None:  # the device with the most events
        device = max(range(len(traces)), key=lambda i: len(traces[i]), default=0)
    if device >= len(traces):
        raise ValueError("the snapshot has no allocator history for device %d "
                         "(was _record_memory_history on?)" % device)
    ids, nid = {}, 1
    alloc = peak_alloc = reserved = peak_reserved = 0
    kept = segfrees = unmatched = 0
    last = None
    for e in traces[device]:
        act, addr, size = e.get("action"), e.get("addr"), int(e.get("size", 0))
        prev, last = last, act
        if act == "alloc":
            ids[addr] = (nid, size)
            out.write("a %d %d cuda%s\n" % (nid, size, _where(e.get("frames"))))
            nid += 1
            kept += 1
            alloc += size
            peak_alloc = max(peak_alloc, alloc)
        elif act == "free_completed":
            got = ids.pop(addr, None)
            if got is None:
                unmatched += 1  # allocated before the history started
                continue
            out.write("f %d\n" % got[0])
            kept += 1
            alloc -= got[1]
        elif act == "segment_alloc":
            # where the driver put it: the replay breaks ties between free
            # blocks of one size by address, as the allocator does
            out.write("s %d %d\n" % (addr, size))
            reserved += size
            peak_reserved = max(peak_reserved, reserved)
        elif act == "segment_map":
            out.write("# %s %d\n" % (act, size))  # the allocator's own answer, for reading
            reserved += size
            peak_reserved = max(peak_reserved, reserved)
        elif act in ("segment_free", "segment_unmap"):
            # empty_cache() (or the release before a retried cudaMalloc)
            # returns every wholly free segment at once: one 'e' for the lot
            if prev not in ("segment_free", "segment_unmap"):
                out.write("e\n")
            out.write("# %s %d\n" % (act, size))
            reserved -= size
            segfrees += 1
    return {"device": device, "events": kept, "peak_allocated_bytes": peak_alloc,
            "peak_reserved_bytes": peak_reserved, "segment_frees": segfrees,
            "frees_without_alloc": unmatched}


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0 if argv else 2
    device = None
    if len(argv) == 3 and argv[1] == "--device":
        device = int(argv[2])
    elif len(argv) != 1:
        sys.stderr.write("usage: python3 -m vramledger.history SNAPSHOT.pickle [--device N]\n")
        return 2
    try:
        with open(argv[0], "rb") as f:
            snap = pickle.load(f)
        info = convert(snap, sys.stdout, device)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, AttributeError) as e:
        sys.stderr.write("vramledger.history: %s: %s\n" % (argv[0], e))
        return 1
    sys.stderr.write(json.dumps(info) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
