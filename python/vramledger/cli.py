"""The vramledger program from Python: estimate(), plan() and run_cli() call
the installed binary and return its JSON as Python objects
(docs/python.md). The binary is $VRAMLEDGER_BIN, else `vramledger` on PATH,
else the build of the source tree this package sits in."""
import json
import os
import shutil
import subprocess

__all__ = ["VramledgerError", "binary", "estimate", "plan", "run_cli"]


class VramledgerError(RuntimeError):
    """The program could not be found, or it refused the job: .returncode
    and .stderr hold what it said."""

    def __init__(self, message, returncode=None, stderr=""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def binary():
    """The vramledger executable's path; VramledgerError when there is none."""
    env = os.environ.get("VRAMLEDGER_BIN")
    if env:
        return env
    found = shutil.which("vramledger")
    if found:
        return found
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for build in ("build", "build-release"):
        p = os.path.join(here, build, "vramledger")
        if os.access(p, os.X_OK):
            return p
    raise VramledgerError("the vramledger program is not installed: install it (README.md, "
                          "\"Install\") or set VRAMLEDGER_BIN to its path")


def _flags(kw):
    """keyword arguments as command-line flags: batch=8 -> --batch 8,
    lora_rank=16 -> --lora-rank 16, dry_run=True -> --dry-run; False and
    None are left out; a list is comma-joined (lora_targets=["q_proj","v_proj"])."""
    out = []
    for k, v in kw.items():
        if v is None or v is False:
            continue
        flag = "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        elif isinstance(v, (list, tuple)):
            out += [flag, ",".join(str(x) for x in v)]
        else:
            out += [flag, str(v)]
    return out


def run_cli(args, ok=(0,)):
    """Run `vramledger ARGS...`; its stdout parsed as JSON when the exit
    status is in OK (and the output is JSON), else VramledgerError."""
    p = subprocess.run([binary()] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode not in ok:
        msg = p.stderr.strip().splitlines()
        raise VramledgerError(msg[0] if msg else "vramledger exited with %d" % p.returncode,
                              p.returncode, p.stderr)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return p.stdout


def estimate(model, **flags):
    """`vramledger estimate --model MODEL --format json` with FLAGS (any of
    `vramledger estimate --help`'s options as keywords: batch=4, seq=2048,
    precision="bf16", lora_rank=16, gpu="h100-80gb", dry_run=True). Returns
    the estimate's JSON (docs/cmd/estimate.md); a job that does not fit
    the --gpu card is an answer ("fits": false), not an error."""
    return run_cli(["estimate", "--model", model, "--format", "json"] + _flags(flags), ok=(0, 3))


def plan(model, **flags):
    """`vramledger plan --model MODEL --format json` with FLAGS (tokens=...,
    seq=..., global_batch=..., gpus="h100-80gb,a100-80gb", max_gpus=8).
    Returns the plan's JSON (docs/cmd/plan.md)."""
    return run_cli(["plan", "--model", model, "--format", "json"] + _flags(flags), ok=(0, 3))
