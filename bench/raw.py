#!/usr/bin/env python3
"""The raw figures of a question folder, in one file: bench/results/Q/raw.jsonl.

A suite writes many small files under $OUT (a measure.py results file per
run, logs, env.txt, JSON Lines of trials). They are kept as one JSON Lines
file beside the folder's README.md, one line a file:

  {"format": "vramledger.bench-raw/1", "folder": ...}        the first line
  {"file": "tp/x.json", "sha256": ..., "bytes": N, "json": {...}}
  {"file": "tp/x.jsonl", "sha256": ..., "bytes": N, "jsonl": [{...}, ...]}
  {"file": "env.txt", "sha256": ..., "bytes": N, "text": "..."}

sha256 and bytes are those of the file as the suite wrote it. A .json or
.jsonl file is kept parsed (its numbers greppable, a changed run one changed
line in git diff), so `unpack` writes it back re-serialised: equal as JSON,
not byte for byte (ARCHIVE.md gives the commit with the original bytes).
The table scripts of bench/accuracy/ read folders of files:

  python3 bench/raw.py unpack bench/results/trace /tmp/trace
  python3 bench/accuracy/trace_table.py /tmp/trace

  python3 bench/raw.py unpack --all bench/results/dry-run /tmp/dry-run
      (--all: the folder's files kept in git only too, bench/ARCHIVE.md's
      xz archives and traces, by `git show COMMIT:PATH`, sha256 checked)
  python3 bench/raw.py pack $OUT bench/results/Q     (new results: add or replace lines)
  python3 bench/raw.py list bench/results/Q          (file, bytes, sha256)

A script reads one packed file by its old path with text_of():
  text_of("bench/results/nccl-run/probe-tp-ddp/runs7.jsonl")
"""
import hashlib
import json
import os
import re
import subprocess
import sys

FORMAT = "vramledger.bench-raw/1"


def entry(rel, data):
    """One line for the file rel whose bytes are data."""
    e = {"file": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SystemExit("raw.py: %s is not text; binary files go to bench/ARCHIVE.md" % rel)
    if rel.endswith(".json"):
        try:
            e["json"] = json.loads(text)
            return e
        except ValueError:
            pass
    if rel.endswith(".jsonl"):
        try:
            e["jsonl"] = [json.loads(line) for line in text.splitlines() if line.strip()]
            return e
        except ValueError:
            pass
    e["text"] = text
    return e


def read(folder):
    path = os.path.join(folder, "raw.jsonl")
    if not os.path.exists(path):
        return None, []
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != FORMAT:
        raise SystemExit("raw.py: %s does not start with a %s line" % (path, FORMAT))
    return lines[0], lines[1:]


def write(folder, head, entries):
    entries.sort(key=lambda e: e["file"])
    with open(os.path.join(folder, "raw.jsonl"), "w") as f:
        for e in [head] + entries:
            f.write(json.dumps(e, ensure_ascii=False, separators=(", ", ": ")) + "\n")


def pack(src, folder):
    head, entries = read(folder)
    if head is None:
        head = {"format": FORMAT, "folder": folder.rstrip("/"),
                "unpack": "python3 bench/raw.py unpack %s DIR" % folder.rstrip("/")}
    by_name = {e["file"]: e for e in entries}
    for root, _, files in os.walk(src):
        for name in sorted(files):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, src)
            with open(p, "rb") as f:
                by_name[rel] = entry(rel, f.read())
    write(folder, head, list(by_name.values()))


def serialised(e):
    """the text of a packed file (JSON re-serialised)"""
    if "json" in e:
        return json.dumps(e["json"], indent=1) + "\n"
    if "jsonl" in e:
        return "".join(json.dumps(r) + "\n" for r in e["jsonl"])
    return e["text"]


def text_of(path):
    """a file of a results folder by its path: on disk, or its line of the
    folder's raw.jsonl (bench/results/Q/SUB)"""
    if os.path.exists(path):
        with open(path) as f:
            return f.read()
    m = re.match(r"(.*bench/results/[^/]+)/(.+)$", path)
    if m:
        for e in read(m.group(1))[1]:
            if e["file"] == m.group(2):
                return serialised(e)
    raise SystemExit("raw.py: %s is neither a file nor a line of its folder's raw.jsonl "
                     "(bench/ARCHIVE.md lists what left the tree)" % path)


def archived(folder):
    """(file, sha256, commit, path) of the folder's files kept in git only,
    and of the folders merged into it (file under their name, its part
    folder under its new name: ARCHIVE.md's "Folders renamed")"""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = folder.rstrip("/")
    rows, merged, section, renamed = {}, {folder: ""}, None, []
    with open(os.path.join(here, "ARCHIVE.md")) as f:
        for line in f:
            if line.startswith("## "):
                section = line[3:].split("/ (")[0].strip()
            elif section == "Folders renamed" and line.startswith("| `"):
                cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
                if cells[0] == folder.split("/")[-1]:
                    renamed.append((cells[1], cells[2]))
            elif section and line.startswith("| `"):
                cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
                rows.setdefault(section, []).append(cells)
                if cells[0] == "README.md" and cells[4] == folder.split("/")[-1] + "/README.md":
                    merged[section] = section.split("/")[-1] + "/"

    def now(rel):
        for was, new in renamed:
            if rel.startswith(was):
                return new + rel[len(was):]
        return rel
    return [(now(prefix + c[0]), c[2], c[3], "%s/%s" % (sec, c[0]))
            for sec, prefix in merged.items() for c in rows.get(sec, []) if c[4] == "git"]


def unpack(folder, dest, everything=False):
    head, entries = read(folder)
    if head is None and not everything:
        raise SystemExit("raw.py: %s has no raw.jsonl" % folder)
    for e in entries:
        p = os.path.join(dest, e["file"])
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        with open(p, "w") as f:
            f.write(serialised(e))
    n = len(entries)
    if everything:
        for rel, sha, commit, path in archived(folder):
            data = subprocess.check_output(["git", "show", "%s:%s" % (commit, path)])
            if hashlib.sha256(data).hexdigest() != sha:
                raise SystemExit("raw.py: %s at %s is not the file ARCHIVE.md lists" % (path, commit))
            p = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
            n += 1
    print("%d files of %s in %s" % (n, folder, dest))


def main(argv):
    if len(argv) == 3 and argv[0] == "unpack":
        unpack(argv[1], argv[2])
    elif len(argv) == 4 and argv[0] == "unpack" and argv[1] == "--all":
        unpack(argv[2], argv[3], everything=True)
    elif len(argv) == 3 and argv[0] == "pack":
        pack(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "list":
        for e in read(argv[1])[1]:
            print("%s %d %s" % (e["file"], e["bytes"], e["sha256"]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
