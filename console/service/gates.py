"""The gates a launch passes before anything starts: the preflight checks, the page cache drop (when
asked), and the fit estimate (weights and one max-length request against the memory there is).

A gate that says no ends the launch minutes before the engine would, with what to fix; the
operator's ``--skip-checks`` / ``--skip-fit`` pass it anyway, and the step says so.
"""

from __future__ import annotations

import asyncio
import inspect

from console.config import Station
from console.remote import cmdlines as rc
from console.sanitize import one_line
from console.service.context import ActionContext, gather_all
from console.service.fit_inputs import FitReport, gather_fit
from console.service.steps import ActionFailed, first_line, last_line
from console.station.checks import run_checks
from console.vocabulary import CheckStatus, StepStatus


async def estimate_fit(ctx: ActionContext, assume_idle: bool = False) -> FitReport:
    """The fit estimate on every station (the launch's gate and ``dgx-console plan``)."""
    scripts = {n: i.text for n, i in ctx.scripts.items()}
    ctx.fit = await gather_fit(ctx.run_cmd, ctx.cfg, scripts, assume_idle=assume_idle)
    return ctx.fit


async def preflight(ctx: ActionContext, skip: bool) -> None:
    if skip:
        ctx.log.skip("all", "checks", "--skip-checks")
        return
    async with ctx.log.step("all", "checks") as st:
        try:
            out = run_checks(ctx.cfg)
            if inspect.isawaitable(out):
                out = await out
        except ActionFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the gate blocks the launch
            raise ActionFailed(f"preflight checks could not run: {exc} (use --skip-checks to launch anyway)"
                               ) from None
        results = list(out or [])
        failed = [c for c in results if getattr(c, "status", "") == CheckStatus.FAIL]
        if failed:
            ev = [(getattr(c, "station", "") or "all",
                   f"{getattr(c, 'id', '?')}: {first_line(getattr(c, 'summary', '') or getattr(c, 'evidence', ''))}")
                  for c in failed]
            raise ActionFailed("preflight failed: " + ", ".join(
                f"{getattr(c, 'id', '?')}@{getattr(c, 'station', '') or 'all'}" for c in failed)
                + " (fix them, or --skip-checks)", ev)
        warned = [c for c in results if getattr(c, "status", "") == CheckStatus.WARN]
        st.detail = f"{len(results)} checks, {len(warned)} warnings"
        if warned:
            st.status = StepStatus.WARN


async def fit_gate(ctx: ActionContext, skip: bool) -> None:
    """The estimate before the load; it also records the memory baseline a later stop checks
    against. Does not fit: the launch stops here, minutes before the engine would say so."""
    async with ctx.log.step("all", "fit") as st:
        report = await estimate_fit(ctx)
        ctx.baseline = {n: m.to_baseline() for n, m in report.memory.items() if not m.error}
        errors = [w for w in report.warnings() if w.severity == "error"]
        lines = [f"{f.station}: weights {f.weights_gib:.1f} GiB/GPU, KV ~{f.kv_gib:.1f} GiB = {f.kv_tokens:,} "
                 f"tokens ({f.concurrency:.1f} x {f.settings.max_model_len:,})" for f in report.fits]
        st.detail = "; ".join(lines)
        for w in report.warnings():
            if w.severity != "info" or w.id == "kv-concurrency":
                ctx.log.note(w.station, w.text + (f" (fix: {w.fix})" if w.fix and w.severity != "info" else ""))
        unknown = report.verdict == "unknown"
        if errors and not skip:
            drop = " --drop-caches," if any(w.id == "free-memory-at-startup" for w in errors) else ""
            raise ActionFailed(("the estimate could not be made: " if unknown else
                                "the estimate says it does not fit: ") + "; ".join(w.text for w in errors)
                               + f" (fix it,{drop} or --skip-fit to launch anyway)",
                               [(w.station, f"{w.id}: {w.fix}") for w in errors])
        if errors:
            st.status = StepStatus.WARN
            st.detail = (("fit unknown: the estimate could not be made (launching anyway, --skip-fit): "
                          + "; ".join(w.text for w in errors)) if unknown
                         else "does not fit (launching anyway, --skip-fit): " + st.detail)
        elif any(w.severity == "warning" for w in report.warnings()):
            st.status = StepStatus.WARN


async def drop_caches(ctx: ActionContext) -> None:
    """Drop the page cache on every station before the estimate (unified memory: vLLM counts
    the cache as used and refuses to start below its share)."""
    async def one(s: Station) -> None:
        async with ctx.log.step(s.name, "drop-caches") as st:
            r = await ctx.run(s, rc.drop_caches())
            if not r.ok:
                raise ActionFailed(f"{s.name}: dropping the page cache needs root or passwordless sudo "
                                   f"({one_line(last_line(r.stderr or r.stdout), 160)})")
            st.detail = "sync; vm.drop_caches=3"

    gather_all(await asyncio.gather(*(one(s) for s in ctx.cfg.stations), return_exceptions=True))
