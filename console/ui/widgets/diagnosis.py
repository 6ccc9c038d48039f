"""Diagnosis panel: ranked findings (root cause first), the selected one's evidence and fix.

Pure presentation: the app hands it ``Finding`` objects (``update_findings``); it does no I/O.
``station_badge`` gives the short severity badge a station pane shows next to its title.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from console.diagnosis import Finding
from console.diagnosis.findings import PastRun
from console.sanitize import one_line
from console.ui.widgets.mounted import while_mounted

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_MARK = {"error": "✖", "warning": "▲", "info": "●"}
# Connection states in which a station's log is being read (or about to be): any other state
# (unreachable, a host key waiting, an error) means the diagnosis cannot see that station now.


# The panel's own keys, always on screen under it (a toast that said "i: investigate" was gone in 10 s).
KEYS_LINE = Text.assemble(("↑↓", "bold"), " finding  ", ("Enter", "bold"), " log line  ",
                          ("i", "bold"), " investigate (workbench)  ", ("k", "bold"), " checks  ",
                          ("d", "bold"), " close")


def finding_key(f: Finding, run: PastRun | None = None) -> str:
    """The option's id: a live finding by id and station, a past run's also by when that run ended."""
    return f"{f.id}@{f.station}" if run is None else f"{f.id}@{f.station}@ended-{run.ended_at}"


def past_run_title(run: PastRun) -> str:
    """``previous run of B (ended 14:03:41)`` (the run's one wording: ``PastRun.title``)."""
    return run.title


def station_badge(findings: Iterable[Finding], station: str) -> Text | None:
    """``diagnosis: ✖ 2 errors, 1 warning (d)`` for one station (worst severity's mark), or None."""
    mine = [f for f in findings if f.station == station and f.severity in ("error", "warning")]
    if not mine:
        return None
    counts = {sev: sum(f.severity == sev for f in mine) for sev in ("error", "warning")}
    worst = "error" if counts["error"] else "warning"
    what = ", ".join(f"{n} {sev}{'' if n == 1 else 's'}" for sev, n in counts.items() if n)
    return Text.assemble(("diagnosis: ", "dim"), (f"{SEVERITY_MARK[worst]} {what}", SEVERITY_STYLE[worst]),
                         (" (d)", "dim"))


def _option_label(rank: int, f: Finding, past: bool = False) -> Text:
    """A live finding's row; a past run's is dimmed whole (its severity was that run's)."""
    t = Text(style="dim" if past else "")
    t.append(f"{rank:>2}. ", style="dim")
    t.append(f"{SEVERITY_MARK[f.severity]} ", style="dim" if past else SEVERITY_STYLE[f.severity])
    t.append(f.id, style="" if past else "bold")
    t.append(f"  {one_line(f.station)}", style="dim")
    if f.count > 1:
        t.append(f"  ×{f.count}", style="dim")
    return t


def _section_label(run: PastRun) -> Text:
    return Text(f"── {past_run_title(run)} ──", style="dim italic")


def render_detail(f: Finding, run: PastRun | None = None) -> Text:
    """Cause, evidence, remedy and, when the console can do it, the next step as a key to press.
    Everything that came from a log passes the sanitizer (no escape sequence reaches the terminal).
    ``run``: the ended run the finding belongs to (it says so first: it is no current fault)."""
    t = Text()
    if run is not None:
        t.append(f"{past_run_title(run)}: not the container's current run\n\n", style="bold dim")
    t.append(f"{f.severity.upper()} ", style=SEVERITY_STYLE[f.severity])
    t.append(f"{f.id}", style="bold")
    t.append(f" on {one_line(f.station)}\n\n", style="dim")
    t.append("Cause  ", style="bold")
    t.append(f"{one_line(f.cause)}\n")
    if f.explained_by:
        t.append("Likely explained by  ", style="bold")
        t.append(f"{one_line(f.explained_by)}\n")
    t.append("Fix  ", style="bold green")
    t.append(f"{one_line(f.remedy)}\n")
    if f.next_action:
        t.append("Next  ", style="bold cyan")
        t.append(f"{f.next_action}\n")
    t.append("\nEvidence", style="bold")
    if f.count > len(f.evidence):
        t.append(f"  ({len(f.evidence)} of {f.count} lines)", style="dim")
    t.append("\n")
    for ev in f.evidence:
        where = f"{one_line(ev.source)}:{ev.line}" if ev.line is not None else one_line(ev.source)
        t.append(f"  {where}  ", style="dim")
        t.append(f"{one_line(ev.text)}\n")
        frames = ev.context[:6] if f.id == "unrecognised-error" else ev.context[-6:]  # where it started
        for c in frames:
            t.append(f"      │ {one_line(c)}\n", style="dim")
    return t


def unread_text(unread: dict[str, str]) -> str:
    """``B's log not read (unreachable)``; several: ``logs of B, C not read (unreachable, error)``."""
    names = sorted(unread)
    why = ", ".join(dict.fromkeys(one_line(unread[n], 40) for n in names))
    if len(names) == 1:
        return f"{one_line(names[0], 32)}'s log not read ({why})"
    return f"logs of {', '.join(one_line(n, 32) for n in names)} not read ({why})"


def summary_text(findings: Sequence[Finding], unread: dict[str, str] | None = None, past: int = 0) -> Text:
    """The panel's first line: counts by severity, and the stations whose logs could not be read
    (a station that is down can hold the cause: "No findings" alone would be a lie). ``past``: findings
    of ended runs listed below the live ones (said, dimmed: they are not counted as current)."""
    t = _live_summary(findings, unread or {})
    if past:
        t.append(f" · {past} finding{'s' if past != 1 else ''} of a previous run (below)", style="dim")
    return t


def _live_summary(findings: Sequence[Finding], unread: dict[str, str]) -> Text:
    if not findings:
        if not unread:
            return Text("No findings", style="green")
        return Text.assemble(("No findings in the logs read — ", "yellow"), (unread_text(unread), "bold yellow"))
    t = Text(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}: ")
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITY_STYLE}
    parts = [(f"{n} {s}{'s' if n != 1 else ''}", SEVERITY_STYLE[s]) for s, n in counts.items() if n]
    for i, (label, style) in enumerate(parts):
        if i:
            t.append(", ")
        t.append(label, style=style)
    if unread:
        t.append(" · ", style="dim")
        t.append(unread_text(unread), style="bold yellow")
    return t


