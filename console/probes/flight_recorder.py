"""PyTorch's flight recorder dumps (``torch.distributed`` NCCL trace): per rank, the last collective
and its sequence number; across ranks, which rank never joined which collective.

Format (pytorch ``torch/csrc/distributed/c10d/FlightRecorder.cpp``, dump version 2.x): a dict with
``version``, ``pg_config``, ``pg_status`` ({pg_id: {last_enqueued_collective, last_started_collective,
last_completed_collective}}) and ``entries`` (one per recorded operation: ``record_id``, ``pg_id``,
``process_group`` (name, desc), ``collective_seq_id``, ``p2p_seq_id``, ``profiling_name``
(``nccl:all_reduce``), ``state`` (scheduled | started | completed), ``is_p2p``, ``timeout_ms``, ...).
``dump_json`` writes it as JSON (pg_status values as strings); the dump file the watchdog or the
debug pipe (``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``) writes to ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>``
(newer: ``TORCH_FR_DUMP_TEMP_FILE``) is a pickle of the same dict.

Reading a pickle from a station is reading untrusted data: ``restricted_loads`` never imports
anything (``find_class`` and persistent ids refuse), so only plain containers, strings and numbers
come out; anything else is a ParseError. The size is bounded by the caller.
"""

from __future__ import annotations

import io
import json
import pickle
from dataclasses import dataclass, field
from typing import Any

from console.probes import ParseError

MAX_DUMP_BYTES = 32 * 1024 * 1024


def _tagged(value: Any, _type: Any = None) -> Any:
    return value


# TorchScript's pickler wraps typed lists in these helpers (torch/jit/_pickle.py); each is our own
# harmless stand-in, never an import. Every other global is refused.
_SAFE_GLOBALS = {("torch.jit._pickle", n): list for n in ("build_intlist", "build_doublelist", "build_boollist",
                                                          "build_list")}
_SAFE_GLOBALS[("torch.jit._pickle", "restore_type_tag")] = _tagged


class _NoGlobals(pickle.Unpickler):
    """Plain data only: no class, function or persistent object is ever resolved (but the list helpers above)."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[(module, name)]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dump")

    def persistent_load(self, pid: Any):
        raise pickle.UnpicklingError("refusing a persistent object in a dump")


def restricted_loads(data: bytes) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise ParseError(f"flight recorder dump larger than {MAX_DUMP_BYTES // (1024 * 1024)} MB")
    try:
        return _NoGlobals(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, MemoryError, RecursionError) as exc:
        raise ParseError(f"flight recorder pickle not readable as plain data: {exc}") from None


@dataclass(frozen=True)
class FrEntry:
    record_id: int
    pg_id: int
    pg_name: str
    seq: int  # collective_seq_id (p2p_seq_id for a p2p op)
    op: str  # "all_reduce" (profiling_name without its "nccl:" prefix)
    state: str  # scheduled | started | completed
    is_p2p: bool = False
    timeout_ms: int | None = None


@dataclass(frozen=True)
class FrDump:
    rank: int | None
    version: str
    entries: tuple[FrEntry, ...]
    pg_status: dict[str, dict[str, int]] = field(default_factory=dict)

    def last(self) -> FrEntry | None:
        """The most recent collective (the default process group's highest sequence number)."""
        colls = [e for e in self.entries if not e.is_p2p]
        return max(colls, key=lambda e: (e.pg_id == 0, e.seq, e.record_id)) if colls else None

    def pending(self) -> FrEntry | None:
        """The oldest collective that never completed (where this rank waits), if any."""
        open_ = [e for e in self.entries if not e.is_p2p and e.state != "completed"]
        return min(open_, key=lambda e: (e.seq, e.record_id)) if open_ else None


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def from_dict(data: Any, rank: int | None = None) -> FrDump:
    if not isinstance(data, dict) or "version" not in data:
        raise ParseError("flight recorder dump: not a dict with a 'version'")
    entries = []
    for e in data.get("entries") or []:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group")
        pg_name = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(pg or "")
        p2p = bool(e.get("is_p2p"))
        name = str(e.get("profiling_name") or "")
        entries.append(FrEntry(_int(e.get("record_id")), _int(e.get("pg_id")), pg_name,
                               _int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id")),
                               name.split(":", 1)[-1], str(e.get("state") or ""), p2p,
                               _int(e.get("timeout_ms"), 0) or None))
    status = {}
    for pg, st in (data.get("pg_status") or {}).items():
        if isinstance(st, dict):
            status[str(pg)] = {str(k): _int(v) for k, v in st.items()}
    return FrDump(rank, str(data.get("version")), tuple(entries), status)


def parse_dump(data: bytes, rank: int | None = None) -> FrDump:
    """A dump as the file holds it: JSON (``dump_json``) or a pickle (read without importing anything)."""
    head = data.lstrip()[:1]
    if head == b"{":
        try:
            return from_dict(json.loads(data.decode("utf-8", "replace")), rank)
        except ValueError as exc:
            raise ParseError(f"flight recorder JSON: {exc}") from None
    if head[:1] == b"\x80":  # pickle protocol 2+
        return from_dict(restricted_loads(data), rank)
    raise ParseError("flight recorder dump: neither JSON nor a pickle")


@dataclass(frozen=True)
class FrVerdict:
    kind: str  # rank-missing | same-collective | all-complete | running | no-dumps
    text: str
    seq: dict[str, int] = field(default_factory=dict)  # who -> last collective's sequence number
    missing: dict[str, str] = field(default_factory=dict)  # who -> "all_reduce #1842"


def compare(dumps: dict[str, FrDump]) -> FrVerdict:
    """Across ranks (``who`` -> dump): the collective some entered and others never did."""
    lasts = {w: d.last() for w, d in dumps.items()}
    have = {w: e for w, e in lasts.items() if e is not None}
    if not have:
        return FrVerdict("no-dumps", "flight recorder: no collective recorded"
                         + (f" ({', '.join(dumps)})" if dumps else ""))
    seq = {w: e.seq for w, e in have.items()}
    top_who = max(have, key=lambda w: have[w].seq)
    top = have[top_who]
    behind = {w: e for w, e in have.items() if e.seq < top.seq}
    label = f"{top.op} SeqNum {top.seq}"
    if behind and top.state == "completed":  # dumps taken a moment apart while collectives complete
        spread = ", ".join(f"{w} at SeqNum {e.seq}" for w, e in have.items())
        return FrVerdict("running", f"flight recorder: every recorded collective completed ({spread})", seq)
    if behind:
        missing = {w: label for w in behind}
        ahead = ", ".join(w for w in have if w not in behind)
        gone = "; ".join(f"{w} never entered it (its last: {e.op} SeqNum {e.seq}, {e.state})" for w, e in behind.items())
        return FrVerdict("rank-missing", f"flight recorder: {ahead} in {label}; {gone}", seq, missing)
    pend = {w: d.pending() for w, d in dumps.items()}
    if any(p is not None for p in pend.values()):
        states = ", ".join(f"{w}: {e.state}" for w, e in have.items())
        return FrVerdict("same-collective", f"flight recorder: every rank entered {label} and it never completed "
                         f"({states})", seq)
    return FrVerdict("all-complete", f"flight recorder: every rank completed {label}", seq)
