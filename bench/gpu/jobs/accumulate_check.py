#!/usr/bin/env python3
"""Does the tracer's in-place rule for second gradients fire on this
torch? tests/python/job_accumulate.py traced with the rule on and off
(the allocations of each), and what the rule sees at each candidate op:
grad mode, the frame below the dispatch mode, the operand's layout.

  python3 bench/gpu/jobs/accumulate_check.py
"""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
JOB = os.path.join(ROOT, "tests", "python", "job_accumulate.py")
PROBE = r'''
import sys, torch
sys.path.insert(0, sys.argv[1])
from vramledger import tracer
seen = []
orig = tracer._reused_operand
def look(torch_, tr, func, args, kwargs):
    f = sys._getframe(2)
    chain = []
    while f is not None and len(chain) < 4:
        chain.append("%s:%s" % (f.f_code.co_filename.split("site-packages/")[-1], f.f_code.co_name))
        f = f.f_back
    r = orig(torch_, tr, func, args, kwargs)
    seen.append({"op": str(func), "grad": torch_.is_grad_enabled(), "frames": chain,
                 "contiguous": args[0].is_contiguous(), "key_live": r is not None})
    return r
tracer._reused_operand = look
tracer.install(torch, "/tmp/acc_probe.trace")
lin = torch.nn.Linear(256, 256, bias=False, device="meta")
x = torch.empty(512, 256, device="meta", requires_grad=True)
h = lin(x)
y = h * 3 + lin(h) * 2
(y * y).sum().backward()
tracer.uninstall()
import json
print(json.dumps(seen))
'''


def main():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = {}
    for rule in ("on", "off"):
        subprocess.run([sys.executable, JOB, "/tmp/acc_%s.trace" % rule, rule], env=env, check=True)
        with open("/tmp/acc_%s.trace" % rule) as f:
            out[rule] = sum(1 for l in f if l[:1] in "ab")
    p = subprocess.run([sys.executable, "-c", PROBE, os.path.join(ROOT, "python")], env=env,
                       capture_output=True, text=True)
    out["candidates"] = json.loads(p.stdout) if p.returncode == 0 else p.stderr[-2000:]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
