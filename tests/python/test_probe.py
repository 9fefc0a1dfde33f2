"""The PyTorch probe on Debian's CPU build of torch: attachment with no code
change under `vramledger run`, the phase sequence, and the bill, which on
the CPU is exact (storages of parameters, gradients, optimizer state and
saved tensors).  usage: test_probe.py VRAMLEDGER_BINARY"""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import record_schema

HERE = os.path.dirname(os.path.abspath(__file__))
VL = sys.argv.pop(1) if len(sys.argv) > 1 else "vramledger"
COLD = sys.executable
# the jobs' Python: the stack's tests name the warm server's client
# (tests/python/warm.py), where the probe attaches to a torch already
# imported; the attachment tests' two jobs start a Python of their own
PY = os.environ.get("VL_JOB_PYTHON", COLD)
B = 8
P = (32 * 64 + 64 + 64 * 16 + 16) * 4  # parameter bytes of the job's model
NT = 4  # parameter tensors


def run(*args, env=None, flags=(), py=PY):
    d = tempfile.mkdtemp(prefix="vl-probe-")
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env or {})
    out = subprocess.run([VL, "run", "--quiet", "--no-preload", *flags, "--out", d + "/r", "--",
                          py, os.path.join(HERE, "job_train.py"), *args],
                         env=e, capture_output=True, text=True, timeout=120)
    events = read(d + "/r/record.jsonl")
    shutil.rmtree(d)
    return out, events


def read(path):
    """The record's events, its own file and its streams merged by t_ns,
    each checked against the record's schema (lib/measure/record_schema.def):
    the probe's fields, their JSON types, and those it always writes."""
    return record_schema.read_record(path)


def of(events, t):
    return [e for e in events if e["type"] == t]


def billed(events, phase):
    return [e for e in of(events, "phase") if e["phase"] == phase and "bill" in e]


class Probe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sgd = run("sgd-momentum", "1", "4", py=COLD)
        cls.adam = run("adam", "2", "3", py=COLD)

    def test_attaches_without_code_change(self):
        out, ev = self.sgd
        self.assertEqual(out.returncode, 0, out.stderr)
        p = of(ev, "probe")
        self.assertEqual(len(p), 1)
        self.assertFalse(p[0]["cuda"])
        self.assertEqual(len(of(ev, "step")), 4)

    def test_snapshot_without_cuda_is_said_not_raised(self):
        """run --snapshot-at exit|peak on a CPU build: the job runs as
        without it; where the dump would be, the record says why there is
        none"""
        for at in ("exit", "peak"):
            out, ev = run("adam", "1", "3", flags=("--snapshot-at", at))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(len(of(ev, "step")), 3)
            if at == "exit":
                notes = [n for n in of(ev, "note") if n.get("text") == "snapshot at exit"]
                self.assertEqual(len(notes), 1)
                self.assertIn("snapshot_error", notes[0])
            self.assertFalse(of(ev, "oom"))

    def test_phase_sequence(self):
        _, ev = self.sgd
        step2 = [e["phase"] for e in of(ev, "phase") if e["step"] == 2]
        self.assertEqual(step2, ["idle", "forward", "loss", "backward", "pre_step", "optimizer"])
        last = of(ev, "phase")[-1]
        self.assertEqual(last["phase"], "eval")  # the no_grad forward after training

    def test_step_with_a_closure(self):
        # optimizer.step(closure): forward and backward run inside the step,
        # as in Lightning's automatic optimisation; same phases, same bill
        out, ev = run("adam", "1", "3", "closure")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len(of(ev, "step")), 3)
        step1 = [e["phase"] for e in of(ev, "phase") if e["step"] == 1]
        self.assertEqual(step1, ["idle", "forward", "loss", "backward", "pre_step", "optimizer"])
        for e in billed(ev, "optimizer"):
            self.assertEqual(e["bill"]["optimizer_states"], 2 * P + 4 * NT)
        for e in billed(ev, "backward"):
            self.assertEqual(e["bill"]["gradients"], P)
        plain = subprocess.run([PY, os.path.join(HERE, "job_train.py"), "adam", "1", "3", "closure"],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(plain.stdout, out.stdout)  # the same losses, bit for bit

    def test_autocast_copies_inside_checkpointing(self):
        # a checkpointed call under autocast saves nothing the hooks see,
        # but autocast caches a bfloat16 copy of each weight and bias it
        # casts (and of the checkpointed input, a leaf that requires grad)
        # until its region ends: named from the call's graph
        out, ev = run("sgd-momentum", "1", "3", "ckpt,amp")
        self.assertEqual(out.returncode, 0, out.stderr)
        fwd = billed(ev, "forward")
        self.assertEqual(len(fwd), 3)
        for e in fwd:
            self.assertEqual(e["bill"]["autocast_weights"], 2 * (P // 4) + 2 * B * 32)
        for e in billed(ev, "loss"):  # the region ended: the cache is gone
            self.assertEqual(e["bill"]["autocast_weights"], 0)

    def test_key_value_cache_is_an_output(self):
        # a cache object in the forward's output (transformers' DynamicCache
        # shape) holds tensors nothing else does: named outputs
        out, ev = run("sgd-momentum", "1", "3", "cache")
        self.assertEqual(out.returncode, 0, out.stderr)
        for e in billed(ev, "forward"):
            # logits, keys, values; from step 2 on also the previous step's
            # output dict, which the job's variable out still holds
            self.assertEqual(e["bill"]["outputs"], (B * 16 + 2 * B * 32) * 4 * min(e["step"], 2))

    def test_parameters_and_gradients_exact(self):
        _, ev = self.sgd
        for e in of(ev, "phase"):
            if "bill" in e:
                self.assertEqual(e["bill"]["parameters"], P)
        after_bwd = billed(ev, "backward")
        self.assertEqual(len(after_bwd), 3)
        for e in after_bwd:
            self.assertEqual(e["bill"]["gradients"], P)

    def test_momentum_state_equals_parameters(self):
        _, ev = self.sgd
        opt_end = billed(ev, "optimizer")
        self.assertEqual([e["bill"]["optimizer_states"] for e in opt_end], [P] * 3)

    def test_adam_state_is_two_copies_plus_step_counters(self):
        _, ev = self.adam
        opt_end = billed(ev, "optimizer")
        for e in opt_end:  # exp_avg + exp_avg_sq, and a 4-byte step per tensor
            self.assertEqual(e["bill"]["optimizer_states"], 2 * P + 4 * NT)

    def test_saved_activations_exact(self):
        _, ev = self.sgd
        fwd = billed(ev, "forward")
        self.assertEqual(len(fwd), 3)
        # Linear 1 saves its input (B x 32), ReLU its output (B x 64), which
        # Linear 2 saves too (the same storage, counted once)
        for e in fwd:
            self.assertEqual(e["bill"]["activations"], B * (32 + 64) * 4)
            # the model's output; from step 2 on also the previous step's,
            # which the job's variable y still holds
            self.assertEqual(e["bill"]["outputs"], B * 16 * 4 * min(e["step"], 2))
        loss = billed(ev, "loss")
        for e in loss:  # mse_loss outside the model saves the output and the target
            self.assertEqual(e["bill"]["activations"], B * (32 + 64 + 16 + 16) * 4)
        bwd = billed(ev, "backward")
        for e in bwd:  # the graph is gone
            self.assertEqual(e["bill"]["activations"], 0)

    def test_accumulation_is_one_step(self):
        _, ev = self.adam
        st = of(ev, "step")
        self.assertEqual(len(st), 3)
        self.assertTrue(all(s["micro_batches"] == 2 for s in st))
        self.assertTrue(all(s["samples"] == 2 * B for s in st))
        self.assertTrue(all(s["time_ns"] > 0 for s in st))

    def test_modules_by_saved_bytes(self):
        _, ev = self.sgd
        mods = {m["name"]: m["saved_bytes"] for m in of(ev, "step")[0]["modules"]}
        self.assertEqual(mods["0"], B * 32 * 4)
        self.assertEqual(mods["1"], B * 64 * 4)
        self.assertEqual(mods["(outside modules)"], B * 16 * 4 * 2)

    def test_sampling(self):
        out, ev = run("sgd-momentum", "1", "6", env={"VRAMLEDGER_PROBE_EVERY": "5"})
        st = of(ev, "step")
        self.assertEqual([s["sampled"] for s in st], [True, True, True, False, True, False])
        billed = {e["step"] for e in of(ev, "phase") if "bill" in e}
        self.assertEqual(billed, {1, 2, 3, 5})
        # a step not sampled writes no phase events: its phases' times
        # ride in the step event
        self.assertEqual({e["step"] for e in of(ev, "phase") if e["step"] <= 6}, {1, 2, 3, 5})
        light = st[3]["phases"]
        self.assertEqual([p[0] for p in light],
                         ["idle", "forward", "loss", "backward", "pre_step", "optimizer"])
        self.assertTrue(all(p[1] <= p[2] for p in light))
        self.assertLessEqual(light[-1][2] - light[1][1], st[3]["time_ns"])

    def test_results_unchanged(self):
        out_on, _ = self.sgd
        out_off, ev = run("sgd-momentum", "1", "4", flags=("--no-probe",))
        self.assertEqual(out_off.returncode, 0, out_off.stderr)
        self.assertIn("final loss", out_off.stdout)  # equal outputs, not two failures
        self.assertEqual(of(ev, "probe"), [])
        self.assertEqual(out_on.stdout, out_off.stdout)
        out_env, ev = run("sgd-momentum", "1", "4", env={"VRAMLEDGER_PROBE": "0"})
        self.assertEqual(of(ev, "probe"), [])

    def test_a_broken_probe_never_breaks_the_job(self):
        out, ev = run("sgd-momentum", "1", "4", "break-probe")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, self.sgd[0].stdout)
        notes = [e["text"] for e in of(ev, "note") if "probe stopped" in e.get("text", "")]
        self.assertEqual(len(notes), 1)
        self.assertIn("deliberately broken", notes[0])

    def test_checkpointing_recomputation_is_not_a_forward(self):
        plain, _ = run("sgd-momentum", "1", "4", "ckpt", flags=("--no-probe",))
        out, ev = run("sgd-momentum", "1", "4", "ckpt")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, plain.stdout)
        step2 = [e["phase"] for e in of(ev, "phase") if e["step"] == 2]
        self.assertEqual(step2, ["idle", "forward", "loss", "backward", "pre_step", "optimizer"])
        self.assertEqual([n["text"] for n in of(ev, "note")], [])
        # the whole model is checkpointed: it keeps only its input, for the
        # recomputation (B x 32 fp32), and the loss outside saves its input
        # and target
        for e in billed(ev, "loss"):
            self.assertEqual(e["bill"]["activations"], B * 16 * 4 * 2 + B * 32 * 4)

    def test_shadowed_sitecustomize_still_runs(self):
        d = tempfile.mkdtemp(prefix="vl-site-")
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['VL_TEST_SITE'] = 'ran'\n")
        e = dict(os.environ, PYTHONPATH=d)
        out = subprocess.run([VL, "run", "--quiet", "--no-preload", "--out", d + "/r", "--", PY,
                              "-c", "import os, torch; print(os.environ.get('VL_TEST_SITE'))"],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.stdout.strip(), "ran", out.stderr)
        ev = read(d + "/r/record.jsonl")
        shutil.rmtree(d)
        self.assertEqual(len(of(ev, "probe")), 1)


class Marks(unittest.TestCase):
    """A mark's name is cut to 63 bytes on a character boundary, its control
    characters and lone surrogates made "?": the record stays UTF-8, one
    JSON object a line, through the interposer's vl_mark and the probe's
    own line alike (a name cut inside a character made every reader refuse
    the whole record)."""
    def test_names_cut_whole(self):
        job = ("import torch, vramledger\n"
               "vramledger.mark('\\u00e9' * 40)\n"
               "vramledger.mark('a\\nb\\ud800c')\n")
        for flags in ((), ("--no-preload",)):
            d = tempfile.mkdtemp(prefix="vl-mark-")
            e = dict(os.environ)
            e.pop("PYTHONPATH", None)
            out = subprocess.run([VL, "run", "--quiet", *flags, "--out", d + "/r", "--", PY, "-c",
                                  job], env=e, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            ev = read(d + "/r/record.jsonl")
            names = [m["name"] for m in of(ev, "mark")]
            self.assertEqual(names, ["\u00e9" * 31, "a?b?c"], flags)
            rep = subprocess.run([VL, "report", d + "/r"], capture_output=True, text=True)
            shutil.rmtree(d)
            self.assertEqual(rep.returncode, 0, rep.stderr)
            self.assertEqual(rep.stderr, "")


class TraceNames(unittest.TestCase):
    """A trace line is one event whatever the job names: a module or a
    mark with a new line in its name stays on its line (a name "x\\nf 1"
    wrote a free of allocation 1)."""
    def test_one_line_each(self):
        import torch
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "..", "python"))
        from vramledger import tracer
        d = tempfile.mkdtemp(prefix="vl-names-")
        t = tracer._Trace(d + "/alloc.trace", torch)
        t.write_alloc(t.line(512, "cpu", module="x\nf 1 y"))
        t.mark("m\nf 1")
        t.f.close()
        with open(d + "/alloc.trace") as f:
            lines = f.read().splitlines()
        shutil.rmtree(d)
        self.assertEqual(lines, ["a 1 512 cpu x?f_1_y", "m m?f 1"])


