"""The framework layer of a run record: the PyTorch probe.

Attached by sitecustomize (python/site) as soon as the job imports torch, or
by vramledger.attach(). It writes, into the record of `vramledger run`
(VRAMLEDGER_RECORD, JSON Lines on an O_APPEND file, one os.write per line,
CLOCK_MONOTONIC nanoseconds like every other writer):

  probe   once: versions, device, rank, the sampling period
  phase   one per phase interval of every step: forward, loss (forward end to
          backward), backward, pre_step (backward end to the optimizer: grad
          clipping, unscaling), optimizer, idle (optimizer end to the next
          forward: data, zero_grad, logging), eval (forward without grad);
          the allocator's counters at the interval's end and its peaks inside
          the interval; on sampled steps, the bill at the interval's end
  step    one per optimizer step: time, tokens, micro-batches, the peak and
          its phase; on sampled steps the modules holding the most saved
          activation bytes
  oom     the allocator's out-of-memory: moment, phase, request, the bill
  mark    vramledger.mark(name) when the interposer is not loaded

The bill (bytes, deduplicated by storage, tensors on the step's device only):
  parameters        parameters and buffers of the models seen at the top of a
                    forward (or given to attach())
  gradients         .grad of those and of the optimizers' parameters
  optimizer_states  tensors in optimizer.state, and optimizer parameters that
                    are not model parameters (fp32 master copies)
  activations       tensors saved for backward (autograd's saved-tensor
                    hooks), still held by a graph; parameters excluded
  autocast_weights  autocast's cached low-precision copies of weights, saved
                    for backward (a cast of a leaf, ToCopyBackward0)
  outputs           tensors a top-level forward returned, while they live
  comm_buffers      DistributedDataParallel's gradient buckets
What the allocator holds beyond these is "other" (the loss, logits not saved,
temporaries), computed by the reader.

Cost: on every step a handful of hooks at the top level and one allocator
query per phase; the bill (saved-tensor hooks, per-module hooks, a walk over
parameters and optimizer state) only on sampled steps: the first three and
every VRAMLEDGER_PROBE_EVERY-th (default 100).

Correctness: the probe never raises into the job (a failure disables it and
leaves a note), never allocates on the GPU, never initialises CUDA, and
keeps torch.cuda.max_memory_allocated() and friends as the job would see
them without it (it resets the allocator's peaks at phase boundaries, so it
remembers and merges them back into memory_stats()).
"""
import json
import os
import sys
import time
import weakref

_SCHEMA_PROBE = 1
_state = None


def _now():
    return time.monotonic_ns()


class _Writer:
    """The record's events, appended; each one also goes to the listeners
    (vramledger.callbacks: the trainers' callbacks), in this process."""

    def __init__(self, path, create=False):
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        if create:  # attach(record=...) outside `vramledger run`
            fd = os.open(path, flags | os.O_CREAT, 0o600)
            if os.fstat(fd).st_size == 0:
                os.write(fd, (json.dumps(_meta_outside_run(), separators=(",", ":")) + "\n")
                         .encode())
            self.fd = fd
        else:
            self.fd = os.open(path, flags)
        self.pid = os.getpid()
        self.listeners = []

    def put(self, obj):
        if os.getpid() != self.pid:  # a forked worker: not ours to report
            return
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        os.write(self.fd, line)
        for f in self.listeners:
            try:
                f(obj)
            except Exception as ex:  # noqa: BLE001 - a listener never breaks the job
                sys.stderr.write("vramledger: a probe listener failed: %r\n" % (ex,))


def _meta_outside_run():
    """The first line of a record the probe starts itself (attach(record=)
    outside `vramledger run`): what `vramledger report` needs to read it
    (docs/record.md); no NVML samples, no interposer."""
    import socket
    return {"type": "meta", "schema": "vramledger.run/1", "t_ns": _now(),
            "start_unix_ms": int(time.time() * 1000), "command": list(sys.argv) or ["python"],
            "host": socket.gethostname(), "interval_ms": 0,
            "nvml": "not sampled: the probe was attached by vramledger.attach() outside "
                    "vramledger run", "gpus": [], "writer": "probe"}


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


