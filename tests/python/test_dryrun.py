"""vramledger.dry_run on Debian's CPU build of torch: a training loop traced
in process on the CPU and on meta tensors, replayed by the vramledger
program ($VRAMLEDGER_BIN, set by ctest); tracing stops cleanly; an exception
is no result; fits(); what is refused. usage: test_dryrun.py"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch

import vramledger
from vramledger import dryrun, tracer
from torch.utils._python_dispatch import _get_current_dispatch_mode

VL = os.environ.get("VRAMLEDGER_BIN", "vramledger")
JOB_PY = os.environ.get("VL_JOB_PYTHON", sys.executable)  # a job's Python: ctest names warm.py's client
B = 8
SHAPES = [(64, 32), (64,), (16, 64), (16,)]  # the model's parameters


def rounded(n):  # the caching allocator's 512 B rounding
    return (n + 511) // 512 * 512


PARAMS_ROUNDED = sum(rounded(4 * torch.Size(s).numel()) for s in SHAPES)


def loop(device):
    """A model, Adam, and the step that trains it on DEVICE."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64, device=device), torch.nn.ReLU(),
                                torch.nn.Linear(64, 16, device=device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        x = torch.randn(B, 32, device=device)
        loss = torch.nn.functional.mse_loss(model(x), torch.zeros(B, 16, device=device))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model, step


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


def workspaces(path):
    """bytes of the cuBLAS workspaces the tracer added"""
    return sum(int(l.split()[2]) for l in lines(path) if l.endswith(" cublas_workspace"))


def replay(path, *flags):
    p = subprocess.run([VL, "trace", "--replay", path, "--format", "json"] + list(flags),
                       capture_output=True, text=True)
    return json.loads(p.stdout), p.returncode


class Work(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vl-dryrun-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)


class Cpu(Work):
    """A CPU training loop: the peak holds what Adam's step must hold at
    once, and is what `vramledger trace --replay` says of the same trace."""

    def test_training_loop(self):
        model, step = loop("cpu")
        t = self.path("cpu.trace")
        d = vramledger.dry_run(step, steps=3, gpu="h100-80gb", batch=[16, 32], trace=t)
        self.assertEqual(d.device, "all")  # a CPU dry run: every allocation
        self.assertTrue(d.complete)
        self.assertEqual(d.batch, B)  # learnt from the first forward's input
        self.assertFalse(d.oom)
        # parameters, gradients and Adam's two states live at once at the
        # optimizer step, each tensor rounded to 512 B, beside the workspaces
        need = 4 * PARAMS_ROUNDED + workspaces(t)
        self.assertGreaterEqual(d.peak_allocated_bytes, need)
        self.assertLess(d.peak_allocated_bytes, need + (1 << 20))  # nothing absurd for 12 KB
        self.assertGreaterEqual(d.peak_reserved_bytes, d.peak_allocated_bytes)
        # the steps are marked (torch 2.13: the peak is the first step's
        # optimizer, making Adam's states beside its temporaries)
        self.assertIn(d.peak_mark, ("step 0", "step 1", "step 2"))
        self.assertRegex(d.peak_at, r"^test_dryrun\.py:\d+$")  # a line of this file
        marks = [l for l in lines(t) if l.startswith("m ")]
        self.assertEqual(marks, ["m step 0", "m step 1", "m step 2"])
        # the same as the program says of the same trace, with the same flags
        cli, rc = replay(t, "--gpu", "h100-80gb", "--batch", "16,32")
        self.assertEqual(rc, 0)
        self.assertEqual(d.replays, cli["replays"])
        self.assertEqual(d.peak_allocated_bytes, cli["replays"][0]["peak_allocated_bytes"])
        self.assertEqual(d.peak_reserved_bytes, cli["replays"][0]["peak_reserved_bytes"])
        for k in ("peak_mark", "peak_at", "peak_module", "peak_dtype", "complete", "device"):
            self.assertEqual(getattr(d, k), cli[k], k)
        # the batch replays: activations grow, the rest does not
        self.assertEqual(sorted(d.batches), [16, 32])
        self.assertEqual(d.batches[16]["allocator"], "batch 16 (traced 8)")
        self.assertGreater(d.batches[32]["peak_allocated_bytes"],
                           d.batches[16]["peak_allocated_bytes"])
        self.assertGreater(d.batches[16]["peak_allocated_bytes"], d.peak_allocated_bytes)
        self.assertRegex(repr(d), r"peak allocated \d+\.\d{3} GiB, peak reserved \d+\.\d{3} GiB")
        self.assertIn("on h100-80gb: no out of memory", repr(d))
        self.assertIn("at batch 16:", repr(d))

    def test_context_manager(self):
        """The with form traces the block; no marks but the user's."""
        _, step = loop("cpu")
        t = self.path("with.trace")
        with vramledger.dry_run(trace=t) as d:
            for i in range(2):
                vramledger.mark("mine %d" % i)
                step(i)
            self.assertRegex(repr(d), "tracing")
        cli, _ = replay(t)
        self.assertEqual(d.replays, cli["replays"])
        self.assertIn("m mine 1", lines(t))
        self.assertIsNone(d.oom)  # no card asked
        self.assertGreaterEqual(d.peak_allocated_bytes, 4 * PARAMS_ROUNDED + workspaces(t))

    def test_convolutions_said(self):
        """A job of convolutions: how many ran, and what the replay cannot
        hold because of them (cuDNN's workspaces on CUDA); none in a loop
        without them."""
        conv = torch.nn.Conv2d(3, 4, 3)

        def step(i):
            conv(torch.randn(2, 3, 8, 8)).sum().backward()
        d = vramledger.dry_run(step, steps=2)
        self.assertEqual(d.convolutions, 4)  # two forwards, two backwards
        self.assertEqual(len(d.caveats), 1)
        self.assertIn("cuDNN workspace", d.caveats[0])
        _, plain = loop("cpu")
        self.assertEqual(vramledger.dry_run(plain, steps=1).caveats, [])

    def test_allocator_settings(self):
        _, step = loop("cpu")
        t = self.path("whatif.trace")
        d = vramledger.dry_run(step, allocator="what-if", trace=t)
        self.assertEqual([r["allocator"] for r in d.replays],
                         ["default", "expandable_segments", "max_split_size_mb:128",
                          "garbage_collection_0.6"])
        e = vramledger.dry_run(step, allocator="expandable_segments:True,max_split_size_mb:64")
        self.assertEqual(e.replays[0]["allocator"], "as given")
        self.assertIsNone(e.trace)  # the temporary trace is gone
        with self.assertRaisesRegex(ValueError, "backend.*not modelled"):
            vramledger.dry_run(step, allocator="backend:cudaMallocAsync")
        with self.assertRaisesRegex(ValueError, "batch="):
            vramledger.dry_run(step, batch=0)


class Meta(Work):
    """On meta tensors the meta allocations are replayed: what the CPU
    dry run holds, less the few that stay on the CPU (Adam's step
    counters, as on a GPU)."""

    def test_training_loop(self):
        _, step = loop("meta")
        t = self.path("meta.trace")
        m = vramledger.dry_run(step, trace=t)
        self.assertEqual(m.device, "meta")
        need = 4 * PARAMS_ROUNDED + workspaces(t)
        self.assertGreaterEqual(m.peak_allocated_bytes, need)
        self.assertLess(m.peak_allocated_bytes, need + (1 << 20))
        cli, _ = replay(t)
        self.assertEqual(m.replays, cli["replays"])
        _, cpu_step = loop("cpu")
        c = vramledger.dry_run(cpu_step)
        self.assertLessEqual(m.peak_allocated_bytes, c.peak_allocated_bytes)
        self.assertLess(c.peak_allocated_bytes - m.peak_allocated_bytes, 64 << 10)


class Stops(Work):
    """Tracing stops at the end: the dispatch mode exited, the tracer's
    patches undone, nothing made afterwards in the trace; a second dry run
    in the same process traces as the first did."""

    def emulate(self, i):  # CUDA's paths (docs/cmd/trace.md): dropout's mask, autocast's pow
        x = torch.randn(1000, 37, requires_grad=True)
        d = torch.nn.functional.dropout(x, 0.1, True)
        h = torch.randn(1000, 41, dtype=torch.bfloat16, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.pow(h, 3.0)
        (d.sum() + y.sum().float()).backward()

    def sizes(self, path):
        return [int(l.split()[2]) for l in lines(path) if l[0] in "ab"]

    def test_stops_and_restores(self):
        import torch.optim.optimizer as o
        F = torch.nn.functional
        before = {"dropout": F.dropout, "sdpa": getattr(F, "scaled_dot_product_attention", None),
                  "empty_cache": torch.cuda.empty_cache, "tolist": vars(torch.Tensor).get("tolist"),
                  "foreach": getattr(o, "_get_foreach_kernels_supported_devices", None)}
        h = torch.randn(8, dtype=torch.bfloat16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pow_dtype = torch.pow(h, 3.0).dtype  # the CPU's own policy
        t1, t2 = self.path("one.trace"), self.path("two.trace")
        vramledger.dry_run(self.emulate, steps=1, trace=t1)
        self.assertIsNone(_get_current_dispatch_mode())
        self.assertIsNone(tracer._tracer)
        self.assertEqual(tracer._undo, [])
        self.assertEqual(tracer._libs, [])
        after = {"dropout": F.dropout, "sdpa": getattr(F, "scaled_dot_product_attention", None),
                 "empty_cache": torch.cuda.empty_cache, "tolist": vars(torch.Tensor).get("tolist"),
                 "foreach": getattr(o, "_get_foreach_kernels_supported_devices", None)}
        for k in before:
            self.assertIs(after[k], before[k], k)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            self.assertEqual(torch.pow(h, 3.0).dtype, pow_dtype)  # AutocastCPU kernels gone
        size = os.path.getsize(t1)
        x = torch.empty(12345, dtype=torch.uint8)  # made after: not traced
        y = torch.randn(64, 64) @ torch.randn(64, 64)
        del x, y
        self.assertEqual(os.path.getsize(t1), size)
        self.assertNotIn(12345, self.sizes(t1))
        # CUDA's paths were taken (docs/cmd/trace.md), and are taken again
        # by a second dry run: the same allocations
        self.assertIn(37000, self.sizes(t1))  # the fused kernel's one-byte mask
        self.assertIn(164000, self.sizes(t1))  # pow in float32, as CUDA autocast runs it
        vramledger.dry_run(self.emulate, steps=1, trace=t2)
        self.assertEqual(self.sizes(t2), self.sizes(t1))


class Failed(Work):
    """A job that failed is no answer: the exception goes on, tracing has
    stopped, the trace is removed."""

    def test_exception_in_step(self):
        _, step = loop("cpu")
        t = self.path("failed.trace")

        def failing(i):
            step(i)
            if i == 1:
                raise KeyError("the user's own")
        tmp = tempfile.mkdtemp(prefix="vl-dryrun-tmp-", dir=self.dir)
        old, tempfile.tempdir = tempfile.tempdir, tmp
        try:
            with self.assertRaisesRegex(KeyError, "the user's own"):
                vramledger.dry_run(failing, steps=3)
            with self.assertRaisesRegex(KeyError, "the user's own"):
                vramledger.dry_run(failing, steps=3, trace=t)
            with self.assertRaises(ZeroDivisionError):
                with vramledger.dry_run() as d:
                    step(0)
                    1 / 0
        finally:
            tempfile.tempdir = old
        self.assertEqual(os.listdir(tmp), [])  # the temporary traces removed
        self.assertFalse(os.path.exists(t))  # a kept one too: it is no answer
        self.assertIsNone(_get_current_dispatch_mode())
        self.assertIsNone(tracer._tracer)
        self.assertIsNone(d.peak_allocated_bytes)
        self.assertIn("no result", repr(d))
        with self.assertRaisesRegex(RuntimeError, "no result yet"):
            d.fits("h100-80gb")
        vramledger.dry_run(step)  # and the next dry run runs


class Fits(Work):
    def test_cards_and_budgets(self):
        _, step = loop("cpu")
        d = vramledger.dry_run(step)
        self.assertTrue(d.fits("h100-80gb"))
        self.assertTrue(d.fits("H100"))  # an alias, any case, as the catalog has it
        self.assertTrue(d.fits(1 << 40))
        self.assertFalse(d.fits(1 << 20))  # a tiny budget in bytes
        r = d.peak_reserved_bytes
        self.assertTrue(d.fits(r, margin=0))
        self.assertFalse(d.fits(r, margin=0.10))
        self.assertTrue(d.fits(int(r / 0.9) + 1))
        # a card's memory is the catalog's (data/gpus.json, the program's)
        with open(os.path.join(ROOT, "data", "gpus.json")) as f:
            l4 = [g for g in json.load(f)["gpus"] if g["name"] == "l4"][0]["memory_bytes"]
        self.assertEqual(dryrun.card_bytes("l4", VL), l4)
        with self.assertRaisesRegex(ValueError, "unknown GPU 'no-such-card'"):
            d.fits("no-such-card")
        with self.assertRaisesRegex(ValueError, "margin="):
            d.fits("l4", margin=1.5)
        with self.assertRaisesRegex(ValueError, "unknown GPU"):  # said before the job runs
            vramledger.dry_run(step, gpu="no-such-card")


class Refused(Work):
    def test_nested_and_twice(self):
        _, step = loop("cpu")
        with vramledger.dry_run() as d:
            step(0)
            with self.assertRaisesRegex(RuntimeError, "do not nest"):
                vramledger.dry_run(step)
        with self.assertRaisesRegex(RuntimeError, "has run already"):
            with d:
                pass
        self.assertIsNone(tracer._tracer)

    def test_nothing_to_replay(self):
        with self.assertRaisesRegex(RuntimeError, "made no tensor"):
            vramledger.dry_run(lambda i: None)
        lin = torch.nn.Linear(4, 4)
        with self.assertRaisesRegex(RuntimeError, "did not learn the job's micro-batch"):
            vramledger.dry_run(lambda i: lin(torch.randn(1, 4)).sum().backward(), batch=8)
        self.assertIsNone(tracer._tracer)

    def test_under_vramledger_trace(self):
        job = ("import torch, vramledger\n"
               "x = torch.ones(1000)\n"
               "try:\n"
               "    vramledger.dry_run(lambda i: None)\n"
               "except RuntimeError as e:\n"
               "    print('refused:', e)\n")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        p = subprocess.run([VL, "trace", "--out", self.path("t"), "--", JOB_PY, "-c", job],
                           env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("refused: vramledger.dry_run: this process runs under `vramledger trace`",
                      p.stdout + p.stderr)

    def test_program_not_found(self):
        env = {k: os.environ.get(k) for k in ("VRAMLEDGER_BIN", "PATH")}
        root = dryrun._ROOT
        try:
            os.environ.pop("VRAMLEDGER_BIN", None)
            os.environ["PATH"] = self.dir
            dryrun._ROOT = self.dir
            with self.assertRaisesRegex(RuntimeError, "cannot find the vramledger program "
                                        r"\(tried \$VRAMLEDGER_BIN, unset; vramledger on PATH; "
                                        ".*build/vramledger.*VRAMLEDGER_BIN"):
                vramledger.dry_run(lambda i: None)
            os.environ["VRAMLEDGER_BIN"] = self.path("nothing")
            with self.assertRaisesRegex(RuntimeError, "is not an executable file"):
                vramledger.dry_run(lambda i: None)
        finally:
            dryrun._ROOT = root
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertIsNone(tracer._tracer)  # nothing was traced


class Doc(Work):
    """docs/python.md's example runs as it stands."""

    def test_example(self):
        with open(os.path.join(ROOT, "docs", "python.md")) as f:
            code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
        e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        p = subprocess.run([JOB_PY, "-c", code], env=e, capture_output=True, text=True,
                           timeout=120, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"peak allocated \d+\.\d{3} GiB")
        self.assertIn("fits an L4: True", p.stdout)


if __name__ == "__main__":
    unittest.main()
