#!/bin/sh
# fit's speed: synthetic sweeps of 10^4, 10^5 and 10^6 rows (batch, seq,
# peak_bytes with 2 % noise), fitted with three terms; wall seconds and
# peak RSS of `vramledger fit --csv` (bench/results/speed/README.md#fit).
#   sh bench/speed/fit.sh [VRAMLEDGER]
set -eu
vl=${1:-build-release/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 10000 100000 1000000; do
  python3 - "$n" "$tmp/fit.csv" <<'P'
import random, sys
random.seed(1)
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("batch,seq,peak_bytes,status\n")
    for _ in range(n):
        b, s = random.randint(1, 64), random.randint(64, 8192)
        f.write("%d,%d,%.0f,ok\n" % (b, s, (1e9 + 3e5 * b * s + 40 * b * s * s) * (1 + random.uniform(-0.02, 0.02))))
P
  /usr/bin/time -f "$n rows: %e s wall, %M KiB peak RSS" "$vl" fit --csv "$tmp/fit.csv" \
    --terms const,bs,batch*seq^2 >/dev/null
done
