"""An incident bundle's window replayed on screen (from the ledger: ``p`` on the Incidents screen).

The window (``window.ndjson``) is played back through the same station state and judge as
``dgx-console replay --json`` (console/incidents/replay.py): one frame a second of the window's time,
each station's progress verdict, its why, GPUs, container and engine as they were, and the head's
requests and token counter from its API poll. A REPLAY strip on top says, always, that this is a
replay, of which incident, when it began and which moment is shown, and the keys: ←/→ a second,
⇧←/⇧→ 30 s, Home/End, ``i`` the incident's start, space to play or pause, +/- the speed, Esc to
leave. The bundle is read and the frames judged in a thread; the screen only shows them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Header, Static

from console.errors import UsageError
from console.incidents.replay import read_window, replay_lines
from console.sanitize import one_line
from console.ui.widgets.fitted_footer import FittedFooter

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0)
SCRUB_S = 30
KEYS = "←/→ 1 s · ⇧←/⇧→ 30 s · Home/End · i incident start · space play/pause · +/- speed · Esc leave"


@dataclass(frozen=True)
class Frame:
    t: float
    stations: tuple[dict[str, Any], ...]  # watch --json objects with the progress keys, one per station
    serving: dict[str, Any] | None  # the head's last API poll at or before t (None: none yet)


def build_frames(samples: list[dict[str, Any]], window_s: float, interval: float = 1.0) -> list[Frame]:
    """The window's frames, one per ``interval`` s (sync: run it in a thread)."""
    serving = [s for s in samples if s.get("kind") == "serving"]
    times = [float(s["t"]) for s in serving]
    by_t: dict[float, list[dict[str, Any]]] = {}
    for obj in replay_lines(samples, window_s, interval):
        by_t.setdefault(obj["t"], []).append(obj)
    out = []
    for t, objs in by_t.items():
        i = bisect.bisect_right(times, t)
        out.append(Frame(t, tuple(objs), serving[i - 1] if i else None))
    return out