def free_port():
    """A TCP port on the loopback no one listens on now (the kernel's pick)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(d, job, tries=3):
    """Two ranks of `job` under one `vramledger run`, each a Python of its
    own: a fork of the warm server (a process that imported torch, with
    threads) can hang in gloo's rendezvous, holding the test's pipes. Each
    try takes a port the kernel gave free (another process may still take
    it before rank 0's store binds it); one that fails or outlives its time
    is killed, group and all, and the next takes a new port. The run's
    output goes to a file, so nothing a hung rank holds can block the test.
    A fault of the probe fails every try."""
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    rc, err = 1, ""
    for _ in range(tries):
        shutil.rmtree(d + "/r", ignore_errors=True)
        script = ("export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=2; "
                  "RANK=0 LOCAL_RANK=0 %s %s & RANK=1 LOCAL_RANK=1 %s %s & wait"
                  % (free_port(), COLD, job, COLD, job))
        with open(d + "/out.txt", "w+") as out:
            p = subprocess.Popen([VL, "run", "--quiet", "--no-preload", "--out", d + "/r", "--",
                                  "sh", "-c", script], env=e, stdout=out, stderr=out,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                rc = p.wait()
                out.write("\n(killed after 120 s)")
            out.seek(0)
            err = out.read()
        if rc == 0:
            break
    return rc, err


class Ranks(unittest.TestCase):
    def test_two_ranks_in_one_record(self):
        d = tempfile.mkdtemp(prefix="vl-ddp-")
        rc, err = run_ranks(d, os.path.join(HERE, "job_ddp.py"))
        self.assertEqual(rc, 0, err)
        ev = read(d + "/r/record.jsonl")
        self.assertEqual(sorted(p["rank"] for p in of(ev, "probe")), [0, 1])
        self.assertEqual(sorted({s["rank"] for s in of(ev, "step")}), [0, 1])
        rep = json.loads(subprocess.run([VL, "report", d + "/r", "--format", "json"],
                                        capture_output=True, text=True).stdout)
        fw = rep["framework_layer"]
        self.assertEqual(fw["ranks"], 2)
        named = {x["rank"]: x["peak_named_bytes"] for x in fw["ranks_peaks"]}
        # DDP's gradient buckets: one flat copy of the gradients (the model's
        # parameter bytes), named as communication buffers
        fwd = [e for e in of(ev, "phase") if e["phase"] == "forward" and "bill" in e]
        self.assertTrue(fwd and all(e["bill"]["comm_buffers"] == P for e in fwd))
        # twice the batch: more activations in rank 1's bill (its named peak
        # is larger on torch 1.13; on 2.13 both ranks' named peaks are their
        # optimizer step's, the same)
        self.assertGreaterEqual(named[1], named[0])
        acts = {x["rank"]: x["bill"]["activations"] for x in fw["ranks_peaks"]}
        self.assertGreater(acts[1], acts[0])
        doc = subprocess.run([VL, "doctor", d + "/r", "--fail-on", "rank-imbalance"],
                             capture_output=True, text=True)
        # doctor flags ranks more than 5 % apart (torch 1.13: the backward's
        # activations make the peaks; 2.13: both peak in the optimizer step)
        apart = named[1] > 1.05 * named[0]
        self.assertEqual(doc.returncode, 3 if apart else 0, doc.stdout)
        shutil.rmtree(d)


class Trace(unittest.TestCase):
    """vramledger trace on a CPU dry run: every allocation recorded, the
    replay at least the tensors the job must hold at once."""

    def test_cpu_dry_run(self):
        d = tempfile.mkdtemp(prefix="vl-trace-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        e.pop("CUBLAS_WORKSPACE_CONFIG", None)
        e["VRAMLEDGER_TRACE_CAPABILITY"] = "8.0"  # a card before Hopper: 8.125 MiB
        out = subprocess.run([VL, "trace", "--out", d + "/t", "--format", "json", "--", PY,
                              os.path.join(HERE, "job_train.py"), "adam", "1", "3"],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        r = json.loads(out.stdout)
        self.assertEqual(r["device"], "all")
        # (torch 1.13: over 100; 2.13 fuses more of Adam and the loss: 79)
        self.assertGreater(r["allocations"], 60)
        self.assertGreater(r["frees"], 50)
        # parameters, their gradients and Adam's two states live at once,
        # each tensor rounded up to 512 B as the caching allocator does
        tensors = [32 * 64, 64, 64 * 16, 16]
        rounded = sum((n * 4 + 511) // 512 * 512 for n in tensors)
        with open(d + "/t/alloc.trace") as f:
            lines = f.read().splitlines()
        self.assertTrue(all(l[0] in "abfm#" for l in lines))
        self.assertIn("# batch 8", lines)  # the tracer learnt the micro-batch
        # the cuBLAS workspace the GPU would take at the first matmul (and
        # one more for autograd's thread where PyTorch tells backward apart)
        ws = [l for l in lines if l.endswith(" cublas_workspace")]
        self.assertIn(len(ws), (1, 2))
        self.assertTrue(all(l.split()[2] == str((4096 * 2 + 16 * 8) << 10) for l in ws))
        peak = r["replays"][0]["peak_allocated_bytes"] - len(ws) * ((4096 * 2 + 16 * 8) << 10)
        self.assertGreaterEqual(peak, 4 * rounded)
        self.assertLess(peak, 1 << 20)  # and nothing absurd for a 12 KB model
        ev = read(d + "/t/record.jsonl")  # the probe ran too: a record as from run
        self.assertEqual(len(of(ev, "step")), 3)
        # and its bill is in the output: parameters exact, Adam's states
        # twice them and a 4-byte step counter a parameter, activations (by difference) at least the input and
        # the hidden layer the forward keeps (B x 32 and B x 64, fp32)
        bill = r["bill"]
        self.assertEqual(bill["parameters"], 4 * sum(tensors))
        # (on torch 2.13 the peak is the first optimizer step's, billed at
        # its start, before Adam makes its states)
        first_step = bill["phase"] == "optimizer" and bill["categories_at"] == "start" and bill["step"] == 1
        self.assertIn(bill["optimizer_states"],
                      (0, 2 * bill["parameters"] + 4 * 4) if first_step else (2 * bill["parameters"] + 4 * 4,))
        if not first_step:  # the forward's tensors, gone by the optimizer step
            self.assertGreaterEqual(bill["activations"], 8 * (32 + 64) * 4)
        self.assertLess(bill["activations"], 64 << 10)
        shutil.rmtree(d)


    def test_gpu_gives_the_cards_workspace(self):
        """trace --gpu: the cuBLAS workspaces of a CPU dry run are the
        card's from the catalog (PyTorch's :4096:2:16:8 on an A100, ROCm's
        hipBLAS + hipBLASLt on the MI300X), over the environment's Hopper
        capability."""
        for gpu, want in (("a100-80gb", 8519680), ("mi300x", (128 + 76) << 20)):
            d = tempfile.mkdtemp(prefix="vl-trace-gpu-")
            e = dict(os.environ)
            e.pop("PYTHONPATH", None)
            e.pop("CUBLAS_WORKSPACE_CONFIG", None)
            e.pop("VRAMLEDGER_TRACE_WORKSPACE_BYTES", None)
            e["VRAMLEDGER_TRACE_CAPABILITY"] = "9.0"  # 32 MiB by the rule, without --gpu
            out = subprocess.run([VL, "trace", "--gpu", gpu, "--out", d + "/t", "--format", "json",
                                  "--", PY, os.path.join(HERE, "job_train.py"), "adam", "1", "2"],
                                 env=e, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(d + "/t/alloc.trace") as f:
                ws = [l.split()[2] for l in f.read().splitlines()
                      if l.endswith(" cublas_workspace")]
            self.assertIn(len(ws), (1, 2), gpu)
            self.assertEqual(set(ws), {str(want)}, gpu)
            shutil.rmtree(d)


class TraceAsCuda(unittest.TestCase):
    """The dry run takes CUDA's paths where they spend memory differently,
    and VRAMLEDGER_TRACE_AS=cpu leaves the CPU's own."""

    def sizes(self, trace_as):
        d = tempfile.mkdtemp(prefix="vl-trace-as-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        e["VRAMLEDGER_TRACE_AS"] = trace_as
        out = subprocess.run([VL, "trace", "--out", d + "/t", "--", PY,
                              os.path.join(HERE, "job_emulate.py")],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(d + "/t/alloc.trace") as f:
            sizes = [int(l.split()[2]) for l in f if l.startswith("a ")]
        shutil.rmtree(d)
        return sizes, out.stdout

    def test_cuda_paths(self):
        sizes, stdout = self.sizes("cuda")
        self.assertIn(37000, sizes)  # the fused kernel's one-byte mask
        # made before the output, as CUDA's kernel allocates them (Dropout.cu)
        i = sizes.index(37000)
        self.assertEqual(sizes[i - 1:i + 2], [148000, 37000, 148000])  # the input, mask, output
        self.assertIn(164000, sizes)  # pow in float32, as CUDA autocast runs it
        self.assertIn("pow dtype torch.float32", stdout)

    def test_cpu_paths(self):
        sizes, stdout = self.sizes("cpu")
        self.assertNotIn(37000, sizes)  # the CPU's mask has the input's dtype
        self.assertNotIn(164000, sizes)
        self.assertIn("pow dtype torch.bfloat16", stdout)


class SdpaAsCuda(unittest.TestCase):
    """On meta tensors scaled_dot_product_attention takes the kernel CUDA's
    select_sdp_backend would (tracer._cuda_sdpa_backend: cuDNN, flash,
    memory-efficient, math), and on the math path drops out the
    probabilities as CUDA does (tests/python/job_sdpa.py)."""

    def test_backends_and_the_math_paths_dropout(self):
        d = tempfile.mkdtemp(prefix="vl-trace-sdpa-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        out = subprocess.run([VL, "trace", "--out", d + "/t", "--", PY, os.path.join(HERE, "job_sdpa.py")],
                             env=e, capture_output=True, text=True, timeout=120)
        got = json.loads(([l for l in out.stdout.splitlines() if l.startswith("{")] + ["{}"])[0])
        if "skip" in got:  # (a trace with no allocation: refused)
            shutil.rmtree(d)
            self.skipTest("PyTorch %s: no SDPA math path to follow" % got["skip"])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(got, {
            "t5 bf16": "math", "t5 fp32": "math",  # the bias's last stride is 4, not 1
            # cuDNN with any dropout (an H100's choices: bench/results/dry-run/
            # raw.jsonl:sdpa-choice-h100/)
            "causal bf16": "cudnn", "causal bf16 dropout 0.1": "cudnn",
            "causal bf16 dropout 0.125": "cudnn", "padding mask bf16 dropout 0.1": "cudnn",
            "mask that trains bf16": "efficient", "padding mask fp32 dropout 0.1": "efficient",
            "grouped bf16 dropout 0.1": "cudnn", "grouped fp32 dropout 0.1": "math"})
        with open(d + "/t/alloc.trace") as f:
            lines = [l.split() for l in f if l.startswith(("a ", "b "))]
        shutil.rmtree(d)
        big = [(int(w[2]), [x[6:] for x in w if x.startswith("dtype=")][0]) for w in lines
               if int(w[2]) >= 49152 and any(x.startswith("dtype=") for x in w)]
        n = 3 * 4 * 64 * 64  # the scores
        # the math path's dropout (CUDA's fused kernel): the mask, then the
        # fp32 output, after the fp32 scores and their softmax
        i = big.index((n, "bool"))
        self.assertEqual(big[i - 1:i + 2], [(4 * n, "float32"), (n, "bool"), (4 * n, "float32")])
        self.assertEqual(big.count((n, "bool")), 1)
        small = [int(w[2]) for w in lines if int(w[2]) in (343, 1372)]
        self.assertEqual(small, [1372, 343, 1372])  # x; the training dropout's mask, output


def traced_lines(test, job, kinds="abf"):
    """`vramledger trace` of the Python source job: its alloc.trace lines
    of those kinds (a, b: allocations; f: frees), split"""
    d = tempfile.mkdtemp(prefix="vl-trace-lines-")
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    out = subprocess.run([VL, "trace", "--out", d + "/t", "--", PY, "-c", job],
                         env=e, capture_output=True, text=True, timeout=120)
    test.assertEqual(out.returncode, 0, out.stderr)
    with open(d + "/t/alloc.trace") as f:
        lines = [l.split() for l in f if l[0] in kinds]
    shutil.rmtree(d)
    return lines


class SoftmaxScratch(unittest.TestCase):
    """What CUDA's softmax kernels take beyond their result, below the
    dispatch mode (cuda/SoftMax.cu softmax_backward_cuda_out's tmp = grad *
    output; attention.cpp _safe_softmax's isneginf, all and zero), written
    by the tracer after the result, freed at once (t5-base under SDPA:
    bench/results/reserved/raw.jsonl:history-t5-sdpa/)."""

    def test_backward_tmp(self):
        lines = traced_lines(self, "import torch\n"
                             "x = torch.empty(2, 4, 64, 64, device='meta', requires_grad=True)\n"
                             "torch.softmax(x, -1).backward(torch.empty(2, 4, 64, 64, device='meta'))\n")
        n = str(2 * 4 * 64 * 64 * 4)
        allocs = [i for i, l in enumerate(lines) if l[0] in "ab" and l[2] == n]
        # x, the output, the incoming gradient, the input's gradient, then tmp
        self.assertEqual(len(allocs), 5, lines)
        tmp = lines[allocs[-1]][1]
        self.assertEqual(lines[allocs[-1] + 1], ["f", tmp])

    def test_safe_softmax_masks(self):
        lines = traced_lines(self, "import torch\n"
                             "f = getattr(torch.ops.aten, '_safe_softmax', None)\n"
                             "x = torch.empty(2, 4, 64, 32, device='meta')\n"
                             "y = f(x, -1) if f is not None else None\n")
        sizes = [l[2] for l in lines if l[0] in "ab"]
        if len(sizes) < 2:
            self.skipTest("this PyTorch has no _safe_softmax")  # torch < 2.5
        # x, the output, then isneginf (a byte a score), all over rows, the zero
        self.assertEqual(sizes[2:5], [str(2 * 4 * 64 * 32), str(2 * 4 * 64), "4"], lines)


class ReduceScratch(unittest.TestCase):
    """The scratch blocks of ATen's CUDA reductions (Reduce.cuh's global
    reduce), as vramledger.cuda_reduce sizes them and the tracer writes
    them."""

    def test_sizes_seen_on_the_h200(self):
        # the caching allocator's own history of StarCoder2-3B's backward on
        # an H200 (bench/results/dry-run/raw.jsonl:reserved/history/): the bias
        # gradients of c_fc (12288), c_proj and q_proj (3072), k_proj (256)
        # over 2048 rows, bfloat16, float accumulation
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
        from vramledger import cuda_reduce
        for n, want in ((12288, [138412032, 384]), (3072, [50331648, 96]), (256, [4194304, 8])):
            self.assertEqual(cuda_reduce.transients([2048, n], [n, 1], {0}, 4, 2), want)
        # a row reduction with many outputs stays within its blocks
        self.assertEqual(cuda_reduce.transients([2048, 3072], [3072, 1], {1}, 4, 2), [])
        # a whole-tensor sum: partials of one output per block, no per-lane copies
        c = cuda_reduce.config([4, 512, 50257], [512 * 50257, 50257, 1], {0, 1, 2}, 4)
        self.assertEqual(c["global_bytes"], 4 * c["ctas_per_output"])
        self.assertGreater(c["ctas_per_output"], 1)
        # past 2^31 bytes TensorIterator splits the launch in halves, each with its scratch
        # (fp32 16384 x 50257, summed whole: data/reference/h200-torch-2.11/cuda-reduce-check.jsonl)
        self.assertEqual(cuda_reduce.transients([16384, 50257], [50257, 1], {0, 1}, 4, 4),
                         [12568, 4, 12568, 4])
        # every case the H200's allocator history was read for, as it was
        with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "reference",
                               "h200-torch-2.11", "cuda-reduce-check.jsonl")) as f:
            cases = [json.loads(line) for line in f if '"seen"' in line]
        self.assertEqual(len(cases), 2040)
        for r in cases:
            eb = {"bf16": 2, "fp16": 2, "fp32": 4}[r["dtype"]]
            nd = len(r["shape"])
            got = cuda_reduce.transients(r["shape"], r["stride"], {d % nd for d in r["dims"]},
                                         eb if r["op"] == "amax" else 4, eb)
            self.assertEqual(got, r["seen"], r)
        # fewer SMs, fewer blocks to fill: a smaller buffer
        small = cuda_reduce.transients([2048, 12288], [12288, 1], {0}, 4, 2, sms=108)
        self.assertLess(small[0], 138412032)

    def test_the_card_is_the_catalogs(self):
        # the figures a tracer takes when nothing names the card are the
        # reference card's in the GPU catalog, as the model's are
        root = os.path.dirname(os.path.dirname(HERE))
        sys.path.insert(0, os.path.join(root, "python"))
        from vramledger import cuda_reduce
        with open(os.path.join(root, "data", "gpus.json")) as f:
            cards = {g["name"]: g for g in json.load(f)["gpus"]}
        self.assertEqual((cuda_reduce.REFERENCE_SMS, cuda_reduce.REFERENCE_THREADS_PER_SM),
                         (cards["h200"]["sm_count"], cards["h200"]["max_threads_per_sm"]))
        # `vramledger trace --gpu` sizes the scratch for the card it names
        a100 = cards["a100-80gb"]
        d = tempfile.mkdtemp(prefix="vl-trace-card-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        job = ("import torch\n"
               "x = torch.empty(2048, 12288, dtype=torch.bfloat16, device='meta')\n"
               "y = x.sum(0)\n")
        out = subprocess.run([VL, "trace", "--gpu", "a100-80gb", "--out", d + "/t", "--", PY, "-c",
                              job], env=e, capture_output=True, text=True, timeout=120)
        with open(d + "/t/alloc.trace") as f:
            sizes = [l.split()[2] for l in f if l[0] == "a"]
        shutil.rmtree(d)
        want = cuda_reduce.transients([2048, 12288], [12288, 1], {0}, 4, 2, a100["sm_count"],
                                      a100["max_threads_per_sm"])
        self.assertNotEqual(want, cuda_reduce.transients([2048, 12288], [12288, 1], {0}, 4, 2))
        i = sizes.index("24576")
        self.assertEqual(sizes[i + 1:i + 3], [str(n) for n in want], out.stderr)

    def test_traced_after_the_result(self):
        lines = traced_lines(self, "import torch\n"
                             "x = torch.empty(2048, 12288, dtype=torch.bfloat16, device='meta')\n"
                             "y = x.sum(0)\n"
                             "z = x.sum(1)\n", "af")
        sizes = [l[2] for l in lines if l[0] == "a"]
        i = sizes.index("24576")  # the column sum's result, then its scratch, freed at once
        self.assertEqual(sizes[i + 1:i + 3], ["138412032", "384"])
        scratch = [l for l in lines if l[0] == "a" and l[2] in ("138412032", "384")]
        self.assertTrue(all(l[4] == "cuda_reduce" for l in scratch))
        frees = [l[1] for l in lines if l[0] == "f"]
        self.assertEqual(frees[:2], [scratch[1][1], scratch[0][1]])
        self.assertEqual(len(scratch), 2)  # the row sum (4096 B result) takes none


