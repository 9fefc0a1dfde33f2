"""`vramledger trace --snapshot FILE`: the replayed allocator's state as the
pickle torch.cuda.memory._dump_snapshot() writes, loaded back by PyTorch's
own torch.cuda._memory_viz (Debian's torch): its segments and blocks add up
to the replay's peak reserved and allocated; at the end, what is left;
an existing file is never overwritten. usage: test_snapshot.py VRAMLEDGER"""
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

import torch.cuda._memory_viz as memory_viz

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.path.join(os.path.dirname(HERE), "data", "traces")
VL = sys.argv.pop(1) if len(sys.argv) > 1 else "vramledger"


def replay(trace, snap, *extra):
    p = subprocess.run([VL, "trace", "--replay", os.path.join(TRACES, trace), "--format", "json",
                        "--snapshot", snap] + list(extra), capture_output=True, text=True)
    return p, (json.loads(p.stdout) if p.returncode == 0 else None)


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


class Snapshot(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def test_at_the_peak(self):
        path = os.path.join(self.tmp, "peak.pickle")
        p, rep = replay("frag.trace", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        snap = load(path)
        segs = snap["segments"]
        r = rep["replays"][0]
        if hasattr(memory_viz, "stats"):  # torch < 2.13
            st = memory_viz.stats(segs)  # asserts each segment's blocks sum to its size
            self.assertEqual(st["total_size"].value, r["peak_reserved_bytes"])
            self.assertEqual(st["active_allocated"].value, r["peak_allocated_bytes"])
            self.assertEqual(st["segments"], r["segments_created"])
        else:  # torch 2.13 dropped stats(): segsum reads every segment and block
            self.assertTrue(memory_viz.segsum(snap))
            self.assertEqual(sum(s["total_size"] for s in segs), r["peak_reserved_bytes"])
            self.assertEqual(sum(b["size"] for s in segs for b in s["blocks"]
                                 if b["state"] == "active_allocated"), r["peak_allocated_bytes"])
            self.assertEqual(len(segs), r["segments_created"])
        self.assertEqual(sum(s["allocated_size"] for s in segs), r["peak_allocated_bytes"])
        # segments() takes the segment list (torch < 2.13) or the snapshot
        arg = segs if hasattr(memory_viz, "stats") else snap
        lines = memory_viz.segments(arg, format_flamegraph=lambda text: text).splitlines()
        blocks = sum(len(s["blocks"]) for s in segs)  # a line a block (torch 2.13 adds free ones)
        if hasattr(memory_viz, "stats"):
            self.assertEqual(len(lines), blocks)
        else:
            self.assertGreaterEqual(len(lines), blocks)
        # the blocks tile each segment, in address order
        for s in segs:
            a = s["address"]
            for b in s["blocks"]:
                self.assertEqual(b["address"], a)
                a += b["size"]
            self.assertEqual(a, s["address"] + s["total_size"])
        # the events up to the peak: every allocation before it was made
        events = snap["device_traces"][0]
        self.assertGreater([e["action"] for e in events].count("alloc"), 0)
        self.assertLessEqual(len(events), rep["allocations"] + rep["frees"])

    def test_at_the_end(self):
        path = os.path.join(self.tmp, "end.pickle")
        p, rep = replay("frag.trace", path, "--snapshot-at", "end")
        self.assertEqual(p.returncode, 0, p.stderr)
        snap = load(path)
        live = sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                   if b["state"] == "active_allocated")
        events = snap["device_traces"][0]
        allocs = {}
        for e in events:  # replaying the events gives the blocks still live
            if e["action"] == "alloc":
                allocs[e["addr"]] = e["size"]
            else:
                allocs.pop(e["addr"])
        self.assertEqual(live, sum(allocs.values()))
        self.assertEqual(len(events), rep["allocations"] + rep["frees"])

    def test_never_overwrites(self):
        path = os.path.join(self.tmp, "taken.pickle")
        with open(path, "w") as f:
            f.write("mine")
        p, _ = replay("frag.trace", path)
        self.assertEqual(p.returncode, 1)
        self.assertIn("never overwritten", p.stderr)
        with open(path) as f:
            self.assertEqual(f.read(), "mine")


if __name__ == "__main__":
    unittest.main()
