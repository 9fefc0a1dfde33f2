"""Print the transformers source that decides what an eager attention and
its softmax allocate, for each architecture the estimator knows (run on the
device: the installed transformers is the one measured)."""
import inspect
import importlib
import transformers

print("transformers", transformers.__version__)
for arch in ("gpt2", "gpt_neox", "opt", "llama", "qwen2", "gemma", "mistral", "phi3"):
    mod = importlib.import_module("transformers.models.%s.modeling_%s" % (arch, arch))
    for name in ("eager_attention_forward",):
        f = getattr(mod, name, None)
        print("=" * 20, arch, name)
        print(inspect.getsource(f) if f else "(none)")
    for cls in dir(mod):
        if cls.endswith("Attention") and not cls.startswith("_"):
            print("=" * 20, arch, cls, "forward")
            print(inspect.getsource(getattr(mod, cls).forward))
