"""The probe's bill: parameters, gradients, optimizer states, activations
saved for backward (saved-tensor hooks), autocast copies, forward outputs
and DDP buckets, each storage counted once."""
import weakref

from .probe_common import _local, _storage, _timed


class _Bill:
    """A part of _Probe (probe.py): its methods use the probe's state."""

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
            except (AttributeError, RuntimeError, TypeError, ValueError):  # no logging data yet
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
