"""A training job whose record the disk refuses, for the probe's tests:
attach(record=RECORD) outside `vramledger run`, then six steps of
job_train.py's model.
argv: RECORD MODE, MODE one of
  plan=K,K,...  the probe's os.write() calls on the record, in order: ok
                (written), short (half of it written), enospc, edquot,
                efbig (raises that errno); the calls after the plan write
  full          every os.write() on the record after attaching raises
                ENOSPC: the disk never has room again
  fsize=BYTES   the file size limit (RLIMIT_FSIZE, soft) set to BYTES and
                SIGXFSZ set back to its default (a write past the limit
                kills) before attaching; the limit raised again after
                three steps
It prints one JSON line: whether the probe is still on, the events its
listener got, what the writer counts as lost, and SIGXFSZ's disposition
and mask after the steps."""
import errno
import json
import os
import resource
import signal
import sys

import torch

import vramledger

record, mode = sys.argv[1], sys.argv[2]
kind, _, arg = mode.partition("=")
if kind == "fsize":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(arg), hard))

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
p = vramledger.attach(model, record=record)
# made after attaching: before torch 2.0 the probe hooks an optimizer as it is made
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
vramledger.attach(optimizer=opt)
seen = []
p.w.listeners.append(seen.append)

plan = arg.split(",") if kind == "plan" and arg else []
real_write = os.write


def faulty(fd, buf):
    if fd == p.w.fd and kind == "full":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if fd != p.w.fd or not plan:
        return real_write(fd, buf)
    k = plan.pop(0)
    if k == "ok":
        return real_write(fd, buf)
    if k == "short":
        return real_write(fd, buf[:len(buf) // 2])
    e = getattr(errno, k.upper())
    raise OSError(e, os.strerror(e))


os.write = faulty
x, y = torch.randn(8, 32), torch.randn(8, 16)
for step in range(6):
    if kind == "fsize" and step == 3:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, hard))
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
if kind != "full":  # the exit line, at exit, on the same disk
    os.write = real_write
print(json.dumps({"on": not p.dead, "events": [e["type"] for e in seen],
                  "lost_events": p.w.lost_events, "lost_bytes": p.w.lost_bytes,
                  "plan_left": len(plan),
                  "xfsz_default": signal.getsignal(signal.SIGXFSZ) == signal.SIG_DFL,
                  "xfsz_blocked": signal.SIGXFSZ in signal.pthread_sigmask(signal.SIG_BLOCK, [])}))
