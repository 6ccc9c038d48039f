"""One station: connection, GPUs (memory bar + history), host memory, container and engine
state, badges from checks and diagnosis, the GPU processes (``p``) and the container log.
Rendering only: every value arrives through a method called by the app's message handlers.

The pane fits what it shows to its size: its status is made of whole pieces ("engine serving
(worker)" never wraps mid-value) and the fatal line shows its start (the words that name the
error); a short pane (a small terminal, many stations) drops the history rows and the display
GPU and gives the serving box three rows, so the log keeps lines; a tall one plots the serving
GPU's memory and utilization over time."""

from __future__ import annotations

import functools
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import Static

from console.config import Station
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.sanitize import one_line
from console.station.messages import ConnectionState, ConnState
from console.ui import clock
from console.ui.fit_text import Clipped, Packed, error_words
from console.ui.palette import palette_of
from console.ui.widgets.gpu_meter import GpuMeter, bar, fmt_gib
from console.ui.widgets.log_pane import LogPane
from console.ui.widgets.process_list import ProcessList
from console.vocabulary import DOWN_STATES, LOADING_PHASES, TRANSPORT_SHORT, NcclTransport

SHORT_BELOW = 30  # pane rows: below, one row per GPU and no display GPU (80x24, 8 stations)
ROOMY_FROM = 44  # pane rows: from here the serving GPU's history is a plot (200x50, two stations)

CONN_STYLE: dict[ConnState, tuple[str, str]] = {
    "connecting": ("◌", "yellow"),
    "live": ("●", "green"),
    "stale": ("◐", "bold yellow"),
    "unreachable": ("✖", "bold red"),
    "host-key-unknown": ("⚠", "bold magenta"),
    "host-key-changed": ("✖", "bold red"),
    "error": ("✖", "bold red"),
}


