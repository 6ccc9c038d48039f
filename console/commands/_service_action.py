"""What ``launch``, ``stop`` and ``restart`` share: arguments, confirmation, progress, output.

Progress goes to stderr as it happens; ``--json`` prints the result object on stdout. Exit 0 ok,
1 failed or cancelled, 2 usage (``--read-only``, config errors, no ``--yes`` without a terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time

from console.actions import (
    ActionEvent,
    ActionFailed,
    ActionResult,
    PlannedCommand,
    ReadOnlyError,
    ServiceActions,
    require_writable,
)
from console.cli import UsageError, add_config_args
from console.config import Config, load_config
from console.engines import LaunchSpec

_HELP = {
    "launch": "start the service: workers first, then the head; wait for ready, /health and the NCCL transport",
    "stop": "stop the service: the head first, then the workers",
    "restart": "docker start the stopped containers (workers, then head) and verify again",
}


def add_action_parser(sub, action: str, run) -> argparse.ArgumentParser:
    p = sub.add_parser(action, help=_HELP[action], description=_HELP[action])
    add_config_args(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--dry-run", action="store_true", help="print the exact commands, run nothing")
    if action in ("launch", "restart"):
        p.add_argument("--keep-on-failure", action="store_true",
                       help="leave started containers running when the start fails (default: stop them)")
        p.add_argument("--timeout", type=float, metavar="S",
                       help="seconds to wait for the head to be ready (default: 2.5x the profile's cold load)")
    if action == "launch":
        p.add_argument("--skip-checks", action="store_true", help="launch without the preflight checks")
    p.set_defaults(func=run)
    return p


def _printer(json_mode: bool):
    def on_event(ev: ActionEvent) -> None:
        stamp = time.strftime("%H:%M:%S")
        if ev.kind == "log":
            line = f"{stamp}   {ev.station} | {ev.text[:160]}"
        else:
            line = f"{stamp} {ev.station:>4}  {ev.text}"
        print(line, file=sys.stderr, flush=True)

    return on_event


def _print_plan(plan: list[PlannedCommand], out=sys.stderr) -> None:
    for i, pc in enumerate(plan, 1):
        print(f"{i}. [{pc.station}] {pc.what}:\n    {pc.preview}", file=out)


def _print_result(res: ActionResult, json_mode: bool) -> None:
    if json_mode:
        print(json.dumps(res.to_json(), indent=2))
    verdict = {"ok": "OK", "failed": "FAILED", "cancelled": "CANCELLED"}[res.result]
    extra = f"; NCCL transport: {res.transport}" if res.transport != "unknown" else ""
    print(f"{res.action}: {verdict}: {res.summary}{extra}", file=sys.stderr)
    for station, line in res.evidence:
        print(f"    {station} | {line[:300]}", file=sys.stderr)


def _confirm(action: str, plan: list[PlannedCommand]) -> bool:
    _print_plan(plan)
    try:
        answer = input(f"{action} {'these' if plan else 'the service'} now? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        return False
    return answer.strip().lower() in ("y", "yes")


async def _plan(cfg: Config, action: str, trust: bool) -> tuple[list[PlannedCommand], dict[str, LaunchSpec] | None]:
    svc = ServiceActions(cfg)
    try:
        await _trust(svc, trust)
        specs = await svc.plan_launch() if action == "launch" else None
        return svc.preview(action, specs), specs
    finally:
        await svc.close()


async def _trust(svc: ServiceActions, trust: bool) -> None:
    if not trust:
        return
    from console.status import connect_with_trust

    for t in svc.transports.values():
        await connect_with_trust(t, True)


async def _act(cfg: Config, args: argparse.Namespace, action: str, specs: dict[str, LaunchSpec] | None
               ) -> ActionResult:
    svc = ServiceActions(cfg, on_event=_printer(args.json), ready_timeout_s=getattr(args, "timeout", None))
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    presses = 0

    def on_sigint() -> None:  # first Ctrl+C: cancel at the next step or wake-up; second: at once
        nonlocal presses
        presses += 1
        print(f"dgx-console: cancelling {action} ..." if presses == 1 else "dgx-console: cancelling now",
              file=sys.stderr, flush=True)
        svc.request_cancel(task if presses > 1 else None)

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        await _trust(svc, args.trust_host_key)
        keep = getattr(args, "keep_on_failure", False)
        if action == "launch":
            return await svc.launch(skip_checks=args.skip_checks, specs=specs, on_failure=not keep,
                                    on_cancel="keep" if keep else "stop")
        if action == "stop":
            return await svc.stop()
        return await svc.restart(on_failure=not keep, on_cancel="keep" if keep else "stop")
    finally:
        await svc.close()


def run_action_command(args: argparse.Namespace, action: str) -> int:
    try:
        require_writable(getattr(args, "read_only", False))
    except ReadOnlyError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "timeout", None) is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    cfg = load_config(args.config)
    specs = None
    if args.dry_run or not args.yes:
        if not args.dry_run and not sys.stdin.isatty():
            raise UsageError(f"refusing to {action} without --yes (stdin is not a terminal to confirm on)")
        try:
            plan, specs = asyncio.run(_plan(cfg, action, args.trust_host_key))
        except ActionFailed as exc:
            res = ActionResult(action, result="failed", summary=exc.detail, evidence=exc.evidence)
            _print_result(res, args.json)
            return 1
        if args.dry_run:
            if args.json:
                print(json.dumps({"plan": [{"station": p.station, "what": p.what, "command": p.preview}
                                           for p in plan]}, indent=2))
            else:
                _print_plan(plan, sys.stdout)
            return 0
        if not _confirm(action, plan):
            print(f"{action}: CANCELLED: nothing was changed", file=sys.stderr)
            return 1
    res = asyncio.run(_act(cfg, args, action, specs))
    _print_result(res, args.json)
    return res.exit_code
