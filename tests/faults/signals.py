#!/usr/bin/env python3
"""`vramledger run`: a signal reaches the job once, whoever sent it and to
whom (docs/cmd/run.md, "Signals"). Each case starts a job that counts the
SIGINT and SIGTERM it gets, sends a signal the way a terminal, a user,
timeout(1) or a scheduler does, and checks the count.

Usage: signals.py VRAMLEDGER (tests/faults/run.sh runs it)"""
import os
import pty
import signal
import subprocess
import sys
import tempfile
import time

VL = sys.argv[1]
JOB = r"""
import os, signal, sys, time
n = 0
def h(s, f):
    global n
    n += 1
signal.signal(signal.SIGINT, h)
signal.signal(signal.SIGTERM, h)
out = sys.argv[1]
if len(sys.argv) > 2:
    os.setsid()  # leaves vramledger's process group
def put(path, text):  # whole or not at all: the test reads it as it appears
    open(path + ".tmp", "w").write(text)
    os.rename(path + ".tmp", path)
put(out + ".pid", str(os.getpid()))
t0 = time.time()
first = None
while time.time() - t0 < 60 and not (first and time.time() - first > 0.5):
    if n and not first:
        first = time.time()  # then 0.5 s for a second one to come
    time.sleep(0.005)
put(out, str(n))
"""

tmp = tempfile.mkdtemp(prefix="vl-signals-")
fails = 0
k = 0


def job_args(out, leave=False):
    return [sys.executable, "-c", JOB, out] + (["leave"] if leave else [])


def run_args(out, leave=False):
    global k
    k += 1
    return [VL, "run", "--quiet", "--no-preload", "--out", "%s/run%d" % (tmp, k), "--"] + job_args(out, leave)


def sampled(k):
    """run's record k has a sample line: run handles its signals"""
    try:
        return '"type":"sample"' in open("%s/run%d/record.jsonl" % (tmp, k)).read()
    except OSError:
        return False


# The waits are on events (a file written), 60 s at most however busy the
# machine; the job's 0.5 s for a second delivery only lets a duplicate be
# counted, it fails nothing.
def wait_ready(out):
    """the job's pid once it and run (the latest) handle their signals"""
    for _ in range(6000):
        if os.path.exists(out + ".pid") and sampled(k):  # the job's handlers are set before the file
            return int(open(out + ".pid").read())
        time.sleep(0.01)
    raise RuntimeError("the job did not start")


def count(out):
    for _ in range(6000):
        if os.path.exists(out):
            return int(open(out).read() or -1)
        time.sleep(0.01)
    return -1


def check(name, got, want=1):
    global fails
    ok = got == want
    fails += not ok
    print("%s %s: %s deliveries" % ("ok  " if ok else "FAIL", name, got))


def case(name, send, leave=False):
    """vramledger run in a process group of its own (as a shell starts
    it), the job counting; send(vramledger's pid, the job's pid)."""
    out = "%s/count%d" % (tmp, k + 1)
    p = subprocess.Popen(run_args(out, leave), start_new_session=True)
    job = wait_ready(out)
    send(p.pid, job)
    p.wait(timeout=60)
    check(name, count(out))


# the terminal: ^C typed at it, to its foreground group (vramledger and the job)
out = "%s/count-tty" % tmp
args = run_args(out)
pid, fd = pty.fork()
if pid == 0:
    os.execv(VL, args)
wait_ready(out)
os.write(fd, b"\x03")
check("^C at a terminal", count(out))
try:
    while os.read(fd, 4096):
        pass
except OSError:
    pass
os.waitpid(pid, 0)

case("kill -INT -PGID (the group)", lambda v, j: os.killpg(v, signal.SIGINT))
case("kill -INT PID (vramledger alone)", lambda v, j: os.kill(v, signal.SIGINT))
case("kill -TERM PID (vramledger alone)", lambda v, j: os.kill(v, signal.SIGTERM))


def timeout_like(v, j):  # timeout(1): its child, then its group
    os.kill(v, signal.SIGTERM)
    os.killpg(v, signal.SIGTERM)


case("TERM to vramledger, then to the group (timeout)", timeout_like)


def members(pgid):
    """the processes of a group, by pid (as a cgroup lists them)"""
    pids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and os.getpgid(int(d)) == pgid:
                pids.append(int(d))
        except OSError:
            pass
    return sorted(pids)


def each_process(v, j, reverse=False):  # Slurm, systemd: kill() on every process of the job
    for p in sorted(members(v), reverse=reverse):
        os.kill(p, signal.SIGTERM)


case("TERM to every process, by pid (Slurm)", each_process)
case("TERM to every process, newest first", lambda v, j: each_process(v, j, True))
case("kill -INT -PGID, the job gone with setsid", lambda v, j: os.killpg(v, signal.SIGINT), leave=True)

# timeout(1) itself, both ways it signals: after 4 s, the one wait here on
# the clock (the job's handlers must be set by then: Python starts in well
# under a second, a few on a loaded machine)
for fg in ([], ["--foreground"]):
    out = "%s/count-timeout%s" % (tmp, fg and "-fg" or "")
    p = subprocess.run(["timeout"] + fg + ["-s", "INT", "4"] + run_args(out), start_new_session=True)
    check("timeout %s-s INT" % (fg and "--foreground " or ""), count(out))

print("%d failed" % fails if fails else "all passed")
sys.exit(1 if fails else 0)
