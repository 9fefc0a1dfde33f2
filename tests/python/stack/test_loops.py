"""The probe and the callbacks inside the trainers people use, on the stack
CI installs: a CPU run of transformers' Trainer and of Lightning's Trainer
(tests/python/stack/loops.py) with vramledger's callback attached and
vramledger.mark() in the job. The record must hold every step the trainer
ran, the phases of each (forward, backward, optimizer), the job's marks and
a bill; the callback must log one set of metrics a step with the bill's
lines, the record's own numbers; `vramledger report` must read the record.

usage: test_loops.py trainer|lightning   ($VRAMLEDGER_BIN, $VRAMLEDGER_PYTHON)"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def main():
    which = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        record, out = os.path.join(tmp, "record.jsonl"), os.path.join(tmp, "logged.json")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), VRAMLEDGER_PROBE_EVERY="1")
        env.pop("VRAMLEDGER_RECORD", None)
        p = subprocess.run([os.environ["VRAMLEDGER_PYTHON"], os.path.join(HERE, "loops.py"), which, record, out],
                           env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit("%s: the job exited %d:\n%s" % (which, p.returncode, p.stderr[-3000:]))
        events = [json.loads(line) for line in open(record)]
        steps = [e for e in events if e.get("type") == "step"]
        phases = {e.get("phase") for e in events if e.get("type") == "phase"}
        marks = [e.get("name") for e in events if e.get("type") == "mark"]
        bills = [e for e in events if e.get("type") == "phase" and e.get("bill")]
        print("%s: %d steps, phases %s, marks %s, %d bills" % (which, len(steps), sorted(p for p in phases if p),
                                                              marks[:5], len(bills)))
        assert len(steps) >= 4, "%s: %d step events for 4 steps" % (which, len(steps))
        for ph in ("forward", "backward", "optimizer"):
            assert any(ph in (x or "") for x in phases), "%s: no %s phase in %s" % (which, ph, phases)
        assert any(m and m.startswith("train step") for m in marks), "%s: the job's marks are missing" % which
        assert bills, "%s: no phase carries a bill" % which
        logged = json.load(open(out))
        mine = [m for _, m in logged if any(k.startswith("vramledger/") for k in m)]
        assert len(mine) >= 4, "%s: the callback logged %d steps" % (which, len(mine))
        assert any(k.startswith("vramledger/bill/") for m in mine for k in m), \
            "%s: no bill line among the logged metrics" % which
        r = subprocess.run([os.environ["VRAMLEDGER_BIN"], "report", record], capture_output=True, text=True)
        assert r.returncode == 0, "%s: report exited %d: %s" % (which, r.returncode, r.stderr[-800:])


if __name__ == "__main__":
    main()
