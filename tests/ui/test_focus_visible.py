"""Focus is visible in every theme: on each stop of the chat's and the bench's Tab ring,
in each of the console's themes, the focused widget is drawn differently from the same widget blurred
(its border, outline, background, tint or colour)."""

from __future__ import annotations

import pytest

from console.ui.themes import load_themes
from tests.ui.pair_app import pair_app


def look(w) -> tuple:
    """How the widget and its parts (a Select's current value box) are drawn."""
    out = []
    for node in (w, *w.query("SelectCurrent")):
        s = node.styles
        out.append((s.border_top, s.border_bottom, s.border_left, s.outline_top, s.background, s.color,
                    getattr(s, "background_tint", None), s.tint))
    return tuple(out)


# One test per theme (not one loop over all): each is a few seconds, so parallel workers share them.
@pytest.mark.parametrize("theme", [t.name for t in load_themes()])
async def test_every_tab_stop_shows_its_focus_in_every_theme(tmp_path, theme):
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(120, 35)) as pilot:
        invisible = []
        app.theme = theme
        for key in ("c", "b"):
            await pilot.press(key)
            await pilot.pause()
            first, focused = None, []
            for _ in range(25):
                await pilot.press("tab")
                await pilot.pause()
                w = app.focused
                if w is None or w is first:
                    break
                first = first or w
                focused.append((w, look(w)))
            app.set_focus(None)  # every stop's blurred look, as blur() would leave it: nothing focused
            await pilot.pause()
            invisible += [(theme, type(app.screen).__name__, type(w).__name__, w.id)
                          for w, seen in focused if look(w) == seen]
            await pilot.press("escape")
            await pilot.pause()
        assert invisible == [], invisible