class _Probe:
    def __init__(self, torch, writer, every):
        self.torch = torch
        self.w = writer
        self.every = max(1, every)
        self.step = 1
        self.phase = "idle"
        self.t_phase = _now()
        self.t_step = None
        self.tokens = 0
        self.samples = 0
        self.micro = 0
        self.step_peak = (0, 0, "")
        self.roots = weakref.WeakSet()
        self.root_ids = set()
        self.root_depth = 0
        self.optimizers = weakref.WeakSet()
        self.models = weakref.WeakSet()
        self.saved = []  # (weakref to the packed tensor, key, bytes, kind)
        self.outputs = []  # (weakref to an output of a top-level forward, key, bytes)
        self.saved_keys = set()
        self.cast_leaves, self.ckpt_casts = set(), 0
        self.param_keys = set()
        self.module_bytes = {}
        self.names = {}
        self.stack = []
        self.global_handles = []
        self.saved_hooks_on = False
        self.held = {}  # device -> {stat path: peak} hidden by our resets
        self.dead = False
        self.oom_observer = False
        self.snapshot = os.environ.get("VRAMLEDGER_SNAPSHOT") == "1"
        self.run_dir = os.environ.get("VRAMLEDGER_RUN_DIR", "")
        self.compiled = False
        self.sampled = False
        self.first_call = None
        self.rank = _rank()
        self.cache = {}
        self.cuda = False
        self.in_backward = False
        self.want_tokens = False
        self.user_hooks = 0  # the job's saved_tensors_hooks contexts now open
        self.cost_ns = 0  # the probe's own time in this step
        self.light = []  # (phase, t0, t1) of a step that is not sampled
        self.tracer = None  # vramledger trace's tracer, when it runs
        self.evals = 0  # forwards without grad outside steps
        self.last_counters = None

    # ---- safety -----------------------------------------------------------
    def fail(self, where, exc):
        """Never raise into the job: stop probing and say why."""
        if self.dead:
            return
        self.dead = True
        try:
            self.remove_global()
            self.w.put({"type": "note", "t_ns": _now(), "pid": os.getpid(),
                        "text": "probe stopped in %s: %s: %s" % (where, type(exc).__name__, exc)})
        except Exception:
            pass

    # ---- the allocator ----------------------------------------------------
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
            except Exception:
                pass
        att(observer)

    def on_oom(self, device, alloc, device_allocated, device_free):
        ev = {"type": "oom", "t_ns": _now(), "pid": os.getpid(), "rank": _rank(),
              "step": self.step, "phase": self.phase, "device": device,
              "request_bytes": alloc, "device_allocated_bytes": device_allocated,
              "device_free_bytes": device_free}
        try:
            ev["bill"] = self.bill()
        except Exception:
            pass
        if self.snapshot and self.run_dir:
            path = os.path.join(self.run_dir, "oom_snapshot_pid%d.pickle" % os.getpid())
            try:
                import pickle
                snap = self.torch.cuda.memory._snapshot()
                with open(path, "wb") as f:
                    pickle.dump(snap, f)
                ev["snapshot"] = path
            except Exception as e:
                ev["snapshot_error"] = str(e)
        self.w.put(ev)

    # ---- the bill -----------------------------------------------------------
    def on_device(self, t):
        return t.is_cuda if self.cuda_on() else True

    def count_params(self):
        """Parameters and buffers of the models; the optimizers' own
        parameters that are not the model's (master copies) go to states."""
        seen, n, plist, ids = set(), 0, [], set()
        for m in list(self.models) + list(self.roots):
            for p in m.parameters():
                if id(p) in ids:
                    continue
                ids.add(id(p))
                plist.append(p)
                n += self.take(p, seen)
            for b in m.buffers():
                n += self.take(b, seen)
        extra = []
        for o in list(self.optimizers):
            for g in o.param_groups:
                for p in g["params"]:
                    if id(p) not in ids:
                        ids.add(id(p))
                        extra.append(p)
        self.param_keys = seen
        return n, seen, plist, extra

    def take(self, t, seen):
        if t is None or not self.on_device(t):
            return 0
        k, n = _storage(t)
        if k in seen:
            return 0
        seen.add(k)
        return n

    def count_grads(self, plist, extra, exclude):
        seen, n = set(exclude), 0
        for p in plist:
            n += self.take(p.grad, seen)
        for p in extra:
            n += self.take(p.grad, seen)
        return n, seen - exclude

    def count_states(self, extra, exclude):
        seen, n = set(exclude), 0
        for p in extra:
            n += self.take(p, seen)  # a master copy the optimizer updates
        T = self.torch.Tensor
        for o in list(self.optimizers):
            for st in o.state.values():
                if isinstance(st, dict):
                    for v in st.values():
                        if isinstance(v, T):
                            n += self.take(v, seen)
        return n, seen - exclude

    def bill(self, refresh=("params", "grads", "states")):
        """The bill now. Parameters, gradients and states are walked again
        only where the phase that just ended can have changed them."""
        c = self.cache
        if "params" in refresh or "params" not in c:
            c["params"] = self.count_params()
        params, pkeys, plist, extra = c["params"]
        if "states" in refresh or "states" not in c:
            c["states"] = self.count_states(extra, pkeys)
        states, skeys = c["states"]
        if "grads" in refresh or "grads" not in c:
            c["grads"] = self.count_grads(plist, extra, pkeys | skeys)
        grads, gkeys = c["grads"]
        seen = pkeys | skeys | gkeys
        act, cast, live = 0, 0, []
        for ref, k, n, kind in self.saved:
            if ref() is None:
                continue
            live.append((ref, k, n, kind))
            if k in seen:
                continue
            seen.add(k)
            if kind == "autocast":
                cast += n
            else:
                act += n
        self.saved = live
        outs, live = 0, []
        for ref, k, n in self.outputs:
            if ref() is None:
                continue
            live.append((ref, k, n))
            if k not in seen:
                seen.add(k)
                outs += n
        self.outputs = live
        if self.ckpt_casts and self.autocast_on()[0]:
            cast += self.ckpt_casts  # in autocast's cache until its region ends
        if "comm" in refresh or "comm" not in c:
            c["comm"] = self.count_comm()
        if self.tracer is not None:
            # under vramledger trace no saved-tensor hook runs (see
            # saved_hooks): activations are what the tracer holds live
            # less everything named, by difference as under torch.compile
            tr = self.tracer
            act = max(0, tr.live_bytes - tr.ws_live - params - grads - states - cast - outs
                      - c["comm"])
        return {"parameters": params, "gradients": grads, "optimizer_states": states,
                "activations": None if self.compiled else act, "autocast_weights": cast,
                "outputs": outs, "comm_buffers": c["comm"]}

    def count_comm(self):
        """DistributedDataParallel's gradient buckets: one flat copy of the
        gradients, unless gradient_as_bucket_view makes the gradients views
        of them (then they are the gradients, counted there). From DDP's
        own logging data (bucket_sizes, bytes)."""
        n = 0
        for m in list(self.roots) + list(self.models):
            get = getattr(m, "_get_ddp_logging_data", None)
            if get is None:
                continue
            try:
                d = get()
                if d.get("gradient_as_bucket_view"):
                    continue
                n += sum(int(x) for x in str(d.get("bucket_sizes", "")).split(",") if x.strip())
            except Exception:
                continue
        return n

    def keep_outputs(self, out, depth=0, cache=False):
        """Weak references to the tensors a top-level forward returned
        (logits, the loss, and a key/value cache: transformers returns one
        from a causal LM's training forward too, past_key_values, whose
        keys and values nothing else holds once attention has expanded
        them): named "outputs" while they live."""
        T = self.torch.Tensor
        if isinstance(out, T):
            if self.on_device(out):
                k, n = _storage(out)
                self.outputs.append((weakref.ref(out), k, n))
        elif depth >= 6:
            return
        elif isinstance(out, (tuple, list)):
            for x in out:
                self.keep_outputs(x, depth + 1, cache)
        elif isinstance(out, dict):
            for x in out.values():
                self.keep_outputs(x, depth + 1, cache)
        elif (cache or "Cache" in type(out).__name__) and hasattr(out, "__dict__"):
            # a cache object (DynamicCache: .layers[i].keys / .values;
            # older ones: .key_cache / .value_cache lists)
            for x in vars(out).values():
                self.keep_outputs(x, depth + 1, True)

    # ---- saved tensors ----------------------------------------------------------
    @_timed
    def pack(self, t):
        try:
            if self.on_device(t):
                k, n = _storage(t)
                if k not in self.param_keys:
                    kind = "activation"
                    leaf = self.cast_leaf(t.grad_fn)
                    if leaf is not None:
                        kind = "autocast"
                        self.cast_leaves.add(_storage(leaf)[0])
                    d = t.detach()  # no reference back to the graph: no cycle
                    self.keep_saved(d, k, n, kind)
                    return d
        except Exception as e:
            self.fail("pack", e)
        return t

    @_timed
    def keep_checkpoint_inputs(self, args):
        """The inputs a checkpointed call keeps for its recomputation."""
        for t in args:
            if not isinstance(t, self.torch.Tensor) or not self.on_device(t):
                continue
            k, n = _storage(t)
            if k not in self.param_keys:
                self.keep_saved(t, k, n, "activation", " (checkpoint inputs)")

    def keep_saved(self, t, k, n, kind, why=""):
        """A tensor held for backward (counted while t lives), its bytes
        put to the module running the first time its storage is seen."""
        self.saved.append((weakref.ref(t), k, n, kind))
        if kind == "activation" and k not in self.saved_keys:
            self.saved_keys.add(k)
            name = (self.stack[-1] if self.stack else "(outside modules)") + why
            self.module_bytes[name] = self.module_bytes.get(name, 0) + n

    @staticmethod
    def cast_leaf(fn):
        """The leaf a tensor is a cast of (autocast's cached copy of a
        weight), seen directly or through views (nn.Linear saves
        weight.t()), or None."""
        for _ in range(3):
            if fn is None:
                return None
            name = type(fn).__name__
            nxt = fn.next_functions
            if name == "ToCopyBackward0":
                if nxt and nxt[0][0] is not None and type(nxt[0][0]).__name__ == "AccumulateGrad":
                    return nxt[0][0].variable
                return None
            if name not in ("TBackward0", "TransposeBackward0", "ViewBackward0",
                            "PermuteBackward0", "ExpandBackward0", "UnsafeViewBackward0",
                            "AliasBackward0") or not nxt:
                return None
            fn = nxt[0][0]
        return None

    def autocast_on(self):
        """Autocast is on here for the probe's device (CUDA, or the CPU
        without one), with its weight cache: (True, dtype)."""
        T = self.torch
        dev = "cuda" if self.cuda_on() else "cpu"
        try:
            on = T.is_autocast_enabled(dev)
        except TypeError:  # torch < 2.4
            on = T.is_autocast_enabled() if dev == "cuda" else T.is_autocast_cpu_enabled()
        if not on or not T.is_autocast_cache_enabled():
            return False, None
        try:
            return True, T.get_autocast_dtype(dev)
        except AttributeError:
            return True, T.get_autocast_gpu_dtype() if dev == "cuda" else T.get_autocast_cpu_dtype()

    @_timed
    def note_checkpoint_casts(self, out, args):
        """A checkpointed call saves nothing the probe sees, but autocast
        still caches a half copy of each weight it casts, until the
        outermost autocast region ends. Its graph (non-reentrant
        checkpointing builds one) names them: a cast of a parameter
        (ToCopyBackward0 into its AccumulateGrad). The walk stays inside
        the call (it stops at its inputs' nodes) and keeps no node once
        done: holding one would keep its saved tensors alive. Weights
        already counted through a saved cast are skipped."""
        on, dtype = self.autocast_on()
        if not on:
            return
        T = self.torch.Tensor
        size = self.torch.finfo(dtype).bits // 8
        seen = {a.grad_fn for a in args if isinstance(a, T) and a.grad_fn is not None}
        todo = [t.grad_fn for t in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(t, T) and t.grad_fn is not None]
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            leaf = self.cast_leaf(fn) if type(fn).__name__ == "ToCopyBackward0" else None
            if leaf is not None:
                k, _ = _storage(leaf)
                if k not in self.cast_leaves and leaf.is_floating_point() and self.on_device(leaf):
                    self.cast_leaves.add(k)
                    self.ckpt_casts += _local(leaf).numel() * size
                continue
            for nxt, _ in fn.next_functions:
                if nxt is not None and type(nxt).__name__ != "AccumulateGrad":
                    todo.append(nxt)

    @staticmethod
    def unpack(t):
        return t

    def saved_hooks(self, on):
        """Our saved-tensor hooks on or off. Never over a job's own hooks
        (checkpointing a whole model, save_on_cpu): those tensors are theirs
        to keep, so the probe stays out while any is active, and only pops
        its own from the top of the stack."""
        if on == self.saved_hooks_on:
            return
        ag = self.torch._C._autograd
        if on:
            # not under vramledger trace: the trace needs no saved-tensor
            # bill, and torch 1.13 hands a wrapped Python number to the
            # tracer's dispatch mode as a float when a hook detaches it
            if self.user_hooks or self.tracer is not None:
                return
            try:
                ag._push_saved_tensors_default_hooks(self.pack, self.unpack)
            except RuntimeError:  # saved-tensor hooks disabled here (compile, FSDP)
                return
            self.saved_hooks_on = True
        elif self.user_hooks == 0:
            ag._pop_saved_tensors_default_hooks()
            self.saved_hooks_on = False

    # ---- module hooks -------------------------------------------------------------
    def add_global(self):
        if self.global_handles or self.compiled:
            return
        import importlib
        mm = importlib.import_module("torch.nn.modules.module")
        self.global_handles = [mm.register_module_forward_pre_hook(self.g_pre),
                               mm.register_module_forward_hook(self.g_post)]

    def remove_global(self):
        for h in self.global_handles:
            h.remove()
        self.global_handles = []
        self.stack = []

    @_timed
    def g_pre(self, module, args):
        try:
            if self.want_tokens:
                self.tokens_from_embedding(args)
            if self.in_backward:  # checkpointing recomputes layers: not a new forward
                pass
            elif self.root_depth == 0 and id(module) not in self.root_ids:
                # a new top-level module: its own hooks take over from its
                # next call; this call is entered from here
                self.add_root(module)
                self.first_call = id(module)
                self.root_depth = 1
                self.enter(args, {})
            self.stack.append(self.names.get(id(module), type(module).__name__))
        except Exception as e:
            self.fail("forward pre-hook", e)

    @_timed
    def g_post(self, module, args, out):
        if self.stack:
            self.stack.pop()

    def add_root(self, module):
        self.roots.add(module)
        self.root_ids.add(id(module))
        if type(module).__name__ == "OptimizedModule":
            self.compiled = True  # torch.compile: no hooks inside its graphs
            self.remove_global()
        for name, m in module.named_modules():
            self.names.setdefault(id(m), name or type(module).__name__)
        try:
            module.register_forward_pre_hook(self.r_pre_kw, with_kwargs=True)
        except TypeError:  # torch < 2.0: no keyword arguments
            module.register_forward_pre_hook(self.r_pre)
        module.register_forward_hook(self.r_post)

    @_timed
    def r_pre_kw(self, module, args, kwargs):
        self.r_enter(module, args, kwargs)

    @_timed
    def r_pre(self, module, args):
        self.r_enter(module, args, {})

    def r_enter(self, module, args, kwargs):
        if self.dead or self.in_backward:
            return
        if self.first_call == id(module):  # torch < 2.0 calls a hook added mid-call
            self.first_call = None
            return
        try:
            self.root_depth += 1
            if self.root_depth == 1:
                self.enter(args, kwargs)
        except Exception as e:
            self.fail("forward pre-hook", e)

    @_timed
    def r_post(self, module, args, out):
        if self.dead or self.in_backward:
            return
        self.first_call = None
        try:
            self.root_depth = max(0, self.root_depth - 1)
            if self.root_depth == 0:
                if self.sampled:
                    self.keep_outputs(out)
                self.leave()
        except Exception as e:
            self.fail("forward hook", e)

    # ---- phases -------------------------------------------------------------------
    def boundary(self, nxt):
        """End the current interval, start `nxt`. On a step that is not
        sampled only its times are kept (written with the step): one
        allocator query a step keeps the probe under 1 % of step time."""
        t = _now()
        if self.tracer is not None:  # vramledger trace: the phase in the trace
            self.tracer.mark("%s %d" % (nxt, self.step))
        if not self.sampled and self.t_step is not None:
            self.light.append((self.phase, self.t_phase, t))
            self.phase = nxt
            self.t_phase = t
            return
        if self.t_step is None and "eval" in (self.phase, nxt):
            # forwards outside training steps (evaluation, generate()): the
            # first three and every `every`-th are recorded
            if nxt == "eval":
                self.evals += 1
            if self.evals > 3 and self.evals % self.every:
                self.phase = nxt
                self.t_phase = t
                return
        ev = {"type": "phase", "t_ns": t, "pid": os.getpid(), "rank": self.rank,
              "step": self.step, "phase": self.phase, "t0_ns": self.t_phase}
        c = self.counters()
        self.last_counters = c
        if c is not None:
            ev.update(c)
            if self.phase != "idle" and c["peak_allocated"] > self.step_peak[0]:
                self.step_peak = (c["peak_allocated"], c["peak_reserved"], self.phase)
            elif self.phase != "idle" and c["peak_reserved"] > self.step_peak[1]:
                self.step_peak = (self.step_peak[0], c["peak_reserved"], self.step_peak[2])
        if self.sampled:
            ph = self.phase
            # gradients at every boundary: a loop may zero them anywhere
            # (Lightning's closure does between forward and backward)
            ev["bill"] = self.bill() if ph in ("idle", "optimizer") else self.bill(("grads",))
        self.w.put(ev)
        self.phase = nxt
        self.t_phase = t

    def enter(self, args, kwargs):
        """The top of a forward."""
        if not self.torch.is_grad_enabled():
            self.boundary("eval")
            return
        if self.t_step is None:
            self.start_step()
        if self.phase == "loss":
            # another top-level module before backward (a loss module, a
            # second model): the same micro-batch's forward goes on
            self.boundary("forward")
        else:
            self.boundary("forward")
            self.micro += 1
            self.count_tokens(args, kwargs)
            if self.micro > 64 and self.sampled:
                # forwards with grad and no optimizer step (inference
                # without no_grad): stop sampling this long "step"
                self.sampled = False
                self.saved_hooks(False)
                self.remove_global()
        if self.sampled and not self.compiled:
            self.saved_hooks(True)

    def leave(self):
        self.want_tokens = False
        if self.phase == "eval":
            self.boundary("idle")
            return
        if self.phase != "forward":
            return
        # saved-tensor hooks stay on until backward: a loss computed outside
        # the model saves tensors too
        self.boundary("loss")

    def start_step(self):
        self.t_step = _now()
        self.sampled = self.sampled_next()
        self.micro = self.tokens = self.samples = 0
        self.step_peak = (0, 0, "")
        self.module_bytes = {}
        self.saved_keys = set()
        self.cast_leaves = set()  # weights whose autocast copy is counted this step
        self.ckpt_casts = 0       # bytes of those copies seen only through the graph
        if self.sampled:
            self.add_global()
        else:
            self.remove_global()

    def first_ids(self, values):
        """The first integer tensor among values (token ids), or None."""
        T = self.torch.Tensor
        for a in values:
            if isinstance(a, T) and not a.is_floating_point() and a.dim() >= 1:
                return a
        return None

    def count(self, ids):
        """Add a batch of token ids (batch x sequence) to the step."""
        self.tokens += ids.numel()
        self.samples += ids.shape[0]

    def count_tokens(self, args, kwargs):
        values = list(args) + list(kwargs.values() if kwargs else [])
        ids = kwargs.get("input_ids") if kwargs else None
        if not isinstance(ids, self.torch.Tensor):
            ids = self.first_ids(values)
        if ids is not None and ids.dim() >= 2:
            self.count(ids)
            return
        for a in values:
            if isinstance(a, self.torch.Tensor) and a.dim() >= 1:
                self.samples += a.shape[0]
                return
        # called with keyword arguments only and torch < 2.0 or the first
        # call (no keywords seen): the first module given token ids says
        self.want_tokens = self.global_handles != []

    def tokens_from_embedding(self, args):
        ids = self.first_ids(args)
        if ids is not None and ids.dim() >= 2:
            self.count(ids)
            self.want_tokens = False

    @_timed
    def before_backward(self):
        if self.phase in ("forward", "loss", "idle", "pre_step"):
            self.saved_hooks(False)
            if self.t_step is None:
                self.start_step()
            self.boundary("backward")

    @_timed
    def after_backward(self):
        if self.phase == "backward":
            self.boundary("pre_step")

    @_timed
    def before_step(self, opt):
        self.optimizers.add(opt)
        if self.t_step is None:
            self.start_step()
        if self.phase != "optimizer":
            self.boundary("optimizer")

    @_timed
    def before_closure(self, opt):
        """optimizer.step(closure): the step has begun; its forward and
        backward come from the closure."""
        self.optimizers.add(opt)
        if self.t_step is None:
            self.start_step()

    @_timed
    def after_closure(self):
        """The closure returned: what the step does now is the update."""
        if self.t_step is not None and self.phase != "optimizer":
            self.saved_hooks(False)
            self.boundary("optimizer")

    def after_step(self, opt):
        """The step's end. Timed by hand, not by @_timed: its own cost (up
        to writing the event) belongs to this step's probe_ns, not the
        next one's."""
        if self.phase != "optimizer":
            return
        t_enter = time.perf_counter_ns()
        self.saved_hooks(False)
        self.boundary("idle")
        t = _now()
        peak_a, peak_r, peak_phase = self.step_peak
        ev = {"type": "step", "t_ns": t, "pid": os.getpid(), "rank": self.rank,
              "step": self.step, "time_ns": t - self.t_step, "tokens": self.tokens,
              "samples": self.samples, "micro_batches": self.micro,
              "sampled": self.sampled, "probe_ns": self.cost_ns}
        if self.sampled:
            if peak_phase:
                ev.update({"peak_allocated": peak_a, "peak_reserved": peak_r,
                           "peak_phase": peak_phase})
            if self.last_counters:
                c = self.last_counters
                ev.update({"allocated": c["allocated"], "reserved": c["reserved"]})
        else:
            # the step's phases as [name, t0, t1] and its peak since the
            # last step: the one allocator query of a step not sampled
            ev["phases"] = [list(x) for x in self.light]
            self.light = []
            c = self.counters()
            if c is not None:
                ev.update({"peak_allocated": c["peak_allocated"],
                           "peak_reserved": c["peak_reserved"], "allocated": c["allocated"],
                           "reserved": c["reserved"], "alloc_retries": c["alloc_retries"],
                           "ooms": c["ooms"]})
        if self.sampled and self.module_bytes:
            top = sorted(self.module_bytes.items(), key=lambda kv: -kv[1])[:10]
            ev["modules"] = [{"name": k, "saved_bytes": v} for k, v in top]
        ev["probe_ns"] = self.cost_ns + time.perf_counter_ns() - t_enter
        self.w.put(ev)
        self.cost_ns = 0
        self.step += 1
        self.t_step = None
        if not self.sampled_next():
            self.remove_global()

    def sampled_next(self):
        """Is step self.step (the current one, or the next between steps)
        sampled: the first three and every `every`-th."""
        return self.step <= 3 or self.step % self.every == 0


