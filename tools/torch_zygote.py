#!/usr/bin/env python3
"""One PyTorch import for a whole test run: tools/torch_trace.py's runs forked from it.

  python3 tools/torch_zygote.py --serve SOCKET     (tests/run.sh starts and stops it)

Importing torch costs seconds; a run of the suites traces ~25 times. The server binds
SOCKET (a Unix socket), imports torch and numpy once, and for each connection forks a
child that runs tools/torch_trace.py exactly as `python3 tools/torch_trace.py ARGS`
would: the client's working directory, environment and argv, its stdout and stderr
(the descriptors themselves, passed over the socket), and its exit status sent back.
The child is a fresh copy of a process that has only imported modules (no tensor was
made, no thread started, the floating-point environment untouched), so a run computes
what a new interpreter would.

torch_trace.py calls forward() before it imports torch: with CIS2_TORCH_SERVER naming a
socket that answers it forwards the run and exits with the child's status; with none, or
a server that does not take the run, it runs in its own process as before."""
import json, os, runpy, signal, socket, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "torch_trace.py")
STARTED = b"S"  # the child has the run: from here on its status is the run's


def _recv_exact(c, n):
    buf = b""
    while len(buf) < n:
        part = c.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def forward(argv):
    """The run's exit status from the server, or None when no server took it."""
    path = os.environ.get("CIS2_TORCH_SERVER")
    if not path:
        return None
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(path)
        env = {k: v for k, v in os.environ.items() if k != "CIS2_TORCH_SERVER"}
        req = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env}).encode()
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(c, [struct.pack("<I", len(req))], [1, 2])
        c.sendall(req)
        if _recv_exact(c, 1) != STARTED:
            return None
    except OSError:
        return None
    status = _recv_exact(c, 4)
    if status is None:
        print("torch_trace.py: the PyTorch server (%s) ended the run without an exit status" % path,
              file=sys.stderr)
        return 70
    return struct.unpack("<i", status)[0]


def _child(c):
    msg, fds, _, _ = socket.recv_fds(c, 4, 2)
    if len(fds) != 2:
        return
    msg += _recv_exact(c, 4 - len(msg)) or b""
    req = json.loads(_recv_exact(c, struct.unpack("<I", msg)[0]))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [TRACE] + req["argv"]
    c.sendall(STARTED)
    rc = 0
    try:
        runpy.run_path(TRACE, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            rc = 0
        elif isinstance(e.code, int):
            rc = e.code
        else:
            print(e.code, file=sys.stderr)
            rc = 1
    except BaseException:
        import traceback
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    c.sendall(struct.pack("<i", rc))


def serve(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)  # first: a client that comes while torch loads waits in the backlog
    s.listen(64)
    import numpy  # noqa: F401
    import torch  # noqa: F401
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    while True:
        c, _ = s.accept()
        if os.fork() == 0:
            s.close()
            try:
                _child(c)
            finally:
                os._exit(0)
        c.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--serve":
        sys.exit("usage: torch_zygote.py --serve SOCKET")
    serve(sys.argv[2])
