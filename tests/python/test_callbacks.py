"""vramledger's Python package on Debian's CPU build of torch, where the
trainers are absent: the callbacks against fakes (their logged values are
the record's), attach() outside `vramledger run` (a record `vramledger
report` reads; a record it cannot write is no exception in the job), and
estimate() / `python -m vramledger` calling the program ($VRAMLEDGER_BIN,
set by ctest). usage: test_callbacks.py"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import record_schema

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = os.path.join(ROOT, "python")
sys.path.insert(0, PY)

import vramledger  # noqa: E402

VL = os.environ.get("VRAMLEDGER_BIN", "vramledger")
JOB_PY = os.environ.get("VL_JOB_PYTHON", sys.executable)  # a job's Python: ctest names warm.py's client
GIB = float(1 << 30)


def job(script, *args, env=None):
    e = dict(os.environ, PYTHONPATH=PY, VRAMLEDGER_PROBE_EVERY="100")
    e.pop("VRAMLEDGER_RECORD", None)
    e.update(env or {})
    return subprocess.run([JOB_PY, os.path.join(HERE, script)] + list(args), env=e,
                          capture_output=True, text=True, timeout=120)


class Callbacks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.record = os.path.join(cls.tmp, "record.jsonl")
        out = os.path.join(cls.tmp, "logged.json")
        p = job("job_callbacks.py", cls.record, out, "5")
        assert p.returncode == 0, p.stderr
        with open(out) as f:
            cls.logged = json.load(f)
        cls.events = record_schema.read_record(cls.record)  # checked against the schema

    def steps(self):
        return [e for e in self.events if e.get("type") == "step"]

    def test_one_line_per_step(self):
        self.assertEqual([s for s, _ in self.logged["hf"]], [1, 2, 3, 4, 5])
        self.assertEqual(len(self.steps()), 5)
        self.assertEqual(self.logged["hf"], self.logged["lightning"])

    def test_bill_is_the_records(self):
        """each sampled step's logged bill is the largest bill the record's
        phase events have for it (a CPU run: no peak phase)"""
        phases = [e for e in self.events if e.get("type") == "phase"]
        for (step, m), ev in zip(self.logged["hf"], self.steps()):
            bills = [p["bill"] for p in phases if p["step"] == ev["step"] and p.get("bill")]
            if not ev["sampled"]:
                self.assertFalse([k for k in m if k.startswith("vramledger/bill/")])
                continue
            self.assertTrue(bills, "a sampled step has bills")
            want = max(bills, key=lambda b: sum(v or 0 for v in b.values()))
            got = {k[len("vramledger/bill/"):-4]: v for k, v in m.items()
                   if k.startswith("vramledger/bill/")}
            self.assertEqual(got, {k: v / GIB for k, v in want.items() if v})
            # Adam's two fp32 states of the 32*64+64+64*16+16 parameters and
            # its four fp32 `step` scalars
            self.assertAlmostEqual(got["optimizer_states"] * GIB, 2 * 4 * 3152 + 4 * 4)
            self.assertEqual(m["vramledger/fallback_requested"], 0)

    def test_report_reads_the_record(self):
        self.assertEqual(self.events[0]["type"], "meta")
        p = subprocess.run([VL, "report", self.record, "--format", "json"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        rep = json.loads(p.stdout)
        self.assertTrue(rep["framework"])
        self.assertEqual([s["step"] for s in rep["steps"]], [1, 2, 3, 4, 5])

    def test_exit_line_of_a_record_the_probe_started(self):
        """attach(record=) outside `run` ends its record with the status the
        process exits with; `report` does not take it for a kill"""
        self.assertEqual(self.events[-1]["type"], "exit")
        self.assertEqual(self.events[-1]["status"], 0)
        e = dict(os.environ, PYTHONPATH=PY)
        for body, want in (("import sys; sys.exit(3)", 3), ("raise RuntimeError('x')", 1),
                           ("pass", 0)):
            rec = os.path.join(self.tmp, "exit%d.jsonl" % want)
            p = subprocess.run([JOB_PY, "-c", "import vramledger; vramledger.attach(record=%r)\n"
                                "%s" % (rec, body)], env=e, capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, want, p.stderr)
            with open(rec) as f:
                last = json.loads(f.read().splitlines()[-1])
            self.assertEqual((last["type"], last["status"]), ("exit", want))
            r = subprocess.run([VL, "report", rec], capture_output=True, text=True)
            self.assertNotIn("killed", r.stdout)

    def test_record_not_writable_is_no_exception(self):
        p = job("job_callbacks.py", os.path.join(self.tmp, "no", "such", "dir", "r.jsonl"),
                os.path.join(self.tmp, "x.json"), "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cannot write the record", p.stderr)
        with open(os.path.join(self.tmp, "x.json")) as f:
            self.assertEqual(json.load(f)["hf"], [])

    def test_fallback_said_once(self):
        flag = os.path.join(self.tmp, "fallback")
        open(flag, "w").close()
        out = os.path.join(self.tmp, "fb.json")
        p = job("job_callbacks.py", os.path.join(self.tmp, "fb.jsonl"), out, "3",
                env={"VRAMLEDGER_FALLBACK_FILE": flag})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.count("fallback trigger fired"), 2)  # once per callback
        with open(out) as f:
            logged = json.load(f)["hf"]
        self.assertEqual(len(logged), 3)
        self.assertTrue(all(m["vramledger/fallback_requested"] == 1 for _, m in logged))


class Program(unittest.TestCase):
    def test_estimate(self):
        os.environ["VRAMLEDGER_BIN"] = VL
        e = vramledger.estimate("gpt2", seq=1024, batch=2, precision="amp-bf16")
        self.assertEqual(e["params"], 124439808)
        self.assertGreater(e["peak_allocated_bytes"], 0)
        nofit = vramledger.estimate("llama-3-8b", batch=4, seq=2048, gpu="h100-80gb")
        self.assertFalse(nofit["fits"])
        with self.assertRaises(vramledger.VramledgerError) as cm:
            vramledger.estimate("no-such-model")
        self.assertEqual(cm.exception.returncode, 1)
        self.assertIn("no-such-model", str(cm.exception) + cm.exception.stderr)

    def test_python_m(self):
        p = subprocess.run([sys.executable, "-m", "vramledger", "--version"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=PY, VRAMLEDGER_BIN=VL))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("vramledger "))

    def test_no_program(self):
        # the package alone, outside this source tree (whose build it would
        # find), with no program on PATH and none named
        import shutil
        alone = tempfile.mkdtemp(prefix="vl-package-")
        shutil.copytree(os.path.join(PY, "vramledger"), os.path.join(alone, "vramledger"))
        p = subprocess.run([sys.executable, "-c", "import vramledger; vramledger.estimate('gpt2')"],
                           capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=alone, VRAMLEDGER_BIN="", PATH="/nonexistent"))
        shutil.rmtree(alone)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("VramledgerError", p.stderr)
        self.assertIn("VRAMLEDGER_BIN", p.stderr)  # the message says how to name one


if __name__ == "__main__":
    unittest.main()