def _rank():
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _guarded(probe, where, f, *a):
    """Call the probe's f(*a) from a hook in the job's own path: nothing
    once the probe is dead, and an error of the probe's disables it
    (probe.fail) instead of reaching the job."""
    if probe.dead:
        return None
    try:
        return f(*a)
    except Exception as e:
        probe.fail(where, e)
        return None


def _install_backward(torch, probe):
    ag = torch.autograd
    orig = ag.backward
    if getattr(orig, "__vramledger__", False):
        return

    def backward(*a, **k):
        _guarded(probe, "backward", probe.before_backward)
        probe.in_backward = True
        try:
            r = orig(*a, **k)
        finally:
            probe.in_backward = False
        _guarded(probe, "backward", probe.after_backward)
        return r
    backward.__vramledger__ = True
    backward.__wrapped__ = orig
    backward.__doc__ = orig.__doc__
    ag.backward = backward


def _install_optimizer(torch, probe):
    import importlib
    o = importlib.import_module("torch.optim.optimizer")

    def pre(opt, args, kwargs):
        """Before optimizer.step. A step given a closure (Lightning's
        automatic optimisation, LBFGS) runs forward and backward inside
        it: the optimizer's phase starts when the closure returns, so the
        closure is handed on wrapped (returns what it returns)."""
        if probe.dead:
            return None
        try:
            closure = kwargs.get("closure") if kwargs else None
            positional = closure is None and len(args) > 0 and callable(args[0])
            if positional:
                closure = args[0]
            if closure is None:
                probe.before_step(opt)
                return None
            probe.before_closure(opt)

            def closure_then_step(*a, **k):
                r = closure(*a, **k)
                _guarded(probe, "optimizer closure", probe.after_closure)
                return r
            if positional:
                return (closure_then_step,) + tuple(args[1:]), kwargs
            kw = dict(kwargs)
            kw["closure"] = closure_then_step
            return args, kw
        except Exception as e:
            probe.fail("optimizer pre-hook", e)
            return None

    def post(opt, args, kwargs):
        _guarded(probe, "optimizer hook", probe.after_step, opt)
    if hasattr(o, "register_optimizer_step_pre_hook"):
        o.register_optimizer_step_pre_hook(pre)
        o.register_optimizer_step_post_hook(post)
        return
    # torch < 2.0: wrap each optimizer class's step once, when one is made
    Opt = torch.optim.Optimizer
    init = Opt.__init__

    def wrap(cls):
        step = cls.__dict__.get("step")
        if step is None or getattr(step, "__vramledger__", False):
            return
        import functools

        @functools.wraps(step)
        def wrapped(self, *a, **k):
            changed = pre(self, a, k)
            if changed is not None:
                a, k = changed
            r = step(self, *a, **k)
            post(self, a, k)
            return r
        wrapped.__vramledger__ = True
        cls.step = wrapped

    def __init__(self, *a, **k):
        init(self, *a, **k)
        try:
            for cls in type(self).__mro__:
                if "step" in cls.__dict__:
                    wrap(cls)
                    break
        except Exception as e:
            probe.fail("optimizer", e)
    Opt.__init__ = __init__


