"""A footer that keeps the keys that matter when the terminal is narrow.

Textual's ``Footer`` lays every key in a row and cuts the row at the screen's edge: at 120 columns
the dashboard lost Restart, Theme and Help, the last ones declared. This one is compact (no padding
round the keys) and, when the keys do not all fit, leaves out the least important (``PRIORITY``,
by action) instead of the last; those stay in the help panel (F1) and the command palette.
"""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# Most important first. Actions not listed come after these, in the order they are declared.
PRIORITY = ("toggle_help", "back_to_fleet", "open_station", "filter", "checks", "toggle_diagnosis",
            "service('restart')", "service('launch')", "service('stop')", "toggle_theme", "toggle_processes",
            "toggle_fleet", "chat", "bench", "doctor", "quit")
PALETTE_WIDTH = 14  # "▏^p palette" docked on the right


def _rank(action: str) -> int:
    name = action.removeprefix("app.").removeprefix("screen.")
    return PRIORITY.index(name) if name in PRIORITY else len(PRIORITY)


def key_width(key: FooterKey) -> int:
    """Cells a compact key takes: the key, a space, the label, and the grid's gap."""
    return len(key.key_display) + (1 + len(key.description) if key.description else 0) + 1


def fitting(keys: list[FooterKey], width: int) -> list[FooterKey]:
    """The keys that fit in ``width`` cells, most important first, shown in their own order."""
    order = sorted(range(len(keys)), key=lambda i: (_rank(keys[i].action), i))
    kept: set[int] = set()
    used = 0
    for i in order:
        w = key_width(keys[i])
        if used + w <= width:
            kept.add(i)
            used += w
    return [k for i, k in enumerate(keys) if i in kept]


class FittedFooter(Footer):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("compact", True)
        super().__init__(**kwargs)
        self._width = 0

    def compose(self):
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey) and not w.has_class("-command-palette")]
        if not keys or not self.size.width:
            yield from widgets
            return
        room = self.size.width - (PALETTE_WIDTH if len(keys) < len(widgets) else 0)
        kept = set(map(id, fitting(keys, room)))
        shown = [w for w in widgets if not isinstance(w, FooterKey) or w.has_class("-command-palette") or id(w) in kept]
        self.styles.grid_size_columns = sum(1 for w in shown if not w.has_class("-command-palette"))
        yield from shown

    def on_resize(self) -> None:
        if self.size.width != self._width:
            self._width = self.size.width
            self.call_after_refresh(self.recompose)
