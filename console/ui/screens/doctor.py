"""The NCCL workbench screen (key ``n``; "investigate" from an NCCL finding or a failed launch): the
ladder's rungs with their verdicts, the selected result's evidence from both sides and the next step,
the session's debug tries side by side.

``a`` runs the whole ladder again, ``r`` re-runs the selected row's rung, ``c`` cancels (the running
rung ends its remote processes), ``x`` opens the debug relaunch (overrides, the exact diff, confirm).
The work is ``console.doctor.run_doctor`` as an asyncio task of the app's loop (all I/O awaited);
outside text reaches the screen through ``console.sanitize`` only.
"""

from __future__ import annotations

import asyncio
import contextlib

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Checkbox, DataTable, Header, Input, Label, Static
from textual.worker import Worker

from console.config import Config
from console.doctor import store
from console.doctor.context import DoctorOptions, RelaunchPlan
from console.doctor.model import DoctorReport, RungResult, counts, worst
from console.doctor.relaunch import OVERRIDE_CHOICES, DebugRelaunch, TryResult, plan_error
from console.doctor.runner import BY_ID, RUNGS, run_doctor
from console.durations import elapsed
from console.sanitize import clean, one_line, plain
from console.ui.fit_text import fill_width
from console.ui.widgets.fitted_footer import FittedFooter
from console.vocabulary import CheckStatus

STYLE = {"pass": "bold green", "fail": "bold red", "warn": "bold yellow", "skip": "dim", "running": "bold cyan",
         "pending": "dim", "cancelled": "magenta"}
MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "running": "RUN", "pending": "-",
        "cancelled": "CANC"}
TEXT_CHOICES = ("NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL")
FLAG_CHOICES = (("NCCL_NVLS_ENABLE", "0", "NCCL_NVLS_ENABLE=0 (no NVLink SHARP)"),
                ("NCCL_IB_DISABLE", "1", "NCCL_IB_DISABLE=1 (prove the socket path)"),
                ("NCCL_RUN_DIAGNOSTICS", "1", "NCCL_RUN_DIAGNOSTICS=1 (NCCL 2.31+: its own P2P/network checks)"))
assert set(TEXT_CHOICES) | {f[0] for f in FLAG_CHOICES} == set(OVERRIDE_CHOICES)