def _install_stats(torch, probe):
    """Keep the job's view of the allocator's peaks (see the module's doc)."""
    mem = torch.cuda.memory
    orig_stats = mem.memory_stats_as_nested_dict
    orig_reset = mem.reset_peak_memory_stats

    def memory_stats_as_nested_dict(device=None):
        st = orig_stats(device=device)
        try:
            if st and probe.held:
                dev = torch.cuda._utils._get_device_index(device, optional=True)
                st = probe.merged(dev, st)
        except Exception:
            pass
        return st

    def reset_peak_memory_stats(device=None):
        r = orig_reset(device=device)
        try:
            dev = torch.cuda._utils._get_device_index(device, optional=True)
            probe.held.pop(dev, None)
        except Exception:
            pass
        return r
    for f, o in ((memory_stats_as_nested_dict, orig_stats), (reset_peak_memory_stats, orig_reset)):
        f.__doc__ = o.__doc__
        f.__wrapped__ = o
    mem.memory_stats_as_nested_dict = memory_stats_as_nested_dict
    mem.reset_peak_memory_stats = reset_peak_memory_stats
    torch.cuda.memory_stats_as_nested_dict = memory_stats_as_nested_dict
    torch.cuda.reset_peak_memory_stats = reset_peak_memory_stats


def _install_saved_hooks_count(torch, probe):
    """Count the job's own saved_tensors_hooks contexts (checkpointing,
    save_on_cpu and user code all enter through this class)."""
    G = torch.autograd.graph.saved_tensors_hooks
    enter, leave = G.__enter__, G.__exit__
    if getattr(enter, "__vramledger__", False):
        return

    def __enter__(self):
        r = enter(self)
        probe.user_hooks += 1
        return r

    def __exit__(self, *a):
        r = leave(self, *a)
        probe.user_hooks = max(0, probe.user_hooks - 1)
        if probe.user_hooks == 0 and probe.sampled and probe.phase in ("forward", "loss") \
                and not probe.compiled and not probe.dead:
            probe.saved_hooks(True)  # the rest of the forward and the loss
        return r
    __enter__.__vramledger__ = True
    G.__enter__, G.__exit__ = __enter__, __exit__


