"""A row of labelled settings fields that fits any terminal width.

The chat and bench screens put 5-8 fields above their content. A fixed ``Horizontal`` pushes the
last ones off-screen at 80 columns; here each label and its field are one cell, the cells are laid
out on a grid of as many per row as the width allows (measured from the labels and the fields' CSS
widths), and on a short or narrow terminal the fields turn *compact* (one line, no border) so two or
three rows still leave room for the content. The focused field is always marked: an accent border
when tall, an accent background when compact, and its label in bold accent.
"""

from __future__ import annotations

import math

from textual import events
from textual.containers import Grid, Horizontal
from textual.widget import Widget
from textual.widgets import Label

COMPACT_BELOW_HEIGHT = 30  # terminal rows under which fields are one line high
COMPACT_ABOVE_ROWS = 2  # more rows of fields than this: compact even on a tall terminal


def _cells(widget: Widget) -> int:
    """The width a field asks for in its CSS (cells), or what its label text needs."""
    if isinstance(widget, Label):
        text = str(widget.render())
        return len(text) + 2 if text else 0
    width = widget.styles.width
    if width is not None and width.is_cells:
        return int(width.value)
    min_width = widget.styles.min_width
    return int(min_width.value) if min_width is not None and min_width.is_cells else 12


class SettingsPair(Horizontal):
    """One label and its field, kept together on a row."""

    DEFAULT_CSS = """
    SettingsPair { width: auto; height: auto; }
    """

    def __init__(self, label: Label, field: Widget) -> None:
        super().__init__(label, field)
        self.label, self.field = label, field

    @property
    def cells(self) -> int:
        return _cells(self.label) + _cells(self.field)  # the label's padding parts it from the last pair


class SettingsBar(Grid):
    """Children come in pairs: a ``Label`` followed by its field (``Label("")`` before a group of
    buttons). A pair wraps to the next row as a whole: a label never ends a row without its field."""

    DEFAULT_CSS = """
    SettingsBar { height: auto; grid-gutter: 0 0; padding: 0 1; grid-rows: auto; }
    SettingsBar Label { padding: 1 1 0 1; }
    SettingsBar Label.-focused { color: $accent; text-style: bold; }
    SettingsBar Input:focus, SettingsBar Switch:focus { border: tall $accent; }
    SettingsBar Select:focus > SelectCurrent { border: tall $accent; }
    SettingsBar Switch { width: 10; }
    SettingsBar Button { margin: 0 1 0 0; }
    SettingsBar.-compact Label { padding: 0 1; }
    SettingsBar.-compact Switch { border: none; height: 1; padding: 0 1; width: 8; }
    SettingsBar.-compact Input:focus, SettingsBar.-compact Switch:focus { background: $accent 35%; border: none; }
    SettingsBar.-compact Select:focus > SelectCurrent { background: $accent 35%; }
    """

    def __init__(self, *children: Widget, id: str | None = None, classes: str | None = None) -> None:
        pairs = [SettingsPair(label, field)  # type: ignore[arg-type]
                 for label, field in zip(children[::2], children[1::2], strict=True)]
        super().__init__(*pairs, id=id, classes=classes)
        self.pairs = pairs
        self.per_row = 0

    def fit(self, width: int, height: int) -> None:
        """Choose pairs per row and compactness for a terminal of ``width`` x ``height``."""
        if not self.pairs:
            return
        widths = [p.cells for p in self.pairs]
        per_row, cols = 1, [max(widths)]
        for n in range(len(widths), 0, -1):
            rows = [widths[r:r + n] for r in range(0, len(widths), n)]
            fit = [max(row[k] for row in rows if k < len(row)) for k in range(n)]
            if sum(fit) <= width - 2:  # the bar's padding
                per_row, cols = n, fit
                break
        rows_needed = math.ceil(len(widths) / per_row)
        compact = height < COMPACT_BELOW_HEIGHT or rows_needed > COMPACT_ABOVE_ROWS
        self.set_class(compact, "-compact")
        self.per_row = per_row
        for field in self.query("Input, Select, Button"):
            field.compact = compact  # type: ignore[attr-defined]
        self.styles.grid_size_columns = per_row
        self.styles.grid_columns = " ".join(str(c) for c in cols)

    def on_mount(self) -> None:
        self.fit(self.app.size.width, self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self.fit(self.app.size.width, self.app.size.height)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_label(event.widget, True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._mark_label(event.widget, False)

    def _mark_label(self, node: Widget, on: bool) -> None:
        while node.parent is not None and not isinstance(node.parent, SettingsPair):
            node = node.parent  # a Select's inner widgets
        if isinstance(node.parent, SettingsPair):
            node.parent.label.set_class(on, "-focused")
