"""The allocation tracer behind `vramledger trace`.

Installed by sitecustomize when VRAMLEDGER_TRACE names a file, for the
rest of the process (or by vramledger.dry_run, which uninstall()s it when
the user's code is done): a TorchDispatchMode sees every ATen op of the
job (forward, backward, the optimizer), and every tensor it returns; a
storage's first appearance is an allocation, and its death its free. The
trace is text, one event a line, for the C replay:

    a ID BYTES DEVICE [MODULE] [dtype=T] [at=FILE:LINE]
                        a new storage of BYTES on DEVICE (cpu, cuda, meta),
                        made while MODULE ran (when the probe knows), of
                        dtype T, asked for at FILE:LINE (the innermost frame
                        outside torch and vramledger: a model's source line,
                        or the job's)
    f ID                that storage freed
    b ID BYTES DEVICE [MODULE]   the same, for a storage that grows with the
                        batch (below)
    m NAME              a mark (vramledger.mark, the probe's steps)
    # batch N           the job's micro-batch, once the probe has seen it
    # op ..., # optimizer ..., # step ...
                        the job's ops by step and phase, counted by shape, at
                        the end (optrace.py; `vramledger trace --gpu` prices
                        them; VRAMLEDGER_TRACE_OPS=0 leaves them out)

When a storage dies. From PyTorch 2.1 a storage's Python object lives as
long as the storage itself (PyObject preservation), so a weak reference to
it fires exactly when the memory goes back to the allocator, also for
storages that autograd keeps through tensors of its own (an op's saved
outputs). Before 2.1 the tracer watches the tensors it saw instead (a
tensor's Python object lives as long as C++ holds that tensor), which
frees a saved output too early.

What the ops do not show, and the tracer adds so that the trace stands for
the GPU run (docs/model.md, section 12):
- cuBLAS workspaces: PyTorch allocates one through the caching allocator
  for every thread and stream that runs a matmul (the forward's thread, and
  autograd's backward thread), never freed; written as an allocation
  (module `cublas_workspace`) at the first matmul of the forward and of the
  backward. Its size as PyTorch chooses it: CUBLAS_WORKSPACE_CONFIG
  (":KiB:COUNT" pairs), else the device's (32 MiB from compute capability
  9, 8.125 MiB before; aten/src/ATen/cuda/CublasHandlePool.cpp); a CPU dry
  run takes VRAMLEDGER_TRACE_WORKSPACE_BYTES, a thread's workspaces as the
  GPU catalog gives them, which `vramledger trace --gpu` sets (ROCm's
  hipBLAS and hipBLASLt workspaces are no capability's rule: 128 + 76 MiB
  on the MI300X), else VRAMLEDGER_TRACE_CAPABILITY's (default 9.0, the
  H100/H200/B200).
- The scratch of ATen's CUDA reductions: a sum, mean, norm or amax whose
  outputs' inputs are split over thread blocks takes two blocks from the
  caching allocator for the launch and frees them when it returns
  (Reduce.cuh; vramledger.cuda_reduce). Written after the result as an
  allocation and a free each (module `cuda_reduce`), sized for the device:
  a CUDA trace's own, else VRAMLEDGER_TRACE_SMS and
  VRAMLEDGER_TRACE_THREADS_PER_SM, which `vramledger trace` sets from its
  GPU catalog (the --gpu card's; without --gpu the H200's SM count and the
  threads per SM of VRAMLEDGER_TRACE_CAPABILITY); unset, the H200's
  (cuda_reduce.REFERENCE_SMS) and the capability's.
- Sums the untraced job makes in place. While a dispatch mode is active,
  ATen takes every tensor for a subclass (isTensorSubclassLike()), so
  autograd's second gradient of a tensor (InputBuffer::accumulate) and
  gather's backward run out of place, each in a block of its own. An
  engine's add or scatter_add whose first operand dies right after it is
  written as in place: the result goes on in the operand's block
  (_reused_operand, _Trace.in_place; bench/results/dry-run/raw.jsonl:reserved/).
- CUDA's paths, where they spend memory differently from the CPU's: a CPU
  dry run (VRAMLEDGER_TRACE_AS=cuda, the default) takes torch.optim's
  foreach default, the fused dropout kernel, SDPA without the math
  fallback for dropout, and CUDA autocast's float32 policy
  (_cpu_takes_cuda_defaults; measured in
  bench/results/trace/).

What grows with the batch (for `vramledger trace --batch`): once the probe
knows the micro-batch B (2 or more: the token ids' or the first input's
leading dimension at the top of the forward), a new storage whose tensor's
leading dimension is a multiple of B (batch x ..., batch*seq x ...,
batch*heads x ...) and whose shape is no parameter's (gradients, optimizer
states and their temporaries have those) is written as `b`. A batch that
divides the model's dimensions or the sequence length (2, 4, 8 with a
sequence of 512) also catches tensors that do not grow with it: trace
with an odd batch, 3 or 5.

Sizes are what the program asks for (storage nbytes); the replay rounds
them as the CUDA caching allocator would. Cost: a Python call per op; this
is a dry run, not a measurement of speed.
"""
import itertools
import os
import sys
import threading
import warnings
import weakref

from .probe_common import _WORD

_tracer = None
_mode = None  # install()'s dispatch mode, while it is entered
_undo = []  # (object, attribute, its value before) for each patch install() made
_MISSING = object()  # an attribute the object did not have of its own


def _patch(obj, name, value):
    """setattr, remembered for uninstall(); the value before is the
    object's own (a class's or module's __dict__), so that undoing a patch
    of an inherited method deletes it instead of copying the base's."""
    try:
        old = vars(obj).get(name, _MISSING)
    except TypeError:
        old = getattr(obj, name, _MISSING)
    _undo.append((obj, name, old))
    setattr(obj, name, value)

# the ops that run through cuBLAS on CUDA (a composite such as matmul or
# linear reaches one of these)
_MATMULS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot",
            "_addmm_activation")


def workspace_bytes(capability_major, card_bytes=0):
    """One cuBLAS workspace as PyTorch sizes it (see the module's text):
    CUBLAS_WORKSPACE_CONFIG's, else card_bytes (the catalog's, 0: none),
    else the capability's."""
    conf = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
    try:
        nums = [int(x) for x in conf.split(":") if x]
        ws = sum(nums[i] * nums[i + 1] for i in range(0, len(nums) - 1, 2)) * 1024
    except ValueError:
        ws = 0
    if ws == 0:
        ws = card_bytes
    if ws == 0:
        ws = 32 << 20 if capability_major >= 9 else (4096 * 2 + 16 * 8) << 10
    return ws


