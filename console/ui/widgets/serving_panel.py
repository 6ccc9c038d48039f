"""Serving panel: API health, model, load, token rate, latency p50s, cache and MTP figures.

No I/O: ``ServingMonitor`` (console/serving/metrics.py) polls the API; its ``ServingUpdate``
(console/station/messages.py) goes into the head station's state, and the head's pane hands the
snapshot to ``show()`` and the engine phase to ``set_engine``. When the API stops answering the
last values stay, dimmed, with their age, so the operator sees what they were and how old they
are; a dash means unknown, never zero. Everything the server said (model id, version, error
bodies) is outside text: sanitized, one line, never markup. While the engine loads the API
cannot answer, and the panel says "starting (engine loading …)" in a calm colour instead of a
red "not answering". A value the server sent out of range shows as "invalid", never raw; a poll
that is late says how old the last answer is instead of a "● healthy" that is no longer known.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.durations import clock as mmss
from console.durations import span
from console.probes.engine_log import EngineProgress
from console.sanitize import one_line
from console.serving.metrics import MISSES_FOR_RED, ServingSnapshot, is_invalid
from console.station.messages import ServingUpdate as ServingUpdate  # its old home: re-exported
from console.station.verdict import Verdict
from console.ui import clock
from console.ui.engine_state import ApiExpectation, api_expectation
from console.ui.fit_text import pack
from console.ui.palette import DEFAULT, Palette, palette_of

STALE_AFTER_S = 10.0
LATE_AFTER_S = 10.0  # no finished poll for this long: the health shown is no longer known
INVALID_TEXT = "invalid"
_NAMES = {"running": "running", "waiting": "waiting", "kv_usage": "KV", "gen_throughput": "gen rate",
          "cache_hit_rate": "prefix hits", "spec_accept_length": "MTP length", "spec_accept_rate": "MTP accepted",
          "ttft": "TTFT", "itl": "ITL", "generation_tokens": "generated tokens", "prompt_tokens": "prompt tokens"}


def _num(x: float | None, fmt: str, unit: str = "") -> str:
    return "—" if x is None else INVALID_TEXT if is_invalid(x) else format(x, fmt) + unit


def _ms(x: float | None) -> str:
    if x is None:
        return "—"
    if is_invalid(x):
        return INVALID_TEXT
    return f"{x * 1000:,.0f} ms" if x >= 0.1 else f"{x * 1000:.1f} ms"


def _pct(x: float | None) -> str:
    return "—" if x is None else INVALID_TEXT if is_invalid(x) else f"{x * 100:.1f} %"


def _suffix(x: float | None, text: str) -> str:
    return text if x is not None and not is_invalid(x) else ""


def _short_miss(snap: ServingSnapshot) -> str:
    """The miss in a word for the health line ("refused", "timeout", "HTTP 503"); the foot says what it means."""
    return (snap.miss or "?").split(":")[0]


def stale_after(snap: ServingSnapshot) -> float:
    """A large /metrics is read seldom: its values are stale only after two of its periods."""
    return max(STALE_AFTER_S, 2 * (snap.metrics_every_s or 0.0))


def _status_health(snap: ServingSnapshot, pal: Palette) -> Text:
    """The health line as the last poll's status says it, before the engine phase, the progress
    verdict or a late poll may override it."""
    code = snap.http_status or 503
    return {
        "ok": Text("● healthy", style=pal.ok),
        "unhealthy": Text(f"● unhealthy ({code}{' redirect' if 300 <= code < 400 else ''})",
                          style=f"bold {pal.error}"),
        "unreachable": Text("● not answering" + (f" ({_short_miss(snap)})" if snap.miss else ""),
                            style=f"bold {pal.error}"),
        "unauthorized": Text("● API key refused", style=f"bold {pal.warn}"),
        # a miss of an API that answered is a warning until MISSES_FOR_RED in a row
        "missed": Text(f"◌ missed {snap.misses}/{MISSES_FOR_RED} ({_short_miss(snap)})",
                       style=f"bold {pal.warn}"),
    }.get(snap.status, Text("● unknown", style="dim"))


def _progress_health(health: Text, snap: ServingSnapshot, now: float, pal: Palette, off: str | None,
                     progress: Verdict | None) -> Text:
    """A /health 200 is not "healthy" while progress is not yet judged, nor ever while the progress
    judge raises an alarm (a wedged engine still answers /health)."""
    if progress is None or off is not None:
        return health
    if progress.judged_at is not None and snap.status == "ok":
        # a console opened on requests in flight: 200 is not "healthy" before a token is seen to move
        health = Text(f"◌ {snap.health_path} 200 · progress unknown (judged in {mmss(max(0.0, progress.judged_at - now))})",
                      style=f"bold {pal.warn}")
    if progress.alarm:  # /health 200 never reads healthy
        since = f" for {mmss(now - progress.since)}" if progress.since is not None else ""
        answer = f"{snap.health_path} 200 but " if snap.status == "ok" else ""
        health = Text(f"● {answer}{progress.state.upper()}{since}", style=f"bold {pal.error}")
    return health


def _engine_health(health: Text, snap: ServingSnapshot, engine: EngineProgress | None, pal: Palette,
                   off: str | None, expect: ApiExpectation, loading: bool) -> Text:
    """An API that cannot answer because its engine is loading, stopped or its container is off
    says so calmly instead of in red."""
    if loading:  # expected while the engine starts: calm, with the phase
        return Text(f"◌ starting (engine {engine.label})", style=pal.calm)  # type: ignore[union-attr]
    if off is not None:
        return Text(f"○ {one_line(off, 120)}", style="dim")
    if snap.status == "unreachable" and expect == "stopped":
        return Text("○ stopped (the engine is not running)", style="dim")
    return health


def _late_health(health: Text, snap: ServingSnapshot, now: float, pal: Palette, off: str | None) -> Text:
    """A late poll makes what it last said old news; "not answering" stays true, so it is kept."""
    poll_age = None if snap.polled_at is None else max(0.0, now - snap.polled_at)
    if poll_age is not None and poll_age > LATE_AFTER_S and snap.status != "unreachable" and off is None:
        return Text(f"◌ no answer for {span(poll_age)} (last: {health.plain.lstrip('●◌○ ')})",
                    style=f"bold {pal.warn}")
    return health


def _health_line(snap: ServingSnapshot, now: float, engine: EngineProgress | None, pal: Palette,
                 off: str | None, progress: Verdict | None, expect: ApiExpectation, loading: bool) -> Text:
    """The API line: the poll's status, then each override in order of precedence (progress,
    engine phase, late poll); the later one wins."""
    health = _status_health(snap, pal)
    health = _progress_health(health, snap, now, pal, off, progress)
    health = _engine_health(health, snap, engine, pal, off, expect, loading)
    return _late_health(health, snap, now, pal, off)


def _model_text(snap: ServingSnapshot) -> Text:
    """The model and the engine that serves it: server text, so one sanitized line."""
    engine_name = f"{snap.engine or '?'} {snap.version or ''}".strip()
    return Text(one_line(f"{snap.model or '—'} ({engine_name})", 200))


def _figure_rows(snap: ServingSnapshot, val: str) -> list[list[tuple[str, Text]]]:
    """The load, rate and latency pairs (``val``: their style, dim when stale); the MTP row only
    for an engine that reports speculative decoding."""
    rows = [
        [("Reqs", Text(f"{_num(snap.running, '.0f')} run · {_num(snap.waiting, '.0f')} wait", style=val)),
         ("KV", Text(_pct(snap.kv_usage), style=val))],
        [("Gen", Text(_num(snap.gen_tok_s, ",.1f", " tok/s"), style=val)),
         ("Prefix", Text(_pct(snap.prefix_hit_rate) + _suffix(snap.prefix_hit_rate, " hit"), style=val))],
        [("TTFT", Text(_ms(snap.ttft_p50_s) + _suffix(snap.ttft_p50_s, " p50"), style=val)),
         ("ITL", Text(_ms(snap.itl_p50_s) + _suffix(snap.itl_p50_s, " p50"), style=val))],
    ]
    if snap.spec_accept_rate is not None or snap.spec_mean_len is not None:
        rows.append([("MTP", Text(_pct(snap.spec_accept_rate) + _suffix(snap.spec_accept_rate, " accepted"),
                                  style=val)),
                     ("Len", Text(_num(snap.spec_mean_len, ".2f") + _suffix(snap.spec_mean_len, " tok/step"),
                                  style=val))])
    return rows


def _foot_line(snap: ServingSnapshot, now: float, pal: Palette, off: str | None, loading: bool,
               stale: bool) -> Text:
    """How fresh the figures are and why: off, loading, none yet, stale (with the error) or updated."""
    age = snap.age_s(now)
    error = one_line(snap.error, 300) if snap.error else None
    if off is not None:
        return Text(f"last figures from before the stop, {span(age)} ago" if age is not None
                    else "no figures from this container", style="dim")
    if loading:
        return Text("the API answers once the engine is ready" + (
            f"; last good poll {span(age)} ago" if age is not None else ""), style="dim")
    if age is None:
        return Text(f"no metrics yet{': ' + error if error else ''}", style=pal.warn)
    if stale:
        return Text(f"stale: last good poll {span(age)} ago" + (f" — {error}" if error else ""),
                    style=f"bold {pal.warn}")
    foot = Text(f"updated {span(age)} ago", style="dim")
    if snap.note:
        foot.append(f" — {one_line(snap.note, 300)}", style=pal.warn)
    return foot


def _append_foot_notes(foot: Text, snap: ServingSnapshot, pal: Palette) -> None:
    """What the foot adds whatever the freshness: the health check's miss, values out of range,
    and a large /metrics read seldom (so its figures age slower)."""
    if snap.miss:  # what the missed health check means (refused = down, timeout = hung or saturated)
        foot.append(f" — health check: {snap.miss}", style=pal.warn)
    if snap.invalid:
        names = ", ".join(_NAMES.get(k, k) for k in snap.invalid)
        foot.append(f" — out of range from the server: {names} (shown as invalid)", style=pal.warn)
    if snap.metrics_every_s and snap.metrics_size:
        foot.append(f" — /metrics is {snap.metrics_size / 2**20:.1f} MB: read every {span(snap.metrics_every_s)}",
                    style="dim")


def render_snapshot(snap: ServingSnapshot | None, now: float | None = None,
                    engine: EngineProgress | None = None, palette: Palette = DEFAULT,
                    max_lines: int | None = None, off: str | None = None,
                    progress: Verdict | None = None) -> ServingView:
    """The panel's content (pure: a snapshot, a clock and the head's engine phase in, a
    renderable out) that lays itself out for the width it gets: label/value pairs two per row
    when there is room, else packed whole into lines (a label is never cut to ``M…``).
    ``max_lines``: a small terminal's budget (the first rows: health, model, load, rate).
    ``off``: the head's container is not running (why, "container exited (0)"): nothing that
    answers on the port is its engine, so no live figure shows (the last ones, dimmed, with their age)."""
    now = clock.now() if now is None else now
    if snap is None:
        return ServingView([[("API", Text("waiting for the first poll…", style="dim"))]], None, max_lines)
    stale = snap.is_stale(now, stale_after(snap)) or off is not None
    expect = api_expectation(engine)
    loading = snap.status in ("unreachable", "unhealthy") and expect == "loading" and off is None
    health = _health_line(snap, now, engine, palette, off, progress, expect, loading)
    rows = [[("API", health), ("Model", _model_text(snap))], *_figure_rows(snap, "dim" if stale else "")]
    foot = _foot_line(snap, now, palette, off, loading, stale)
    _append_foot_notes(foot, snap, palette)
    return ServingView(rows, foot, max_lines)


GRID_MIN_WIDTH = 56  # below this, two label/value pairs per row would cut the labels


class ServingView:
    """Label/value pairs laid out for the width at render time."""

    def __init__(self, rows: list[list[tuple[str, Text]]], foot: Text | None, max_lines: int | None = None) -> None:
        self.rows, self.foot, self.max_lines = rows, foot, max_lines

    def __rich_console__(self, console, options):
        width = options.max_width
        if width >= GRID_MIN_WIDTH and self.max_lines is None:
            t = Table.grid(padding=(0, 1), expand=True)
            for _ in range(2):
                t.add_column(style="bold", no_wrap=True)
                t.add_column(no_wrap=True, overflow="ellipsis")
            for row in self.rows:
                cells: list[object] = []
                for label, value in row + [("", Text(""))] * (2 - len(row)):
                    cells += [label, value]
                t.add_row(*cells)
            yield t
            if self.foot is not None:
                yield self.foot
            return
        yield from self._packed(width)

    def _packed(self, width: int):
        """Whole pairs packed into lines ("Reqs 3 run · 1 wait  KV 23.5 %"); the API and model
        pairs each start a line; a value too long for the line ends in "…"."""
        pairs = [p for row in self.rows for p in row]
        lines = pack([Text.assemble((label, "bold"), " ", value) for label, value in pairs], width,
                     breaks=frozenset({1, 2}))
        budget = self.max_lines if self.max_lines is not None else len(lines) + 1
        if self.foot is not None and budget > len(lines):
            foot = self.foot.copy()
            foot.no_wrap, foot.overflow = True, "ellipsis"
            foot.truncate(width, overflow="ellipsis")
            lines.append(foot)
        yield from lines[:max(1, budget)]


class ServingPanel(Static):
    """Shows the latest ServingSnapshot; a 1 s timer only re-renders the age (no I/O)."""

    DEFAULT_CSS = """
    ServingPanel { height: auto; border: round $primary; padding: 0 1; }
    ServingPanel.-stale { border: round $warning; }
    ServingPanel.-down { border: round $error; }
    ServingPanel.-starting { border: round $secondary; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.snapshot: ServingSnapshot | None = None
        self.engine: EngineProgress | None = None  # the head station's engine phase
        self.max_lines: int | None = None  # a small terminal's budget of rows (None: all)
        self.off: str | None = None  # the head's container is not running: why (no live figures)
        self.progress: Verdict | None = None  # the service's progress: a wedge is never "healthy"
        self.border_title = "Serving"

    def set_max_lines(self, lines: int | None) -> None:
        if lines != self.max_lines:
            self.max_lines = lines
            self._redraw()

    def on_mount(self) -> None:
        self.set_interval(1.0, self._redraw)
        self._redraw()

    def show(self, snapshot: ServingSnapshot | None, off: str | None = None) -> None:
        """The head's serving figures as its state lets them show (``StationState.serving_shown``)
        and ``off``: why they are not live (``StationState.serving_off``)."""
        self.snapshot, self.off = snapshot, off
        self._redraw()

    def set_progress(self, verdict: Verdict | None) -> None:
        """The service's progress verdict (the dashboard's judge)."""
        if verdict != self.progress:
            self.progress = verdict
            self._redraw()

    def set_engine(self, progress: EngineProgress | None) -> None:
        self.engine = progress
        self._redraw()

    def _redraw(self) -> None:
        snap = self.snapshot
        now = clock.now()
        down = snap is not None and (snap.status in ("unhealthy", "unreachable") or (
            self.progress is not None and self.progress.alarm)) and self.off is None
        starting = self.off is not None or (down and api_expectation(self.engine) in ("loading", "stopped"))
        late = snap is not None and snap.polled_at is not None and now - snap.polled_at > LATE_AFTER_S
        self.set_class(snap is not None and (snap.is_stale(now, stale_after(snap)) or late)
                       and snap.updated_at is not None and not starting, "-stale")
        self.set_class(down and not starting, "-down")
        self.set_class(starting, "-starting")
        if snap is not None and snap.url:
            self.border_subtitle = Text(one_line(snap.url, 120))  # Text: a URL is never markup
        self.update(render_snapshot(snap, now, self.engine, palette_of(self.app), self.max_lines, self.off,
                                    self.progress), layout=False)
        self._relayout_if_taller_or_shorter()

    def _relayout_if_taller_or_shorter(self) -> None:
        """A new layout of the screen only when the panel's height changed: a redraw comes every second
        (the ages), and a layout re-arranges every widget (5-15 ms a time under a log flood)."""
        width, shown = self.content_size.width, self.content_size.height
        if not width or self.get_content_height(self.content_size, self.app.size, width) != shown:
            self.refresh(layout=True)
