"""``dgx-console watch [--json] [--logs] [--seconds N] [--interval S]``: the live view, headless.

Built on the TUI's own per-station services (``StationService`` over the session registry, started
and stopped as jobs of a ``Supervisor`` exactly as the TUI does: console/station/services.py): the
same messages the panes render are folded into the same ``StationState`` per station
(console/station/state.py) and printed every interval (console/station/snapshot.py), so what
``watch`` says is what the screen says. ``--json`` prints NDJSON, one object per
station per interval::

    {"t": 1796047812.5, "station": "B", "state": "live", "sample_age_s": 0.4, "gpus": [...],
     "container": {...}, "engine": {"phase": "ready", ...}, "error": null,
     "progress": "wedged", "progress_since_s": 41.2, ...}

``progress`` (console/station/progress.py) needs the API's generation-token counter, so
``watch`` polls the API too, as the dashboard does (ServingMonitor); and NCCL's RAS report, read
once every few seconds on the head while an engine serves (console/station/ras_monitor.py): ``ras``
(the job's watch: state healthy/suspect/stuck/unknown, why, the stations behind) on every line.

and with ``--logs`` every container log line in order as ``{"t": ..., "station": "B", "log": "..."}``.

Unattended (a spare machine, all night; docs/unattended-watch.md has a systemd unit): the same flight
recorder as the TUI (console/incidents/: detection, the capture, the ledger) and the same alerts
(``[alerts]``); the head's object carries the news (``incidents``: opened, captured, ended, ``alert``,
``alert-failed``), and with ``--json`` the failures, openings and alerts are one line each on stderr
too (the unit's journal). A job of its own that fails is said the same way, then restarted.
``--seconds N`` ends after N s (default: until Ctrl+C); either way the exit status is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from console import json_out
from console.commands.args import add_config_args, check_seconds
from console.commands.status import add_replace_host_key
from console.config import Config, load_config
from console.incidents.alert_point import AlertEvent, outcome_alert
from console.incidents.recorder import IncidentRecorder, Notice
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.session import SessionRegistry
from console.sanitize import clean, clip, one_line
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor, ServingSnapshot
from console.station.memory_guard import GuardChange, MemoryGuard
from console.station.messages import LogBatch, LogMarker, ServingUpdate
from console.station.progress import Judgement, ProgressJudge, job_ras
from console.station.ras_monitor import start_ras_watch
from console.station.services import start_station_services
from console.station.snapshot import progress_json, progress_words, watch_json, watch_line
from console.station.state import Stations
from console.supervisor import JobFailure, Supervisor

#: The news ``watch --json`` also writes to stderr (the journal of a unit): incidents, evidence, alerts, failures.
LOGGED = frozenset({"incident", "captured", "skipped", "capture-failed", "ended", "alert", "alert-failed", "error",
                    "recovering", "recover-waiting", "recovered", "recover-failed", "recover-limit", "recover-refused"})


def news_word(kind: str) -> str:
    """The word a text line of news starts with: what it is about."""
    if kind in ("alert", "alert-failed"):
        return "alert"
    return "recover" if kind.startswith("recover") else "incident"


@dataclass(eq=False)
class _View:
    """One watch's printing: the fleet the services' messages fold into, the news not yet printed, and
    the plain view's block height (redrawn in place on a terminal)."""

    out: TextIO
    log: TextIO
    stations: Stations
    judge: ProgressJudge
    recorder: IncidentRecorder
    guard: MemoryGuard
    said: list[Notice]  # the flight recorder's news: on the head's next object (--json), else a line
    as_json: bool
    logs: bool
    tty: bool
    drawn: int = 0

    def job_failed(self, f: JobFailure) -> None:
        """A job's failure is never silent: the next print says it, and the log line."""
        self.said.append(Notice("error", f"{f.job} failed ({type(f.error).__name__}: {one_line(str(f.error), 200)}); "
                                         f"restarting in {f.retry_in_s:g} s", at=time.time()))

    def emit(self, text: str) -> None:
        self.out.write(text + "\n")

    def post(self, msg: object) -> None:
        """A station service's message: folded into the fleet and the recorder; with --logs, its log lines."""
        name = getattr(msg, "station", None)
        if name not in self.stations:
            return
        self.stations.apply(msg)
        self.recorder.note(msg)
        if self.logs and isinstance(msg, LogBatch):
            self._print_logs(name, msg)

    def _print_logs(self, name: str, batch: LogBatch) -> None:
        now = time.time()
        for line in batch.lines:
            if not self.as_json:
                self.emit(f"{name} | {clean(clip(line, 4096))}")
            elif not isinstance(line, LogMarker):
                self.emit(json_out.dumps({"t": round(now, 3), "station": name, "log": line}))
        self.out.flush()

    def serving(self, snap: ServingSnapshot) -> None:
        """The API's poll: the head's counter (what progress reads)."""
        msg = ServingUpdate(snap)
        self.stations.apply(msg)
        self.recorder.note(msg)

    def print_interval(self) -> None:
        """One interval: judge, let the recorder and the memory guard act, then print the view."""
        now = time.time()
        judged = self.judge.tick(now)  # stored on the fleet: what every line below says
        self.recorder.tick(judged, now)
        news, self.said[:] = list(self.said), []
        if self.as_json:  # what an unattended watch must not lose in NDJSON: one line each on stderr too
            self._log_news(news)
        guarded = self.guard.step(self.stations, now)
        self._alert_memory(guarded)
        if self.as_json:
            self._print_json(judged, news, now)
        else:
            self._print_text(judged, news, guarded, now)
        self.out.flush()

    def _log_news(self, news: list[Notice]) -> None:
        for n in news:
            if n.kind in LOGGED:
                self.log.write(f"dgx-console watch: {n.kind}: {clean(n.text)}\n")
                self.log.flush()

    def _alert_memory(self, guarded: list[GuardChange]) -> None:
        for ch in guarded:
            for line in outcome_alert(AlertEvent("memory-low" if ch.low else "memory-ok", ch.text, (ch.station,))):
                self.log.write(f"dgx-console watch: {clean(line)}\n")  # a broken sender, said

    def _memory_json(self, name: str) -> dict:
        low = self.guard.now_low.get(name)
        return {"memory_guard": low.to_json()} if low is not None else {}

    def _print_json(self, judged: Judgement, news: list[Notice], now: float) -> None:
        ras = job_ras(self.stations.values(), now).json(now)  # the job's: the same on every station's line
        for state in self.stations.values():
            self.emit(json_out.dumps(watch_json(state, now) | progress_json(judged.stations[state.name], now)
                                     | {"ras": ras}
                                     | self._memory_json(state.name)
                                     | incidents_json(state.name == self.stations.head_name, news, self.recorder)))

    def _print_text(self, judged: Judgement, news: list[Notice], guarded: list[GuardChange], now: float) -> None:
        if news or guarded:
            self.drawn = 0  # the news stays above the redrawn block
        for n in news:
            self.emit(f"{news_word(n.kind)}: {clean(n.text)}")
        for ch in guarded:
            self.emit(f"memory: {clean(ch.text)}")
        if self.tty and self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")  # redraw the block in place
        lines = [watch_line(state, now) + progress_words(judged.stations[state.name])
                 for state in self.stations.values()]
        for ln in lines:
            self.emit(ln)
        self.drawn = len(lines)

    def print_left_over(self) -> None:
        """Said while the jobs ended (an alert's outcome in its grace): a line each, never lost."""
        for n in self.said:
            if not self.as_json:
                self.emit(f"{news_word(n.kind)}: {clean(n.text)}")
            elif n.kind in LOGGED:
                self.log.write(f"dgx-console watch: {n.kind}: {clean(n.text)}\n")