def _capability():
    """(major, minor) of the card a meta or CPU trace stands for:
    VRAMLEDGER_TRACE_CAPABILITY, default 9.0 (H100, H200)."""
    env = os.environ.get("VRAMLEDGER_TRACE_CAPABILITY", "9.0")
    try:
        major, _, minor = env.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return 9, 0


def _env_int(name, default):
    try:
        v = int(os.environ.get(name, default))
        return v if v > 0 else default
    except ValueError:
        return default


def _threads_per_sm(cap):
    """maxThreadsPerMultiProcessor by compute capability (CUDA C
    Programming Guide, table of technical specifications): 1536 on 8.6
    and 8.9, 1024 on 7.5, else 2048."""
    if cap in ((8, 6), (8, 7), (8, 9), (12, 0)):
        return 1536
    if cap == (7, 5):
        return 1024
    return 2048


# the reductions of aten/src/ATen/native/cuda (Reduce.cuh's gpu_reduce_kernel)
# that take scratch memory, and the bytes of their accumulator: 0 = the
# input's own element (amax, amin), else 4 for floating inputs (float
# accumulation; double's 8) and 8 for integers (int64)
_REDUCTIONS = ("sum", "mean", "nansum", "prod", "linalg_vector_norm", "amax", "amin")


def _reduce_scratch(tr, func, args, kwargs, out):
    from . import cuda_reduce
    name = tr.reductions[func.overloadpacket]
    x = args[0]
    nd = x.dim()
    dims = None  # all
    if name == "linalg_vector_norm":
        dims = args[2] if len(args) > 2 else kwargs.get("dim")
    elif len(args) > 1 and not isinstance(args[1], tr.torch.dtype):
        dims = args[1]
    elif "dim" in kwargs:
        dims = kwargs["dim"]
    if isinstance(dims, int):
        dims = [dims]
    if not dims:  # None or [] (amax's default): every dimension
        dims = range(nd)
    red = {d % nd for d in dims} if nd else set()
    if name in ("amax", "amin"):
        acc = x.element_size()
    elif x.is_floating_point():
        acc = 8 if x.dtype == tr.torch.float64 else 4
    elif x.is_complex():
        return []
    else:
        acc = 8
    sms, tps = tr.device_sms(out)
    return cuda_reduce.transients(list(x.shape), list(x.stride()), red, acc, x.element_size(), sms, tps)


def _storage_key(t):
    """(live key, storage, bytes) of t's storage, or None for none: the
    key is (device, address), on meta (no address) the storage's own C++
    object."""
    try:
        try:
            s = t.untyped_storage()
        except AttributeError:  # torch < 2.0
            s = t.storage()
        key = s.data_ptr()
        n = s.nbytes()
    except Exception:
        return None
    if key == 0 and n == 0:
        return None
    dev = t.device.type
    if dev == "meta":
        key = getattr(getattr(s, "_storage", s), "_cdata", None) or id(s)
    return (dev, key), s, n


