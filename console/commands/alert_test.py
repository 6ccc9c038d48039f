"""``dgx-console alert-test [--json]``: one test alert to every sink of ``[alerts]``, and what each said.

Each sink is tried as a real alert is (the same payload shape, timeout and retries; switches and the
rate limit do not apply to a test). Prints one line per sink (URLs masked); ``--json``:
``{"sinks":[{"sink","target","status":"sent|failed|unavailable","detail","attempts","seconds"}]}``.
Exit 0 every sink took it, 1 one did not (failed, or a desktop notification not available here),
2 usage/config error (no sink configured included).
"""

from __future__ import annotations

import argparse
import asyncio

from console import json_out
from console.commands.args import add_config_args
from console.config import load_config
from console.errors import UsageError
from console.incidents.alerts import Alerter
from console.incidents.sinks import Outcome
from console.sanitize import clean


async def send_test(alerter: Alerter) -> list[Outcome]:
    return await alerter.send_all(alerter.test_alert().masked(alerter.mask))


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if not config.alerts.configured:
        raise UsageError("no alert sink configured: set webhook, ntfy or desktop = true in [alerts] "
                         f"({config.path or 'the config'})")
    alerter = Alerter(config)
    got = asyncio.run(send_test(alerter))
    if args.json:
        print(json_out.dumps({"sinks": [o.to_json() for o in got]}))
    else:
        for o in got:
            print(f"{o.status.upper():<11} {o.sink:<8} {clean(o.target)}  {clean(o.detail)}"
                  + (f" ({o.attempts} tries, {o.seconds:.1f} s)" if o.attempts > 1 else ""))
    return 0 if all(o.status == "sent" for o in got) else 1


def register(sub) -> None:
    p = sub.add_parser("alert-test", help="send one test alert to every [alerts] sink (exit 0 all took it, 1 any failed)")
    add_config_args(p)
    p.add_argument("--json", action="store_true", help='machine-readable: {"sinks":[...]}')
    p.set_defaults(func=run)
