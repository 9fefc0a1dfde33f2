#!/bin/sh
# The Training Resource Commitment as a team uses it, end to end: plan ->
# commit -> check from another folder and from a fresh copy of the
# repository -> an edited config fails with the key named -> a bundled
# name is never shadowed by a file -> run (fake NVML) -> audit passes; the
# same run against other hardware fails. docs/cmd/{commit,check,audit}.md.
set -u
vl=$1 fake=$2 preload=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$preload"
: "${VRAMLEDGER_DATA:?the bundled data (set by ctest)}"
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
has() { grep -q -- "$2" "$1"; } # has FILE TEXT

# a repository: a config by relative path, a catalog with the fake GPU
repo=$tmp/repo
mkdir -p "$repo/configs" "$repo/plan" "$tmp/elsewhere"
cp "$VRAMLEDGER_DATA/models/qwen2-0.5b.json" "$repo/configs/model.json"
cat >"$repo/gpus.json" <<'EOF'
{"schema": "vramledger.gpus/1", "date": "2026-11-29", "gpus": [
 {"name": "fake-gpu", "label": "the fake NVML's GPU (tests/fake/fake_nvml.c)",
  "memory_bytes": 141000000000, "bf16_tflops": 100, "hbm_gb_s": 1000, "usd_per_hour": 1.0}]}
EOF
job="--batch 4 --seq 512 --keep-grads"
cd "$repo" || exit 1

# plan -> commit: a bundled name, or the config's absolute path, read from any folder
"$vl" plan --model configs/model.json --tokens 10000000 --seq 512 --global-batch 4 --gpus h200 \
  --max-gpus 1 --format json >plan/plan.json
check "plan writes its best configuration" has plan/plan.json '"best": {'
check "the plan names the config by its absolute path" has plan/plan.json "\"model\": \"$repo/configs/model.json\""
(cd "$tmp/elsewhere" && "$vl" commit --plan "$repo/plan/plan.json" --out "$tmp/from-plan" >/dev/null)
check "commit --plan (a config path) from another folder" [ $? = 0 ]
"$vl" plan --model qwen2-0.5b --tokens 10000000 --seq 512 --global-batch 4 --gpus h200 \
  --max-gpus 1 --format json >plan/bundled.json
(cd "$tmp/elsewhere" && "$vl" commit --plan "$repo/plan/bundled.json" --out "$tmp/from-bundled-plan" \
  >/dev/null)
check "commit --plan (a bundled model) from another folder" [ $? = 0 ]

# commit: the model by its content, its path relative to the commitment
"$vl" commit --model configs/model.json --catalog gpus.json --gpu fake-gpu $job --out plan >/dev/null
check "commit writes the commitment" [ -f plan/commitment.json ]
check "it stores the config's path relative to itself" has plan/commitment.json '"file": "../configs/model.json"'
check "and the config's SHA-256" has plan/commitment.json '"sha256": "[0-9a-f]\{64\}"'
"$vl" commit --model configs/model.json --catalog gpus.json --gpu fake-gpu $job --out plan 2>"$tmp/err" >/dev/null
check "commit does not replace a commitment" [ $? = 1 ]
check "and says what to do" has "$tmp/err" "give --force"
"$vl" commit --model configs/model.json --catalog gpus.json --gpu fake-gpu $job --out plan --force >/dev/null
check "commit --force replaces it" [ $? = 0 ]