class _Trace:
    def __init__(self, path, torch):
        self.f = open(path, "w", buffering=1 << 20)
        self.torch = torch
        self.live = {}  # storage key -> [id, {id(weakref): weakref}, bytes]
        self.next_id = 1
        self.pid = os.getpid()
        self.probe = None
        self.by_storage = _storage_objects_preserved(torch)
        self.ws = None  # bytes of one cuBLAS workspace, when first needed
        self.sms = None  # (SMs, threads per SM) for a meta or CPU trace, when first needed
        self.pending = None  # (key, line, operand's key): an allocation held back (seen)
        self.reductions = {}  # the reduction ops (install()), by overload packet
        self.batch = None  # the micro-batch, once the probe knows it (0: 1 or unknown)
        self.convolutions = 0  # forward and backward convolutions seen (the trace's "# convolutions N")
        self.convolutions_said = 0
        self.skip_dirs = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
        self.live_bytes = 0  # bytes of the storages alive now (the probe's bill)
        self.ws_live = 0  # of which cuBLAS workspaces
        self.param_shapes = set()
        self.ws_done = set()  # the contexts (forward, backward) that have one
        self.main_thread = threading.get_ident()
        node = getattr(torch._C, "_current_autograd_node", None)
        self.in_backward = (lambda: node() is not None) if node else \
            (lambda: threading.get_ident() != self.main_thread)
        from .optrace import OpLog
        self.ops = OpLog(torch, self)  # the ops, for the step's time

    def alloc(self, n, dev, module=None, kind="a", t=None):
        self.flush()
        return self.write_alloc(self.line(n, dev, module, kind, t))

    def line(self, n, dev, module=None, kind="a", t=None):
        """An allocation's line, less its id: (kind, bytes, the rest)."""
        if module is None:
            st = self.probe.stack if self.probe is not None else None
            module = st[-1] if st else None  # the module running (probe's, sampled steps)
        extra = ""
        if t is not None:
            extra = " dtype=" + str(t.dtype).replace("torch.", "")
            at = self.where()
            if at:
                extra += " at=" + at
        rest = (" " + module.translate(_WORD) if module else "") + extra
        return kind, n, dev, rest

    def write_alloc(self, line):
        i = self.next_id
        self.next_id += 1
        kind, n, dev, rest = line
        self.f.write("%s %d %d %s%s\n" % (kind, i, n, dev, rest))
        return i

    def flush(self):
        """Write the allocation held back by seen(defer=...), as made."""
        p = self.pending
        if p is None:
            return
        self.pending = None
        e = self.live.get(p[0])
        if e is not None and e[0] is None:
            e[0] = self.write_alloc(p[1])

    def in_place(self, k):
        """The operand held back for died right after the op: the untraced
        job wrote the result into its block (an in-place sum). The result
        takes the operand's id; neither line is written. True when so."""
        p = self.pending
        if p is None or p[2] != k:
            return False
        self.pending = None
        e, old = self.live.get(p[0]), self.live.get(k)
        if e is None or e[0] is not None or old is None:
            self.pending = p
            self.flush()
            return False
        e[0] = old[0]
        return True

    def where(self):
        """FILE:LINE of the innermost frame outside torch and vramledger
        (this file's own frames are in vramledger)."""
        f = sys._getframe(1)
        for _ in range(64):
            if f is None:
                return None
            fn = f.f_code.co_filename
            if not fn.startswith(self.skip_dirs) and not fn.startswith("<"):
                return "%s:%d" % (os.path.basename(fn).translate(_WORD)[:80], f.f_lineno)
            f = f.f_back
        return None

    def learn_batch(self):
        """The micro-batch, from the probe's first forward; the parameters'
        shapes with it."""
        p = self.probe
        if p is None or not p.micro or not p.samples:
            return
        b = p.samples // p.micro
        self.batch = b if b >= 2 else 0
        if not self.batch:
            return
        self.f.write("# batch %d\n" % b)
        try:
            for m in list(p.models) + list(p.roots):
                for t in list(m.parameters()) + list(m.buffers()):
                    self.param_shapes.add(tuple(t.shape))
            for o in list(p.optimizers):
                for g in o.param_groups:
                    for t in g["params"]:
                        self.param_shapes.add(tuple(t.shape))
        except Exception:
            pass

    def grows(self, t):
        """Does this new storage grow with the batch?"""
        if self.batch is None:
            self.learn_batch()
        b = self.batch
        if not b or t.dim() == 0:
            return False
        n = t.shape[0]
        return n >= b and n % b == 0 and tuple(t.shape) not in self.param_shapes

    def matmul(self, t):
        """The first matmul of the forward and of the backward: a workspace."""
        ctx = "backward" if self.in_backward() else "forward"
        if ctx in self.ws_done:
            return
        self.ws_done.add(ctx)
        if self.ws is None:
            if t.device.type == "cuda":
                self.ws = workspace_bytes(self.torch.cuda.get_device_capability(t.device)[0])
            else:  # the card the trace stands for: the catalog's bytes, else its capability's
                self.ws = workspace_bytes(_capability()[0],
                                          _env_int("VRAMLEDGER_TRACE_WORKSPACE_BYTES", 0))
        self.alloc(self.ws, t.device.type, "cublas_workspace")
        self.live_bytes += self.ws
        self.ws_live += self.ws

    def seen(self, t, defer=None):
        """t's storage, an allocation the first time it is seen. defer: the
        live key of an operand whose block the untraced job would have
        reused (_reuses_operand): the line is held back until the next
        event, and dropped if that operand dies first (in_place)."""
        got = _storage_key(t)
        if got is None:
            return
        k, s, n = got
        dev = k[0]
        entry = self.live.get(k)
        if entry is not None and self.by_storage:
            return  # one weak reference on the storage object is enough
        if entry is None:
            kind = "b" if self.grows(t) else "a"
            if defer is not None and defer in self.live:
                self.flush()
                entry = [None, {}, n]
                self.pending = (k, self.line(n, dev, kind=kind, t=t), defer)
            else:
                entry = [self.alloc(n, dev, kind=kind, t=t), {}, n]
            self.live[k] = entry
            self.live_bytes += n

        def gone(ref, k=k, tracer=self):
            e = tracer.live.get(k)
            if e is None:
                return
            e[1].pop(id(ref), None)
            if e[1]:
                return
            mine = os.getpid() == tracer.pid
            if mine and not tracer.in_place(k):  # else its block goes on as the result's
                tracer.flush()  # the allocation held back first (this storage's own, too)
                if e[0] is not None:
                    tracer.f.write("f %d\n" % e[0])
            del tracer.live[k]
            tracer.live_bytes -= e[2]
        try:
            ref = weakref.ref(s if self.by_storage else t, gone)
            entry[1][id(ref)] = ref
        except TypeError:
            pass

    def reduce_scratch(self, func, args, kwargs, out):
        """The blocks an ATen CUDA reduction takes for the launch and
        gives back when it returns (vramledger.cuda_reduce): written as an
        allocation and a free each, after the result."""
        try:
            sizes = _reduce_scratch(self, func, args, kwargs, out)
        except Exception:  # an argument layout this does not know: no scratch said
            return
        self.transients(out.device.type, sizes, "cuda_reduce")

    def transients(self, dev, sizes, module=None):
        """Blocks a CUDA kernel takes and frees before it returns, unseen
        by the dispatch mode: an allocation each after the result, freed
        in reverse order."""
        ids = [self.alloc(n, dev, module) for n in sizes]
        for i in reversed(ids):
            self.f.write("f %d\n" % i)

    def device_sms(self, t):
        """(SMs, threads per SM) of the device the trace stands for."""
        if t.device.type == "cuda":
            p = self.torch.cuda.get_device_properties(t.device)
            return p.multi_processor_count, getattr(p, "max_threads_per_multi_processor", 2048)
        if self.sms is None:
            from . import cuda_reduce
            self.sms = (_env_int("VRAMLEDGER_TRACE_SMS", cuda_reduce.REFERENCE_SMS),
                        _env_int("VRAMLEDGER_TRACE_THREADS_PER_SM", _threads_per_sm(_capability())))
        return self.sms

    def mark(self, name):
        from .probe_common import _cut
        self.flush()
        self.say_convolutions()
        self.f.write("m %s\n" % _cut(name, 63))  # one line, whole characters

    def say_convolutions(self):
        """"# convolutions N": how many the job ran so far. On CUDA each
        takes a workspace from the caching allocator that cuDNN's heuristics
        size and no op returns (aten/src/ATen/native/cudnn/Conv_v8.cpp);
        the trace cannot hold it, and `vramledger trace` says so."""
        if self.convolutions != self.convolutions_said:
            self.convolutions_said = self.convolutions
            self.f.write("# convolutions %d\n" % self.convolutions)

    def empty_cache(self):
        self.flush()
        self.f.write("e\n")

    def close(self):
        try:
            self.flush()
            self.say_convolutions()
            if self.ops is not None:
                self.ops.write(self.f)
        except Exception:
            pass
        try:
            self.f.flush()
        except Exception:
            pass


def _storage_objects_preserved(torch):
    """True when a storage's Python object is one per storage and lives as
    long as it (PyTorch 2.1 and later) and takes weak references."""
    try:
        x = torch.empty(1)
        s = x.untyped_storage()
        if s is not x.untyped_storage():
            return False
        weakref.ref(s)
        return True
    except Exception:
        return False


def _cpu_takes_cuda_defaults(torch):
    """A CPU (or meta) dry run standing for a CUDA run takes the paths
    PyTorch takes for CUDA tensors where they spend memory differently. The
    dry run's numbers change; its allocations are the GPU's."""
    _cpu_foreach_as_cuda(torch)
    _cpu_dropout_as_cuda(torch)
    _meta_dropout_as_cuda(torch)
    _cpu_autocast_as_cuda(torch)


