"""``ncclras`` output (NCCL's RAS client, NCCL 2.24+): per-communicator rank status, collective
operation counts, missing and dead processes -- and the verdict of two reads a few seconds apart.

Formats (NVIDIA/nccl ``src/ras/client_support.cc``, NCCL user guide "Troubleshooting > RAS"):

- text (the default): ``NCCL version ...``, ``Job summary``, the ``Group  Comms ... Status  Errors``
  table, ``Errors`` (``INCOMPLETE``, ``DEAD``, ``#G-C (hash) INCOMPLETE|ERROR``) and ``Warnings``
  (``#G-C (hash) MISMATCH`` with ``N ranks have launched up to operation K`` and, for outliers,
  ``Rank R has launched up to operation K -- GPU G managed by process P on node H``). Ranks whose
  counts agree are not listed one by one: text output shows counts only where they differ.
- ``-f json`` (NCCL 2.28.7+): ``{"nccl_version", "communicators": [{"hash", "size", "ranks":
  [{"rank", "host", "pid", "cuda_dev", "status": {...}, "collective_counts": {"AllReduce": N, ...}}],
  "missing_ranks": [{"rank", "host", "pid", "status": {"unresponsive", "considered_dead"}}]}]}``.

Field method (NVIDIA/nccl #2213): read twice; counts frozen and equal = a stuck kernel or host;
frozen with a spread = ranks out of step (the ones behind are the suspects).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from console.probes import ParseError
from console.probes.bounded import count, digits, strict_json
from console.probes.bounded import text as short_text

MAX_REPORT_CHARS = 4 * 1024 * 1024  # a report of 8 stations x 8 GPUs is a few KiB
MAX_LINE = 2000  # a longer line is no line of NCCL's report (and is not matched)
MAX_RANK = 1 << 20
MAX_ITEMS = 1 << 16  # communicators, ranks, counts read from one report

# NCCL's collective functions in its own order (src/include/nccl_common.h, NCCL_NUM_FUNCTIONS = 5).
FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")


@dataclass(frozen=True)
class RasRank:
    rank: int
    host: str | None = None
    pid: int | None = None
    gpu: str | None = None
    counts: dict[str, int] = field(default_factory=dict)  # collective -> operations launched; {} unknown
    status: str = ""  # INIT | RUNNING | FINALIZE | ABORT | "" (not said)
    unresponsive: bool = False
    dead: bool = False

    @property
    def ops(self) -> int | None:
        return sum(self.counts.values()) if self.counts else None


@dataclass(frozen=True)
class RasComm:
    hash: str
    size: int | None
    ranks: tuple[RasRank, ...] = ()  # those that answered (text: only those the report names)
    missing: tuple[RasRank, ...] = ()
    errors: tuple[str, ...] = ()  # MISMATCH | INCOMPLETE | ERROR
    status: str = ""
    lead: dict[str, int] = field(default_factory=dict)  # text: per collective, the count of a group not listed


@dataclass(frozen=True)
class RasReport:
    format: str  # text | json
    nccl_version: str | None
    comms: tuple[RasComm, ...]
    dead: tuple[str, ...] = ()  # "Process 2757 on node 198.18.0.2 managing GPU 0"
    missing_processes: tuple[str, ...] = ()
    counts_complete: bool = True  # json: every rank's counts; text: only the ranks that differ

    def ranks(self) -> dict[int, RasRank]:
        """The largest communicator's ranks by number (the model's TP group)."""
        if not self.comms:
            return {}
        comm = self.main()
        return {r.rank: r for r in comm.ranks + comm.missing}  # text: only the ranks it names

    def main(self) -> RasComm:
        return max(self.comms, key=lambda c: (c.size or 0, len(c.ranks)))


# ------------------------------------------------------------------ unavailable


_UNAVAILABLE = (
    (re.compile(r"Failed to connect to the NCCL RAS service"),
     "no RAS service answers on this station (no NCCL job running here, NCCL older than 2.24, or "
     "NCCL_RAS_ENABLE=0)"),
    (re.compile(r"Connecting to \S+: Connection refused"), "nothing listens on the RAS port (28028 or NCCL_RAS_ADDR)"),
    (re.compile(r"(?:ncclras|NO-NCCLRAS)\b.*(?:not found|No such file)|NO-NCCLRAS"),
     "the ncclras client is not installed in the container (NCCL ships it from 2.24 in its bin/ directory)"),
    (re.compile(r"Invalid format: json"), "this ncclras is older than 2.28.7 (no -f json)"),
    (re.compile(r"Connection timed out"), "the RAS service did not answer in time"),
    (re.compile(r"NCCL unexpectedly closed the connection"), "the RAS service closed the connection"),
)


def unavailable(text: str) -> str | None:
    """Why no RAS report could be read (the client's own words mapped to a cause), or None."""
    for pat, why in _UNAVAILABLE:
        if pat.search(text):
            return why
    return None


# ------------------------------------------------------------------ text


_VERSION = re.compile(r"^NCCL version (\S+)")
_TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_COMM_HEAD = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) (INCOMPLETE|ERROR|MISMATCH)\s*$")
_DIFFERENT = re.compile(r"^\s+Communicator ranks have different (\w+) operation counts")
_RANK_OPS = re.compile(r"^\s+Rank (\d+) has (?:launched up to operation (\d+)|not launched any operations)"
                       r"(?: -- GPU (\S+) managed by process (\d+) on node (\S+))?")
