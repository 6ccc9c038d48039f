"""The log pane says what a plain Log leaves unsaid: a line cut at the edge, where a filter's
match is, the line the diagnosis pointed at, and that it stopped following after Home."""

from __future__ import annotations

import html
import re

from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Offset
from textual.notifications import Notify
from textual.selection import Selection
from textual.widgets import Static

from console.station.log_buffer import LogBuffer, LogMarker
from console.ui.widgets.log_pane import LogPane
from console.ui.widgets.log_view import EDGE_STYLE, MARK_STYLE
from tests.waiting import until


class PaneApp(App):
    """One pane over a buffer the test owns, as a station's state owns its log in the console."""

    def __init__(self, max_lines: int = 1000) -> None:
        super().__init__()
        self.buffer = LogBuffer(max_lines)

    def compose(self) -> ComposeResult:
        yield LogPane(self.buffer)


def add(pane: LogPane, lines: list[str]) -> None:
    """A batch as the console handles it: the owner's buffer takes the lines, then the pane shows them."""
    pane.buffer.extend(lines)
    pane.show_new_lines()


def row(pane: LogPane, y: int) -> tuple[str, list]:
    """The text and segments of the log's visible row ``y``."""
    strip = pane.log_widget.render_line(y)
    return "".join(seg.text for seg in strip), list(strip)


async def test_a_line_cut_at_the_edge_ends_in_a_marker():
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, ["short", "x" * 60 + "END"])
        await pilot.pause()
        visible = pane.log_widget.scrollable_content_region.width
        text, segs = row(pane, 1)
        assert text[visible - 1] == "…" and any(s.text == "…" and s.style.bgcolor == EDGE_STYLE.bgcolor for s in segs)
        assert "…" not in row(pane, 0)[0]
        pane.log_widget.scroll_to(x=30, animate=False, immediate=True)
        await pilot.pause()
        text, _ = row(pane, 1)
        assert text.startswith("‹") and "END" in text and "…" not in text  # scrolled to its end


async def test_a_filter_match_is_highlighted_and_the_line_start_stays_in_view():
    # the view stays at column 0 (the host prefix says whose line it is); the match beyond the
    # edge is reached with the arrows and shows highlighted there
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one(LogPane)
        far = "station-b:412:530 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA"
        add(pane, ["boot", far, "other"])
        pane.log_widget.scroll_to(x=20, animate=False, immediate=True)
        pane.set_filter("gdrdma")
        await until(lambda: list(pane.log_widget.lines) == [far], what="only the match", pilot=pilot)
        await until(lambda: pane.log_widget.scroll_offset.x == 0, what="column 0", pilot=pilot)
        text, _ = row(pane, 0)
        assert text.startswith("station-b:412:530") and "GDRDMA" not in text
        pane.log_widget.scroll_to(x=len(far), animate=False, immediate=True)
        await pilot.pause()
        text, segs = row(pane, 0)
        assert "GDRDMA" in text
        assert any("GDRDMA" in s.text and s.style is not None and s.style.reverse for s in segs)
        pane.set_filter("")  # all lines back, from the left edge (once laid out: wait, the CI machine is slow)
        await until(lambda: pane.log_widget.scroll_offset.x == 0, what="back at the left edge", pilot=pilot)
        assert len(pane.log_widget.lines) == 3


async def test_after_home_the_pane_says_it_stopped_following_and_end_follows_again():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, [f"line {i}" for i in range(40)])
        pane.log_widget.focus()
        await pilot.pause()
        assert not pane.has_class("-paused")
        await pilot.press("home")
        await until(lambda: pane.has_class("-paused"), what="paused", pilot=pilot)
        add(pane, ["new 1", "new 2"])
        await pilot.pause()
        note = str(pane.query_one("#log-paused", Static).render())
        assert "paused — End to follow" in note and "2 new lines below" in note
        assert pane.log_widget.scroll_offset.y == 0  # it did not jump to the end
        await pilot.press("end")
        await until(lambda: not pane.has_class("-paused"), what="following again", pilot=pilot)
        add(pane, ["new 3"])
        await pilot.pause()
        assert pane.log_widget.is_vertical_scroll_end


async def test_jump_to_marks_the_line():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, [f"line {i}" for i in range(1, 41)])
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
        add(pane, [f"more {i}" for i in range(5)])  # the mark stays on its line as lines arrive
        await pilot.pause()
        assert log.index_of(log.marked) == 11