def _cpu_foreach_as_cuda(torch):
    """torch.optim picks the foreach implementation, as for CUDA tensors,
    and takes fused=True for meta tensors (the HF Trainer's default AdamW is
    fused): its kernels run in place, with no memory of their own beyond
    the states the optimizer allocates in Python (the in-place fused ops
    with no meta function are skipped on meta: _MetaValues.call)."""
    try:
        import torch.optim.optimizer as o
        for name in ("_get_foreach_kernels_supported_devices", "_get_fused_kernels_supported_devices"):
            f = getattr(o, name, None)
            if f is None or ("cpu" in f() and "meta" in f()):
                continue

            def devices(f=f):
                return list(f()) + [d for d in ("cpu", "meta") if d not in f()]
            _patch(o, name, devices)
            # the optimizers import it by name too
            for mod in ("adam", "adamw", "sgd", "adagrad"):
                m = sys.modules.get("torch.optim." + mod)
                if m is not None and getattr(m, name, None) is f:
                    _patch(m, name, devices)
    except Exception:
        pass


def _cpu_dropout_as_cuda(torch):
    """Dropout in training is the fused kernel (native_dropout: a one-byte
    mask saved for backward; the CPU path multiplies by a mask of the
    input's dtype, four times that in fp32). scaled_dot_product_attention
    with dropout: CUDA's flash and memory-efficient kernels keep only the
    output and the log-sum-exp, the CPU falls back to the math path (the
    whole attention matrix, saved); a CPU dry run calls it without dropout,
    which takes the CPU's own flash kernel (CUDA's saved tensors). On meta
    tensors SDPA takes the kernel CUDA would (_meta_sdpa_as_cuda), its
    math path with CUDA's dropout (_meta_dropout_as_cuda)."""
    try:
        F = torch.nn.functional
        dropout, sdpa = F.dropout, getattr(F, "scaled_dot_product_attention", None)

        def fused_dropout(input, p=0.5, training=True, inplace=False):
            if training and not inplace and 0 < p < 1 and isinstance(input, torch.Tensor) \
                    and input.device.type in ("cpu", "meta") and input.numel() > 0:
                return torch.native_dropout(input, p, True)[0]
            return dropout(input, p, training, inplace)
        _patch(F, "dropout", fused_dropout)
        if sdpa is not None:
            def attention(query, key, value, *args, **kwargs):
                if query.device.type == "meta":
                    out = _meta_sdpa_as_cuda(torch, sdpa, query, key, value, args, kwargs)
                    if out is not None:
                        return out
                if query.device.type in ("cpu", "meta"):
                    if len(args) >= 2 and args[1]:
                        args = (args[0], 0.0) + tuple(args[2:])
                    elif kwargs.get("dropout_p"):
                        kwargs["dropout_p"] = 0.0
                return sdpa(query, key, value, *args, **kwargs)
            _patch(F, "scaled_dot_product_attention", attention)
    except Exception:
        pass


def _meta_sdpa_as_cuda(torch, sdpa, q, k, v, args, kwargs):
    """On meta tensors, scaled_dot_product_attention through the kernel
    CUDA would choose (_cuda_sdpa_backend), its meta function:
    - cuDNN attention and flash attention keep their output and the
      log-sum-exp (fp32, one per query and head); cuDNN takes a mask, a
      boolean one as an additive bias of its shape in the query's dtype
      (kept for backward);
    - memory-efficient attention likewise, a boolean mask as a bias of the
      query's dtype;
    - the math path: PyTorch's own on meta (scaled_dot_product_attention
      on meta tensors runs it: attention.cpp's _fused_sdp_choice_meta),
      with its dropout of the probabilities as CUDA runs it (at::dropout,
      CUDA's fused kernel: _meta_dropout_as_cuda), in its dtype (fp32 for
      half inputs, which it upcasts).
    Each kernel keeps what it keeps for backward; dropout stays inside the
    fused kernels. The choice is PyTorch 2.11's on an H100 in all 1,620
    cases of a grid with dropout 0, 0.1 and 0.125 (bench/results/dry-run/
    raw.jsonl:sdpa-choice-h100/, bench/gpu/jobs/tracer_checks.py
    sdpa-choice); what each allocates measured on an H200 with PyTorch 2.11
    for every head layout, mask and dtype transformers passes without dropout
    (bench/results/dry-run/raw.jsonl:sdpa-backends.jsonl, bench/gpu/jobs/
    tracer_checks.py sdpa-backends); T5's math path with its dropout in an
    H200's allocator history (bench/results/reserved/encoder-histories-h200/).
    None where no kernel applies: the caller's path then."""
    names = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    p = dict(zip(names, args))
    p.update(kwargs)
    mask, drop, causal = p.get("attn_mask"), float(p.get("dropout_p") or 0.0), bool(p.get("is_causal"))
    scale, gqa = p.get("scale"), bool(p.get("enable_gqa"))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return None
    grouped = k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]
    if grouped and (not gqa or q.shape[1] % k.shape[1] or k.shape[1] != v.shape[1]):
        return None  # an error on CUDA too: PyTorch's own path says so
    backend = _cuda_sdpa_backend(torch, q, k, v, mask, drop, causal, gqa)
    if backend == "math":
        return sdpa(q, k, v, *args, **kwargs)  # dropout_p as given
    if mask is not None and mask.dtype == torch.bool:  # the kernels take an additive bias
        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    ops = torch.ops.aten
    try:
        if backend == "cudnn":
            return _meta_cudnn(torch, q, k, v, mask, grad, drop, causal, scale)
        if backend == "flash":
            return ops._scaled_dot_product_flash_attention(q, k, v, drop, causal, False, scale=scale)[0]
        return ops._scaled_dot_product_efficient_attention(q, k, v, mask, grad, drop, causal,
                                                           scale=scale)[0]
    except Exception:
        return None


