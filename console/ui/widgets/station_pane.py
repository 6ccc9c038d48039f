"""One station: connection, GPUs (memory bar + history), host memory, container and engine
state, badges from checks and diagnosis, the GPU processes (``p``) and the container log.
Rendering only: the station's facts are its ``StationState`` (console/station/state.py), which
the app updates; ``show_state`` redraws the aspects that changed. The pane keeps only view state
(its layout classes, whether the process list is shown, the badges other services hand it or the
app's ``check_badges`` signal brings); its log view renders the state's log buffer
(``StationState.log``), the new lines on each ``LOGS`` change.

The pane fits what it shows to its size: its status is made of whole pieces ("engine serving
(worker)" never wraps mid-value) and the fatal line shows its start (the words that name the
error); a short pane (a small terminal, many stations) drops the history rows and the display
GPU and gives the serving box three rows, so the log keeps lines (a tiny one, 80x24 with four
stations: its first row, unframed, so the API's word is never cut off); a tall one plots the serving
GPU's memory and utilization over time."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from console.catalogue import known_bad
from console.config import Station
from console.durations import age, span
from console.durations import clock as clock_text
from console.probes.docker import parse_time
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.sanitize import one_line
from console.station.aspects import EVERY_ASPECT, Aspect
from console.station.health import health_lines
from console.station.state import Connection, StationState
from console.ui import clock
from console.ui.fit_text import Clipped, Packed, error_words
from console.ui.palette import TRANSPORT_STYLE, Palette, palette_of
from console.ui.shown_key import text_key
from console.ui.widgets.gpu_meter import GpuMeter, bar, fmt_gib
from console.ui.widgets.log_pane import LogPane
from console.ui.widgets.mounted import while_mounted
from console.ui.widgets.process_list import ProcessList
from console.ui.widgets.steady import Steady
from console.vocabulary import (
    LOADING_PHASES,
    TRANSPORT_SHORT,
    ConnState,
    ContainerState,
    EnginePhase,
    NcclTransport,
)

SHORT_BELOW = 30  # pane rows: below, one row per GPU and no display GPU (80x24, 8 stations)
TINY_BELOW = 14  # pane rows: below, the serving box loses its frame and keeps its first row, the API (80x24, 4 stations)
ROOMY_FROM = 44  # pane rows: from here the serving GPU's history is a plot (200x50, two stations)

CONN_STYLE: dict[ConnState, tuple[str, str]] = {
    ConnState.CONNECTING: ("◌", "yellow"),
    ConnState.LIVE: ("●", "green"),
    ConnState.STALE: ("◐", "bold yellow"),
    ConnState.UNREACHABLE: ("✖", "bold red"),
    ConnState.HOST_KEY_UNKNOWN: ("⚠", "bold magenta"),
    ConnState.HOST_KEY_CHANGED: ("✖", "bold red"),
    ConnState.ERROR: ("✖", "bold red"),
}
# Every loading phase is the theme's calm colour where it is drawn; these are the rest's.
PHASE_STYLE: dict[EnginePhase, str] = {EnginePhase.READY: "bold green", EnginePhase.FAILED: "bold red",
                                       EnginePhase.STOPPED: "dim", **{p: "yellow" for p in LOADING_PHASES}}
HEALTH_ASPECTS = frozenset({Aspect.HEALTH, Aspect.RAILS, Aspect.KERNEL, Aspect.CONTAINER, Aspect.CONN})
TRANSPORT_LABEL = {t: (TRANSPORT_SHORT[t], TRANSPORT_STYLE[t]) for t in NcclTransport}


TIMELINE_SHORT = {"engine-up": "engine up", "nccl-init": "NCCL init", "weights-start": "loading",
                  "weights-end": "weights", "kv-cache": "KV", "cuda-graphs": "graphs"}


def timeline_line(p: EngineProgress, now: float | None = None, container_started: float | None = None) -> Text:
    """The start-up so far in one line: the engine's own figures per phase reached, the latest
    phase, and the time since the first event ("start-up +4:07 weights 218.00 GiB in 239.4 s · ...").
    While the engine is still coming up (``now`` given), the clock runs to now and the phase it is in
    says how long it has been there ("NCCL init 0:45"): a start-up waiting in one phase is seen to wait,
    not frozen at "+0:00"."""
    evs = [e for e in p.timeline if e.event in TIMELINE_SHORT]
    if not evs:
        return Text()
    running = now is not None and p.phase in LOADING_PHASES
    end = max(now, evs[-1].at) if running and now is not None else evs[-1].at
    if p.attached:  # the run's start was never read: no start-up clock to give, only what was seen
        up = "" if container_started is None or now is None else \
            f", container up {span(max(0.0, now - container_started))}"
        t = Text(f"attached (start not seen{up}) ", style="dim")
        running = False
    else:
        t = Text(f"start-up +{clock_text(int(end - evs[0].at))} ", style="dim")
    shown = [e for e in evs if e.detail] + ([evs[-1]] if not evs[-1].detail else [])
    for i, ev in enumerate(shown):
        if i:
            t.append(" · ", style="dim")
        t.append(TIMELINE_SHORT[ev.event], style="bold")
        if ev.detail:
            t.append(f" {ev.detail}")
    if running and not evs[-1].detail:  # in that phase since its event
        t.append(f" {clock_text(int(end - evs[-1].at))}", style="dim")
    if p.phase == EnginePhase.FAILED:  # the last phase reached is where it stopped, not where it is
        t.append(" → failed", style="bold red")
    return t


def old_label(age_s: float | None) -> Text:
    """`` (12 s old)``: how old a dimmed value is."""
    return Text(f" ({age(age_s)} old)", style="dim") if age_s is not None else Text()



def nccl_build_warning(p: EngineProgress) -> str | None:
    """One line when the NCCL this run loaded is a known-bad build, else None."""
    bad = known_bad(p.nccl_version)
    if bad is None:
        return None
    return f"⚠ NCCL {p.nccl_version} loaded: known bad ({bad.short}, {bad.cite}); fix: {bad.fix}"


def _retry_pieces(conn: Connection, now: float) -> list[Text]:
    """A station down or connecting: when it was last seen (or never) and when the next try is."""
    pieces: list[Text] = []
    seen = conn.last_sample_at
    if seen is not None and conn.state != ConnState.CONNECTING:
        pieces.append(Text(f"last seen {time.strftime('%H:%M:%S', time.localtime(seen))} "
                           f"({age(now - seen)} ago)", style="yellow"))
    elif conn.state != ConnState.CONNECTING:
        pieces.append(Text("never seen", style="yellow"))
    if conn.next_try_at is not None:
        wait = conn.next_try_at - now
        pieces.append(Text(f"next try in {age(wait)}" if wait >= 1 else "trying again now", style="dim"))
    return pieces


def _connection_pieces(s: StationState, now: float) -> tuple[list[Text], list]:
    """The connection's state word first, then how old its values are or when it retries; a
    single late source says why below the pieces instead (its reason keeps its start)."""
    conn = s.conn
    icon, style = CONN_STYLE.get(conn.state, ("?", "white"))
    state = Text(f"{icon} {conn.state}", style=style)
    pieces = [state]
    after: list = []
    seen = conn.last_sample_at
    if conn.state == ConnState.STALE and conn.late is not None:  # one source late, the rest answers
        after.append(Clipped(Text(s.why(now) or "", style="yellow"), 2))
    elif conn.state == ConnState.STALE and seen is not None:
        state.append(f" {age(now - seen)}", style=style)
        pieces.append(Text(f"values from {time.strftime('%H:%M:%S', time.localtime(seen))}", style="yellow"))
    elif conn.down or conn.state == ConnState.CONNECTING:
        pieces += _retry_pieces(conn, now)
    return pieces, after


def _connection_note(conn: Connection) -> Clipped | None:
    """What the operator must decide or know about the connection, drawn whole below the pieces:
    a host key to trust or that changed (both keys in full), or why it failed."""
    hk = conn.host_key
    if conn.state == ConnState.HOST_KEY_UNKNOWN:
        offered = getattr(hk, "offered", None)
        return Clipped(Text(f"host key unknown: {offered or '?'} — press T to review and trust",
                            style="magenta"), 2)
    if conn.state == ConnState.HOST_KEY_CHANGED and getattr(hk, "revoked", False):
        return Clipped(Text(f"HOST KEY REVOKED: {getattr(hk, 'offered', None) or '?'} is @revoked in "
                            "known_hosts — refused", style="bold red"), 6)
    if conn.state == ConnState.HOST_KEY_CHANGED:
        known = ", ".join(str(k) for k in getattr(hk, "known", ()))
        return Clipped(Text(f"HOST KEY CHANGED: known {known}, offered {getattr(hk, 'offered', None) or '?'}"
                            " — press T to review", style="bold red"), 6)  # both keys, whole
    if conn.state in (ConnState.UNREACHABLE, ConnState.ERROR) and conn.detail:
        return Clipped(Text(f"{one_line(conn.detail, 240)} (r: retry now)", style="red"), 2)
    return None


def _container_piece(s: StationState, now: float, old: bool) -> Text | None:
    """``container NAME: running`` coloured by state (an exit code that is not 0 in red); ``old``:
    the station is not live, so the word is dimmed with its age."""
    if not (c := s.container):
        return None
    cstyle = "green" if c.state == ContainerState.RUNNING else ("red" if c.exit_code not in (None, 0) else "dim")
    cstyle = "dim" if old else cstyle
    piece = Text.assemble(("container ", "dim"), (f"{s.container_name}: {c.state}", cstyle))
    if c.state == ContainerState.EXITED and c.exit_code is not None:
        piece.append(f" ({c.exit_code})", style=cstyle)
    if old:
        piece.append_text(old_label(s.value_age(Aspect.CONTAINER, now)))
    return piece


def _engine_piece(s: StationState, p: EngineProgress, now: float, old: bool, pal: Palette) -> Text:
    """``engine PHASE``: a loading phase in the theme's calm colour; dimmed with its age when old."""
    estyle = pal.calm if p.phase in LOADING_PHASES else PHASE_STYLE.get(p.phase, "white")
    piece = Text.assemble(("engine ", "dim"), (s.engine_label, "dim" if old else estyle))
    if old:
        piece.append_text(old_label(s.value_age(Aspect.ENGINE, now)))
    return piece


