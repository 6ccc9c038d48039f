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


def _place(entry: dict, m: re.Match[str]) -> None:
    """Where a rank runs (groups 3-5 of ``_RANK_OPS`` and ``_RANK_ONLY``): only when the line says it."""
    if m.group(3):
        entry.update(gpu=m.group(3)[:40], pid=digits(m.group(4)), host=m.group(5)[:200])


def _text_ranks(d: dict[int, dict], missing: bool = False) -> tuple[RasRank, ...]:
    """The ranks one communicator's block named, by number (``missing``: those of an INCOMPLETE block)."""
    return tuple(RasRank(r, v.get("host"), v.get("pid"), v.get("gpu"), dict(v["counts"]), v.get("status", ""),
                         unresponsive=missing) for r, v in sorted(d.items()))


@dataclass
class _TextReader:
    """One pass over a text report. A line means something only under its heading (the table, DEAD,
    INCOMPLETE, a ``#G-C (hash)`` block, the collective named above it), so the reader carries that
    context from line to line; each step below takes the lines it knows and says whether it took one."""

    version: str | None = None
    table: dict[int, tuple[int | None, str, list[str]]] = field(default_factory=dict)  # group -> (size, status, errors)
    comms: dict[str, dict] = field(default_factory=dict)
    dead: list[str] = field(default_factory=list)
    missing_procs: list[str] = field(default_factory=list)
    section: str = ""
    cur: dict | None = None
    coll: str = ""
    group_value: int | None = None
    seen: bool = False

    def feed(self, line: str) -> None:
        """One line (right-stripped); an overlong one is no line of NCCL's and is skipped."""
        if len(line) > MAX_LINE:
            return
        for step in (self._heading, self._table_row, self._process_list, self._comm_head):
            if step(line):
                return
        if self.cur is not None:  # the remaining lines only mean something inside a communicator's block
            self._comm_line(self.cur, line)

    def _heading(self, line: str) -> bool:
        """The version line and the section titles: either one makes the text an ncclras report."""
        if m := _VERSION.match(line):
            self.version, self.seen = m.group(1)[:80], True
            return True
        if line in ("Job summary", "Errors", "Warnings") or line.startswith("Group     Comms"):
            self.section, self.cur, self.seen = line.split()[0], None, True
            return True
        return False

    def _table_row(self, line: str) -> bool:
        """A row of the Group table: each group's ranks per communicator, status and errors."""
        if self.section != "Group" or not (m := _TABLE_ROW.match(line)):
            return False
        g, size = digits(m.group(1)), _rank(m.group(5))
        if g is not None and len(self.table) < MAX_ITEMS:
            self.table[g] = (size, m.group(7), m.group(8).split(","))
        return True

    def _process_list(self, line: str) -> bool:
        """The INCOMPLETE and DEAD lists of the Errors section: job processes missing or dead."""
        if line in ("INCOMPLETE", "DEAD"):
            self.section, self.cur = line, None
            return True
        if self.section not in ("INCOMPLETE", "DEAD") or not (m := _PROCESS.match(line)):
            return False
        into = self.dead if self.section == "DEAD" else self.missing_procs
        if len(into) < MAX_ITEMS:
            into.append(m.group(1)[:300])
        return True

    def _comm_head(self, line: str) -> bool:
        """``#G-C (hash) KIND`` opens a communicator's block; a communicator past the cap is read as none."""
        if not (m := _COMM_HEAD.match(line)):
            return False
        key = m.group(3).lower()[:64]
        if key not in self.comms and len(self.comms) >= MAX_ITEMS:
            self.cur = None
            return True
        self.cur = self.comms.setdefault(key, {"group": digits(m.group(1), -1), "ranks": {}, "missing": {},
                                               "errors": set(), "top": {}})
        self.cur["errors"].add(m.group(4))
        self.section, self.coll, self.group_value = m.group(4), "", None
        return True

    def _comm_line(self, cur: dict, line: str) -> None:
        """Inside a block: the collective whose counts differ, then a group's or a rank's count (MISMATCH
        only), or a rank named with its place."""
        counting = self.section == "MISMATCH" and self.coll
        if m := _DIFFERENT.match(line):
            self.coll = m.group(1)[:40]
        elif counting and (m := _GROUP_OPS.match(line)):
            self._group_ops(cur, m)
        elif counting and (m := _RANK_OPS.match(line)):
            self._rank_ops(cur, m)
        elif m := _RANK_ONLY.match(line):
            self._rank_only(cur, m)

    def _group_ops(self, cur: dict, m: re.Match[str]) -> None:
        """``N ranks have launched up to operation K``: the count of the ranks listed next (or of the
        group not listed), and a candidate for the most advanced."""
        self.group_value = digits(m.group(2) or "0")
        if self.group_value is not None:
            cur["top"][self.coll] = max(cur["top"].get(self.coll, 0), self.group_value)

    def _rank_ops(self, cur: dict, m: re.Match[str]) -> None:
        """``Rank R has launched up to operation K``: one outlier's own count."""
        r, ops = _rank(m.group(1)), digits(m.group(2) or "0")
        if r is None or ops is None or (r not in cur["ranks"] and len(cur["ranks"]) >= MAX_ITEMS):
            return
        entry = cur["ranks"].setdefault(r, {"counts": {}})
        entry["counts"][self.coll] = ops
        cur["top"][self.coll] = max(cur["top"].get(self.coll, 0), ops)
        _place(entry, m)

    def _rank_only(self, cur: dict, m: re.Match[str]) -> None:
        """``Rank R [has status S] -- ...``: a missing rank (INCOMPLETE), or a member of the group whose
        count came just above (MISMATCH)."""
        r = _rank(m.group(1))
        where = cur["missing"] if self.section == "INCOMPLETE" else cur["ranks"]
        if r is None or (r not in where and len(where) >= MAX_ITEMS):
            return
        entry = where.setdefault(r, {"counts": {}})
        if self.section == "MISMATCH" and self.coll and self.group_value is not None:
            entry["counts"][self.coll] = self.group_value
        if m.group(2):
            entry["status"] = m.group(2)
        _place(entry, m)

    def report(self) -> RasReport:
        """The communicators the blocks named (sized from the table); with no block, the table's groups."""
        out = []
        for key, c in self.comms.items():
            size, status, _errs = self.table.get(c["group"], (None, "", []))
            out.append(RasComm(key, size, _text_ranks(c["ranks"]), _text_ranks(c["missing"], True),
                               tuple(sorted(c["errors"])), status, dict(c["top"])))
        if not out and self.table:  # no errors, no warnings: the table alone (ranks in step, counts not shown)
            out = [RasComm(f"group{g}", size, (), (), tuple(e for e in errs if e != "OK"), status)
                   for g, (size, status, errs) in sorted(self.table.items())]
        return RasReport("text", self.version, tuple(out), tuple(self.dead), tuple(self.missing_procs),
                         counts_complete=False)


