"""``dgx-console doctor [--json] [--rung ID ...]``: the NCCL troubleshooting ladder across every station pair.

Exit 0 when every rung passes (warn/skip do not fail), 1 when one fails (or the run was cancelled),
2 on usage/config errors. Progress goes to stderr. ``--rung relaunch`` with ``--set``/``--unset`` is an
action: the exact diff against the normal launch is printed first and confirmed (``--yes`` to skip).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from console import json_out
from console.commands.args import UsageError, add_config_args, check_seconds
from console.commands.check import MARK
from console.config import Config, load_config
from console.doctor import store
from console.doctor.context import DoctorOptions, RelaunchPlan
from console.doctor.model import DoctorReport
from console.doctor.relaunch import DebugRelaunch, TryResult, parse_set, plan_error
from console.doctor.runner import BY_ID, RUNGS, run_doctor, select
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.session import make_transport
from console.sanitize import clean, one_line
from console.service.actions import ActionFailed, ReadOnlyError, require_writable
from console.tasks import on_signal
from console.vocabulary import CheckStatus


def _progress(rung: str, text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}   {rung}: {one_line(text)[:160]}", file=sys.stderr, flush=True)


def _on_rung(rung: str, state: str, results) -> None:
    r = BY_ID[rung]
    if state == "running":
        print(f"{time.strftime('%H:%M:%S')} {r.number} {r.id}: {r.title} ...", file=sys.stderr, flush=True)


def print_report(report: DoctorReport, out=sys.stdout) -> None:
    width = max((len(r.station) for r in report.results), default=4)
    for rung in RUNGS:
        rows = report.of(rung.id)
        if not rows:
            continue
        print(f"== {rung.number} {rung.id}: {rung.title}", file=out)
        for r in rows:
            print(f"{MARK[r.status]}  {r.station:<{width}}  {one_line(r.summary)}", file=out)
            if r.status in (CheckStatus.FAIL, CheckStatus.WARN) and r.next:
                print(f"      next: {one_line(r.next)}", file=out)
    verdict = report.verdict
    note = {"ok": "", "cancelled": " (the run stopped before its end)"}.get(verdict, " (the first failing rung)")
    print(f"verdict: {verdict}{note}", file=out)
    cause, nxt = report.conclusion()
    print(f"cause: {one_line(cause)}", file=out)
    print(f"  next: {one_line(nxt)}", file=out)
    if report.cancelled and verdict != "cancelled":
        print(f"(cancelled in {report.cancelled_at or 'a rung'}: the rungs after it did not run)", file=out)


def print_tries(tries: list[dict], out=sys.stderr) -> None:
    if not tries:
        return
    print("tries (this config):", file=out)
    for t in tries:
        tr = TryResult.from_dict(t)
        print(f"  #{tr.number:<3} {'; '.join(tr.changed) or 'debug output only':<44} {tr.result:<16} "
              f"{tr.transport:<8} {one_line('; '.join(f'{k}: {v}' for k, v in tr.nccl.items()))[:90]}", file=out)


async def _connect(config: Config, trust: bool):
    transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                  for s in config.stations}
    await trust_stations(transports.values(), HostKeyChoice(trust), config.connect_timeout_s + 2)
    return transports


async def _prepare(config: Config, plan: RelaunchPlan, trust: bool) -> tuple[DebugRelaunch, dict[str, str]]:
    transports = await _connect(config, trust)
    dr = DebugRelaunch(config, transports)
    try:
        diffs = await dr.plan(plan)
    finally:
        await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)
    dr.transports = None  # the run opens its own
    return dr, diffs


async def _run(config: Config, args: argparse.Namespace, rungs: list[str], options: DoctorOptions) -> DoctorReport:
    transports = await _connect(config, args.trust_host_key)
    if options.relaunch is not None and isinstance(options.relaunch.prepared, DebugRelaunch):
        options.relaunch.prepared.transports = transports
    stop = asyncio.Event()

    def on_sigint() -> None:
        print("dgx-console: cancelling the doctor (the running rung cleans up) ...", file=sys.stderr, flush=True)
        prepared = options.relaunch.prepared if options.relaunch else None
        if not (isinstance(prepared, DebugRelaunch) and prepared.cancel()):
            stop.set()

    try:
        with on_signal(on_sigint):
            return await run_doctor(config, transports, rungs, options, _on_rung, _progress, stop=stop)
    finally:
        await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)


def run(args: argparse.Namespace) -> int:
    try:
        chosen = [r.id for r in select(args.rung)]
    except ValueError as exc:
        raise UsageError(f"--rung: {exc}") from None
    for name, value, limit in (("--nccl-timeout", args.nccl_timeout, 3600.0), ("--interval", args.interval, 3600.0),
                               ("--timeout", args.timeout, 86400.0)):
        if value is not None:
            check_seconds(name, value, limit)
    config = load_config(args.config)
    names = [s.name for s in config.stations]
    try:
        overrides = parse_set(list(args.set or []) + [f"-{x}" for x in args.unset or []], names)
    except ValueError as exc:
        raise UsageError(f"--set/--unset: {exc}") from None
    explicit_relaunch = bool(args.rung) and "relaunch" in chosen
    if overrides and not explicit_relaunch:
        raise UsageError("--set/--unset go with --rung relaunch (the debug relaunch is an action)")
    options = DoctorOptions(nccl_timeout_s=args.nccl_timeout or DoctorOptions.nccl_timeout_s,
                            counter_interval_s=args.interval or DoctorOptions.counter_interval_s,
                            rdma_gpu=False if args.host_only else None, rdma_latency=not args.no_latency,
                            ready_timeout_s=args.timeout)
    if explicit_relaunch:
        try:
            require_writable(getattr(args, "read_only", False))
        except ReadOnlyError as exc:
            raise UsageError(str(exc)) from None
        if not args.yes and not sys.stdin.isatty():
            raise UsageError("refusing to relaunch without --yes (stdin is not a terminal to confirm on)")
        plan = RelaunchPlan(overrides, restore=not args.keep, number=store.next_try_number(config))
        try:
            dr, diffs = asyncio.run(_prepare(config, plan, args.trust_host_key))
        except ActionFailed as exc:
            print(f"relaunch: cannot build the launch commands: {one_line(plan_error(exc))}", file=sys.stderr)
            return 1
        print(f"debug relaunch, try {plan.number} -- the exact difference from the normal launch:", file=sys.stderr)
        for text in diffs.values():
            print(clean(text), file=sys.stderr)
        print("afterwards: " + ("the normal command is relaunched" if plan.restore else "the try is kept running"),
              file=sys.stderr)
        if not args.yes:
            try:
                answer = input("relaunch now? [y/N] ")
            except (EOFError, KeyboardInterrupt):
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("relaunch: CANCELLED: nothing was changed", file=sys.stderr)
                return 1
        plan.prepared = dr
        options.relaunch = plan
    report = asyncio.run(_run(config, args, chosen, options))
    store.save_report(config, report.to_dict())
    tries = store.tries(config) if explicit_relaunch else []
    if args.json:
        data = report.to_dict()
        if tries:
            data["tries"] = tries
        print(json_out.dumps(data, indent=2))
    else:
        print_report(report)
        print_tries(tries)
    return 1 if report.cancelled else report.exit_code


def register(sub) -> None:
    ids = ", ".join(f"{r.number} {r.id}" for r in RUNGS)
    p = sub.add_parser("doctor", help="NCCL troubleshooting ladder across every station pair",
                       description="Climb the NCCL troubleshooting ladder on every station pair: " + ids + ".")
    add_config_args(p)
    p.add_argument("--json", action="store_true",
                   help='machine-readable: {"rungs":[{"id","station","status","summary","evidence","next"}],'
                        '"verdict":"<first failing rung>|ok"}')
    p.add_argument("--rung", action="append", metavar="ID", help=f"run only these rungs (repeatable; {ids})")
    p.add_argument("--set", action="append", metavar="[STATION:]NAME=VALUE",
                   help="with --rung relaunch: set an NCCL/GLOO/UCX variable for the try (every station, or one)")
    p.add_argument("--unset", action="append", metavar="[STATION:]NAME",
                   help="with --rung relaunch: remove a variable from the try's command")
    p.add_argument("--keep", action="store_true", help="with --rung relaunch: leave the try running (no restore)")
    p.add_argument("--yes", "-y", action="store_true", help="relaunch without asking (after printing the diff)")
    p.add_argument("--timeout", type=float, metavar="S", help="relaunch: seconds to wait for the head to be ready")
    p.add_argument("--nccl-timeout", type=float, metavar="S",
                   help=f"nccl-tests with no result by then is a hang (default {DoctorOptions.nccl_timeout_s:g})")
    p.add_argument("--interval", type=float, metavar="S",
                   help=f"seconds between the two counter reads (default {DoctorOptions.counter_interval_s:g})")
    p.add_argument("--host-only", action="store_true", help="RDMA rung: host memory only (no GPU memory runs)")
    p.add_argument("--no-latency", action="store_true", help="RDMA rung: skip ib_write_lat")
    p.set_defaults(func=run)
