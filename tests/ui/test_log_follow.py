"""Logs keep following by themselves: only the operator's own scroll up (Home,
PageUp, the wheel, the scrollbar) pauses a pane; another screen coming and going, the diagnosis
opening and closing, a resize, the filter box opening, a restart never do."""

from __future__ import annotations

from console.station.messages import LogBatch, LogMarker
from tests.ui.pair_app import pair_app
from tests.waiting import until


def _lines(prefix: str, n: int) -> list[str]:
    return [f"{prefix} line {i}" for i in range(n)]


async def _feed(app, pilot, prefix: str, n: int = 60) -> None:
    for name in ("A", "B"):
        before = app.panes[name].log_pane.total
        app.post_message(LogBatch(name, _lines(f"{name} {prefix}", n)))
        await until(lambda name=name, before=before: app.panes[name].log_pane.total >= before + n, what=f"{name}'s {prefix} lines",
                    pilot=pilot)


def _last_shown(app, name: str) -> str:
    log = app.panes[name].log_pane.log_widget
    bottom = log.scroll_offset.y + log.scrollable_content_region.height - 1
    return log.lines[min(bottom, len(log.lines) - 1)]


async def _following(app, pilot, prefix: str, last: int = 59) -> None:
    for name in ("A", "B"):
        pane = app.panes[name].log_pane
        await until(lambda pane=pane, name=name: not pane.has_class("-paused")
                    and _last_shown(app, name) == f"{name} {prefix} line {last}",
                    what=f"{name} following to its newest line", pilot=pilot, timeout=5,
                    detail=lambda pane=pane, name=name: (pane.has_class("-paused"), _last_shown(app, name)))


async def test_another_screen_coming_and_going_never_pauses_and_a_new_run_shows_its_marker():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await _feed(app, pilot, "old")
        await _following(app, pilot, "old")
        await pilot.press("k")  # another screen over the dashboard (as R's progress screen is)
        await until(lambda: app.screen is not app.dashboard, what="checks screen", pilot=pilot)
        app.post_message(LogBatch("A", [LogMarker("— A: container glm53 started 07:17:30 (a new run) —")]))
        await _feed(app, pilot, "new", n=20)
        await pilot.press("escape")
        await until(lambda: app.screen is app.dashboard, what="back on the dashboard", pilot=pilot)
        await _following(app, pilot, "new", last=19)
        log = app.panes["A"].log_pane.log_widget
        shown = [log.lines[r] for r in range(int(log.scroll_offset.y), len(log.lines))]
        assert shown[-21].startswith("— A: container glm53 started") and shown[-20] == "A new line 0"


async def test_the_diagnosis_opening_and_closing_never_pauses():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await _feed(app, pilot, "old")
        await pilot.press("d")
        await _feed(app, pilot, "mid")
        await _following(app, pilot, "mid")
        await pilot.press("d")
        await _feed(app, pilot, "new")
        await _following(app, pilot, "new")


async def test_a_resize_never_pauses():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await _feed(app, pilot, "old")
        await pilot.resize_terminal(120, 35)
        await _feed(app, pilot, "new")
        await _following(app, pilot, "new")
        await pilot.resize_terminal(80, 24)
        await _feed(app, pilot, "newer")
        await _following(app, pilot, "newer")


async def test_the_filter_box_open_never_hides_the_newest_lines():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await _feed(app, pilot, "old")
        app.panes["A"].log_pane.log_widget.focus()
        await pilot.press("slash")
        await until(lambda: app.panes["A"].log_pane.has_class("filtering"), what="filter box", pilot=pilot)
        await _feed(app, pilot, "new")
        await _following(app, pilot, "new")


async def test_only_the_operators_scroll_up_pauses_and_end_follows_again():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await _feed(app, pilot, "old")
        pane = app.panes["A"].log_pane
        pane.log_widget.focus()
        await pilot.press("home")
        await until(lambda: pane.has_class("-paused"), what="paused by Home", pilot=pilot)
        await _feed(app, pilot, "new")
        await pilot.press("k")
        await until(lambda: app.screen is not app.dashboard, what="checks screen", pilot=pilot)
        await pilot.press("escape")
        await until(lambda: app.screen is app.dashboard, what="back", pilot=pilot)
        assert pane.has_class("-paused") and pane.log_widget.scroll_offset.y == 0  # the operator's pause stands
        pane.log_widget.focus()
        await pilot.press("end")
        await _following(app, pilot, "new")


async def test_a_pane_that_comes_back_shows_its_newest_line_without_a_new_batch():
    app = pair_app()
    async with app.run_test(size=(120, 35)) as pilot:
        await _feed(app, pilot, "old")
        await pilot.press("d")  # the diagnosis covers the panes while lines arrive
        await _feed(app, pilot, "new")
        await pilot.press("d")
        await _following(app, pilot, "new")


async def test_the_wheel_up_pauses_and_down_to_the_end_follows_again():
    from textual import events

    from console.ui.widgets.log_pane import LogPane
    from tests.ui.test_log_pane import PaneApp, add

    def wheel(kind, log):
        return kind(log, 5, 3, 0, 0, 0, False, False, False, screen_x=5, screen_y=3)

    app = PaneApp()
    async with app.run_test(size=(60, 10)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, [f"l{i}" for i in range(100)])
        log = pane.log_widget
        log.post_message(wheel(events.MouseScrollUp, log))
        await until(lambda: pane.has_class("-paused"), what="paused by the wheel", pilot=pilot)
        for _ in range(10):
            log.post_message(wheel(events.MouseScrollDown, log))
        await until(lambda: not pane.has_class("-paused") and log.following, what="following at the end",
                    pilot=pilot, detail=lambda: (log.scroll_offset.y, log.max_scroll_y))


async def test_the_filter_keeps_the_host_prefix_in_sight_and_never_shifts_the_log_sideways():
    """``/`` with a word that sits far to the right of a long line: the view stays at column 0, so each
    shown line still starts with its host prefix (whose line it is); the matches are the only rows."""
    app = pair_app()
    async with app.run_test(size=(120, 35)) as pilot:
        pad = "x" * 180
        lines = [f"station-a:412:530 [0] NCCL INFO {pad} line {i}" + (" needle here" if i % 3 == 0 else "")
                 for i in range(30)]
        app.post_message(LogBatch("A", lines))
        pane = app.panes["A"].log_pane
        await until(lambda: pane.total >= 30, what="A's lines", pilot=pilot)
        log = pane.log_widget
        log.focus()
        await pilot.press("right", "right", "right")  # the operator had looked sideways before
        await pilot.press("slash")
        await until(lambda: pane.has_class("filtering"), what="filter box", pilot=pilot)
        await pilot.press(*"needle")
        await until(lambda: pane.filter_text == "needle" and len(log.lines) == 10, what="the ten matches",
                    pilot=pilot, detail=lambda: (pane.filter_text, len(log.lines)))
        await pilot.pause()
        await until(lambda: log.scroll_offset.x == 0, what="column 0", pilot=pilot,
                    detail=lambda: log.scroll_offset)
        assert all(ln.startswith("station-a:412:530 [0]") and "needle" in ln for ln in log.lines)
        shown = log.render_line(0).text
        assert shown.startswith("station-a:412:530 [0] NCCL INFO"), shown
