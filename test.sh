#!/bin/sh
# The whole test suite, as CI runs it: warnings as errors, every ctest test,
# a Release build as a user makes it (built only), then every test again
# under AddressSanitizer + UndefinedBehaviorSanitizer, and the formatting
# check.
set -eu
cd "$(dirname "$0")"
scripts/deps.sh
jobs=$(nproc)

echo "== build (-Werror) and test"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVL_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== Release build (as a user builds it: -O3, warnings not errors)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j"$jobs"

echo "== ASan + UBSan build and test"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DVL_WERROR=ON -DVL_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== clang-format"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find lib src include tests -name '*.[ch]')
clang-format --dry-run --Werror $files
echo "all tests passed"
