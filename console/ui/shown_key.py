"""What a renderable draws from, as a key: two renderables with equal keys render the same at any
width, so a widget shown one can skip the other (``console.ui.widgets.steady``).

Strings and Rich ``Text`` (plain text, style, every span, justify, overflow, wrapping) have keys;
so does any renderable of ours with a ``shown_key()`` method; anything else has none (None) and is
always drawn.
"""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text


def text_key(text: Text) -> Hashable:
    """Everything a Text draws from: two Texts with the same key render the same at any width."""
    return (text.plain, str(text.style), tuple((s.start, s.end, str(s.style)) for s in text.spans),
            text.justify, text.overflow, text.no_wrap, text.end)


def shown_key(content: object) -> Hashable | None:
    """The key of a renderable, or None when it has none (then it is always drawn)."""
    if isinstance(content, str):
        return ("str", content)
    if isinstance(content, Text):
        return text_key(content)
    key = getattr(content, "shown_key", None)
    return key() if callable(key) else None
