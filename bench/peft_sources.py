"""Print the PEFT source that decides what a LoRA layer allocates in
training (run on the device: the installed PEFT is the one measured)."""
import inspect
import peft
from peft.tuners.lora import layer

print("peft", peft.__version__)
print(inspect.getsource(layer.Linear.forward))
for cls in (layer.LoraLayer, layer.Linear):
    f = getattr(cls, "_cast_input_dtype", None)
    if f:
        print(inspect.getsource(f))
print(inspect.signature(peft.get_peft_model))
import peft.tuners.tuners_utils as tu
src = inspect.getsource(tu)
i = src.find("def _cast_adapter_dtype")
print(src[i:i + 2500] if i >= 0 else "(no _cast_adapter_dtype)")
