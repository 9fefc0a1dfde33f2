"""Compare the metrics bench/gpu/jobs/workloads.py callbacks logged with the run's record:
each logged step's peak allocated/reserved is the record's `step` event's.
  python3 bench/accuracy/callbacks_check.py LOGGED.json RECORD.jsonl  -> one JSON line"""
import json
import sys

GIB = float(1 << 30)
logged = json.load(open(sys.argv[1]))
steps = [e for e in map(json.loads, open(sys.argv[2])) if e.get("type") == "step"]
rows = []
for (step, m), ev in zip(logged, steps):
    rows.append({"logged_step": step, "probe_step": ev["step"],
                 "logged_peak_allocated": m.get("vramledger/peak_allocated_gib"),
                 "record_peak_allocated": ev.get("peak_allocated", 0) / GIB,
                 "logged_peak_reserved": m.get("vramledger/peak_reserved_gib"),
                 "record_peak_reserved": ev.get("peak_reserved", 0) / GIB,
                 "bill_parts": sorted(k[16:-4] for k in m if k.startswith("vramledger/bill/"))})
same = all(r["logged_peak_allocated"] == r["record_peak_allocated"]
           and r["logged_peak_reserved"] == r["record_peak_reserved"] for r in rows)
print(json.dumps({"logged": len(logged), "record_steps": len(steps), "equal": same and
                  len(logged) == len(steps), "rows": rows}))