def _css(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


class DebugRelaunchScreen(ModalScreen[RelaunchPlan | None]):
    """Choose overrides per station, see the exact diff against the normal launch, then confirm."""

    DEFAULT_CSS = """
    DebugRelaunchScreen { align: center middle; }
    DebugRelaunchScreen > Vertical { width: 96%; height: 94%; border: thick $warning; padding: 0 1; background: $surface; }
    DebugRelaunchScreen #dr-form { height: auto; max-height: 50%; }
    DebugRelaunchScreen .dr-row { height: 3; }
    DebugRelaunchScreen .dr-name { width: 22; padding: 1 1 0 0; }
    DebugRelaunchScreen .dr-row Input { width: 1fr; }
    DebugRelaunchScreen #dr-flags { height: auto; }
    DebugRelaunchScreen #dr-diff-scroll { height: 1fr; border: round $panel; }
    DebugRelaunchScreen #dr-buttons { height: 3; align-horizontal: right; }
    DebugRelaunchScreen Button { margin-left: 1; }
    """
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel", id="doctor-relaunch-cancel")]

    def __init__(self, config: Config, suggested: dict[str, dict[str, str | None]], number: int) -> None:
        super().__init__()
        self.config, self.suggested, self.number = config, suggested, number
        self.names = [s.name for s in sorted(config.stations, key=lambda s: s.rank)]
        self.prepared: DebugRelaunch | None = None
        self._planned_for: dict | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text.assemble((f"Debug relaunch, try {self.number}", "bold"),
                                      "  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV + what you set below "
                                      "(empty = as the normal launch)"))
            with VerticalScroll(id="dr-form"):
                for var in TEXT_CHOICES:
                    with Horizontal(classes="dr-row"):
                        yield Label(var, classes="dr-name")
                        for st in self.names:
                            value = self.suggested.get(st, {}).get(var)
                            yield Input(value=value or "", placeholder=f"{st}: unchanged", id=f"dr-{_css(var)}-{_css(st)}")
                with Horizontal(id="dr-flags"):
                    for var, _value, label in FLAG_CHOICES:
                        yield Checkbox(label, id=f"dr-{_css(var)}")
                    yield Checkbox("restore the normal command afterwards", value=True, id="dr-restore")
            with VerticalScroll(id="dr-diff-scroll"):
                yield Static("Press Preview to see the exact difference from the normal launch command.", id="dr-diff")
            with Horizontal(id="dr-buttons"):
                yield Button("Cancel", id="dr-cancel")
                yield Button("Preview diff", id="dr-preview", variant="primary")
                yield Button("Relaunch", id="dr-go", variant="warning", disabled=True)

    def on_mount(self) -> None:
        # the first field, not the scrolling form around it (which swallowed typed keys)
        self.query_one("#dr-form Input", Input).focus()

    def plan(self) -> RelaunchPlan:
        overrides: dict[str, dict[str, str | None]] = {}
        for var in TEXT_CHOICES:
            for st in self.names:
                v = self.query_one(f"#dr-{_css(var)}-{_css(st)}", Input).value.strip()
                if v:
                    overrides.setdefault(st, {})[var] = v
        for var, value, _label in FLAG_CHOICES:
            if self.query_one(f"#dr-{_css(var)}", Checkbox).value:
                for st in self.names:
                    overrides.setdefault(st, {})[var] = value
        return RelaunchPlan(overrides, restore=self.query_one("#dr-restore", Checkbox).value, number=self.number)

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _changed(self) -> None:
        self.query_one("#dr-go", Button).disabled = True  # a new choice needs a new preview

    @on(Button.Pressed, "#dr-cancel")
    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#dr-preview")
    async def _preview(self) -> None:
        plan = self.plan()
        bad = [f"{st}:{k}={v}" for st, kv in plan.overrides.items() for k, v in kv.items()
               if v is not None and not all(ch.isalnum() or ch in "._,:^=/+-" for ch in v)]
        out = self.query_one("#dr-diff", Static)
        if bad:
            out.update(plain(f"not a valid value: {', '.join(bad)}", "bold red"))
            return
        out.update(Text("building the launch commands on the stations...", style="italic"))
        dr = DebugRelaunch(self.config, log_source=getattr(self.app, "log_source", None))
        try:
            diffs = await dr.plan(plan)
        except Exception as exc:  # noqa: BLE001 - shown in the dialog, never a crash
            out.update(plain(f"cannot build the launch commands: {one_line(plan_error(exc))}", "bold red"))
            return
        text = Text()
        for chunk in diffs.values():
            for line in clean(chunk).splitlines():
                style = "green" if line.startswith("+") else ("red" if line.startswith("-") else "")
                text.append(line + "\n", style=style)
        text.append("\nAfterwards: " + ("the normal command is relaunched." if plan.restore else
                                        "the try keeps running."), style="bold")
        out.update(text)
        self.prepared, self._planned_for = dr, plan.overrides
        self.query_one("#dr-go", Button).disabled = False

    @on(Button.Pressed, "#dr-go")
    def _go(self) -> None:
        plan = self.plan()
        if self.prepared is None or plan.overrides != self._planned_for:
            self.query_one("#dr-go", Button).disabled = True
            return
        plan.prepared = self.prepared
        self.dismiss(plan)


