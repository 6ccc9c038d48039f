"""What the operator confirms before an action: the exact commands in order (secrets as ``***``), what
they act on (each container's state, what is running now), the operator's launch script, and the
fit estimate. Everything here reads; nothing changes a station.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field

from console.config import Station
from console.probes import docker as docker_probe
from console.remote import cmdlines as rc
from console.remote.transport import TransportError
from console.sanitize import clean as sanitize
from console.sanitize import one_line
from console.service import engines
from console.service.context import ActionContext, ScriptInfo, gather_all
from console.service.fit_inputs import FitReport
from console.service.gates import estimate_fit
from console.service.steps import ActionFailed, and_list, last_line
from console.vocabulary import ContainerState


@dataclass(frozen=True)
class PlannedCommand:
    station: str
    what: str
    preview: str  # secrets as ***


@dataclass
class ActionPlan:
    """What the operator confirms: the commands in order, and what they act on."""

    action: str
    commands: list[PlannedCommand]
    specs: dict[str, engines.LaunchSpec] | None = None
    states: dict[str, docker_probe.ContainerInfo] = field(default_factory=dict)
    running: str | None = None  # "a healthy service is running on A and B; launch replaces it"
    fit: FitReport | None = None
    scripts: dict[str, ScriptInfo] = field(default_factory=dict)


def prev_name(container: str) -> str:
    return f"{container}-prev"


async def resolve(ctx: ActionContext, stations: list[Station] | None = None) -> dict[str, engines.StationRuntime]:
    """GPU UUIDs and the image digest per station; the image must be the same everywhere."""
    cfg = ctx.cfg

    async def one(s: Station) -> engines.StationRuntime:
        async with ctx.log.step(s.name, "resolve") as st:
            r = await ctx.run(s, rc.gpu_list())
            if not r.ok:
                raise ActionFailed(f"nvidia-smi failed on {s.name}: {last_line(r.stderr or r.stdout)}")
            gpus = []
            for row in r.stdout.splitlines():
                parts = [p.strip() for p in row.split(",")]
                if len(parts) >= 3 and parts[0].isdigit():
                    gpus.append((int(parts[0]), parts[1], ",".join(parts[2:])))
            try:
                uuids = engines.pick_gpus(s, cfg.profile, gpus, len(cfg.stations))
            except engines.EngineConfigError as exc:
                raise ActionFailed(str(exc)) from None
            image = await _image_digest(ctx, s)
            st.detail = f"GPU {', '.join(uuids)}; image {image} (registry digest)"
            return engines.StationRuntime(uuids, image)

    todo = cfg.stations if stations is None else stations
    out = await asyncio.gather(*(one(s) for s in todo), return_exceptions=True)
    gather_all(out)
    rts: dict[str, engines.StationRuntime] = {s.name: x for s, x in zip(todo, out, strict=True)}  # type: ignore[misc]
    images = {rt.image for rt in rts.values()}
    if len(images) > 1:
        raise ActionFailed("the image differs between stations: " + "; ".join(
            f"{n}: {rt.image}" for n, rt in rts.items()))
    return rts


async def _image_digest(ctx: ActionContext, s: Station) -> str:
    image = str(ctx.cfg.overrides.get("image") or ctx.cfg.profile.image)
    if "@sha256:" in image:
        return image
    r = await ctx.run(s, rc.image_digests(image))
    if not r.ok:
        raise ActionFailed(f"image {image} is not on {s.name} ({last_line(r.stderr)}): docker pull it there first")
    try:
        digests = [d for d in json.loads(r.stdout.strip() or "[]") if "@sha256:" in d]
    except (json.JSONDecodeError, TypeError):
        digests = []
    if not digests:
        raise ActionFailed(f"image {image} on {s.name} has no repo digest (built locally?): "
                           "pin it by digest in overrides.image")
    repo = image.rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image
    return next((d for d in digests if d.split("@")[0] == repo), digests[0])


async def launch_specs(ctx: ActionContext) -> dict[str, engines.LaunchSpec]:
    """The ``docker run`` per station that the console starts itself (not the scripted ones)."""
    own = [s for s in ctx.order_start if not ctx.cfg.launch_script_for(s)]
    if not own:
        return {}
    rts = await resolve(ctx, own)
    try:
        return {s.name: engines.build_launch(ctx.cfg, s, rts[s.name], api_key_set=bool(ctx.api_key)) for s in own}
    except engines.EngineConfigError as exc:
        raise ActionFailed(str(exc)) from None


async def read_scripts(ctx: ActionContext) -> dict[str, ScriptInfo]:
    """The operator's launch script on each scripted station: size, sha256, text."""
    async def one(s: Station) -> ScriptInfo:
        path = ctx.cfg.launch_script_for(s) or ""
        async with ctx.log.step(s.name, "script") as st:
            r = await ctx.run(s, rc.script_info(path))
            lines = r.stdout.splitlines()
            if not r.ok or len(lines) < 2 or not lines[0].strip().isdigit():
                raise ActionFailed(f"{s.name}: cannot read the launch script {path} "
                                   f"({last_line(r.stderr or r.stdout)})")
            info = ScriptInfo(path, int(lines[0].strip()), lines[1].strip(), sanitize("\n".join(lines[2:])))
            st.detail = f"{path}: {info.size:,} bytes, sha256 {info.sha256[:16]}"
            return info

    scripted = ctx.scripted
    out = await asyncio.gather(*(one(s) for s in scripted), return_exceptions=True)
    gather_all(out)
    ctx.scripts = {s.name: x for s, x in zip(scripted, out, strict=True)}  # type: ignore[misc]
    return ctx.scripts


