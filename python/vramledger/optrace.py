"""The op stream of a traced job, for `vramledger trace --gpu`'s step time.

The tracer (tracer.py) hands every ATen op its dispatch mode sees to
OpLog.record; identical ops of a step and phase are counted under one key,
and at the end the trace gets one comment line per key (the replay skips
"#" lines it does not know; docs/record.md):

    # op STEP PHASE COUNT gemm NAME layout=L m=M n=N k=K batch=B dtype=T bias=0|1
    # op STEP PHASE COUNT attn NAME kernel=K pass=fwd|bwd b=B h=H sq=S skv=S dqk=D dv=D
                               causal=0|1 dropout=P mask=0|1 dtype=T
    # op STEP PHASE COUNT mem NAME class=C bytes=N numel=N dtype=T [planes=N] [inner=1]
    # op STEP PHASE COUNT view NAME      (no kernel: a view, an empty tensor, a transfer)
    # optimizer STEP NAME IMPL elems=N tensors=N w=B g=B st=B states=N
    # step STEP tokens=N samples=N micro=N

PHASE is forward (the probe's forward and loss), backward (autograd's),
recompute (an op autograd runs with grad enabled: a checkpoint's second
forward), prestep (between backward and optimizer.step: clipping,
GradScaler's unscale), optimizer (inside optimizer.step: its own kernels,
priced by the optimizer's measured row, not op by op) or other (between
steps: zero_grad, data; not priced). STEP is the probe's step (1, 2, ...).

A GEMM's layout is read from its operands' strides as a linear runs them:
fwd x @ W^T (B transposed), dgrad g @ W (neither), wgrad g^T @ x (A
transposed); M, N, K are C = A B's, B its batch (bmm). A 2-d convolution
is its implicit GEMMs (conv()), with cuDNN's layout transposes as inner=1
mem lines: kernels of the same op, no dispatch of their own. A memory op's
bytes are its tensors' (inputs read, outputs written: numel x element
size); BatchNorm and bicubic upsampling have classes of their own."""
import os
import threading

# no kernel: metadata, allocation without a write, a read of a value
_NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
              "alias", "lift_fresh", "_local_scalar_dense", "set_", "resize_", "_unsafe_view",
              "_reshape_alias", "is_same_size", "_has_compatible_shallow_copy_type", "size",
              "stride", "sym_size", "sym_stride", "sym_numel", "record_stream", "_fused_adamw_",
              "_fused_adam_", "_fused_sgd_"}
_GEMMS = {"mm": (0, 1, False), "addmm": (1, 2, True), "bmm": (0, 1, False),
          "baddbmm": (1, 2, True), "_addmm_activation": (1, 2, True), "matmul": (0, 1, False),
          "_grouped_mm": (0, 1, False)}
_ATTN = {"_scaled_dot_product_flash_attention": ("flash", "fwd"),
         "_scaled_dot_product_flash_attention_backward": ("flash", "bwd"),
         "_scaled_dot_product_efficient_attention": ("efficient", "fwd"),
         "_scaled_dot_product_efficient_attention_backward": ("efficient", "bwd"),
         "_efficient_attention_forward": ("efficient", "fwd"),
         "_efficient_attention_backward": ("efficient", "bwd"),
         "_scaled_dot_product_cudnn_attention": ("cudnn", "fwd"),
         "_scaled_dot_product_cudnn_attention_backward": ("cudnn", "bwd"),
         "_flash_attention_forward": ("flash", "fwd"),
         "_flash_attention_backward": ("flash", "bwd")}
_NORMS = {"native_layer_norm", "native_layer_norm_backward", "native_batch_norm",
          "native_batch_norm_backward", "_native_batch_norm_legit",
          "_native_batch_norm_legit_no_training", "native_group_norm",
          "native_group_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward", "mean",
          "sum", "var", "var_mean", "std", "std_mean", "norm", "linalg_vector_norm", "amax",
          "amin", "_batch_norm_with_update", "batch_norm_backward", "cudnn_batch_norm",
          "cudnn_batch_norm_backward"}