def _cuda_sdpa_backend(torch, q, k, v, mask, drop, causal, gqa):
    """"cudnn", "flash", "efficient" or "math": the first whose constraints
    these dense 4-d inputs meet, in the order CUDA's select_sdp_backend
    tries them on an H100 or H200 with cuDNN past 9.15 (aten/src/ATen/
    native/transformers/cuda/sdp_utils.cpp: priority_order puts cuDNN
    first, check_prefer_cudnn_attention; the H200's PyTorch 2.11 picked it
    wherever it applies, bench/results/dry-run/raw.jsonl:sdpa-backends.jsonl).
    Each test names the check of sdp_utils.cpp (can_use_cudnn_attention,
    can_use_flash_attention, can_use_mem_efficient_attention) or of
    sdp_utils_cpp.h it stands for."""
    half = q.dtype in (torch.float16, torch.bfloat16)
    dtype = q.dtype == k.dtype == v.dtype  # check_tensor_dtype
    dqk, dk, dv = q.shape[-1], k.shape[-1], v.shape[-1]
    sq, sk = q.shape[-2], k.shape[-2]
    hq, hk, hv = q.shape[1], k.shape[1], v.shape[1]
    if q.shape[0] != k.shape[0] or q.shape[0] != v.shape[0] or 0 in (sq, sk):
        return "math"  # check_batch_size_and_num_heads_dense, check_nonzero_sequence_lengths_dense
    same_heads = hq == hk == hv
    # check_last_dim_stride_equals_1_dense: q, k, v and (on the GPU) the
    # mask; T5's position bias, a permuted view, fails it on every kernel
    # (modeling_t5.py compute_bias: stride(-1) = heads)
    mask_ok = mask is None or mask.stride(-1) == 1
    unit = all(t.stride(-1) == 1 for t in (q, k, v)) and mask_ok
    unit_or_single = (unit or dqk == 1) and mask_ok  # <ignore_singleton_dim=true>
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if half and dtype and unit_or_single and _cudnn_takes(q, v, mask, drop, gqa, grad):
        return "cudnn"
    heads = same_heads or (gqa and hk == hv and hq % hk == 0)  # check_grouped_query_attention
    if half and dtype and unit_or_single and heads and mask is None and dqk == dk == dv <= 256 \
            and not (causal and sq != sk):  # check_for_attn_mask, check_head_dim_size_flash,
        return "flash"  # check_flash_causal_non_square_seqlens
    align = 8 if half else 4  # minimum_gemm_alignment (sm80 and later, tensor cores)
    if dtype and q.dtype in (torch.float32, torch.float16, torch.bfloat16) and unit and same_heads \
            and dqk == dk and dqk % align == 0 and dv % align == 0 \
            and all(t.storage_offset() % align == 0 for t in (q, k, v)):
        # check_head_dim_size_mem_efficient, check_data_ptr_alignment_mem_efficient;
        # grouped heads: the math path on the H200's 2.11 (sdpa-backends.jsonl, fp32)
        return "efficient"
    return "math"


def _cudnn_takes(q, v, mask, drop, gqa, grad):
    """can_use_cudnn_attention's checks past dtype and strides (sm90)."""
    hq, hv = q.shape[1], v.shape[1]
    if mask is not None:
        if mask.requires_grad:  # check_attn_mask_shape: no gradient for the mask
            return False
        ms = mask.shape
        if ms[-2] not in (1, q.shape[-2]) or ms[-1] not in (1, v.shape[-2]):
            return False
        if mask.dim() == 4 and (ms[0] not in (1, q.shape[0]) or ms[1] not in (1, hq)):
            return False
        if mask.dim() not in (2, 4):
            return False
    if not (hq == hv or (gqa and hq % hv == 0)):  # (k's heads are v's: the caller's check)
        return False  # check_batch_size_and_num_heads_dense<gqa, not the same k and v heads>
    dqk, dv, sq, sk = q.shape[-1], v.shape[-1], q.shape[-2], v.shape[-2]
    if dqk > 256 or dv > 256 or dqk % 8 or dv % 8 or sk == 1 or (drop and sq == 1):
        return False  # check_cudnn_tensor_shapes (sm90: head dims to 256)
    # check_cudnn_d256_bprop_head_dim: the backward's head dims
    return not grad or (dqk <= 128 and dv <= 128) or (dqk, dv) in ((192, 128), (256, 256))


def _meta_dropout_as_cuda(torch):
    """at::dropout on meta tensors as on CUDA tensors (aten/src/ATen/
    native/Dropout.cpp dropout: in training with 0 < p < 1 and elements,
    is_fused_kernel_acceptable takes native_dropout, CUDA's fused kernel:
    a one-byte mask saved; meta takes the composite's bernoulli mask of
    the input's dtype and a product). C++ composites call it so, SDPA's math
    path among them (attention.cpp _scaled_dot_product_attention_math:
    at::dropout of the probabilities). A kernel at the AutogradMeta key.
    Returns True when registered."""
    lib = getattr(torch, "library", None)
    packet = getattr(torch.ops.aten, "dropout", None)
    if lib is None or not hasattr(lib, "Library") or packet is None or \
            not hasattr(packet.default, "decompose"):
        return False
    aten = torch.ops.aten
    native, alias, composite = aten.native_dropout.default, aten.alias.default, packet.default.decompose

    def dropout(input, p, train):
        if not train or p == 0 or input.numel() == 0:
            # the composite returns the input itself (_dropout_impl), which a
            # kernel here may not (it would come back a copy): a view of it
            return alias(input)
        if p < 1:
            return native(input, p, True)[0]
        return composite(input, p, train)  # p = 1: input * 0, its own tensor
    try:
        L = lib.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            L.impl("dropout", dropout, "AutogradMeta")
    except Exception:
        return False
    _libs.append(L)  # unregistered with the AutocastCPU kernels (uninstall)
    return True


_cudnn_ok = [False]  # cuDNN attention's meta functions run forward and backward (install)


def _meta_cudnn_works(torch):
    """Do cuDNN attention's meta functions run, forward and backward, with
    grouped heads? (Tried once, before the tracer starts.)"""
    try:
        t = torch.empty((1, 2, 4, 8), dtype=torch.bfloat16, device="meta", requires_grad=True)
        u = torch.empty((1, 1, 4, 8), dtype=torch.bfloat16, device="meta", requires_grad=True)
        o = torch.ops.aten._scaled_dot_product_cudnn_attention(t, u, u, None, True, 0.0, True, False)[0]
        o.sum().backward()
        return tuple(o.shape) == (1, 2, 4, 8) and tuple(u.grad.shape) == (1, 1, 4, 8)
    except Exception:
        return False


