"""The probe's allocator side: torch.cuda's counters and peaks at each
phase boundary (the peaks the probe resets are merged back into what the
job reads), the device, and the out-of-memory observer."""
import os

from .probe_common import _now, _rank


class _Memory:
    """A part of _Probe (probe.py): its methods use the probe's state."""

    def cuda_on(self):
        """CUDA is in use (never initialised by the probe; once on, on)."""
        if not self.cuda:
            c = self.torch.cuda
            # is_initialized first: is_available() is a slow call on a
            # machine without CUDA, asked at every boundary
            self.cuda = c.is_initialized() and c.is_available()
        return self.cuda

    def raw_stats(self):
        if not self.cuda_on():
            return None, None
        dev = self.torch.cuda.current_device()
        return dev, self.torch._C._cuda_memoryStats(dev)

    def counters(self):
        """The allocator at this moment, and its peaks since the last
        boundary (then reset, remembering the peaks for the job)."""
        dev, st = self.raw_stats()
        if st is None:
            return None
        a = st["allocated_bytes"]["all"]
        r = st["reserved_bytes"]["all"]
        out = {
            "device": dev,
            "allocated": a["current"],
            "reserved": r["current"],
            "active": st["active_bytes"]["all"]["current"],
            "inactive_split": st["inactive_split_bytes"]["all"]["current"],
            "peak_allocated": a["peak"],
            "peak_reserved": r["peak"],
            "alloc_retries": st.get("num_alloc_retries", 0),
            "ooms": st.get("num_ooms", 0),
        }
        req = st.get("requested_bytes")  # torch >= 2.1: the bytes asked for
        if req:
            out["requested"] = req["all"]["current"]
        self.remember(dev, st)
        self.torch._C._cuda_resetPeakMemoryStats(dev)
        if not self.oom_observer:
            self.attach_oom()
            self.describe_device(dev)
        return out

    def remember(self, dev, st):
        held = self.held.setdefault(dev, {})
        for k, v in st.items():  # {stat: {pool: {current, peak, ...}}}
            if type(v) is dict:
                for pool, d in v.items():
                    if type(d) is dict:
                        pk = d.get("peak")
                        if pk is not None and pk > held.get((k, pool), 0):
                            held[(k, pool)] = pk

    def merged(self, dev, st):
        """memory_stats as the job would see them had we never reset."""
        held = self.held.get(dev)
        if not held:
            return st
        for (k, pool), pk in held.items():
            d = st.get(k, {}).get(pool)
            if type(d) is dict and d.get("peak", pk) < pk:
                d["peak"] = pk
        return st

    def describe_device(self, dev):
        """The device, once, with the size of one cuBLAS workspace as
        PyTorch sizes it (CUBLAS_WORKSPACE_CONFIG ":SIZE_KiB:COUNT" pairs;
        default 32 MiB on compute capability 9 and later, ":4096:2:16:8"
        = 8.125 MiB before; aten/src/ATen/cuda/CublasHandlePool.cpp). One
        workspace lives per thread and stream that runs a matmul: the
        reader counts the forward's and autograd's backward thread."""
        from .tracer import workspace_bytes
        cap = self.torch.cuda.get_device_capability(dev)
        ws = workspace_bytes(cap[0])
        props = self.torch.cuda.get_device_properties(dev)
        self.w.put({"type": "device", "t_ns": _now(), "pid": os.getpid(), "rank": self.rank,
                    "device": dev, "name": props.name, "total_bytes": props.total_memory,
                    "capability": "%d.%d" % cap, "cublas_workspace_bytes": ws,
                    "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")})

    def attach_oom(self):
        self.oom_observer = True
        att = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if att is None:
            return
        probe = self

        def observer(device, alloc, device_allocated, device_free):
            try:
                probe.on_oom(device, alloc, device_allocated, device_free)
            except Exception:  # noqa: BLE001 - inside the allocator's OOM path: nothing may escape
                pass
        att(observer)

    def on_oom(self, device, alloc, device_allocated, device_free):
        ev = {"type": "oom", "t_ns": _now(), "pid": os.getpid(), "rank": _rank(),
              "step": self.step, "phase": self.phase, "device": device,
              "request_bytes": alloc, "device_allocated_bytes": device_allocated,
              "device_free_bytes": device_free}
        try:
            ev["bill"] = self.bill()
        except Exception:  # noqa: BLE001 - the oom event is written even without its bill
            pass
        if self.snapshot and self.run_dir:
            self.dump_snapshot("oom", ev)
        self.w.put(ev)

    def dump_snapshot(self, when, ev):
        """torch.cuda.memory._snapshot() with the history kept since the
        start, in the run directory as WHEN_snapshot_pid<PID>.pickle (the
        file pytorch.org/memory_viz loads); its path, or why there is none,
        in ev. Never raises."""
        path = os.path.join(self.run_dir, "%s_snapshot_pid%d.pickle" % (when, os.getpid()))
        try:
            import pickle
            import tempfile
            snap = self.torch.cuda.memory._snapshot()
            # as `run` makes its files: new (O_EXCL), 0600, never through a
            # symbolic link (mkstemp), then renamed over the last one (a
            # link put there is replaced, never followed)
            fd, tmp = tempfile.mkstemp(prefix=".%s_snapshot_pid%d." % (when, os.getpid()),
                                       dir=self.run_dir)
            try:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(snap, f)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
            ev["snapshot"] = path
        except Exception as e:  # noqa: BLE001 - no CUDA, no history, a full disk: said
            ev["snapshot_error"] = "%s: %s" % (type(e).__name__, e)

    # ---- the bill -----------------------------------------------------------
