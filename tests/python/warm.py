"""A warm Python for the tests whose jobs each start one: torch (and
transformers, peft, accelerate and Lightning where installed) imported
once, each job a fork of that process.

Importing the stack takes 8 s of CPU on a 2-core machine (torch 2.13 alone
4 s, Debian's torch 1.13 2 s), longer than most of the jobs the tests run
(a 4-layer model's dry run on meta tensors, three steps of a small model
under `vramledger run`): a hundred-odd jobs would spend most of their time
importing. The tests run their jobs exactly as before (`vramledger
estimate --dry-run`, `vramledger trace -- PYTHON job.py`, `vramledger run
-- PYTHON job.py`); only the Python they name is this file's client, which
hands its argv, environment, working directory and file descriptors to the
server, and exits as the forked job exits.

The job in the fork sees what a fresh interpreter would: sys.argv, sys.path
(its script's folder, then $PYTHONPATH, then the server's own entries), the
environment, and a sitecustomize imported anew from $PYTHONPATH (vramledger
run's probe attaches to the torch already imported, as its sitecustomize
does for any job that imported torch first). What a fresh interpreter would
not share: modules imported by the server, read once with the server's
environment; and its exit tears no module down (`_exit`: threads joined,
atexit handlers run, open files flushed).

  warm.py serve SOCKET            the server (run under the Python it stands for)
  warm.py start SOCKET PYTHON     start the server as a daemon, wait till it listens
  warm.py stop SOCKET             stop it and every job it forked
  warm.py run ARGS...             the client: $VL_WARM_SOCKET, else exec $VL_WARM_PYTHON

With no server listening the client execs the real Python, so a test run
without the fixture is only slower."""
import importlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

IDLE_S = 900  # the server leaves when no job came for this long
PRELOAD = ("torch", "transformers", "peft", "accelerate", "lightning")


def _fds():
    """the client's open descriptors but its own socket's"""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            os.fstat(fd)
        except OSError:
            continue  # the listing's own descriptor, closed
        out.append(fd)
    return sorted(out)


def client(argv):
    path, real = os.environ.get("VL_WARM_SOCKET"), os.environ.get("VL_WARM_PYTHON", "python3")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path or "")
    except OSError:
        s.close()
        os.execv(real, [real] + argv)
    fds = [fd for fd in _fds() if fd != s.fileno()]
    msg = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "fds": fds}).encode()
    socket.send_fds(s, [struct.pack("!I", len(msg)) + msg], fds)
    for fd in fds:
        if fd > 2:
            os.close(fd)  # the job holds them now: a pipe's reader sees its end when the job's ends
    f = s.makefile("rb")
    pid = int(f.readline())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: os.kill(pid, n))
    status = int(f.readline() or -signal.SIGKILL)
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


def _recv(conn):
    head, fds, _, _ = socket.recv_fds(conn, 4, 256)
    n = struct.unpack("!I", head)[0]
    body = b""
    while len(body) < n:
        body += conn.recv(n - len(body))
    return json.loads(body), fds


def _job(req, fds, base_path, base_pp):
    """in the fork: become the job the client asked for; never returns"""
    for want, got in zip(req["fds"], fds):
        if want != got:
            os.dup2(got, want)
    for got in fds:
        if got not in req["fds"]:
            os.close(got)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    pp = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    argv = req["argv"]
    code = 0
    try:
        if argv[0] == "-c":
            first, sys.argv = "", ["-c"] + argv[2:]
        elif argv[0] == "-m":
            first, sys.argv = os.getcwd(), argv[1:]
        else:
            first, sys.argv = os.path.dirname(os.path.abspath(argv[0])), argv[:]
        sys.path[:] = [first] + pp + [p for p in base_path if p not in base_pp]
        sys.modules.pop("sitecustomize", None)
        try:  # as site.py does at start
            importlib.import_module("sitecustomize")
        except ImportError:
            pass
        import runpy
        if argv[0] == "-c":
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        elif argv[0] == "-m":
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    except BaseException:
        sys.excepthook(*sys.exc_info())  # as the interpreter reports an uncaught exception
        code = 1
    _exit(code)


def _exit(code):
    """the interpreter's exit less its teardown of every module: non-daemon
    threads joined, atexit handlers run (the probe's and the tracer's last
    lines are written there), the job's open files and the standard streams
    flushed, then os._exit. A full exit in a fork of the server takes 2 s of
    CPU (tearing down torch's modules copies the pages the fork shares)."""
    import atexit
    import gc
    import io
    threading._shutdown()
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for f in [o for o in gc.get_objects() if isinstance(o, io.IOBase)] + [sys.stdout, sys.stderr]:
        try:
            if not f.closed and f.writable():
                f.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


def _wait(conn, pid):
    try:
        conn.sendall(b"%d\n" % pid)
    except OSError:
        pass
    _, st = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(st)
    try:
        conn.sendall(b"%d\n" % code)
    except OSError:
        pass
    conn.close()


def serve(path):
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            continue  # a Python with torch alone (Debian's python3-torch)
        if name == "transformers":
            sys.modules[name].AutoModelForCausalLM  # the auto classes' lazy modules
    base_pp = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    base_path = sys.path[1:]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(64)
    ls.settimeout(IDLE_S)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    import gc
    gc.freeze()  # the server's objects out of the jobs' collections: their pages stay shared
    while True:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            break
        conn.settimeout(None)
        try:
            req, fds = _recv(conn)
        except Exception:  # a client gone, or start's knock on the door
            conn.close()
            continue
        if req.get("stop"):
            conn.close()
            break
        pid = os.fork()
        if pid == 0:
            ls.close()
            conn.close()
            _job(req, fds, base_path, base_pp)
        for fd in fds:
            os.close(fd)
        threading.Thread(target=_wait, args=(conn, pid), daemon=True).start()
    ls.close()
    os.unlink(path)
    os.killpg(0, signal.SIGKILL)


def start(path, python):
    """the server as a daemon in its own process group; back once it listens"""
    log = open(path + ".log", "wb")
    subprocess.Popen([python, os.path.abspath(__file__), "serve", path], stdin=subprocess.DEVNULL,
                     stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.close()
            return
        except OSError:
            s.close()
            time.sleep(0.2)
    sys.exit("warm.py: the server did not listen on %s within 300 s; its log: %s.log" % (path, path))


def stop(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except OSError:
        return  # gone already
    msg = json.dumps({"stop": True}).encode()
    socket.send_fds(s, [struct.pack("!I", len(msg)) + msg], [])
    s.close()


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "run":
        client(args)
    elif cmd == "serve":
        serve(args[0])
    elif cmd == "start":
        start(args[0], args[1])
    elif cmd == "stop":
        stop(args[0])
    else:
        sys.exit("usage: warm.py serve|start|stop SOCKET | run ARGS...")
