"""``dgx-console incidents [--json] [--since WHEN]`` and ``incidents show ID [--json]``: the incident
ledger (console/incidents/store.py): what happened, when, on which stations, what the console
concluded and did, and where the evidence is.

``--json`` prints one object ``{"incidents": [...], "stalls": [...]}``, newest first: each incident
with ``id``, ``kind`` (wedge / stuck / out-of-step / rank-death; gpu-fault / rail / unreachable), ``start``, ``end`` (null: still open, or its
console ended first), ``seconds``, ``stations``, ``verdict``, ``next_step``, ``bundle`` (null: none,
or pruned: ``note`` says), ``bundle_bytes``, ``action`` (captured / skipped / failed / nothing, with
``restarted`` added when the engine restarted during it, ``stopped`` when it ended with the engine stopped, ``alerted`` when an alert went out), ``service``, ``owner``, ``note``; each stall
with ``start``, ``seconds``, ``stations``, ``running``, ``service``. ``--since`` takes an age (``90m``,
``2h``, ``7d``), a date or date and time (``2026-12-05``, ``2026-12-05T14:00``; local time) or Unix
seconds. Exit 0; 1 for ``show`` of an id the ledger does not hold; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime

from console.errors import UsageError
from console.incidents.recorder import stall_words
from console.incidents.store import Incident, Ledger, LedgerError
from console.sanitize import one_line

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``'s value as wall time; UsageError with the forms it takes."""
    now = time.time() if now is None else now
    t = text.strip()
    if m := _AGE.match(t):
        return now - float(m.group(1)) * _UNIT[m.group(2)]
    try:
        if re.fullmatch(r"\d{9,11}(\.\d+)?", t):
            return float(t)
        return datetime.fromisoformat(t).timestamp()
    except ValueError:
        pass
    raise UsageError(f"--since {one_line(text, 60)!r}: give an age (90m, 2h, 7d), a date (2026-12-05), "
                     "a date and time (2026-12-05T14:00) or Unix seconds")


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _length(i: Incident) -> str:
    if i.end is None:
        return "open"
    s = int(round(i.end - i.start))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def table(incidents: list[Incident], stalls, now: float) -> str:
    if not incidents:
        lines = ["no incidents in the ledger" + ("" if not stalls else "")]
    else:
        rows = [("ID", "KIND", "START", "LENGTH", "STATIONS", "ACTION", "VERDICT")]
        rows += [(str(i.id), i.kind, _when(i.start), _length(i), ",".join(i.stations), i.action,
                  one_line(i.verdict, 70)) for i in incidents]
        widths = [max(len(r[c]) for r in rows) for c in range(6)]
        lines = ["  ".join(r[c].ljust(widths[c]) for c in range(6)) + "  " + r[6] for r in rows]
    if stalls:
        longest = max(s.seconds for s in stalls)
        lines.append(f"{len(stalls)} stall{'s' if len(stalls) != 1 else ''} (freezes that healed by themselves), "
                     f"longest {longest:.0f} s; last at {_when(stalls[0].start)}")
        if words := stall_words(stalls, now):
            lines.append(words)
    return "\n".join(lines)


def show(i: Incident) -> str:
    out = [f"incident {i.id}: {i.kind} on {', '.join(i.stations)}",
           f"  start:     {_when(i.start)}", f"  end:       {_when(i.end) if i.end else 'open (or its console ended)'}",
           f"  length:    {_length(i)}", f"  verdict:   {one_line(i.verdict, 400)}",
           f"  next step: {one_line(i.next_step, 400)}", f"  action:    {i.action}",
           f"  bundle:    {i.bundle or '-'}" + (f" ({i.bundle_bytes / 1024:.0f} KiB)" if i.bundle else ""),
           f"  console:   {i.owner}"]
    if i.note:
        out.append(f"  note:      {one_line(i.note, 400)}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    ledger = Ledger()
    try:
        if getattr(args, "incidents_command", None) == "show":
            try:
                iid = int(args.id)
            except ValueError:
                raise UsageError(f"incidents show: {one_line(args.id, 40)!r} is not an incident id (a number)") from None
            got = ledger.get(iid)
            if got is None:
                print(f"dgx-console: no incident {iid} in the ledger ({ledger.path})", file=sys.stderr)
                return 1
            print(json.dumps(got.to_json()) if args.json else show(got))
            return 0
        since = parse_since(args.since) if args.since is not None else None
        incidents = ledger.incidents(since)
        stalls = ledger.stalls(since)
    except LedgerError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({"incidents": [i.to_json() for i in incidents], "stalls": [s.to_json() for s in stalls]}))
    else:
        print(table(incidents, stalls, time.time()))
    return 0


def register(sub) -> None:
    p = sub.add_parser("incidents", help="the incident ledger: wedges, stuck start-ups, stalls, their evidence bundles")
    p.add_argument("--json", action="store_true", help='one object: {"incidents": [...], "stalls": [...]}')
    p.add_argument("--since", metavar="WHEN", help="only from then: an age (2h, 7d), a date (2026-12-05) or a time")
    inner = p.add_subparsers(dest="incidents_command", metavar="show ID")
    s = inner.add_parser("show", help="one incident in full")
    s.add_argument("id", metavar="ID")
    s.add_argument("--json", action="store_true", help="the incident as one JSON object")
    p.set_defaults(func=run)
