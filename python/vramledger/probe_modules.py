"""The probe's module hooks: the global forward hooks that find the models
and name the module running, and the hooks on the top-level modules that
mark a forward's start and end."""
from .probe_common import _timed


class _ModuleHooks:
    """A part of _Probe (probe.py): its methods use the probe's state."""

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
