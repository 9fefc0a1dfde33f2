#!/bin/sh
# Every command line in README.md that starts with "vramledger " runs and
# exits 0 (or 3, "does not fit", where the example says so with "# exit 3");
# lines marked "# needs a GPU" (or "# needs a ... job of yours") are listed
# and skipped. Every "pip install ARGS" line runs offline (--no-index) in
# a fresh virtual environment of the python3 on PATH holding pip alone (no
# setuptools, no wheel), and the package then imports.
set -u
bin=$1
readme=$2
n=0
fail=0
grep -E '^ *(\$ )?vramledger ' "$readme" | sed -E 's/^ *(\$ )?vramledger //' > /tmp/vl_readme.$$
while IFS= read -r line; do
  n=$((n + 1))
  want=0
    case "$line" in *"# exit 3"*) want=3 ;; esac
  case "$line" in *"# needs a GPU"*|*"# needs a "*"job of yours"*)
    echo "skip vramledger ${line%%#*}(${line#*# })"
    continue ;;
  esac
  cmd=${line%%#*}
  eval "set -- $cmd"
  "$bin" "$@" >/dev/null 2>/tmp/vl_readme_err.$$
  rc=$?
  if [ $rc != $want ]; then
    echo "FAIL (exit $rc, want $want): vramledger $cmd"
    cat /tmp/vl_readme_err.$$
    fail=$((fail + 1))
  else
    echo "ok   vramledger $cmd"
  fi
done < /tmp/vl_readme.$$
rm -f /tmp/vl_readme.$$ /tmp/vl_readme_err.$$

grep -E '^ *(\$ )?pip install ' "$readme" | sed -E 's/^ *(\$ )?pip install //' > /tmp/vl_readme.$$
venv=$(mktemp -d)
while IFS= read -r line; do
  n=$((n + 1))
  cmd=${line%%#*}
  eval "set -- $cmd"
  rm -rf "$venv/v"
  python3 -m venv "$venv/v" >"$venv/log" 2>&1 &&
    { "$venv/v/bin/pip" uninstall -y setuptools wheel >/dev/null 2>&1; true; } &&
    PIP_CONFIG_FILE=/dev/null PYTHONDONTWRITEBYTECODE=1 \
      "$venv/v/bin/pip" install --no-index --disable-pip-version-check "$@" >"$venv/log" 2>&1 &&
    (cd "$venv" && PYTHONDONTWRITEBYTECODE=1 "$venv/v/bin/python" -c "import vramledger") \
      >"$venv/log" 2>&1
  if [ $? != 0 ]; then
    echo "FAIL (python3 -m venv; pip install --no-index; import vramledger): pip install $cmd"
    tail -5 "$venv/log"
    fail=$((fail + 1))
  else
    echo "ok   pip install $cmd"
  fi
done < /tmp/vl_readme.$$
rm -rf /tmp/vl_readme.$$ "$venv"
echo "$n examples, $fail failed"
[ $n -gt 0 ] && [ $fail = 0 ]