async def service_running(ctx: ActionContext, states: dict[str, docker_probe.ContainerInfo]) -> str | None:
    """What is running, in words (None when nothing runs): the launch must not pass over it."""
    running = [n for n, i in states.items() if i.state == ContainerState.RUNNING]
    if not running:
        return None
    names = and_list(running)
    if len(running) < len(states):
        return f"a service is partly running (on {names}); launch replaces it"
    from console.serving.client import ApiClient

    async with ApiClient(ctx.cfg.api_url(), None, timeout=min(3.0, ctx.cfg.api.timeout_s)) as client:
        h = await client.health()
    if h.ok:
        return f"a healthy service is running on {names}; launch replaces it"
    return f"a service is running on {names} (not answering /health: {one_line(h.error or '', 120)}); " \
           "launch replaces it"


async def make_plan(ctx: ActionContext, action: str, fit_gate: bool = True) -> ActionPlan:
    """Everything the confirmation shows, read from the stations now."""
    states = await ctx.states() if action in ("launch", "restart") else {}
    p = ActionPlan(action, [], states=states)
    if action == "launch":
        p.running = await service_running(ctx, states)
        if ctx.scripted:
            p.scripts = await read_scripts(ctx)
        p.specs = await launch_specs(ctx)
        if fit_gate:
            with contextlib.suppress(ActionFailed, TransportError):
                p.fit = await estimate_fit(ctx, assume_idle=p.running is not None)
    p.commands = preview(ctx, action, p.specs, states, p.scripts)
    return p


def _keep_line(s: Station, info: docker_probe.ContainerInfo | None, keep: str) -> PlannedCommand | None:
    prev = prev_name(s.container)
    if info is None:
        return PlannedCommand(s.name, f"if a container {s.container} exists, keep it and its log as {prev}", keep)
    if info.state == ContainerState.RUNNING:
        return PlannedCommand(s.name, f"keep the container just stopped and its log as {prev}", keep)
    if info.state == ContainerState.EXITED:
        code = f", exit code {info.exit_code}" if info.exit_code is not None else ""
        return PlannedCommand(s.name, f"keep the stopped container ({s.container}{code}) and its log as {prev}", keep)
    if info.state == ContainerState.CREATED:
        return PlannedCommand(s.name, f"keep the container {s.container} (created, never started) as {prev}", keep)
    if info.state != ContainerState.ABSENT:
        return PlannedCommand(s.name, f"keep the {info.state} container {s.container} as {prev}", keep)
    return None


def preview(ctx: ActionContext, action: str, specs: dict[str, engines.LaunchSpec] | None = None,
            states: dict[str, docker_probe.ContainerInfo] | None = None,
            scripts: dict[str, ScriptInfo] | None = None) -> list[PlannedCommand]:
    """The commands an action runs, in order, each line true for the ``states`` it describes
    (launch needs ``specs`` from ``launch_specs`` for the stations it starts itself)."""
    out: list[PlannedCommand] = []
    states = states or {}
    scripts = scripts if scripts is not None else ctx.scripts
    stop_s = ctx.timeouts.stop_s
    running = [s for s in ctx.order_stop if states.get(s.name) and states[s.name].state == ContainerState.RUNNING]
    if action == "launch":
        for s in running:
            out.append(PlannedCommand(s.name, "stop the running container (head first) and check it stopped "
                                      "clean", rc.docker_stop(s.container, stop_s)))
        for s in ctx.order_start:
            prev = prev_name(s.container)
            keep = _keep_line(s, states.get(s.name), f"{rc.docker_rm(prev)}; {rc.docker_rename(s.container, prev)}")
            if keep is not None:
                out.append(keep)
            role = "head (API server)" if s.is_head else "worker"
            script = scripts.get(s.name)
            path = ctx.cfg.launch_script_for(s)
            if path:
                what = f"start {role}: run the launch script {path}"
                if script is not None:
                    what += f" ({script.size:,} bytes, sha256 {script.sha256[:16]}...), first lines:"
                    prev_text = script.first_lines()
                else:
                    prev_text = f"bash {path}"
                out.append(PlannedCommand(s.name, what, prev_text))
            else:
                assert specs is not None and s.name in specs
                note = engines.hang_evidence_note(ctx.cfg)
                out.append(PlannedCommand(s.name, "start " + role + (f" ({note})" if note else ""),
                                          specs[s.name].preview()))
    elif action in ("stop", "restart"):
        for s in ctx.order_stop:
            out.append(PlannedCommand(s.name, "stop", rc.docker_stop(s.container, stop_s)))
        out.append(PlannedCommand("all", "verify the stop", "container not running, API port closed, no compute "
                                  "process left, memory back to its pre-launch baseline"))
    if action == "restart":
        for s in ctx.order_start:
            out.append(PlannedCommand(s.name, "start", rc.docker_start(s.container)))
    return out
