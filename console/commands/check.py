"""``dgx-console check [--json] [--only ID ...]``: link and preflight checks.

Exit 0 when every check passes (warn/skip do not fail), 1 when any fails, 2 on usage/config error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from console.checks import CHECK_IDS, overall, run_checks, to_json
from console.cli import UsageError, add_config_args
from console.config import load_config
from console.remote.transport import TransportError, make_transport

MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP"}


async def _run(config, trust: bool, only: list[str] | None):
    transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                  for s in config.stations}
    try:
        if trust:
            from console.status import connect_with_trust

            for t in transports.values():
                with contextlib.suppress(TransportError):
                    await asyncio.wait_for(connect_with_trust(t, True), config.connect_timeout_s + 2)
        return await run_checks(config, transports, only=only)
    finally:
        await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)


def run(args: argparse.Namespace) -> int:
    only = None
    if args.only:
        only = [x for item in args.only for x in item.split(",") if x]
        unknown = [x for x in only if x.split("@")[0] not in CHECK_IDS]
        if unknown:
            raise UsageError(f"--only: unknown check {unknown[0]!r} (known: {', '.join(CHECK_IDS)})")
    config = load_config(args.config)
    results = asyncio.run(_run(config, args.trust_host_key, only))
    if args.json:
        print(to_json(results))
    else:
        width = max((len(r.station) for r in results), default=4)
        for r in results:
            print(f"{MARK[r.status]}  {r.id:<20} {r.station:<{width}}  {r.summary}")
            if r.status == "fail" and r.fix:
                print(f"      fix: {r.fix}")
        counts = {s: sum(r.status == s for r in results) for s in MARK}
        print(", ".join(f"{n} {s}" for s, n in counts.items()), file=sys.stderr)
    return overall(results)


def register(sub) -> None:
    p = sub.add_parser("check", help="link and preflight checks (exit 0 all pass, 1 any fail)")
    add_config_args(p)
    p.add_argument("--json", action="store_true", help='machine-readable: {"checks":[...]}')
    p.add_argument("--only", action="append", metavar="ID[@STATION]",
                   help="run only these checks (repeatable or comma-separated)")
    p.set_defaults(func=run)
