"""The framework layer of a run record: the PyTorch probe.

Attached by sitecustomize (python/site) as soon as the job imports torch, or
by vramledger.attach(). It writes, into the record of `vramledger run`
(JSON Lines in the process's own stream of the record, VRAMLEDGER_STREAMS/
probe.PID.jsonl, one os.write per line, CLOCK_MONOTONIC nanoseconds like
every other writer; docs/record.md):

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
leaves a note; a write the disk refuses is a gap in the record instead,
_Writer), never allocates on the GPU, never initialises CUDA, and keeps
torch.cuda.max_memory_allocated() and friends as the job would see them
without it (it resets the allocator's peaks at phase boundaries, so it
remembers and merges them back into memory_stats()).
"""
import errno
import json
import os
import signal
import sys
import time
import weakref

from .probe_bill import _Bill
from .probe_common import _inner, _local, _now, _rank, _storage, _timed
from .probe_memory import _Memory
from .probe_modules import _ModuleHooks
from .probe_patches import (_install_backward, _install_checkpoint, _install_optimizer,
                            _install_saved_hooks_count, _install_stats)

# the public calls, and the parts tests reach (tests/python/test_probe.py)
__all__ = ["attach", "install", "write", "_Probe", "_inner", "_local", "_storage"]
_SCHEMA_PROBE = 1
_state = None


