"""Launch, stop and restart the distributed service as ordered, cancellable steps that prove themselves:
the one entry point the CLI, the TUI, the workbench and the tests call.

    result = await run_action(cfg, "launch", ActionOptions(replace=True), on_event=print_progress)
    plan = await plan_action(cfg, "launch")

Both open the stations' transports (or use the ones given), take the operator's host-key decision
(``console.remote.host_keys``), run, and close. ``ServiceActions`` is the same thing held open, for a
caller that plans and runs on one connection or cancels from outside (``request_cancel``).

The work is split by job: ``plan`` (the commands to confirm), ``gates`` (preflight, fit), ``run``
(the ordered steps, the guard that stops what a failed start started), ``follow`` (the container
logs and the waits on them), ``verify`` (ready means a reply; a stop is proven clean), ``history``
(each start-up kept and compared); ``steps`` holds the records they all write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.config import Config, Station
from console.probes import docker as docker_probe
from console.probes.engine_log import TimelineEvent
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.session import make_transport
from console.remote.transport import Transport
from console.service import engines, gates, plan
from console.service import history as launch_history
from console.service import run as runner
from console.service.context import ActionContext, Timeouts
from console.service.fit_inputs import FitReport
from console.service.follow import LogSource
from console.service.plan import ActionPlan, PlannedCommand, ScriptInfo
from console.service.run import ActionOptions
from console.service.steps import (
    ActionEvent,
    ActionFailed,
    ActionName,
    ActionResult,
    CancelToken,
    ReadOnlyError,
    Step,
    StepLog,
    require_writable,
)
from console.vocabulary import ContainerState

__all__ = ["ActionEvent", "ActionFailed", "ActionName", "ActionOptions", "ActionPlan", "ActionResult", "CancelToken",
           "PlannedCommand", "ReadOnlyError", "ScriptInfo", "ServiceActions", "Step", "plan_action",
           "require_writable", "run_action"]


class ServiceActions:
    """launch / stop / restart for one config, on one set of transports. Create one per action run;
    ``close()`` after (or ``async with``)."""

    def __init__(self, cfg: Config, *, transports: dict[str, Transport] | None = None,
                 on_event: Callable[[ActionEvent], None] | None = None,
                 ready_timeout_s: float | None = None, start_timeout_s: float = 120.0,
                 health_timeout_s: float = 60.0, stop_timeout_s: int = 30,
                 api_key: str | None | bool = False, verify_timeout_s: float = 30.0,
                 history: launch_history.LaunchHistory | None = None, cancel: CancelToken | None = None,
                 log_source: LogSource | None = None):
        self.cfg = cfg
        self._own_transports = transports is None
        self.transports: dict[str, Transport] = transports or {
            s.name: make_transport(s, cfg.connect_timeout_s, cfg.command_timeout_s) for s in cfg.stations}
        self.cancel = cancel or CancelToken()
        timeouts = Timeouts(ready_timeout_s or max(600.0, 2.5 * cfg.profile.gpu.cold_load_s), start_timeout_s,
                            health_timeout_s, stop_timeout_s, verify_timeout_s)
        self._ctx = ActionContext(cfg, self.transports, timeouts, StepLog(on_event or (lambda ev: None), self.cancel),
                                  cfg.api_key() if api_key is False else (api_key or None),
                                  history or launch_history.LaunchHistory(), log_source)

    async def __aenter__(self) -> ServiceActions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._ctx.close(self._own_transports)

    # ------------------------------------------------------------ run

    async def run(self, action: ActionName, options: ActionOptions | None = None) -> ActionResult:
        """The action's ordered steps; a failure or a cancel is a stated result, never an exception."""
        return await runner.run(self._ctx, action, options or ActionOptions())

    async def launch(self, **options: Any) -> ActionResult:
        return await self.run("launch", ActionOptions(**options))

    async def stop(self) -> ActionResult:
        return await self.run("stop")

    async def restart(self, **options: Any) -> ActionResult:
        return await self.run("restart", ActionOptions(**options))

    def request_cancel(self, hard: bool = False) -> None:
        """Cancel from outside (Ctrl+C, a key): see ``CancelToken.request``."""
        self.cancel.request(hard)

    # ------------------------------------------------------------ plan

    async def plan(self, action: str, fit_gate: bool = True) -> ActionPlan:
        """Everything the confirmation shows, read from the stations now."""
        return await plan.make_plan(self._ctx, action, fit_gate)

    def preview(self, action: str, specs: dict[str, engines.LaunchSpec] | None = None,
                states: dict[str, docker_probe.ContainerInfo] | None = None,
                scripts: dict[str, ScriptInfo] | None = None) -> list[PlannedCommand]:
        return plan.preview(self._ctx, action, specs, states, scripts)

    async def plan_launch(self) -> dict[str, engines.LaunchSpec]:
        return await plan.launch_specs(self._ctx)

    async def read_scripts(self) -> dict[str, ScriptInfo]:
        return await plan.read_scripts(self._ctx)

    async def estimate_fit(self, assume_idle: bool = False) -> FitReport:
        return await gates.estimate_fit(self._ctx, assume_idle)

    async def fit_now(self) -> tuple[FitReport, list[str]]:
        """``dgx-console plan``: the estimate, and the stations where the service runs now (then the
        memory is estimated as if it were stopped)."""
        states = await self._ctx.states()
        running = [n for n, i in states.items() if i.state == ContainerState.RUNNING]
        if self._ctx.scripted:
            await plan.read_scripts(self._ctx)
        return await gates.estimate_fit(self._ctx, assume_idle=bool(running)), running

    # ------------------------------------------------------------ reads

    @property
    def order_start(self) -> list[Station]:
        return self._ctx.order_start

    @property
    def order_stop(self) -> list[Station]:
        return self._ctx.order_stop

    @property
    def scripted(self) -> list[Station]:
        return self._ctx.scripted

    async def container_state(self, s: Station) -> docker_probe.ContainerInfo:
        return await self._ctx.container_state(s)

    def timeline(self) -> dict[str, list[TimelineEvent]]:
        return self._ctx.timeline()


async def run_action(cfg: Config, action: ActionName, options: ActionOptions | None = None, *,
                     host_keys: HostKeyChoice | None = None, **settings: Any) -> ActionResult:
    """One action, start to end: transports opened (or ``settings['transports']``), the host-key
    decision applied, the steps run, everything closed. ``settings`` are ``ServiceActions``'s
    (``on_event``, ``cancel``, timeouts, ``history``, ``transports``)."""
    async with ServiceActions(cfg, **settings) as svc:
        await trust_stations(svc.transports.values(), host_keys, cfg.connect_timeout_s + 2)
        return await svc.run(action, options)


async def plan_action(cfg: Config, action: str, *, host_keys: HostKeyChoice | None = None,
                      fit_gate: bool = True, **settings: Any) -> ActionPlan:
    """What ``run_action`` would do, read from the stations now (nothing changes there)."""
    async with ServiceActions(cfg, **settings) as svc:
        await trust_stations(svc.transports.values(), host_keys, cfg.connect_timeout_s + 2)
        return await svc.plan(action, fit_gate)
