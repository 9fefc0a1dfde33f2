"""vramledger.dry_run: the GPU memory of your own training step, from a run
on the CPU or on meta tensors, inside your Python.

    d = vramledger.dry_run(step, steps=2, gpu="h100-80gb")   # step(i), i < steps
    with vramledger.dry_run(gpu="h100-80gb") as d:           # or any code
        ...
    d.peak_allocated_bytes, d.peak_reserved_bytes, d.fits("l4")

The code runs under the tracer of `vramledger trace` (tracer.py: every
storage an ATen op makes, with CUDA's paths where the CPU's spend memory
differently), for as long as it runs and no longer: then the tracer is
uninstalled (its dispatch mode exited, its patches undone) and its trace is
replayed by the vramledger program, `vramledger trace --replay FILE
--format json`, through the model of PyTorch's CUDA caching allocator
(docs/cmd/trace.md, docs/model.md section 12). Nothing here computes a
number: each comes from the program's JSON, the same as `vramledger trace
--replay` prints for the same trace. docs/python.md is the manual.

A job that failed is no answer: when the code raises, the exception goes on
to the caller after tracing has stopped, the trace is removed and there is
no result."""
import json
import os
import shutil
import subprocess
import tempfile
import weakref

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # the source tree, when run from it
_BUILD_DIRS = ("build", "build-release", "build-rel")
_GIB = float(1 << 30)
_active = [None]  # the dry run tracing this process now
_card_bytes_cache = {}  # (program, card name) -> the catalog's memory_bytes


def find_program():
    """The vramledger program: $VRAMLEDGER_BIN, else `vramledger` on PATH,
    else a build of the source tree this package lies in (build/,
    build-release/, build-rel/). Raises RuntimeError naming what was tried."""
    env = os.environ.get("VRAMLEDGER_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise RuntimeError("vramledger.dry_run: VRAMLEDGER_BIN='%s' is not an executable file: "
                           "set it to the vramledger program (build/vramledger after "
                           "cmake --build build)" % env)
    on_path = shutil.which("vramledger")
    if on_path:
        return on_path
    tried = [os.path.join(_ROOT, d, "vramledger") for d in _BUILD_DIRS]
    for p in tried:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise RuntimeError("vramledger.dry_run: cannot find the vramledger program (tried "
                       "$VRAMLEDGER_BIN, unset; vramledger on PATH; %s): build it (cmake -S . -B "
                       "build && cmake --build build), put it on PATH, or set VRAMLEDGER_BIN to "
                       "its path" % ", ".join("'%s'" % p for p in tried))


def _call(program, args):
    """Run the program; its stdout parsed as JSON and its exit status.
    Raises RuntimeError with the program's own message when it printed no
    JSON (a usage error, an unknown card, a trace with no allocation)."""
    p = subprocess.run([program] + args, capture_output=True, text=True)
    try:
        return json.loads(p.stdout), p.returncode
    except ValueError:
        msg = p.stderr.strip() or "exited with status %d and printed nothing" % p.returncode
        raise RuntimeError("vramledger.dry_run: %s %s: %s"
                           % (os.path.basename(program), " ".join(args), msg)) from None


def card_bytes(name, program=None):
    """The memory of the catalog's card NAME (an alias too, any case), in
    bytes, as the vramledger program reads its catalog (data/gpus.json).
    Raises ValueError for a card the catalog does not know."""
    program = program or find_program()
    key = (program, name.lower())
    if key not in _card_bytes_cache:
        # the program prints a card's memory only beside an estimate: a
        # small one (GPT-2 at 128 tokens) carries it
        p = subprocess.run([program, "estimate", "--model", "gpt2", "--seq", "128", "--batch", "1",
                            "--gpu", name, "--format", "json"], capture_output=True, text=True)
        try:
            _card_bytes_cache[key] = int(json.loads(p.stdout)["gpu"]["memory_bytes"])
        except (ValueError, KeyError, TypeError):
            raise ValueError("vramledger: %s" % (p.stderr.strip().replace("vramledger: ", "")
                                                 or "cannot read the card '%s'" % name)) from None
    return _card_bytes_cache[key]


def _allocator_flags(conf):
    """PYTORCH_CUDA_ALLOC_CONF's settings the replay models, as `trace`'s
    options; "what-if" for its four settings side by side."""
    if conf is None:
        return []
    if not isinstance(conf, str):
        raise TypeError("allocator= takes a PYTORCH_CUDA_ALLOC_CONF string "
                        "('expandable_segments:True,max_split_size_mb:128') or 'what-if'")
    if conf.strip() == "what-if":
        return ["--what-if"]
    flags = []
    for item in filter(None, (s.strip() for s in conf.split(","))):
        key, _, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if key == "expandable_segments":
            if value.lower() not in ("true", "false"):
                raise ValueError("allocator=: expandable_segments takes True or False, not '%s'"
                                 % value)
            if value.lower() == "true":
                flags.append("--expandable")
        elif key == "max_split_size_mb":
            flags += ["--max-split-mb", value]
        elif key == "garbage_collection_threshold":
            flags += ["--gc-threshold", value]
        else:
            raise ValueError("allocator=: '%s' is not modelled by the replay (it models "
                             "expandable_segments, max_split_size_mb and "
                             "garbage_collection_threshold; docs/model.md section 12)" % key)
    return flags


