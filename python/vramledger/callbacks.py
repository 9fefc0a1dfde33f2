"""Training callbacks: the probe's bill, step by step, logged where the
trainer logs (docs/python.md, "Callbacks").

    from vramledger.callbacks import TrainerCallback, LightningCallback
    Trainer(..., callbacks=[TrainerCallback()])              # transformers
    L.Trainer(..., callbacks=[LightningCallback()])          # Lightning

Both listen to the PyTorch probe (attached by `vramledger run`, or by the
callback itself with record=PATH outside it) and log, for each step the
probe finishes:

- vramledger/peak_allocated_gib, vramledger/peak_reserved_gib: the step's
  peaks, as the probe's step event has them (torch.cuda's statistics; a
  CPU run has none);
- vramledger/bill/<part>_gib: the bill at the step's peak phase (the probe
  bills the first three steps and every VRAMLEDGER_PROBE_EVERY-th);
- vramledger/estimate_gap_pct: measured peak allocated against an
  estimate's (estimate=vramledger.estimate(...) or a number of bytes);
- vramledger/fallback_requested: 1 once `vramledger run --commitment` has
  seen the job pass the commitment's trigger (vramledger.fallback_requested()).

The Trainer callback writes to TensorBoard (torch.utils.tensorboard, in the
Trainer's logging_dir) and to Weights & Biases (a wandb run in this
process), each when it is there; the Lightning callback writes to the
Trainer's own loggers. With none of them it logs nothing and costs nothing
beyond the probe's own cost. A logger that fails never stops training.
"""
import sys

from . import fallback_requested

GIB = float(1 << 30)

try:  # the base classes when the trainers are installed; plain objects when not
    from transformers import TrainerCallback as _HFBase
except ImportError:
    _HFBase = object
try:
    from lightning.pytorch.callbacks import Callback as _LBase
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback as _LBase
    except ImportError:
        _LBase = object

__all__ = ["LightningCallback", "StepLog", "TrainerCallback"]


class StepLog:
    """What both callbacks log: each finished step's metrics, from the
    probe's own events (the record's `phase` and `step` lines), so the
    logged values are the record's."""

    def __init__(self, record=None, estimate=None, on_fallback=None):
        from . import probe
        self.probe = probe.install(record=record)
        self.pending = []  # (probe step, metrics), not yet logged
        self.bills = {}  # phase -> the bill the probe wrote at its end, this step
        if isinstance(estimate, dict):
            estimate = estimate.get("peak_allocated_bytes")
        self.estimate = estimate
        self.on_fallback = on_fallback
        self.fell_back = False
        if self.probe is not None:
            self.probe.w.listeners.append(self.on_event)

    def on_event(self, ev):
        kind = ev.get("type")
        if kind == "phase" and ev.get("bill"):
            self.bills[ev.get("phase")] = ev["bill"]
        elif kind == "step":
            self.pending.append((ev.get("step"), self.metrics(ev)))
            self.bills = {}

    def metrics(self, ev):
        """One step event (and the bills of its phases) as metrics."""
        m = {}
        for k in ("peak_allocated", "peak_reserved"):
            if ev.get(k) is not None:
                m["vramledger/%s_gib" % k] = ev[k] / GIB
        bill = self.bills.get(ev.get("peak_phase"))
        if bill is None and self.bills:  # no allocator statistics (CPU): the largest bill
            bill = max(self.bills.values(), key=lambda b: sum(v or 0 for v in b.values()))
        for part, n in (bill or {}).items():
            if n:
                m["vramledger/bill/%s_gib" % part] = n / GIB
        if self.estimate and ev.get("peak_allocated") is not None:
            m["vramledger/estimate_gap_pct"] = 100.0 * (ev["peak_allocated"] - self.estimate) \
                / self.estimate
        m["vramledger/fallback_requested"] = 1 if fallback_requested() else 0
        return m

    def take(self):
        """The metrics of the steps finished since the last call, and the
        commitment's fallback trigger said once."""
        out, self.pending = self.pending, []
        if not self.fell_back and any(m["vramledger/fallback_requested"] for _, m in out):
            self.fell_back = True
            sys.stderr.write("vramledger: the commitment's fallback trigger fired: switch to the "
                             "fallback it names (vramledger.fallback_requested() is now True)\n")
            if self.on_fallback is not None:
                self.on_fallback()
        return out


def _emit(writers, metrics, step):
    for w in writers:
        try:
            w(metrics, step)
        except Exception as ex:  # noqa: BLE001 - a logger never stops training
            sys.stderr.write("vramledger: a metrics logger failed: %r\n" % (ex,))


def _tensorboard(log_dir):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # noqa: BLE001 - no tensorboard package: nothing to write to
        return None
    sw = SummaryWriter(log_dir=log_dir)

    def write(metrics, step):
        for k, v in metrics.items():
            sw.add_scalar(k, v, step)
        sw.flush()
    return write


def _wandb():
    wandb = sys.modules.get("wandb")  # only a W&B the job itself uses
    if wandb is None or getattr(wandb, "run", None) is None:
        return None
    return lambda metrics, step: wandb.log(metrics, step=step)


class TrainerCallback(_HFBase):
    """transformers.Trainer's callback. WRITERS: callables (metrics, step)
    instead of TensorBoard and W&B (tests, other loggers)."""

    def __init__(self, record=None, estimate=None, on_fallback=None, writers=None):
        self.steps = StepLog(record, estimate, on_fallback)
        self.writers = writers

    def on_train_begin(self, args, state, control, **kwargs):
        if self.writers is None:
            self.writers = [w for w in (_tensorboard(getattr(args, "logging_dir", None)),
                                        _wandb()) if w]

    def on_step_end(self, args, state, control, **kwargs):
        if self.writers is None:
            self.on_train_begin(args, state, control)
        for _, m in self.steps.take():
            _emit(self.writers, m, state.global_step)
        return control


class LightningCallback(_LBase):
    """Lightning's callback: the metrics go to the Trainer's loggers
    (TensorBoard, W&B, CSV: whichever the Trainer has)."""

    def __init__(self, record=None, estimate=None, on_fallback=None):
        self.steps = StepLog(record, estimate, on_fallback)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loggers = list(getattr(trainer, "loggers", None) or [])
        writers = [lg.log_metrics for lg in loggers if hasattr(lg, "log_metrics")]
        for _, m in self.steps.take():
            _emit(writers, m, trainer.global_step)