def _next_wait(interval: float, seconds: float | None, start: float) -> float:
    """The interval, or less when ``seconds`` ends sooner."""
    if seconds is None:
        return interval
    return min(interval, max(0.0, start + seconds - time.monotonic()))


async def _print_until_stopped(view: _View, stop: asyncio.Event, interval: float, seconds: float | None) -> None:
    start = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _next_wait(interval, seconds, start))
        view.print_interval()
        if seconds is not None and time.monotonic() - start >= seconds:
            break


async def watch(config: Config, out: TextIO, *, as_json: bool = False, logs: bool = False,
                seconds: float | None = None, interval: float = 1.0, trust: bool = False,
                replace: str | None = None, stop: asyncio.Event | None = None, log: TextIO | None = None,
                read_only: bool = False) -> None:
    """Run the stations' services and print the view every ``interval`` until ``seconds`` or ``stop``.
    ``read_only``: the capture-then-recover of ``[recover]`` refuses (and says so) instead of restarting."""
    stop = stop or asyncio.Event()
    sample_ms = max(100, min(config.ui.refresh_ms, int(interval * 1000)))
    stations = Stations.for_config(config, sample_ms / 1000)
    judge = ProgressJudge(stations, config.ui.progress_window_s)  # the one judge: ticked once per interval here
    tty = out.isatty() and not as_json and not logs
    said: list[Notice] = []
    recorder = IncidentRecorder(config, stations, said.append, read_only=read_only)
    guard = MemoryGuard(config)  # GB10: the MemAvailable floor during a start-up
    log = sys.stderr if log is None else log
    view = _View(out, log, stations, judge, recorder, guard, said, as_json, logs, tty)

    async with SessionRegistry(config) as sessions, \
            ApiClient(config.api_url(), api_key=config.api_key(), timeout=config.api.timeout_s) as api, \
            Supervisor() as jobs:  # (the jobs end before the client closes)
        # a refusal is left to the service, which shows the station's state
        await trust_stations(sessions.transports().values(), HostKeyChoice(trust, replace),
                             config.connect_timeout_s + 2)
        start_station_services(jobs, config, view.post, sessions, sample_ms)
        jobs.start("serving", ServingMonitor(api, view.serving).run, on_failure=view.job_failed)
        # one short ncclras every few s while an engine serves
        start_ras_watch(jobs, sessions, stations, view.post, view.job_failed)
        jobs.start("incidents", recorder.run, on_failure=view.job_failed)  # the ledger, the capture, the stalls, alerts
        await _print_until_stopped(view, stop, interval, seconds)
    view.print_left_over()
    with contextlib.suppress(OSError, ValueError):
        out.flush()
        log.flush()