_GROUP_OPS = re.compile(r"^\s+(\d+) ranks have (?:launched up to operation (\d+)|not launched any operations)")
_RANK_ONLY = re.compile(r"^\s+Rank (\d+)(?: has status (\w+))? -- (?:GPU (\S+) managed by process (\d+) on node (\S+)|"
                        r"\[process information not found\])")
_PROCESS = re.compile(r"^\s+(Process \d+ on node \S+ managing GPUs? .*)$")


def _rank(s: str | None) -> int | None:
    n = digits(s)
    return n if n is not None and n <= MAX_RANK else None


def parse_ras_text(text: str) -> RasReport:
    if len(text) > MAX_REPORT_CHARS:
        raise ParseError(f"ncclras: a report of {len(text):,} characters (more than any real one)")
    version = None
    table: dict[int, tuple[int, str, list[str]]] = {}  # group -> (ranks per comm, status, errors)
    comms: dict[str, dict] = {}
    dead: list[str] = []
    missing_procs: list[str] = []
    section = ""
    cur: dict | None = None
    coll = ""
    group_value: int | None = None
    seen = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if len(line) > MAX_LINE:
            continue
        if m := _VERSION.match(line):
            version, seen = m.group(1)[:80], True
            continue
        if line in ("Job summary", "Errors", "Warnings") or line.startswith("Group     Comms"):
            section, cur, seen = line.split()[0], None, True
            continue
        if section == "Group" and (m := _TABLE_ROW.match(line)):
            g, size = digits(m.group(1)), _rank(m.group(5))
            if g is not None and len(table) < MAX_ITEMS:
                table[g] = (size, m.group(7), m.group(8).split(","))
            continue
        if line in ("INCOMPLETE", "DEAD"):
            section, cur = line, None
            continue
        if section in ("INCOMPLETE", "DEAD") and (m := _PROCESS.match(line)):
            into = dead if section == "DEAD" else missing_procs
            if len(into) < MAX_ITEMS:
                into.append(m.group(1)[:300])
            continue
        if m := _COMM_HEAD.match(line):
            key = m.group(3).lower()[:64]
            if key not in comms and len(comms) >= MAX_ITEMS:
                cur = None
                continue
            cur = comms.setdefault(key, {"group": digits(m.group(1), -1), "ranks": {}, "missing": {},
                                         "errors": set(), "top": {}})
            cur["errors"].add(m.group(4))
            section, coll, group_value = m.group(4), "", None
            continue
        if cur is None:
            continue
        if m := _DIFFERENT.match(line):
            coll = m.group(1)[:40]
            continue
        if section == "MISMATCH" and coll and (m := _GROUP_OPS.match(line)):
            group_value = digits(m.group(2) or "0")
            if group_value is not None:
                cur["top"][coll] = max(cur["top"].get(coll, 0), group_value)
            continue
        if section == "MISMATCH" and coll and (m := _RANK_OPS.match(line)):
            r, ops = _rank(m.group(1)), digits(m.group(2) or "0")
            if r is None or ops is None or (r not in cur["ranks"] and len(cur["ranks"]) >= MAX_ITEMS):
                continue
            entry = cur["ranks"].setdefault(r, {"counts": {}})
            entry["counts"][coll] = ops
            cur["top"][coll] = max(cur["top"].get(coll, 0), ops)
            if m.group(3):
                entry.update(gpu=m.group(3)[:40], pid=digits(m.group(4)), host=m.group(5)[:200])
            continue
        if m := _RANK_ONLY.match(line):
            r = _rank(m.group(1))
            where = cur["missing"] if section == "INCOMPLETE" else cur["ranks"]
            if r is None or (r not in where and len(where) >= MAX_ITEMS):
                continue
            entry = where.setdefault(r, {"counts": {}})
            if section == "MISMATCH" and coll and group_value is not None:
                entry["counts"][coll] = group_value
            if m.group(2):
                entry["status"] = m.group(2)
            if m.group(3):
                entry.update(gpu=m.group(3)[:40], pid=digits(m.group(4)), host=m.group(5)[:200])
    if not seen:
        raise ParseError(f"ncclras: no 'NCCL version' or report section in {text.strip()[:160]!r}")
    out = []
    for key, c in comms.items():
        size, status, _errs = table.get(c["group"], (None, "", []))

        def mk(d: dict[int, dict], missing: bool = False) -> tuple[RasRank, ...]:
            return tuple(RasRank(r, v.get("host"), v.get("pid"), v.get("gpu"), dict(v["counts"]), v.get("status", ""),
                                 unresponsive=missing) for r, v in sorted(d.items()))

        out.append(RasComm(key, size, mk(c["ranks"]), mk(c["missing"], True), tuple(sorted(c["errors"])), status,
                           dict(c["top"])))
    if not out and table:  # no errors, no warnings: the table alone (ranks in step, counts not shown)
        out = [RasComm(f"group{g}", size, (), (), tuple(e for e in errs if e != "OK"), status)
               for g, (size, status, errs) in sorted(table.items())]
    return RasReport("text", version, tuple(out), tuple(dead), tuple(missing_procs), counts_complete=False)


