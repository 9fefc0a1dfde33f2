"""A job whose backward sums second gradients, traced in process on meta
(argv: TRACE_FILE on|off). y and h feed two products each, so their
gradients arrive twice; the weight of `lin`, used twice, too (its first
gradient a view: summed out of place). With `off` the tracer's
rule for the sums the untraced job makes in place is switched off, to
compare."""
import sys

import torch

from vramledger import tracer

if sys.argv[2] == "off":
    tracer._reused_operand = lambda *a, **k: None
tracer.install(torch, sys.argv[1])
lin = torch.nn.Linear(256, 256, bias=False, device="meta")
x = torch.empty(512, 256, device="meta", requires_grad=True)
h = lin(x)
y = h * 3 + lin(h) * 2
(y * y).sum().backward()
tracer.uninstall()
