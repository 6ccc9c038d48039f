"""What the fit estimate and the verified stop read on each station: the checkpoint's config.json
and shard sizes, the serving GPU's memory and compute processes, host memory.

I/O only (every command comes from ``console.remote.cmdlines``); the arithmetic is ``console.service.fit``.
One ``MemoryReading`` serves three purposes: the estimate's free memory, the pre-launch baseline a
later stop compares with, and the stop's own check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Config, Station
from console.probes import ParseError
from console.probes import disk as disk_probe
from console.probes.meminfo import HostMemory, parse_meminfo
from console.probes.model_config import ModelShape, parse_model_shape
from console.probes.nvidia_smi import ComputeApp, GpuReading, parse_compute_apps, parse_gpus
from console.remote import cmdlines as rc
from console.remote.transport import CommandResult
from console.service import engines, fit
from console.tasks import gather_owned

Runner = Callable[[Station, str], Awaitable[CommandResult]]


@dataclass
class MemoryReading:
    """The serving GPU(s) of one station (a Station's display GPU left out) and host memory."""

    station: str
    gpus: list[GpuReading] = field(default_factory=list)
    apps: list[ComputeApp] = field(default_factory=list)  # compute processes on the serving GPU(s)
    host: HostMemory | None = None
    error: str | None = None

    @property
    def gpu_used_mib(self) -> int | None:
        vals = [g.memory_used_mib for g in self.gpus]
        return None if not vals or any(v is None for v in vals) else sum(v for v in vals if v is not None)

    @property
    def gpu_total_mib(self) -> int | None:
        vals = [g.memory_total_mib for g in self.gpus]
        return None if not vals or any(v is None for v in vals) else sum(v for v in vals if v is not None)

    def to_baseline(self) -> dict[str, Any]:
        return {"gpu_used_mib": self.gpu_used_mib, "gpu_total_mib": self.gpu_total_mib,
                "host_total_mib": self.host.total_mib if self.host else None,
                "host_available_mib": self.host.available_mib if self.host else None,
                "pids": sorted({a.pid for a in self.apps})}


def serving_gpus(station: Station, cfg: Config, gpus: list[GpuReading]) -> list[GpuReading]:
    """The GPUs the service runs on: the station's ``gpu`` (UUID or name), else the profile's GPU name."""
    want = station.gpu or cfg.profile.gpu.name
    return [g for g in gpus if want in (g.uuid, g.name)]


async def read_memory(run: Runner, cfg: Config, station: Station) -> MemoryReading:
    out = MemoryReading(station.name)
    gpu_r, apps_r, mem_r = await gather_owned(
        run(station, rc.gpu_query()), run(station, rc.compute_apps_query()), run(station, rc.meminfo_once()))
    try:
        out.gpus = serving_gpus(station, cfg, parse_gpus(gpu_r.stdout))
        uuids = {g.uuid for g in out.gpus}
        out.apps = [a for a in parse_compute_apps(apps_r.stdout) if a.gpu_uuid in uuids]
    except ParseError as exc:
        out.error = f"nvidia-smi on {station.name}: {exc}"
    if not out.gpus and out.error is None:
        out.error = f"no {station.gpu or cfg.profile.gpu.name} GPU found on {station.name}"
    try:
        out.host = parse_meminfo(mem_r.stdout)
    except ParseError as exc:
        out.error = out.error or f"/proc/meminfo on {station.name}: {exc}"
    return out


def station_memory(reading: MemoryReading, unified: bool, assume_idle: bool = False) -> fit.StationMemory | None:
    """The estimate's view of a reading. ``assume_idle``: as if the running service were stopped
    (a replace: its memory and processes will be gone)."""
    procs = () if assume_idle else tuple(fit.GpuProcess(a.pid, a.process_name, a.used_memory_mib)
                                         for a in reading.apps)
    h = reading.host
    if unified:
        if h is None:
            return None
        if assume_idle:
            return fit.StationMemory(h.total_mib, True)
        return fit.StationMemory(h.total_mib, True, free_mib=h.free_mib, available_mib=h.available_mib,
                                 cached_mib=h.cached_mib, processes=procs)
    total = reading.gpu_total_mib
    if total is None:
        return None
    per_gpu = total / max(1, len(reading.gpus))
    used = None if assume_idle or reading.gpu_used_mib is None else reading.gpu_used_mib / max(1, len(reading.gpus))
    return fit.StationMemory(per_gpu, False, used_mib=0.0 if assume_idle else used, processes=procs)


@dataclass
class ModelOnStation:
    shape: ModelShape | None
    checkpoint_bytes: float
    checkpoint_source: str
    error: str | None = None


async def read_model(run: Runner, cfg: Config, station: Station) -> ModelOnStation:
    p = cfg.profile
    conf, rev = await gather_owned(run(station, rc.model_config(p.model_dir)),
                                     run(station, rc.model_revision(p.model_dir)))
    size = float(disk_probe.parse_shards(rev.stdout).total_bytes) if rev.ok or rev.stdout else 0.0
    source = "station"
    if size <= 0:
        size, source = p.checkpoint_gb * 1e9, "profile"
    if not conf.ok:
        return ModelOnStation(None, size, source,
                              f"{station.name}: cannot read {p.model_dir}/config.json ({_last(conf.stderr)})")
    try:
        return ModelOnStation(parse_model_shape(conf.stdout), size, source)
    except ParseError as exc:
        return ModelOnStation(None, size, source, f"{station.name}: {p.model_dir}/{exc}")


def settings_for(cfg: Config, shape: ModelShape | None = None, script_text: str | None = None) -> fit.FitSettings:
    """The launch's serving settings: the profile with the config's overrides, or (a launch script
    runs the engine) the flags the script passes."""
    p = cfg.profile
    tp = cfg.tensor_parallel
    if script_text is not None:
        flags = fit.flags_from_script(script_text)
        merged = {**engines.serving_settings(p, {}), **flags}
        return fit.settings_from_flags(p.engine, merged, tp, shape, source="launch script")
    source = "profile + overrides" if cfg.overrides else "profile"
    return fit.settings_from_flags(p.engine, engines.serving_settings(p, cfg.overrides), tp, shape, source)


@dataclass
class FitReport:
    fits: list[fit.StationFit]
    problems: list[fit.FitWarning]  # the estimate could not be made for a station
    memory: dict[str, MemoryReading]

    @property
    def ok(self) -> bool:
        return fit.plan_json(self.fits, self.problems)["fits"]

    def to_json(self) -> dict[str, Any]:
        return fit.plan_json(self.fits, self.problems)

    def warnings(self) -> list[fit.FitWarning]:
        return [w for f in self.fits for w in f.warnings] + list(self.problems)

    @property
    def verdict(self) -> str:
        """``yes``, ``no`` (an estimate says it does not fit), or ``unknown`` (no estimate could be made
        for a station and none of the others says no): never "does not fit" without an estimate."""
        if self.ok:
            return "yes"
        if self.problems and all(f.fits for f in self.fits) and all(
                w.severity != "error" for f in self.fits for w in f.warnings):
            return "unknown"
        return "no"


async def gather_fit(run: Runner, cfg: Config, scripts: dict[str, str] | None = None,
                     assume_idle: bool = False) -> FitReport:
    """The estimate for every station (read in parallel). ``scripts``: station -> launch script text."""
    unified = cfg.profile.gpu.unified_memory

    async def one(s: Station) -> tuple[fit.StationFit | None, fit.FitWarning | None, MemoryReading]:
        model, mem = await gather_owned(read_model(run, cfg, s), read_memory(run, cfg, s))
        if model.shape is None:
            return None, fit.FitWarning("model-config", "error", s.name, model.error or "no config.json",
                                        "check profile.model_dir and the checkpoint copy on this station"), mem
        smem = station_memory(mem, unified, assume_idle)
        if smem is None:
            return None, fit.FitWarning("memory-unknown", "error", s.name,
                                        mem.error or f"{s.name}: GPU memory could not be read", ""), mem
        settings = settings_for(cfg, model.shape, (scripts or {}).get(s.name))
        if settings.max_model_len <= 0:
            return None, fit.FitWarning("model-config", "error", s.name,
                                        f"{s.name}: no max model length in the settings or config.json", ""), mem
        return fit.estimate(s.name, model.shape, model.checkpoint_bytes, settings, smem,
                            model.checkpoint_source), None, mem

    results = await gather_owned(*(one(s) for s in cfg.stations))
    fits = [f for f, _w, _m in results if f is not None]
    problems = [w for _f, w, _m in results if w is not None]
    return FitReport(fits, problems, {m.station: m for _f, _w, m in results})


def _last(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"
