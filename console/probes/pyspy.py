"""``py-spy dump --pid PID`` output: processes, threads and frames, and where each process waits.

Format (py-spy ``src/dump.rs``)::

    Process 4085279: VLLM::EngineCore
    Python v3.12.13 (/usr/bin/python3.12)

    Thread 4085279 (idle): "MainThread"
        poll (zmq/sugar/poll.py:106)
        ...

Thread ids are decimal (native ids, py-spy >= 0.3) or hex (``0x7F1E0B1FF740``, older builds); the
status is ``active``, ``idle``, ``active+gil`` or absent; frames may carry ``--locals`` blocks. Several
dumps may be concatenated (our remote loop prints ``=== PID N: CMD`` before each one) and py-spy's
own errors (``Error: Failed to find python version ...``, ``Permission denied``) are kept per process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.probes import ParseError
from console.probes.bounded import digits

MAX_DUMP_CHARS = 16 * 1024 * 1024  # the dumps of every engine process of a station
MAX_LINE = 4000  # a longer line is no line of py-spy's (and is not matched)
MAX_PROCESSES = 256
MAX_THREADS = 1024
MAX_FRAMES = 512  # per thread (a deep recursion is cut here: the innermost frames are the ones read)


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.function} ({self.file}" + (f":{self.line})" if self.line else ")")


@dataclass(frozen=True)
class PyThread:
    id: str
    status: str  # active | idle | active+gil | "" (older py-spy)
    name: str
    frames: tuple[Frame, ...]  # innermost first, as py-spy prints them


@dataclass(frozen=True)
class ProcessDump:
    pid: int
    cmdline: str
    python: str | None = None
    threads: tuple[PyThread, ...] = ()
    error: str | None = None

    @property
    def main(self) -> PyThread | None:
        return next((t for t in self.threads if t.name == "MainThread"), self.threads[0] if self.threads else None)


_PROCESS = re.compile(r"^Process (\d+): (.*)$")
_MARK = re.compile(r"^=== PID (\d+)(?::\s*(.*))?$")
_PYTHON = re.compile(r"^Python v(\S+)")
_THREAD = re.compile(r"^Thread (0x[0-9A-Fa-f]+|\d+)(?: \(([\w+]+)\))?(?:: \"(.*)\")?\s*$")
_ERROR = re.compile(r"^(?:Error|error): (.*)$")


def _frame(line: str) -> Frame | None:
    """``    function (file:line)`` in linear time (a regex with two lazy groups is quadratic on a
    hostile line of many " (")."""
    if not line.startswith("    ") or line[4:5].isspace():
        return None
    body = line.rstrip()
    i = body.rfind(" (")
    if not body.endswith(")") or i <= 4:
        return None
    func, loc = body[4:i], body[i + 2:-1]
    if not loc:
        return None
    path, colon, num = loc.rpartition(":")
    if colon and num.isdigit():
        return Frame(func[:300], path[:500], digits(num))
    return Frame(func[:300], loc[:500], None)


def parse_pyspy(text: str) -> list[ProcessDump]:
    """Every process dump in ``text``; a process py-spy could not read keeps its error."""
    if len(text) > MAX_DUMP_CHARS:
        text = text[:MAX_DUMP_CHARS]  # the first processes' dumps are still whole
    out: list[ProcessDump] = []
    cur: dict | None = None
    thread: dict | None = None

    def close_thread() -> None:
        nonlocal thread
        if cur is not None and thread is not None:
            cur["threads"].append(PyThread(thread["id"], thread["status"], thread["name"], tuple(thread["frames"])))
        thread = None

    def close() -> None:
        nonlocal cur
        close_thread()
        if cur is not None and len(out) < MAX_PROCESSES:
            out.append(ProcessDump(cur["pid"], cur["cmd"], cur["python"], tuple(cur["threads"]), cur["error"]))
        cur = None

    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if len(line) > MAX_LINE:
            continue
        if m := _MARK.match(line):
            close()
            cur = {"pid": digits(m.group(1), 0), "cmd": (m.group(2) or "").strip()[:500], "python": None, "threads": [],
                   "error": None, "marked": True}
            continue
        if m := _PROCESS.match(line):
            pid = digits(m.group(1), 0)
            if cur is not None and not (cur.get("marked") and not cur["threads"] and pid == cur["pid"]):
                close()
            if cur is None:
                cur = {"pid": pid, "cmd": "", "python": None, "threads": [], "error": None}
            cur["cmd"] = m.group(2).strip()[:500]
            cur["marked"] = False
            continue
        if cur is None:
            continue
        if m := _PYTHON.match(line):
            cur["python"] = m.group(1)[:80]
        elif m := _THREAD.match(line):
            close_thread()
            if len(cur["threads"]) < MAX_THREADS:
                thread = {"id": m.group(1)[:40], "status": (m.group(2) or "")[:20], "name": (m.group(3) or "")[:200],
                          "frames": []}
        elif thread is not None and len(thread["frames"]) < MAX_FRAMES and (f := _frame(line)) is not None:
            thread["frames"].append(f)
        elif m := _ERROR.match(line.strip()):
            cur["error"] = m.group(1).strip()[:500]
        elif line.strip().lower().startswith(("permission denied", "operation not permitted")):
            cur["error"] = line.strip()[:500]
    close()
    if not out and text.strip():
        raise ParseError(f"py-spy: no 'Process N: CMD' dump in {text.strip()[:160]!r}")
    return out


# ------------------------------------------------------------------ where does it wait?

COLLECTIVES = ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "broadcast", "barrier",
               "all_to_all", "alltoall", "send", "recv", "reduce", "gather", "scatter", "_all_reduce_out_place",
               "all_gather_into_tensor", "reduce_scatter_tensor")
_COLLECTIVE_FILES = ("distributed_c10d.py", "pynccl.py", "pynccl_wrapper.py", "custom_all_reduce.py",
                     "cuda_communicator.py", "c10d_logger.py")
_IDLE_FILES = ("shm_broadcast.py", "zmq/", "selectors.py", "threading.py", "queue.py")
_IDLE_FUNCS = ("dequeue", "acquire_read", "worker_busy_loop", "busy_loop", "recv_multipart", "poll", "select",
               "wait", "_wait_for_response", "run_engine_core", "get_response", "serve_forever")


@dataclass(frozen=True)
class WaitPoint:
    """Where a process's main thread is: in an NCCL collective, idle in its loop, or elsewhere."""

    kind: str  # collective | idle | elsewhere | unknown
    frame: Frame | None
    detail: str = ""
    name: str = ""  # the collective: "all_reduce", or "__init__ in pynccl.py" (NCCL communicator setup)

    def label(self) -> str:
        if self.name and self.frame:
            return f"{self.name} at {self.frame.file}" + (f":{self.frame.line}" if self.frame.line else "")
        return str(self.frame) if self.frame else self.detail or self.kind