_SOFTMAX = {"_softmax", "_softmax_backward_data"}
_CONVS = {"convolution", "convolution_backward"}
# bicubic upsampling (a ViT's position table at another image side): each
# output pixel's thread walks every plane (UpSampleBicubic2d.cu)
_BICUBIC = {"upsample_bicubic2d": "bicubic", "upsample_bicubic2d_backward": "bicubic_bwd"}
# BatchNorm (training) runs ATen's per-channel kernels on NCHW maps, slower
# than a norm's rows (steptime.c BN_STATS_EFF): its own classes
_BATCHNORMS = {"native_batch_norm": "bnorm", "_native_batch_norm_legit": "bnorm",
               "_batch_norm_with_update": "bnorm", "cudnn_batch_norm": "bnorm",
               "native_batch_norm_backward": "bnorm_bwd", "batch_norm_backward": "bnorm_bwd",
               "cudnn_batch_norm_backward": "bnorm_bwd"}
_CASTS = {"_to_copy", "copy_", "to", "_to_dtype"}
# the loss's log_softmax over the vocabulary, forward and backward: classes
# of their own (steptime.c LOGSOFTMAX_EFF)
_LOG_SOFTMAX = {"_log_softmax": "logsoftmax", "_log_softmax_backward_data": "logsoftmax_bwd"}
# nll_loss reads one log-probability a row, not the row: its forward
# gathers them, its backward writes zeros of its input's size and scatters
# one gradient a row (aten/src/ATen/native/cuda/Loss.cu
# nll_loss_forward_out_cuda_template, nll_loss_backward_out_cuda_template:
# grad_input.zero_() first). Their bytes: the targets, the values gathered or
# scattered and what they write; the backward a fill by its bytes (class ew)
_NLL = {"nll_loss_forward": "loss", "nll_loss2d_forward": "loss",
        "nll_loss_backward": "ew", "nll_loss2d_backward": "ew"}
# writes into a strided slice of its output (zeros, then the gradient copied
# into the slice): rotate_half's backward
_STRIDED = {"slice_backward"}
# pointwise ops whose operands broadcast to the output's shape (the others:
# concatenations, gathers, the optimizer's foreach lists take smaller
# inputs by design)
_POINTWISE = {"mul", "div", "add", "sub", "rsub", "where", "masked_fill", "mul_", "div_", "add_", "sub_",
              "masked_fill_", "maximum", "minimum", "pow", "addcmul", "addcdiv", "lerp"}
_PHASES = {"forward": "forward", "loss": "forward", "backward": "backward",
           "pre_step": "prestep", "optimizer": "optimizer"}


def _nll_bytes(ins, outs):
    """nll_loss's bytes: its targets (the integer tensor) read, a value a
    target gathered or scattered, its outputs written"""
    target = next((t for t in ins if not t.dtype.is_floating_point), None)
    if target is None:
        return sum(t.numel() * t.element_size() for t in ins + outs)
    values = max((t.element_size() for t in ins if t.dtype.is_floating_point), default=4)
    return (target.numel() * (target.element_size() + values)
            + sum(t.numel() * t.element_size() for t in outs))


def _ew_class(name, ins, numel):
    """an elementwise op's class: TensorIterator vectorises only when every
    operand is contiguous and full-sized (aten/src/ATen/native/cuda/
    CUDALoops.cuh: gpu_kernel_impl's contiguous path, else the unvectorised
    elementwise_kernel). A floating operand broadcast (more than one element,
    fewer than the output's: a row's statistic, a weight, cos and sin) is
    "bcast"; a non-contiguous operand, or a copy into a strided slice, is
    "strided" (steptime.c BCAST_BPS, STRIDED_BPS)"""
    if name in _STRIDED:
        return "strided"
    if name.startswith("_foreach"):
        return "ew"
    fl = [t for t in ins if t.dtype.is_floating_point]
    if name in _POINTWISE and any(1 < t.numel() < numel for t in fl):
        return "bcast"
    if any(t.numel() == numel and not t.is_contiguous() for t in fl):
        return "strided"
    return "ew"


def _tensors(a, out):
    """every tensor in a (nested lists and tuples), appended to out"""
    if hasattr(a, "untyped_storage") and hasattr(a, "dtype"):
        out.append(a)
    elif isinstance(a, (list, tuple)):
        for x in a:
            _tensors(x, out)
    return out


