"""What every thread of the engine's processes is doing in the kernel, from ``/proc/PID/task/TID``:
its state (``stat``'s third field: R running, S sleeping, D uninterruptible...), its wait channel
(``wchan``: the kernel function it sleeps in) and, where readable, its kernel stack (``stack``:
root only on most kernels; otherwise the thread says "not read: permission"). This tells a rank that
spins on the GPU (R, no wait channel) from one asleep on a host lock (S in ``futex_wait``) or stuck
in the driver (D in an ``nv``/``uvm`` function).

Pure and safe with hostile text: the input is what ``cmdlines.engine_tasks`` prints (``=== PID N:
ARGS``, then per thread ``--- TID N``, ``stat ...``, ``wchan ...``, ``stack`` and its lines or
``stack-error ...``; ``NO-TASKS why``, ``MORE-TASKS``, ``NO-ENGINE-PROCESS``); every count and
string is bounded, an unknown line is ignored, a line that does not parse makes that field "not read".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from console.sanitize import one_line

MAX_PROCESSES = 64
MAX_THREADS = 1024  # per process (the command line stops at its own bound first)
MAX_STACK_LINES = 24
TEXT = 200

WaitKind = Literal["running", "gpu-driver", "host-lock", "io", "network", "sleep", "stopped", "zombie", "unknown"]

STATES: dict[str, str] = {"R": "running", "S": "sleeping", "D": "uninterruptible", "Z": "zombie", "T": "stopped",
                          "t": "tracing stop", "I": "idle", "X": "dead", "W": "paging", "P": "parked"}
_GPU = re.compile(r"^(nv|uvm|_nv|os_|nvidia)", re.I)
_LOCK = re.compile(r"futex|rwsem|mutex|pipe_wait|pipe_read", re.I)
_NET = re.compile(r"epoll|poll_schedule|sk_wait|inet_|tcp_|unix_stream|ib_|rdma", re.I)
_IO = re.compile(r"io_schedule|folio|blk|nfs|ext4|xfs|wait_on_page", re.I)
_TID = re.compile(r"^--- TID (\d{1,10})$")
_PID = re.compile(r"^=== PID (\d{1,10}): ?(.*)$")


@dataclass(frozen=True)
class TaskState:
    tid: int
    comm: str | None  # None: stat not read
    state: str | None
    wchan: str | None  # "0" or "" means running / no wait channel; None: not read
    stack: tuple[str, ...] | None  # None: not read (``stack_note`` says why)
    stack_note: str = ""

    @property
    def wait(self) -> WaitKind:
        return wait_kind(self.state, self.wchan, self.stack)

    def to_json(self) -> dict[str, Any]:
        return {"tid": self.tid, "comm": self.comm, "state": self.state,
                "state_words": STATES.get(self.state or "", "not read" if self.state is None else "unknown"),
                "wchan": self.wchan if self.wchan is not None else "not read", "wait": self.wait,
                "stack": list(self.stack) if self.stack is not None else None,
                "stack_note": self.stack_note}


@dataclass
class ProcessTasks:
    pid: int
    cmdline: str
    threads: list[TaskState] = field(default_factory=list)
    note: str = ""  # the process's tasks not read at all (gone, another pid namespace), or clipped
    clipped: bool = False

    def summary(self) -> str:
        """"41 S futex_wait_queue, 2 R running, 1 D nv_wait_for_event" (the commonest first)."""
        if not self.threads:
            return self.note or "no thread read"
        c = Counter(f"{t.state or '?'} {_chan(t)}" for t in self.threads)
        return ", ".join(f"{n} {k}" for k, n in c.most_common(6)) + (" (more threads not read)" if self.clipped else "")

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "cmdline": self.cmdline, "note": self.note, "clipped": self.clipped,
                "summary": self.summary(), "waits": dict(Counter(t.wait for t in self.threads)),
                "threads": [t.to_json() for t in self.threads]}


def _chan(t: TaskState) -> str:
    if t.wchan is None:
        return "wchan not read"
    return "running" if t.wchan in ("", "0") else t.wchan


def wait_kind(state: str | None, wchan: str | None, stack: tuple[str, ...] | None = None) -> WaitKind:
    """Where a thread waits, from its state, wait channel and (when read) its stack's top frames."""
    if state is None:
        return "unknown"
    if state == "R":
        return "running"
    if state == "Z":
        return "zombie"
    if state in ("T", "t"):
        return "stopped"
    words = " ".join([wchan or "", *[s.split("] ", 1)[-1] for s in (stack or ())[:4]]])
    if any(_GPU.match(w) for w in re.split(r"[\s+]", words) if w):
        return "gpu-driver"
    if _LOCK.search(words):
        return "host-lock"
    if _NET.search(words):
        return "network"
    if _IO.search(words):
        return "io"
    if state in ("S", "I") and (wchan or stack):
        return "sleep"
    return "unknown"


