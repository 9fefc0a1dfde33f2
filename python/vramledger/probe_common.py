"""What the probe's parts share: its clock, its own-time counter, the rank,
and the storage under a tensor (wrapper subclasses included)."""
import os
import time


def _now():
    return time.monotonic_ns()


def _timed(f):
    """Count the probe's own time (its overhead, reported per step)."""
    def timed(self, *a):
        t0 = time.perf_counter_ns()
        try:
            return f(self, *a)
        finally:
            self.cost_ns += time.perf_counter_ns() - t0
    timed.__name__ = f.__name__
    timed.__doc__ = f.__doc__
    return timed


def _inner(t):
    """The plain tensors that hold a tensor subclass's memory on this GPU,
    by PyTorch's wrapper-subclass protocol (`__tensor_flatten__` names the
    inner tensors: a DTensor's local shard under tensor parallelism and
    FSDP2, an AsyncCollectiveTensor's result of a collective), which have a
    storage where the wrapper has none; [t] for a plain tensor."""
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is None:
        local = getattr(t, "_local_tensor", None)  # DTensor before the protocol
        return [t] if local is None else _inner(local)
    names, _ = flatten()
    out = []
    for name in names:
        x = getattr(t, name, None)
        if x is not None:
            out += _inner(x)
    return out or [t]


def _local(t):
    """The first tensor that holds t's memory on this GPU (t itself for a
    plain tensor)."""
    return _inner(t)[0]


def _storage(t):
    """(key, bytes) of the storage under tensor t: the first inner tensor's
    storage is the key, the bytes are all inner tensors' storages."""
    key, total = None, 0
    for x in _inner(t):
        try:
            s = x.untyped_storage()
        except AttributeError:  # torch < 2.0
            s = x.storage()
        if key is None:
            key = s.data_ptr()
            if key == 0 and x.device.type == "meta":  # no address: the storage's C++ object names it
                key = ("meta", getattr(getattr(s, "_storage", s), "_cdata", None) or id(s))
        total += s.nbytes()
    return key, total


def _rank():
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _cut(s, n):
    """str(s) as a string whose UTF-8 is at most n bytes, cut on a
    character boundary (a character cut in two makes the record line that
    holds it no UTF-8), control characters as "?" (a newline would split
    the line) and lone surrogates, which UTF-8 cannot hold, as "?"."""
    b = str(s).encode("utf-8", "replace")[:n].decode("utf-8", "ignore")
    return "".join("?" if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 else c for c in b)


# A name as one word of a trace line (python/vramledger/tracer.py): a space
# as "_", a control character as "?" (a new line in a module's name would
# start a line of its own); str.translate, cheap at every allocation.
_WORD = {i: "?" for i in range(0x20)}
_WORD.update({0x20: "_", 0x7f: "?"})
