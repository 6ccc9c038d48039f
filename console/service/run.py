"""The ordered steps of launch, stop and restart, and the guard around them.

The order is the one NVIDIA's tutorial does by hand: workers (rank > 0) start first and the head
last, because the head waits for every worker and times out without them; the head stops first.
A launch over a running service needs ``replace`` (stopped and verified clean first); restart
verifies the stop before it starts again. The guard turns a failure or a cancel into a stated
result: what this run started is stopped (or left running when the operator says so), and the
start-up is saved to the launch history.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from console.config import Station
from console.probes import docker as docker_probe
from console.probes.docker import parse_time
from console.remote import cmdlines as rc
from console.remote.transport import TransportError
from console.sanitize import clean as sanitize
from console.sanitize import one_line
from console.service import engines, gates, verify
from console.service import history as launch_history
from console.service.context import ActionContext
from console.service.plan import launch_specs, prev_name, read_scripts, service_running
from console.service.steps import (
    ActionCancelled,
    ActionFailed,
    ActionName,
    ActionResult,
    FailureDecision,
    OnCancel,
    Step,
    last_line,
)
from console.tasks import stoppable
from console.vocabulary import ActionOutcome, ContainerState, NcclTransport, StepStatus


@dataclass(frozen=True)
class ActionOptions:
    """The operator's choices for one action (the CLI's flags, the TUI's ticked boxes)."""

    skip_checks: bool = False  # launch: no preflight checks
    specs: dict[str, engines.LaunchSpec] | None = None  # launch: the commands confirmed in the plan
    on_failure: FailureDecision = True  # a failed start: stop what it started (or ask)
    on_cancel: OnCancel = "stop"
    replace: bool = False  # launch over a running service: stop it (verified) first
    skip_fit: bool = False  # launch although the estimate says it does not fit
    drop_caches: bool = False  # drop the page cache on every station first


# ------------------------------------------------------------ the three actions


async def launch(ctx: ActionContext, o: ActionOptions) -> None:
    states = await ctx.states()
    running = await service_running(ctx, states)
    if running and not o.replace:
        raise ActionFailed(f"{running}: add --replace to stop it first (nothing was changed)")
    await gates.preflight(ctx, o.skip_checks)
    if ctx.scripted and not ctx.scripts:
        await read_scripts(ctx)
    plan = o.specs if o.specs is not None else await launch_specs(ctx)
    if running:  # replace: stop it (head first), prove it stopped, then start fresh
        ctx.log.note("all", running)
        await stop_all(ctx, states)
        verdicts = await verify.stopped(ctx, list(ctx.cfg.stations), states,
                                        ctx.history.last_baseline(ctx.history_key))
        bad = [v for v in verdicts.values() if not v.clean]
        if bad:
            raise ActionFailed("the running service did not stop clean, so it was not replaced: "
                               + "; ".join(v.summary() for v in bad),
                               [(v.station, f["cause"]) for v in bad for f in v.findings])
        states = await ctx.states()
    if o.drop_caches:
        await gates.drop_caches(ctx)
    await gates.fit_gate(ctx, o.skip_fit)
    for s in ctx.order_start:
        if ctx.cfg.launch_script_for(s):
            await start_script(ctx, s, states[s.name])
        else:
            await start_fresh(ctx, s, plan[s.name], states[s.name])
        if not s.is_head:
            await wait_started(ctx, s)
    await verify.serving(ctx)


async def stop(ctx: ActionContext, o: ActionOptions) -> None:
    states = await ctx.states(tolerate=True)
    base = ctx.history.last_baseline(ctx.history_key)
    reachable = [s for s in ctx.cfg.stations if s.name in states]
    if ctx.unreached:  # stop what can be stopped (head first), then say what could not be
        await stop_all(ctx, states)
        await verify.stopped(ctx, reachable, states, base)
        raise ActionFailed("could not reach " + "; ".join(ctx.unreached.values()) + " (stopped: "
                           + (", ".join(n for n, i in states.items() if i.state == ContainerState.RUNNING) or "none") + ")")
    was = [s.name for s in ctx.order_stop if states[s.name].state == ContainerState.RUNNING]
    if not was:
        ctx.log.skip("all", "stop", "already stopped (" + ", ".join(f"{n}: {i.state}" for n, i in states.items()) + ")")
    failed = await stop_all(ctx, states)
    verdicts = await verify.stopped(ctx, reachable, states, base)
    bad = [v for v in verdicts.values() if not v.clean]
    if bad or failed:
        raise ActionFailed("not clean after the stop: " + "; ".join(
            [v.summary() for v in bad] + [f for f in failed if not any(f.startswith(v.station) for v in bad)]),
            [(v.station, f["cause"]) for v in bad for f in v.findings])
    ctx.log.res.summary = ("stopped " + ", ".join(was) + " (head first); " if was else "already stopped; ") \
        + "verified clean on " + ", ".join(verdicts)


