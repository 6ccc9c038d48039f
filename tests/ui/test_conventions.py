"""Textual conventions, on the real app (Pilot, no services): the command palette offers every
action and screen (typing "chat" finds the chat), F1 opens the keys and Esc closes them, the
palette's screenshot lands in a directory that exists and says where, dialogs have one frame."""

from __future__ import annotations

from pathlib import Path

from pair_app import pair_app
from textual.command import CommandList, CommandPalette
from textual.notifications import Notify

from console.ui.providers import SCREENS
from console.ui.screens.bench import BenchScreen
from console.ui.screens.chat import ChatScreen
from tests.waiting import until


async def _palette(pilot, query: str) -> list[str]:
    """Open the palette, type ``query``, return the prompts of the hits shown."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await until(lambda: isinstance(app.screen, CommandPalette), what="the palette", pilot=pilot)
    if query:
        await pilot.press(*query)
    hits: list[str] = []

    def listed() -> bool:
        """Every provider has answered (the palette's search worker is done) and the hits are listed."""
        nonlocal hits
        palette = app.screen
        searching = any(w.node is palette and not w.is_finished for w in app.workers)
        options = palette.query_one(CommandList)
        hits = [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]
        return bool(hits) and not searching

    await until(listed, what=f"hits for {query!r}", pilot=pilot, detail=lambda: hits)
    return hits


async def test_palette_offers_every_screen_and_the_dashboards_keys(tmp_path):
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(160, 45)) as pilot:
        hits = await _palette(pilot, "")
        for want in ("Open the chat", "Open the bench", "Open the checks", "Show the diagnosis",
                     "dashboard: Launch", "dashboard: Stop", "dashboard: Restart", "dashboard: Reconnect",
                     "dashboard: Filter", "dashboard: Quit"):
            assert want in hits, (want, hits)
        # every key in the dashboard's footer is a command (the screens' keys as "Open the ...")
        screens = {action.removeprefix("app.") for _, _, action in SCREENS}
        footer = [ab.binding for ab in app.dashboard.active_bindings.values()]  # what its footer shows
        shown = {b.description for b in footer if b.show and b.description and b.action not in screens
                 and b.action != "command_palette"}
        assert {"Launch", "Filter", "Quit", "Theme"} <= shown
        assert shown <= {h.removeprefix("dashboard: ") for h in hits}
        assert {name for name, _, _ in SCREENS} <= set(hits)
        await pilot.press("escape")
        hits = await _palette(pilot, "chat")
        assert hits[0] == "Open the chat"
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        # on the chat: its own keys, the app's, and the way to the other screens
        hits = await _palette(pilot, "")
        for want in ("chat: Tool test", "chat: Copy reply", "chat: Clear", "app: Theme", "Open the bench",
                     "Back to the dashboard"):
            assert want in hits, (want, hits)
        assert not any(h.startswith("dashboard:") for h in hits)  # the dashboard's keys are inert here
        await pilot.press("escape")
        hits = await _palette(pilot, "bench")
        assert hits[0] == "Open the bench"
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, BenchScreen), what="the bench", pilot=pilot)
        assert len(app.screen_stack) == 2  # the chat was closed on the way, not stacked under
        hits = await _palette(pilot, "run sweep")
        assert hits[0] == "bench: Run sweep"


async def test_f1_opens_the_keys_and_esc_closes_them_before_leaving(tmp_path):
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("f1")
        await until(lambda: bool(app.screen.query("HelpPanel")), what="the help panel", pilot=pilot)
        await pilot.press("escape")
        await until(lambda: not app.screen.query("HelpPanel"), what="help closed", pilot=pilot)
        await pilot.press("c")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        await pilot.press("f1")  # from the prompt (an Input): F1 is not text
        await until(lambda: bool(app.screen.query("HelpPanel")), what="the help panel on the chat", pilot=pilot)
        await pilot.press("escape")  # closes the help, the chat stays
        await until(lambda: not app.screen.query("HelpPanel"), what="help closed on the chat", pilot=pilot)
        assert isinstance(app.screen, ChatScreen)
        await pilot.press("escape")  # now Esc is the chat's: back to the dashboard
        await until(lambda: not isinstance(app.screen, ChatScreen), what="back", pilot=pilot)


async def test_palette_screenshot_goes_to_a_directory_that_exists_and_says_where(tmp_path, monkeypatch):
    home = tmp_path / "home"  # no ~/Downloads here
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    said: list[str] = []

    def hook(message) -> None:  # what the app tells the operator (its toasts)
        if isinstance(message, Notify):
            said.append(str(message.notification.message))

    async with app.run_test(size=(120, 35), message_hook=hook) as pilot:
        hits = await _palette(pilot, "screenshot")
        assert hits[0] == "Screenshot"
        await pilot.press("enter")
        shots = tmp_path / "data" / "dgx-console" / "screenshots"
        await until(lambda: shots.is_dir() and any(shots.glob("*.svg")), what="the screenshot", pilot=pilot)
        svg = next(shots.glob("*.svg"))
        assert "<svg" in svg.read_text()[:200]
        await until(lambda: any(str(svg) in m for m in said),
                    what="the notice", pilot=pilot, detail=lambda: said)
        assert not (home / "Downloads").exists()


async def test_dialogs_scrolled_box_is_a_panel_not_a_second_frame(tmp_path):
    from textual.containers import VerticalScroll

    from console.service.actions import PlannedCommand
    from console.ui.screens.actions import ConfirmActionScreen

    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(80, 24)) as pilot:
        plan = [PlannedCommand("A", "stop", "docker stop -t 30 glm53\n" * 3) for _ in range(8)]
        app.push_screen(ConfirmActionScreen("stop", plan))
        await until(lambda: isinstance(app.screen, ConfirmActionScreen), what="the dialog", pilot=pilot)
        await pilot.pause()
        box = app.screen.query_one(VerticalScroll)
        assert box.max_scroll_y > 0  # the plan overflows: the scrollbar shows
        assert box.styles.border_right[0] in ("", "none") and box.styles.scrollbar_size_vertical == 1


def test_xdg_data_dir_is_where_screenshots_go(tmp_path, monkeypatch):
    from console.ui.app import screenshot_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert screenshot_dir() == Path(tmp_path) / "dgx-console" / "screenshots"


async def test_palette_shows_the_gpu_processes_of_the_focused_station(tmp_path):
    from console.ui.widgets.process_list import ProcessList

    app = pair_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        app.panes["B"].log_pane.log_widget.focus()
        hits = await _palette(pilot, "processes")
        assert hits[0] == "Show the GPU processes"
        await pilot.press("enter")
        procs = app.panes["B"].query_one(ProcessList)
        await until(lambda: procs.has_class("-shown"), what="B's process list", pilot=pilot)
        assert not app.panes["A"].query_one(ProcessList).has_class("-shown")
        assert "not read yet" in str(procs.content)  # no compute-apps sample has arrived: said, not blank
