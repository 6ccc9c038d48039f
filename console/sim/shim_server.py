"""The simulated stations' commands, started by forking one process that has them imported.

A shim started as its own interpreter spends ~90 % of its ~0.1 CPU-s importing the simulator and
building the world's profile; a hang capture starts ~25 of them a station, and the simulator-backed
tests start thousands. This server (one per world, started by ``console.sim.server``) imports every
shim and the world's profile once, then forks a child per command. The wrapper on the station's
PATH stays a process of its own (``console.sim.shim.CLIENT``: a bare interpreter, ~15 ms), so what
runs on a station is still one process per command, with the command's name and arguments, the
station's environment, its exit status and its signals:

- the wrapper hands its stdin, stdout and stderr over (``SCM_RIGHTS``), with its pid, arguments,
  environment and working directory; the child takes them as its own, in a process group of its own;
- a signal the wrapper gets (a hangup, a ``kill``) is passed by the server to the child's group, and
  the wrapper ends as the child ended (its exit status, or killed by the same signal);
- a wrapper killed outright (``SIGKILL``) closes its socket, and the server kills the child's group:
  nothing is left running that the station's process list does not show;
- a wrapper stopped (``SIGSTOP``: a frozen station) stops the child's group, and a wrapper that goes on
  continues it (the server looks at the running wrappers every ``STOP_POLL_S``);
- the child's ``ShimContext.pid`` is the wrapper's pid, so what a shim records about itself (a hung
  ``nvidia-smi``) names the process that the station's tools and the tests see.

When the server is not (yet) listening, the wrapper runs the shim in its own interpreter, as before.
Linux only (abstract sockets, ``SO_PEERCRED``), like the simulator's stations.
"""

from __future__ import annotations

import array
import contextlib
import importlib
import io
import marshal
import os
import select
import signal
import socket
import struct
import sys
import traceback
from pathlib import Path

from console.sim.shim import ShimContext, run_shim, shim_address, shim_names
from console.sim.world import World

HEADER = 4  # the request's length, then the request (marshal)
_CRED = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid
_STATUS = struct.Struct("<i")  # the command's pid, then its exit code or minus the signal that ended it
STOP_POLL_S = 0.1  # how often a running command's wrapper is looked at (stopped or not)


class _Command:
    """A forked command: its wrapper's socket (None once the wrapper is gone) and pid, stopped or not."""

    __slots__ = ("conn", "client", "stopped")

    def __init__(self, conn: socket.socket, client: int) -> None:
        self.conn: socket.socket | None = conn
        self.client, self.stopped = client, False


def serve(root: str) -> int:
    """Answer commands for the world at ``root`` until the simulator that started us is gone."""
    world = World(root)
    profile = world.profile  # built once here; every command's world starts with it
    shims = {name: importlib.import_module("console.sim.shims." + name.replace("-", "_")) for name in shim_names()}
    for lazy in ("subprocess", "json", "random", "contextlib"):  # what the shims import inside functions
        importlib.import_module(lazy)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(shim_address(root))
    listener.listen(256)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    parent, running = os.getppid(), {}
    while os.getppid() == parent and world.root.exists():
        conns = {c.conn: pid for pid, c in running.items() if c.conn is not None}
        ready, _, _ = select.select([listener, wake_r, *conns], [], [], STOP_POLL_S if conns else 1.0)
        if wake_r in ready:
            os.read(wake_r, 4096)
        for conn in ready:
            if conn in conns:
                _relay(conns[conn], running[conns[conn]])
        _mirror_stops(running)
        _reap(running)
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        request = _request(conn)
        if request is None:
            conn.close()
            continue
        fds, (client_pid, argv, env, cwd) = request
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w):
                os.close(fd)
            listener.close()
            for other in running.values():
                if other.conn is not None:
                    other.conn.close()
            conn.close()
            _child(fds, client_pid, argv, env, cwd, World(root, profile=(world.meta["profile"], profile)), shims)
        with contextlib.suppress(OSError):  # (the child does the same: whichever runs first)
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        running[pid] = _Command(conn, client_pid)
        try:
            conn.sendall(_STATUS.pack(pid))  # the wrapper may now let go of its stdio
        except OSError:
            _relay(pid, running[pid])
    return 0


