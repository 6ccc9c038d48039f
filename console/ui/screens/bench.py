"""Benchmark screen: the concurrency sweep of ``dgx-console bench`` in one keypress.

Settings (levels, requests, warm-up, output cap, effort), start/cancel, live progress, a results
table with the profile's reference row beside each level, and a bar plot of total and per-user
throughput against concurrency with the reference bars under ours, so the knee shows at a glance.
The sweep runs as a worker in the app's loop (httpx is async); the runner's progress callbacks post
messages; results are saved as JSON and CSV off the loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, ProgressBar, Select, Static, Switch

from console.config import BenchRow, Config
from console.serving.bench import (
    DEFAULT_MAX_TOKENS,
    BenchProgress,
    BenchRunner,
    BenchSettings,
    LevelResult,
    configured_max_num_seqs,
    max_num_seqs_warning,
    parse_concurrency,
    queue_warning,
    resolve_model,
    save_report,
)
from console.serving.client import EFFORTS, ApiClient, ApiError


def default_results_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dgx-console" / "bench"


# ---------------------------------------------------------------- the plot (pure)


def _bar(value: float, scale: float, width: int) -> str:
    cells = value / scale * width if scale > 0 else 0.0
    full = int(cells)
    part = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)] if full < width else ""
    return ("█" * full + part.strip()) or ("▏" if value > 0 else "")


def render_plot(levels: Sequence[LevelResult], reference: Sequence[BenchRow], width: int = 40) -> Text:
    """Total and per-user tok/s per concurrency: ours (solid) over the reference (shaded)."""
    ours = {lv.concurrency: lv for lv in levels}
    ref = {r.concurrency: r for r in reference}
    concs = sorted(set(ours) | set(ref))
    out = Text()
    if not concs:
        return out
    for title, key in (("total output tok/s", "total_tok_s"), ("per-user tok/s (1/ITL)", "per_user_tok_s")):
        vals = [getattr(ours[c], key) for c in concs if c in ours] + [getattr(ref[c], key) for c in concs if c in ref]
        scale = max((v for v in vals if v), default=0.0)
        out.append(f"{title}\n", style="bold")
        for c in concs:
            mine = getattr(ours[c], key) if c in ours else None
            theirs = getattr(ref[c], key) if c in ref else None
            out.append(f"  C{c:<4} ")
            if mine is not None:
                out.append(_bar(mine, scale, width).ljust(width), style="bold green")
                out.append(f" {mine:>9,.1f}\n")
            else:
                out.append("·".ljust(width) + f" {'-':>9}\n", style="dim")
            out.append(f"  {'ref':<5} ", style="dim")
            if theirs is not None:
                out.append(_bar(theirs, scale, width).replace("█", "▒").ljust(width), style="dim")
                out.append(f" {theirs:>9,.1f}\n", style="dim")
            else:
                out.append("".ljust(width) + f" {'-':>9}\n", style="dim")
        out.append("\n")
    knee = knee_of(levels)
    if knee is not None:
        out.append(f"knee: total throughput peaks at C{knee}", style="bold")
    return out


def knee_of(levels: Sequence[LevelResult]) -> int | None:
    """The concurrency with the highest total tok/s (past it, more users only queue)."""
    measured = [lv for lv in levels if lv.total_tok_s]
    if len(measured) < 2:
        return None
    return max(measured, key=lambda lv: lv.total_tok_s or 0.0).concurrency


# ---------------------------------------------------------------- the screen


class BenchUpdate(Message):
    """Progress of the running sweep (posted by the runner's callback)."""

    def __init__(self, progress: BenchProgress) -> None:
        super().__init__()
        self.progress = progress


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


class BenchScreen(Screen):
    """Concurrency sweep against the configured head's API, beside the profile's reference."""

    DEFAULT_CSS = """
    BenchScreen #bench-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    BenchScreen .settings { height: 3; padding: 0 1; }
    BenchScreen .settings Label { padding: 1 1 0 1; }
    BenchScreen #concurrency { width: 16; }
    BenchScreen #requests, BenchScreen #warmup { width: 10; }
    BenchScreen #max-tokens { width: 10; }
    BenchScreen #effort { width: 18; }
    BenchScreen .settings Button { margin: 0 1; min-width: 10; }
    BenchScreen #warning { padding: 0 1; color: $warning; height: auto; }
    BenchScreen #status { height: 1; padding: 0 1; }
    BenchScreen #bar { padding: 0 1; height: 1; }
    BenchScreen #results { height: auto; max-height: 12; margin: 1 1 0 1; }
    BenchScreen #plot-box { height: 1fr; padding: 0 1; }
    """
    BINDINGS = [
        Binding("ctrl+r", "start", "Run sweep", tooltip="Start the concurrency sweep"),
        Binding("ctrl+b", "cancel", "Cancel", tooltip="Cancel the sweep (finished levels stay)"),
        Binding("escape", "back", "Back / cancel", tooltip="Cancel a running sweep, else leave"),
    ]

    def __init__(self, config: Config, *, results_dir: Path | None = None, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.config = config
        self.url = config.api_url()
        self._key = config.api_key()
        self._model_hint = config.profile.served_model_name or None
        self.reference = config.profile.reference_bench
        self.max_num_seqs = configured_max_num_seqs(config)
        self.results_dir = results_dir or default_results_dir()
        self.runner: BenchRunner | None = None
        self.levels: list[LevelResult] = []
        self.running = False
        self.state = "idle"  # idle | running | done | failed | cancelled | error
        self.saved: tuple[Path, Path] | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"Benchmark · {self.config.profile.name} @ {self.url}", id="bench-title")
        with Horizontal(id="settings", classes="settings"):
            yield Label("Concurrency")
            yield Input(",".join(str(r.concurrency) for r in self.reference) or "1,8,16,32", id="concurrency")
            yield Label("Requests")
            yield Input("", placeholder="10x", type="integer", id="requests")
            yield Label("Warm-up")
            yield Input("", placeholder="3x", type="integer", id="warmup")
            yield Label("Max tokens")
            yield Input(str(DEFAULT_MAX_TOKENS), type="integer", id="max-tokens")
        with Horizontal(id="settings2", classes="settings"):
            yield Label("Effort")
            yield Select([("default", "default")] + [(e, e) for e in EFFORTS], value="default", allow_blank=False,
                         id="effort")
            yield Label("Fixed length")
            yield Switch(False, id="ignore-eos", tooltip="ignore_eos: every reply is exactly max tokens long")
            yield Button("Run", id="start", variant="primary")
            yield Button("Cancel", id="cancel", variant="error", disabled=True)
        yield Static("", id="warning")
        yield Static("Ready: Ctrl+R runs the sweep (NVIDIA's method: warm-up 3x, measured 10x per level)",
                     id="status")
        yield ProgressBar(total=1, show_eta=False, id="bar")
        yield DataTable(id="results", cursor_type="none", zebra_stripes=True)
        with VerticalScroll(id="plot-box"):
            yield Static(render_plot([], self.reference), id="plot")
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one("#results", DataTable)
        t.add_columns("conc", "total tok/s", "ref", "per-user", "ref", "TTFT ms", "ref", "ITL ms", "ref",
                      "lat s", "ref", "p99 TTFT", "tokens", "server", "err")
        self._show_warning()

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
        return BenchSettings(levels, number("#requests", "requests per level"), number("#warmup", "warm-up", True),
                             number("#max-tokens", "max tokens") or DEFAULT_MAX_TOKENS,
                             None if effort in ("default", Select.BLANK) else str(effort),
                             self.query_one("#ignore-eos", Switch).value)

    @on(Input.Changed, "#concurrency")
    def _show_warning(self) -> None:
        try:
            levels = parse_concurrency(self.query_one("#concurrency", Input).value)
        except ValueError:
            levels = ()
        w = max_num_seqs_warning(self.max_num_seqs, levels, self.config.profile.engine)
        found = [q for lv in self.levels if (q := queue_warning(lv))]  # what the server reported
        lines = ([w] if w else []) + found
        self.query_one("#warning", Static).update(Text("\n".join(f"⚠ {x}" for x in lines)))

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
        self._show_warning()
        self.saved = None
        self.query_one("#results", DataTable).clear()
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
                self._status(f"✖ {exc}")
                self.state = "error"
                return
            self.runner = BenchRunner(client, model, settings,
                                      on_progress=lambda p: self.post_message(BenchUpdate(p)))
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
        except OSError as exc:
            self.notify(f"cannot save the results: {exc}", severity="error")

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
            self._show_warning()
            self._replot()
            bar.update(total=max(1, p.total), progress=p.total)
            return
        bar.update(total=max(1, p.total), progress=p.done)
        rate = f" · {p.tok_s:,.1f} tok/s" if p.tok_s is not None else ""
        label = {"warmup": "warm-up", "measure": "measuring", "verify": "reading the server's token counter"}
        self._status(f"C{p.concurrency} (level {p.level + 1}/{p.levels}) {label.get(p.phase, p.phase)}: "
                     f"{p.done}/{p.total} requests{rate}")

    def _add_row(self, lv: LevelResult) -> None:
        ref = {r.concurrency: r for r in self.reference}.get(lv.concurrency)

        def r(attr: str, spec: str) -> Text:
            return Text(_fmt(getattr(ref, attr, None) if ref else None, spec), style="dim")

        server = "n/a" if lv.server_tokens is None else f"{lv.server_tokens:,}"
        self.query_one("#results", DataTable).add_row(
            str(lv.concurrency), _fmt(lv.total_tok_s, ",.1f"), r("total_tok_s", ",.1f"),
            _fmt(lv.per_user_tok_s, ",.1f"), r("per_user_tok_s", ",.1f"),
            _fmt(lv.ttft_ms_mean, ",.0f"), r("ttft_ms_mean", ",.0f"), _fmt(lv.itl_ms_mean, ".2f"),
            r("itl_ms_mean", ".2f"), _fmt(lv.latency_s_mean, ".2f"), r("latency_s_mean", ".2f"),
            _fmt(lv.ttft_ms_p99, ",.0f"), f"{lv.output_tokens:,}",
            Text(server + (" ≠" if lv.mismatch else ""), style="bold red" if lv.mismatch else ""),
            Text(str(lv.errors), style="bold red" if lv.errors else ""),
            key=str(lv.concurrency))

    def _replot(self) -> None:
        self.query_one("#plot", Static).update(render_plot(self.levels, self.reference))
