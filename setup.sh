#!/bin/sh
# Newcomer's first command: install what is missing, build, and run the main
# job on a bundled model.
set -eu
cd "$(dirname "$0")"
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "built: build/vramledger"
echo
./build/vramledger estimate --model llama-3-8b --batch 4 --seq 2048 --precision amp-bf16 \
  --optimizer adamw --gpu h100-80gb || [ $? = 3 ]