def _batch_flags(batch):
    if batch is None:
        return [], ()
    sizes = (batch,) if isinstance(batch, int) else tuple(batch)
    if not sizes or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1
                            for b in sizes):
        raise ValueError("batch= takes a micro-batch size or a list of them (positive integers), "
                         "not %r" % (batch,))
    return ["--batch", ",".join(str(b) for b in sizes)], sizes


class _Modules:
    """What the probe tells the tracer under `vramledger trace`, for a dry
    run without the probe: the module running, for each allocation
    (tracer._Trace.alloc reads .stack), and the micro-batch (.micro,
    .samples; the top-level model in .roots, whose parameters' shapes do
    not grow with it: _Trace.learn_batch). From two global forward hooks:
    the first top-level forward's token ids (an integer tensor of two
    dimensions or more, there or at the first module given one, such as an
    embedding) or else its first tensor argument give the batch, its
    leading dimension, as the probe takes it."""

    def __init__(self, torch, tr):
        import torch.nn.modules.module as mm
        self.torch, self.tr = torch, tr
        self.stack, self.names = [], {}
        self.roots, self.models, self.optimizers = weakref.WeakSet(), (), ()
        self.micro = self.samples = 0
        self.handles = [mm.register_module_forward_pre_hook(self.pre),
                        mm.register_module_forward_hook(self.post)]

    def pre(self, module, args):
        T = self.torch.Tensor
        top = not self.stack and not self.tr.in_backward()
        if top and id(module) not in self.names:
            self.roots.add(module)
            for name, m in module.named_modules():
                self.names.setdefault(id(m), name or type(module).__name__)
        if not self.micro and (top or self.roots):
            for a in args:
                if isinstance(a, T) and a.dim() >= 2 and not a.is_floating_point():
                    self.micro, self.samples = 1, a.shape[0]  # token ids
                    break
            else:
                if top:
                    for a in args:
                        if isinstance(a, T) and a.dim() >= 1 and a.is_floating_point():
                            self.micro, self.samples = 1, a.shape[0]
                            break
        self.stack.append(self.names.get(id(module), type(module).__name__))

    def post(self, module, args, out):
        if self.stack:
            self.stack.pop()

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