def _install_checkpoint(torch, probe):
    """torch.utils.checkpoint keeps each checkpointed call's inputs until
    its backward (to recompute from them): activations nobody's saved-tensor
    hook sees. Count them, on sampled steps, as the inputs' storages (a
    weak reference to each input tensor, which the checkpoint holds).
    transformers binds the function when it enables checkpointing, after
    this, so it binds this one."""
    try:
        import torch.utils.checkpoint as cp
    except Exception:
        return
    orig = getattr(cp, "checkpoint", None)
    if orig is None or getattr(orig, "__vramledger__", False):
        return

    def checkpoint(function, *args, **kwargs):
        forward = False
        try:
            # called before the forward it wraps: between steps, the step
            # about to start decides
            sampled = probe.sampled if probe.t_step is not None else probe.sampled_next()
            forward = sampled and not probe.dead and not probe.in_backward
            if forward:
                probe.keep_checkpoint_inputs(args)
        except Exception as e:
            probe.fail("checkpoint", e)
        out = orig(function, *args, **kwargs)
        if forward:
            _guarded(probe, "checkpoint casts", probe.note_checkpoint_casts, out, args)
        return out
    import functools
    functools.update_wrapper(checkpoint, orig)
    checkpoint.__vramledger__ = True
    cp.checkpoint = checkpoint


