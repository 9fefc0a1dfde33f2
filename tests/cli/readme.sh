#!/bin/sh
# Every command line in README.md that starts with "vramledger " runs and
# exits 0 (or 3, "does not fit", where the example says so with "# exit 3");
# lines marked "# needs a GPU" (or "# needs a ... job of yours") are listed
# and skipped.
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
echo "$n examples, $fail failed"
[ $n -gt 0 ] && [ $fail = 0 ]