def _nccl_piece(p: EngineProgress, old: bool, pal: Palette, gpudirect: bool) -> Text:
    """``NCCL TRANSPORT``; RDMA is calm on a pair that has no GPUDirect (it is what is expected there)."""
    tl, ts = TRANSPORT_LABEL[p.transport]
    if p.transport == NcclTransport.RDMA and not gpudirect:
        ts = pal.ok  # this pair has no GPUDirect: RDMA without it is what is expected
    return Text.assemble(("NCCL ", "dim"), (tl, "dim" if old else ts))


def _engine_after(s: StationState, p: EngineProgress, now: float, old: bool) -> list:
    """What must keep its start below the pieces: every fatal line of the run, a known-bad NCCL
    build, and the start-up timeline (one line, cut at the pane's edge)."""
    after: list = []
    for fatal in p.fatal_lines or ((p.fatal,) if p.fatal else ()):  # every fatal line of the run
        after.append(Clipped(Text("✖ " + error_words(fatal), style="red"), 2))
    if bad := nccl_build_warning(p):  # the NCCL this rank loaded is a known-bad build
        after.append(Clipped(Text(bad, style="dim" if old else "bold yellow"), 2))
    if p.timeline:
        c = s.container
        line = timeline_line(p, now, parse_time(c.started_at) if c is not None and c.started_at else None)
        line.no_wrap, line.overflow = True, "ellipsis"
        after.append(line)
    return after