class DryRun:
    """A dry run: a context manager while it traces, then its result.

    After the run (the `with` block left, or dry_run(step) returned):
      peak_allocated_bytes  the replay's peak allocated (as
                            torch.cuda.max_memory_allocated() would say)
      peak_reserved_bytes   its peak reserved (max_memory_reserved())
      peak_mark             the last mark before the peak ('step 1', or
                            vramledger.mark's), None if none
      peak_at               the source line that asked for the allocation
                            at the peak (FILE:LINE), peak_module the module
                            running then, peak_dtype its dtype
      complete              the trace was whole (False only for a trace
                            whose last line was cut)
      device                the allocations replayed: cuda, meta, or all
                            (a CPU dry run stands for the GPU's)
      batch                 the micro-batch the trace learnt (None if not)
      convolutions          the convolutions the job ran (forward and
                            backward); caveats, what the replay cannot hold
                            because of them (on CUDA, cuDNN's workspaces:
                            peak reserved can be higher)
      batches               {B: replay} for each batch= size, replayed as
                            the job at that micro-batch would allocate
      gpu, oom              the card of gpu= and whether the replay ran out
                            of its memory (oom is None without gpu=)
      replays               every replay, as the program's JSON has them
      report                the program's whole JSON
      trace                 the trace file, when trace= kept it (else None)
    Each replay is a dict: allocator, batch, peak_allocated_bytes,
    peak_reserved_bytes, inactive_split_at_peak_bytes, segments_created,
    alloc_retries, oom, oom_event (docs/cmd/trace.md). Bytes throughout."""

    def __init__(self, gpu=None, batch=None, allocator=None, trace=None):
        if gpu is not None and not isinstance(gpu, str):
            raise TypeError("gpu= takes a card of the catalog by name ('h100-80gb'); for a "
                            "budget in bytes ask fits(BYTES) afterwards")
        self.gpu = gpu
        self._flags = _allocator_flags(allocator)
        bflags, self._batch_sizes = _batch_flags(batch)
        self._flags += bflags
        self._keep = os.path.abspath(trace) if trace is not None else None
        self._state = "new"
        self._program = None
        self._dir = None
        self._path = None
        self._modules = None
        self._reserved_unbounded = None
        self._allocations = self._traced_batch = None
        self.report = None
        self.replays = []
        self.batches = {}
        self.peak_allocated_bytes = self.peak_reserved_bytes = None
        self.peak_mark = self.peak_at = self.peak_module = self.peak_dtype = None
        self.complete = self.device = self.batch = self.oom = self.trace = None
        self.convolutions, self.caveats = 0, []

    # ---- tracing ---------------------------------------------------------------
    def __enter__(self):
        if self._state != "new":
            raise RuntimeError("vramledger.dry_run: this dry run has run already; start another "
                               "with vramledger.dry_run()")
        from . import tracer
        if os.environ.get("VRAMLEDGER_TRACE") or (tracer._tracer is not None
                                                  and _active[0] is None):
            raise RuntimeError("vramledger.dry_run: this process runs under `vramledger trace`, "
                               "which traces all of it already: call the step directly, or run "
                               "the script without `vramledger trace`")
        if _active[0] is not None:
            raise RuntimeError("vramledger.dry_run: a dry run is tracing this process already; "
                               "dry runs do not nest: leave the first one before the next")
        self._program = find_program()  # before the job runs: no job is lost for want of it
        if self.gpu is not None:
            card_bytes(self.gpu, self._program)  # an unknown card, said now
        if self._keep is not None:
            if os.path.exists(self._keep):
                raise FileExistsError("vramledger.dry_run: trace='%s' exists: name a new file, "
                                      "or remove it" % self._keep)
            self._path = self._keep
        else:
            self._dir = tempfile.mkdtemp(prefix="vramledger-dry-run-")
            self._path = os.path.join(self._dir, "alloc.trace")
        try:
            import torch
            tr = tracer.install(torch, self._path)
        except BaseException:
            self._discard()
            raise
        _active[0] = self
        self._state = "tracing"
        try:
            self._modules = _Modules(torch, tr)
            tr.probe = self._modules
        except Exception:
            self._stop()
            self._discard()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self._stop()
        except Exception:
            self._discard()
            raise
        if exc_type is not None:
            self._discard()  # a job that failed is no answer
            return False
        try:
            self._replay()
        finally:
            if self._keep is None:
                self._discard()
        return False

    def _stop(self):
        """Tracing off: the hooks removed, the tracer uninstalled."""
        from . import tracer
        if self._modules is not None:
            self._modules.remove()
            self._modules = None
        if self._state == "tracing":
            try:
                tr = tracer.uninstall()
                self._allocations, self._traced_batch = tr.next_id - 1, tr.batch
            finally:
                _active[0] = None
                self._state = "stopped"

    def _discard(self):
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        elif self._path is not None and os.path.exists(self._path):
            os.remove(self._path)
        self._path = None

    # ---- the replay ------------------------------------------------------------
    def _replay(self):
        if not self._allocations:
            raise RuntimeError("vramledger.dry_run: the code made no tensor (no allocation through "
                               "PyTorch's ops was traced): nothing to replay")
        if self._batch_sizes and not self._traced_batch:
            raise RuntimeError("vramledger.dry_run: batch=: the trace did not learn the job's "
                               "micro-batch, so it cannot be replayed at others: it takes the "
                               "first top-level module's token ids or first input, of a batch "
                               "of 2 or more")
        args = ["trace", "--replay", self._path, "--format", "json"] + self._flags
        if self.gpu is not None:
            report, rc = _call(self._program, args + ["--gpu", self.gpu])
            unbounded, _ = _call(self._program, args)
        else:
            report, rc = _call(self._program, args)
            unbounded = report
        if rc not in (0, 3):  # 3: out of the card's memory, a result
            raise RuntimeError("vramledger.dry_run: vramledger trace --replay exited with status %d"
                               % rc)
        self.report = report
        self.replays = report["replays"]
        first = self.replays[0]
        self.peak_allocated_bytes = first["peak_allocated_bytes"]
        self.peak_reserved_bytes = first["peak_reserved_bytes"]
        self._reserved_unbounded = unbounded["replays"][0]["peak_reserved_bytes"]
        for k in ("peak_mark", "peak_at", "peak_module", "peak_dtype", "complete", "device",
                  "batch"):
            setattr(self, k, report.get(k))
        self.convolutions = report.get("convolutions", 0)
        self.caveats = list(report.get("caveats", []))
        live = report.get("live_at_peak") or {}
        # what is live at the peak, by the step's phase that made it (mark:
        # bytes; None: before the first mark, the parameters) and by module
        self.live_by_mark = {g["mark"]: g["bytes"] for g in live.get("by_mark", [])}
        self.live_by_module = {g["module"]: g["bytes"] for g in live.get("by_module", [])}
        if self.gpu is not None:
            self.oom = bool(first["oom"])
        n = len(self.replays) - len(self._batch_sizes)
        self.batches = {r["batch"]: r for r in self.replays[n:]}
        self.trace = self._keep
        self._state = "done"

    # ---- the answer ------------------------------------------------------------
    def fits(self, gpu, margin=0.10):
        """Does the job fit GPU (a catalog card's name, or a budget in
        bytes) with MARGIN of it kept free? True when the peak reserved of
        the replay with no card limit is at most (1 - MARGIN) x the card's
        memory (docs/model.md section 10's rule, with the replayed peak
        reserved for the bill's total): the margin stands for what the
        replay does not hold, the CUDA context (about 0.75 GiB,
        docs/model.md section 9) and what the tracer does not see
        (docs/cmd/trace.md). A card's memory is the catalog's, read by the
        vramledger program. Raises ValueError for a card the catalog does
        not know."""
        if self._state != "done":
            raise RuntimeError("vramledger.dry_run: no result yet: fits() answers after the dry "
                               "run (the with block left)")
        if not 0 <= margin < 1:
            raise ValueError("margin= is a fraction of the card kept free, from 0 to below 1, "
                             "not %r" % (margin,))
        if isinstance(gpu, bool) or not isinstance(gpu, (int, str)):
            raise TypeError("fits() takes a card's name ('h100-80gb') or a budget in bytes")
        capacity = card_bytes(gpu, self._program) if isinstance(gpu, str) else gpu
        return self._reserved_unbounded <= capacity * (1.0 - margin)

    def __repr__(self):
        if self._state != "done":
            return "<vramledger.dry_run: %s>" % ("tracing" if self._state == "tracing" else
                                                 "no result (not run, or the code raised)")
        s = "<vramledger.dry_run: peak allocated %.3f GiB, peak reserved %.3f GiB" % (
            self.peak_allocated_bytes / _GIB, self.peak_reserved_bytes / _GIB)
        where = [x for x in (self.peak_at, self.peak_mark and "in '%s'" % self.peak_mark,
                             self.peak_module and "module %s" % self.peak_module) if x]
        if where:
            s += " (the peak: %s)" % ", ".join(where)
        if self.gpu is not None:
            s += "; on %s: %s" % (self.gpu, "out of memory" if self.oom else "no out of memory")
        for b, r in sorted(self.batches.items()):
            s += "; at batch %d: %.3f GiB allocated, %.3f GiB reserved" % (
                b, r["peak_allocated_bytes"] / _GIB, r["peak_reserved_bytes"] / _GIB)
        if not self.complete:
            s += "; of the part that ran (the trace is incomplete)"
        return s + ">"