def install(torch=None, record=None):
    """Attach the probe (once per process). Returns it, or None when there
    is no record to write to or VRAMLEDGER_PROBE=0."""
    global _state
    if _state is not None:
        return _state
    if os.environ.get("VRAMLEDGER_PROBE", "1") == "0":
        return None
    path = record or os.environ.get("VRAMLEDGER_RECORD")
    if not path:
        return None
    if torch is None:
        import torch
    try:
        every = int(os.environ.get("VRAMLEDGER_PROBE_EVERY", "100"))
    except ValueError:
        every = 100
    try:
        w = _Writer(path, create=bool(record))
    except OSError as ex:  # never into the job: say it, and run on without the probe
        sys.stderr.write("vramledger: the probe cannot write the record '%s': %s; the job runs "
                         "without it\n" % (path, ex.strerror or ex))
        return None
    p = _Probe(torch, w, every)
    from . import tracer
    p.tracer = tracer._tracer
    if p.tracer is not None:
        p.tracer.probe = p  # the module running, for each allocation
    _install_optimizer(torch, p)
    if hasattr(torch, "cuda") and hasattr(torch.cuda, "memory"):
        _install_stats(torch, p)
    _install_backward(torch, p)
    _install_saved_hooks_count(torch, p)
    _install_checkpoint(torch, p)
    if p.snapshot:
        try:
            torch.cuda.memory._record_memory_history(max_entries=100000)
        except Exception:
            pass
    p.add_global()
    p.w.put({"type": "probe", "t_ns": _now(), "pid": os.getpid(), "version": _SCHEMA_PROBE,
             "torch": torch.__version__, "python": sys.version.split()[0],
             "cuda": bool(torch.cuda.is_available()), "rank": _rank(),
             "local_rank": int(os.environ.get("LOCAL_RANK", "0") or 0),
             "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
             "sample_every": p.every})
    _state = p
    return p


def attach(model=None, optimizer=None, record=None):
    """Name the model and the optimizer explicitly (the probe otherwise
    finds them at the first forward and the first step)."""
    p = install(record=record)
    if p is None:
        return None
    if model is not None:
        p.models.add(model)
        if id(model) not in p.root_ids:
            p.add_root(model)
    if optimizer is not None:
        p.optimizers.add(optimizer)
    return p


def write(obj):
    """Append an event to the record (used by mark() without the interposer)."""
    p = _state
    if p is not None and not p.dead:
        try:
            p.w.put(obj)
            return True
        except Exception:
            pass
    return False
