"""``dgx-console replay BUNDLE --json [--interval S]``: an incident bundle's window
(``window.ndjson``, console/incidents/window.py) played back through the same ``StationState`` and
printer as ``watch --json``: the samples are turned back into the messages they came from (GPU
rounds, the API's polls, container, engine phase and connection changes), applied in time order,
and every ``--interval`` seconds of the window's time each station's ``watch --json`` object is
printed with ``"replay": true`` and ``t`` the window's time. A station counts as live from its
first sample unless the window records its connection. Without ``--json`` the window is replayed on
screen (console/ui/screens/replay.py; a terminal is needed); both play it back with
console/incidents/replay.py. Exit 0; 2 for a file that is not a bundle with a window.
"""

from __future__ import annotations

import argparse
import json
import sys

from console.commands.args import check_file_arg, check_seconds
from console.errors import UsageError
from console.incidents.replay import read_window, replay_lines


def run(args: argparse.Namespace) -> int:
    check_seconds("--interval", args.interval, limit=3600.0)
    check_file_arg(args.bundle)
    samples, incident = read_window(args.bundle)
    if not args.json:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("replay: the on-screen replay needs a terminal (--json prints the lines)")
        from console.ui.screens.replay import ReplayApp

        ReplayApp(args.bundle, float(args.window)).run()
        return 0
    for obj in replay_lines(samples, float(args.window), args.interval):
        sys.stdout.write(json.dumps(obj) + "\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("replay", help="an incident bundle's window played back (on screen, or as watch --json lines)")
    p.add_argument("bundle", metavar="BUNDLE", help="an incident bundle (incidents show ID says where)")
    p.add_argument("--json", action="store_true", help="print watch --json lines (default: replay it on screen)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="window seconds per line (default 1)")
    p.add_argument("--window", type=float, default=30.0, metavar="W", help="the wedge window to judge with (default 30)")
    p.set_defaults(func=run)
