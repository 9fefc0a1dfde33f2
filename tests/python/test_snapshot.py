"""`vramledger trace --snapshot FILE`: the replayed allocator's state as the
pickle torch.cuda.memory._dump_snapshot() writes, loaded back by PyTorch's
own torch.cuda._memory_viz (Debian's torch 1.13 as python_snapshot, the
stack's as stack_snapshot): its segments and blocks add up to the replay's
peak reserved and allocated; its events (alloc, free_requested,
free_completed, segment_alloc, segment_free, each with time_us, frames,
addr, size, stream: torch/csrc/cuda/memory_snapshot.cpp's keys) replay to
the segments and blocks it holds; a block's one frame names the module and
source line that allocated it, read by plain pickle and, where
_memory_viz reads blocks' frames (torch 2.1 on), by memory() and trace();
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
        actions = [e["action"] for e in events]
        self.assertGreater(actions.count("alloc"), 0)
        self.assertLessEqual(actions.count("alloc") + actions.count("free_completed"),
                             rep["allocations"] + rep["frees"])
        self.assertEqual(actions.count("segment_alloc"), len(segs))  # none freed before the peak

    def test_at_the_end(self):
        path = os.path.join(self.tmp, "end.pickle")
        p, rep = replay("frag.trace", path, "--snapshot-at", "end")
        self.assertEqual(p.returncode, 0, p.stderr)
        snap = load(path)
        live = sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                   if b["state"] == "active_allocated")
        events = snap["device_traces"][0]
        allocs, requested, cached = {}, set(), {}
        last = -1
        for e in events:  # replaying the events gives the blocks and segments still there
            self.assertTrue({"action", "size", "stream", "time_us", "frames"} <= set(e), e)
            self.assertGreaterEqual(e["time_us"], last)  # in the trace's order
            last = e["time_us"]
            a = e["action"]
            if a == "alloc":
                self.assertTrue(any(s <= e["addr"] < s + n for s, n in cached.items()), e)
                allocs[e["addr"]] = e["size"]
            elif a == "free_requested":
                self.assertIn(e["addr"], allocs)
                requested.add(e["addr"])
            elif a == "free_completed":  # one stream: right after its request
                requested.remove(e["addr"])
                self.assertEqual(allocs.pop(e["addr"]), e["size"])
            elif a == "segment_alloc":
                cached[e["addr"]] = e["size"]
            elif a == "segment_free":
                self.assertEqual(cached.pop(e["addr"]), e["size"])
            else:
                self.fail(e)
        self.assertEqual(live, sum(allocs.values()))
        self.assertEqual({s["address"]: s["total_size"] for s in snap["segments"]}, cached)
        actions = [e["action"] for e in events]
        self.assertEqual(actions.count("alloc"), rep["allocations"])
        self.assertEqual(actions.count("free_completed"), rep["frees"])
        self.assertEqual(actions.count("free_requested"), rep["frees"])

    def where(self, *extra):
        """tests/data/traces/where.trace's snapshot: a 1000-byte block of
        module model.h.0 from train.py:12, 5 MB from modeling.py:88 (no
        module), the first freed, 100 bytes of module x (no line)"""
        path = os.path.join(self.tmp, "where%d.pickle" % len(os.listdir(self.tmp)))
        p, _ = replay("where.trace", path, *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        return load(path)

    def test_frames(self):  # plain pickle: any Python reads them
        snap = self.where("--snapshot-at", "end")
        frames = {b["requested_size"]: b["frames"] for s in snap["segments"]
                  for b in s["blocks"] if b["state"] == "active_allocated"}
        self.assertEqual(frames, {
            5000000: [{"filename": "modeling.py", "line": 88, "name": "??"}],
            100: [{"filename": "??", "line": 0, "name": "x"}]})
        for s in snap["segments"]:  # a free block has no frame
            self.assertTrue(all(b["frames"] == [] for b in s["blocks"]
                                if b["state"] == "inactive"))
        events = snap["device_traces"][0]
        model = [{"filename": "train.py", "line": 12, "name": "model.h.0"}]
        # the block freed: its events carry the frame of its allocation
        mine = [e for e in events if e["frames"] == model]
        self.assertEqual([e["action"] for e in mine],
                         ["segment_alloc", "alloc", "free_requested", "free_completed"])
        self.assertEqual([e["time_us"] for e in mine], [0, 0, 2, 2])  # the trace's lines

    def test_empty_cache_and_oom(self):
        trace = os.path.join(self.tmp, "e.trace")  # a block freed, empty_cache(), a small one
        with open(trace, "w") as f:
            f.write("a 1 6291456 cuda\nf 1\ne\na 2 1000 cuda m\n")
        path = os.path.join(self.tmp, "e.pickle")
        p, _ = replay(trace, path, "--snapshot-at", "end")
        self.assertEqual(p.returncode, 0, p.stderr)
        events = load(path)["device_traces"][0]
        self.assertEqual([(e["action"], e["size"], e["time_us"]) for e in events], [
            ("segment_alloc", 20 << 20, 0), ("alloc", 6291456, 0),
            ("free_requested", 6291456, 1), ("free_completed", 6291456, 1),
            ("segment_free", 20 << 20, 2),  # the cudaFree of empty_cache()
            ("segment_alloc", 2 << 20, 3), ("alloc", 1024, 3)])
        # out of memory on an L4: the allocation that failed, and what was left
        path = os.path.join(self.tmp, "oom.pickle")
        p, _ = replay("oom-l4.trace", path, "--gpu", "l4", "--snapshot-at", "end")
        self.assertEqual(p.returncode, 3, p.stderr)
        last = load(path)["device_traces"][0][-1]
        self.assertEqual(last["action"], "oom")
        self.assertNotIn("addr", last)
        self.assertGreater(last["size"], last["device_free"])

    def test_history_round_trip(self):
        """python3 -m vramledger.history turns the snapshot back into a trace
        that names the same modules and lines, and replays to the same peak"""
        path = os.path.join(self.tmp, "rt.pickle")
        p, rep = replay("where.trace", path, "--snapshot-at", "end")
        self.assertEqual(p.returncode, 0, p.stderr)
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(HERE), "..", "python"))
        h = subprocess.run([sys.executable, "-m", "vramledger.history", path], env=env,
                           capture_output=True, text=True)
        self.assertEqual(h.returncode, 0, h.stderr)
        allocs = [l for l in h.stdout.splitlines() if l.startswith("a ")]
        # module x is no path in a model: a function's name to the converter
        self.assertEqual(allocs, ["a 1 1024 cuda model.h.0 at=train.py:12",
                                  "a 2 5000192 cuda at=modeling.py:88", "a 3 512 cuda"])
        back = os.path.join(self.tmp, "rt.trace")
        with open(back, "w") as f:
            f.write(h.stdout)
        p2, rep2 = replay(back, os.path.join(self.tmp, "rt2.pickle"))
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertEqual(rep2["replays"][0]["peak_allocated_bytes"],
                         rep["replays"][0]["peak_allocated_bytes"])
        self.assertEqual(rep2["replays"][0]["peak_reserved_bytes"],
                         rep["replays"][0]["peak_reserved_bytes"])

    def test_hostile_names(self):  # a trace's bytes become valid UTF-8 strings
        path = os.path.join(self.tmp, "hostile.pickle")
        p, _ = replay("hostile.trace", path, "--snapshot-at", "end")
        self.assertEqual(p.returncode, 0, p.stderr)
        names = [f["name"] for e in load(path)["device_traces"][0] for f in e["frames"]]
        self.assertIn("<i>mod\x1b[2J", names)

    @unittest.skipUnless(hasattr(memory_viz, "_block_extra"),
                         "this torch's _memory_viz reads no block frames (torch < 2.1)")
    def test_memory_viz_names_the_module(self):
        snap = self.where()  # at the peak: both first blocks live
        lines = memory_viz.memory(snap, format_flamegraph=lambda text: text).splitlines()
        self.assertIn("stream_0;active_allocated;train.py:12:model.h.0 1000", lines)
        self.assertIn("stream_0;active_allocated;modeling.py:88:?? 5000000", lines)
        self.assertNotIn("<non-python>", "\n".join(l for l in lines if "active_allocated" in l))
        text = memory_viz.trace(snap)
        self.assertIn("cudaMalloc(", text)  # the segment_alloc events
        self.assertIn("4 entries", text)  # segment_alloc, alloc, segment_alloc, alloc
        html = memory_viz.trace_plot(snap)  # the page pytorch.org/memory_viz's code draws
        self.assertIn("snapshot.pickle", html)

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