def _col_major(t):
    """Is the matrix t (its last two dimensions) stored column by column?"""
    if t.dim() < 2:
        return False
    r, c = t.shape[-2], t.shape[-1]
    s0, s1 = t.stride(-2), t.stride(-1)
    if r == 1 or c == 1:
        return False
    return s0 == 1 and s1 >= r


def _dtype(t):
    return str(t.dtype).replace("torch.", "")


class OpLog:
    """The ops of each step and phase, counted by key (see the module)."""

    def __init__(self, torch, tracer):
        self.torch = torch
        self.tr = tracer
        self.counts = {}  # (step, phase, line) -> count
        self.steps = {}  # step -> (tokens, samples, micro)
        self.opt = {}  # step -> optimizer line(s)
        self.in_opt = 0
        self.biased_odd = set()  # (out, in) of biased linears with a dimension off 8
        self.fallback_step = 1
        self.main = threading.get_ident()
        self.on = os.environ.get("VRAMLEDGER_TRACE_OPS", "1") != "0"
        self.handles = []
        self._hooks()

    # ---- where an op belongs ----------------------------------------------
    def _hooks(self):
        """optimizer.step's own kernels are the optimizer row's; the
        parameters it steps are read before it runs."""
        try:
            import importlib
            o = importlib.import_module("torch.optim.optimizer")
            if not hasattr(o, "register_optimizer_step_pre_hook"):
                return

            def pre(opt, args, kwargs):
                try:
                    self.optimizer(opt)
                except Exception:
                    pass
                self.in_opt += 1

            def post(opt, args, kwargs):
                self.in_opt = max(0, self.in_opt - 1)
                if self.tr.probe is None:
                    self.fallback_step += 1
            self.handles = [o.register_optimizer_step_pre_hook(pre),
                            o.register_optimizer_step_post_hook(post)]
        except Exception:
            pass

    def remove(self):
        """The optimizer hooks removed (vramledger.dry_run's uninstall)."""
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.handles = []

    def where(self):
        """(step, phase) of the op running now"""
        p = self.tr.probe
        step = p.step if p is not None else self.fallback_step
        if self.in_opt:
            return step, "optimizer"
        if self.tr.in_backward():
            return step, "recompute" if self.torch.is_grad_enabled() else "backward"
        if p is None:
            return step, "forward"
        phase = _PHASES.get(p.phase, "other")
        if phase == "backward" and self.torch.is_grad_enabled() and \
                threading.get_ident() != self.main:
            phase = "recompute"
        if phase != "other":
            self.steps[step] = (p.tokens, p.samples, p.micro)
        return step, phase

    # ---- what an op is ----------------------------------------------------
    def record(self, func, args, kwargs, out):
        if not self.on:
            return
        try:
            step, phase = self.where()
            line = self.describe(func, args, kwargs, out)
        except Exception:
            return
        for ln in ([line] if isinstance(line, str) else line or ()):
            k = (step, phase, ln)
            self.counts[k] = self.counts.get(k, 0) + 1

    def describe(self, func, args, kwargs, out):
        name = func.overloadpacket.__name__
        if name in _ATTN:
            return self.attention(func, name, args, kwargs)
        if name in _CONVS:
            c = self.conv(name, args, out)
            if c is not None:
                return c
        if name in _GEMMS:
            g = self.gemm(name, args)
            if g is not None:
                return g
        if name in _NO_KERNEL or getattr(func, "is_view", False):
            return "view " + name
        ins = _tensors(list(args) + list(kwargs.values()), [])
        outs = _tensors(out, [])
        devs = {t.device.type for t in ins + outs}
        if len(devs) > 1 and "cpu" in devs:
            return "view " + name  # a transfer between host and device: not HBM-bound
        if not outs and not name.endswith("_"):
            return "view " + name
        nbytes = sum(t.numel() * t.element_size() for t in ins + outs)
        numel = max((t.numel() for t in outs), default=0) or max((t.numel() for t in ins), default=0)
        cls = "ew"
        if name in _NLL:
            nbytes, cls = _nll_bytes(ins, outs), _NLL[name]
        elif name in _LOG_SOFTMAX:
            cls = _LOG_SOFTMAX[name]
        elif name in _BATCHNORMS:
            cls = _BATCHNORMS[name]
        elif name in _NORMS:
            cls = "norm"
        elif name in _SOFTMAX:
            cls = "softmax"
        elif name in _CASTS and ins and outs and ins[0].dtype != outs[0].dtype:
            cls = "cast"
        elif name in _CASTS and len(ins) >= 2 and ins[0].dtype != ins[1].dtype:
            cls = "cast"  # copy_(dst, src) across dtypes
        else:
            cls = _ew_class(name, ins, numel)
        dt = _dtype(outs[0] if outs else ins[0]) if (outs or ins) else "-"
        if name in _BICUBIC:  # its time is a chain of taps over the planes, not its bytes
            x = outs[0] if name.endswith("_backward") else ins[0]
            if x.dim() == 4:
                return "mem %s class=%s bytes=%d numel=%d dtype=%s planes=%d" % (
                    name, _BICUBIC[name], nbytes, numel, dt, x.shape[0] * x.shape[1])
        return "mem %s class=%s bytes=%d numel=%d dtype=%s" % (name, cls, nbytes, numel, dt)

    def gemm(self, name, args):
        ia, ib, bias = _GEMMS[name]
        if len(args) <= ib:
            return None
        a, b = args[ia], args[ib]
        if not (hasattr(a, "dim") and hasattr(b, "dim")) or a.dim() < 2 or b.dim() < 2:
            return None
        batch = 1
        if name == "_grouped_mm":
            if a.dim() == 2 and b.dim() == 3:  # pairs sorted by expert: rows padded to 128 each
                E = b.shape[0]
                per = -(-a.shape[0] // E)
                m = E * (-(-per // 128)) * 128
                k, n = a.shape[1], b.shape[2]
            elif a.dim() == 2 and b.dim() == 2:  # the weights' gradient: (K x S) (S x N) by group
                m, k, n = a.shape[0], a.shape[1], b.shape[1]
            else:
                return None
        elif a.dim() == 3 or b.dim() == 3:
            batch = a.shape[0] if a.dim() == 3 else b.shape[0]
            m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        else:
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
        ta, tb = _col_major(a), _col_major(b)
        layout = "wgrad" if ta else "fwd" if tb else "dgrad"
        dt = _dtype(a)
        if dt == "float32" and self.tf32():
            dt = "tf32"
        odd = any(x % 8 for x in (m, n, k))
        if bias and odd and layout == "fwd":
            self.biased_odd.add((n, k))
        if not bias and odd and ((k, n) in self.biased_odd or (m, n) in self.biased_odd):
            bias = True  # a biased linear's backward: priced as its forward (docs/model.md)
        return "gemm %s layout=%s m=%d n=%d k=%d batch=%d dtype=%s bias=%d" % (
            name, layout, m, n, k, batch, dt, 1 if bias else 0)

    def conv(self, name, args, out):
        """A 2-d convolution as cuDNN runs it: an implicit GEMM of the
        output's pixels (m = N Ho Wo) by the output channels (n) over the
        input channels of a window (k = Cin / groups x kh x kw), its backward
        the input's (dgrad) and the weight's (wgrad) GEMMs as a linear's
        (the estimate's conv(), lib/decide/steptime.c); a window wider than
        1 or a stride runs in NHWC, the input and output transposed there
        and back around each GEMM (class=cast, inner=1: kernels of this
        op). None for what is not a 2-d convolution."""
        bwd = name == "convolution_backward"
        x, w = (args[1], args[2]) if bwd else (args[0], args[1])
        y = args[0] if bwd else out
        if not all(hasattr(t, "dim") and t.dim() == 4 for t in (x, w, y)):
            return None
        stride, transposed, groups = (args[4], args[7], args[9]) if bwd else (args[3], args[6], args[8])
        if transposed:
            return None
        g = max(1, int(groups))
        n_, cin, cout = y.shape[0], x.shape[1], y.shape[1]
        rows, k = n_ * y.shape[2] * y.shape[3], cin // g * w.shape[2] * w.shape[3]
        dt = _dtype(x)
        if dt == "float32" and self.tf32():
            dt = "tf32"
        gemm = "gemm %s layout=%%s m=%%d n=%%d k=%%d batch=%d dtype=%s bias=0" % (name, g, dt)
        wide = w.shape[2] * w.shape[3] > 1 or any(int(v) > 1 for v in stride)
        moved = 2 * (x.numel() + y.numel()) * x.element_size()
        nhwc = "mem %s class=cast bytes=%d numel=%d dtype=%s inner=1" % (name, moved, y.numel(), _dtype(x))
        if not bwd:
            return [gemm % ("fwd", rows, cout // g, k)] + ([nhwc] if wide else [])
        mask = list(args[10]) if len(args) > 10 else [True, True, False]
        lines = []
        if mask[0]:
            lines += [gemm % ("dgrad", rows, k, cout // g)] + ([nhwc] if wide else [])
        if mask[1]:
            lines += [gemm % ("wgrad", cout // g, k, rows)] + ([nhwc] if wide else [])
        return lines or None

    def tf32(self):
        try:
            return bool(self.torch.backends.cuda.matmul.allow_tf32)
        except Exception:
            return False

    def attention(self, func, name, args, kwargs):
        kernel, pas = _ATTN[name]
        p = dict(zip([a.name for a in func._schema.arguments], args))
        p.update(kwargs)
        q, k, v = p.get("query"), p.get("key"), p.get("value")
        if q is None or k is None or v is None or q.dim() != 4:
            return "view " + name
        causal = 1 if p.get("is_causal") else 0
        drop = float(p.get("dropout_p") or 0.0)
        mask = 1 if p.get("attn_bias") is not None else 0
        return ("attn %s kernel=%s pass=%s b=%d h=%d sq=%d skv=%d dqk=%d dv=%d causal=%d "
                "dropout=%g mask=%d dtype=%s") % (
            name, kernel, pas, q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3],
            v.shape[3], causal, drop, mask, _dtype(q))

    # ---- the optimizer ------------------------------------------------------
    def optimizer(self, opt):
        """What opt steps: its trainable tensors with a gradient, their
        elements, bytes of a weight, a gradient and a state."""
        step = self.tr.probe.step if self.tr.probe is not None else self.fallback_step
        T = self.torch
        n = elems = 0
        w = g = st = 0
        momentum = False
        fused = foreach = None
        for grp in opt.param_groups:
            momentum = momentum or bool(grp.get("momentum", 0))
            fused = grp.get("fused", fused)
            foreach = grp.get("foreach", foreach)
            for t in grp["params"]:
                if t.grad is None:
                    continue
                n += 1
                elems += t.numel()
                w, g = t.element_size(), t.grad.element_size()
                s = opt.state.get(t) if hasattr(opt, "state") else None
                for x in (s or {}).values():
                    if isinstance(x, T.Tensor) and x.dim() > 0:
                        st = x.element_size()
                        break
        cls = type(opt).__name__.lower()
        if cls in ("adam", "adamw"):
            name, states = "adamw", 2
        elif cls == "sgd":
            name, states = ("sgd-momentum", 1) if momentum else ("sgd", 0)
        else:
            name, states = cls, 2
        impl = "fused" if fused else "forloop" if foreach is False else "foreach"
        line = "%s %s elems=%d tensors=%d w=%d g=%d st=%d states=%d" % (
            name, impl, elems, n, w, g, st or w, states)
        self.opt.setdefault(step, []).append(line)

    # ---- the trace's lines --------------------------------------------------
    def write(self, f):
        if not self.counts and not self.opt:
            return
        for step, (tokens, samples, micro) in sorted(self.steps.items()):
            f.write("# step %d tokens=%d samples=%d micro=%d\n" % (step, tokens, samples, micro))
        for step, lines in sorted(self.opt.items()):
            for ln in lines:
                f.write("# optimizer %d %s\n" % (step, ln))
        for (step, phase, line), c in sorted(self.counts.items(), key=lambda kv: kv[0]):
            f.write("# op %d %s %d %s\n" % (step, phase, c, line))
        self.counts = {}
        self.opt = {}
        self.steps = {}