class _Writer:
    """The process's events, appended to a file only it writes; each one
    also goes to the listeners (vramledger.callbacks: the trainers'
    callbacks), in this process.

    Under `vramledger run` that file is the process's stream of the record,
    VRAMLEDGER_STREAMS/probe.PID.jsonl (docs/record.md, "Streams"); outside
    run (attach(record=PATH)) it is PATH itself for the process that starts
    the record (it writes the meta line and, at exit, the exit line), and
    the PATH's stream for any other. No other process writes the file, so
    no other writer can cut the probe's lines, nor the probe theirs.

    A write that fails (ENOSPC, EDQUOT, EFBIG past `ulimit -f`) or goes
    out short never raises into the job and never stops the probe: the
    record's gap protocol (docs/record.md, "gap"; the C writers,
    lib/measure/sampler.c put_line() and preload/preload.c write_line()).
    A line not written whole is lost whole and counted; the first loss is
    said once on stderr; the next write that goes out begins with a
    newline when part of a line went out (the cut line stands alone),
    then the gap line with the bytes and events lost since the last one,
    their time range and the last write's error."""

    def __init__(self, path, create=False, stream=False):
        """create: start the record at path (its meta line) when it is
        empty; stream: the process's own stream at path, made new or
        appended to (the same PID before an exec)."""
        flags = os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT if create or stream else 0)
        self.path = path
        self.owner = False  # this process started the record: its exit line is ours
        # read too where the file lets us: a stream that ends inside a line
        # (an earlier process of this PID cut by a full disk) is closed first
        try:
            fd = os.open(path, flags | os.O_RDWR | (os.O_NOFOLLOW if stream else 0), 0o600)
            readable = True
        except PermissionError:
            fd = os.open(path, flags | os.O_WRONLY | (os.O_NOFOLLOW if stream else 0), 0o600)
            readable = False
        self.fd = fd
        self.pid = os.getpid()
        self.listeners = []
        self.lost_bytes = self.lost_events = 0  # not written whole, over the process's life
        self.gap_bytes = self.gap_events = 0  # of those, since the last gap line
        self.gap_t0 = 0  # the first of those lost (CLOCK_MONOTONIC ns)
        self.err = 0  # the last failed write's errno
        self.cut = False  # the file ends inside a line: closed before the next line
        self.said = False  # the first loss said on stderr
        self.xfsz = _xfsz_kills()
        size = os.fstat(fd).st_size
        if stream and readable and size and os.pread(fd, 1, size - 1) != b"\n":
            self.cut = True
        if create and not stream and size == 0:  # attach(record=...) outside `vramledger run`
            meta = (json.dumps(_meta_outside_run(), separators=(",", ":")) + "\n").encode()
            done, err = self.write_some(meta)
            if done != len(meta):  # a record without its meta line is none: start none
                if done and os.fstat(fd).st_size == done:  # what it holds is our cut meta alone
                    os.ftruncate(fd, 0)
                os.close(fd)
                raise OSError(err, os.strerror(err), path)
            self.owner = True

    def put(self, obj):
        if os.getpid() != self.pid:  # a forked worker: not ours to report
            return
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        if self.gap_bytes or self.cut:
            self.put_after_gap(line)
        else:  # the common case: one write(), whole, the rest of a short one after it
            done, err = self.write_some(line)
            if done != len(line):
                self.lose(line, done, err)
        for f in self.listeners:  # every event, written or not
            try:
                f(obj)
            except Exception as ex:  # noqa: BLE001 - a listener never breaks the job
                sys.stderr.write("vramledger: a probe listener failed: %r\n" % (ex,))

    def write_some(self, buf, done=0):
        """Write buf from done on, as sampler.c's write_some() (the rest
        from the same memory, no copy): @return (the bytes of buf that went
        out, the errno that stopped it or 0)."""
        view = memoryview(buf)
        while done < len(buf):
            try:
                w = self.write1(view[done:] if done else buf)
            except OSError as ex:
                return done, ex.errno or errno.EIO
            if w <= 0:
                return done, errno.EIO
            done += w
        return done, 0

    def write1(self, buf):
        """One os.write(); where a write past `ulimit -f` would kill the
        job (SIGXFSZ not ignored: _xfsz_kills()), with SIGXFSZ blocked in
        this thread across it and taken back when the write raised it,
        as preload.c's write_line() does (one the job had pending is
        left). The process's disposition is never changed."""
        if not self.xfsz:
            return os.write(self.fd, buf)
        xfsz = {signal.SIGXFSZ}
        keep = signal.pthread_sigmask(signal.SIG_BLOCK, xfsz)
        try:
            had = signal.SIGXFSZ in signal.sigpending()
            try:
                return os.write(self.fd, buf)
            except OSError as ex:
                if ex.errno == errno.EFBIG and not had:
                    signal.sigtimedwait(xfsz, 0)
                raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, keep)

    def lose(self, line, done, err):
        """The line did not go out whole (done bytes of it did): lost
        whole, counted for the next gap line; the first loss said."""
        if done:
            self.cut = True
        if not self.gap_bytes:
            self.gap_t0 = _now()
        self.err = err or errno.EIO
        self.lost_bytes += len(line)
        self.lost_events += 1
        self.gap_bytes += len(line)
        self.gap_events += 1
        if not self.said:
            self.said = True
            try:
                sys.stderr.write("vramledger: error: the probe cannot write '%s': %s; the job "
                                 "runs on, the events lost are counted and a 'gap' line marks "
                                 "them once the record has room: %s\n"
                                 % (self.path, os.strerror(self.err), _fix(self.err)))
            except (OSError, ValueError):  # stderr closed or full too
                pass

    def put_after_gap(self, line):
        """A write after a loss (or on a stream found cut): the gap line
        first, as sampler.c's put_line()."""
        if not self.put_gap():
            self.lose(line, 0, self.err)
            return
        done, err = self.write_some(line)
        if done != len(line):
            self.lose(line, done, err)

    def put_gap(self):
        """The gap line owed, after a newline when the file ends inside a
        line. @return whether it went out whole."""
        if self.gap_bytes:
            gap = {"type": "gap", "t_ns": _now(), "lost_bytes": self.gap_bytes,
                   "error": os.strerror(self.err), "lost_events": self.gap_events,
                   "t0_ns": self.gap_t0, "pid": self.pid, "writer": "probe"}
        else:  # a stream found ending inside a line: closed, over nothing of ours
            gap = {"type": "gap", "t_ns": _now(), "lost_bytes": 0,
                   "error": "a line cut by a failed write", "pid": self.pid, "writer": "probe"}
        buf = (("\n" if self.cut else "") + json.dumps(gap, separators=(",", ":")) + "\n").encode()
        done, err = self.write_some(buf)
        if done != len(buf):
            if done:
                self.cut = True
            self.err = err
            return False
        self.gap_bytes = self.gap_events = 0
        self.cut = False
        return True

    def close(self):
        """At exit: the gap line still owed, alone, if it gets in now;
        what was lost said on stderr, as `vramledger run` says its own."""
        if os.getpid() != self.pid or not self.lost_bytes:
            return
        if self.gap_bytes:
            self.put_gap()
        try:
            sys.stderr.write("vramledger: error: the probe could not write '%s': %s: %d events "
                             "(%d bytes) of the record lost (%s)\n"
                             % (self.path, os.strerror(self.err), self.lost_events,
                                self.lost_bytes,
                                "no 'gap' line got in" if self.gap_bytes else
                                "a 'gap' line marks where"))
        except (OSError, ValueError):
            pass