def screen_text(app) -> str:
    """What the terminal shows, row by row (from the SVG screenshot: what was last painted)."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in re.findall(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>',
                                 app.export_screenshot()):
        rows.setdefault(float(y), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    return "\n".join("".join(t for _, t in sorted(parts)) for _, parts in sorted(rows.items()))


async def test_new_lines_still_reach_the_screen_once_the_buffer_is_full():
    """The old Log subclass stopped repainting at max_lines: the screen kept showing old lines."""
    app = PaneApp()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(LogPane)
        for k in range(3):
            add(pane, [f"old {k}-{i}" for i in range(1000)])  # max_lines=1000
            await pilot.pause()
        add(pane, [f"NEW LINE {i}" for i in range(5)])
        await until(lambda: "NEW LINE 4" in screen_text(app), what="the newest line painted", pilot=pilot)
        assert "old 0-999" not in screen_text(app)


async def test_errors_warnings_readiness_and_marker_lines_have_their_styles():
    app = PaneApp()
    async with app.run_test(size=(100, 10)) as pilot:
        pane = app.query_one(LogPane)
        lookalike = "— A: stream interrupted 07:17:09–07:17:41 —"
        add(pane, ["(Worker_TP1 pid=412) ERROR 12-01 11:57:02 [x.py:1] WorkerProc failed to start.",
                        "WARNING 12-01 something odd", "INFO:     Application startup complete.",
                        LogMarker(lookalike), lookalike])
        await pilot.pause()

        def style_of(y: int, word: str) -> Style:
            return next(s.style for s in row(pane, y)[1] if word in s.text)

        assert style_of(0, "ERROR").color.name == "red" and style_of(0, "ERROR").bold
        assert style_of(0, "(Worker_TP1 pid=412)").dim
        assert style_of(1, "WARNING").color.name == "yellow"
        assert style_of(2, "Application startup complete.").color.name == "green"
        marker = style_of(3, "stream interrupted")
        assert marker.reverse and marker.color.name == "yellow"
        assert not style_of(4, "stream interrupted").reverse  # the same words from the container: not a marker


async def test_the_pane_shows_a_buffer_it_is_given_and_lines_fed_to_it_elsewhere():
    """The station's state owns the buffer: the pane reads it, whoever adds the lines."""
    buf = LogBuffer(max_lines=50)
    buf.extend([f"early {i}" for i in range(3)])

    class Two(App):
        def compose(self) -> ComposeResult:
            yield LogPane(buffer=buf, id="one")
            yield LogPane(buffer=buf, id="two")

    app = Two()
    async with app.run_test(size=(60, 20)) as pilot:
        one, two = app.query_one("#one", LogPane), app.query_one("#two", LogPane)
        await pilot.pause()
        assert list(one.log_widget.lines) == ["early 0", "early 1", "early 2"] and one.total == 3
        two.set_filter("late 1")
        buf.extend([f"late {i}" for i in range(1, 60)])  # fed elsewhere, and past max_lines
        one.show_new_lines()
        two.show_new_lines()
        await pilot.pause()
        assert len(one.log_widget.lines) == 50 and one.log_widget.lines[-1] == "late 59"
        assert list(two.log_widget.lines) == ["late 10", "late 11", "late 12", "late 13", "late 14", "late 15",
                                              "late 16", "late 17", "late 18", "late 19"]  # late 1 was pruned
        assert one.log_widget.virtual_size.height == 50 and two.log_widget.virtual_size.height == 10


async def test_a_filtered_view_drops_pruned_lines_and_the_mark_follows_its_line():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, [f"line {i}" for i in range(1, 901)])
        pane.jump_to(850)
        log = pane.log_widget
        assert log.marked == 850 and log.index_of(850) == 849
        add(pane, [f"more {i}" for i in range(200)])  # 100 pruned: the mark moves up with its line
        assert log.index_of(850) == 749 and log.lines[749] == "line 850"
        pane.set_filter("/line 8[5-9]0/")
        await pilot.pause()
        assert list(log.lines) == ["line 850", "line 860", "line 870", "line 880", "line 890"]
        assert log.index_of(850) == 0 and log.index_of(851) is None
        text, segs = row(pane, log.index_of(850) - int(log.scroll_offset.y))
        assert text.startswith("line 850") and any(s.style and s.style.bgcolor == MARK_STYLE.bgcolor for s in segs)
        add(pane, [f"tail {i}" for i in range(850)])  # line 850 is pruned now
        assert list(log.lines) == [] and log.index_of(850) is None


async def test_jump_to_a_pruned_line_says_so_and_blank_lines_keep_their_numbers():
    app = PaneApp()
    said: list[str] = []

    def hook(message) -> None:
        if isinstance(message, Notify):
            said.append(message.notification.message)

    async with app.run_test(size=(60, 8), message_hook=hook) as pilot:
        pane = app.query_one(LogPane)
        add(pane, ["a", "", "b", ""] + [f"n {i}" for i in range(1100)])
        await pilot.pause()
        pane.jump_to(3)
        await until(lambda: said == ["line 3 is older than the 1000 lines kept"],
                    what="the notification", pilot=pilot)
        pane.jump_to(1100)
        log = pane.log_widget
        assert log.lines[log.index_of(log.marked)] == "n 1095"  # numbered over every line, blank ones too


async def test_the_row_cache_follows_the_theme():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, ["a line"])
        await pilot.pause()
        before = row(pane, 0)[1][0].style.bgcolor
        app.theme = "textual-light" if app.current_theme.dark else "textual-dark"
        await pilot.pause()
        assert row(pane, 0)[1][0].style.bgcolor != before


async def test_a_selection_copies_the_rows_shown():
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        add(pane, ["first row", "second row", "third row"])
        await pilot.pause()
        text, _ = pane.log_widget.get_selection(Selection(Offset(6, 0), Offset(6, 1)))
        assert text == "row\nsecond"


async def test_a_mouse_drag_selects_the_text_under_it():
    """The frame's rows carry no selection offsets (the compositor asks for the row under the mouse
    alone): a drag still selects from where it started to where it ended, scrolled right too."""
    app = PaneApp()
    async with app.run_test(size=(60, 8)) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        add(pane, ["first row", "(Worker pid=1) ERROR second row", "third row"])
        await pilot.pause()
        y = view.index_of(view.buffer.first + 1)
        await pilot.mouse_down(view, offset=(15, y))
        await pilot.hover(view, offset=(26, y))
        await pilot.mouse_up(view, offset=(26, y))
        await until(lambda: app.screen.selections.get(view) is not None, what="a selection", pilot=pilot)
        assert view.get_selection(app.screen.selections[view])[0] == "ERROR second"
