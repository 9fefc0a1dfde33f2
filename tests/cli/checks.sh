# Sourced by the end-to-end CLI test scripts: check NAME CONDITION... runs
# CONDITION, prints "ok   NAME" or "FAIL NAME", and counts both (n, fail).
fail=0
n=0
check() {
  name=$1
  shift
  n=$((n + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=$((fail + 1)); fi
}
