"""Launch / stop / restart in the TUI: confirm with the exact commands, then follow the steps.

``start_action(app, config, action, read_only)`` is the whole flow the app binds to L / S / R, one
worker of the ``service-action`` group: a second L / S / R while one is planned, confirmed or runs
is refused with a notice (never a second plan). It refuses in read-only mode, plans (launch
inspects the containers, resolves GPUs and the image digest, reads the operator's launch script
and makes the fit estimate), shows ``ConfirmActionScreen`` with every command that will run (API
key as ``***``), the estimate, and what is running now: replacing a running service or launching
against the estimate needs a ticked box of its own. ``ActionProgressScreen`` then runs
``run_action``, the entry point the CLI uses, as its worker ``job`` (all I/O is awaited; nothing
blocks; closing the screen cancels it: the action's guard cleans up, the cancel propagates): the
steps, the start-up timeline per station as it happens, then the verdict with the stop's
verification and the comparison with the last launches. ``c`` / Escape cancels; a failed start asks whether to stop
what started. The verdict is posted to the app as ``ActionFinished``.
Step details, evidence and log lines quote the stations: sanitized, shown as ``Text``, never markup.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, DataTable, Label, RichLog, Static
from textual.worker import Worker, WorkerCancelled, WorkerFailed, get_current_worker

from console.config import Config
from console.probes.engine_log import TIMELINE_LABELS
from console.sanitize import clean, one_line, plain
from console.service.actions import (
    ActionEvent,
    ActionFailed,
    ActionName,
    ActionOptions,
    ActionPlan,
    ActionResult,
    CancelToken,
    PlannedCommand,
    ReadOnlyError,
    plan_action,
    require_writable,
    run_action,
)
from console.ui.palette import TRANSPORT_STYLE
from console.vocabulary import TRANSPORT_TEXT, ActionOutcome

STATUS_STYLE = {"running": "bold cyan", "ok": "green", "warn": "yellow", "failed": "bold red",
                "skipped": "dim", "cancelled": "magenta"}
VERDICT_STYLE = {"ok": "bold green", "failed": "bold red", "cancelled": "bold magenta"}
ORDER_NOTE = {
    "launch": "Workers start first, then the head; ready once /health is 200 and the head streams a first token.",
    "stop": "The head stops first, then the workers; then every station is checked to be clean.",
    "restart": "Stops what runs (head first) and checks it is clean, then docker start: workers first, then the head.",
}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


@dataclass(frozen=True)
class Confirmed:
    """A deliberate yes, with the extra consents the plan needed."""

    replace: bool = False
    skip_fit: bool = False
    drop_caches: bool = False


class ActionFinished(Message):
    """Posted to the app when an action ends (the dashboard shows the transport verdict)."""

    def __init__(self, result: ActionResult) -> None:
        super().__init__()
        self.result = result


class ActionProgress(Message):
    def __init__(self, event: ActionEvent) -> None:
        super().__init__()
        self.event = event


def render_plan(action: str, plan: list[PlannedCommand]) -> Text:
    t = Text()
    t.append(ORDER_NOTE[action] + "\n", style="italic")
    for i, pc in enumerate(plan, 1):
        t.append(f"\n{i}. ", style="bold")
        t.append(f"[{one_line(pc.station, 60)}] ", style="bold cyan")
        t.append(one_line(pc.what, 300) + "\n", style="bold")
        t.append("   " + clean(pc.preview).replace("\n", "\n   ") + "\n")
    return t


def render_fit(plan: ActionPlan) -> Text:
    t = Text()
    if plan.fit is None:
        return t
    for f in plan.fit.fits:
        t.append(f"{f.station}: ", style="bold")
        t.append(f"weights {f.weights_gib:.1f} GiB/GPU of {f.total_gib:.1f} GiB; KV cache ~{f.kv_gib:.1f} GiB = "
                 f"{f.kv_tokens:,} tokens = {f.concurrency:.1f} x {f.settings.max_model_len:,}\n")
    for w in plan.fit.warnings():
        t.append(f"{w.severity}: ", style=SEVERITY_STYLE.get(w.severity, ""))
        t.append(clean(w.text + (f" (fix: {w.fix})" if w.fix else "")) + "\n")
    return t


class ConfirmActionScreen(ModalScreen["Confirmed | bool"]):
    """The exact commands, in order; nothing runs without a deliberate yes. Replacing a running
    service, or launching against the fit estimate, each needs its own ticked box."""

    DEFAULT_CSS = """
    ConfirmActionScreen { align: center middle; }
    ConfirmActionScreen > Vertical { width: 90%; height: 90%; border: thick $warning; padding: 0 1;
                                     background: $surface; }
    ConfirmActionScreen VerticalScroll { height: 1fr; border: round $panel; }
    ConfirmActionScreen #running { color: $error; text-style: bold; height: auto; }
    ConfirmActionScreen #fit { height: auto; border-bottom: solid $panel; }
    ConfirmActionScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmActionScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "dismiss(False)", "Cancel")]

    def __init__(self, action: str, plan: ActionPlan | list[PlannedCommand]) -> None:
        super().__init__()
        self.action = action
        self.full = plan if isinstance(plan, ActionPlan) else ActionPlan(action, list(plan))
        self.plan = self.full.commands
        self.needs_fit_consent = self.full.fit is not None and not self.full.fit.ok
        warned = self.full.fit.warnings() if self.full.fit is not None else []
        self.offer_drop = any(w.id == "free-memory-at-startup" for w in warned)
        # dropping the page cache is enough when the free memory at start is the only problem
        self.drop_is_enough = self.offer_drop and all(w.id == "free-memory-at-startup" for w in warned
                                                      if w.severity == "error")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text.assemble((f"{self.action.capitalize()} the service?", "bold"),
                                      f"  {len(self.plan)} commands, in this order"))
            if self.full.running:
                yield Static(plain(self.full.running), id="running")
            with VerticalScroll():  # only this part shrinks on a small terminal: the choices stay visible
                if self.full.fit is not None:
                    yield Static(render_fit(self.full), id="fit")
                yield Static(render_plan(self.action, self.plan), id="plan")
            if self.full.running:
                yield Checkbox("Stop the running service (verified) and replace it", id="replace")
            if self.offer_drop:
                yield Checkbox("Drop the page cache on every station first (sync; vm.drop_caches=3)",
                               id="drop-caches")
            if self.needs_fit_consent:
                yield Checkbox("Launch anyway: the estimate says it does not fit", id="skip-fit")
            with Horizontal():
                yield Button("Cancel", id="no")
                label = "Replace" if self.full.running else self.action.capitalize()
                yield Button(label, id="yes", variant="error" if self.full.running else "warning",
                             disabled=bool(self.full.running) or self.needs_fit_consent)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # the safe choice has the focus

    def _consents(self) -> Confirmed:
        def ticked(cid: str) -> bool:
            boxes = self.query(f"#{cid}").results(Checkbox)
            return any(b.value for b in boxes)

        return Confirmed(replace=ticked("replace"), skip_fit=ticked("skip-fit"), drop_caches=ticked("drop-caches"))

    @on(Checkbox.Changed)
    def _ticked(self, _event: Checkbox.Changed) -> None:
        c = self._consents()
        fit_ok = c.skip_fit or not self.needs_fit_consent or (c.drop_caches and self.drop_is_enough)
        ready = (c.replace or not self.full.running) and fit_ok
        self.query_one("#yes", Button).disabled = not ready

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._consents() if event.button.id == "yes" else False)