class HostMemLine:
    """``host mem ███░░ 24.3/496.0 GiB``: the bar gives way so the figures always show;
    ``stale_age``: the reading is old (dimmed, with its age)."""

    def __init__(self, mem: HostMemory, unified: bool, stale_age: float | None = None) -> None:
        self.mem, self.unified, self.stale_age = mem, unified, stale_age

    def shown_key(self) -> tuple:
        return ("hostmem", self.mem, self.unified, None if self.stale_age is None else old_label(self.stale_age).plain)

    def __rich_console__(self, console, options):
        mem = self.mem
        frac = mem.used_mib / mem.total_mib if mem.total_mib else None
        figures = Text(f" {fmt_gib(mem.used_mib)}/{fmt_gib(mem.total_mib)} GiB")
        if self.stale_age is not None:
            figures.append_text(old_label(self.stale_age))
        note = Text("  (unified with GPU)", style="dim") if self.unified else Text()
        room = options.max_width - len("host mem ") - figures.cell_len
        if room - note.cell_len >= 8:
            room -= note.cell_len
        else:
            note = Text()
        line = Text("host mem ") + bar(frac, max(4, min(24, room))) + figures + note
        if self.stale_age is not None:
            line.stylize("dim")
        line.no_wrap, line.overflow = True, "ellipsis"
        line.truncate(options.max_width, overflow="ellipsis")
        yield line


