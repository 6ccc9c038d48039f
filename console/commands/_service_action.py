"""What ``launch``, ``stop`` and ``restart`` share: arguments, confirmation, progress, output.

Progress goes to stderr as it happens; the verdict goes to stdout (``--json``: the result object
instead). Exit 0 ok, 1 failed, cancelled, not clean after a stop, or a launch over a running
service without ``--replace``; 2 usage (``--read-only``, config errors, no ``--yes`` without a
terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from console import json_out
from console.commands.args import UsageError, add_config_args, check_seconds
from console.config import Config, load_config
from console.remote.host_keys import HostKeyChoice
from console.sanitize import one_line
from console.service.actions import (
    ActionEvent,
    ActionFailed,
    ActionOptions,
    ActionPlan,
    ActionResult,
    CancelToken,
    PlannedCommand,
    ReadOnlyError,
    plan_action,
    require_writable,
    run_action,
)
from console.tasks import on_signal
from console.vocabulary import ActionOutcome, NcclTransport

MAX_READY_S = 86400.0  # --timeout: a cold load is minutes; a day is a typo's ceiling
MAX_VERIFY_S = 3600.0  # --verify-timeout: memory comes back in seconds

_HELP = {
    "launch": "start the service: workers first, then the head; ready once /health is 200 and the head "
              "streams a first token; checks the NCCL transport",
    "stop": "stop the service (the head first, then the workers) and verify every station came back clean",
    "restart": "stop and verify what runs, then docker start the containers (workers, then head) and verify again",
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
                       help="seconds to wait for the head to be ready and answer (default: 2.5x the profile's cold load)")
    if action == "launch":
        p.add_argument("--skip-checks", action="store_true", help="launch without the preflight checks")
        p.add_argument("--replace", action="store_true",
                       help="a service is running: stop it (verified) and launch a fresh one")
        p.add_argument("--skip-fit", action="store_true",
                       help="launch even when the fit estimate says it does not fit")
        p.add_argument("--drop-caches", action="store_true",
                       help="drop the page cache on every station before the estimate and the start (GB10: vLLM "
                            "counts it as used memory; needs root or passwordless sudo)")
    if action in ("stop", "restart"):
        p.add_argument("--verify-timeout", type=float, metavar="S", default=30.0,
                       help="seconds a station may take to come back clean after the stop (default 30)")
    p.set_defaults(func=run)
    return p


def _printer(json_mode: bool):
    def on_event(ev: ActionEvent) -> None:
        stamp = time.strftime("%H:%M:%S")
        if ev.kind == "log":
            line = f"{stamp}   {ev.station} | {one_line(ev.text, 160)}"
        elif ev.kind == "timeline":
            line = f"{stamp} {ev.station:>4}  · {ev.text}"
        else:
            line = f"{stamp} {ev.station:>4}  {one_line(ev.text)}"
        print(line, file=sys.stderr, flush=True)

    return on_event


def _print_plan(plan: list[PlannedCommand], out=sys.stderr) -> None:
    for i, pc in enumerate(plan, 1):
        print(f"{i}. [{pc.station}] {pc.what}:\n    " + pc.preview.replace("\n", "\n    "), file=out)


def print_fit(plan: ActionPlan, out=sys.stderr) -> None:
    if plan.fit is None:
        return
    for f in plan.fit.fits:
        print(f"fit [{f.station}]: weights {f.weights_gib:.1f} GiB per GPU of {f.total_gib:.1f} GiB; KV cache ~"
              f"{f.kv_gib:.1f} GiB = {f.kv_tokens:,} tokens = {f.concurrency:.1f} x --max-model-len "
              f"{f.settings.max_model_len:,} (max-num-seqs {f.settings.max_num_seqs}; {f.settings.source})", file=out)
    for w in plan.fit.warnings():
        print(f"fit {w.severity}: {w.text}" + (f"\n    fix: {w.fix}" if w.fix else ""), file=out)


def _print_result(res: ActionResult, json_mode: bool) -> None:
    """The verdict on stdout (``--json``: the result object on stdout, the verdict on stderr)."""
    if json_mode:
        print(json_out.dumps(res.to_json(), indent=2))
    out = sys.stderr if json_mode else sys.stdout
    verdict = {"ok": "OK", "failed": "FAILED", "cancelled": "CANCELLED"}[res.result]
    extra = f"; NCCL transport: {res.transport}" if res.transport != NcclTransport.UNKNOWN else ""
    print(f"{res.action}: {verdict}: {one_line(res.summary)}{extra}", file=out)
    for station, line in res.evidence:
        print(f"    {station} | {one_line(line, 300)}", file=out)
    for name, v in res.verified.items():
        print(f"    {name} stop verified: {one_line(v.summary())}", file=out)
        for f in v.findings:
            print(f"        fix: {f['fix']}", file=out)
    for note in res.notes:
        print(f"    {note}", file=out)


def _confirm(action: str, plan: ActionPlan) -> bool:
    _print_plan(plan.commands)
    print_fit(plan)
    if plan.running:
        print(f"WARNING: {plan.running}", file=sys.stderr)
    verb = "replace the running service" if plan.running else f"{action} {'these' if plan.commands else 'the service'}"
    try:
        answer = input(f"{verb} now? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        return False
    return answer.strip().lower() in ("y", "yes")


def _options(args: argparse.Namespace, plan: ActionPlan | None) -> ActionOptions:
    """The flags as the action's options (stop has none of its own)."""
    keep = getattr(args, "keep_on_failure", False)
    return ActionOptions(skip_checks=getattr(args, "skip_checks", False), specs=plan.specs if plan else None,
                         on_failure=not keep, on_cancel="keep" if keep else "stop",
                         replace=getattr(args, "replace", False), skip_fit=getattr(args, "skip_fit", False),
                         drop_caches=getattr(args, "drop_caches", False))