class StopOnFailureScreen(ModalScreen[bool]):
    """A start failed: stop what this run started, or leave it for a look?"""

    DEFAULT_CSS = """
    StopOnFailureScreen { align: center middle; }
    StopOnFailureScreen > Vertical { width: 90; height: auto; border: thick $error; padding: 1 2;
                                     background: $surface; }
    StopOnFailureScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    StopOnFailureScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "dismiss(True)", "Stop them")]

    def __init__(self, result: ActionResult) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        t = Text.assemble((f"{self.result.action} failed: ", "bold red"), one_line(self.result.summary, 600), "\n")
        for station, line in self.result.evidence:
            t.append(f"\n{one_line(station, 60)} | ", style="bold")
            t.append(one_line(line, 200))
        with Vertical():
            yield Static(t, id="failure")
            yield Static("Stop the containers this run started (head first), or leave them running to look?")
            with Horizontal():
                yield Button("Leave running", id="keep")
                yield Button("Stop them", id="stop", variant="error")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "stop")


RunAction = Callable[[Callable[[ActionEvent], None], Callable[[ActionResult], Awaitable[bool]]],
                     Awaitable[ActionResult]]


class ActionProgressScreen(ModalScreen[ActionResult | None]):
    """Steps as they happen (a table), the start-up timeline per station, notable log lines, then
    the verdict: the transport, the stop's verification, the comparison with the last launches."""

    DEFAULT_CSS = """
    ActionProgressScreen { align: center middle; }
    ActionProgressScreen > Vertical { width: 95%; height: 95%; border: thick $accent; padding: 0 1;
                                      background: $surface; }
    ActionProgressScreen > Vertical > Label { width: 100%; }
    /* the steps are what a person reads first: they keep rows on a small terminal, the
       timeline and the log give way */
    ActionProgressScreen #steps { height: 2fr; min-height: 6; }
    ActionProgressScreen #timeline { height: 1fr; max-height: 9; min-height: 3; border-top: solid $panel; }
    ActionProgressScreen RichLog { height: 1fr; max-height: 6; min-height: 3; border: round $panel; }
    ActionProgressScreen #verdict { height: auto; max-height: 12; padding: 0 1; }
    """
    BINDINGS = [Binding("c", "cancel", "Cancel action"), Binding("escape", "close_or_cancel", "Close / cancel"),
                Binding("i", "investigate", "Investigate (NCCL workbench)")]

    def __init__(self, action: str, run: RunAction) -> None:
        super().__init__()
        self.action, self._run = action, run
        self.result: ActionResult | None = None
        self.job: Worker[ActionResult] | None = None  # the action's run, a worker of this screen
        self._rows: dict[int, object] = {}
        self._timeline_rows: dict[tuple[str, str], object] = {}
        self.timeline: list[tuple[str, str, str]] = []  # (station, event, detail) as shown

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text.assemble((self.action.capitalize(), "bold"), "  ", (ORDER_NOTE[self.action], "dim")))
            yield DataTable(id="steps", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="timeline", cursor_type="none", zebra_stripes=True)
            yield RichLog(id="progress-log", max_lines=500, wrap=False, markup=False)
            yield Static(Text("running... (c: cancel)", style="bold cyan"), id="verdict")

    def on_mount(self) -> None:
        self.query_one("#steps", DataTable).add_columns("station", "step", "status", "detail")
        self.query_one("#timeline", DataTable).add_columns("station", "start-up", "at", "detail")
        self.job = self.run_worker(self._drive(), name=f"{self.action} run", group="action-run", exclusive=True,
                                   exit_on_error=False, description=f"The {self.action}'s steps")

    @property
    def running(self) -> bool:
        """The action is still running (its verdict is not in)."""
        return self.job is not None and not self.job.is_finished

    async def _drive(self) -> ActionResult:
        try:
            res = await self._run(lambda ev: self.post_message(ActionProgress(ev)), self._ask_on_failure)
        except Exception as exc:  # noqa: BLE001 - shown, never a crash of the console
            res = ActionResult(self.action, result="failed", summary=f"internal error: {exc}")
        self.result = res
        self._show_verdict(res)
        self.app.post_message(ActionFinished(res))
        return res

    async def _ask_on_failure(self, res: ActionResult) -> bool:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.app.push_screen(StopOnFailureScreen(res), lambda stop: fut.done() or fut.set_result(bool(stop)))
        return await fut

    def on_action_progress(self, msg: ActionProgress) -> None:
        ev = msg.event
        if ev.kind == "timeline" and ev.timeline is not None:
            self._show_timeline(ev.station, ev.timeline)
        elif ev.kind == "step" and ev.step is not None:
            st = ev.step
            table = self.query_one("#steps", DataTable)
            cells = (plain(one_line(st.station, 60)), plain(one_line(st.action, 60)),
                     Text(one_line(st.status, 20), style=STATUS_STYLE.get(st.status, "")), plain(one_line(st.detail, 200)))
            key = self._rows.get(id(st))
            if key is None:
                self._rows[id(st)] = table.add_row(*cells)
            else:
                for col, value in zip(table.columns, cells, strict=False):
                    table.update_cell(key, col, value, update_width=True)
        elif ev.kind in ("log", "note"):
            self.query_one(RichLog).write(Text.assemble((f"{one_line(ev.station, 60)} | ", "bold"),
                                                        one_line(ev.text, 300)))

    def _show_timeline(self, station: str, ev) -> None:
        """One row per station and event; a later line of the same event (KV tokens) updates it."""
        table = self.query_one("#timeline", DataTable)
        cells = (plain(one_line(station, 60)), plain(one_line(TIMELINE_LABELS.get(ev.event, ev.event), 60)),
                 time.strftime("%H:%M:%S", time.localtime(ev.at)), plain(one_line(ev.detail, 160)))
        key = self._timeline_rows.get((station, ev.event))
        if key is None:
            self._timeline_rows[(station, ev.event)] = table.add_row(*cells)
            self.timeline.append((station, ev.event, ev.detail))
        else:
            for col, value in zip(table.columns, cells, strict=False):
                table.update_cell(key, col, value, update_width=True)
            self.timeline = [(s, e, ev.detail if (s, e) == (station, ev.event) else d) for s, e, d in self.timeline]

    def _show_verdict(self, res: ActionResult) -> None:
        t = Text()
        t.append(res.result.upper(), style=VERDICT_STYLE[res.result])
        t.append(f" - {one_line(res.summary, 600)}")
        if self.action != "stop" and res.steps and any(s.action == "transport" for s in res.steps):
            t.append("\nNCCL transport: ", style="bold")
            t.append(TRANSPORT_TEXT[res.transport],
                     style=TRANSPORT_STYLE.get(res.transport, "dim"))
        for name, v in res.verified.items():
            t.append(f"\n{name} stop verified: ", style="bold")
            t.append(v.summary(), style="green" if v.clean else "bold red")
            for f in v.findings[:2]:
                t.append(f"\n   fix: {f['fix']}", style="dim")
        for station, line in res.evidence[-5:]:
            t.append(f"\n{one_line(station, 60)} | ", style="bold")
            t.append(one_line(line, 200))
        for note in res.notes[:12]:
            t.append("\n" + one_line(note, 300), style="yellow" if "slower" in note else "")
        t.append("\n(Escape: close" + (" · i: investigate in the NCCL workbench)" if res.result == ActionOutcome.FAILED else ")"),
                 style="dim")
        self.query_one("#verdict", Static).update(t)

    def action_cancel(self) -> None:
        if self.job is not None and self.running:
            soft = getattr(self._run, "cancel", None)
            if soft is None or not soft():  # the action stops at its next step or wake-up
                self.job.cancel()
            self.query_one("#verdict", Static).update(Text("cancelling: stopping what this run started...",
                                                           style="bold magenta"))

    def action_investigate(self) -> None:
        """A failed launch -> the NCCL workbench , opened with what failed."""
        if self.result is None or self.result.result != ActionOutcome.FAILED:
            self.notify("The workbench opens from a failed action (n on the dashboard opens it any time).", timeout=4)
            return
        self.dismiss(self.result)
        self.app.action_doctor(f"{self.action} failed: {self.result.summary[:100]}")  # type: ignore[attr-defined]

    def action_close_or_cancel(self) -> None:
        if self.running:
            self.action_cancel()
        else:
            self.dismiss(self.result)

    async def on_unmount(self) -> None:
        """Leaving the screen cancels the run and waits for the guard's clean-up (it stops what
        this run started) before the screen is gone."""
        if self.job is not None and self.running:
            self.job.cancel()
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await self.job.wait()