class OneRowEach:
    """Lines drawn one row each, cut with an ellipsis at the pane's edge (their start says what they
    are): the health box and the rail strip."""

    def __init__(self, lines: list[Text]) -> None:
        self.lines = lines

    def shown_key(self) -> tuple:
        return ("rows", *(text_key(line) for line in self.lines))

    def __rich_console__(self, console, options):
        for line in self.lines:
            line = line.copy()
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
    StationPane .health { height: auto; display: none; }
    StationPane .rails { height: 1; display: none; }
    StationPane.-health-error { border: round $error; }
    StationPane .badges { height: auto; display: none; }
    StationPane .gpu-error { height: auto; display: none; }
    StationPane .gpu-error.-shown { display: block; }
    StationPane.-stale .gpus, StationPane.-stale .hostmem { text-opacity: 55%; }
    StationPane GpuMeter.-display { height: 2; }
    StationPane GpuMeter.-display .gpu-hist { display: none; }
    StationPane.-short GpuMeter { height: 2; }
    StationPane.-short GpuMeter .gpu-hist { display: none; }
    StationPane.-short GpuMeter.-display { display: none; }
    StationPane.-short GpuMeter.-display.-error { display: block; }
    StationPane.-tiny ServingPanel { border: none; padding: 0; }
    StationPane.-roomy GpuMeter.-serving { height: auto; }
    StationPane.-roomy GpuMeter.-serving .gpu-hist { display: none; }
    StationPane.-roomy GpuMeter.-serving .gpu-plot { display: block; }
    """

    def __init__(self, station: Station, state: StationState, unified: bool = False,
                 engine: str = "vllm", gpudirect: bool = True, serving_gpu: str | None = None,
                 expected_frac: float | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gpudirect = gpudirect  # the profile expects GPUDirect RDMA (GB10 pairs do not: RDMA is calm)
        self.serving_gpu, self.expected_frac = serving_gpu, expected_frac  # its expected memory fill
        self.station = station
        self.state = state  # the app's, for this station: read, never written here
        self.unified = unified  # the profile's GPU shares the host's memory (GB10)
        self.engine = engine
        self.badges: dict[str, Text] = {}
        self.meters: list[GpuMeter] = []
        self._old: frozenset[Aspect] = frozenset()  # the sources drawn dimmed (old) at the last look
        role = "API host" if station.is_head else "worker"
        where = station.host + (f":{station.port}" if station.port else "")
        self.border_title = f"{station.name} · rank {station.rank} · {role}"
        self.border_subtitle = where

    def compose(self) -> ComposeResult:
        yield Steady("", classes="status")
        yield Steady("", classes="gpu-error")
        yield Vertical(classes="gpus")
        yield Steady("", classes="health")  # GPU flags and Xids, only when they say something
        yield Steady("", classes="hostmem")
        yield Steady("", classes="rails")  # the rail strip
        yield Static("", classes="badges")
        yield ProcessList(classes="processes")
        if self.station.is_head:
            from console.ui.widgets.serving_panel import ServingPanel

            yield ServingPanel(classes="serving")
        yield LogPane(self.state.log)

    def on_mount(self) -> None:
        self._show(EVERY_ASPECT)  # what the state already holds
        badges = getattr(self.app, "check_badges", None)  # the app's signal (ConsoleApp): the checks' verdicts
        if badges is not None:
            badges.subscribe(self, self._checks_badge)

    def _checks_badge(self, badges: dict[str, Text]) -> None:
        """A checks pass ended or this station's connection outdated it: this station's badge, if named."""
        if (badge := badges.get(self.station.name)) is not None:
            self.set_badge("checks", badge)

    def on_resize(self) -> None:
        """Short / roomy by the rows the pane has (the dashboard's grid decides them)."""
        h = self.size.height
        short, roomy, tiny = h < SHORT_BELOW, h >= ROOMY_FROM, h < TINY_BELOW
        if (short, roomy, tiny) != (self.has_class("-short"), self.has_class("-roomy"), self.has_class("-tiny")):
            self.set_class(short, "-short")
            self.set_class(roomy, "-roomy")
            self.set_class(tiny, "-tiny")  # a frame would take the rows its API line needs
            for panel in self.query("ServingPanel"):
                panel.set_max_lines(1 if tiny else 3 if short else None)  # type: ignore[attr-defined]

    def toggle_processes(self) -> bool:
        """Show or hide the GPU process list (the dashboard's ``p``); True when now shown."""
        procs = self.query_one(ProcessList)
        procs.toggle_class("-shown")
        self._render_processes()
        return procs.has_class("-shown")

    def _render_processes(self) -> None:
        procs = self.query_one(ProcessList)
        if procs.has_class("-shown"):
            s = self.state
            procs.show(s.apps if s.apps_seen else None, s.gpus,
                       s.host_mem.total_mib if self.unified and s.host_mem else None)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    # -------------------------------------------------------------- the state, read

    @property
    def conn_state(self) -> ConnState:
        return self.state.conn.state

    @property
    def host_key(self) -> object | None:
        """The HostKeyError of a host-key state."""
        return self.state.conn.host_key

    @property
    def fingerprint(self) -> str | None:
        return self.state.conn.fingerprint

    @property
    def progress(self) -> EngineProgress | None:
        return self.state.engine

    # -------------------------------------------------------------- updates

    @while_mounted
    def show_state(self, aspects: frozenset[Aspect] = EVERY_ASPECT) -> None:
        """Redraw what these aspects of the station's state show (the app calls it after each
        message it applied)."""
        self._show(aspects)

    def _show(self, aspects: frozenset[Aspect]) -> None:
        s = self.state
        if Aspect.CONN in aspects:
            self.set_class(s.conn.down, "-unreachable")
            # Last-known values stay on screen, dimmed, whenever they are not live.
            self.set_class(s.values_stale, "-stale")
            aspects = aspects | {Aspect.GPUS, Aspect.HOSTMEM}  # whether they are old follows the connection
        if Aspect.GPUS in aspects:
            err = self.query_one(".gpu-error", Steady)
            err.set_class(s.gpu_error is not None, "-shown")
            err.show(Text(one_line(s.gpu_error, 300), style="bold red") if s.gpu_error else "")
            self._sync_meters()
        if aspects & {Aspect.GPUS, Aspect.MEMORY}:
            self._render_gpus()
        if Aspect.HOSTMEM in aspects and s.host_mem is not None:
            now = clock.now()
            old = s.stale(Aspect.HOSTMEM, now)
            self._mark_old(Aspect.HOSTMEM, old)
            self.query_one(".hostmem", Steady).show(
                HostMemLine(s.host_mem, self.unified, s.value_age(Aspect.HOSTMEM, now) if old else None))
        if aspects & {Aspect.GPUS, Aspect.APPS}:
            self._render_processes()
        if aspects & {Aspect.ENGINE, Aspect.SERVING, Aspect.CONTAINER} and self.station.is_head:
            for panel in self.query("ServingPanel"):
                if Aspect.ENGINE in aspects:
                    panel.set_engine(s.engine)  # type: ignore[attr-defined]
                if aspects & {Aspect.SERVING, Aspect.CONTAINER} and s.serving is not None:
                    panel.show(s.serving_shown, s.serving_off)  # type: ignore[attr-defined]
        if aspects & {Aspect.CONN, Aspect.CONTAINER, Aspect.ENGINE}:
            self._render_status()
        if aspects & HEALTH_ASPECTS:
            self._render_health()
        if Aspect.LOGS in aspects:
            self.log_pane.show_new_lines()

    def _mark_old(self, aspect: Aspect, old: bool) -> None:
        self._old = (self._old - {aspect}) | ({aspect} if old else frozenset())

    @while_mounted
    def tick(self) -> None:
        """Once a second: ages and countdowns move while the station is not live, a source that
        turned late (or old values' ages) is drawn again, whatever the other sources do, and the
        start-up clock moves while the engine is coming up."""
        s, now = self.state, clock.now()
        old = frozenset(a for a in (Aspect.GPUS, Aspect.HOSTMEM, Aspect.HEALTH, Aspect.RAILS) if s.stale(a, now))
        redraw = old | (old ^ self._old)
        if any(v.up is False for v in s.rails.views.values()):  # "✖ down 12 s" counts up
            redraw |= {Aspect.RAILS}
        if redraw:
            self._show(frozenset(redraw))
        e = s.engine
        if not s.conn.live or redraw or (e is not None and e.timeline and e.phase in LOADING_PHASES):
            self._render_status()

    @while_mounted
    def set_badge(self, key: str, text: Text | str | None) -> None:
        """Summaries from other services (checks, diagnosis); ``None`` removes one."""
        if text is None:
            self.badges.pop(key, None)
        else:
            self.badges[key] = text if isinstance(text, Text) else Text(text)
        box = self.query_one(".badges", Static)
        box.update(Text("  ").join(self.badges.values()) if self.badges else "")
        box.display = bool(self.badges)  # no empty row where nothing is to be said (80x24 needs it)

    def _sync_meters(self) -> None:
        """One meter per GPU held; new ones when the GPUs are other GPUs."""
        gpus = self.state.gpus
        # Our own list, not a DOM query: a mount still in flight must not look like "no meters".
        if [m.index for m in self.meters] != [g.index for g in gpus]:
            box = self.query_one(".gpus", Vertical)
            box.remove_children()
            serving = {g.index for g in self.state.serving_gpus(self.serving_gpu)}
            self.meters = [GpuMeter(g.index, self.expected_frac if g.name == self.serving_gpu else None,
                                    classes="-serving" if g.index in serving else "-display")
                           for g in gpus]
            box.mount(*self.meters)

    # -------------------------------------------------------------- rendering

    def _render_gpus(self) -> None:
        s = self.state
        now = clock.now()
        stale_age = s.value_age(Aspect.GPUS, now) if s.stale(Aspect.GPUS, now) else None
        self._mark_old(Aspect.GPUS, stale_age is not None)
        meters = {m.index: m for m in self.meters}
        for g in s.gpus:
            meter, memory = meters.get(g.index), s.memory.get(g.index)
            if meter is not None:
                meter.set_class(g.error is not None, "-error")  # a GPU in error is never hidden for room
            if meter is not None and memory is not None:
                meter.show(g, memory, s.traces.get(g.index), stale_age)

    # GPU and fabric health
    def _render_health(self) -> None:
        """The health box (each GPU flag, this run's Xids; hidden when all is well) and the rail strip
        (one line per rail), dimmed with their age when their source is late."""
        s, now = self.state, clock.now()
        box = self.query_one(".health", Steady)
        old = s.stale(Aspect.HEALTH, now)
        self._mark_old(Aspect.HEALTH, old)
        lines = health_lines(s)
        most = 2 if self.has_class("-short") else 4  # a short pane keeps its log lines
        rows = []
        for h in lines[:most]:
            rows.append(Text(f"{h.icon} {one_line(h.text, 200)}", style="dim" if old else
                             ("bold red" if h.level == "error" else "yellow")))
        if len(lines) > most:
            rows[-1].append(f"  (+{len(lines) - most} more)", style="dim")
        if rows and old:
            rows[-1].append_text(old_label(s.value_age(Aspect.HEALTH, now)))
        box.show(OneRowEach(rows))
        box.display = bool(rows)
        # an Xid, uncorrected ECC, HW slowdown or a rail down: the pane's border says it from afar
        self.set_class(not old and s.health_level() == "error", "-health-error")
        strip = self.query_one(".rails", Steady)
        views = list(s.rails.views.values())
        old = s.stale(Aspect.RAILS, now)
        self._mark_old(Aspect.RAILS, old)
        width = self.content_size.width or 80
        rows = []
        for v in views:
            style = "dim" if old else {"error": "bold red", "warn": "yellow"}.get(v.level or "", "")
            words = v.words(now)
            row = Text("rail ", style="dim")
            if len(views) > 1 or len(f"rail {v.netdev} {words}") <= width:  # one rail: its name can go
                row.append(one_line(v.netdev, 40) + " ", style="dim" if old else "bold")
            row.append(words, style=style)
            if old:
                row.append_text(old_label(s.value_age(Aspect.RAILS, now)))
            rows.append(row)
        strip.show(OneRowEach(rows))
        strip.styles.height = max(1, len(rows))
        strip.display = bool(rows)

    def _render_status(self) -> None:
        """Whole pieces packed into the pane's width, then what must keep its start (the fatal
        line, clipped to two lines) and the start-up timeline."""
        s = self.state
        now = clock.now()
        pieces, after = _connection_pieces(s, now)
        if (note := _connection_note(s.conn)) is not None:
            after.append(note)
        # a station not live as a whole: what its container and engine last said is old (dimmed, with its age)
        old = s.values_stale
        if (container := _container_piece(s, now, old)) is not None:
            pieces.append(container)
        if s.engine_shown:
            p = s.engine
            assert p is not None
            pal = palette_of(self.app)
            pieces += [_engine_piece(s, p, now, old, pal), _nccl_piece(p, old, pal, self.gpudirect)]
            after += _engine_after(s, p, now, old)
        self.query_one(".status", Steady).show(Packed(pieces, "   ", tuple(after)))
        self.set_class(s.engine_failed, "-failed")
