"""vramledger's sitecustomize: put on PYTHONPATH by `vramledger run`.

Arms the PyTorch probe (python/vramledger/probe.py) to attach the moment the
job finishes importing torch; a job that never imports torch pays nothing.
VRAMLEDGER_PROBE=0 turns it off. Then runs the sitecustomize this one
shadows (Debian ships one), so the job's environment is otherwise unchanged.
"""
import os
import sys


def _arm():
    if (os.environ.get("VRAMLEDGER_PROBE", "1") == "0" or not os.environ.get("VRAMLEDGER_RECORD")) \
            and not os.environ.get("VRAMLEDGER_TRACE"):
        return
    import importlib.abc

    def attach(torch):
        try:
            trace = os.environ.get("VRAMLEDGER_TRACE")
            if trace:  # vramledger trace: every allocation, for the replay
                from vramledger import tracer
                tracer.install(torch, trace)
            from vramledger import probe
            probe.install(torch)
        except Exception as e:  # never break the job
            sys.stderr.write("vramledger: the probe did not attach: %s: %s\n"
                             % (type(e).__name__, e))

    if "torch" in sys.modules:
        attach(sys.modules["torch"])
        return

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            loader = spec.loader
            run = loader.exec_module

            def exec_module(module):
                run(module)
                attach(module)
            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _chain():
    """Run the next sitecustomize on the path, the one ours shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.util
    for d in sys.path:
        try:
            if not d or os.path.abspath(d) == here:
                continue
        except Exception:
            continue
        f = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(f):
            spec = importlib.util.spec_from_file_location("_vramledger_chained_sitecustomize", f)
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except Exception as e:
                sys.stderr.write("vramledger: %s: %s\n" % (f, e))
            return


_arm()
_chain()