def action_runner(config: Config, action: ActionName, plan: ActionPlan | None = None,
                  choice: Confirmed | None = None, **settings) -> RunAction:
    """What the progress screen drives: ``run_action`` (the CLI's entry point) with the confirmed
    choices; its ``cancel`` stops the action at its next step or wake-up."""
    cancel = CancelToken()
    c = choice or Confirmed()

    async def run(on_event: Callable[[ActionEvent], None], ask: Callable[[ActionResult], Awaitable[bool]]
                  ) -> ActionResult:
        options = ActionOptions(specs=plan.specs if plan else None, on_failure=ask, replace=c.replace,
                                skip_fit=c.skip_fit, drop_caches=c.drop_caches)
        return await run_action(config, action, options, cancel=cancel, on_event=on_event, **settings)

    run.cancel = cancel.request  # type: ignore[attr-defined]
    return run


ACTION_GROUP = "service-action"  # the worker group of L / S / R: one at a time


def action_in_progress(app: App) -> Worker | None:
    """The launch, stop or restart being planned, confirmed or run now (None when none is)."""
    return next((w for w in app.workers if w.group == ACTION_GROUP and not w.is_finished), None)


def start_action(app: App, config: Config, action: ActionName, read_only: bool = False, **settings) -> Worker | None:
    """L / S / R: refuse when read-only or while another action is planned or runs; else plan,
    confirm, then run with progress, as one worker of ``ACTION_GROUP`` (returned) that ends when the
    progress screen closes."""
    try:
        require_writable(read_only)
    except ReadOnlyError as exc:
        app.notify(one_line(str(exc), 300), severity="error", timeout=6, markup=False)
        return None
    busy = action_in_progress(app)
    if busy is not None:
        app.notify(f"{busy.description}: one action at a time.", severity="warning", timeout=6, markup=False)
        return None
    rec = getattr(app, "incidents", None)
    if rec is not None and rec.recovering:  # the console's own restart ([recover]) runs: one at a time
        app.notify("the console is restarting the service after an incident ([recover]): one action at a time.",
                   severity="warning", timeout=6, markup=False)
        return None

    async def flow() -> None:
        worker = get_current_worker()
        if action == "launch":
            app.notify("launch: reading the containers, GPUs, image digest and the fit on the stations...", timeout=4)
        try:
            plan = await plan_action(config, action)
        except ActionFailed as exc:
            app.notify(one_line(f"{action}: {exc.detail}", 600), severity="error", timeout=12, markup=False)
            return
        except Exception as exc:  # noqa: BLE001 - a connection problem is a notification, not a crash
            app.notify(one_line(f"{action}: cannot plan: {exc}", 600), severity="error", timeout=12, markup=False)
            return
        worker.description = f"The {action} waits for its confirmation"
        yes = await app.push_screen_wait(ConfirmActionScreen(action, plan))
        if not yes:
            return
        choice = yes if isinstance(yes, Confirmed) else Confirmed()
        worker.description = f"A {action} is running (c cancels it)"
        await app.push_screen_wait(ActionProgressScreen(action, action_runner(config, action, plan, choice, **settings)))

    return app.run_worker(flow(), name=action, group=ACTION_GROUP, description=f"A {action} is being planned",
                          exit_on_error=False)
