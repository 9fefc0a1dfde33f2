#!/bin/sh
# cmake --install into a DESTDIR, then the installed vramledger used from
# another directory with nothing pointing at the source or build trees: it
# finds its data, Python side and interposer beside itself (--paths);
# estimate of a bundled model; run with the fake NVML and stub CUDA (the
# record says the interposer and the probe were on, and the interposer
# counted); trace of a tiny CPU job; the man pages; a missing interposer is
# said. Then `pip install ./python` in a virtual environment, offline, and
# the package's callbacks and estimate() from there.
# usage: install_tests.sh BUILD_DIR SOURCE_DIR FAKE_NVML STUB_DIR PRELOAD_TEST PYTHON
# (PYTHON: Debian's, with its torch)
set -u
build=$1 src=$2 fake=$3 stub=$4 prog=$5 py=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
unset VRAMLEDGER_DATA VRAMLEDGER_PYTHON_DIR VRAMLEDGER_PRELOAD VRAMLEDGER_BIN
cd "$tmp" || exit 1

DESTDIR="$tmp/root" cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1
check "cmake --install succeeds" [ $? = 0 ]
vl=$tmp/root/usr/bin/vramledger
check "the interposer is installed" [ -f "$tmp/root/usr/lib/vramledger/libvramledger-preload.so" ]
check "the bundled data is installed" [ -f "$tmp/root/usr/share/vramledger/data/models/gpt2.json" ]
check "the probe is installed" [ -f "$tmp/root/usr/share/vramledger/python/site/sitecustomize.py" ]
check "bash completion is installed" [ -f "$tmp/root/usr/share/bash-completion/completions/vramledger" ]
# moved: a copy elsewhere finds its files relative to itself
mv "$tmp/root" "$tmp/moved"
vl=$tmp/moved/usr/bin/vramledger
"$vl" --paths >"$tmp/paths"
check "data found beside the executable" grep -q "^data  *$tmp/moved/usr/share/vramledger/data$" "$tmp/paths"
check "python found beside the executable" grep -q "^python  *$tmp/moved/usr/share/vramledger/python$" "$tmp/paths"
check "interposer found beside the executable" grep -q "^interposer  *$tmp/moved/usr/lib/vramledger/libvramledger-preload.so$" "$tmp/paths"
comp() { # comp WORD...: what the installed bash completion offers for the last word
  bash -c ". '$tmp/moved/usr/share/bash-completion/completions/vramledger'
    COMP_WORDS=(\"\$@\"); COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1)); _vramledger
    printf '%s\\n' \"\${COMPREPLY[@]}\"" comp "$vl" "$@"
}
comp es >"$tmp/c1"
check "completion: commands" grep -qx estimate "$tmp/c1"
comp estimate --max >"$tmp/c2"
check "completion: a command's options" grep -qx -- --max-batch "$tmp/c2"
comp estimate --model llama-3 >"$tmp/c3"
check "completion: bundled models" grep -qx llama-3-8b "$tmp/c3"
"$vl" estimate --model gpt2 --seq 1024 >"$tmp/est" 2>&1
check "estimate of a bundled model" grep -q "parameters 124,439,808" "$tmp/est"

: >"$tmp/procs"
VRAMLEDGER_NVML_LIB=$fake LD_LIBRARY_PATH=$stub FAKE_NVML_PROCS=$tmp/procs \
  "$vl" run --out "$tmp/hold" --interval-ms 10 --quiet -- "$prog" hold 64 0.3 "$tmp/procs"
check "run succeeds" [ $? = 0 ]
check "the record says the interposer was on" grep -q '"interposer":"on"' "$tmp/hold/record.jsonl"
check "the record says the probe was on" grep -q '"probe":"on"' "$tmp/hold/record.jsonl"
check "the interposer counted the job's 64 MiB" \
  sh -c "'$vl' report '$tmp/hold' --format json | grep -q '\"cuda_alloc_bytes\": 67108864'"
mv "$tmp/moved/usr/lib/vramledger" "$tmp/gone"
VRAMLEDGER_NVML_LIB=$fake "$vl" run --out "$tmp/nopre" --quiet -- true 2>"$tmp/nopre.err"
check "a missing interposer is said" grep -q "warning: the interposer .* is missing" "$tmp/nopre.err"
check "and recorded" grep -q '"interposer":"missing: ' "$tmp/nopre/record.jsonl"
mv "$tmp/gone" "$tmp/moved/usr/lib/vramledger"

if "$py" -c "import torch" 2>/dev/null; then
  cat >"$tmp/job.py" <<'P'
import torch
x = torch.ones(256, 256)
y = (x @ x).sum()
P
  "$vl" trace --out "$tmp/tr" --format json -- "$py" "$tmp/job.py" >"$tmp/tr.json" 2>"$tmp/tr.err"
  check "trace of a CPU job with the installed probe" grep -q '"allocations"' "$tmp/tr.json"
fi
if command -v man >/dev/null; then
  MANPATH=$tmp/moved/usr/share/man man vramledger-estimate 2>/dev/null | grep -q "VRAMLEDGER-ESTIMATE"
  check "man vramledger-estimate" [ $? = 0 ]
  MANPATH=$tmp/moved/usr/share/man man vramledger 2>/dev/null | grep -q "vramledger-plan(1)"
  check "man vramledger lists the pages" [ $? = 0 ]
else
  check "the man pages are roff" grep -q '^\.TH VRAMLEDGER-ESTIMATE 1' "$tmp/moved/usr/share/man/man1/vramledger-estimate.1"
fi

# the Python package, offline, into a virtual environment that sees Debian's torch
"$py" -m venv --system-site-packages "$tmp/venv" >/dev/null 2>&1
check "a virtual environment" [ -x "$tmp/venv/bin/pip" ]
# the build backend needs nothing from the index (python_install: with pip alone)
(cd "$src" && PYTHONDONTWRITEBYTECODE=1 PIP_CONFIG_FILE=/dev/null \
  "$tmp/venv/bin/pip" install --no-index --quiet ./python) >"$tmp/pip.log" 2>&1
check "pip install ./python, offline" [ $? = 0 ]
PATH="$tmp/moved/usr/bin:$PATH" "$tmp/venv/bin/python" -c "
import vramledger
e = vramledger.estimate('gpt2', seq=1024)
assert e['params'] == 124439808, e['params']
print(vramledger.__file__)" >"$tmp/py.out" 2>&1
check "the installed package calls the installed program" grep -q "$tmp/venv/lib/python.*/site-packages/vramledger/__init__.py" "$tmp/py.out"
PATH="$tmp/moved/usr/bin:$PATH" "$tmp/venv/bin/python" -m vramledger --version >"$tmp/pym" 2>&1
check "python -m vramledger" grep -q "^vramledger " "$tmp/pym"
"$tmp/venv/bin/python" -c "import vramledger; print('vramledger', vramledger.__version__)" >"$tmp/pyv" 2>&1
check "vramledger.__version__ is the installed program's" cmp -s "$tmp/pym" "$tmp/pyv"
if "$tmp/venv/bin/python" -c "import torch" 2>/dev/null; then
  "$tmp/venv/bin/python" "$src/tests/python/job_callbacks.py" "$tmp/cb.jsonl" "$tmp/cb.json" 4 2>"$tmp/cb.err"
  check "the callbacks from the installed package" [ $? = 0 ]
  "$tmp/venv/bin/python" - "$tmp/cb.json" "$tmp/cb.jsonl" <<'P' >"$tmp/cbcheck" 2>&1
import json, sys
logged = json.load(open(sys.argv[1]))["hf"]
steps = [json.loads(l) for l in open(sys.argv[2]) if '"type":"step"' in l]
assert [s for s, _ in logged] == [1, 2, 3, 4], logged
assert len(steps) == 4
print("ok")
P
  check "their values are the record's steps" grep -q "^ok" "$tmp/cbcheck"
fi
echo "$n checks, $fail failed"
[ "$fail" = 0 ]