# a full disk (a 64 KiB tmpfs, filled): commit --force of a larger
# commitment (a config file's copy in it) fails, naming the file, and
# leaves the reviewed one byte for byte as it was, no temporary beside it
mnt=$tmp/full
mkdir -p "$mnt"
if mount -t tmpfs -o size=64k tmpfs "$mnt" 2>/dev/null; then
  trap 'umount "$mnt"; rm -rf "$tmp"' EXIT
  "$vl" commit --model qwen2-0.5b --catalog gpus.json --gpu fake-gpu $job --out "$mnt" >/dev/null
  cp "$mnt/commitment.json" "$mnt/COMMITMENT.md" "$tmp/"
  dd if=/dev/zero of="$mnt/filler" bs=4096 2>/dev/null
  "$vl" commit --model configs/model.json --catalog gpus.json --gpu fake-gpu $job --out "$mnt" \
    --force >/dev/null 2>"$tmp/err"
  check "commit --force on a full disk: exit 1" [ $? = 1 ]
  check "it names the file and the cause" has "$tmp/err" \
    "cannot write '$mnt/commitment.json': No space left on device; '$mnt/commitment.json' is as it was"
  check "the commitment is as it was" cmp -s "$tmp/commitment.json" "$mnt/commitment.json"
  check "and COMMITMENT.md" cmp -s "$tmp/COMMITMENT.md" "$mnt/COMMITMENT.md"
  check "no temporary left" [ "$(ls -A "$mnt" | wc -l)" = 3 ]
  # the same disk: trace --snapshot (a new file) leaves no cut pickle
  "$vl" trace --replay "$(dirname "$0")/../data/traces/batch.trace" --snapshot "$mnt/s.pickle" \
    >/dev/null 2>"$tmp/err"
  check "trace --snapshot on a full disk: exit 1" [ $? = 1 ]
  check "no partial snapshot left" [ ! -e "$mnt/s.pickle" ]
  check "said" has "$tmp/err" "s.pickle': No space left on device; the partial file is removed"
  rm "$mnt/filler"
  chmod 600 "$mnt/commitment.json"
  "$vl" commit --model configs/model.json --catalog gpus.json --gpu fake-gpu $job --out "$mnt" \
    --force >/dev/null
  check "with room again, --force replaces it" has "$mnt/commitment.json" '"file": '
  check "in the mode it had" [ "$(stat -c %a "$mnt/commitment.json")" = 600 ]
else
  echo "skip the full disk: cannot mount a tmpfs here (it needs root)"
fi

# check from another folder, and from a fresh copy of the repository
(cd "$tmp/elsewhere" && "$vl" check --commitment "$repo/plan/commitment.json" $job >"$tmp/out" \
  2>"$tmp/err")
check "check without the catalog that has the committed card: exit 2" [ $? = 2 ]
check "it names the file, the card and the fix" has "$tmp/err" \
  "error: '$repo/plan/commitment.json': the committed card 'fake-gpu' is not in the bundled GPU catalog"
check "and the fix" has "$tmp/err" "give the catalog it was committed with (--catalog FILE)"
(cd "$tmp/elsewhere" && "$vl" check --commitment "$repo/plan/commitment.json" \
  --catalog "$repo/gpus.json" $job >"$tmp/out")
check "check from another folder: consistent" [ $? = 0 ]
cp -R "$repo" "$tmp/clone"
(cd "$tmp/elsewhere" && "$vl" check --commitment ../clone/plan/commitment.json \
  --catalog ../clone/gpus.json $job >"$tmp/out")
check "check of a fresh copy: consistent" [ $? = 0 ]
cp configs/model.json "$tmp/elsewhere/same.json"
"$vl" check --commitment plan/commitment.json --catalog gpus.json --model "$tmp/elsewhere/same.json" \
  $job >"$tmp/out"
check "the same config by another path: consistent" [ $? = 0 ]
"$vl" check --commitment plan/commitment.json --catalog gpus.json --model qwen2-0.5b $job >"$tmp/out"
check "the same config as the bundled name: consistent" [ $? = 0 ]
"$vl" check --commitment plan/commitment.json --catalog gpus.json --batch 8 --seq 512 --keep-grads \
  --format json >"$tmp/out"
check "check --format json: a drift exits 3" [ $? = 3 ]
check "with the field and both values" sh -c "grep -q '\"field\": \"batch\"' '$tmp/out' && grep -q '\"committed\": \"4\"' '$tmp/out' && grep -q '\"current\": \"8\"' '$tmp/out'"

# an edited config under the same name: drift, the key named
sed 's/"num_hidden_layers": 24/"num_hidden_layers": 34/' "$tmp/clone/configs/model.json" >"$tmp/m"
mv "$tmp/m" "$tmp/clone/configs/model.json"
(cd "$tmp/elsewhere" && "$vl" check --commitment ../clone/plan/commitment.json \
  --catalog ../clone/gpus.json $job >"$tmp/out")
check "an edited config: drift, exit 3" [ $? = 3 ]
check "the key named with both values" has "$tmp/out" "num_hidden_layers is 34, the commitment says 24"
check "the file named" has "$tmp/out" "restore it in '../clone/configs/model.json'"

# a file named like a bundled model does not shadow it
sed 's/"num_hidden_layers": 24/"num_hidden_layers": 2/' configs/model.json >"$tmp/elsewhere/qwen2-0.5b"
(cd "$tmp/elsewhere" && "$vl" commit --model qwen2-0.5b --catalog "$repo/gpus.json" --gpu fake-gpu \
  $job --out bundled >/dev/null 2>"$tmp/err")