def parse_ras_text(text: str) -> RasReport:
    if len(text) > MAX_REPORT_CHARS:
        raise ParseError(f"ncclras: a report of {len(text):,} characters (more than any real one)")
    reader = _TextReader()
    for raw in text.splitlines():
        reader.feed(raw.rstrip())
    if not reader.seen:
        raise ParseError(f"ncclras: no 'NCCL version' or report section in {text.strip()[:160]!r}")
    return reader.report()


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


def _json_errors(ranks: list[RasRank], missing: list[RasRank]) -> tuple[str, ...]:
    """The errors the text report would print for this communicator, in its order, so both formats read alike."""
    errors = []
    if missing:
        errors.append("INCOMPLETE")
    if len({tuple(sorted(r.counts.items())) for r in ranks}) > 1:
        errors.append("MISMATCH")
    if any(r.status == "ABORT" for r in ranks):
        errors.append("ERROR")
    return tuple(errors)


def _json_comm(c: dict) -> RasComm:
    """One communicator of ``-f json``: ranks that are not objects or have no valid number are dropped."""
    ranks = [x for r in _list(c.get("ranks")) if isinstance(r, dict) and (x := _json_rank(r, False))]
    missing = [x for r in _list(c.get("missing_ranks")) if isinstance(r, dict) and (x := _json_rank(r, True))]
    return RasComm(short_text(c.get("hash"), 64) or "", count(c.get("size"), None, MAX_RANK),
                   tuple(sorted(ranks, key=lambda r: r.rank)), tuple(missing), _json_errors(ranks, missing),
                   "RUNNING" if ranks else "")


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
    comms = [_json_comm(c) for c in _list(data["communicators"]) if isinstance(c, dict)]
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