def _stream_path(record):
    """This process's stream of the record at `record` (docs/record.md,
    "Streams"): VRAMLEDGER_STREAMS/probe.PID.jsonl under `vramledger run`,
    else in the record's streams folder (the record's path without its
    .jsonl, and .d: vl_record_streams_dir), made 0700 when missing."""
    d = os.environ.get("VRAMLEDGER_STREAMS")
    if not d or os.environ.get("VRAMLEDGER_RECORD") != record:
        d = (record[:-6] if record.endswith(".jsonl") else record) + ".d"
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
    return os.path.join(d, "probe.%d.jsonl" % os.getpid())


def _open_writer(record, path):
    """The writer of this process: the record itself when attach(record=)
    starts it (outside run), else the process's own stream of it."""
    if record:
        w = _Writer(record, create=True)
        if w.owner:
            return w
        os.close(w.fd)  # another process's record: ours is a stream of it
    return _Writer(_stream_path(path), stream=True)


def _fix(err):
    """What to do about a write the record's disk refused."""
    if err == errno.EFBIG:
        return "raise the file size limit (ulimit -f) or write the record elsewhere"
    if err == errno.EDQUOT:
        return "free space or raise the disk quota, or write the record elsewhere"
    return "free space on its disk or write the record elsewhere"


def _xfsz_kills():
    """Would a write of ours past the file size limit (RLIMIT_FSIZE) kill
    the job with SIGXFSZ, instead of failing with EFBIG? Not without a
    limit, and not where SIGXFSZ is ignored: CPython ignores it at start
    (Python/pylifecycle.c, as SIGPIPE), unless embedded without its
    signal handlers or the job set it back. Asked once, when the probe
    attaches."""
    if not hasattr(signal, "SIGXFSZ") or not hasattr(signal, "pthread_sigmask"):
        return False
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft == resource.RLIM_INFINITY:
            return False
        return signal.getsignal(signal.SIGXFSZ) != signal.SIG_IGN
    except (ImportError, OSError, ValueError):
        return True


def _meta_outside_run():
    """The first line of a record the probe starts itself (attach(record=)
    outside `vramledger run`): what `vramledger report` needs to read it
    (docs/record.md); no NVML samples, no interposer."""
    import socket
    return {"type": "meta", "schema": "vramledger.run/2", "t_ns": _now(),
            "start_unix_ms": int(time.time() * 1000), "command": list(sys.argv) or ["python"],
            "host": socket.gethostname(), "interval_ms": 0,
            "nvml": "not sampled: the probe was attached by vramledger.attach() outside "
                    "vramledger run", "gpus": [], "writer": "probe"}