def _relay(pid: int, command: _Command) -> None:
    """The signals the wrapper was sent, raised on the command's process group (the command and what
    it started, as a station's ``kill`` of a group reaches them); the wrapper gone, they are killed.
    (The command is not reaped yet: its pid is still its own.)"""
    try:
        data = command.conn.recv(64)
    except OSError:
        data = b""
    for sig in data or (signal.SIGKILL,):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(pid, sig)
    if not data:
        command.conn.close()
        command.conn = None


def _mirror_stops(running: dict[int, _Command]) -> None:
    """A wrapper stopped (``SIGSTOP`` cannot be caught, so it cannot be relayed): its command stops
    too, and goes on when the wrapper does, as a station's frozen process group would."""
    for pid, command in running.items():
        if command.conn is None:
            continue
        try:
            with open(f"/proc/{command.client}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        stopped = state in (b"T", b"t")
        if stopped != command.stopped:
            command.stopped = stopped
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGSTOP if stopped else signal.SIGCONT)


def _request(conn: socket.socket) -> tuple[list[int], tuple] | None:
    """The wrapper's stdio and what it asks; None for a peer not ours or a request not whole."""
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        uid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1]
        data, ancillary, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(raw[: len(raw) - len(raw) % got.itemsize])
                fds.extend(got)
        if uid != os.getuid() or len(fds) != 3 or len(data) < HEADER:
            raise ValueError("not a request of ours")
        size = int.from_bytes(data[:HEADER], "little")
        body = bytearray(data[HEADER:])
        while len(body) < size:
            more = conn.recv(size - len(body))
            if not more:
                raise ValueError("request cut short")
            body += more
        conn.settimeout(None)
        return fds, marshal.loads(bytes(body))
    except (OSError, ValueError, EOFError, TypeError):
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        return None


def _reap(running: dict[int, _Command]) -> None:
    """Tell each wrapper whose command ended how it ended (and reap a child whose wrapper left first)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        command = running.pop(pid, None)
        if command is None or command.conn is None:
            continue
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):
            command.conn.sendall(_STATUS.pack(code))
        command.conn.close()


def _child(fds: list[int], client_pid: int, argv: list[str], env: dict[bytes, bytes], cwd: bytes, world: World,
           shims: dict) -> None:
    """Become the command: the wrapper's stdio, environment and directory, fresh signal dispositions;
    run the shim; never return."""
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # its own group: what it starts is signalled with it
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        os.environb.clear()
        os.environb.update(env)
        with contextlib.suppress(OSError):
            os.chdir(cwd)
        _stdio(bool(os.environ.get("PYTHONUNBUFFERED")))
        sys.argv = ["console.sim.shim", *argv]
        name = argv[0] if argv else ""
        module = shims.get(name)
        if module is None:
            print(f"{name}: command not found", file=sys.stderr)
            code = 127
        else:
            code = run_shim(module, argv[1:], ShimContext(world, os.environ.get("DGX_SIM_STATION", ""), pid=client_pid))
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # (what an interpreter would print before it exits 1)
        with contextlib.suppress(Exception):
            traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = code or 120
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


def _stdio(unbuffered: bool) -> None:
    """The streams a fresh interpreter would give these descriptors (a terminal: line-buffered)."""
    out_lines = os.isatty(1)
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8", errors="surrogateescape")
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding="utf-8", errors="surrogateescape",
                                  line_buffering=out_lines, write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)


def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: python -m console.sim.shim_server WORLD_ROOT", file=sys.stderr)
        return 2
    return serve(sys.argv[1])


if __name__ == "__main__":
    raise SystemExit(main())