def _two_reads(first: RasReport | None, second: RasReport | None) -> tuple[RasReport, RasReport, bool]:
    """The pair to judge and whether it is one read: a lone read stands for both, and the flag keeps it
    from being called frozen."""
    one_read = first is None or second is None
    if one_read:
        first = second = first or second
    assert first is not None and second is not None
    return first, second, one_read


def _gone_verdict(second: RasReport, ranks: dict[int, RasRank], name: Callable[[int], str] | None) -> RasVerdict | None:
    """Ranks not answering or dead (or dead processes the report lists), before any count: a job that lost
    a rank waits for it, and its counts say nothing more. None when every rank is there."""
    missing = tuple(sorted(r for r, x in ranks.items() if x.unresponsive or x.dead))
    dead = tuple(sorted(r for r, x in ranks.items() if x.dead))
    if not (missing or second.dead):
        return None
    who = ", ".join(_label(name, r) + (" (dead)" if r in dead else " (not answering)") for r in missing)
    return RasVerdict("missing-ranks", f"RAS: {who or '; '.join(second.dead)} missing from the job",
                      missing=missing, dead=dead)


def _counts(ranks: dict[int, RasRank]) -> dict[int, dict[str, int]]:
    """Each rank's counts, for the ranks whose counts the report gives."""
    return {r: x.counts for r, x in ranks.items() if x.counts}


def _countless_verdict(second: RasReport) -> RasVerdict:
    """No counts at all: the text report omits them when the ranks agree, so no MISMATCH means in step."""
    if second.comms and not any("MISMATCH" in c.errors for c in second.comms):
        return RasVerdict("in-step", "RAS: every rank in step, no rank missing (the text report shows no "
                          "counts; -f json, NCCL 2.28.7+, shows whether they move)")
    return RasVerdict("unknown", "RAS: no communicator data" if not second.comms else "RAS: no operation counts")


def _top_and_key(c2: dict[int, dict[str, int]], lead: dict[str, int]) -> tuple[dict[str, int], str]:
    """Per collective the most advanced count (the group a text report does not list included), and the
    collective to judge by: the one the spread is in, else the one a model's layers run (AllReduce), else
    the busiest. A tie goes to AllReduce, then to the first name in order: the collectives come from a set,
    whose order changes from one process to the next, and the same reads must say the same thing."""
    names = sorted({k for v in c2.values() for k in v})
    top = {c: max([v.get(c, 0) for v in c2.values()] + [lead.get(c, 0)]) for c in names}
    differ = [c for c in top if any(v.get(c, top[c]) != top[c] for v in c2.values()) or c in lead]

    def busiest(among: list[str]) -> str:
        return max(among, key=lambda c: (top[c], c == "AllReduce"))

    key = busiest(differ) if differ else "AllReduce" if top.get("AllReduce") else busiest(list(top))
    return top, key


