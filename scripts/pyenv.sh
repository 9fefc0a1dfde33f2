#!/bin/sh
# Make (or reuse) the virtual environment of tests/python/stack/requirements.txt
# and print its Python. Cached in $VRAMLEDGER_PYENV_CACHE (default
# ~/.cache/vramledger), one folder per content of the requirements, so a
# machine that keeps its home directory builds it once.
#   py=$(scripts/pyenv.sh)
set -eu
cd "$(dirname "$0")/.."
req=tests/python/stack/requirements.txt
key=$(sha256sum "$req" | cut -c1-12)
cache=${VRAMLEDGER_PYENV_CACHE:-${HOME:-/tmp}/.cache/vramledger}
dir=$cache/pyenv-$key
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/bin/python"
  exit 0
fi
# torch 2.13.0's CPU wheel is built for CPython 3.11
py=""
for c in python3.11 python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    py=$c
    break
  fi
done
if [ -z "$py" ]; then
  echo "pyenv.sh: no Python 3.11 with venv found (torch 2.13.0's CPU wheel needs it); install python3.11 and python3-venv" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$cache"
echo "pyenv.sh: building $dir from $req (once; cached)" >&2
"$py" -m venv "$dir" >&2
if ! "$dir/bin/pip" install -q --disable-pip-version-check -r "$req" >"$dir.log" 2>&1; then
  tail -20 "$dir.log" >&2
  echo "pyenv.sh: pip could not install $req into $dir (its messages: $dir.log): is the package registry reachable?" >&2
  rm -rf "$dir"
  exit 1
fi
# the CPU build, never a CUDA one
if ! "$dir/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is not None)' >&2; then
  echo "pyenv.sh: $dir holds a CUDA build of torch; the CPU wheel (torch==2.13.0+cpu) was expected" >&2
  rm -rf "$dir"
  exit 1
fi
touch "$dir/.complete"
echo "$dir/bin/python"