def _meta_cudnn(torch, q, k, v, bias, grad, drop, causal, scale):
    """cuDNN attention on meta tensors; where this PyTorch has no meta
    function for it (forward or backward), the flash kernel's, which keeps
    the same (output and log-sum-exp) and takes grouped heads, for a call
    without a bias."""
    ops = torch.ops.aten
    if _cudnn_ok[0]:
        return ops._scaled_dot_product_cudnn_attention(q, k, v, bias, grad, drop, causal, False,
                                                       scale=scale)[0]
    if bias is None:
        return ops._scaled_dot_product_flash_attention(q, k, v, drop, causal, False, scale=scale)[0]
    if k.shape[1] != q.shape[1]:
        raise NotImplementedError("grouped heads with a mask")
    return ops._scaled_dot_product_efficient_attention(q, k, v, bias, grad, drop, causal, scale=scale)[0]


# CUDA autocast's policy (aten/src/ATen/autocast_mode.cpp) where the CPU's
# differs: these run in float32 under CUDA autocast, whatever the input's
# dtype (the CPU runs most of them in bfloat16) ...
_CUDA_FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
              "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
              "pow.Scalar", "softplus", "layer_norm", "group_norm", "frobenius_norm.dim",
              "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
              "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss",
              "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss",
              "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
              "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp")
# ... and these take dtype=float32 when given a lower-precision input and no dtype
_CUDA_FP32_OPT_DTYPE = ("softmax.int", "log_softmax.int", "cumsum", "cumprod", "prod")