def dry_run(step=None, *, steps=2, gpu=None, batch=None, allocator=None, trace=None):
    """Trace the allocations of STEP(i) for i in range(STEPS) (or, with no
    STEP, of the `with` block: `with dry_run(...) as d:`) and replay them as
    PyTorch's CUDA caching allocator would hold them. Returns the DryRun
    (with STEP: done; else the context manager, done when left).

    gpu        a catalog card's name: the replay under its memory (oom)
    batch      a micro-batch size or a list: replays as the job at those
               (the trace learns its own from the first forward's input)
    allocator  PYTORCH_CUDA_ALLOC_CONF's settings the replay models
               ('expandable_segments:True', 'max_split_size_mb:128',
               'garbage_collection_threshold:0.6', comma-separated), or
               'what-if' for four settings side by side; None: the defaults
    trace      keep the trace in this (new) file, for `vramledger trace
               --replay` (default: a temporary file, removed)

    Each step is marked in the trace ('step 0', 'step 1', ...). An exception
    of STEP goes on to the caller, with tracing stopped and the trace
    removed. Raises RuntimeError when the vramledger program is not found,
    when a dry run is tracing already (they do not nest) and under
    `vramledger trace` (which traces the process already)."""
    d = DryRun(gpu=gpu, batch=batch, allocator=allocator, trace=trace)
    if step is None:
        if steps != 2:
            raise TypeError("dry_run(steps=) counts the calls of a step function: pass one, "
                            "dry_run(step, steps=%r)" % (steps,))
        return d
    if not callable(step):
        raise TypeError("dry_run(step): step is called as step(i), not %r" % (step,))
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError("steps= is how many times step(i) runs, 1 or more, not %r" % (steps,))
    from . import tracer
    with d:
        for i in range(steps):
            tracer.mark("step %d" % i)
            step(i)
    return d