async def restart(ctx: ActionContext, o: ActionOptions) -> None:
    states = await ctx.states()
    absent = [n for n, i in states.items() if i.state == ContainerState.ABSENT]
    if absent:
        raise ActionFailed("no container on " + ", ".join(absent) + ": use launch")
    failed = await stop_all(ctx, states)
    verdicts = await verify.stopped(ctx, list(ctx.cfg.stations), states, ctx.history.last_baseline(ctx.history_key))
    bad = [v for v in verdicts.values() if not v.clean]
    if bad or failed:
        raise ActionFailed("not restarted: the stop did not come back clean: "
                           + "; ".join([v.summary() for v in bad] + failed),
                           [(v.station, f["cause"]) for v in bad for f in v.findings])
    ctx.baseline = {n: m.to_baseline() for n, m in ctx.last_readings.items()}
    for s in ctx.order_start:
        await docker_start(ctx, s)
        if not s.is_head:
            await wait_started(ctx, s)
    await verify.serving(ctx)


BODIES: dict[ActionName, Callable[[ActionContext, ActionOptions], Awaitable[None]]] = {
    "launch": launch, "stop": stop, "restart": restart}


async def run(ctx: ActionContext, action: ActionName, o: ActionOptions) -> ActionResult:
    """The one dispatch: the action's steps inside the guard. A stop never stops what it started
    (it starts nothing) and a cancelled stop leaves the rest as it was."""
    body = BODIES.get(action)
    if body is None:
        raise ValueError(f"unknown action {action!r}")
    on_failure, on_cancel = (False, "keep") if action == "stop" else (o.on_failure, o.on_cancel)
    return await guard(ctx, action, lambda: body(ctx, o), on_failure, on_cancel)


# ------------------------------------------------------------ the guard


async def guard(ctx: ActionContext, action: str, body: Callable[[], Awaitable[None]], on_failure: FailureDecision,
                on_cancel: OnCancel) -> ActionResult:
    res = ctx.log.begin(action)  # keeps the plan's steps (resolve) taken on this context
    ctx.follow.reset()
    try:
        # the body is a child task: a hard cancel (second Ctrl+C) ends it at once, while a cancel of
        # this coroutine itself propagates (console/tasks.py, the one cancellation rule)
        _, hard_stopped = await stoppable(body(), ctx.cancel.hard, name=f"{action} steps")
        if hard_stopped:
            raise ActionCancelled()
        if res.result == ActionOutcome.OK and not res.summary:
            res.summary = f"{action}: done"
    except ActionFailed as exc:
        res.result, res.summary = ActionOutcome.FAILED, exc.detail
        res.evidence = exc.evidence
        await ctx.follow.close_all()
        if ctx.started and not exc.service_up:
            stop_them = on_failure if isinstance(on_failure, bool) else on_failure(res)
            if inspect.isawaitable(stop_them):
                stop_them = await stop_them
            if stop_them:
                await cleanup(ctx, "after the failure")
            else:
                res.summary += "; left running: " + ", ".join(s.name for s in ctx.started)
    except ActionCancelled:
        res.result = ActionOutcome.CANCELLED
        await ctx.follow.close_all()
        res.summary = await _after_cancel(ctx, on_cancel)
    except asyncio.CancelledError:  # this task itself was cancelled (the app quits): clean up, then propagate
        res.result = ActionOutcome.CANCELLED
        await ctx.follow.close_all()
        res.summary = await _after_cancel(ctx, on_cancel)
        raise
    finally:
        await ctx.follow.close_all()
        if res.transport == NcclTransport.UNKNOWN:  # best effort on failure: what NCCL chose
            res.transport = ctx.follow.transport()
        res.timeline = ctx.timeline()
        res.fit = ctx.fit
        if action in ("launch", "restart") and ctx.started:
            res.notes += launch_history.keep_start(ctx.history, ctx.cfg, action, res.result, res.timeline,
                                                   ctx.baseline)
            for line in res.notes:
                ctx.log.note("all", line)
    return res


