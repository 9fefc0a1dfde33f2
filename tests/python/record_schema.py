"""The run record's schema, read from its one table
(lib/measure/record_schema.def, whose rows the C reader and writers use),
and the check of an event against it: the probe's events in the tests
(tests/python/test_probe.py's read()) must have the table's fields, of
the table's JSON types, and the fields their writer always writes."""
import os
import re

DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "measure",
                   "record_schema.def")
_OBJ = re.compile(r'^VL_REC_OBJ\((\w+), "([^"]*)", "([^"]*)"\)$')
_FIELD = re.compile(r'^VL_REC_FIELD\((\w+), (\w+), (\w+), (\w+), "([^"]*)", (REQ|OPT), '
                    r'"([^"]*)"\)$')


def _writers(s):
    return [w.strip() for w in s.split(",")]


def load(path=DEF):
    """{object id: {"path", "writers", "fields": {name: (jtype, part, required, writers)}}}"""
    objs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            m = _OBJ.match(line)
            if m:
                objs[m.group(1)] = {"path": m.group(2), "writers": _writers(m.group(3)),
                                    "fields": {}}
                continue
            m = _FIELD.match(line)
            if m:
                obj, name, jtype, part, _unit, pres, writers = m.groups()
                objs[obj]["fields"][name] = (jtype, part, pres == "REQ", _writers(writers))
            elif line.startswith("VL_REC_"):
                raise ValueError("%s: a row this reader cannot parse: %s" % (path, line))
    return objs


SCHEMA = load()


def _u(v):
    return type(v) is int and v >= 0


_TYPES = {
    "U": _u,
    "I": lambda v: type(v) is int,
    "NUM": lambda v: type(v) in (int, float),
    "S": lambda v: type(v) is str,
    "B": lambda v: type(v) is bool,
    "UN": lambda v: v is None or _u(v),
    "AS": lambda v: type(v) is list and all(type(x) is str for x in v),
    "AU": lambda v: type(v) is list and all(_u(x) for x in v),
    "AA": lambda v: type(v) is list and all(type(x) is list for x in v),
    "AO": lambda v: type(v) is list and all(type(x) is dict for x in v),
    "O": lambda v: type(v) is dict,
    "MAP": lambda v: type(v) is dict and all(_u(x) for x in v.values()),
}


def _check_obj(o, obj, writer, at):
    d = SCHEMA[obj]
    for k, v in o.items():
        f = d["fields"].get(k)
        if f is None:
            return "'%s.%s': not a field of %s (lib/measure/record_schema.def)" % (at, k, d["path"])
        jtype, part, _req, writers = f
        if writer and writer not in writers:
            return "'%s.%s': written by %s, not %s" % (at, k, ", ".join(writers), writer)
        if not _TYPES[jtype](v):
            return "'%s.%s': %r is not of JSON type %s" % (at, k, v, jtype)
        inner = [v] if jtype == "O" else v if jtype == "AO" else []
        for i, x in enumerate(inner):
            why = _check_obj(x, part, writer, "%s.%s" % (at, k) + ("[%d]" % i if jtype == "AO" else ""))
            if why:
                return why
    for k, (_jt, _part, req, writers) in d["fields"].items():
        needed = req and (writer in writers if writer else writers == d["writers"])
        if needed and k not in o:
            return "'%s': no '%s', which %s always writes" % (at, k, writer or ", ".join(writers))
    return None


def check(event, writer=None):
    """What is wrong with event by the table, or None. writer: "run",
    "interposer" or "probe"; None: the event's "writer", else its type's
    one writer, else only what all its writers write is required."""
    t = event.get("type")
    obj = next((k for k, d in SCHEMA.items() if d["path"] == t), None)
    if obj is None:
        return "%r: not an event type of lib/measure/record_schema.def" % (t,)
    if writer is None:
        writer = event.get("writer")
    if writer is None and len(SCHEMA[obj]["writers"]) == 1:
        writer = SCHEMA[obj]["writers"][0]
    return _check_obj(event, obj, writer, t)


def streams_dir(record):
    """The record's streams folder, as vl_record_streams_dir names it."""
    return (record[:-6] if record.endswith(".jsonl") else record) + ".d"


def read_record(record, check_events=True):
    """A record's events as vramledger reads it (lib/measure/record.c): its
    own file and its streams (docs/record.md, "Streams"), merged by t_ns,
    each stream's order kept; each event checked against the table first.
    @return the events; raises AssertionError naming the file and line of
    the first event the table refuses"""
    import heapq
    import json
    files = [record]
    d = streams_dir(record)
    if os.path.isdir(d):
        files += [os.path.join(d, n) for n in sorted(os.listdir(d))
                  if n.endswith(".jsonl") and not n.startswith(".")]
    streams = []
    for path in files:
        with open(path, "rb") as f:
            events = [json.loads(line.decode("utf-8")) for line in f if line.strip()]
        for n, e in enumerate(events, 1):
            why = check(e) if check_events else None
            if why:
                raise AssertionError("%s: line %d: %s" % (path, n, why))
        streams.append(events)
    return list(heapq.merge(*streams, key=lambda e: e.get("t_ns", 0)))
