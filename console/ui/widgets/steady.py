"""A Static that draws again only when what it shows changed.

``Static.update`` always refreshes, with a layout pass by default: a station pane handed the same
"no error", the same health rows or the same memory bar on every GPU sample (each second, each
station) re-rendered and re-laid-out what was already on screen. ``Steady.show`` compares a key of
the new content with the last one shown and leaves the widget alone when they are equal.

A key says everything the content draws from, never the width it will be given
(``console.ui.shown_key``); content without a key is always drawn.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.widgets import Static

from console.ui.shown_key import shown_key

_NEVER = object()  # no key shown yet: the first show always draws


class Steady(Static):
    """A Static whose ``show`` skips content equal to what it shows (see the module)."""

    _shown: Hashable | object = _NEVER

    def update(self, content: object = "", *, layout: bool = True) -> None:
        self._shown = _NEVER  # drawn without a key (a caller of plain update): the next show draws
        super().update(content, layout=layout)  # type: ignore[arg-type]

    def show(self, content: object) -> bool:
        """Draw ``content`` unless it is what is shown already; whether it drew."""
        key = shown_key(content)
        if key is not None and key == self._shown:
            return False
        super().update(content)  # type: ignore[arg-type]
        self._shown = key if key is not None else _NEVER
        return True
