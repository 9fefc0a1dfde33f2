#!/bin/sh
# The Python package as docs/install.md installs it, offline (--no-index),
# into a fresh virtual environment of each PYTHON that has pip and nothing
# else (no setuptools, no wheel): pip install ./python, then
# vramledger.__version__ is the program's `--version`; pip install -e
# ./python imports the source's files; the sdist installs too. The build
# leaves the source tree as it was.
# usage: python_install.sh PROGRAM SOURCE_DIR PYTHON...
set -u
vl=$1 src=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
# pip as a user has it, less the user's configuration; nothing compiled into the tree
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH VRAMLEDGER_BIN
want=$("$vl" --version | sed -n 's/^vramledger \([^ ]*\)$/\1/p')
check "the program says its version" [ -n "$want" ]
cd "$src" || exit 1
tree() { find python -name __pycache__ -prune -o -print | sort; }
tree >"$tmp/before"

i=0
for py in "$@"; do
  i=$((i + 1))
  v=$tmp/venv$i
  "$py" -m venv "$v" >"$tmp/venv$i.log" 2>&1
  check "$py: a virtual environment with pip" [ -x "$v/bin/pip" ]
  [ -x "$v/bin/pip" ] || continue
  "$v/bin/pip" uninstall -y setuptools wheel >/dev/null 2>&1
  "$v/bin/python" -c "import setuptools" 2>/dev/null
  check "$py: no setuptools in it" [ $? != 0 ]
  "$v/bin/python" -c "import wheel" 2>/dev/null
  check "$py: no wheel in it" [ $? != 0 ]

  "$v/bin/pip" install --no-index ./python >"$tmp/pip$i.log" 2>&1
  check "$py: pip install --no-index ./python" [ $? = 0 ]
  (cd "$tmp" && "$v/bin/python" -c "import vramledger; print(vramledger.__version__); print(vramledger.__file__)") \
    >"$tmp/ver$i" 2>&1
  check "$py: vramledger.__version__ is the program's ($want)" [ "$(sed -n 1p "$tmp/ver$i")" = "$want" ]
  check "$py: imported from the environment" \
    grep -q "^$v/lib/python[0-9.]*/site-packages/vramledger/__init__.py$" "$tmp/ver$i"
  (cd "$tmp" && VRAMLEDGER_BIN=$vl "$v/bin/python" -m vramledger --version) >"$tmp/pym$i" 2>&1
  check "$py: python -m vramledger --version" [ "$(cat "$tmp/pym$i")" = "vramledger $want" ]
  "$v/bin/pip" show vramledger >"$tmp/show$i" 2>&1
  check "$py: pip show: the version" grep -qx "Version: $want" "$tmp/show$i"
  "$v/bin/pip" uninstall -y vramledger >/dev/null 2>&1
  check "$py: pip uninstall removes it" [ ! -e "$(dirname "$(sed -n 2p "$tmp/ver$i")")" ]

  "$v/bin/pip" install --no-index -e ./python >"$tmp/pipe$i.log" 2>&1
  check "$py: pip install --no-index -e ./python" [ $? = 0 ]
  (cd "$tmp" && "$v/bin/python" -c "import vramledger; print(vramledger.__file__)") >"$tmp/ed$i" 2>&1
  check "$py: the editable install imports the source" \
    [ "$(cat "$tmp/ed$i")" = "$src/python/vramledger/__init__.py" ]
  "$v/bin/pip" uninstall -y vramledger >/dev/null 2>&1

  (cd python && "$v/bin/python" -c "
import sys; sys.path.insert(0, '_build')
import vramledger_build; print(vramledger_build.build_sdist(sys.argv[1]))" "$tmp") >"$tmp/sdist$i" 2>&1
  "$v/bin/pip" install --no-index "$tmp/$(cat "$tmp/sdist$i")" >"$tmp/pips$i.log" 2>&1
  check "$py: pip install --no-index of the sdist" [ $? = 0 ]
  (cd "$tmp" && "$v/bin/python" -c "import vramledger; print(vramledger.__version__)") >"$tmp/sv$i" 2>&1
  check "$py: the sdist's version" [ "$(cat "$tmp/sv$i")" = "$want" ]
  rm -f "$tmp/$(cat "$tmp/sdist$i")"
done
tree >"$tmp/after"
check "the builds left python/ as it was" cmp -s "$tmp/before" "$tmp/after"
[ $fail = 0 ] || for f in "$tmp"/*.log; do echo "--- $f"; tail -5 "$f"; done
echo "$n checks, $fail failed"
[ "$fail" = 0 ]
