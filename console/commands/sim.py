"""``dgx-console sim``: simulated stations, headless, until killed."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile

from console.commands.args import UsageError
from console.config import DEFAULT_PROFILE, ConfigError, builtin_profiles, load_profile
from console.sim.world import KNOWN_FAULTS, World


def add_sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fault", action="append", default=[], metavar="NAME[@STATION]",
                   help="inject a fault (repeatable): " + ", ".join(sorted(KNOWN_FAULTS)))
    p.add_argument("--stations", type=int, default=2, metavar="N", help="number of stations (default 2)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, help="built-in profile: " + ", ".join(builtin_profiles()))
    p.add_argument("--time-scale", type=float, default=0.1, metavar="X",
                   help="real seconds per simulated second of engine time: smaller is faster "
                        "(default 0.1: a 420 s load takes 42 s)")
    p.add_argument("--api-key", metavar="KEY", help="the simulated API requires this key (Bearer)")


def check_sim_args(args: argparse.Namespace) -> None:
    """The simulator's flags, checked before anything starts (``demo`` checks them in its own process:
    one line, exit 2, not "simulator failed to start: ...")."""
    if not 1 <= args.stations <= 64:
        raise UsageError(f"--stations must be 1..64 (how many simulated stations to start), got {args.stations}")
    if not 0.0001 <= args.time_scale <= 10:
        raise UsageError(f"--time-scale must be in 0.0001..10, got {args.time_scale}")
    try:
        load_profile(args.profile)
    except ConfigError as exc:
        raise UsageError(f"--profile: {exc.message}") from None


def make_world(args: argparse.Namespace, root: str) -> World:
    check_sim_args(args)
    try:
        return World.create(root, args.profile, args.stations, args.fault, args.time_scale)
    except ValueError as exc:
        raise UsageError(f"--fault: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from console.sim.server import serve_forever

    own_root = args.root is None
    root = args.root or tempfile.mkdtemp(prefix="dgx-sim-")
    try:
        world = make_world(args, root)
        try:
            asyncio.run(serve_forever(world, args.write_config, args.running, api_key=args.api_key,
                                      ready_file=args.ready_file))
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


def register(sub) -> None:
    p = sub.add_parser("sim", help="run simulated stations headless (writes a config pointing at them)")
    p.add_argument("--write-config", metavar="PATH", help="write a dgx-console config for the simulated stations")
    p.add_argument("--running", action="store_true", help="start the service (workers first, then the head)")
    p.add_argument("--root", metavar="DIR", help="state directory (default: a temporary one, removed on exit)")
    p.add_argument("--ready-file", metavar="PATH", help=argparse.SUPPRESS)
    add_sim_args(p)
    p.set_defaults(func=run)
