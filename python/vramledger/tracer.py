"""The allocation tracer behind `vramledger trace` (issue 7).

Installed by sitecustomize when VRAMLEDGER_TRACE names a file: a
TorchDispatchMode sees every ATen op of the job (forward, backward, the
optimizer), and every tensor it returns; a storage's first appearance is an
allocation, and the death of the last tensor object on it (PyTorch keeps a
tensor's Python object alive while C++ holds the tensor) is its free. The
trace is text, one event a line, for the C replay:

    a ID BYTES DEVICE [MODULE]   a new storage of BYTES on DEVICE (cpu, cuda,
                        meta), made while MODULE ran (when the probe knows)
    f ID                that storage freed
    m NAME              a mark (vramledger.mark, the probe's steps)

Sizes are what the program asks for (storage nbytes); the replay rounds
them as the CUDA caching allocator would. Cost: a Python call per op; this
is a dry run, not a measurement of speed.
"""
import os
import weakref

_tracer = None


class _Trace:
    def __init__(self, path):
        self.f = open(path, "w", buffering=1 << 20)
        self.live = {}  # storage key -> [id, {id(weakref): weakref}] (a weakref compares
        # its tensors with ==, so no set of them)
        self.next_id = 1
        self.pid = os.getpid()
        self.probe = None

    def seen(self, t):
        try:
            try:
                s = t.untyped_storage()
            except AttributeError:  # torch < 2.0
                s = t.storage()
            key = s.data_ptr()
            n = s.nbytes()
        except Exception:
            return
        if key == 0 and n == 0:
            return
        dev = t.device.type
        if dev == "meta":
            key = id(s)  # meta storages have no address
        entry = self.live.get((dev, key))
        if entry is None:
            entry = [self.next_id, {}]
            self.next_id += 1
            self.live[(dev, key)] = entry
            st = self.probe.stack if self.probe is not None else None
            if st:  # the module running (the probe's, on sampled steps)
                self.f.write("a %d %d %s %s\n" % (entry[0], n, dev, st[-1].replace(" ", "_")))
            else:
                self.f.write("a %d %d %s\n" % (entry[0], n, dev))
        k = (dev, key)

        def gone(ref, k=k, tracer=self):
            e = tracer.live.get(k)
            if e is None:
                return
            e[1].pop(id(ref), None)
            if not e[1]:
                del tracer.live[k]
                if os.getpid() == tracer.pid:
                    tracer.f.write("f %d\n" % e[0])
        try:
            ref = weakref.ref(t, gone)
            entry[1][id(ref)] = ref
        except TypeError:
            pass

    def mark(self, name):
        self.f.write("m %s\n" % name)

    def close(self):
        try:
            self.f.flush()
        except Exception:
            pass


def install(torch, path):
    """Trace every op's outputs from now on. Returns the tracer."""
    global _tracer
    if _tracer is not None:
        return _tracer
    from torch.utils._python_dispatch import TorchDispatchMode
    tr = _Trace(path)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                tr.seen(out)
            elif isinstance(out, (tuple, list)):
                for o in out:
                    if isinstance(o, torch.Tensor):
                        tr.seen(o)
            return out

    Mode().__enter__()  # for the rest of the process
    import atexit
    atexit.register(tr.close)
    _tracer = tr
    return tr


def mark(name):
    if _tracer is not None:
        _tracer.mark(name)