async def _after_cancel(ctx: ActionContext, on_cancel: OnCancel) -> str:
    """Stop what this run started (unless told to keep it); the summary says what is left."""
    if ctx.started and on_cancel == "stop":
        await cleanup(ctx, "after the cancel")
        return "cancelled; stopped what this run had started: " + ", ".join(
            s.name for s in ctx.started) + " (nothing left running)"
    if ctx.started:
        return "cancelled; left running: " + ", ".join(s.name for s in ctx.started)
    if ctx.stopped:
        return "cancelled; stopped so far: " + ", ".join(ctx.stopped) + " (the rest as it was)"
    return "cancelled before anything was started or stopped"


async def cleanup(ctx: ActionContext, why: str) -> None:
    states = {}
    for s in ctx.started:
        with contextlib.suppress(ActionFailed, TransportError):
            states[s.name] = await ctx.container_state(s)
    for s in [st for st in ctx.order_stop if st in ctx.started]:
        info = states.get(s.name)
        if info is not None and info.state != ContainerState.RUNNING:
            ctx.log.skip(s.name, "stop", f"{why}: already {info.state}")
            continue
        with contextlib.suppress(ActionFailed):
            await stop_one(ctx, s, why)


# ------------------------------------------------------------ starting


async def _keep_prev(ctx: ActionContext, s: Station, info: docker_probe.ContainerInfo) -> None:
    """Keep the last run's container and log for the diagnosis: rename, not remove."""
    if info.state == ContainerState.ABSENT:
        return
    prev = prev_name(s.container)
    r = await ctx.run(s, rc.docker_rm(prev))
    if not r.ok and "no such container" not in (r.stderr + r.stdout).lower():
        raise ActionFailed(f"docker rm {prev} failed on {s.name}: {last_line(r.stderr)}")
    r = await ctx.run(s, rc.docker_rename(s.container, prev))
    if not r.ok:
        raise ActionFailed(f"docker rename failed on {s.name}: {last_line(r.stderr)}")


async def start_fresh(ctx: ActionContext, s: Station, spec: engines.LaunchSpec,
                      info: docker_probe.ContainerInfo) -> None:
    async with ctx.log.step(s.name, "run") as st:
        await _keep_prev(ctx, s, info)
        try:  # secret values travel on stdin, by name only (never in an argv on the station)
            key_input = engines.secret_input(ctx.cfg, spec, ctx.api_key)
        except engines.EngineConfigError as exc:
            raise ActionFailed(str(exc)) from None
        r = await ctx.run(s, spec.command(), timeout=max(120.0, ctx.cfg.command_timeout_s), input=key_input)
        if not r.ok:
            raise ActionFailed(f"docker run failed on {s.name} (exit {r.exit_status}): {last_line(r.stderr)}",
                               [(s.name, ln) for ln in r.stderr.strip().splitlines()[-3:]])
        ctx.started.append(s)
        await _follow_new_run(ctx, s, st)