class DoctorScreen(Screen):
    TITLE = "NCCL workbench"
    SUB_TITLE = "from nccl-timeout to the cause"
    DEFAULT_CSS = """
    DoctorScreen #doc-status { height: auto; max-height: 4; padding: 0 1; text-wrap: nowrap;
                               text-overflow: ellipsis; }
    DoctorScreen #doc-table { height: 1fr; min-height: 6; }
    DoctorScreen #doc-detail-scroll { height: 1fr; border-top: solid $primary; padding: 0 1; }
    DoctorScreen #doc-tries { height: auto; max-height: 8; border-top: solid $panel; display: none; }
    DoctorScreen.-tries #doc-tries { display: block; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="doctor-back"),
        Binding("a", "run_all", "Run all", id="doctor-run-all", tooltip="Climb the whole ladder again"),
        Binding("r", "rerun", "Re-run rung", id="doctor-rerun", tooltip="Run the selected row's rung again"),
        Binding("c", "cancel", "Cancel", id="doctor-cancel", tooltip="Stop the running rung (it cleans up)"),
        Binding("x", "relaunch", "Debug relaunch", id="doctor-relaunch",
                tooltip="Relaunch with NCCL debug and overrides (shows the diff first)"),
        Binding("p", "toggle_passes", "Show passes", id="doctor-passes", tooltip="Show or fold the passing rows"),
        Binding("h", "app.hang_evidence", "Hang evidence", id="doctor-hang", show=False,
                tooltip="Evidence from every rank at the same moment (py-spy, flight recorder, NCCL RAS)"),
    ]

    def __init__(self, config: Config, read_only: bool = False, reason: str = "", autostart: bool = True,
                 transports=None, options: DoctorOptions | None = None) -> None:
        super().__init__()
        self.config, self.read_only, self.reason = config, read_only, reason
        self.autostart, self.transports = autostart, transports
        self.options = options or DoctorOptions()
        self.report = DoctorReport(order=tuple(r.id for r in RUNGS))
        self.rung_state: dict[str, str] = {r.id: "pending" for r in RUNGS}
        self.progress_text = ""
        self.tries: list[TryResult] = [TryResult.from_dict(t) for t in store.tries(config)]
        self._job: Worker | None = None  # the ladder's run, a worker of this screen
        self._stop = asyncio.Event()  # c: the running rung is cancelled and cleans up
        self._row_keys: list[str] = []
        self.show_passes = False

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="doc-status")
            yield DataTable(id="doc-table", cursor_type="row", zebra_stripes=False)
            with VerticalScroll(id="doc-detail-scroll"):
                yield Static("", id="doc-detail")
            yield DataTable(id="doc-tries", cursor_type="row", show_cursor=False)
        yield FittedFooter()

    def on_mount(self) -> None:
        self._add_columns()
        tries = self.query_one("#doc-tries", DataTable)
        for label in ("try", "what changed", "what happened", "NCCL said", "afterwards"):
            tries.add_column(label, key=label)
        saved = store.load(self.config).get("report")
        if saved and saved.get("rungs"):
            named = saved.get("cause") or {}
            self.report.results = [RungResult(r["id"], r["station"], r["status"], r["summary"],
                                              tuple(r.get("evidence") or ()), r.get("next", ""),
                                              cause=(r["id"], r["station"], r["summary"]) == (
                                                  named.get("id"), named.get("station"), named.get("summary")))
                                   for r in saved["rungs"] if r.get("id") in BY_ID]
            self.report.cancelled = bool(saved.get("cancelled"))
            for rid in {r.id for r in self.report.results}:
                self.rung_state[rid] = "done"
        self._fill_table()
        self._fill_tries()
        if self.autostart:
            self.action_run_all()

    # ------------------------------------------------------------ rendering

    _FIXED = (("n", "#", 2), ("rung", "rung", 10), ("status", "status", 6), ("station", "station", 10))

    def _summary_width(self) -> int:
        """The summary column takes the width the others leave, so it is never cut at the screen edge."""
        return fill_width(self.size.width or self.app.size.width, [w for _k, _l, w in self._FIXED])

    def _add_columns(self) -> None:
        table = self.query_one("#doc-table", DataTable)
        self._summary_w = self._summary_width()
        for key, label, width in (*self._FIXED, ("summary", "summary", self._summary_w)):
            table.add_column(label, key=key, width=width)

    def on_resize(self) -> None:
        if getattr(self, "_summary_w", None) not in (None, self._summary_width()):
            self.query_one("#doc-table", DataTable).clear(columns=True)
            self._add_columns()
            self._fill_table()

    def _fit(self, text: Text) -> Text:
        """A summary cut at its column's edge ends in an ellipsis (the detail below has it whole)."""
        if text.cell_len > self._summary_w:
            text = text.copy()
            text.truncate(self._summary_w, overflow="ellipsis")
        return text

    def _fill_table(self) -> None:
        table = self.query_one("#doc-table", DataTable)
        keep = self._selected_key()
        table.clear()
        self._row_keys = []
        for rung in RUNGS:
            results = self.report.of(rung.id)
            st = self.rung_state[rung.id]
            status = st if st in ("running", "pending", "cancelled") else (worst(results) or "skip")
            table.add_row(Text(str(rung.number), style="bold"), Text(rung.id, style="bold"),
                          Text(MARK[status], style=STYLE[status]), "", self._fit(self._rung_summary(rung.id)),
                          key=f"rung:{rung.id}")
            self._row_keys.append(f"rung:{rung.id}")
            for i, r in enumerate(results):
                if r.status == CheckStatus.PASS and not self.show_passes and rung.id != "relaunch":
                    continue
                key = f"res:{rung.id}:{i}"
                table.add_row("", "", Text(MARK[r.status], style=STYLE[r.status]), one_line(r.station, 10),
                              self._fit(plain(one_line(r.summary, 300))), key=key)
                self._row_keys.append(key)
        if keep in self._row_keys:
            table.move_cursor(row=self._row_keys.index(keep))
        self._show_status()
        self._show_detail()

    def _rung_summary(self, rid: str) -> Text:
        rung, st = BY_ID[rid], self.rung_state[rid]
        if st == "running":
            return Text(rung.title + (f"  -- {one_line(self.progress_text, 120)}" if self.progress_text else
                                      "  -- running..."), style="bold cyan")
        results = self.report.of(rid)
        if not results:
            return Text(rung.title + ("  -- cancelled" if st == "cancelled" else ""), style="dim")
        c = counts(results)
        parts = [f"{c['fail']} FAIL"] if c["fail"] else []
        parts += [f"{c[k]} {k}" for k in ("warn", "skip", "pass") if c[k]]
        hidden = "" if self.show_passes or not c["pass"] or rid == "relaunch" else " (p shows the passes)"
        return Text(f"{rung.title}  -- {', '.join(parts)}{hidden}", style="bold")

    def action_toggle_passes(self) -> None:
        self.show_passes = not self.show_passes
        self._fill_table()

    def _focus_verdict(self) -> None:
        """After a run: the cursor on the first failure of the verdict's rung (what to read first)."""
        v = self.report.verdict
        if v == "ok":
            return
        idx = next((i for i, r in enumerate(self.report.of(v)) if r.status == CheckStatus.FAIL), None)
        key = f"res:{v}:{idx}"
        if key in self._row_keys:
            self.query_one("#doc-table", DataTable).move_cursor(row=self._row_keys.index(key))
            self._show_detail()

    def _fill_tries(self) -> None:
        tries = self.query_one("#doc-tries", DataTable)
        tries.clear()
        for t in self.tries[-6:]:
            tries.add_row(f"#{t.number}", one_line("; ".join(t.changed) or "debug output only", 50),
                          Text(one_line(f"{t.result} ({elapsed(t.seconds, 0)})", 30),
                               style="green" if t.result.startswith("ready") else "red"),
                          one_line("; ".join(f"{k}: {v}" for k, v in t.nccl.items()), 70), one_line(t.restored, 50))
        self.set_class(bool(self.tries), "-tries")

    def _show_status(self) -> None:
        text = Text()
        running = [r for r in RUNGS if self.rung_state[r.id] == "running"]
        if self.reason:
            text.append(f"investigating {one_line(self.reason, 100)}  ", style="italic")
        if running:
            text.append(f"running {running[0].number} {running[0].id}... (c cancels)", style="bold cyan")
        elif self.report.results:
            v = self.report.verdict
            text.append(f"verdict: {v}", style="bold green" if v == "ok" else
                        "bold magenta" if v == "cancelled" else "bold red")
            text.append({"ok": "", "cancelled": " (the run stopped before its end)"}.get(
                v, " (the first failing rung)"))
            cause, nxt = self.report.conclusion()
            text.append("\ncause: ", style="bold")
            text.append(one_line(cause, 160))
            text.append("\nnext: ", style="bold green")
            text.append(one_line(nxt, 160))
        else:
            text.append("not run yet (a: run the ladder)", style="dim")
        self.query_one("#doc-status", Static).update(text)

    def _selected_key(self) -> str | None:
        table = self.query_one("#doc-table", DataTable)
        if not table.row_count:
            return None
        with contextlib.suppress(Exception):
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None

    def _selected_rung(self) -> str | None:
        key = self._selected_key() or ""
        return key.split(":")[1] if ":" in key else None

    def _show_detail(self) -> None:
        key = self._selected_key() or ""
        body = Text()
        parts = key.split(":")
        if parts[0] == "res" and len(parts) == 3:
            results = self.report.of(parts[1])
            idx = int(parts[2])
            if idx < len(results):
                r = results[idx]
                body.append(f"{BY_ID[r.id].number} {r.id}  {one_line(r.station)}  ", style="bold")
                body.append(MARK[r.status] + "\n", style=STYLE[r.status])
                body.append_text(plain(clean(r.summary) + "\n"))
                if r.next:
                    body.append("\nNext: ", style="bold green")
                    body.append_text(plain(clean(r.next) + "\n"))
                if r.evidence:
                    body.append("\nEvidence\n", style="bold")
                    for e in r.evidence:
                        body.append_text(plain(clean(e) + "\n\n"))
        elif parts[0] == "rung" and len(parts) == 2:
            rung = BY_ID[parts[1]]
            results = self.report.of(rung.id)
            body.append(f"{rung.number} {rung.id}: {rung.title}\n", style="bold")
            body.append_text(plain(_DOC.get(rung.id, "") + "\n"))
            if results:
                fails = [r for r in results if r.status == CheckStatus.FAIL]
                body.append(f"\n{len(results)} results, {len(fails)} failing. ", style="bold")
                if fails and fails[0].next:
                    body.append("Next: ", style="bold green")
                    body.append_text(plain(clean(fails[0].next)))
            if rung.id == "relaunch":
                body.append("\n\nPress x to choose overrides, see the diff and relaunch.", style="italic")
        self.query_one("#doc-detail", Static).update(body)

    @on(DataTable.RowHighlighted, "#doc-table")
    def _highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # ------------------------------------------------------------ running

    def _on_rung(self, rung: str, state: str, results: list[RungResult]) -> None:
        if state == "running":
            self.rung_state[rung] = "running"
            self.progress_text = ""
            self.report.results = [r for r in self.report.results if r.id != rung]
        else:
            self.rung_state[rung] = "cancelled" if state == "cancelled" else "done"
            self.report.results = [r for r in self.report.results if r.id != rung] + list(results)
            self.report.results.sort(key=lambda r: BY_ID[r.id].number)
        self._fill_table()

    def _on_progress(self, rung: str, text: str) -> None:
        self.progress_text = text
        with contextlib.suppress(Exception):
            table = self.query_one("#doc-table", DataTable)
            table.update_cell(f"rung:{rung}", "summary", self._rung_summary(rung))

    def _start(self, rungs: list[str], options: DoctorOptions | None = None) -> None:
        if self.running:
            self.notify("The workbench is already running (c cancels).", severity="warning")
            return
        for rid in rungs:
            self.rung_state[rid] = "pending"
        self._stop = asyncio.Event()
        self._job = self.run_worker(self._drive(rungs, options or self.options), name="doctor ladder",
                                    group="doctor", exit_on_error=False)

    @property
    def job(self) -> Worker | None:
        """The latest run of the ladder (a worker of this screen: ``await screen.job.wait()``)."""
        return self._job

    @property
    def running(self) -> bool:
        """A run of the ladder is under way."""
        return self._job is not None and not self._job.is_finished

    @property
    def finished(self) -> bool:
        """A run was started and has ended (done, failed or cancelled)."""
        return self._job is not None and self._job.is_finished

    def stop_run(self) -> bool:
        """Cancel the running rung (it ends its remote processes); False when nothing runs."""
        if not self.running:
            return False
        prepared = self.options.relaunch.prepared if self.options.relaunch else None
        if not (isinstance(prepared, DebugRelaunch) and prepared.cancel()):
            self._stop.set()
        return True

    async def _drive(self, rungs: list[str], options: DoctorOptions) -> None:
        previous = [r for r in self.report.results if r.id not in rungs]
        try:
            rep = await run_doctor(self.config, self.transports, rungs, options, self._on_rung, self._on_progress,
                                   previous=previous, stop=self._stop)
        except Exception as exc:  # noqa: BLE001 - shown, never a dead task
            self.notify(f"the workbench failed: {one_line(str(exc), 200)}", severity="error", timeout=10, markup=False)
            for rid in rungs:
                if self.rung_state[rid] == "running":
                    self.rung_state[rid] = "done"
            self._fill_table()
            return
        for rid in rungs:
            if self.rung_state[rid] in ("running", "pending"):
                self.rung_state[rid] = "cancelled" if rep.cancelled else "done"
        self.report.cancelled = rep.cancelled
        store.save_report(self.config, self.report.to_dict())
        if "relaunch" in rungs and options.relaunch is not None:
            self.tries = [TryResult.from_dict(t) for t in store.tries(self.config)]
            self._fill_tries()
        self._fill_table()
        self._focus_verdict()
        if rep.cancelled:
            self.notify("cancelled: the running rung ended its remote processes", timeout=5)

    def action_run_all(self) -> None:
        self._start([r.id for r in RUNGS])

    def action_rerun(self) -> None:
        rung = self._selected_rung()
        if rung is None:
            return
        if rung == "relaunch":
            self.action_relaunch()
            return
        self._start([rung])

    def action_cancel(self) -> None:
        if not self.stop_run():
            self.notify("Nothing is running.", timeout=3)

    def action_relaunch(self) -> None:
        if self.read_only:
            self.notify("read-only mode: the debug relaunch is disabled (--read-only)", severity="warning")
            return
        if self.running:
            self.notify("Wait for the ladder to finish (or cancel it with c) before relaunching.", severity="warning")
            return
        number = max([t.number for t in self.tries] + [0]) + 1
        self.app.push_screen(DebugRelaunchScreen(self.config, self.report.suggestions(), number), self._relaunch)

    def _relaunch(self, plan: RelaunchPlan | None) -> None:
        if plan is None:
            return
        opts = DoctorOptions(**{**self.options.__dict__, "relaunch": plan})
        self.options = opts
        self._start(["relaunch"], opts)


def _doc_of(rung_id: str) -> str:
    import importlib

    mod = importlib.import_module(f"console.doctor.rungs.{rung_id}")
    return " ".join((mod.__doc__ or "").replace("``", "").split())


_DOC = {r.id: _doc_of(r.id) for r in RUNGS}