def _behind(c2: dict[int, dict[str, int]], top: dict[str, int]) -> dict[int, int]:
    """Rank -> operations behind the most advanced, over every collective; ranks level with it left out."""
    return {r: n for r, v in c2.items() if (n := sum(top[c] - v.get(c, top[c]) for c in top)) > 0}


def _moved(c1: dict[int, dict[str, int]], c2: dict[int, dict[str, int]], one_read: bool) -> bool | None:
    """Whether any rank's counts changed between the reads; None when that cannot be known (one read, or
    no counts in the first)."""
    if one_read or not c1:
        return None
    return any(c1.get(r) != v for r, v in c2.items())


def _spread(ops2: dict[int, int], lead: dict[str, int], key: str, behind: dict[int, int],
            name: Callable[[int], str] | None) -> tuple[str, list[int]]:
    """Where the ranks stopped, in words, and the suspects. A group the text report did not list that is
    ahead of every listed rank leads the words, and then every rank behind is a suspect."""
    groups, suspects = roll_call(ops2)
    spread = ", ".join(f"{', '.join(_label(name, r) for r in rs)} at op {v}" for v, rs in groups)
    if lead.get(key, 0) > max(ops2.values()):
        spread = f"the others at op {lead[key]}, " + spread
        suspects = sorted(behind)
    return spread, suspects


def _out_of_step(spread: str, frozen: str, behind: dict[int, int], ops2: dict[int, int], suspects: list[int],
                 key: str, name: Callable[[int], str] | None) -> RasVerdict:
    """Ranks behind the most advanced: how far each is, and (more than two ranks) the odd ones out."""
    names = ", ".join(f"{_label(name, r)} {n} op{'s' if n != 1 else ''} behind" for r, n in sorted(behind.items()))
    odd = (f"; not with the others: {', '.join(_label(name, r) for r in suspects)}"
           if suspects and len(ops2) > 2 else "")
    return RasVerdict("out-of-step", f"ranks out of step: {spread} ({frozen}; {names}{odd})", behind, ops2,
                      spread=spread, collective=key)


def verdict(first: RasReport | None, second: RasReport | None, interval_s: float,
            name: Callable[[int], str] | None = None, why_absent: str | None = None) -> RasVerdict:
    """What two reads ``interval_s`` apart say (``name`` maps a rank number to a station's name). One
    read (``second`` None, or ``first`` None) is judged as one: where the ranks are, never "frozen"."""
    if first is None and second is None:
        return RasVerdict("unavailable", f"RAS not read: {why_absent or 'no report'}")
    first, second, one_read = _two_reads(first, second)
    r1, r2 = first.ranks(), second.ranks()
    if (gone := _gone_verdict(second, r2, name)) is not None:
        return gone
    c1, c2 = _counts(r1), _counts(r2)
    if not c2:
        return _countless_verdict(second)
    lead = second.main().lead
    top, key = _top_and_key(c2, lead)
    ops2 = {r: v.get(key, top[key]) for r, v in c2.items()}
    behind = _behind(c2, top)
    moved = _moved(c1, c2, one_read)
    spread, suspects = _spread(ops2, lead, key, behind, name)
    if moved:
        return RasVerdict("moving", f"RAS: operations advance ({spread} after {interval_s:g} s): NCCL is not stuck",
                          behind, ops2)
    frozen = f"frozen over {interval_s:g} s" if moved is False else "one read: whether they move is not known"
    if behind:
        return _out_of_step(spread, frozen, behind, ops2, suspects, key, name)
    if one_read:
        return RasVerdict("one-read", f"RAS: every rank at {key} op {top[key]} ({frozen}: no second read)", {}, ops2,
                          spread=spread, collective=key, at=top[key])
    return RasVerdict("frozen-equal", f"RAS: every rank at {key} op {top[key]}, {frozen}: a stuck kernel or host "
                      "(every rank entered the same collective and none completes)", {}, ops2, spread=spread,
                      collective=key, at=top[key])
