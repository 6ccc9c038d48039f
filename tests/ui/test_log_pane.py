"""The log pane says what a plain Log leaves unsaid: a line cut at the edge, where a filter's
match is, the line the diagnosis pointed at, and that it stopped following after Home."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Static

from console.ui.widgets.log_pane import EDGE_STYLE, MARK_STYLE, LogPane

sys.path.insert(0, str(Path(__file__).parent))
from pair_app import until  # noqa: E402


class PaneApp(App):
    def compose(self) -> ComposeResult:
        yield LogPane(max_lines=1000)


def row(pane: LogPane, y: int) -> tuple[str, list]:
    """The text and segments of the log's visible row ``y``."""
    strip = pane.log_widget.render_line(y)
    return "".join(seg.text for seg in strip), list(strip)


async def test_a_line_cut_at_the_edge_ends_in_a_marker():
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(["short", "x" * 60 + "END"])
        await pilot.pause()
        visible = pane.log_widget.scrollable_content_region.width
        text, segs = row(pane, 1)
        assert text[visible - 1] == "…" and any(s.text == "…" and s.style.bgcolor == EDGE_STYLE.bgcolor for s in segs)
        assert "…" not in row(pane, 0)[0]
        pane.log_widget.scroll_to(x=30, animate=False, immediate=True)
        await pilot.pause()
        text, _ = row(pane, 1)
        assert text.startswith("‹") and "END" in text and "…" not in text  # scrolled to its end


async def test_a_filter_match_is_highlighted_and_scrolled_into_view():
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one(LogPane)
        far = "station-b:412:530 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA"
        pane.add_lines(["boot", far, "other"])
        pane.set_filter("gdrdma")
        await until(pilot, lambda: pane.log_widget.scroll_offset.x > 0, "scrolled to the match")
        assert list(pane.log_widget.lines) == [far]
        assert pane.log_widget.scroll_offset.x > 0
        text, segs = row(pane, 0)
        assert "GDRDMA" in text
        assert any("GDRDMA" in s.text and s.style is not None and s.style.reverse for s in segs)
        pane.set_filter("")  # all lines back, from the left edge
        await pilot.pause()
        assert pane.log_widget.scroll_offset.x == 0 and len(pane.log_widget.lines) == 3


async def test_after_home_the_pane_says_it_stopped_following_and_end_follows_again():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(40)])
        pane.log_widget.focus()
        await pilot.pause()
        assert not pane.has_class("-paused")
        await pilot.press("home")
        await until(pilot, lambda: pane.has_class("-paused"), "paused")
        pane.add_lines(["new 1", "new 2"])
        await pilot.pause()
        note = str(pane.query_one("#log-paused", Static).render())
        assert "paused — End to follow" in note and "2 new lines below" in note
        assert pane.log_widget.scroll_offset.y == 0  # it did not jump to the end
        await pilot.press("end")
        await until(pilot, lambda: not pane.has_class("-paused"), "following again")
        pane.add_lines(["new 3"])
        await pilot.pause()
        assert pane.log_widget.is_vertical_scroll_end


async def test_jump_to_marks_the_line():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(1, 41)])
        await pilot.pause()
        pane.jump_to(12)
        await pilot.pause()
        log = pane.log_widget
        y = 11 - int(log.scroll_offset.y)
        text, segs = row(pane, y)
        assert text.startswith("line 12")
        assert all(s.style is not None and s.style.bgcolor == MARK_STYLE.bgcolor for s in segs if s.text.strip())
        other, segs = row(pane, y + 1)
        assert other.startswith("line 13") and not any(s.style and s.style.bgcolor == MARK_STYLE.bgcolor
                                                       for s in segs)
        pane.add_lines([f"more {i}" for i in range(5)])  # the mark stays on its line as lines arrive
        await pilot.pause()
        assert log.index_of(log.marked) == 11
