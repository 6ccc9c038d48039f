"""A log row's segments straight from its coloured spans, without a ``rich.Text``.

A log view following a flood renders every row on screen new at each repaint (50 rows a view, four
times a second): building a ``Text``, styling it span by span and rendering it through the console
was most of a frame. ``paint_row`` gives the segments ``Text.render`` gives for the same ``stylize``
calls (a later span wins where two overlap; the base under all), tested against it on generated rows."""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style

Span = tuple[int, int, Style]  # (start, end, style) in characters of the row


def paint_row(line: str, base: Style, spans: Sequence[Span]) -> list[Segment]:
    """``line`` in ``base``, each span's style combined over it in their order, cut where spans start
    and end. O(spans log spans + length): a hostile line with thousands of matches stays linear."""
    n = len(line)
    events = []
    for i, (start, end, _style) in enumerate(spans):
        start, end = max(0, start), min(n, end)
        if start < end:
            events.append((start, 1, i))
            events.append((end, 0, i))
    if not events:
        return [Segment(line, base)] if n else []
    events.sort()
    out: list[Segment] = []
    active: list[int] = []  # the spans over the current piece, in the order they apply
    combined: dict[tuple[int, ...], Style] = {(): base}
    pos = 0
    for offset, opening, i in events:
        if offset > pos:
            key = tuple(active)
            style = combined.get(key)
            if style is None:
                style = combined[key] = Style.combine([base, *(spans[j][2] for j in active)])
            out.append(Segment(line[pos:offset], style))
            pos = offset
        if opening:
            insort(active, i)
        else:
            active.remove(i)
    if pos < n:
        out.append(Segment(line[pos:], base))
    return out

