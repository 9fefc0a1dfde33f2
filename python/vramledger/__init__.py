"""vramledger's Python side: the measuring suite behind `vramledger validate`
(measure.py), and mark(), which stamps a moment of the job in the record of
`vramledger run` (and so gives `vramledger sweep` its steps per second).
Runs inside the user's Python with PyTorch."""
import ctypes

_mark = None


def mark(name):
    """Stamp NAME (at most 63 bytes) in the run record: call mark("step")
    once per training step. Does nothing outside `vramledger run` (the
    interposer is not loaded), and never raises."""
    global _mark
    if _mark is None:
        try:
            fn = ctypes.CDLL(None).vl_mark
            fn.argtypes = [ctypes.c_char_p]
            fn.restype = None
            _mark = fn
        except (AttributeError, OSError):
            _mark = False
    if _mark:
        _mark(str(name).encode()[:63])


def fallback_requested():
    """True once `vramledger run --commitment C` has seen the job pass the
    commitment's peak trigger: switch to the fallback the commitment names
    (for example, enable activation checkpointing) at the next step. Always
    False outside such a run. Cheap enough to call every step."""
    import os
    path = os.environ.get("VRAMLEDGER_FALLBACK_FILE")
    return bool(path) and os.path.exists(path)
