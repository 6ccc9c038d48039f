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

Reading a pickle from a station is reading untrusted data: ``restricted_loads`` is
``safe_pickle.loads`` (a bounded reader of plain data that never imports, calls or hashes a
container), and ``from_dict`` reads only the fields it knows, each with its type and range checked
(a number out of range is "unknown", never a crash); the entries read are capped. The size is
bounded here and by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from console.probes import ParseError, safe_pickle
from console.probes.bounded import strict_json

MAX_DUMP_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 100_000  # torch's buffer default is 2,000 entries; TORCH_NCCL_TRACE_BUFFER_SIZE may raise it
MAX_TEXT = 200  # characters kept of a name or state
MAX_INT = 2**63 - 1  # a sequence number, record id or timeout that fits torch's int64


def restricted_loads(data: bytes) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise ParseError(f"flight recorder dump larger than {MAX_DUMP_BYTES // (1024 * 1024)} MB")
    try:
        return safe_pickle.loads(data)
    except safe_pickle.PickleRefused as exc:
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
    """An integer field: an int (or an integral float, or decimal digits as dump_json writes them) in
    0..2**63-1, else ``default`` (wrong type, NaN, inf, negative, huge: "unknown", never a crash)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            return default
        v = int(v)
    elif isinstance(v, (str, bytes)):
        t = v.strip() if isinstance(v, str) else v.decode("ascii", "replace").strip()
        if not (0 < len(t) <= 19 and t.isdigit() and t.isascii()):
            return default
        v = int(t)
    if not isinstance(v, int) or not 0 <= v <= MAX_INT:
        return default
    return v


def _text(v: Any) -> str:
    """A text field: a str (bytes decoded), at most MAX_TEXT characters; any other type is ""."""
    if isinstance(v, bytes):
        v = v[: MAX_TEXT * 4].decode("utf-8", "replace")
    return v[:MAX_TEXT] if isinstance(v, str) else ""


def _version(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and -10**6 < v < 10**6:
        return str(v)
    if isinstance(v, float) and math.isfinite(v) and abs(v) < 1e6:
        return f"{v:g}"
    return _text(v)


def from_dict(data: Any, rank: int | None = None) -> FrDump:
    """The dump's known fields, each type- and range-checked (a malformed entry is skipped)."""
    if not isinstance(data, dict) or "version" not in data:
        raise ParseError("flight recorder dump: not a dict with a 'version'")
    raw_entries = data.get("entries")
    if raw_entries is None:
        raw_entries = []
    if not isinstance(raw_entries, list):
        raise ParseError("flight recorder dump: 'entries' is not a list")
    entries = []
    for e in raw_entries[:MAX_ENTRIES]:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group")
        pg_name = _text(pg[0]) if isinstance(pg, (list, tuple)) and pg else _text(pg)
        p2p = e.get("is_p2p") is True
        name = _text(e.get("profiling_name"))
        timeout = _int(e.get("timeout_ms"), 0)
        entries.append(FrEntry(_int(e.get("record_id")), _int(e.get("pg_id")), pg_name,
                               _int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id")),
                               name.split(":", 1)[-1], _text(e.get("state")), p2p, timeout or None))
    status: dict[str, dict[str, int]] = {}
    raw_status = data.get("pg_status")
    if isinstance(raw_status, dict):
        for pg, st in list(raw_status.items())[:1000]:
            if isinstance(st, dict) and isinstance(pg, (str, int)) and not isinstance(pg, bool):
                status[_text(str(pg))] = {_text(k): _int(v) for k, v in list(st.items())[:50] if isinstance(k, str)}
    return FrDump(rank, _version(data.get("version")), tuple(entries), status)


def parse_dump(data: bytes, rank: int | None = None) -> FrDump:
    """A dump as the file holds it: JSON (``dump_json``) or a pickle (read without importing anything)."""
    head = data.lstrip()[:1]
    if head == b"{":
        if len(data) > MAX_DUMP_BYTES:
            raise ParseError(f"flight recorder dump larger than {MAX_DUMP_BYTES // (1024 * 1024)} MB")
        try:
            loaded = strict_json(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"flight recorder JSON: {str(exc)[:160]}") from None
        return from_dict(loaded, rank)
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
