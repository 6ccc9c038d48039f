"""``dgx-console validate-rdma [--json] [--host-only]``: perftest between the rails.

Exit 0 when every run passes (or only warns), 1 when any fails, 2 on usage/config error.
Progress goes to stderr; the server process is cleaned up on Ctrl+C too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.args import UsageError, add_config_args
from console.commands.check import MARK
from console.config import load_config
from console.station.rdma import overall, to_json, validate_rdma
from console.vocabulary import CheckStatus


def _progress(kind: str, detail: dict) -> None:
    if kind == "server-ready":
        print(f"... {detail['rail']} {detail['memory']} memory: server ready on {detail['station']}", file=sys.stderr)
    elif kind == "server-stopped":
        print(f"... {detail['rail']} {detail['memory']} memory: server on {detail['station']} cleaned up",
              file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if not config.workers:
        raise UsageError("validate-rdma needs at least two stations in the config")
    runs = asyncio.run(validate_rdma(config, on_event=_progress, gpu=False if args.host_only else None))
    if args.json:
        print(to_json(runs))
    else:
        for r in runs:
            print(f"{MARK[r.status]}  {r.id:<15} {r.summary}")
            if r.status != CheckStatus.PASS and r.fix:
                print(f"      fix: {r.fix}")
    return overall(runs)


def register(sub) -> None:
    p = sub.add_parser("validate-rdma", help="perftest between the rails (GPU memory where supported)")
    add_config_args(p)
    p.add_argument("--json", action="store_true", help='machine-readable: {"runs":[...],"result":"ok|failed"}')
    p.add_argument("--host-only", action="store_true", help="skip the GPU-memory (GPUDirect) runs")
    p.set_defaults(func=run)