class TraceAccumulation(unittest.TestCase):
    """Under any dispatch mode ATen sums a tensor's second gradient out of
    place; the untraced job sums it into the first one's block. The trace
    holds no block for such a sum."""

    def allocations(self, rule):
        d = tempfile.mkdtemp(prefix="vl-trace-acc-")
        e = dict(os.environ)
        e["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
        out = subprocess.run([PY, os.path.join(HERE, "job_accumulate.py"), d + "/t", rule],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(d + "/t") as f:
            lines = [l.split() for l in f if l[0] in "abf"]
        shutil.rmtree(d)
        ids = [l[1] for l in lines if l[0] in "ab"]
        freed = [l[1] for l in lines if l[0] == "f"]
        self.assertEqual(len(set(freed)), len(freed))  # each block freed once
        self.assertTrue(set(freed) <= set(ids))
        return [int(l[2]) for l in lines if l[0] in "ab"]

    def test_second_gradients_summed_in_place(self):
        on, off = self.allocations("on"), self.allocations("off")
        # y's gradient arrives twice (y * y), h's twice (h * 3, lin(h)): in
        # place; lin's weight's twice too, but its first gradient is a view
        # (TBackward's t() of the product, which holds its base): out of place
        self.assertEqual(off.count(512 * 256 * 4) - on.count(512 * 256 * 4), 2)
        self.assertEqual(off.count(256 * 256 * 4), on.count(256 * 256 * 4))
        self.assertEqual(len(off) - len(on), 2)


class TraceConvolutions(unittest.TestCase):
    """The trace says how many convolutions the job ran (cuDNN's workspaces
    on CUDA, which no trace holds: `vramledger trace` says so)."""

    def test_counted_forward_and_backward(self):
        d = tempfile.mkdtemp(prefix="vl-trace-conv-")
        e = dict(os.environ)
        e["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
        job = ("import sys, torch\nfrom vramledger import tracer\n"
               "tracer.install(torch, sys.argv[1])\n"
               "c = torch.nn.Conv2d(3, 8, 3)\n"
               "y = c(torch.randn(2, 3, 16, 16)); y = c.forward(torch.randn(1, 3, 8, 8))\n"
               "tracer.mark('after two')\n"
               "y.sum().backward()\n"
               "tracer.uninstall()\n")
        out = subprocess.run([PY, "-c", job, d + "/t"], env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(d + "/t") as f:
            said = [l.split() for l in f if l.startswith("# convolutions ")]
        shutil.rmtree(d)
        # two forwards said at the mark, then the one backward at the end
        self.assertEqual([int(w[2]) for w in said], [2, 3])


class TraceBatch(unittest.TestCase):
    """trace --batch: a trace at batch 3, replayed as batch 6, holds what a
    trace at batch 6 holds (every activation here grows with the batch)."""

    def trace(self, d, batch, *flags):
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        out = subprocess.run([VL, "trace", "--out", d, "--format", "json"] + list(flags) +
                             ["--", PY, os.path.join(HERE, "job_batch.py"), str(batch)],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_scaled_replay(self):
        d = tempfile.mkdtemp(prefix="vl-trace-batch-")
        three = self.trace(d + "/3", 3, "--batch", "6,12")
        six = self.trace(d + "/6", 6)
        self.assertEqual(three["batch"], 3)
        self.assertEqual(six["batch"], 6)
        with open(d + "/3/alloc.trace") as f:
            kinds = [l[0] for l in f]
        self.assertIn("b", kinds)  # activations grow with the batch
        self.assertIn("a", kinds)  # parameters, gradients, states do not
        rows = {r["batch"]: r for r in three["replays"]}
        self.assertEqual(rows[6]["allocator"], "batch 6 (traced 3)")
        self.assertEqual(rows[6]["peak_allocated_bytes"], six["replays"][0]["peak_allocated_bytes"])
        self.assertGreater(rows[12]["peak_allocated_bytes"], rows[6]["peak_allocated_bytes"])
        self.assertGreater(rows[6]["peak_allocated_bytes"], rows[3]["peak_allocated_bytes"])
        shutil.rmtree(d)


class TraceMeta(unittest.TestCase):
    """A job on meta tensors traces as the same job on the CPU: the meta
    allocations replayed by default, the same peaks."""

    def trace(self, d, device):
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        out = subprocess.run([VL, "trace", "--out", d, "--format", "json", "--", PY,
                              os.path.join(HERE, "job_meta.py"), device],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def trace_job(self, out, job):
        """vramledger trace --format json of tests/python/JOB into OUT; the
        finished process (its status checked)"""
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        p = subprocess.run([VL, "trace", "--out", out, "--format", "json", "--", PY, os.path.join(HERE, job)],
                           env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def test_meta_values(self):
        """Values read from small meta tensors come from their CPU twins;
        a value nobody knows (the loss) reads as 0, said on stderr."""
        d = tempfile.mkdtemp(prefix="vl-trace-metav-")
        out = self.trace_job(d + "/t", "job_meta_values.py")
        # under --format json the job's stdout goes to stderr
        got = json.loads([l for l in out.stderr.splitlines() if l.startswith('{"all_ones"')][0])
        self.assertEqual(got, {"all_ones": False, "padded_rows": 1, "packed": False,
                               "nonzero_rows": 14, "ids_equal": True, "back_to_cpu": True,
                               "tolist": True, "loss": 0.0, "stopped": False})
        self.assertIn("read a value of a meta tensor", out.stderr)
        self.assertEqual(out.stderr.count("read a value of a meta tensor"), 1)
        with open(d + "/t/alloc.trace") as f:
            self.assertIn("e\n", f.readlines())  # torch.cuda.empty_cache()
        shutil.rmtree(d)

    def test_cross_entropy_as_cuda(self):
        """cross_entropy under CPU autocast allocates as CUDA's composite
        does: log_softmax in bf16, cast to fp32 for nll_loss; backward fp32
        then bf16 (the CPU's own rule casts the logits to fp32 first)."""
        d = tempfile.mkdtemp(prefix="vl-trace-ce-")
        self.trace_job(d + "/t", "job_cross_entropy.py")
        n = 256 * 5000
        with open(d + "/t/alloc.trace") as f:
            big = [(int(w[2]), [x for x in w if x.startswith("dtype=")][0])
                   for w in (l.split() for l in f) if w[0] in "ab" and int(w[2]) >= 2 * n
                   and any(x.startswith("dtype=") for x in w)]
        self.assertEqual(big, [(2 * n, "dtype=bfloat16"),  # the logits
                               (2 * n, "dtype=bfloat16"), (4 * n, "dtype=float32"),  # the loss
                               (4 * n, "dtype=float32"), (2 * n, "dtype=bfloat16"),  # its backward
                               (2 * n, "dtype=bfloat16")])
        shutil.rmtree(d)

    def test_meta_as_cpu(self):
        d = tempfile.mkdtemp(prefix="vl-trace-meta-")
        meta, cpu = self.trace(d + "/m", "meta"), self.trace(d + "/c", "cpu")
        self.assertEqual(meta["device"], "meta")
        self.assertEqual(cpu["device"], "all")

        def sizes(path):
            with open(path) as f:
                return [l.split()[2] for l in f if l[0] in "ab"]
        # the same allocations in the same order; on meta, the few that stay
        # on the CPU (Adam's step counters, as on a GPU) are not replayed
        self.assertEqual(sizes(d + "/m/alloc.trace"), sizes(d + "/c/alloc.trace"))
        # the probe's bill on meta: storages with no address told apart
        self.assertGreater(cpu["bill"]["parameters"], 0)
        self.assertEqual(meta["bill"]["parameters"], cpu["bill"]["parameters"])
        self.assertEqual(meta["bill"]["optimizer_states"], cpu["bill"]["optimizer_states"])
        pm, pc = meta["replays"][0]["peak_allocated_bytes"], cpu["replays"][0]["peak_allocated_bytes"]
        self.assertLessEqual(pm, pc)
        self.assertLess(pc - pm, 64 << 10)
        self.assertGreater(pm, 32 << 20)  # the 32 MiB cuBLAS workspace and the model
        shutil.rmtree(d)


class History(unittest.TestCase):
    """python3 -m vramledger.history: an allocator snapshot as a trace."""

    def convert(self, d, ev):
        """a snapshot of these (action, addr, size) events, converted:
        the converter's finished process"""
        import pickle
        snap = {"segments": [], "device_traces": [[
            {"action": a, "addr": ad, "size": n, "stream": 0} for a, ad, n in ev]]}
        with open(d + "/s.pickle", "wb") as f:
            pickle.dump(snap, f)
        e = dict(os.environ)
        e["PYTHONPATH"] = os.path.join(HERE, "..", "..", "python")
        out = subprocess.run([PY, "-m", "vramledger.history", d + "/s.pickle"], env=e,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def test_snapshot_to_trace(self):
        d = tempfile.mkdtemp(prefix="vl-hist-")
        out = self.convert(d, [
            ("segment_alloc", 1 << 40, 2 << 20), ("alloc", 1 << 40, 512),
            ("alloc", (1 << 40) + 512, 1000), ("free_requested", 1 << 40, 512),
            ("free_completed", 1 << 40, 512), ("segment_alloc", 1 << 41, 20 << 20),
            ("alloc", 1 << 41, 5 << 20), ("free_completed", 7, 64)])
        info = json.loads(out.stderr.strip().splitlines()[-1])
        self.assertEqual(info["peak_reserved_bytes"], 22 << 20)
        self.assertEqual(info["frees_without_alloc"], 1)
        lines = out.stdout.splitlines()
        self.assertEqual([l for l in lines if not l.startswith("#")],
                         ["s %d %d" % (1 << 40, 2 << 20), "a 1 512 cuda", "a 2 1000 cuda", "f 1",
                          "s %d %d" % (1 << 41, 20 << 20), "a 3 5242880 cuda"])
        with open(d + "/t", "w") as f:
            f.write(out.stdout)
        r = subprocess.run([VL, "trace", "--replay", d + "/t", "--format", "json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rep = json.loads(r.stdout)["replays"][0]
        self.assertEqual(rep["peak_reserved_bytes"], 22 << 20)  # what the allocator reserved
        e = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        bad = subprocess.run([PY, "-m", "vramledger.history", d + "/t"], env=e,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 1)  # not a pickle: named, no traceback
        self.assertIn(d + "/t", bad.stderr)
        self.assertNotIn("Traceback", bad.stderr)
        shutil.rmtree(d)


    def test_emptied_cache_is_replayed(self):
        """A run of segment frees (empty_cache) is one 'e' line; the replay
        empties its cache there: the 6 MiB block then takes a segment of its
        own instead of splitting the freed 100 MiB one (120 MiB, not 200)."""
        d = tempfile.mkdtemp(prefix="vl-hist-")
        M = 1 << 20
        out = self.convert(d, [
            ("segment_alloc", 1 << 40, 100 * M), ("alloc", 1 << 40, 100 * M),
            ("free_completed", 1 << 40, 100 * M), ("segment_free", 1 << 40, 100 * M),
            ("segment_alloc", 1 << 41, 20 * M), ("alloc", 1 << 41, 6 * M),
            ("segment_alloc", 1 << 42, 100 * M), ("alloc", 1 << 42, 100 * M)])
        self.assertEqual([l for l in out.stdout.splitlines() if l == "e"], ["e"])
        info = json.loads(out.stderr.strip().splitlines()[-1])
        self.assertEqual(info["peak_reserved_bytes"], 120 * M)
        for name, text in (("t", out.stdout),
                           ("u", "".join(l + "\n" for l in out.stdout.splitlines() if l != "e"))):
            with open(d + "/" + name, "w") as f:
                f.write(text)
        got = []
        for name in ("t", "u"):
            r = subprocess.run([VL, "trace", "--replay", d + "/" + name, "--format", "json"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            got.append(json.loads(r.stdout)["replays"][0]["peak_reserved_bytes"])
        self.assertEqual(got, [120 * M, 200 * M])  # without the 'e': the freed block split
        shutil.rmtree(d)


class Guard(unittest.TestCase):
    """run --commitment: the throughput trigger from the probe's steps."""

    def guarded(self, commitment):
        d = tempfile.mkdtemp(prefix="vl-guard-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        c = os.path.join(HERE, "..", "data", "commitments", commitment)
        out = subprocess.run([VL, "run", "--quiet", "--no-preload", "--interval-ms", "10",
                              "--commitment", c, "--out", d + "/r", "--", PY,
                              os.path.join(HERE, "job_tokens.py")],
                             env=e, capture_output=True, text=True, timeout=120)
        ev = read(d + "/r/record.jsonl")
        fallback = os.path.exists(d + "/r/fallback")
        shutil.rmtree(d)
        return out, [t for t in of(ev, "trigger")], fallback

    def test_throughput_under_the_sla_fires_once(self):
        out, trig, fallback = self.guarded("sla-unreachable.json")
        self.assertEqual(out.returncode, 0, out.stderr)  # the job is never stopped
        self.assertEqual([t["trigger"] for t in trig], ["throughput_under_sla"])
        self.assertGreater(trig[0]["tokens_per_s"], 0)
        self.assertTrue(fallback)
        self.assertIn("fallback True", out.stdout)  # the job saw it
        self.assertIn("tokens/s, under the", out.stderr)

    def test_throughput_within_the_sla_is_quiet(self):
        out, trig, fallback = self.guarded("sla-easy.json")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(trig, [])
        self.assertFalse(fallback)
        self.assertIn("fallback False", out.stdout)


class Sweep(unittest.TestCase):
    def test_sweep_takes_steps_per_second_from_the_probe(self):
        d = tempfile.mkdtemp(prefix="vl-sweep-")
        e = dict(os.environ)
        e.pop("PYTHONPATH", None)
        out = subprocess.run([VL, "sweep", "--grid", "steps=5", "--out", d + "/s", "--", PY,
                              os.path.join(HERE, "job_train.py"), "adam", "1", "{steps}"],
                             env=e, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(d + "/s/sweep.csv") as f:
            head, row = f.read().splitlines()[:2]
        cells = dict(zip(head.split(","), row.split(",")))
        shutil.rmtree(d)
        self.assertEqual(cells["status"], "ok")
        self.assertGreater(float(cells["steps_per_s"]), 0)  # the job never calls mark()
        self.assertEqual(cells["peak_allocated_bytes"], "")  # CPU: no CUDA allocator


class PeakMerge(unittest.TestCase):
    """The probe resets the allocator's peaks at phase boundaries; the job's
    memory_stats() must show the peaks as if it had not."""

    def test_merge(self):
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from vramledger import probe
        import torch
        p = probe._Probe(torch, None, 50)
        p.remember(0, {"allocated_bytes": {"all": {"current": 5, "peak": 100}}, "num_ooms": 0})
        st = p.merged(0, {"allocated_bytes": {"all": {"current": 5, "peak": 40}}, "num_ooms": 0})
        self.assertEqual(st["allocated_bytes"]["all"]["peak"], 100)
        st = p.merged(0, {"allocated_bytes": {"all": {"current": 5, "peak": 140}}})
        self.assertEqual(st["allocated_bytes"]["all"]["peak"], 140)
        self.assertEqual(p.merged(1, {"x": {"peak": 3}}), {"x": {"peak": 3}})

    def test_sharded_tensor_counts_its_local_shard(self):
        """A DTensor (tensor parallelism, FSDP2) has no storage of its own:
        the probe reads its local shard's (no DTensor in Debian's torch 1.13,
        so a stand-in with DTensor's attribute and its refusal)."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from vramledger import probe
        import torch

        class Sharded:
            def __init__(self, local):
                self._local_tensor = local

            def untyped_storage(self):
                raise RuntimeError("a DTensor has no storage")

            storage = untyped_storage

        local = torch.zeros(10, 4)
        key, n = probe._storage(Sharded(local))
        self.assertEqual(key, probe._storage(local)[0])
        self.assertEqual(n, 160)
        self.assertIs(probe._local(local), local)

    def test_wrapper_subclass_counts_its_inner_tensors(self):
        """A wrapper subclass (AsyncCollectiveTensor under loss_parallel, a
        DTensor of torch >= 2.1, a quantised tensor) has an invalid storage;
        the probe follows __tensor_flatten__ to the tensors inside, nested,
        and counts all of them (on the H200 the probe stopped itself on the
        TP job: "access the data pointer on an invalid python storage")."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from vramledger import probe
        import torch

        class Wrapper:
            def __init__(self, **inner):
                self.__dict__.update(inner)
                self.names = list(inner)

            def __tensor_flatten__(self):
                return self.names, None

            def untyped_storage(self):
                raise RuntimeError("Attempted to access the data pointer on an invalid python storage.")

        data, scale = torch.zeros(64, dtype=torch.uint8), torch.zeros(4)
        quant = Wrapper(_data=data, _scale=scale)
        key, n = probe._storage(quant)
        self.assertEqual(key, probe._storage(data)[0])
        self.assertEqual(n, 64 + 16)
        nested = Wrapper(elem=Wrapper(_local_tensor=data))
        self.assertEqual(probe._storage(nested), probe._storage(data))
        self.assertIs(probe._local(nested), data)


def full_disk(mode):
    """job_full_disk.py in MODE (its docstring): the job's outcome, the
    record's bytes and `vramledger report` of it, JSON and text."""
    d = tempfile.mkdtemp(prefix="vl-full-")
    rec = d + "/run.jsonl"
    e = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    out = subprocess.run([PY, os.path.join(HERE, "job_full_disk.py"), rec, mode], env=e,
                         capture_output=True, text=True, timeout=120)
    with open(rec, "rb") as f:
        raw = f.read()
    rep = subprocess.run([VL, "report", rec, "--format", "json"], capture_output=True, text=True)
    txt = subprocess.run([VL, "report", rec], capture_output=True, text=True)
    shutil.rmtree(d)
    return out, raw, rep, txt


class SnapshotFile(unittest.TestCase):
    """The probe's allocator snapshot in the run directory (run --snapshot):
    created as run makes its files, 0600 and never through a symbolic link
    (a run directory may be one every user writes in, as /tmp); a new peak's
    replaces the last. No CUDA needed: the snapshot is a stand-in."""

    def test_never_through_a_link(self):
        import pickle
        import types
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
        from vramledger.probe_memory import _Memory
        d = tempfile.mkdtemp(prefix="vl-snap-")
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("secret")
        path = os.path.join(d, "peak_snapshot_pid%d.pickle" % os.getpid())
        os.symlink(victim, path)
        snaps = iter([{"segments": [1]}, {"segments": [2]}])
        memory = types.SimpleNamespace(_snapshot=lambda: next(snaps))
        me = types.SimpleNamespace(run_dir=d, torch=types.SimpleNamespace(
            cuda=types.SimpleNamespace(memory=memory)))
        for want in ([1], [2]):  # the second: a new peak, over the first
            ev = {}
            _Memory.dump_snapshot(me, "peak", ev)
            self.assertEqual(ev.get("snapshot"), path, ev)
            self.assertFalse(os.path.islink(path))
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            with open(path, "rb") as f:
                self.assertEqual(pickle.load(f)["segments"], want)
        with open(victim) as f:
            self.assertEqual(f.read(), "secret")
        self.assertEqual(sorted(os.listdir(d)), sorted(["victim", os.path.basename(path)]))
        shutil.rmtree(d)


class FullDisk(unittest.TestCase):
    """The record's disk refuses the probe's writes (docs/record.md, "gap"):
    the probe stays on, loses whole lines and counts them, says so once,
    and once a write goes out begins with a newline after a cut line and
    the gap line, as the C writers do."""

    def check(self, mode, gaps, cut, lost_events, error="No space left on device"):
        """MODE's record, with GAPS gap lines and CUT cut lines (None: at
        most one), LOST_EVENTS events lost (None: some)."""
        out, raw, rep, txt = full_disk(mode)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("Traceback", out.stderr)
        res = json.loads(out.stdout)
        self.assertTrue(res["on"], "the probe stopped")
        self.assertEqual(res["plan_left"], 0)  # every fault was met
        if lost_events is None:  # some: the gap lines below must sum to as many
            self.assertGreater(res["lost_events"], 0)
            lost_events = res["lost_events"]
        else:
            self.assertEqual(res["lost_events"], lost_events)
        lines = raw.decode().split("\n")
        self.assertEqual(lines[-1], "")  # the record ends in a whole line
        lines = lines[:-1]
        events, cuts, seen_gaps = [], 0, []
        for i, line in enumerate(lines):
            self.assertTrue(line.startswith('{"type":"'), line)
            self.assertEqual(line.count('{"type":'), 1, "two lines fused: " + line)
            try:
                ev = json.loads(line)
            except ValueError:  # a cut line stands alone, the gap line right after it
                cuts += 1
                self.assertTrue(lines[i + 1].startswith('{"type":"gap"'), lines[i + 1])
                continue
            if ev["type"] == "gap":
                seen_gaps.append(ev)
            else:
                events.append(ev)
        if cut is None:
            self.assertLessEqual(cuts, 1)
        else:
            self.assertEqual(cuts, cut)
        self.assertEqual(len(seen_gaps), gaps)
        for g in seen_gaps:
            self.assertEqual(list(g)[:4], ["type", "t_ns", "lost_bytes", "error"])
            self.assertEqual(g["error"], error)
            self.assertEqual(g["writer"], "probe")
            self.assertLessEqual(g["t0_ns"], g["t_ns"])
            self.assertGreater(g["lost_bytes"], 0)
        self.assertEqual(sum(g["lost_events"] for g in seen_gaps), lost_events)
        self.assertEqual(sum(g["lost_bytes"] for g in seen_gaps), res["lost_bytes"])
        # the listener (added after the probe event) got every event, written or lost
        written = [e["type"] for e in events if e["type"] not in ("meta", "probe", "exit")]
        self.assertEqual(len(res["events"]), len(written) + lost_events)
        self.assertEqual(res["events"].count("step"), 6)
        self.assertEqual([e["step"] for e in events if e["type"] == "step"][-1], 6)
        self.assertEqual(events[-1]["type"], "exit")
        self.assertEqual(events[-1]["status"], 0)
        # said once, with the record and what to do; the total at exit
        said = [x for x in out.stderr.splitlines() if "the probe cannot write" in x]
        self.assertEqual(len(said), 1, out.stderr)
        self.assertIn("run.jsonl': " + error, said[0])
        self.assertIn("events (%d bytes) of the record lost (a 'gap' line marks where)"
                      % res["lost_bytes"], out.stderr)
        # `vramledger report` reads the record and says the gaps
        self.assertEqual(rep.returncode, 0, rep.stderr)
        codes = [f["code"] for f in json.loads(rep.stdout)["findings"]]
        self.assertIn("gap", codes)
        gap = [x for x in txt.stdout.splitlines() if x.strip().startswith("[gap] ")]
        self.assertEqual(len(gap), 1, txt.stdout)
        self.assertIn("could not be written, in %d gap%s;" % (gaps, "s" if gaps > 1 else ""), gap[0])
        return out, res

    def test_refused_then_cut_then_room(self):
        # three events refused, one gap line; a short write whose rest is
        # refused: its line cut, closed by a newline before the next gap
        out, res = self.check("plan=ok,ok,enospc,enospc,enospc,ok,short,enospc,ok,ok",
                              gaps=2, cut=1, lost_events=4)
        self.assertIn("free space", out.stderr)

    def test_the_gap_line_cut_too(self):
        # the gap line itself written short: it stands alone, a second gap
        # line after it counts the events since the first loss
        self.check("plan=edquot,short,edquot,ok,ok", gaps=1, cut=1, lost_events=2,
                   error="Disk quota exceeded")

    def test_a_short_write_completed(self):
        out, raw, rep, _ = full_disk("plan=short,ok")
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertEqual((res["lost_events"], res["plan_left"]), (0, 0))
        self.assertNotIn(b'"type":"gap"', raw)  # the line's rest went out: nothing lost
        for line in raw.decode().splitlines():
            json.loads(line)
        self.assertEqual(out.stderr, "")

    def test_never_room_again(self):
        """No gap line gets in, not even at exit: what was lost is said on
        stderr at the end, and the record stays whole up to the loss"""
        out, raw, rep, _ = full_disk("full")
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertTrue(res["on"])
        self.assertGreater(res["lost_events"], 0)
        self.assertEqual(res["events"].count("step"), 6)
        for line in raw.decode().splitlines():
            self.assertNotEqual(json.loads(line)["type"], "gap")
        self.assertIn("the probe could not write '", out.stderr)
        said = re.search(r"run\.jsonl': No space left on device: (\d+) events \((\d+) bytes\) "
                         r"of the record lost \(no 'gap' line got in\)", out.stderr)
        self.assertIsNotNone(said, out.stderr)
        # and the exit line, lost at exit
        self.assertEqual(int(said.group(1)), res["lost_events"] + 1)
        self.assertGreater(int(said.group(2)), res["lost_bytes"])
        self.assertEqual(rep.returncode, 0, rep.stderr)

    def test_a_stream_found_cut(self):
        """The process's stream ends inside a line when it opens it (an
        earlier process of its PID, before an exec, cut by a full disk):
        the probe's first write closes it with a newline and a gap line
        over nothing of its own, and its line stands whole; the write after
        that is plain. No other process writes the stream, so the probe
        never looks at its end again."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from vramledger import probe
        d = tempfile.mkdtemp(prefix="vl-cut-")
        path = d + "/probe.7.jsonl"
        with open(path, "wb") as f:
            f.write(b'{"type":"mark","t_ns":5,"pid":7,"name":"a"}\n{"type":"phase","t_ns":12')
        w = probe._Writer(path, stream=True)
        w.put({"type": "phase", "t_ns": 20, "name": "forward"})
        w.put({"type": "phase", "t_ns": 30, "name": "backward"})
        lines = open(path, "rb").read().decode().split("\n")
        shutil.rmtree(d)
        self.assertEqual(len(lines), 6, lines)
        self.assertEqual(lines[1], '{"type":"phase","t_ns":12')
        gap = json.loads(lines[2])
        self.assertEqual((gap["type"], gap["lost_bytes"], gap["error"], gap["writer"]),
                         ("gap", 0, "a line cut by a failed write", "probe"))
        self.assertIsNone(record_schema.check(gap))
        self.assertEqual(json.loads(lines[3])["name"], "forward")
        self.assertEqual(json.loads(lines[4])["name"], "backward")
        self.assertEqual(lines[5], "")
        self.assertEqual((w.lost_events, w.gap_bytes, w.cut), (0, 0, False))

    def test_meta_line_refused(self):
        """attach(record=) on a full disk: no record rather than one
        without its meta line (a cut meta is taken back), said by install()"""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from vramledger import probe
        d = tempfile.mkdtemp(prefix="vl-full-")
        real = os.write
        for plan in (["enospc"], ["short", "enospc"]):
            faults = list(plan)

            def faulty(fd, buf):
                k = faults.pop(0) if faults else "ok"
                if k == "short":
                    return real(fd, bytes(buf)[:len(buf) // 2])
                if k == "enospc":
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real(fd, buf)
            os.write = faulty
            try:
                with self.assertRaises(OSError) as cm:
                    probe._Writer(d + "/run.jsonl", create=True)
            finally:
                os.write = real
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            self.assertEqual(os.path.getsize(d + "/run.jsonl"), 0, plan)
        shutil.rmtree(d)

    def test_file_size_limit_does_not_kill(self):
        """attach(record=) in a job whose SIGXFSZ kills (its default, set
        back) under a file size limit: the writes past it fail with EFBIG
        and are a gap once the limit is raised; the job's disposition and
        signal mask are left as they were"""
        out, res = self.check("fsize=2000", gaps=1, cut=None, lost_events=None,
                              error="File too large")
        self.assertIn("ulimit -f", out.stderr)
        self.assertTrue(res["xfsz_default"])
        self.assertFalse(res["xfsz_blocked"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
