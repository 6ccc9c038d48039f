"""Every launch's start-up timeline and pre-launch memory, kept in the XDG data directory.

The next launch compares with it ("weights 4m02s (last time 3m58s)", and which phase is slower
than the last ones), and a later ``stop`` checks memory against the baseline measured before the
launch instead of guessing what "idle" looks like. One JSON line per launch in
``$XDG_DATA_HOME/dgx-console/launches.jsonl`` (``~/.local/share/...``), keyed by the config's
profile and stations. A history that cannot be read or written never breaks an action.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import statistics
from pathlib import Path
from typing import Any

from console.config import Config
from console.durations import compact
from console.probes.engine_log import TimelineEvent

HISTORY_FILE = "launches.jsonl"
KEEP = 200  # records kept per file (older ones are dropped on append)
SLOWER_RATIO = 1.2
SLOWER_MIN_S = 1.0
PHASES = ("weights", "kv-cache", "cuda-graphs", "ready", "first-token")
PHASE_LABELS = {"weights": "weights", "kv-cache": "KV cache", "cuda-graphs": "CUDA graphs",
                "ready": "start to /health 200", "first-token": "start to first token"}


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dgx-console"


def config_key(cfg: Config) -> str:
    """Which service a record belongs to: the profile and the stations (not the file's path)."""
    ident = [cfg.profile.name] + [[s.name, s.host, s.port, s.container] for s in sorted(cfg.stations,
                                                                                        key=lambda s: s.rank)]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def durations(events: list[TimelineEvent]) -> dict[str, float]:
    """Seconds per start-up phase; the engine's own figure where it logs one."""
    by = {e.event: e for e in events}
    out: dict[str, float] = {}

    def span(a: str, b: str) -> float | None:
        return by[b].at - by[a].at if a in by and b in by and by[b].at >= by[a].at else None

    w = by.get("weights-end")
    out_w = w.value("seconds") if w else None
    for key, val in (("weights", out_w if out_w is not None else span("weights-start", "weights-end")),
                     ("kv-cache", span("weights-end", "kv-cache")),
                     ("cuda-graphs", (by["cuda-graphs"].value("seconds") if "cuda-graphs" in by else None)
                      or span("kv-cache", "cuda-graphs")),
                     ("ready", span("container-started", "health-ok")),
                     ("first-token", span("container-started", "first-token"))):
        if val is not None:
            out[key] = round(val, 3)
    return out


def compare(now: dict[str, dict[str, float]], previous: list[dict[str, dict[str, float]]]) -> list[str]:
    """One line per station: "A: weights 4m02s (last time 3m58s) · KV cache 0.8s ...", and
    "slower than the last N" on each phase where it is."""
    lines = []
    for station, phases in now.items():
        parts = []
        for phase in PHASES:
            if phase not in phases:
                continue
            cur = phases[phase]
            past = [p[station][phase] for p in previous if phase in p.get(station, {})]
            text = f"{PHASE_LABELS[phase]} {compact(cur)}"
            if past:
                text += f" (last time {compact(past[-1])})"
                med = statistics.median(past)
                if cur > SLOWER_RATIO * med and cur - med >= SLOWER_MIN_S:
                    text += f", slower than the last {len(past)} (median {compact(med)})"
            parts.append(text)
        if parts:
            lines.append(f"{station}: " + " · ".join(parts))
    return lines


class LaunchHistory:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else data_dir() / HISTORY_FILE

    def _all(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict):
                    out.append(rec)
        return out

    def records(self, key: str) -> list[dict[str, Any]]:
        return [r for r in self._all() if r.get("key") == key]

    def previous_durations(self, key: str, limit: int = 5) -> list[dict[str, dict[str, float]]]:
        """The phase durations of the last successful launches, oldest first."""
        ok = [r for r in self.records(key) if r.get("result") == "ok"]
        return [{n: dict(st.get("durations") or {}) for n, st in (r.get("stations") or {}).items()}
                for r in ok[-limit:]]

    def last_baseline(self, key: str) -> dict[str, dict[str, Any]] | None:
        """Per station, the memory measured before the latest launch (or restart) of this service."""
        for rec in reversed(self.records(key)):
            base = {n: st["baseline"] for n, st in (rec.get("stations") or {}).items() if st.get("baseline")}
            if base:
                return base
        return None

    def append(self, record: dict[str, Any]) -> str | None:
        """Write one record; the error text instead of an exception (an action never fails on it)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keep = self._all()[-(KEEP - 1):]
            tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in [*keep, record]))
            os.replace(tmp, self.path)
        except OSError as exc:
            return f"launch history not saved ({self.path}: {exc.strerror or exc})"
        return None


def make_record(cfg: Config, action: str, result: str, timeline: dict[str, list[TimelineEvent]],
                baseline: dict[str, dict[str, Any]]) -> dict[str, Any]:
    stations = {}
    for s in cfg.stations:
        events = timeline.get(s.name, [])
        stations[s.name] = {"events": [{**e.to_json(), "values": dict(e.values)} for e in events],
                            "durations": durations(events), "baseline": baseline.get(s.name)}
    return {"v": 1, "key": config_key(cfg), "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "action": action, "result": result, "profile": cfg.profile.name, "stations": stations}


def keep_start(history: LaunchHistory, cfg: Config, action: str, result: str,
               timeline: dict[str, list[TimelineEvent]], baseline: dict[str, dict[str, Any]]) -> list[str]:
    """Save this start-up (and the baseline before it); the lines to show: on success how each phase
    compares with the last launches, and why the record was not saved if it was not."""
    key = config_key(cfg)
    previous = history.previous_durations(key)
    lines: list[str] = []
    if result == "ok":
        now = {n: durations(evs) for n, evs in timeline.items()}
        lines += compare({n: d for n, d in now.items() if d}, previous)
    err = history.append(make_record(cfg, action, result, timeline, baseline))
    if err:
        lines.append(err)
    return lines