def parse_stat(text: str) -> tuple[str | None, str | None]:
    """(comm, state) of a ``stat`` line; the command name may hold spaces and parentheses (the last
    ``)`` ends it). (None, None) when the line is not a stat line."""
    lp, rp = text.find("("), text.rfind(")")
    if lp < 0 or rp < lp or not text[:lp].strip().isdigit():
        return None, None
    rest = text[rp + 1:].split()
    state = rest[0] if rest and len(rest[0]) == 1 and rest[0].isalpha() else None
    return (one_line(text[lp + 1:rp], 64) if state else None), state


def _stack_note(err: str) -> str:
    low = err.lower()
    if "permission denied" in low or "operation not permitted" in low:
        return "not read: permission"
    if "no such file" in low or "no such process" in low:
        return "not read: the thread ended"
    return "not read: " + (one_line(err, TEXT) or "no answer")


def parse_tasks(text: str) -> list[ProcessTasks]:
    """Every engine process and its threads, as the command printed them (bounded)."""
    procs: list[ProcessTasks] = []
    cur: ProcessTasks | None = None
    tid: int | None = None
    fields: dict[str, Any] = {}
    in_stack = False

    def flush() -> None:
        nonlocal tid, fields, in_stack
        if cur is not None and tid is not None:
            if len(cur.threads) < MAX_THREADS:
                comm, state = parse_stat(fields.get("stat", ""))
                w = fields.get("wchan")
                stack = fields.get("stack")
                note = fields.get("stack_note", "" if stack is not None else "not read: no answer")
                cur.threads.append(TaskState(tid, comm, state, None if w in (None, "?") else one_line(w, 64),
                                             tuple(stack) if stack is not None else None, note))
            else:
                cur.clipped = True
        tid, fields, in_stack = None, {}, False

    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if m := _PID.match(line):
            flush()
            if len(procs) >= MAX_PROCESSES:
                cur = None
                continue
            cur = ProcessTasks(int(m.group(1)), one_line(m.group(2), TEXT))
            procs.append(cur)
            continue
        if cur is None:
            continue
        if m := _TID.match(line):
            flush()
            tid = int(m.group(1))
            continue
        if line.startswith("NO-TASKS"):
            flush()
            cur.note = "not read: " + (one_line(line[8:].strip(), TEXT) or "no task directory")
            continue
        if line.startswith("MORE-TASKS"):
            flush()
            cur.clipped = True
            continue
        if tid is None:
            continue
        if in_stack:
            st = fields["stack"]
            if len(st) < MAX_STACK_LINES:
                st.append(one_line(line.strip(), TEXT))
            continue
        key, _, val = line.partition(" ")
        if key == "stat":
            fields["stat"] = val[:1024]
        elif key == "wchan":
            fields["wchan"] = val.strip()
        elif key == "stack" and not val:
            fields["stack"], in_stack = [], True
        elif key == "stack-error":
            fields["stack_note"] = _stack_note(val)
    flush()
    for p in procs:
        if not p.threads and not p.note:
            p.note = "not read: no thread listed"
    return procs


def tasks_json(text: str) -> dict[str, Any]:
    """The capture's ``tasks`` object: ``status`` ok / no-process / not-read, the processes, and one
    line over all of them."""
    if "NO-ENGINE-PROCESS" in text:
        return {"status": "no-process", "note": "no engine process in the container", "processes": []}
    procs = parse_tasks(text)
    if not procs:
        return {"status": "not-read", "note": one_line(text.strip()[-300:], 300) or "nothing came back",
                "processes": []}
    read = [p for p in procs if p.threads]
    perm = sum(1 for p in read for t in p.threads if t.stack_note == "not read: permission")
    note = "; ".join(f"pid {p.pid}: {p.summary()}" for p in procs[:8])
    if perm:
        note += f" (kernel stacks not read: permission, {perm} threads; root reads them)"
    return {"status": "ok" if read else "not-read", "note": note, "processes": [p.to_json() for p in procs]}
