#!/bin/bash
# Session 8's last device call: bench/configs/unseen5.jsonl (six runs,
# three per GPU), each result copied under $OUT as soon as it exists (the
# call may be cut short by the device budget).
. bench/device_env.sh
export PYTHONPATH=$PWD/python
one() { # GPU PARITY
  i=0
  while read -r line; do
    if [ $((i % 2)) = "$2" ]; then
      n=$(echo "$line" | python3 -c "import json,sys; print(json.load(sys.stdin)['name'])")
      cfg=$(echo "$line" | python3 -c "import json,sys; c=json.load(sys.stdin); c['holdout']=True; print(json.dumps(c))")
      CUDA_VISIBLE_DEVICES=$1 python3 python/vramledger/measure.py "$o/$n.json" --config "$cfg" </dev/null > /dev/null 2>&1
    fi
    i=$((i + 1))
  done < bench/configs/unseen5.jsonl
}
one 0 0 & one 1 1 & wait