async def _act(cfg: Config, args: argparse.Namespace, action: str, plan: ActionPlan | None) -> ActionResult:
    cancel = CancelToken()
    presses = 0

    def on_sigint() -> None:  # first Ctrl+C: cancel at the next step or wake-up; second: at once
        nonlocal presses
        presses += 1
        print(f"dgx-console: cancelling {action} ..." if presses == 1 else "dgx-console: cancelling now",
              file=sys.stderr, flush=True)
        cancel.request(hard=presses > 1)

    with on_signal(on_sigint):
        return await run_action(cfg, action, _options(args, plan), host_keys=HostKeyChoice(args.trust_host_key),
                                cancel=cancel, on_event=_printer(args.json),
                                ready_timeout_s=getattr(args, "timeout", None),
                                verify_timeout_s=getattr(args, "verify_timeout", 30.0))


def run_action_command(args: argparse.Namespace, action: str) -> int:
    try:
        require_writable(getattr(args, "read_only", False))
    except ReadOnlyError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "timeout", None) is not None:
        check_seconds("--timeout", args.timeout, limit=MAX_READY_S)
    if getattr(args, "verify_timeout", None) is not None:
        check_seconds("--verify-timeout", args.verify_timeout, limit=MAX_VERIFY_S)
    cfg = load_config(args.config)
    plan = None
    if args.dry_run or not args.yes:
        if not args.dry_run and not sys.stdin.isatty():
            raise UsageError(f"refusing to {action} without --yes (stdin is not a terminal to confirm on)")
        try:
            plan = asyncio.run(plan_action(cfg, action, host_keys=HostKeyChoice(args.trust_host_key)))
        except ActionFailed as exc:
            res = ActionResult(action, result=ActionOutcome.FAILED, summary=exc.detail, evidence=exc.evidence)
            _print_result(res, args.json)
            return 1
        if args.dry_run:
            if args.json:
                doc = {"plan": [{"station": p.station, "what": p.what, "command": p.preview} for p in plan.commands]}
                if action == "launch":
                    doc["running"] = plan.running
                    doc["fit"] = plan.fit.to_json() if plan.fit else None
                print(json_out.dumps(doc, indent=2))
            else:
                _print_plan(plan.commands, sys.stdout)
                print_fit(plan, sys.stdout)
                if plan.running:
                    print(f"WARNING: {plan.running} (needs --replace)")
            return 0
        if plan.running and not args.replace:
            res = ActionResult(action, result=ActionOutcome.FAILED,
                               summary=f"{plan.running}: add --replace to stop it first (nothing was changed)")
            _print_result(res, args.json)
            return 1
        if not _confirm(action, plan):
            print(f"{action}: CANCELLED: nothing was changed", file=sys.stdout)
            return 1
    res = asyncio.run(_act(cfg, args, action, plan))
    _print_result(res, args.json)
    return res.exit_code