class _Probe(_Memory, _Bill, _ModuleHooks):
    """The probe's state and its phases and steps; the allocator side, the
    bill and the module hooks are its parts (probe_memory.py, probe_bill.py,
    probe_modules.py)."""

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
        # `run --snapshot[-at oom|peak|exit]`: "1" (at an out-of-memory),
        # "peak" (also at the end of each step that reaches a new peak) or
        # "exit" (also when the process exits)
        self.snapshot_at = os.environ.get("VRAMLEDGER_SNAPSHOT", "")
        self.snapshot = self.snapshot_at in ("1", "peak", "exit")
        self.snapshot_peak = 0
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
        except (OSError, TypeError, ValueError):  # the note cannot be written: the probe is off anyway
            pass

    # ---- the allocator ----------------------------------------------------

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
        if self.snapshot_at == "peak" and self.run_dir and \
                (ev.get("peak_allocated") or 0) > self.snapshot_peak:
            # the step that reached a new peak: its history holds the moment
            self.snapshot_peak = ev["peak_allocated"]
            self.dump_snapshot("peak", ev)
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
        w = _open_writer(record, path)
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
            try:
                torch.cuda.memory._record_memory_history(max_entries=100000)
            except TypeError:  # torch before 2.1: an on/off switch
                torch.cuda.memory._record_memory_history(True)
        except Exception:  # noqa: BLE001 - no CUDA (AssertionError on a CPU build), no history:
            pass  # the run goes on without it; what a dump could not do is said where it is tried
        if p.snapshot_at == "exit" and p.run_dir:
            import atexit
            atexit.register(_snapshot_at_exit, p)
    import atexit
    atexit.register(w.close)  # after the exit line (atexit runs last in, first out)
    if p.w.owner:
        _watch_exit(p)
    p.add_global()
    p.w.put({"type": "probe", "t_ns": _now(), "pid": os.getpid(), "version": _SCHEMA_PROBE,
             "torch": torch.__version__, "python": sys.version.split()[0],
             "cuda": bool(torch.cuda.is_available()), "rank": _rank(),
             "local_rank": int(os.environ.get("LOCAL_RANK", "0") or 0),
             "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
             "sample_every": p.every})
    _state = p
    return p


_exit_code = [None]  # what the process exits with, as far as Python knows


def _exit_status(code):
    """The status a shell sees for sys.exit(code) (Python's rules: None 0,
    an integer its low byte, anything else 1 after printing it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def _watch_exit(p):
    """A record the probe started has no `vramledger run` to write its exit
    line: at exit the probe writes one, with the status Python exits with
    as far as it can know it: sys.exit's code, 1 after an uncaught
    exception (130 for Ctrl-C), else 0. A process ended by a signal or
    os._exit writes none, and `report` says it was killed, as for `run`."""
    import atexit
    exit0, hook0 = sys.exit, sys.excepthook

    def exit(code=None):
        _exit_code[0] = _exit_status(code)
        exit0(code)

    def excepthook(kind, value, tb):
        if kind is SystemExit:
            _exit_code[0] = _exit_status(getattr(value, "code", None))
        else:
            _exit_code[0] = 130 if issubclass(kind, KeyboardInterrupt) else 1
        hook0(kind, value, tb)
    sys.exit, sys.excepthook = exit, excepthook
    atexit.register(_exit_line, p)


def _exit_line(p):
    if p.dead or os.getpid() != p.w.pid:
        return
    code = _exit_code[0]
    if code is None and hasattr(sys, "last_value"):  # an uncaught exception's hook was another's
        code = 130 if isinstance(sys.last_value, KeyboardInterrupt) else 1
    try:
        p.w.put({"type": "exit", "t_ns": _now(), "status": 0 if code is None else code,
                 "writer": "probe"})
    except (OSError, TypeError, ValueError):
        pass


def _snapshot_at_exit(p):
    """`run --snapshot-at exit`: the allocator and its history as the
    process ends, and a note in the record saying where (or why not)."""
    if p.dead:
        return
    ev = {"type": "note", "t_ns": _now(), "pid": os.getpid(), "text": "snapshot at exit"}
    p.dump_snapshot("exit", ev)
    try:
        p.w.put(ev)
    except (OSError, TypeError, ValueError):
        pass


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
        except (OSError, TypeError, ValueError):  # an unencodable event (a refused write is a gap)
            pass
    return False