async def start_script(ctx: ActionContext, s: Station, info: docker_probe.ContainerInfo) -> None:
    """Run the operator's launch script detached; it starts the container the config names."""
    path = ctx.cfg.launch_script_for(s) or ""
    log = f"~/.cache/dgx-console/launch-{s.container}.log"
    limit = ctx.timeouts.start_s
    async with ctx.log.step(s.name, "script") as st:
        await _keep_prev(ctx, s, info)
        r = await ctx.run(s, rc.run_launch_script(path, log))
        words = r.stdout.split()
        if not r.ok or not words or not words[-1].isdigit():
            raise ActionFailed(f"{s.name}: the launch script {path} did not start ({last_line(r.stderr or r.stdout)})")
        pid = int(words[-1])
        deadline = time.monotonic() + limit
        while True:
            ctx.check_cancel()
            cur = await ctx.container_state(s)
            if cur.state == ContainerState.RUNNING:
                break
            alive = "alive" in (await ctx.run(s, rc.pid_alive(pid))).stdout
            if not alive:
                cur = await ctx.container_state(s)
                if cur.state == ContainerState.ABSENT:
                    tail = (await ctx.run(s, rc.tail_file(log))).stdout
                    raise ActionFailed(f"{s.name}: the launch script {path} ended without starting "
                                       f"{s.container}: {one_line(last_line(tail), 200)}",
                                       [(s.name, sanitize(ln)) for ln in tail.strip().splitlines()[-5:]])
                break  # it started and already exited: the log says why
            if time.monotonic() > deadline:
                raise ActionFailed(f"{s.name}: no container {s.container} within {limit:g} s of "
                                   f"running {path} (the config's container name must match the script's)")
            await asyncio.sleep(0.5)
        ctx.started.append(s)
        await _follow_new_run(ctx, s, st)
        st.detail = f"{path} (pid {pid}): {st.detail}"


async def docker_start(ctx: ActionContext, s: Station) -> None:
    async with ctx.log.step(s.name, "start") as st:
        r = await ctx.run(s, rc.docker_start(s.container))
        if not r.ok:
            raise ActionFailed(f"docker start failed on {s.name}: {last_line(r.stderr)}")
        ctx.started.append(s)
        await _follow_new_run(ctx, s, st)


async def _follow_new_run(ctx: ActionContext, s: Station, st: Step) -> None:
    """Follow the run just started from its own start time (the container keeps older runs' logs)."""
    info = await ctx.container_state(s)
    started = parse_time(info.started_at or "")
    if started is None:
        raise ActionFailed(f"{s.name}: container has no start time ({info.state})")
    ctx.log.events.pop(s.name, None)
    ctx.log.record(s.name, "container-started", started, f"{s.container} {info.state}")
    await ctx.follow.start(s, info, started)
    st.detail = f"{s.container} {info.state} since {info.started_at}"
    if info.state != ContainerState.RUNNING:
        await ctx.follow.wait(lambda: False, 5.0, f"{s.name} to report why it stopped")


async def wait_started(ctx: ActionContext, s: Station) -> None:
    """A worker's engine process is up (its first line) before the next station starts."""
    limit = ctx.timeouts.start_s
    async with ctx.log.step(s.name, "started") as st:
        f = ctx.follow[s.name]
        if not f.started_marker:
            st.detail = "container running (it joins the cluster once the head is up)"
            return
        try:
            await ctx.follow.wait(lambda: f.started, limit, f"{s.name}'s engine process to start")
        except ActionFailed as exc:
            if not exc.detail.startswith("timed out") or not f.lines:
                raise
            # Another engine version may word its first line differently: it prints and runs.
            st.status = StepStatus.WARN
            st.detail = f"no {f.started_marker!r} line in {limit:g} s, but it runs and logs"
            return
        st.detail = f"engine process up ({f.started_marker!r} seen)"


# ------------------------------------------------------------ stopping


async def stop_all(ctx: ActionContext, states: dict[str, docker_probe.ContainerInfo]) -> list[str]:
    """Head first; a station that will not stop does not keep the others running. Returns what failed."""
    failed = []
    for s in ctx.order_stop:
        if s.name not in states:
            continue
        if states[s.name].state != ContainerState.RUNNING:
            ctx.log.skip(s.name, "stop", f"not running ({states[s.name].state})")
            continue
        try:
            await stop_one(ctx, s, "")
        except ActionFailed as exc:
            failed.append(exc.detail)
    return failed


async def stop_one(ctx: ActionContext, s: Station, why: str) -> None:
    stop_s = ctx.timeouts.stop_s
    async with ctx.log.step(s.name, "stop") as st:
        r = await ctx.run(s, rc.docker_stop(s.container, stop_s), timeout=stop_s + ctx.cfg.command_timeout_s)
        if not r.ok:
            raise ActionFailed(f"{s.name}: docker stop failed: {one_line(last_line(r.stderr), 200)}")
        info = await ctx.container_state(s)
        if info.state == ContainerState.RUNNING:
            raise ActionFailed(f"{s.name}: still running after docker stop")
        ctx.stopped.append(s.name)
        st.detail = (why + ": " if why else "") + f"{s.container} {info.state}"
