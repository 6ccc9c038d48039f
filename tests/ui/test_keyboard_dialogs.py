"""Keyboard: the debug-relaunch dialog opens with its first field focused (typed
keys go somewhere), the host-key dialog says a wrong fingerprint does not match, the footer keeps the
workbench key at every size, F1 at 80x24 starts with the app's own keys."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Input

from console.ui.screens.doctor import DebugRelaunchScreen
from tests.ui.pair_app import pair_config
from tests.waiting import until


class Host(App):
    def __init__(self, screen) -> None:
        super().__init__()
        self.dialog = screen

    def on_mount(self) -> None:
        self.push_screen(self.dialog)


async def test_the_debug_relaunch_dialog_opens_with_its_first_field_focused():
    dialog = DebugRelaunchScreen(pair_config(), {}, 1)
    async with Host(dialog).run_test(size=(120, 35)) as pilot:
        await until(lambda: isinstance(pilot.app.focused, Input), what="a field focused", pilot=pilot,
                    detail=lambda: pilot.app.focused)
        field = pilot.app.focused
        await pilot.press("5")
        assert field.value.endswith("5")  # the key went into the field, not nowhere


async def test_a_wrong_fingerprint_and_enter_says_it_does_not_match():
    from textual.widgets import Static

    from console.remote.transport import HostKeyError, KeyId
    from console.ui.screens.host_key import ReplaceHostKeyScreen

    offered = KeyId("ED25519", "SHA256:" + "n" * 43)
    err = HostKeyError("B", "127.0.0.2", 22, "changed", offered, (KeyId("ED25519", "SHA256:" + "o" * 43),), "kh")
    dialog = ReplaceHostKeyScreen("B", "127.0.0.2", err)
    async with Host(dialog).run_test(size=(120, 35)) as pilot:
        await until(lambda: isinstance(pilot.app.focused, Input), what="the fingerprint field", pilot=pilot)
        await pilot.press(*"SHA256:wrong", "enter")
        note = dialog.query_one("#fp-note", Static)
        await until(lambda: "does not match" in str(note.render()), what="the mismatch said", pilot=pilot,
                    detail=lambda: str(note.render()))
        assert pilot.app.screen is dialog  # not replaced, still asking


async def test_f1_at_80x24_starts_with_the_apps_own_keys_one_line_each():
    import io

    from rich.console import Console

    from console.station.messages import LogBatch
    from console.ui.widgets.help_panel import AppKeysTable
    from tests.ui.pair_app import pair_app

    app = pair_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(LogBatch("A", [f"line {i}" for i in range(50)]))
        app.panes["A"].log_pane.log_widget.focus()  # a log focused: its scroll keys are in the chain
        await pilot.press("f1")
        await until(lambda: bool(app.screen.query(AppKeysTable)) and app.screen.query_one(AppKeysTable).size.width,
                    what="the help panel's keys", pilot=pilot)
        table = app.screen.query_one(AppKeysTable)
        console = Console(width=table.size.width, record=True, file=io.StringIO(), color_system=None)
        console.print(table.render())
        rows = [r for r in console.export_text().splitlines() if r.strip()]
        first = " ".join(rows[:10])
        assert "Checks" in first and "Doctor" in first, rows[:10]  # the app's keys at the top
        assert "Scroll" not in first, rows[:10]
        keys = [r for r in rows if r.strip() and not set(r.strip()) <= set("─━ ")]
        descriptions = [r.split(None, 1)[-1] for r in keys]
        assert any("Filter" in d and "…" in d for d in descriptions) or all(len(r) <= table.size.width for r in rows)
        assert sum("Checks" in r for r in rows) == 1  # one line each: no tooltip wrapped onto the next


async def test_f1_and_the_readme_show_the_same_what_you_see_which_key_table():
    """One table (``console/ui/see_key.py``): F1 renders it under the keys, the README prints it."""
    import io
    from pathlib import Path

    from rich.console import Console

    from console.ui import see_key
    from console.ui.widgets.help_panel import SeeKeyTable
    from tests.ui.pair_app import pair_app

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert see_key.markdown() in readme
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("f1")
        await until(lambda: bool(app.screen.query(SeeKeyTable)) and app.screen.query_one(SeeKeyTable).size.width,
                    what="the what-you-see table in F1", pilot=pilot)
        table = app.screen.query_one(SeeKeyTable)
        console = Console(width=table.size.width, record=True, file=io.StringIO(), color_system=None)
        console.print(table.render())
        text = console.export_text()
        assert "what you see → which key" in text
        flat = " ".join(text.split())
        for see, key in see_key.ROWS:
            assert see in flat and f"→ {key}" in flat, (see, key)  # whole: wrapped, never cut
