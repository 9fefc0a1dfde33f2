#!/bin/sh
# Golden CLI tests: for every cases/NAME.args, run `vramledger ARGS` from the
# cases directory and compare stdout, stderr and the exit code with
# NAME.out, NAME.err and NAME.rc. A NAME.filter (a shell command reading
# stdout) pins what the case tests: its output is what NAME.out holds.
# VL_REGEN=1 rewrites them (review the diff).
set -u
bin=$1
dir=$2
fail=0
n=0
cd "$dir" || exit 1
# estimate's dry run with a Python that has neither torch nor transformers
# here, whatever python3 has (tests/cli/run_tests.sh runs real dry runs)
export VRAMLEDGER_PYTHON=../python-without-torch
# Hub ids are looked up in a cache of the cases' own (hf-cache/models--ORG--NAME)
export HF_HUB_CACHE=hf-cache
for args in *.args; do
  name=${args%.args}
  n=$((n + 1))
  eval "set -- $(cat "$args")"
  "$bin" "$@" >"/tmp/vl_golden.$$.out" 2>"/tmp/vl_golden.$$.err"
  rc=$?
  if [ -f "$name.filter" ]; then
    sh -c "$(cat "$name.filter")" <"/tmp/vl_golden.$$.out" >"/tmp/vl_golden.$$.f" &&
      mv "/tmp/vl_golden.$$.f" "/tmp/vl_golden.$$.out"
  fi
  if [ "${VL_REGEN:-0}" = 1 ]; then
    cp "/tmp/vl_golden.$$.out" "$name.out"
    cp "/tmp/vl_golden.$$.err" "$name.err"
    echo "$rc" >"$name.rc"
    continue
  fi
  ok=1
  if [ "$rc" != "$(cat "$name.rc")" ]; then
    echo "FAIL $name: exit $rc, want $(cat "$name.rc")"
    ok=0
  fi
  if ! diff -u "$name.out" "/tmp/vl_golden.$$.out"; then
    echo "FAIL $name: stdout differs"
    ok=0
  fi
  if ! diff -u "$name.err" "/tmp/vl_golden.$$.err"; then
    echo "FAIL $name: stderr differs"
    ok=0
  fi
  [ $ok = 1 ] && echo "ok   $name" || fail=$((fail + 1))
done
rm -f "/tmp/vl_golden.$$.out" "/tmp/vl_golden.$$.err"
echo "$n cases, $fail failed"
[ "$n" -gt 0 ] && [ $fail = 0 ]