class DiagnosisPanel(Vertical):
    """Ranked findings on the left of the detail of the highlighted one."""

    # Narrow: the list above the detail, at most 5 rows of it (the detail's Cause and Fix must show
    # without scrolling on 80x24); wide: the list beside the detail, both full height.
    DEFAULT_CSS = """
    DiagnosisPanel { height: 1fr; }
    DiagnosisPanel #diag-summary { height: 1; padding: 0 1; }
    DiagnosisPanel #diag-body { layout: vertical; height: 1fr; }
    DiagnosisPanel #diag-list { height: auto; max-height: 5; border: none; padding: 0; }
    DiagnosisPanel #diag-list:focus { background-tint: $foreground 4%; }
    DiagnosisPanel #diag-detail-scroll { height: 1fr; border-top: solid $panel; }
    DiagnosisPanel #diag-detail { padding: 0 1; }
    DiagnosisPanel #diag-keys { height: 1; padding: 0 1; color: $text-muted; }
    DiagnosisPanel.-wide #diag-body { layout: horizontal; }
    DiagnosisPanel.-wide #diag-list { width: 46; height: 1fr; max-height: 100%; }
    DiagnosisPanel.-wide #diag-detail-scroll { border-top: none; border-left: solid $panel; }
    """
    WIDE = 110  # columns from which the list sits beside the detail

    class FindingSelected(Message):
        """The operator chose a finding (Enter/click): the app may jump to its log line."""

        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._findings: list[Finding] = []
        self._past: list[PastRun] = []
        self._rows: list[tuple[Finding, PastRun | None] | None] = []  # the list's rows (None: a section title)
        self._shape: tuple = ()
        self._unread: dict[str, str] = {}  # station -> why its log cannot be read now

    def set_unread(self, unread: dict[str, str]) -> None:
        """Stations whose logs the diagnosis cannot read now (``{"B": "unreachable"}``): "No
        findings" is never said while one of them is down."""
        if unread != self._unread:
            self._unread = dict(unread)
            if self.is_mounted:
                self._update_summary()

    def compose(self) -> ComposeResult:
        yield Static("No findings", id="diag-summary")
        with Container(id="diag-body"):
            yield OptionList(id="diag-list")
            with VerticalScroll(id="diag-detail-scroll"):
                yield Static("", id="diag-detail")
        yield Static(KEYS_LINE, id="diag-keys")

    def on_resize(self) -> None:
        self.set_class(self.size.width >= self.WIDE, "-wide")

    @property
    def findings(self) -> list[Finding]:
        return list(self._findings)

    def select_first(self) -> None:
        """Highlight the first finding (the root cause): where the panel opens."""
        if self._rows:
            self.query_one(OptionList).highlighted = next(i for i, row in enumerate(self._rows) if row is not None)
            self._show_detail()

    @property
    def previous(self) -> list[PastRun]:
        """The ended runs listed below the live findings."""
        return list(self._past)

    def _selected_row(self) -> tuple[Finding, PastRun | None] | None:
        idx = self.query_one(OptionList).highlighted
        return self._rows[idx] if idx is not None and idx < len(self._rows) else None

    @property
    def selected(self) -> Finding | None:
        row = self._selected_row()
        return row[0] if row is not None else None

    @while_mounted
    def update_findings(self, findings: Sequence[Finding], previous: Sequence[PastRun] = ()) -> None:
        """Show these findings (already ranked, root cause first), then, in a dimmer section of their own,
        those of ended runs (``previous``, newest first); keeps the highlighted one."""
        shape = (tuple((finding_key(f), f.severity, f.count, f.cause, f.explained_by, len(f.evidence))
                       for f in findings), tuple((r.station, r.ended_at, len(r.findings)) for r in previous))
        if shape == self._shape:
            return
        self._shape = shape
        olist = self.query_one(OptionList)
        row = self._selected_row()
        keep = finding_key(*row) if row is not None else None
        self._findings, self._past = list(findings), list(previous)
        self._rows = [(f, None) for f in self._findings]
        options = [Option(_option_label(i + 1, f), id=finding_key(f)) for i, f in enumerate(self._findings)]
        for run in self._past:
            self._rows.append(None)
            options.append(Option(_section_label(run), id=f"run@{run.station}@{run.ended_at}", disabled=True))
            for i, f in enumerate(run.findings):
                self._rows.append((f, run))
                options.append(Option(_option_label(i + 1, f, past=True), id=finding_key(f, run)))
        olist.clear_options()
        olist.add_options(options)
        keys = [finding_key(*r) if r is not None else None for r in self._rows]
        if self._findings or self._past:
            olist.highlighted = keys.index(keep) if keep in keys else next(
                i for i, r in enumerate(self._rows) if r is not None)
        self._update_summary()
        self._show_detail()

    def _update_summary(self) -> None:
        past = sum(len(r.findings) for r in self._past)
        self.query_one("#diag-summary", Static).update(summary_text(self._findings, self._unread, past))

    def _show_detail(self) -> None:
        row = self._selected_row()
        self.query_one("#diag-detail", Static).update(render_detail(*row) if row is not None else "")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_detail()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        f = self.selected
        if f is not None:
            self.post_message(self.FindingSelected(f))