def _cpu_autocast_as_cuda(torch):
    """A CPU dry run under autocast takes CUDA autocast's float32 policy:
    kernels at the AutocastCPU dispatch key for the ops CUDA runs in float32
    (GPT-2's tanh-GELU is pow, tanh, mul in float32 on CUDA: twice the
    bytes of the CPU's bfloat16). Returns how many ops took it."""
    lib = getattr(torch, "library", None)
    if lib is None or not hasattr(lib, "Library"):
        return 0
    try:
        L = lib.Library("aten", "IMPL")
    except Exception:
        return 0
    low = (torch.bfloat16, torch.float16)

    def up(a):
        if isinstance(a, torch.Tensor) and a.dtype in low:
            return a.float()
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return type(a)(up(x) for x in a)
        return a

    def fp32(op):
        def kernel(*args, **kwargs):
            with torch.autocast("cpu", enabled=False):
                return op(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
        return kernel

    def opt_dtype(op):
        def kernel(x, *args, **kwargs):
            with torch.autocast("cpu", enabled=False):
                if isinstance(x, torch.Tensor) and x.dtype in low:
                    if args and args[-1] is None:
                        args = args[:-1] + (torch.float32,)
                    elif kwargs.get("dtype", 0) is None or ("dtype" not in kwargs and len(args) < 2):
                        kwargs["dtype"] = torch.float32
                return op(x, *args, **kwargs)
        return kernel

    def cross_entropy(op):
        """CUDA autocast has no rule for cross_entropy_loss, the CPU's casts
        the logits to float32 (a copy, and a backward in float32): on CUDA
        it decomposes as its composite says (aten/src/ATen/native/
        LossNLL.cpp): log_softmax in the logits' dtype (kept for backward),
        then nll_loss, whose float32 rule casts that (seen in a CUDA trace
        of RoBERTa: bench/results/dry-run/raw.jsonl:cuda-traces/)."""
        def kernel(x, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
            aten = torch.ops.aten
            if isinstance(x, torch.Tensor) and x.dtype in low and x.dim() >= 1 \
                    and not target.is_floating_point() and not label_smoothing:
                return aten.nll_loss_nd(aten.log_softmax.int(x, 0 if x.dim() == 1 else 1, x.dtype),
                                        target, weight, reduction, ignore_index)
            with torch.autocast("cpu", enabled=False):
                return op(up(x), target, up(weight), reduction, ignore_index, label_smoothing)
        return kernel

    n = 0
    for names, make in ((_CUDA_FP32, fp32), (_CUDA_FP32_OPT_DTYPE, opt_dtype),
                        (("cross_entropy_loss",), cross_entropy)):
        for name in names:
            base, _, overload = name.partition(".")
            try:
                packet = getattr(torch.ops.aten, base)
                op = getattr(packet, overload or "default")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    L.impl(name, make(op), "AutocastCPU")
                n += 1
            except Exception:
                continue
    _libs.append(L)  # a Library unregisters its kernels when collected
    return n


_libs = []


class _MetaValues:
    """Values for the small tensors of a job on meta tensors.

    Meta tensors have shapes and no data, so a job that reads a value
    (`.item()`, `bool(t)`, `torch.equal`) or makes a tensor whose shape
    depends on values (`nonzero`, `masked_select`) fails there: transformers
    does both with attention masks and position ids (gradient
    checkpointing: `find_packed_sequence_indices`, `_ignore_causal_mask_sdpa`).
    Here every meta tensor of at most LIMIT elements made from known values
    (a factory, a copy from the CPU, an op on such tensors) carries a CPU
    twin computed by the same op; a read takes the twin's value, an op whose
    shape depends on values takes the twin's shape. A value no twin knows
    (a loss, for logging) reads as 0, said once on stderr. The twins are
    small tensors on the CPU: the trace is the meta tensors' alone."""

    LIMIT = 1 << 22  # elements: masks and ids of a few million tokens

    def __init__(self, torch):
        self.torch = torch
        self.twin = {}  # id(meta tensor) -> (weakref, cpu tensor)
        self.said = set()
        self.cpu = torch.device("cpu")

    def get(self, t):
        e = self.twin.get(id(t))
        return e[1] if e is not None and e[0]() is t else None

    def put(self, t, v):
        if t.numel() > self.LIMIT or tuple(t.shape) != tuple(v.shape):
            return
        k = id(t)
        try:
            self.twin[k] = (weakref.ref(t, lambda r, k=k, tw=self.twin: tw.pop(k, None)), v)
        except TypeError:
            pass

    def drop(self, t):
        if isinstance(t, self.torch.Tensor):
            self.twin.pop(id(t), None)

    def on_cpu(self, a):
        """args with each meta tensor replaced by its twin (None: unknown)"""
        T = self.torch
        if isinstance(a, T.Tensor):
            if a.device.type != "meta":
                return a
            v = self.get(a)
            if v is None:
                raise LookupError
            return v
        if isinstance(a, T.device) and a.type == "meta":
            return self.cpu
        if isinstance(a, (list, tuple)):
            return type(a)(self.on_cpu(x) for x in a)
        if isinstance(a, dict):
            return {k: self.on_cpu(v) for k, v in a.items()}
        return a

    def say(self, what):
        if what in self.said:
            return
        self.said.add(what)
        sys.stderr.write("vramledger trace: %s read a value of a meta tensor no value is known "
                         "for (at %s); 0 was used (meta tensors have no data)\n"
                         % (what, _Trace.where(_tracer) if _tracer else "?"))

    def twins(self, res):
        """meta tensors shaped as the CPU result(s) res, res their twins"""
        T = self.torch

        def twin_of(r):
            m = T.empty_strided(r.shape, r.stride(), dtype=r.dtype, device="meta")
            self.put(m, r)
            return m
        if isinstance(res, T.Tensor):
            return twin_of(res)
        if isinstance(res, (list, tuple)) and all(isinstance(r, T.Tensor) for r in res):
            return type(res)(twin_of(r) for r in res)
        return res

    def call(self, func, args, kwargs):
        T = self.torch
        name = func.overloadpacket.__name__
        try:
            cargs, ckw = self.on_cpu(args), self.on_cpu(kwargs)
            known = True
        except LookupError:
            known = False
        if name == "_local_scalar_dense":
            if known:
                return func(*cargs, **ckw)
            self.say(name)
            dt = args[0].dtype
            return False if dt == T.bool else 0.0 if dt.is_floating_point else 0
        try:
            out = func(*args, **kwargs)
        except Exception as ex:
            if isinstance(ex, NotImplementedError) and name.startswith("_fused_") and name.endswith("_"):
                return None  # a fused optimizer step with no meta function: in place, nothing allocated
            if not known:
                raise  # a value-dependent op on values nobody knows
            return self.twins(func(*cargs, **ckw))  # the twin's answer gives the shape
        if not known and name == "isin" and isinstance(out, T.Tensor):
            # tokens nobody knows are never the stop tokens: generate()
            # stops at max_new_tokens, never early (docs/cmd/trace.md)
            self.put(out, T.zeros(out.shape, dtype=T.bool))
            return out
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if known and any(isinstance(o, T.Tensor) and o.device.type != "meta" for o in outs):
            try:  # a copy out of meta (.cpu(), .to("cpu")): the twin's values
                return func(*cargs, **ckw)
            except Exception:
                return out
        metas = [o for o in outs if isinstance(o, T.Tensor) and o.device.type == "meta"]
        if not metas:
            return out
        if known and all(o.numel() <= self.LIMIT for o in metas):
            try:
                res = func(*cargs, **ckw)
            except Exception:
                res = None
            ress = res if isinstance(res, (list, tuple)) else (res,)
            for o, r in zip(outs, ress):
                if isinstance(o, T.Tensor) and o.device.type == "meta" and isinstance(r, T.Tensor):
                    self.put(o, r)
        elif name.endswith("_") or "out" in kwargs:  # written with values nobody knows
            self.drop(args[0] if args else None)
            self.drop(kwargs.get("out"))
        return out


def _trace_empty_cache(torch, tr):
    """The job's torch.cuda.empty_cache() is in the trace (an `e` line: the
    replay returns the cached free segments there), also in a dry run on
    the CPU or on meta, where it does nothing."""
    try:
        empty = torch.cuda.empty_cache

        def empty_cache():
            tr.empty_cache()
            return empty()
        _patch(torch.cuda, "empty_cache", empty_cache)
    except AttributeError:
        pass


def _wrapper_frame(fn):
    """A frame of the wrappers torch puts around a dispatch mode's
    __torch_dispatch__: torch/utils/_python_dispatch.py before 2.1,
    torch/_dynamo/eval_frame.py and torch/_compile.py (its
    _disable_dynamo) in 2.11, as seen on the H200's torch."""
    return fn.endswith("_python_dispatch.py") or fn.endswith(os.path.join("torch", "_compile.py")) or \
        os.path.join("torch", "_dynamo") + os.sep in fn


def _called_by_the_engine(frame):
    """Was the op called from C++ by autograd's engine (a derivative or the
    engine's own accumulation), not by Python code? The Python frame
    below the dispatch mode is none (autograd's device thread) or the one
    that entered the engine (torch/autograd/graph.py, __init__.py)."""
    while frame is not None and _wrapper_frame(frame.f_code.co_filename):
        frame = frame.f_back  # torch's own wrappers around the mode
    if frame is None:
        return True
    fn = frame.f_code.co_filename
    return os.path.basename(os.path.dirname(fn)) == "autograd" and \
        os.path.basename(fn) in ("graph.py", "__init__.py")


def _reused_operand(torch, tr, func, args, kwargs):
    """The live key of the first operand of an out-of-place sum (or
    scatter_add) that the untraced job runs in place. While any Python
    dispatch mode is active ATen takes every tensor for a subclass
    (isTensorSubclassLike(), aten/src/ATen/TensorSubclassLikeUtils.h), so
    autograd's second gradient of a tensor (InputBuffer::accumulate:
    old + new instead of old.add_(new)) and gather's backward (scatter_add
    instead of scatter_add_ into zeros) take a block of their own. The
    untraced job reuses the operand's when it holds the last reference to
    it and to its storage, and grad mode is off (input_buffer.cpp,
    can_accumulate_inplace): here, an op of the engine whose operand dies
    right after it (_Trace.in_place). A view never qualifies: its view
    metadata holds its base (torch/csrc/autograd/variable.h, ViewInfo), so
    its storage has two owners; a weight's gradient through TBackward (any
    nn.Linear used twice, tied embeddings) is one, and is summed out of
    place (bench/gpu/jobs/tracer_checks.py inplace, bench/results/dry-run/raw.jsonl:reserved/
    in-place/). None when not such an op."""
    if torch.is_grad_enabled() or not _called_by_the_engine(sys._getframe(2)):
        return None
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x._is_view() or not x.is_contiguous():
        return None
    if func.overloadpacket is torch.ops.aten.add:
        y = args[1] if len(args) > 1 else None
        alpha = args[2] if len(args) > 2 else kwargs.get("alpha", 1)
        if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype or alpha != 1:
            return None
    got = _storage_key(x)
    return got[0] if got else None


def _dropout_order(torch):
    """aten.native_dropout.default, whose two results a trace that stands
    for CUDA sees mask first: CUDA's kernel allocates the mask, then the
    output (aten/src/ATen/native/cuda/Dropout.cu, dropout_cuda: `mask =
    at::empty_like(self, ...bool)` before `ret = at::empty_like(self)`),
    the CPU's and meta's return (output, mask) made in that order. The
    H200's allocator histories of bench/results/reserved/
    encoder-histories-h200/ agree: in the first forward of BERT-large bf16
    LoRA 16 x 512 each of the 49 dropout masks (a byte an element, 8 MiB)
    comes right before its 16 MiB output, as in RoBERTa amp-bf16 LoRA
    32 x 256. None where this PyTorch has no native_dropout."""
    packet = getattr(torch.ops.aten, "native_dropout", None)
    return getattr(packet, "default", None) if packet is not None else None


def _touches_meta(torch, args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, torch.Tensor):
            if a.device.type == "meta":
                return True
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, torch.Tensor) and x.device.type == "meta":
                    return True
        elif isinstance(a, torch.device) and a.type == "meta":
            return True
    return False


def install(torch, path):
    """Trace every op's outputs from now on. Returns the tracer."""
    global _tracer
    if _tracer is not None:
        return _tracer
    from torch.utils._python_dispatch import TorchDispatchMode
    tr = _Trace(path, torch)
    if os.environ.get("VRAMLEDGER_TRACE_AS", "cuda") == "cuda":
        _cpu_takes_cuda_defaults(torch)
        _cudnn_ok[0] = _meta_cudnn_works(torch)
    aten = torch.ops.aten
    matmuls = set(getattr(aten, n) for n in _MATMULS if hasattr(aten, n))
    reductions = {getattr(aten, n): n for n in _REDUCTIONS if hasattr(aten, n)}
    tr.reductions = reductions
    convolutions = set(getattr(aten, n) for n in ("convolution", "convolution_backward") if hasattr(aten, n))
    cuda_paths = os.environ.get("VRAMLEDGER_TRACE_AS", "cuda") == "cuda"

    def as_cuda(t):  # does this result stand for a CUDA kernel's?
        d = t.device.type
        return d in ("cuda", "meta") or (d == "cpu" and cuda_paths)

    _trace_empty_cache(torch, tr)
    mv = _MetaValues(torch)
    tolist = torch.Tensor.tolist

    def meta_tolist(self):  # reads data directly, no op to see: the twin's
        if self.device.type == "meta":
            v = mv.get(self)
            if v is not None:
                return v.tolist()
        return tolist(self)
    try:
        _patch(torch.Tensor, "tolist", meta_tolist)
    except (AttributeError, TypeError):
        pass

    dropout_op = _dropout_order(torch)
    tr.reusers = {getattr(aten, n).default if n == "scatter_add" else getattr(aten, n).Tensor
                  for n in ("add", "scatter_add") if hasattr(aten, n)}

    softmax_bwd = getattr(getattr(aten, "_softmax_backward_data", None), "default", None)
    safe_softmax = getattr(getattr(aten, "_safe_softmax", None), "default", None)

    def softmax_transients(func, args, kwargs, out):
        """What CUDA's softmax kernels take beyond their result (each an
        H100 profile of PyTorch 2.11 and t5-base's allocator history,
        bench/results/reserved/raw.jsonl:history-t5-sdpa/): the backward's
        tmp = grad * output, the gradient's size (cuda/SoftMax.cu
        softmax_backward_cuda_out); _safe_softmax's isneginf() (a bool a
        score), its all() over the rows and the zero it writes where a
        row is all -inf (attention.cpp _safe_softmax; the math SDPA path's
        softmax), a composite run below the dispatch mode. [] otherwise"""
        if func is softmax_bwd:
            g = args[0]
            return [g.numel() * g.element_size()]
        if func is safe_softmax:
            x = args[0]
            d = args[1] if len(args) > 1 else kwargs.get("dim", -1)
            rows = x.numel() // max(1, x.shape[d]) if x.dim() else 1
            return [x.numel(), rows, out.element_size()]
        return []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tr.flush()
            if func.overloadpacket in convolutions:
                tr.convolutions += 1
            reused = _reused_operand(torch, tr, func, args, kwargs) if func in tr.reusers else None
            if _touches_meta(torch, args, kwargs):
                out = mv.call(func, args, kwargs)
            else:
                out = func(*args, **kwargs)
            tr.ops.record(func, args, kwargs, out)
            if isinstance(out, torch.Tensor):
                tr.seen(out, defer=reused)  # the result first, then the workspace the kernel takes
                if len(tr.ws_done) < 2 and func.overloadpacket in matmuls:
                    tr.matmul(out)
                elif func.overloadpacket in reductions and as_cuda(out):
                    tr.reduce_scratch(func, args, kwargs, out)
                elif func in (softmax_bwd, safe_softmax) and as_cuda(out):
                    tr.transients(out.device.type, softmax_transients(func, args, kwargs, out))
            elif isinstance(out, (tuple, list)):
                if func is dropout_op and len(out) == 2 and as_cuda(out[0]):
                    out_seen = (out[1], out[0])  # CUDA's mask first (_dropout_order)
                else:
                    out_seen = out
                for o in out_seen:
                    if isinstance(o, torch.Tensor):
                        tr.seen(o)
            return out

    global _mode
    _mode = Mode()
    _mode.__enter__()  # for the rest of the process (or until uninstall)
    import atexit
    atexit.register(tr.close)
    _tracer = tr
    return tr


def uninstall():
    """Stop tracing (vramledger.dry_run; `vramledger trace` never calls
    it): the dispatch mode install() entered exited, every patch it made
    undone (torch.optim's device lists, dropout and SDPA, the AutocastCPU
    kernels, empty_cache, tolist), the trace flushed and closed; storages
    that die later write nothing. Returns the tracer stopped, or None when
    none was installed. Raises RuntimeError, and stops nothing, when
    another dispatch mode entered after install() is still active: exit
    it first."""
    global _tracer, _mode
    tr = _tracer
    if tr is None:
        return None
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    if _get_current_dispatch_mode() is not _mode:
        raise RuntimeError("vramledger: cannot stop tracing: a dispatch mode entered after the "
                           "tracer's is still active (exit it first)")
    _mode.__exit__(None, None, None)
    _mode = None
    _tracer = None
    while _undo:
        obj, name, old = _undo.pop()
        try:
            if old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
        except (AttributeError, TypeError):
            pass
    while _libs:  # the AutocastCPU kernels go with their Library
        L = _libs.pop()
        if hasattr(L, "_destroy"):
            L._destroy()
        del L  # torch < 2.3: unregistered when collected
    _cudnn_ok[0] = False
    tr.ops.remove()
    import atexit
    atexit.unregister(tr.close)
    tr.live.clear()  # their weak references go too: no callback writes to the closed file
    tr.close()
    tr.f.close()
    return tr


def mark(name):
    if _tracer is not None:
        _tracer.mark(name)
