"""Every stop of the chat's and the bench's Tab ring says what it is: a field beside
its label, a box with its placeholder, a button with its text, a scrolled area with its title."""

from __future__ import annotations

from textual.widgets import Button, Input

from console.ui.widgets.settings_bar import SettingsPair
from tests.ui.pair_app import pair_app


def label_of(w) -> str:
    if isinstance(w, Button):
        return str(w.label)
    pair = next((a for a in w.ancestors if isinstance(a, SettingsPair)), None)
    if pair is not None:
        text = " ".join(str(lbl.render()) for lbl in pair.query("Label")).strip()
        if text:
            return text
    if isinstance(w, Input) and w.placeholder:
        return w.placeholder
    return str(w.border_title or "")


async def test_every_tab_stop_of_chat_and_bench_is_labelled(tmp_path):
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(120, 35)) as pilot:
        for key in ("c", "b"):
            await pilot.press(key)
            await pilot.pause()
            stops = []
            for _ in range(25):
                await pilot.press("tab")
                await pilot.pause()
                w = app.focused
                if w is None or (stops and w is stops[0]):
                    break
                stops.append(w)
            assert len(stops) >= 6, stops
            unlabelled = [(type(w).__name__, w.id) for w in stops if not label_of(w)]
            assert unlabelled == [], f"{type(app.screen).__name__}: {unlabelled}"
            await pilot.press("escape")
            await pilot.pause()
