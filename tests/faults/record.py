#!/usr/bin/env python3
"""What a run record holds, for the fault cases' assertions, read line by
line with nothing skipped silently: a line that is not a JSON object is
counted as cut. The record is its own file and its streams (RECORD's
folder record.d: docs/record.md, "Streams"): the own file's lines first,
then each stream's; last-type is the own file's last line.

Usage: record.py RECORD WHAT, WHAT one of
  samples        the sample lines that read
  exit-samples   the exit event's count of the samples vramledger wrote
  exit-status    the exit event's status ("none": no exit event)
  last-type      the last line's type
  gaps           the gap lines that say bytes were lost
  closings       the gap lines that close a cut line and lost nothing
  gap-bytes      the bytes the gap lines say were lost
  lost-record    the lost event's record_lost_bytes (0: none)
  cut            lines that are not a JSON object
  after-gap      sample lines after the first gap line
  marks NAME     the marks called NAME
  events TYPE    the lines of that type
  probe-gaps     the probe's gap lines (writer "probe")
  probe-gap-bytes  the bytes the probe's gap lines say were lost
  meta KEY       the meta line's KEY ("absent": none)
  alloc-peak     the most of the samples' cuda_alloc_bytes and cuda_alloc_max_bytes
"""
import json
import os
import sys


def files(path):
    """The record's own file, then its streams by name."""
    d = (path[:-6] if path.endswith(".jsonl") else path) + ".d"
    names = sorted(n for n in os.listdir(d) if n.endswith(".jsonl")) if os.path.isdir(d) else []
    return [path] + [os.path.join(d, n) for n in names]


def lines(path):
    with open(path, "rb") as f:
        for raw in f.read().split(b"\n"):
            if not raw:
                continue
            try:
                o = json.loads(raw)
            except ValueError:
                yield None
                continue
            yield o if isinstance(o, dict) else None


def main():
    path, what = sys.argv[1], sys.argv[2]
    own = list(lines(path))
    evs = [e for f in files(path) for e in lines(f)]
    good = [e for e in evs if e is not None]
    if what == "samples":
        print(sum(e.get("type") == "sample" for e in good))
    elif what == "exit-samples":
        ex = [e for e in good if e.get("type") == "exit"]
        print(ex[-1].get("samples", "none") if ex else "none")
    elif what == "exit-status":
        ex = [e for e in good if e.get("type") == "exit"]
        print(ex[-1].get("status") if ex else "none")
    elif what == "last-type":
        print(own[-1].get("type") if own and own[-1] else "cut")
    elif what == "gaps":
        print(sum(e.get("type") == "gap" and e.get("lost_bytes", 0) > 0 for e in good))
    elif what == "closings":
        print(sum(e.get("type") == "gap" and e.get("lost_bytes", 0) == 0 for e in good))
    elif what == "gap-bytes":
        print(sum(e.get("lost_bytes", 0) for e in good if e.get("type") == "gap"))
    elif what == "lost-record":
        print(sum(e.get("record_lost_bytes", 0) for e in good if e.get("type") == "lost"))
    elif what == "cut":
        print(sum(e is None for e in evs))
    elif what == "after-gap":
        seen, n = False, 0
        for e in good:
            seen = seen or e.get("type") == "gap"
            n += seen and e.get("type") == "sample"
        print(n)
    elif what == "marks":
        print(sum(e.get("type") == "mark" and e.get("name") == sys.argv[3] for e in good))
    elif what == "events":
        print(sum(e.get("type") == sys.argv[3] for e in good))
    elif what == "probe-gaps":
        print(sum(e.get("type") == "gap" and e.get("writer") == "probe" for e in good))
    elif what == "probe-gap-bytes":
        print(sum(e.get("lost_bytes", 0) for e in good
                  if e.get("type") == "gap" and e.get("writer") == "probe"))
    elif what == "meta":
        meta = [e for e in good if e.get("type") == "meta"]
        print(meta[0].get(sys.argv[3], "absent") if meta else "absent")
    elif what == "alloc-peak":
        print(max([e.get(k, 0) for e in good if e.get("type") == "sample"
                   for k in ("cuda_alloc_bytes", "cuda_alloc_max_bytes")] or [0]))
    else:
        sys.exit("record.py: unknown " + what)


if __name__ == "__main__":
    main()