def _ago(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else (f"{s // 60} min" if s < 7200 else f"{s // 3600} h")
PHASE_STYLE = {
    "ready": "bold green",
    "failed": "bold red",
    "stopped": "dim",
    "loading": "yellow",
    "graphs": "yellow",
    "kv-cache": "yellow",
    "loaded": "yellow",
    "connecting": "yellow",
    "starting": "yellow",
}
TRANSPORT_STYLE = {NcclTransport.GDRDMA: "green", NcclTransport.RDMA: "yellow", NcclTransport.SOCKET: "bold red",
                   NcclTransport.UNKNOWN: "dim"}
TRANSPORT_LABEL = {t: (TRANSPORT_SHORT[t], TRANSPORT_STYLE[t]) for t in NcclTransport}


TIMELINE_SHORT = {"engine-up": "engine up", "nccl-init": "NCCL init", "weights-start": "loading",
                  "weights-end": "weights", "kv-cache": "KV", "cuda-graphs": "graphs"}


def timeline_line(p: EngineProgress) -> Text:
    """The start-up so far in one line: the engine's own figures per phase reached, the latest
    phase, and the time since the first event ("start-up +4:07 weights 218.00 GiB in 239.4 s · ...")."""
    evs = [e for e in p.timeline if e.event in TIMELINE_SHORT]
    if not evs:
        return Text()
    since = int(evs[-1].at - evs[0].at)
    t = Text(f"start-up +{since // 60}:{since % 60:02d} ", style="dim")
    shown = [e for e in evs if e.detail] + ([evs[-1]] if not evs[-1].detail else [])
    for i, ev in enumerate(shown):
        if i:
            t.append(" · ", style="dim")
        t.append(TIMELINE_SHORT[ev.event], style="bold")
        if ev.detail:
            t.append(f" {ev.detail}")
    if p.phase == "failed":  # the last phase reached is where it stopped, not where it is
        t.append(" → failed", style="bold red")
    return t


def _while_mounted(method):
    """Samples can still be queued while the app shuts down: drop them instead of failing."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self.is_mounted:
            return None
        try:
            return method(self, *args, **kwargs)
        except NoMatches:
            return None

    return wrapper


class HostMemLine:
    """``host mem ███░░ 24.3/496.0 GiB``: the bar gives way so the figures always show."""

    def __init__(self, mem: HostMemory, unified: bool) -> None:
        self.mem, self.unified = mem, unified

    def __rich_console__(self, console, options):
        mem = self.mem
        frac = mem.used_mib / mem.total_mib if mem.total_mib else None
        figures = Text(f" {fmt_gib(mem.used_mib)}/{fmt_gib(mem.total_mib)} GiB")
        note = Text("  (unified with GPU)", style="dim") if self.unified else Text()
        room = options.max_width - len("host mem ") - figures.cell_len
        if room - note.cell_len >= 8:
            room -= note.cell_len
        else:
            note = Text()
        line = Text("host mem ") + bar(frac, max(4, min(24, room))) + figures + note
        line.no_wrap, line.overflow = True, "ellipsis"
        line.truncate(options.max_width, overflow="ellipsis")
        yield line


class StationPane(Vertical):
    DEFAULT_CSS = """
    StationPane { border: round $primary 60%; padding: 0 1; height: 1fr; }
    StationPane:focus-within { border: round $accent; }
    StationPane .status { height: auto; }
    StationPane .gpus { height: auto; }
    StationPane .hostmem { height: 1; }
    StationPane .badges { height: auto; display: none; }
    StationPane .gpu-error { height: auto; display: none; }
    StationPane .gpu-error.-shown { display: block; }
    StationPane.-stale .gpus, StationPane.-stale .hostmem { text-opacity: 55%; }
    StationPane GpuMeter.-display { height: 2; }
    StationPane GpuMeter.-display .gpu-hist { display: none; }
    StationPane.-short GpuMeter { height: 2; }
    StationPane.-short GpuMeter .gpu-hist { display: none; }
    StationPane.-short GpuMeter.-display { display: none; }
    StationPane.-roomy GpuMeter.-serving { height: auto; }
    StationPane.-roomy GpuMeter.-serving .gpu-hist { display: none; }
    StationPane.-roomy GpuMeter.-serving .gpu-plot { display: block; }
    """

    def __init__(self, station: Station, max_lines: int = 5000, unified: bool = False, engine: str = "vllm",
                 gpudirect: bool = True, serving_gpu: str | None = None, expected_frac: float | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.gpudirect = gpudirect  # the profile expects GPUDirect RDMA (GB10 pairs do not: RDMA is calm)
        self.serving_gpu, self.expected_frac = serving_gpu, expected_frac  # its expected memory fill
        self.station = station
        self.max_lines = max_lines
        self.unified = unified
        self.engine = engine
        self.conn_state: ConnState = "connecting"
        self.conn_detail = ""
        self.host_key: object | None = None  # the HostKeyError of a host-key state
        self.last_sample_at: float | None = None
        self.next_try_at: float | None = None
        self.gpu_error: str | None = None
        self.container: ContainerInfo | None = None
        self.progress: EngineProgress | None = None
        self.gpus: list[GpuReading] = []
        self.gpus_at: float | None = None
        self.apps: list[ComputeApp] = []
        self.apps_seen = False  # a compute-apps sample arrived (an empty list is then "none")
        self.host_mem: HostMemory | None = None
        self.badges: dict[str, Text] = {}
        self.meters: list[GpuMeter] = []
        role = "API host" if station.is_head else "worker"
        where = station.host + (f":{station.port}" if station.port else "")
        self.border_title = f"{station.name} · rank {station.rank} · {role}"
        self.border_subtitle = where

    def compose(self) -> ComposeResult:
        yield Static("", classes="status")
        yield Static("", classes="gpu-error")
        yield Vertical(classes="gpus")
        yield Static("", classes="hostmem")
        yield Static("", classes="badges")
        yield ProcessList(classes="processes")
        if self.station.is_head:
            from console.ui.widgets.serving_panel import ServingPanel

            yield ServingPanel(classes="serving")
        yield LogPane(self.max_lines)

    def on_mount(self) -> None:
        self._render_status()

    def on_resize(self) -> None:
        """Short / roomy by the rows the pane has (the dashboard's grid decides them)."""
        short, roomy = self.size.height < SHORT_BELOW, self.size.height >= ROOMY_FROM
        if short != self.has_class("-short") or roomy != self.has_class("-roomy"):
            self.set_class(short, "-short")
            self.set_class(roomy, "-roomy")
            for panel in self.query("ServingPanel"):
                panel.set_max_lines(3 if short else None)  # type: ignore[attr-defined]

    def toggle_processes(self) -> bool:
        """Show or hide the GPU process list (the dashboard's ``p``); True when now shown."""
        procs = self.query_one(ProcessList)
        procs.toggle_class("-shown")
        self._render_processes()
        return procs.has_class("-shown")

    def _render_processes(self) -> None:
        procs = self.query_one(ProcessList)
        if procs.has_class("-shown"):
            procs.show(self.apps if self.apps_seen else None, self.gpus,
                       self.host_mem.total_mib if self.unified and self.host_mem else None)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    # -------------------------------------------------------------- updates

    @property
    def fingerprint(self) -> str | None:
        return getattr(self.host_key, "fingerprint", None)

    @_while_mounted
    def set_connection(self, msg: ConnectionState) -> None:
        self.conn_state, self.conn_detail = msg.state, msg.detail
        self.host_key, self.next_try_at = msg.host_key, msg.next_try_at
        if msg.last_sample_at is not None:
            self.last_sample_at = msg.last_sample_at
        down = msg.state in DOWN_STATES
        self.set_class(down, "-unreachable")
        # Last-known values stay on screen, dimmed, whenever they are not live.
        self.set_class(msg.state != "live" and self.last_sample_at is not None, "-stale")
        self._render_status()

    @_while_mounted
    def tick(self) -> None:
        """Once a second: ages and countdowns move while the station is not live."""
        if self.conn_state != "live":
            self._render_status()

    @_while_mounted
    def set_container(self, info: ContainerInfo) -> None:
        self.container = info
        self._render_status()

    @_while_mounted
    def set_engine(self, progress: EngineProgress) -> None:
        self.progress = progress
        self._render_status()

    @_while_mounted
    def set_badge(self, key: str, text: Text | str | None) -> None:
        """Summaries from other services (checks, diagnosis); ``None`` removes one."""
        if text is None:
            self.badges.pop(key, None)
        else:
            self.badges[key] = text if isinstance(text, Text) else Text(text)
        box = self.query_one(".badges", Static)
        box.update(Text("  ").join(self.badges.values()) if self.badges else "")
        box.display = bool(self.badges)  # no empty row where nothing is to be said (80x24 needs it)

    @_while_mounted
    def set_gpus(self, gpus: list[GpuReading], error: str | None = None, at: float | None = None) -> None:
        self.gpu_error = error
        err = self.query_one(".gpu-error", Static)
        err.set_class(error is not None, "-shown")
        err.update(Text(one_line(error, 300), style="bold red") if error else "")
        if error is not None and not gpus:  # nvidia-smi failed as a whole: keep the last readings, dimmed
            return
        self.gpus = gpus
        self.gpus_at = at  # when nvidia-smi was read (the history's time scale)
        # Our own list, not a DOM query: a mount still in flight must not look like "no meters".
        if [m.index for m in self.meters] != [g.index for g in gpus]:
            box = self.query_one(".gpus", Vertical)
            box.remove_children()
            self.meters = [GpuMeter(g.index, self.expected_frac if g.name == self.serving_gpu else None,
                                    classes="-serving" if self._serving(g, gpus) else "-display")
                           for g in gpus]
            box.mount(*self.meters)
        self._render_gpus()
        self._render_processes()

    def _serving(self, g: GpuReading, gpus: list[GpuReading]) -> bool:
        """A GPU the model runs on: the profile's GPU (every GPU when none is that one)."""
        return g.name == self.serving_gpu or not any(x.name == self.serving_gpu for x in gpus)

    @_while_mounted
    def set_apps(self, apps: list[ComputeApp]) -> None:
        self.apps, self.apps_seen = apps, True
        self._render_gpus()
        self._render_processes()

    @_while_mounted
    def set_host_mem(self, mem: HostMemory) -> None:
        self.host_mem = mem
        self.query_one(".hostmem", Static).update(HostMemLine(mem, self.unified))
        if self.unified:
            self._render_gpus()

    @_while_mounted
    def add_logs(self, lines: list[str]) -> None:
        self.log_pane.add_lines(lines)

    # -------------------------------------------------------------- rendering

    def _render_gpus(self) -> None:
        meters = {m.index: m for m in self.meters}
        for g in self.gpus:
            meter = meters.get(g.index)
            if meter is None:
                continue
            if not g.name:  # nvidia-smi could not read this GPU at all: what it printed, in red
                meter.update_error(g.error or "no reading", g.bus_id)
                continue
            used, total, note = g.memory_used_mib, g.memory_total_mib, ""
            if used is None:  # GB10: unified memory, nvidia-smi says [N/A]
                procs = [a.used_memory_mib for a in self.apps if a.gpu_uuid == g.uuid and a.used_memory_mib]
                used = float(sum(procs)) if procs else (0.0 if self.apps is not None else None)
                total = self.host_mem.total_mib if self.host_mem else None
                note = "unified"
            meter.update_reading(g.name, used, total, g.util_pct, g.temp_c, g.power_w, note, g.error,
                                 at=self.gpus_at)

    def _render_status(self) -> None:
        """Whole pieces packed into the pane's width, then what must keep its start (the fatal
        line, clipped to two lines) and the start-up timeline."""
        icon, style = CONN_STYLE.get(self.conn_state, ("?", "white"))
        now = clock.now()
        state = Text(f"{icon} {self.conn_state}", style=style)
        pieces = [state]
        after: list = []
        seen = self.last_sample_at
        if self.conn_state == "stale" and seen is not None:
            state.append(f" {_ago(now - seen)}", style=style)
            pieces.append(Text(f"values from {time.strftime('%H:%M:%S', time.localtime(seen))}", style="yellow"))
        elif self.conn_state in DOWN_STATES or self.conn_state == "connecting":
            if seen is not None and self.conn_state != "connecting":
                pieces.append(Text(f"last seen {time.strftime('%H:%M:%S', time.localtime(seen))} "
                                   f"({_ago(now - seen)} ago)", style="yellow"))
            elif self.conn_state != "connecting":
                pieces.append(Text("never seen", style="yellow"))
            if self.next_try_at is not None:
                wait = self.next_try_at - now
                pieces.append(Text(f"next try in {_ago(wait)}" if wait >= 1 else "trying again now", style="dim"))
        hk = self.host_key
        if self.conn_state == "host-key-unknown":
            offered = getattr(hk, "offered", None)
            after.append(Clipped(Text(f"host key unknown: {offered or '?'} — press T to review and trust",
                                      style="magenta"), 2))
        elif self.conn_state == "host-key-changed":
            known = ", ".join(str(k) for k in getattr(hk, "known", ()))
            after.append(Clipped(Text(f"HOST KEY CHANGED: known {known}, offered {getattr(hk, 'offered', None) or '?'}"
                                      " — press T to review", style="bold red"), 6))  # both keys, whole
        elif self.conn_state in ("unreachable", "error") and self.conn_detail:
            after.append(Clipped(Text(f"{one_line(self.conn_detail, 240)} (r: retry now)", style="red"), 2))
        if self.container:
            c = self.container
            cstyle = "green" if c.state == "running" else ("red" if c.exit_code not in (None, 0) else "dim")
            piece = Text.assemble(("container ", "dim"), (f"{self.station.container}: {c.state}", cstyle))
            if c.state == "exited" and c.exit_code is not None:
                piece.append(f" ({c.exit_code})", style=cstyle)
            pieces.append(piece)
        if self.progress and (self.container is None or self.container.state == "running"
                              or self.progress.phase == "failed"):
            p = self.progress
            label = p.label
            if not self.station.is_head and p.phase == "ready":
                label = "serving (worker)"
            pal = palette_of(self.app)
            pieces.append(Text.assemble(("engine ", "dim"), (label, pal.calm if p.phase in LOADING_PHASES
                                                              else PHASE_STYLE.get(p.phase, "white"))))
            tl, ts = TRANSPORT_LABEL[p.transport]
            if p.transport == "rdma" and not self.gpudirect:
                ts = pal.ok  # this pair has no GPUDirect: RDMA without it is what is expected
            pieces.append(Text.assemble(("NCCL ", "dim"), (tl, ts)))
            if p.fatal:
                after.append(Clipped(Text("✖ " + error_words(p.fatal), style="red"), 2))
            if p.timeline:
                line = timeline_line(p)
                line.no_wrap, line.overflow = True, "ellipsis"
                after.append(line)
        self.query_one(".status", Static).update(Packed(pieces, "   ", tuple(after)))
        self.set_class(self.progress is not None and self.progress.phase == "failed", "-failed")