def utc(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _offset(t: float, start: float | None) -> str:
    if start is None:
        return ""
    d = int(round(t - start))
    sign = "-" if d < 0 else "+"
    return f" ({sign}{abs(d) // 60}:{abs(d) % 60:02d} from the incident's start)"


def _num(x: Any, fmt: str = "{:g}", none: str = "-") -> str:
    return none if not isinstance(x, (int, float)) else fmt.format(x)  # (finite: the bundle's reader)


def _gpus(obj: dict[str, Any]) -> str:
    parts = []
    for g in obj.get("gpus") or ():
        if isinstance(g, dict):
            parts.append(f"GPU{_num(g.get('index'))} {_num(g.get('util_pct'), '{:g}%', '?')} "
                         f"{_num(g.get('power_w'), '{:.0f} W', '? W')}")
    return one_line(", ".join(parts) or "no reading", 80)


class ReplayScreen(Screen):
    DEFAULT_CSS = """
    ReplayScreen #replay-strip { height: auto; background: $warning; color: $text; padding: 0 1; text-style: bold; }
    ReplayScreen #replay-table { height: auto; max-height: 12; }
    ReplayScreen #replay-serving { height: auto; padding: 0 1; }
    ReplayScreen #replay-why { height: 1fr; border: round $primary; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "leave", "Leave replay", id="replay-leave"),
        Binding("left", "step(-1)", "-1 s", id="replay-back", tooltip="One second back"),
        Binding("right", "step(1)", "+1 s", id="replay-forward", tooltip="One second on"),
        Binding("shift+left", f"step(-{SCRUB_S})", f"-{SCRUB_S} s", id="replay-scrub-back"),
        Binding("shift+right", f"step({SCRUB_S})", f"+{SCRUB_S} s", id="replay-scrub-forward"),
        Binding("home", "jump('first')", "Start", id="replay-first", show=False),
        Binding("end", "jump('last')", "End", id="replay-last", show=False),
        Binding("i", "jump('incident')", "Incident start", id="replay-incident"),
        Binding("space", "play", "Play/pause", id="replay-play"),
        Binding("plus,equals_sign", "speed(1)", "Faster", id="replay-faster", show=False),
        Binding("minus", "speed(-1)", "Slower", id="replay-slower", show=False),
    ]

    def __init__(self, bundle: str, window_s: float = 30.0, incident_id: int | None = None) -> None:
        super().__init__()
        self.bundle, self.window_s, self.incident_id = bundle, window_s, incident_id
        self.frames: list[Frame] = []
        self.index = 0
        self.incident: dict[str, Any] = {}
        self.playing = False
        self.speed = 0
        self.error: str | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)  # the moment shown is the strip's; a running clock beside it would mislead
        yield Static(Text(f"REPLAY · reading {one_line(self.bundle, 200)} …"), id="replay-strip")
        table: DataTable = DataTable(id="replay-table", cursor_type="row", zebra_stripes=True)
        table.can_focus = False  # the arrows, Home and End are the replay's, never the table's
        yield table
        yield Static("", id="replay-serving")
        yield Static("", id="replay-why")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("Station", "Progress", "Since", "GPUs", "Container", "Engine", "Stale")
        self._load()

    @work(thread=True, exclusive=True)
    def _load(self) -> None:
        try:
            samples, incident = read_window(self.bundle)
            frames = build_frames(samples, self.window_s)
            err = None if frames else "the bundle's window holds no sample"
        except UsageError as exc:
            frames, incident, err = [], {}, str(exc)
        self.app.call_from_thread(self._loaded, frames, incident, err)

    def _loaded(self, frames: list[Frame], incident: dict[str, Any], err: str | None) -> None:
        if not self.is_attached:  # left before the bundle was read
            return
        self.frames, self.incident, self.error = frames, incident, err
        self.index = self._incident_index()
        self._show()

    @property
    def start(self) -> float | None:
        s = self.incident.get("start")
        return float(s) if isinstance(s, (int, float)) else None

    def _incident_index(self) -> int:
        if not self.frames or self.start is None:
            return 0
        times = [f.t for f in self.frames]
        i = min(bisect.bisect_left(times, self.start), len(times) - 1)
        return i - 1 if i > 0 and abs(times[i - 1] - self.start) < abs(times[i] - self.start) else i

    # ------------------------------------------------------------------ keys

    def action_leave(self) -> None:
        self._stop()
        if len(self.app.screen_stack) <= 1:  # the replay app's only screen (dgx-console replay BUNDLE)
            self.app.exit()
        else:
            self.app.pop_screen()

    def action_step(self, n: int) -> None:
        if self.frames:
            self.index = max(0, min(len(self.frames) - 1, self.index + int(n)))
            self._show()

    def action_jump(self, where: str) -> None:
        if self.frames:
            self.index = {"first": 0, "last": len(self.frames) - 1}.get(where, self._incident_index())
            self._show()

    def action_play(self) -> None:
        if self.playing:
            self._stop()
        elif self.frames:
            if self.index >= len(self.frames) - 1:
                self.index = 0
            self.playing = True
            self._timer = self.set_interval(1.0 / SPEEDS[self.speed], self._tick)
        self._show()

    def action_speed(self, d: int) -> None:
        self.speed = max(0, min(len(SPEEDS) - 1, self.speed + int(d)))
        if self.playing:
            self._stop()
            self.action_play()
        else:
            self._show()

    def _stop(self) -> None:
        self.playing = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _tick(self) -> None:
        if self.index >= len(self.frames) - 1:
            self._stop()
        else:
            self.index += 1
        self._show()

    # ------------------------------------------------------------------ showing

    def strip_text(self) -> str:
        inc = self.incident
        what = f"incident {inc.get('id', self.incident_id or '?')} ({one_line(str(inc.get('kind', '?')), 40)})"
        if self.error:
            return f"REPLAY · {what} · not replayed: {one_line(self.error, 300)} · Esc leave"
        if not self.frames:
            return f"REPLAY · {what} · reading the bundle …"
        f = self.frames[self.index]
        mode = f"playing {SPEEDS[self.speed]:g}×" if self.playing else f"paused (speed {SPEEDS[self.speed]:g}×)"
        return (f"REPLAY, NOT LIVE · {what} began {utc(self.start)} · showing {utc(f.t)}{_offset(f.t, self.start)} · "
                f"{self.index + 1}/{len(self.frames)} · {mode} · {KEYS}")

    def _show(self) -> None:
        self.query_one("#replay-strip", Static).update(Text(self.strip_text()))
        table = self.query_one(DataTable)
        table.clear()
        if not self.frames:
            return
        f = self.frames[self.index]
        for o in f.stations:
            c, e = o.get("container") or {}, o.get("engine") or {}
            table.add_row(Text(one_line(str(o.get("station")), 20)), Text(one_line(str(o.get("progress")), 20)),
                          Text(_num(o.get("progress_since_s"), "{:.0f} s")), Text(_gpus(o)),
                          Text(one_line(str(c.get("state") or "-"), 20)), Text(one_line(str(e.get("phase") or "-"), 40)),
                          Text(one_line(", ".join(map(str, o.get("stale_sources") or ())) or "-", 60)))
        s = f.serving
        if s is None:
            serving = "head API: no poll in the window yet (not read)"
        else:
            age = f.t - float(s["t"])
            serving = (f"head API ({_num(age, '{:.0f}')} s before this moment): {one_line(str(s.get('health')), 20)} · "
                       f"running {_num(s.get('running'))} · waiting {_num(s.get('waiting'))} · "
                       f"tokens {_num(s.get('gen_tokens'), '{:.0f}')} · {_num(s.get('gen_tok_s'), '{:.1f}')} tok/s"
                       + (f" · error: {one_line(str(s['error']), 120)}" if s.get("error") else ""))
        self.query_one("#replay-serving", Static).update(Text(serving))
        why = [f"{o.get('station')}: {o.get('progress')}: {one_line(str(o.get('progress_why') or ''), 300)}"
               + "".join(f"\n  · {one_line(str(x), 200)}" for x in (o.get("progress_evidence") or ())[:4])
               for o in f.stations]
        self.query_one("#replay-why", Static).update(Text("\n".join(why)))


class ReplayApp(App):
    """``dgx-console replay BUNDLE``: the replay screen alone (Esc ends it)."""

    TITLE = "dgx-console replay"

    def __init__(self, bundle: str, window_s: float = 30.0) -> None:
        super().__init__()
        self.bundle, self.window_s = bundle, window_s

    def on_mount(self) -> None:
        from console.ui.themes import load_themes

        for t in load_themes():
            self.register_theme(t)

    def get_default_screen(self) -> Screen:
        return ReplayScreen(self.bundle, self.window_s)
