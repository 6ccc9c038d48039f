"""``dgx-console check [--json] [--only ID ...]``: link and preflight checks.

Exit 0 when every check passes (warn/skip do not fail), 1 when any fails (a station that cannot be
reached fails ``station-reachable``), 2 on usage/config error (an unknown check id or station in
``--only`` included).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.args import UsageError, add_config_args
from console.commands.status import add_replace_host_key
from console.config import load_config
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.session import SessionRegistry
from console.sanitize import one_line
from console.station.checks import overall, run_checks, to_json, unknown_selection
from console.vocabulary import CheckStatus

MARK = {s: s.upper() for s in CheckStatus}  # "PASS  link-down ..." (check, doctor, validate-rdma)


async def _run(config, trust: bool, only: list[str] | None, replace: str | None = None):
    async with SessionRegistry(config) as sessions:
        # a refusal is reported by station-reachable
        await trust_stations(sessions.transports().values(), HostKeyChoice(trust, replace),
                             config.connect_timeout_s + 2)
        return await run_checks(config, sessions.transports(), only=only)


def run(args: argparse.Namespace) -> int:
    only = None
    if args.only is not None:
        only = [x.strip() for item in args.only for x in item.split(",") if x.strip()]
        if not only:  # --only '' would run nothing and say all passed
            raise UsageError("--only needs at least one check id (e.g. --only mtu or --only mtu@A)")
        bad = unknown_selection(None, only)  # an unknown id is wrong whatever the config
        if bad:
            raise UsageError(f"--only: {bad}")
    config = load_config(args.config)
    if only:
        bad = unknown_selection(config, only)
        if bad:
            raise UsageError(f"--only: {bad}")
    results = asyncio.run(_run(config, args.trust_host_key, only, args.replace_host_key))
    if args.json:
        print(to_json(results))
    else:
        width = max((len(r.station) for r in results), default=4)
        for r in results:
            print(f"{MARK[r.status]}  {r.id:<20} {r.station:<{width}}  {one_line(r.summary)}")
            if r.status == CheckStatus.FAIL and r.fix:
                print(f"      fix: {one_line(r.fix)}")
        counts = {s: sum(r.status == s for r in results) for s in MARK}
        print(", ".join(f"{n} {s}" for s, n in counts.items()), file=sys.stderr)
    return overall(results)


def register(sub) -> None:
    p = sub.add_parser("check", help="link and preflight checks (exit 0 all pass, 1 any fail)")
    add_config_args(p)
    add_replace_host_key(p)
    p.add_argument("--json", action="store_true", help='machine-readable: {"checks":[...]}')
    p.add_argument("--only", action="append", metavar="ID[@STATION]",
                   help="run only these checks (repeatable or comma-separated)")
    p.set_defaults(func=run)
