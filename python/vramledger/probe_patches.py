"""What the probe patches in torch: Tensor.backward, the optimizers' step,
memory_stats / reset_peak_memory_stats (the peaks the probe resets stay
the job's), saved_tensors_hooks (the job's own), and checkpoint. Each
patch calls the probe through _guarded: a failure disables the probe,
never the job."""


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
            # torch >= 2.0's hooks get step's args with the optimizer first
            # (torch/optim/optimizer.py profile_hook_step); the wrapper below
            # hands them without it
            head = 1 if args and args[0] is opt else 0
            positional = closure is None and len(args) > head and callable(args[head])
            if positional:
                closure = args[head]
            if closure is None:
                probe.before_step(opt)
                return None
            probe.before_closure(opt)

            def closure_then_step(*a, **k):
                r = closure(*a, **k)
                _guarded(probe, "optimizer closure", probe.after_closure)
                return r
            if positional:
                return tuple(args[:head]) + (closure_then_step,) + tuple(args[head + 1:]), kwargs
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
        except (AttributeError, KeyError, RuntimeError, TypeError, ValueError):
            pass  # the job's call answers as torch does, without our merge
        return st

    def reset_peak_memory_stats(device=None):
        r = orig_reset(device=device)
        try:
            dev = torch.cuda._utils._get_device_index(device, optional=True)
            probe.held.pop(dev, None)
        except (AttributeError, RuntimeError, TypeError, ValueError):
            pass  # the job's reset happened; only our bookkeeping is skipped
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
    except ImportError:
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
