#!/bin/sh
# The whole test suite, as CI runs it: the build a user makes (./setup.sh,
# CMakeLists.txt's default RelWithDebInfo) with warnings as errors, and
# every ctest test on it (the Python ones on Debian's torch 1.13 and on the
# stack of tests/python/stack/requirements.txt, built once by
# scripts/pyenv.sh and cached), then every test but the stack's and those of
# no compiled code (label `once`) again under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the formatting check.
set -eu
cd "$(dirname "$0")"
scripts/deps.sh
jobs=$(nproc)
# a new build tree is Ninja's (39 s on two cores where make's takes 47 s);
# one that exists (./setup.sh's, docs/install.md's) keeps its generator
generator() { [ -f "$1/CMakeCache.txt" ] || echo "-G Ninja"; }
echo "== the Python stack (tests/python/stack/requirements.txt)"
stack=$(scripts/pyenv.sh)
echo "$stack"

echo "== build (-Werror) and test, the ASan + UBSan build beside the tests"
cmake -S . -B build $(generator build) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVL_WERROR=ON -DVL_STACK_PYTHON="$stack" >/dev/null
cmake --build build -j"$jobs"
# the sanitizers' build fills the cores the tests leave idle (their waits,
# the tests run alone); its output is shown if it fails
cmake -S . -B build-asan $(generator build-asan) -DCMAKE_BUILD_TYPE=Debug -DVL_WERROR=ON -DVL_SANITIZE=ON >/dev/null
setsid sh -c 'cmake --build build-asan -j"$1" >build-asan/build.log 2>&1; echo $? >build-asan/build.rc' \
  sh "$jobs" &
asan=$!
trap 'kill -TERM -"$asan" 2>/dev/null || :' EXIT # its process group, should a test fail
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ASan + UBSan test"
wait $asan
if [ "$(cat build-asan/build.rc)" != 0 ]; then
  cat build-asan/build.log
  exit 1
fi
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE 'stack|once'

echo "== clang-format"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find lib src include tests -name '*.[ch]')
clang-format --dry-run --Werror $files
echo "all tests passed"
