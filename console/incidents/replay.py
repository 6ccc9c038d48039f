"""An incident bundle's window (``window.ndjson``, console/incidents/window.py) played back: the bundle
read, its samples turned back into the messages they came from and applied in time order to the same
``StationState`` and judge as ``watch --json``. Both the ``replay`` command (console/commands/replay.py)
and the on-screen replay (console/ui/screens/replay.py) use it, so neither imports the other.
"""

from __future__ import annotations

import json
import math
import tarfile
from typing import Any

from console.errors import UsageError
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.nvidia_smi import GpuReading
from console.sanitize import one_line
from console.serving.metrics import ServingSnapshot
from console.station.messages import ConnectionState, ContainerUpdate, EngineUpdate, GpuSample, ServingUpdate
from console.station.progress import ProgressJudge
from console.station.snapshot import progress_json, watch_json
from console.station.state import Stations, StationState
from console.vocabulary import ConnState, ContainerState, EnginePhase

MAX_WINDOW_BYTES = 256 * 1024 * 1024


def read_window(path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The bundle's samples (in time order) and its incident row."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            got: dict[str, bytes] = {}
            for m in tar.getmembers():
                base = m.name.rsplit("/", 1)[-1]
                if m.isfile() and base in ("window.ndjson", "incident.json") and m.size <= MAX_WINDOW_BYTES:
                    f = tar.extractfile(m)
                    if f is not None:
                        got[base] = f.read()
    except (OSError, tarfile.TarError) as exc:
        raise UsageError(f"{one_line(path, 200)}: not an incident bundle ({one_line(str(exc), 200)})") from None
    if "window.ndjson" not in got:
        raise UsageError(f"{one_line(path, 200)}: no window.ndjson in it (an incident bundle has one)")
    samples = []
    for line in got["window.ndjson"].decode(errors="replace").splitlines():
        try:
            s = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
        except ValueError:
            continue
        if isinstance(s, dict) and isinstance(s.get("t"), (int, float)) and isinstance(s.get("station"), str):
            samples.append(s)
    samples.sort(key=lambda s: s["t"])
    try:
        incident = json.loads(got.get("incident.json", b"{}"))
    except ValueError:
        incident = {}
    return samples, incident if isinstance(incident, dict) else {}


def _no_constant(word: str) -> None:
    """``NaN``/``Infinity`` in a bundle (ours never writes them: json_out): unknown, here, once."""
    return None


def _finite(text: str) -> float | None:
    """A bundle's number; one too large for a float (``1e400``, read as inf) is unknown too."""
    f = float(text)
    return f if math.isfinite(f) else None


def message(s: dict[str, Any]) -> object | None:
    """The message a sample came from (None: a kind replay does not apply)."""
    name, t, kind = s["station"], float(s["t"]), s.get("kind")
    if kind == "gpu":
        gpus = [GpuReading(g.get("i", 0), "", "GPU", g.get("mem_mib"), g.get("mem_total_mib"), g.get("util"),
                           g.get("temp_c"), g.get("power_w"), g.get("error")) for g in s.get("gpus") or ()]
        return GpuSample(name, gpus, t, s.get("error"))
    if kind == "serving":
        return ServingUpdate(ServingSnapshot(status=s.get("health") or "unknown", healthy=s.get("health") == "ok",
                                             running=s.get("running"), waiting=s.get("waiting"),
                                             gen_tok_s=s.get("gen_tok_s"), gen_tokens_total=s.get("gen_tokens"),
                                             kv_usage=s.get("kv"), error=s.get("error"), updated_at=t, polled_at=t), at=t)
    if kind == "container":
        return ContainerUpdate(name, ContainerInfo(name="", state=ContainerState.parse(s.get("state")),
                                                   started_at=s.get("started_at"), exit_code=s.get("exit_code")), at=t)
    if kind == "engine":
        try:
            return EngineUpdate(name, EngineProgress(phase=EnginePhase(s.get("phase"))), at=t)
        except ValueError:
            return None
    if kind == "conn":
        try:
            return ConnectionState(name, ConnState(s.get("state")), s.get("detail") or "", last_sample_at=t)
        except ValueError:
            return None
    return None


def replay_lines(samples: list[dict[str, Any]], window_s: float, interval: float) -> list[dict[str, Any]]:
    names = list(dict.fromkeys(s["station"] for s in samples))
    head = next((s["station"] for s in samples if s.get("kind") == "serving"), names[0] if names else None)
    stations = Stations((StationState(n, rank=0 if n == head else 1, head=n == head) for n in names), head=head)
    judge = ProgressJudge(stations, window_s)  # as watch's: one tick per frame
    out: list[dict[str, Any]] = []
    if not samples:
        return out
    live: set[str] = set()
    t, i = samples[0]["t"], 0
    end = samples[-1]["t"]
    while t <= end + 1e-9:
        while i < len(samples) and samples[i]["t"] <= t:
            s = samples[i]
            i += 1
            msg = message(s)
            if s["station"] not in live and s.get("kind") != "conn":
                stations.apply(ConnectionState(s["station"], ConnState.LIVE, "replay", last_sample_at=s["t"]))
            live.add(s["station"])
            if msg is not None:
                stations.apply(msg)
        verdicts = judge.tick(t).stations
        for state in stations.values():
            out.append(watch_json(state, t) | progress_json(verdicts[state.name], t) | {"replay": True})
        t += interval
    return out