def _is_collective(f: Frame) -> bool:
    if any(x in f.file for x in _IDLE_FILES):
        return False  # vLLM's shared-memory message queue and zmq: waiting for work, not for a peer GPU
    if any(x in f.file for x in _COLLECTIVE_FILES):
        return True
    return f.function in COLLECTIVES and ("distributed" in f.file or "nccl" in f.file)


def wait_point(dump: ProcessDump) -> WaitPoint:
    t = dump.main
    if dump.error or t is None:
        return WaitPoint("unknown", None, dump.error or "no thread in the dump")
    for f in t.frames:  # innermost first: the first collective frame is where it waits
        if _is_collective(f):
            outer = next((g for g in t.frames if g.function in COLLECTIVES and _is_collective(g)), f)
            if outer.function in COLLECTIVES:
                name = outer.function
            elif outer.function == "__init__" and "pynccl" in outer.file:
                name = "NCCL communicator setup (its warm-up all-reduce)"
            else:
                name = f"{outer.function} in {outer.file.rsplit('/', 1)[-1]}"
            return WaitPoint("collective", outer, f"{outer.function} via {f}", name)
    frames = [f for f in t.frames if not is_native(f)] or list(t.frames)  # --native: C frames above Python's
    if frames and (frames[0].function in _IDLE_FUNCS or t.status == "idle"):
        return WaitPoint("idle", frames[0])
    return WaitPoint("elsewhere", frames[0] if frames else None)


_NATIVE_FILE = re.compile(r"\.so(?:\.[\w.]+)?$|^\[|^0x[0-9a-fA-F]+$")


def is_native(f: Frame) -> bool:
    """A C/C++/CUDA frame of ``py-spy dump --native`` (``ncclAllReduce (libnccl.so.2)``)."""
    return bool(_NATIVE_FILE.search(f.file))


@dataclass(frozen=True)
class HangSummary:
    verdict: str  # same-collective | one-elsewhere | rank-missing | idle | mixed | no-dumps
    text: str
    points: dict[str, list[tuple[int, WaitPoint]]] = field(default_factory=dict)


def summarise(per_station: dict[str, list[ProcessDump]], missing: dict[str, str] | None = None) -> HangSummary:
    """Compare where the engine processes of every station wait (the ranks of one collective)."""
    missing = dict(missing or {})
    points = {st: [(d.pid, wait_point(d)) for d in dumps] for st, dumps in per_station.items()}
    coll = {st: [p for _pid, p in pts if p.kind == "collective"] for st, pts in points.items()}
    if not any(points.values()):
        return HangSummary("no-dumps", "no stack dump could be taken" + (
            ": " + "; ".join(f"{k}: {v}" for k, v in missing.items()) if missing else ""), points)
    in_coll = [st for st, c in coll.items() if c]
    if in_coll and missing:
        gone = ", ".join(f"{k} ({v})" for k, v in missing.items())
        return HangSummary("rank-missing", f"{', '.join(in_coll)} wait{'s' if len(in_coll) == 1 else ''} in "
                           f"{coll[in_coll[0]][0].label()} while {gone}", points)
    if in_coll and len(in_coll) == len(points):
        labels = {st: {p.name or p.detail for p in c} for st, c in coll.items()}
        common = set.intersection(*labels.values())
        if common:
            return HangSummary("same-collective", "every station's ranks wait in the same collective: "
                               f"{coll[in_coll[0]][0].label()}", points)
        return HangSummary("mixed", "the ranks wait in different collectives: " + "; ".join(
            f"{st}: {c[0].label()}" for st, c in coll.items()), points)
    if in_coll:
        others = [st for st in points if st not in in_coll]
        where = "; ".join(f"{st}: {next((p.label() for _i, p in points[st]), 'no dump')}" for st in others)
        return HangSummary("one-elsewhere", f"{', '.join(in_coll)} wait{'s' if len(in_coll) == 1 else ''} in "
                           f"{coll[in_coll[0]][0].label()}, but {where}", points)
    if all(p.kind == "idle" for pts in points.values() for _i, p in pts):
        return HangSummary("idle", "every engine process is idle in its loop (no collective in flight)", points)
    return HangSummary("mixed", "; ".join(f"{st}: " + ", ".join(p.label() for _i, p in pts)
                                          for st, pts in points.items()), points)
