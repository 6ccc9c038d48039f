"""Rung 7, relaunch with debug: an action, run only when asked (``doctor --rung relaunch --set ...``
or ``x`` in the workbench), after the exact diff against the normal launch was shown and confirmed.
Otherwise it says what it would try: the overrides the other rungs suggest."""

from __future__ import annotations

from console.doctor import store
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.doctor.relaunch import DebugRelaunch, diff, plan_error
from console.durations import elapsed
from console.service.actions import ActionEvent, ActionFailed
from console.vocabulary import ActionOutcome, CheckStatus

ID = "relaunch"


def suggestion_text(sugg: dict[str, dict[str, str | None]]) -> str:
    return " ".join(f"--set {st}:{k}={v}" if v is not None else f"--unset {st}:{k}"
                    for st, kv in sugg.items() for k, v in kv.items())


async def run(ctx: DoctorContext) -> list[RungResult]:
    label = ",".join(s.name for s in ctx.stations)
    plan = ctx.options.relaunch
    sugg: dict[str, dict[str, str | None]] = {}
    for r in ctx.previous:
        for st, var, value in r.suggest:
            sugg.setdefault(st, {})[var] = value
    if plan is None:
        flags = suggestion_text(sugg)
        return [RungResult(ID, label, CheckStatus.SKIP,
                           "relaunch with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV"
                           + (f" and {flags}" if flags else "") + ": an action, not run",
                           ("The other rungs suggest: " + (flags or "nothing to change"),
                            "NCCL 2.31+ checks its own paths at init with --set NCCL_RUN_DIAGNOSTICS=1 (its "
                            "NCCL DIAG lines are read back with the try)"),
                           f"`dgx-console doctor --rung relaunch {flags or '--set NAME=VALUE'}` shows the diff "
                           "against the normal launch and asks; in the workbench press x.")]

    def on_event(ev: ActionEvent) -> None:
        ctx.progress(ID, f"{ev.station}: {ev.text[:140]}")

    dr = plan.prepared if isinstance(plan.prepared, DebugRelaunch) else DebugRelaunch(
        ctx.config, ctx.transports, on_event=on_event, ready_timeout_s=ctx.options.ready_timeout_s)
    dr.transports = dr.transports or ctx.transports
    dr.on_event = on_event
    try:
        diffs = {n: diff(dr.normal[n], dr.debug[n]) for n in dr.debug} if dr.debug else await dr.plan(plan)
    except ActionFailed as exc:
        return [RungResult(ID, label, CheckStatus.FAIL,
                           f"cannot build the launch commands: {plan_error(exc)}")]
    ctx.progress(ID, f"try {plan.number}: " + ("; ".join(dr.changed()) or "NCCL debug output only"))
    t = await dr.run(plan.number, restore=plan.restore)
    store.add_try(ctx.config, t)
    evidence = tuple(diffs.values()) + tuple(f"{n}: {s}" for n, s in t.nccl.items()) + tuple(
        f"{st} | {ln}" for st, ln in t.evidence[-6:])
    status = (CheckStatus.PASS if t.result.startswith("ready")
              else CheckStatus.SKIP if t.result == ActionOutcome.CANCELLED else CheckStatus.FAIL)
    summary = (f"try {t.number} ({'; '.join(t.changed) or 'debug output only'}): {t.result} in {elapsed(t.seconds, 0)}"
               f" -- {t.summary[:200]}; {t.restored}")
    nxt = ("The change fixed it: make it permanent (config overrides / the launch script), then relaunch."
           if status == CheckStatus.PASS and t.changed
           else "Read NCCL's own lines in the evidence; try another override.")
    return [RungResult(ID, label, status, summary, evidence, nxt)]  # type: ignore[arg-type]