# ------------------------------------------------------------------ json


def _dict(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v: object) -> list:
    return v[:MAX_ITEMS] if isinstance(v, list) else []


def _json_rank(r: dict, missing: bool) -> RasRank | None:
    rank = count(r.get("rank"), None, MAX_RANK)
    if rank is None:
        return None
    st = _dict(r.get("status"))
    dev = r.get("cuda_dev")
    gpu = short_text(dev, 40) if isinstance(dev, str) else str(n) if (n := count(dev)) is not None else None
    host, pid = short_text(r.get("host")), count(r.get("pid"))
    if missing:
        return RasRank(rank, host, pid, gpu, {}, "", st.get("unresponsive") is True, st.get("considered_dead") is True)
    counts = {k[:40]: n for k, v in list(_dict(r.get("collective_counts")).items())[:64]
              if isinstance(k, str) and (n := count(v)) is not None}
    state = "ABORT" if st.get("abort_flag") is True else "FINALIZE" if st.get("finalize_called") is True else "RUNNING"
    return RasRank(rank, host, pid, gpu, counts, state)


def parse_ras_json(text: str) -> RasReport:
    if len(text) > MAX_REPORT_CHARS:
        raise ParseError(f"ncclras -f json: a report of {len(text):,} characters (more than any real one)")
    start = text.find("{")
    try:
        data = strict_json(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise ParseError(f"ncclras -f json: not JSON NCCL writes ({str(exc)[:160]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("communicators"), list):
        raise ParseError("ncclras -f json: no 'communicators' list")
    comms = []
    for c in _list(data["communicators"]):
        if not isinstance(c, dict):
            continue
        ranks = [x for r in _list(c.get("ranks")) if isinstance(r, dict) and (x := _json_rank(r, False))]
        missing = [x for r in _list(c.get("missing_ranks")) if isinstance(r, dict) and (x := _json_rank(r, True))]
        errors = []
        if missing:
            errors.append("INCOMPLETE")
        if len({tuple(sorted(r.counts.items())) for r in ranks}) > 1:
            errors.append("MISMATCH")
        if any(r.status == "ABORT" for r in ranks):
            errors.append("ERROR")
        comms.append(RasComm(short_text(c.get("hash"), 64) or "", count(c.get("size"), None, MAX_RANK),
                             tuple(sorted(ranks, key=lambda r: r.rank)), tuple(missing), tuple(errors),
                             "RUNNING" if ranks else ""))
    dead = tuple(f"rank {r.rank} (process {r.pid} on node {r.host})" for c in comms for r in c.missing if r.dead)
    return RasReport("json", short_text(data.get("nccl_version"), 80), tuple(comms), dead, (), counts_complete=True)


def parse_ras(text: str) -> RasReport:
    """Either format: JSON when the output is a JSON object, else text."""
    if text.lstrip().startswith("{"):
        return parse_ras_json(text)
    return parse_ras_text(text)


# ------------------------------------------------------------------ the verdict of two reads


@dataclass(frozen=True)
class RasVerdict:
    kind: str  # frozen-equal | out-of-step | moving | in-step | missing-ranks | one-read | unavailable | unknown
    text: str
    behind: dict[int, int] = field(default_factory=dict)  # rank -> operations behind the most advanced
    ops: dict[int, int] = field(default_factory=dict)  # rank -> operations launched (second read)
    missing: tuple[int, ...] = ()
    dead: tuple[int, ...] = ()
    spread: str = ""  # "A at op 6650, B at op 6649": the ranks grouped by where they stopped
    collective: str = ""  # the collective the counts are of (AllReduce)
    at: int | None = None  # every rank's operation when they are equal


def _label(name: Callable[[int], str] | None, rank: int) -> str:
    return name(rank) if name else f"rank {rank}"


def roll_call(ops: dict[int, int]) -> tuple[list[tuple[int, list[int]]], list[int]]:
    """Ranks grouped by the operation they stopped at (most advanced first), and the suspects: the
    ranks not with a strict majority, else (no majority: two ranks, or an even split) the ranks behind
    the most advanced. All equal: no suspect."""
    groups: dict[int, list[int]] = {}
    for r, v in sorted(ops.items()):
        groups.setdefault(v, []).append(r)
    ordered = sorted(groups.items(), key=lambda kv: -kv[0])
    if len(ordered) <= 1:
        return ordered, []
    biggest = max(ordered, key=lambda kv: len(kv[1]))
    if len(biggest[1]) * 2 > len(ops):
        return ordered, sorted(r for v, rs in ordered if v != biggest[0] for r in rs)
    top = ordered[0][0]
    return ordered, sorted(r for v, rs in ordered if v < top for r in rs)


def verdict(first: RasReport | None, second: RasReport | None, interval_s: float,
            name: Callable[[int], str] | None = None, why_absent: str | None = None) -> RasVerdict:
    """What two reads ``interval_s`` apart say (``name`` maps a rank number to a station's name). One
    read (``second`` None, or ``first`` None) is judged as one: where the ranks are, never "frozen"."""
    if first is None and second is None:
        return RasVerdict("unavailable", f"RAS not read: {why_absent or 'no report'}")
    one_read = first is None or second is None
    if one_read:
        first = second = first or second
    assert first is not None and second is not None
    r1, r2 = first.ranks(), second.ranks()
    missing = tuple(sorted(r for r, x in r2.items() if x.unresponsive or x.dead))
    dead = tuple(sorted(r for r, x in r2.items() if x.dead))
    if missing or second.dead:
        who = ", ".join(_label(name, r) + (" (dead)" if r in dead else " (not answering)") for r in missing)
        return RasVerdict("missing-ranks", f"RAS: {who or '; '.join(second.dead)} missing from the job",
                          missing=missing, dead=dead)
    c1 = {r: x.counts for r, x in r1.items() if x.counts}
    c2 = {r: x.counts for r, x in r2.items() if x.counts}
    if not c2:
        if second.comms and not any("MISMATCH" in c.errors for c in second.comms):
            return RasVerdict("in-step", "RAS: every rank in step, no rank missing (the text report shows no "
                              "counts; -f json, NCCL 2.28.7+, shows whether they move)")
        return RasVerdict("unknown", "RAS: no communicator data" if not second.comms else "RAS: no operation counts")
    lead = second.main().lead
    top = {c: max([v.get(c, 0) for v in c2.values()] + [lead.get(c, 0)]) for c in {k for v in c2.values() for k in v}}
    differ = [c for c in top if any(v.get(c, top[c]) != top[c] for v in c2.values()) or c in lead]
    # the collective the spread is in, else the one a model's layers run (AllReduce), else the busiest
    key = max(differ, key=lambda c: top[c]) if differ else "AllReduce" if top.get("AllReduce") else max(
        top, key=lambda c: top[c])
    ops2 = {r: v.get(key, top[key]) for r, v in c2.items()}
    behind = {r: n for r, v in c2.items() if (n := sum(top[c] - v.get(c, top[c]) for c in top)) > 0}
    moved = None if one_read else any(c1.get(r) != v for r, v in c2.items()) if c1 else None
    groups, suspects = roll_call(ops2)
    spread = ", ".join(f"{', '.join(_label(name, r) for r in rs)} at op {v}" for v, rs in groups)
    if lead.get(key, 0) > max(ops2.values()):
        spread = f"the others at op {lead[key]}, " + spread
        suspects = sorted(behind)
    if moved:
        return RasVerdict("moving", f"RAS: operations advance ({spread} after {interval_s:g} s): NCCL is not stuck",
                          behind, ops2)
    frozen = f"frozen over {interval_s:g} s" if moved is False else "one read: whether they move is not known"
    if behind:
        names = ", ".join(f"{_label(name, r)} {n} op{'s' if n != 1 else ''} behind" for r, n in sorted(behind.items()))
        odd = (f"; not with the others: {', '.join(_label(name, r) for r in suspects)}"
               if suspects and len(ops2) > 2 else "")
        return RasVerdict("out-of-step", f"ranks out of step: {spread} ({frozen}; {names}{odd})", behind, ops2,
                          spread=spread, collective=key)
    if one_read:
        return RasVerdict("one-read", f"RAS: every rank at {key} op {top[key]} ({frozen}: no second read)", {}, ops2,
                          spread=spread, collective=key, at=top[key])
    return RasVerdict("frozen-equal", f"RAS: every rank at {key} op {top[key]}, {frozen}: a stuck kernel or host "
                      "(every rank entered the same collective and none completes)", {}, ops2, spread=spread,
                      collective=key, at=top[key])