check "a bare name is the bundled model" has "$tmp/elsewhere/bundled/commitment.json" '"bundled": "qwen2-0.5b"'
check "a note names the file not read" has "$tmp/err" "the file 'qwen2-0.5b' in this folder is not read: give './qwen2-0.5b'"
(cd "$tmp/elsewhere" && "$vl" check --commitment bundled/commitment.json --catalog "$repo/gpus.json" \
  --model ./qwen2-0.5b $job >"$tmp/out" 2>&1)
check "./NAME is the file: its layers drift" [ $? = 3 ] && has "$tmp/out" "num_hidden_layers is 2"

# on an A100 the plan's row, the commitment and check bill the same bytes:
# each with the A100's cuBLAS workspaces (2 x 8,519,680 B) and SMs (Phi-2's
# biases), none with the H200's (2 x 32 MiB, 47.75 MiB more)
"$vl" plan --model phi-2 --tokens 10000000 --seq 2048 --global-batch 16 --gpus a100-80gb \
  --max-gpus 1 --format json >plan/a100.json
row=$(sed -n 's/^ *"peak_bytes_per_gpu": \([0-9]*\),*$/\1/p' plan/a100.json | head -1)
check "the plan's A100 row has its bytes" [ -n "$row" ]
check "sixteen micro-batches a step" has plan/a100.json '"grad_accum": 16'
"$vl" commit --plan plan/a100.json --out a100 >/dev/null
check "commit --plan on the A100" has a100/commitment.json '"gpu": "a100-80gb"'
committed=$(sed -n 's/^ *"total_bytes": \([0-9]*\),*$/\1/p' a100/commitment.json | head -1)
check "the commitment holds the plan row's bytes" [ "$committed" = "$row" ]
ajob="--model phi-2 --batch 1 --seq 2048 --grad-accum 16"
"$vl" check --commitment a100/commitment.json $ajob >"$tmp/out"
check "check of the A100 commitment: consistent" [ $? = 0 ]
# half the card kept free leaves less than the job needs: check says what it bills
gib=$(awk -v b="$row" 'BEGIN { printf "%.2f", b / 1073741824 }')
for card in "" "--gpu a100-80gb"; do
  "$vl" check --commitment a100/commitment.json $ajob $card --margin 50 --format json >"$tmp/out"
  check "check on the A100 ($card) bills the plan's bytes: $gib GiB" \
    has "$tmp/out" "\"current\": \"$gib GiB per GPU\""
done

# run on the fake GPU holding what was committed, then audit; the job
# holds it until a sample of the record has it (60 s at most), not for a
# time a busy machine may sample nothing in
total=$(sed -n 's/^ *"total_bytes": \([0-9]*\),*$/\1/p' plan/commitment.json | head -1)
: >"$tmp/procs"
FAKE_NVML_PROCS="$tmp/procs" "$vl" run --out "$tmp/run" --interval-ms 10 --quiet -- \
  sh -c "echo \$\$ $total >>'$tmp/procs'; i=0
    until grep -q '\"tree_bytes\":$total,' '$tmp/run/record.jsonl' || [ \$i -ge 1200 ]; do
      sleep 0.05; i=\$((i + 1))
    done"
check "run on the fake GPU" [ $? = 0 ]
(cd "$tmp/elsewhere" && "$vl" audit --commitment "$repo/plan/commitment.json" --run "$tmp/run" \
  --catalog "$repo/gpus.json" >"$tmp/out")
check "audit: within the commitment" [ $? = 0 ]
check "audit: the run's GPUs are the committed ones" has "$tmp/out" "GPUs  *1 x fake-gpu  *1 x fake-gpu$"
"$vl" commit --model configs/model.json --gpu h200 --dp 2 $job --run "$tmp/run" --out other \
  >/dev/null 2>"$tmp/err"
check "commit --run from other hardware says so" has "$tmp/err" "ran on 1 x Fake GPU 0"
"$vl" audit --commitment other/commitment.json --run "$tmp/run" >"$tmp/out"
check "audit against other hardware: review, exit 3" [ $? = 3 ]
check "the GPUs line is marked" has "$tmp/out" "GPUs  *2 x h200  *1 x Fake GPU 0 *<- review"
check "GPU-hours on the run's 1 GPU" has "$tmp/out" "GPU-hours (1 GPU)"

echo "$n checks, $fail failed"
[ $fail = 0 ]
