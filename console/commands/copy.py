"""``dgx-console copy checkpoint|image``: a checkpoint directory or a container image to the other
station over the rail, resumable, then its identity compared on both sides.

Exit 0 copied (or already there) and the same on both sides, or the plan printed (``--dry-run``);
1 refused (a bad symlink, not enough space, nothing at the source), cut (run it again: it resumes) or
the two sides differ; 2 usage/config error. Progress (a bar and the rate) goes to stderr."""

from __future__ import annotations

import argparse
import asyncio
import sys

from console import json_out
from console.commands.args import UsageError, add_config_args, check_count
from console.config import load_config
from console.probes.copy_manifest import Progress
from console.remote.transport import TransportError
from console.sanitize import one_line
from console.service.copy import CopyKind, CopyResult, CopyResultKind, gb, plan_copy, run_copy

BAR_WIDTH = 30


def bar_line(p: Progress) -> str:
    """``[#########-----] 45% 1.23 GB/s 12.30 GB eta 0:00:12`` (rsync's own counts)."""
    filled = BAR_WIDTH * max(0, min(100, p.pct)) // 100
    return (f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {p.pct:3d}% {gb(p.rate_bytes_s)}/s "
            f"{gb(p.bytes_done)} eta {p.eta}")


async def _copy(args: argparse.Namespace) -> CopyResult:
    cfg = load_config(getattr(args, "config", None))
    plan, t = await plan_copy(cfg, CopyKind(args.kind), args.what, args.source, args.destination,
                              getattr(args, "dest", None))
    try:
        if args.dry_run:
            return CopyResult(plan, CopyResultKind.PLANNED if not plan.refused else CopyResultKind.REFUSED,
                              detail="; ".join(plan.refused) or "dry run: nothing copied")
        if not args.json:
            print("\n".join(plan.lines()), file=sys.stderr)
        tty = sys.stderr.isatty()
        quarters: set[int] = set()  # without a terminal: one line per quarter, not one per update

        def progress(p: Progress) -> None:
            if tty:
                sys.stderr.write("\r\x1b[2K" + bar_line(p))
            elif p.pct // 25 not in quarters:
                quarters.add(p.pct // 25)
                sys.stderr.write(bar_line(p) + "\n")
            sys.stderr.flush()

        result = await run_copy(plan, t, args.bwlimit, None if args.json else progress)
        if tty and not args.json:
            sys.stderr.write("\n")
        return result
    finally:
        await t.close()


def run(args: argparse.Namespace) -> int:
    check_count("--bwlimit", args.bwlimit, 1, 10_000_000)
    if getattr(args, "read_only", False) and not args.dry_run:
        raise UsageError("read-only mode: copy writes to a station (--dry-run only reads the plan)")
    try:
        result = asyncio.run(_copy(args))
    except TransportError as exc:  # the source station itself not reached: nothing was started
        print(f"dgx-console: copy: {one_line(str(exc), 300)}", file=sys.stderr)
        return 1
    if args.json:
        print(json_out.dumps(result.to_json()))
    else:
        if result.result == CopyResultKind.PLANNED or result.result == CopyResultKind.REFUSED:
            print("\n".join(result.plan.lines()))
        rate = result.rate_bytes_s
        tail = f" in {result.seconds:.1f} s ({gb(rate)}/s)" if rate else ""
        print(f"{result.result}: {result.detail}{tail}")
        for d in result.differences:
            print(f"  {d}")
    return 0 if result.result in (CopyResultKind.OK, CopyResultKind.PLANNED) else 1


def register(sub) -> None:
    p = sub.add_parser("copy", help="copy a checkpoint or an image to the other station over the rail, verified",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p)
    p.add_argument("kind", choices=[k.value for k in CopyKind], help="checkpoint (a directory) or image")
    p.add_argument("what", nargs="?", metavar="PATH|IMAGE",
                   help="the directory or image (default: the profile's model_dir or image)")
    p.add_argument("--from", dest="source", metavar="STATION", help="source station (default: the head)")
    p.add_argument("--to", dest="destination", metavar="STATION",
                   help="destination station (default: the other one, when there is one)")
    p.add_argument("--dest", metavar="PATH", help="the directory on the destination (default: the same path)")
    p.add_argument("--bwlimit", type=int, metavar="MBPS", help="cap the copy at MBPS megabit/s (a serving rail)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (sizes, free space, refusals); copy nothing")
    p.add_argument("--json", action="store_true", help="one JSON object: the plan, result, rate, differences")
    p.set_defaults(func=run)


__all__ = ["UsageError", "bar_line", "register", "run"]
