"""Benchmark screen: the concurrency sweep of ``dgx-console bench`` in one keypress.

Settings (levels, requests, warm-up, output cap, effort), start/cancel, live progress, a results
table with the profile's reference beside each level when the settings are comparable (a line
says when they are not, and why), and NVIDIA's Figure 2: total tok/s against per-user tok/s, one
point per concurrency, the reference curve beside ours (textual-plotext). The sweep runs as a
worker in the app's loop (httpx is async); the runner's progress callbacks post messages;
results are saved as JSON and CSV off the loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, ProgressBar, Select, Static, Switch
from textual_plotext import PlotextPlot

from console.config import BenchRow, Config, xdg_data_dir
from console.probes.engine_log import EngineProgress
from console.safe_files import FileProblem
from console.sanitize import one_line
from console.serving.bench import BenchRunner, parse_concurrency, parse_depths, resolve_model
from console.serving.bench_model import (
    DEFAULT_MAX_TOKENS,
    MEASURED_FACTOR,
    MIN_TIMED_TOKENS,
    WARMUP_FACTOR,
    BenchProgress,
    BenchSettings,
    LevelResult,
    ReferenceComparison,
    compare_to_reference,
    configured_max_num_seqs,
    knee_of,
    max_num_seqs_warning,
    queue_warning,
    save_report,
    short_levels_warning,
)
from console.serving.bench_stats import parse_slo, slo_answer, spec_stuck_warning
from console.serving.chat import EFFORTS
from console.serving.client import ApiClient
from console.serving.errors import ApiError
from console.ui.engine_state import api_expectation, follow_head_engine, why_no_api
from console.ui.providers import BenchCommands
from console.ui.widgets.fitted_footer import FittedFooter
from console.ui.widgets.settings_bar import SettingsBar


def default_results_dir() -> Path:
    return xdg_data_dir() / "bench"


# ---------------------------------------------------------------- Figure 2 (pure data, then the widget)


@dataclass(frozen=True)
class Point:
    per_user: float  # x: tok/s one user sees
    total: float  # y: tok/s all users together
    label: str  # C1, C8, ... (C4 (2 in flight) when the level never had 4)


def figure_points(levels: Sequence[LevelResult]) -> list[Point]:
    """Our levels with both figures, in concurrency order (levels without a timed reply have no
    per-user figure and no point)."""
    return [Point(lv.per_user_tok_s, lv.total_tok_s, lv.label)
            for lv in sorted(levels, key=lambda lv: lv.concurrency)
            if lv.per_user_tok_s is not None and lv.total_tok_s is not None]


def reference_points(reference: Sequence[BenchRow]) -> list[Point]:
    return [Point(r.per_user_tok_s, r.total_tok_s, f"C{r.concurrency}")
            for r in sorted(reference, key=lambda r: r.concurrency)]


def knee_line(levels: Sequence[LevelResult]) -> str:
    knee = knee_of(levels)
    if knee is None:
        return ""
    figures = f"{knee.total_tok_s:,.1f} tok/s" + (
        f", {knee.per_user_tok_s:,.1f} per user" if knee.per_user_tok_s is not None else "")
    if knee.concurrency == max(lv.concurrency for lv in levels if lv.reached and lv.total_tok_s):
        return (f"total throughput still rises at C{knee.concurrency} ({figures}), the highest level "
                "measured: the knee is beyond it")
    return f"knee: total throughput peaks at C{knee.concurrency} ({figures})"


class ThroughputFigure(PlotextPlot):
    """NVIDIA's Figure 2: total output tok/s (y) against per-user tok/s (x), a point per
    concurrency, our sweep beside the reference. Data in, no I/O."""

    DEFAULT_CSS = """
    ThroughputFigure { height: 1fr; min-height: 10; }
    """

    def __init__(self, reference: Sequence[BenchRow], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ours: list[Point] = []
        self.ref = reference_points(reference)
        self.ref_label = "reference"
        self.ref_shown = True  # a reference measured with other settings is not drawn

    def on_mount(self) -> None:
        super().on_mount()
        self.replot()

    def show(self, levels: Sequence[LevelResult], comparison: ReferenceComparison | None) -> None:
        self.ours = figure_points(levels)
        self.ref_label = "reference" + (f" ({comparison.verdict})" if comparison and comparison.verdict
                                        != "comparable" else "")
        self.compare(comparison, replot=False)
        self.replot()

    def compare(self, comparison: ReferenceComparison | None, replot: bool = True) -> None:
        """Draw the reference only when the settings compare with its method (as the table does)."""
        shown = comparison is None or comparison.comparable
        if shown != self.ref_shown:
            self.ref_shown = shown
            if replot:
                self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("total tok/s against per-user tok/s, one point per concurrency")
        plt.xlabel("per-user tok/s (1/ITL)")
        plt.ylabel("total tok/s")
        ref = self.ref if self.ref_shown else []
        for points, color, label in ((ref, "gray", self.ref_label), (self.ours, "green+", "this sweep")):
            if not points:
                continue
            xs, ys = [p.per_user for p in points], [p.total for p in points]
            plt.plot(xs, ys, marker="braille", color=color, label=label)
            for p in points:  # the point and its concurrency, drawn over the line
                plt.text("● " + p.label, p.per_user, p.total, color=color, alignment="left")
        every = ref + self.ours
        if every:  # from zero (throughput), with room for the labels right of the last point
            plt.xlim(0, max(p.per_user for p in every) * 1.15)
            plt.ylim(0, max(p.total for p in every) * 1.1)
        if not ref and not self.ours:
            plt.title("no results yet (Ctrl+R runs the sweep)" + ("" if self.ref_shown or not self.ref else
                                                                  "; the reference is not comparable: not drawn"))
        self.refresh()


# ---------------------------------------------------------------- the screen


def ready_line(settings: BenchSettings) -> str:
    """What Ctrl+R will run, from the fields as they are (not a fixed text that stops being true)."""
    levels = ",".join(str(c) for c in settings.concurrency)
    nvidia = settings.warmup is None and settings.requests_per_level is None
    warm = (f"warm-up {WARMUP_FACTOR}x" if settings.warmup is None else f"warm-up {settings.warmup}")
    measured = (f"measured {MEASURED_FACTOR}x" if settings.requests_per_level is None
                else f"measured {settings.requests_per_level}")
    method = "NVIDIA's method: " if nvidia else ""
    depth = "" if settings.depths == (0,) else f", depths {','.join(str(d) for d in settings.depths)}"
    floor = ("floor 0: every reply timed" if settings.decode_floor_tokens == 0
             else f"decode floor {settings.decode_floor_tokens}")
    return (f"Ready: Ctrl+R runs the sweep at concurrency {levels} ({method}{warm}, {measured} per level, "
            f"max tokens {settings.max_tokens}, {floor}){depth}")


class BenchUpdate(Message):
    """Progress of the running sweep (posted by the runner's callback)."""

    def __init__(self, progress: BenchProgress) -> None:
        super().__init__()
        self.progress = progress


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


class BenchScreen(Screen):
    """Concurrency sweep against the configured head's API, beside the profile's reference."""

    AUTO_FOCUS = "#concurrency"
    COMMANDS = {BenchCommands}
    DEFAULT_CSS = """
    BenchScreen #bench-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    BenchScreen #concurrency { width: 16; }
    BenchScreen #requests, BenchScreen #warmup { width: 10; }
    BenchScreen #max-tokens { width: 12; }
    BenchScreen #slo { width: 24; }
    BenchScreen #depth { width: 16; }
    BenchScreen #decode-floor { width: 8; }
    BenchScreen #effort { width: 18; }
    BenchScreen #buttons { width: 26; height: auto; }
    BenchScreen #buttons Button { min-width: 10; margin: 0 1 0 0; }
    BenchScreen #warning { padding: 0 1; color: $warning; height: auto; }
    BenchScreen #reference { padding: 0 1; height: auto; color: $text-muted; }
    BenchScreen #reference.-not-comparable { color: $warning; }
    BenchScreen #status { height: 1; padding: 0 1; }
    BenchScreen #bar { padding: 0 1; height: 1; }
    BenchScreen #results { height: auto; max-height: 10; margin: 0 1; border-top: hkey $panel-lighten-2;
                           border-title-color: $text-muted; }
    BenchScreen #results:focus { border-top: hkey $accent; border-title-color: $accent; }
    BenchScreen #figure { margin: 0 1; }
    BenchScreen #notes { height: auto; max-height: 6; padding: 0 1; }
    """
    BINDINGS = [
        Binding("ctrl+r", "start", "Run sweep", id="bench-run", tooltip="Start the concurrency sweep"),
        Binding("ctrl+b", "cancel", "Cancel", id="bench-cancel", tooltip="Cancel the sweep (finished levels stay)"),
        Binding("escape", "back", "Back / cancel", id="bench-back", tooltip="Cancel a running sweep, else leave"),
    ]

    def __init__(self, config: Config, *, results_dir: Path | None = None, head_engine: EngineProgress | None = None,
                 name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.config = config
        self.url = config.api_url()
        self._key = config.api_key()
        self._model_hint = config.profile.served_model_name or None
        self.reference = config.profile.reference_bench
        self.reference_method = config.profile.reference_method
        self.max_num_seqs = configured_max_num_seqs(config)
        self.results_dir = results_dir or default_results_dir()
        self.runner: BenchRunner | None = None
        self.levels: list[LevelResult] = []
        self.comparison: ReferenceComparison | None = None  # of the sweep shown in the table
        self.running = False
        self.state = "idle"  # idle | running | done | failed | cancelled | error
        self.saved: tuple[Path, Path] | None = None
        self.head_engine = head_engine  # the head station's phase, then the app's signal (no I/O here)

    def set_head_engine(self, progress: EngineProgress | None) -> None:
        """The head station's engine phase (a sweep is refused while the API cannot answer)."""
        self.head_engine = progress

    def compose(self) -> ComposeResult:
        yield Static(f"Benchmark · {self.config.profile.name} @ {self.url}", id="bench-title")
        yield SettingsBar(
            Label("Concurrency"),
            Input(",".join(str(r.concurrency) for r in self.reference) or "1,8,16,32", id="concurrency"),
            Label("Requests"), Input("", placeholder="10x", type="integer", id="requests"),
            Label("Warm-up"), Input("", placeholder="3x", type="integer", id="warmup"),
            Label("Max tokens"), Input(str(DEFAULT_MAX_TOKENS), type="integer", id="max-tokens"),
            Label("Effort"),
            Select([("default", "default")] + [(e, e) for e in EFFORTS], value="default", allow_blank=False,
                   id="effort"),
            Label("Fixed length"),
            Switch(False, id="ignore-eos", tooltip="ignore_eos: every reply is exactly max tokens long"),
            Label("SLO"), Input("", placeholder="ttft:500 e2el:20000", id="slo",
                                tooltip="ms; ttft|time_to_first_token, tpot|inter_token_latency, "
                                        "e2el|request_latency: goodput and the users within it"),
            Label("Depth"), Input("0", placeholder="0,4096", id="depth",
                                  tooltip="prompt depths: about N tokens of context before each prompt, "
                                          "warm-up included; each depth runs every level"),
            Label("Decode floor"), Input(str(MIN_TIMED_TOKENS), type="integer", id="decode-floor",
                                         tooltip="per-user tok/s only from replies of N+ tokens "
                                                 "(0 times every reply of 2+ tokens)"),
            Label(""),
            Horizontal(Button("Run", id="start", variant="primary"),
                       Button("Cancel", id="cancel", variant="error", disabled=True), id="buttons"),
            id="settings")
        yield Static("", id="warning")
        yield Static("", id="reference")
        yield Static("Ready: Ctrl+R runs the sweep (NVIDIA's method: warm-up 3x, measured 10x per level)",
                     id="status")
        yield ProgressBar(total=1, show_eta=False, id="bar")
        with Vertical(id="body"):
            results = DataTable(id="results", cursor_type="none", zebra_stripes=True)
            results.border_title = "results (↑↓ scroll)"  # a Tab stop says what it is
            yield results
            yield ThroughputFigure(self.reference, id="figure")
            yield Static("", id="notes")
        yield FittedFooter()

    def on_mount(self) -> None:
        follow_head_engine(self, self.set_head_engine)
        self._focused_at: tuple[object, float] = (None, 0.0)  # the widget that took focus last, and when
        self._pressed_at: tuple[object, float] = (None, 0.0)  # the widget pressed last (mouse down), and when
        self._columns(self._comparison_now())
        self._settings_changed()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one(SettingsBar).fit(self.app.size.width, self.app.size.height)

    # A field entered by a click selects its value, as Tab does (Textual puts the cursor where the
    # click was): typing a new concurrency or token budget replaces the old one instead of adding to it.
    # A click on a field that already had focus places the cursor, as usual. "Entered by this click" is
    # read from the events' own times (when each was made, not when it reached this screen): the focus
    # came after the press. A wall-clock window failed on a loaded loop, where the click reached the
    # screen more than its 0.5 s after the focus did.

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._focused_at = (event.widget, event.time)

    @on(events.MouseDown)
    def _note_press(self, event: events.MouseDown) -> None:
        self._pressed_at = (event.widget, event.time)

    @on(events.Click)
    def _select_field_entered_by_click(self, event: events.Click) -> None:
        widget, focused = self._focused_at
        pressed_widget, pressed = self._pressed_at
        if isinstance(widget, Input) and event.widget is widget and pressed_widget is widget and focused >= pressed:
            widget.select_all()

    def _columns(self, comparison: ReferenceComparison | None) -> None:
        """The table's columns: the reference's beside ours only when the settings compare."""
        t = self.query_one("#results", DataTable)
        t.clear(columns=True)
        if self.reference and (comparison is None or comparison.comparable):
            t.add_columns("conc", "total tok/s", "ref", "per-user", "ref", "TTFT ms", "ref", "ITL ms", "ref",
                          "lat s", "ref", "p99 TTFT", "tokens", "server", "err")
        else:
            t.add_columns("conc", "total tok/s", "per-user", "TTFT ms", "ITL ms", "lat s", "p99 TTFT", "tokens",
                          "server", "err")

    # ------------------------------------------------------------------ settings

    def _settings(self) -> BenchSettings:
        """BenchSettings from the inputs; ValueError with a one-line reason."""
        levels = parse_concurrency(self.query_one("#concurrency", Input).value)

        def number(wid: str, what: str, zero_ok: bool = False) -> int | None:
            raw = self.query_one(wid, Input).value.strip()
            if not raw:
                return None
            if not raw.isdigit() or (int(raw) == 0 and not zero_ok):
                raise ValueError(f"{what}: {raw!r} is not a {'non-negative' if zero_ok else 'positive'} integer")
            return int(raw)

        effort = self.query_one("#effort", Select).value
        slo = parse_slo(self.query_one("#slo", Input).value.replace(",", " ").split())
        depths = parse_depths(self.query_one("#depth", Input).value.strip() or "0")
        floor = number("#decode-floor", "decode floor", True)
        return BenchSettings(levels, number("#requests", "requests per level"), number("#warmup", "warm-up", True),
                             number("#max-tokens", "max tokens") or DEFAULT_MAX_TOKENS,
                             None if effort in ("default", Select.BLANK) else str(effort),
                             self.query_one("#ignore-eos", Switch).value, depths=depths, slo=slo,
                             decode_floor_tokens=MIN_TIMED_TOKENS if floor is None else floor)

    def _comparison_now(self, settings: BenchSettings | None = None) -> ReferenceComparison | None:
        if not self.reference:
            return None
        if settings is None:
            try:
                settings = self._settings()
            except ValueError:
                return None
        return compare_to_reference(settings, self.reference_method)

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Switch.Changed)
    def _settings_changed(self) -> None:
        """Warnings and the reference's comparability follow the settings as they are typed."""
        try:
            settings: BenchSettings | None = self._settings()
        except ValueError:
            settings = None
        levels = settings.concurrency if settings else ()
        lines = [w for w in (max_num_seqs_warning(self.max_num_seqs, levels, self.config.profile.engine),
                             short_levels_warning(settings) if settings else None) if w]
        lines += [q for lv in self.levels if (q := queue_warning(lv))]  # what the server reported
        self.query_one("#warning", Static).update(Text("\n".join(f"⚠ {x}" for x in lines)))
        comp = self._comparison_now(settings)
        ref = self.query_one("#reference", Static)
        ref.update(Text(comp.line() + ("" if comp.comparable else " — not shown beside the results")
                        if comp else ""))
        ref.set_class(comp is not None and not comp.comparable, "-not-comparable")
        with contextlib.suppress(NoMatches):
            self.query_one(ThroughputFigure).compare(comp if self.state == "idle" else self.comparison)
        if not self.running and self.state == "idle":
            self._status(ready_line(settings) if settings else "✖ " + self._settings_problem())

    def _settings_problem(self) -> str:
        try:
            self._settings()
        except ValueError as exc:
            return f"{exc} (fix it before Ctrl+R)"
        return "the settings cannot be read"

    # ------------------------------------------------------------------ running

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        if self.running:
            self.notify("A sweep is running (Ctrl+B or Esc cancels it)", severity="warning")
            return
        try:
            settings = self._settings()
        except ValueError as exc:
            self._status(f"✖ {exc}")
            return
        self.levels = []
        self.comparison = self._comparison_now(settings)
        self._settings_changed()
        self.saved = None
        self._columns(self.comparison)
        self._replot()
        self._set_running(True)
        self._sweep(settings)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if self.running:
            self._status("cancelling… (closing the streams)")
            self.workers.cancel_group(self, "bench")

    def action_back(self) -> None:
        if self.running:
            self.action_cancel()
        else:
            self.app.pop_screen()

    def _set_running(self, on_: bool) -> None:
        self.running = on_
        with contextlib.suppress(NoMatches):  # the screen may be gone (left while cancelling)
            self.query_one("#start", Button).disabled = on_
            self.query_one("#cancel", Button).disabled = not on_

    def _status(self, text: str) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one("#status", Static).update(Text(text))

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "bench")

    @work(exclusive=True, group="bench")
    async def _sweep(self, settings: BenchSettings) -> None:
        self.state = "running"
        top = max(settings.concurrency)
        transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=top + 4,
                                                                 max_keepalive_connections=top + 4))
        client = ApiClient(self.url, api_key=self._key, timeout=10.0, stream_timeout=900.0, transport=transport)
        try:
            self._status("finding the model…")
            try:
                model = await resolve_model(client, self._model_hint)
            except ApiError as exc:
                waiting = why_no_api(self.head_engine) if exc.kind in ("connect", "unavailable") else None
                if waiting and api_expectation(self.head_engine) == "loading":
                    self._status(f"◌ {waiting}: the API answers once the engine is ready; run the sweep then")
                else:
                    self._status(f"✖ {exc}" + (f" — {waiting}" if waiting else ""))
                self.state = "error"
                return
            self.runner = BenchRunner(client, model, settings,
                                      on_progress=lambda p: self.post_message(BenchUpdate(p)))
            self.runner.report.reference = self.comparison
            if w := short_levels_warning(settings):
                self.runner.report.warnings.append(w)
            try:
                report = await self.runner.run()
            except asyncio.CancelledError:
                await self._save()
                self._status(f"cancelled after {len(self.runner.report.levels)} level(s); streams closed"
                             + (f" · saved {self.saved[0]} and .csv" if self.saved else ""))
                self.state = "cancelled"  # last: watchers see the final status and files
                raise
            await self._save()
            self._status(self._summary())
            self.state = "failed" if report.failed else "done"
        finally:
            await client.aclose()
            self._set_running(False)

    async def _save(self) -> None:
        if self.runner is None or not self.runner.report.levels:
            return
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.runner.report.started_at))
        try:
            self.saved = await asyncio.to_thread(save_report, self.runner.report, self.results_dir / f"bench-{stamp}")
        except (OSError, FileProblem) as exc:
            self.notify(f"cannot save the results: {one_line(str(exc), 200)}", severity="error", markup=False)

    def _summary(self) -> str:
        bad = [lv for lv in self.levels if lv.errors or lv.mismatch]
        head = "✔ done" if not bad else "✖ " + "; ".join(
            f"C{lv.concurrency}: {lv.errors} error(s)" + (" , token count MISMATCH with the server" if lv.mismatch else "")
            for lv in bad)
        return head + (f" · saved {self.saved[0]} and .csv" if self.saved else "")

    def on_bench_update(self, msg: BenchUpdate) -> None:
        p = msg.progress
        bar = self.query_one("#bar", ProgressBar)
        if p.phase == "done" and p.result is not None:
            self.levels.append(p.result)
            self._add_row(p.result)
            self._settings_changed()
            self._replot()
            bar.update(total=max(1, p.total), progress=p.total)
            return
        bar.update(total=max(1, p.total), progress=p.done)
        rate = f" · {p.tok_s:,.1f} tok/s" if p.tok_s is not None else ""
        label = {"warmup": "warm-up", "measure": "measuring", "verify": "reading the server's token counter"}
        self._status(f"C{p.concurrency} (level {p.level + 1}/{p.levels}) {label.get(p.phase, p.phase)}: "
                     f"{p.done}/{p.total} requests{rate}")

    def _add_row(self, lv: LevelResult) -> None:
        table = self.query_one("#results", DataTable)
        beside = len(table.columns) > 10
        ref = {r.concurrency: r for r in self.reference}.get(lv.concurrency)

        def r(attr: str, spec: str) -> list[Text]:
            return [Text(_fmt(getattr(ref, attr, None) if ref else None, spec), style="dim")] if beside else []

        server = "n/a" if lv.server_tokens is None else f"{lv.server_tokens:,}"
        at = f" @{lv.depth}" if lv.depth else ""  # the prompt depth, when the sweep has more than 0
        conc = Text(f"{lv.concurrency}{at}") if lv.reached else Text(
            f"{lv.concurrency} ({lv.concurrency_reached}){at}", style="yellow")
        per_user = (Text(_fmt(lv.per_user_tok_s, ",.1f")) if lv.timed_requests or not lv.requests
                    else Text("n/m", style="yellow"))
        table.add_row(
            conc, _fmt(lv.total_tok_s, ",.1f"), *r("total_tok_s", ",.1f"),
            per_user, *r("per_user_tok_s", ",.1f"),
            _fmt(lv.ttft_ms_mean, ",.0f"), *r("ttft_ms_mean", ",.0f"), _fmt(lv.itl_ms_mean, ".2f"),
            *r("itl_ms_mean", ".2f"), _fmt(lv.latency_s_mean, ".2f"), *r("latency_s_mean", ".2f"),
            _fmt(lv.ttft_ms_p99, ",.0f"), f"{lv.output_tokens:,}",
            Text(server + (" ≠" if lv.mismatch else ""), style="bold red" if lv.mismatch else ""),
            Text(str(lv.errors), style="bold red" if lv.errors else ""),
            key=f"{lv.concurrency}{at}")

    def _replot(self) -> None:
        self.query_one("#figure", ThroughputFigure).show(self.levels, self.comparison)
        notes = [n for lv in self.levels for n in lv.notes()]
        notes += [w for lv in self.levels if (w := spec_stuck_warning(lv))]
        if knee := knee_line(self.levels):
            notes.insert(0, knee)
        slo = self.runner.report.settings.slo if self.runner is not None else None
        if slo is not None and self.levels:
            notes[:0] = [a["line"] for a in slo_answer(self.levels, slo)["answers"]]
        self.query_one("#notes", Static).update(Text("\n".join(notes)))
