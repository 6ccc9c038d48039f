"""The dashboard's banner when nothing moves: a wedged or stuck service, since when, the
evidence, and the key to the hang evidence.

Rendering only: the dashboard judges the stations' states (console/station/progress.py) on its
timer and hands the service's verdict here; hidden while nothing is wrong. The words come from the
judge, which builds them from the console's own figures (counter, requests, GPU readings), and
pass ``one_line`` anyway: the banner is never Rich markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from console.doctor.next_steps import banner_step
from console.durations import clock, time_of_day
from console.sanitize import one_line
from console.station.verdict import Verdict
from console.ui.palette import palette_of

HINT = "h: hang evidence"


def banner_text(verdict: Verdict, now: float, error_style: str = "bold red") -> Text:
    """``⚠ WEDGED since 14:03:41 (0:42) · h: hang evidence — A: wedged for 0:42: ...``, then the
    evidence (the key comes first: a small terminal clips the evidence, never the way to it)."""
    head = Text(f"⚠ {verdict.state.upper()}", style=error_style)
    if verdict.since is not None:
        head.append(f" since {time_of_day(verdict.since)} ({clock(now - verdict.since)})", style="bold")
    head.append(" · ")
    head.append(HINT, style="bold reverse")
    where = f"{verdict.station}: " if verdict.station else ""
    head.append(f" — {where}{one_line(verdict.words, 300)}")
    lines = [head]
    if step := banner_step(verdict.state):  # the shared table's next step, one line, before the evidence
        lines.append(Text(step, style="bold", no_wrap=True, overflow="ellipsis"))
    if verdict.evidence:
        lines.append(Text(one_line(" · ".join(verdict.evidence), 600), style="dim"))
    return Text("\n").join(lines)


class ProgressBanner(Static):
    """Shown while the service is wedged or stuck; the verdict's words, evidence and the key."""

    DEFAULT_CSS = """
    ProgressBanner { height: auto; max-height: 6; display: none; border-left: thick $error;
                     background: $error 15%; padding: 0 1; }
    ProgressBanner.-alarm { display: block; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.verdict: Verdict | None = None

    def show(self, verdict: Verdict | None, now: float) -> None:
        """The service's verdict at ``now``: the banner shows while it is an alarm."""
        self.verdict = verdict
        alarm = verdict is not None and verdict.alarm
        self.set_class(alarm, "-alarm")
        if alarm:
            assert verdict is not None
            self.update(banner_text(verdict, now, f"bold {palette_of(self.app).error}"))
