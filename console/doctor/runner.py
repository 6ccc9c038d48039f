"""Climb the ladder: run the rungs in order on one set of transports, report each rung as it ends,
and stop cleanly when cancelled (the running rung's remote processes are ended by its own clean-up;
it is reported as skipped "cancelled"). The CLI and the workbench screen both call ``run_doctor`` and
stop it with its ``stop`` event (``console/tasks.py``: the one cancellation rule)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable

from console.config import Config
from console.doctor.context import DoctorContext, DoctorOptions, ProgressFn
from console.doctor.model import DoctorReport, Rung, RungResult
from console.doctor.rungs import addresses, env, hang, links, nccl, rdma, relaunch
from console.durations import elapsed
from console.remote import channels
from console.remote.session import make_transport
from console.remote.transport import Transport
from console.tasks import stoppable
from console.vocabulary import CheckStatus

RUNGS: tuple[Rung, ...] = (
    Rung(links.ID, 1, "reach and links", links.run),
    Rung(rdma.ID, 2, "RDMA on every rail, both directions", rdma.run),
    Rung(nccl.ID, 3, "NCCL across the stations (nccl-tests)", nccl.run),
    Rung(env.ID, 4, "environment diff between stations", env.run),
    Rung(addresses.ID, 5, "addresses each part uses", addresses.run),
    Rung(hang.ID, 6, "live evidence of a hang", hang.run),
    Rung(relaunch.ID, 7, "relaunch with NCCL debug", relaunch.run, action=True),
)
RUNG_IDS = tuple(r.id for r in RUNGS)
BY_ID = {r.id: r for r in RUNGS}

RungEvent = Callable[[str, str, list[RungResult]], None]  # (rung id, "running" | "done" | "cancelled", results)


def select(ids: Iterable[str] | None) -> list[Rung]:
    """Rungs by id or number (``env``, ``4``), in ladder order; ValueError names an unknown one."""
    if not ids:
        return list(RUNGS)
    want = set()
    for raw in ids:
        for item in str(raw).split(","):
            item = item.strip()
            if not item:
                continue
            hit = next((r for r in RUNGS if item in (r.id, str(r.number))), None)
            if hit is None:
                raise ValueError(f"unknown rung {item!r} (rungs: {', '.join(f'{r.number} {r.id}' for r in RUNGS)})")
            want.add(hit.id)
    return [r for r in RUNGS if r.id in want]


async def run_doctor(config: Config, transports: dict[str, Transport] | None = None,
                     rungs: Iterable[str] | None = None, options: DoctorOptions | None = None,
                     on_rung: RungEvent | None = None, on_progress: ProgressFn | None = None,
                     previous: list[RungResult] | None = None, stop: asyncio.Event | None = None) -> DoctorReport:
    """Every selected rung in order; ``previous`` holds earlier results (the relaunch rung's suggestions).

    ``stop`` set: the running rung is cancelled (its clean-up ends its remote processes), reported
    as skipped "cancelled", and the report returned; cancelling this coroutine itself propagates."""
    chosen = select(rungs)
    own = transports is None
    if transports is None:
        transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                      for s in config.stations}
    report = DoctorReport(order=RUNG_IDS)
    prior = list(previous or [])
    ctx = DoctorContext(config, transports, options, on_progress, previous=prior)
    emit = on_rung or (lambda rid, state, results: None)
    try:
        for rung in chosen:
            emit(rung.id, "running", [])
            ctx.previous = prior + report.results
            t0 = time.monotonic()
            try:
                # a job that waits for an SSH channel says so in the rung's progress line
                with channels.on_wait(lambda w, rid=rung.id: ctx.progress(rid, w.text())):
                    got, stopped = await stoppable(rung.run(ctx), stop, name=f"doctor-{rung.id}")
            except Exception as exc:  # noqa: BLE001 - one broken rung must not hide the others
                results = [RungResult(rung.id, ",".join(s.name for s in ctx.stations), CheckStatus.FAIL,
                                      f"the rung failed: {exc.__class__.__name__}: {exc}", (),
                                      "This is a bug in the console's doctor; please report it with the evidence.")]
            else:
                if stopped:
                    cancelled = [RungResult(rung.id, ",".join(s.name for s in ctx.stations), CheckStatus.SKIP,
                                            f"cancelled after {elapsed(time.monotonic() - t0)}")]
                    report.results += cancelled
                    report.ran.append(rung.id)
                    report.cancelled = True
                    emit(rung.id, "cancelled", cancelled)
                    break
                results = got or []
            report.results += results
            report.ran.append(rung.id)
            emit(rung.id, "done", results)
    finally:
        report.finished_at = time.time()
        with contextlib.suppress(Exception):
            await asyncio.shield(ctx.close())
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)
    return report
