"""A row of labelled settings fields that fits any terminal width.

The chat and bench screens put 5-8 fields above their content. A fixed ``Horizontal`` pushes the
last ones off-screen at 80 columns; here the fields are laid out on a grid of as many
label/field pairs per row as the width allows (measured from the labels and the fields' CSS
widths), and on a short or narrow terminal the fields turn *compact* (one line, no border) so
two or three rows still leave room for the content. The focused field is always marked: an
accent border when tall, an accent background when compact, and its label in bold accent.
"""

from __future__ import annotations

import math

from textual import events
from textual.containers import Grid
from textual.widget import Widget
from textual.widgets import Label

COMPACT_BELOW_HEIGHT = 30  # terminal rows under which fields are one line high
COMPACT_ABOVE_ROWS = 2  # more rows of fields than this: compact even on a tall terminal


def _cells(widget: Widget) -> int:
    """The width a field asks for in its CSS (cells), or what its label text needs."""
    if isinstance(widget, Label):
        return len(str(widget.render())) + 2
    width = widget.styles.width
    if width is not None and width.is_cells:
        return int(width.value)
    min_width = widget.styles.min_width
    return int(min_width.value) if min_width is not None and min_width.is_cells else 12


class SettingsBar(Grid):
    """Children come in pairs: a ``Label`` followed by its field (``Label("")`` before a group of
    buttons). Pairs wrap to the next row as a whole: a label never ends a row without its field."""

    DEFAULT_CSS = """
    SettingsBar { height: auto; grid-gutter: 0 0; padding: 0 1; grid-rows: auto; }
    SettingsBar > Label { padding: 1 1 0 1; width: 100%; text-align: right; }
    SettingsBar > Label.-focused { color: $accent; text-style: bold; }
    SettingsBar > Input:focus, SettingsBar > Switch:focus { border: tall $accent; }
    SettingsBar > Select:focus > SelectCurrent { border: tall $accent; }
    SettingsBar > Switch { width: 10; }
    SettingsBar > Button { margin: 0 1; }
    SettingsBar.-compact > Label { padding: 0 1; }
    SettingsBar.-compact > Switch { border: none; height: 1; padding: 0 1; width: 8; }
    SettingsBar.-compact > Input:focus, SettingsBar.-compact > Switch:focus {
        background: $accent 35%; border: none;
    }
    SettingsBar.-compact > Select:focus > SelectCurrent { background: $accent 35%; }
    SettingsBar.-compact > Button { margin: 0 1 0 0; }
    """

    def __init__(self, *children: Widget, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(*children, id=id, classes=classes)
        self.per_row = 0

    def _groups(self) -> list[tuple[Widget, Widget]]:
        kids = list(self.children)
        return list(zip(kids[::2], kids[1::2], strict=False))

    def fit(self, width: int, height: int) -> None:
        """Choose pairs per row and compactness for a terminal of ``width`` x ``height``."""
        groups = self._groups()
        if not groups:
            return
        widths = [(_cells(label), _cells(field)) for label, field in groups]
        per_row, cols = 1, [max(w[0] for w in widths), max(w[1] for w in widths)]
        for n in range(len(groups), 0, -1):
            rows = [widths[r:r + n] for r in range(0, len(widths), n)]
            fit = [max(row[k][j] for row in rows if k < len(row)) for k in range(n) for j in (0, 1)]
            if sum(fit) <= width - 2:  # the bar's padding
                per_row, cols = n, fit
                break
        rows_needed = math.ceil(len(groups) / per_row)
        compact = height < COMPACT_BELOW_HEIGHT or rows_needed > COMPACT_ABOVE_ROWS
        self.set_class(compact, "-compact")
        self.per_row = per_row
        for field in self.query("Input, Select, Button"):
            field.compact = compact  # type: ignore[attr-defined]
        self.styles.grid_size_columns = per_row * 2
        self.styles.grid_columns = " ".join(str(c) for c in cols)

    def on_mount(self) -> None:
        self.fit(self.app.size.width, self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self.fit(self.app.size.width, self.app.size.height)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_label(event.widget, True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._mark_label(event.widget, False)

    def _mark_label(self, field: Widget, on: bool) -> None:
        while field.parent is not None and field.parent is not self:
            field = field.parent  # a Select's inner widgets
        kids = list(self.children)
        if field in kids and (i := kids.index(field)) > 0 and isinstance(kids[i - 1], Label):
            kids[i - 1].set_class(on, "-focused")
