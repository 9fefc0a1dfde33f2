"""vramledger's Python side: the PyTorch probe (probe.py, attached by itself
under `vramledger run`, or with attach()), the measuring suite behind
`vramledger validate` (measure.py), mark(), which stamps a moment of the
job in the record of `vramledger run`, dry_run(), the GPU memory of the
user's own training step from a run on the CPU or on meta tensors, in
process (dryrun.py), estimate() and plan(), the vramledger program's answers
as Python objects (cli.py), and the trainers' callbacks (callbacks.py).
docs/python.md is the reference. Runs inside the user's Python; the probe
and the dry run need PyTorch."""
import ctypes

from .cli import VramledgerError, estimate, plan
from .dryrun import DryRun, dry_run

__all__ = ["DryRun", "VramledgerError", "__version__", "attach", "dry_run", "estimate",
           "fallback_requested", "mark", "plan"]

# The program's version (CMakeLists.txt's project(VERSION), `vramledger
# --version`), kept equal by a test; the package's build reads it from here.
__version__ = "0.1.0"

_mark = None


def mark(name):
    """Stamp NAME (at most 63 bytes) in the run record: call mark("step")
    once per training step. Does nothing outside `vramledger run` (the
    interposer is not loaded), and never raises."""
    global _mark
    from . import tracer
    from .probe_common import _cut
    name = _cut(name, 63)  # whole characters: the record's lines stay UTF-8
    tracer.mark(name)  # under `vramledger trace`: the mark in the trace too
    if _mark is None:
        try:
            fn = ctypes.CDLL(None).vl_mark
            fn.argtypes = [ctypes.c_char_p]
            fn.restype = None
            _mark = fn
        except (AttributeError, OSError):
            _mark = False
    if _mark:
        _mark(name.encode())
        return
    # no interposer (run --no-preload, or a probe attached outside run by
    # attach(record=) or a callback's record=): the probe writes the stamp
    import os
    import sys
    import time
    probe = sys.modules.get(__name__ + ".probe")
    if os.environ.get("VRAMLEDGER_RECORD") or (probe is not None and probe._state is not None):
        try:
            from . import probe
            probe.write({"type": "mark", "t_ns": time.monotonic_ns(), "pid": os.getpid(),
                         "name": name})
        except Exception:
            pass


def attach(model=None, optimizer=None, record=None):
    """Attach the PyTorch probe explicitly and name the model and the
    optimizer (under `vramledger run` it attaches by itself and finds them).
    RECORD: a record file to append to outside `run`. Returns the probe, or
    None when there is nowhere to write or VRAMLEDGER_PROBE=0."""
    from . import probe
    return probe.attach(model, optimizer, record)


def fallback_requested():
    """True once `vramledger run --commitment C` has seen the job pass the
    commitment's peak trigger: switch to the fallback the commitment names
    (for example, enable activation checkpointing) at the next step. Always
    False outside such a run. Cheap enough to call every step."""
    import os
    path = os.environ.get("VRAMLEDGER_FALLBACK_FILE")
    return bool(path) and os.path.exists(path)