def incidents_json(head: bool, news: list[Notice], recorder: IncidentRecorder) -> dict:
    """The head's object carries the flight recorder's news since the last interval (``incidents``:
    ``[{"event": "captured", "id": 3, "text": ..., "bundle": ..., "seconds": ...}]``) and the stall
    summary (``stalls``: "3 stalls in the last hour, longest 14 s"), each only when there is one."""
    if not head:
        return {}
    out: dict = {}
    if news:
        out["incidents"] = [n.to_json()["incident"] | {"t": round(n.at, 3)} for n in news]
    if words := recorder.stall_summary():
        out["stalls"] = words
    return out


def run(args: argparse.Namespace) -> int:
    if args.seconds is not None:
        check_seconds("--seconds", args.seconds, limit=366 * 86400.0)
    check_seconds("--interval", args.interval, limit=3600.0)
    config = load_config(args.config)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await watch(config, sys.stdout, as_json=args.json, logs=args.logs, seconds=args.seconds,
                    interval=args.interval, trust=args.trust_host_key, replace=args.replace_host_key, stop=stop,
                    read_only=getattr(args, "read_only", False))

    with contextlib.suppress(BrokenPipeError):
        asyncio.run(main())
    return 0


def register(sub) -> None:
    p = sub.add_parser("watch", help="headless live view: per station state, sample age, GPUs, container, "
                                     "engine (same services as the TUI)")
    add_config_args(p)
    add_replace_host_key(p)
    p.add_argument("--json", action="store_true", help="NDJSON: one object per station per interval")
    p.add_argument("--logs", action="store_true", help="also every container log line, in order")
    p.add_argument("--seconds", type=float, default=None, metavar="N", help="end after N s (default: until Ctrl+C)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="print every S s (default 1)")
    p.set_defaults(func=run)
