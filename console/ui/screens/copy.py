"""The copy screen (palette: "Copy the checkpoint / the image to the other station"): the plan of
``dgx-console copy`` read from both stations, Ctrl+R to run it with a progress bar and rsync's rate,
then the identity check's verdict. The plan and the copy are the screen's worker (leaving the screen
cancels it: the channel closes and the source station's rsync ends; running it again resumes)."""

from __future__ import annotations

import contextlib

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from console.config import Config
from console.errors import UsageError
from console.probes.copy_manifest import Progress
from console.remote.transport import Transport, TransportError
from console.sanitize import one_line
from console.service.copy import CopyKind, CopyPlan, CopyResult, CopyResultKind, gb, plan_copy, run_copy
from console.ui.widgets.fitted_footer import FittedFooter


class CopyScreen(Screen):
    """One copy: plan on open, Ctrl+R runs it, Esc cancels a running copy or leaves."""

    BINDINGS = [
        Binding("ctrl+r", "start", "Copy", id="copy-run", tooltip="Run the copy the plan shows"),
        Binding("escape", "back", "Back / cancel", id="copy-back", tooltip="Cancel a running copy, else leave"),
    ]
    DEFAULT_CSS = """
    CopyScreen #copy-plan { padding: 1 2; }
    CopyScreen #copy-status { padding: 0 2; }
    CopyScreen #copy-bar { padding: 0 2; }
    """

    def __init__(self, config: Config, kind: CopyKind, *, read_only: bool = False) -> None:
        super().__init__()
        self.config, self.kind, self.read_only = config, kind, read_only
        self.plan: CopyPlan | None = None
        self.result: CopyResult | None = None
        self.running = False
        self._transport: Transport | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"Copy the {self.kind} to the other station (over the rail)", id="copy-title")
        yield Static(Text("reading both stations…"), id="copy-plan")
        yield ProgressBar(total=100, show_eta=False, id="copy-bar")
        yield Static("", id="copy-status")
        yield FittedFooter()

    def on_mount(self) -> None:
        self._plan()

    def _status(self, text: str) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one("#copy-status", Static).update(Text(text))

    @work(exclusive=True, group="copy")
    async def _plan(self) -> None:
        try:
            self.plan, self._transport = await plan_copy(self.config, self.kind, None)
        except (UsageError, TransportError) as exc:
            self._status(f"✖ {one_line(str(exc), 300)}")
            return
        self.query_one("#copy-plan", Static).update(Text("\n".join(self.plan.lines())))
        if self.plan.refused:
            self._status("✖ refused: " + "; ".join(self.plan.refused))
        elif self.plan.to_send_bytes == 0 and self.kind == CopyKind.IMAGE:
            self._status(f"✔ already on {self.plan.destination}")
        else:
            self._status("Ready: Ctrl+R copies " + gb(self.plan.to_send_bytes)
                         + (" (read-only: refused)" if self.read_only else ""))

    def action_start(self) -> None:
        if self.read_only:
            self.notify("Read-only: the copy writes to a station", severity="warning")
            return
        if self.running or self.plan is None or self._transport is None or self.plan.refused:
            return
        self.running = True
        self._copy(self.plan, self._transport)

    def _progress(self, p: Progress) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one("#copy-bar", ProgressBar).update(progress=p.pct)
        self._status(f"copying… {p.pct}% {gb(p.rate_bytes_s)}/s, {gb(p.bytes_done)} sent, eta {p.eta}")

    @work(exclusive=True, group="copy")
    async def _copy(self, plan: CopyPlan, transport: Transport) -> None:
        try:
            self.result = await run_copy(plan, transport, on_progress=self._progress)
        finally:
            self.running = False
        r = self.result
        mark = "✔" if r.result == CopyResultKind.OK else "✖"
        rate = f" ({gb(r.rate_bytes_s)}/s)" if r.rate_bytes_s else ""
        self._status(f"{mark} {r.result}: {r.detail}{rate}" + "".join(f"\n  {d}" for d in r.differences[:20]))
        if r.result == CopyResultKind.OK:
            self.query_one("#copy-bar", ProgressBar).update(progress=100)

    def action_back(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "copy")
            self.running = False
            self._status("cancelled: what arrived stays; Ctrl+R or `dgx-console copy` again resumes")
        else:
            self.app.pop_screen()

    async def on_unmount(self) -> None:
        self.workers.cancel_group(self, "copy")
        if self._transport is not None:
            with contextlib.suppress(Exception):
                await self._transport.close()
