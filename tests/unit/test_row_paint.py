"""``paint_row`` gives the segments rich's ``Text.render`` gives for the same styling, without the Text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.style import Style
from rich.text import Text

from console.ui.widgets.log_view import row_spans
from console.ui.widgets.row_paint import paint_row

STYLES = [Style.parse(s) for s in ("dim", "cyan", "bold green", "bold yellow", "bold red", "bold reverse",
                                   "bold reverse yellow", "on grey35")]
BASES = [Style.null(), Style.parse("#e0e0e0 on #1e1e1e"), Style.parse("italic white on blue")]


def _rich(line: str, base: Style, spans) -> list[tuple[str, Style]]:
    text = Text(line, no_wrap=True)
    text.stylize(base)
    for start, end, style in spans:
        text.stylize(style, start, end)
    return [(s.text, s.style or Style.null()) for s in text.render(Console()) if s.text]


def _ours(line: str, base: Style, spans) -> list[tuple[str, Style]]:
    return [(s.text, s.style) for s in paint_row(line, base, spans)]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_segments_are_rich_s(data):
    line = data.draw(st.text(alphabet=st.sampled_from("ab c:E\u00e9\u4e2d"), max_size=40))
    base = data.draw(st.sampled_from(BASES))
    spans = data.draw(st.lists(st.tuples(st.integers(0, len(line) + 3), st.integers(0, len(line) + 3),
                                         st.sampled_from(STYLES)), max_size=8))
    assert _ours(line, base, spans) == _rich(line, base, spans)


def test_a_real_log_line_is_coloured_as_before():
    line = ("(Worker_TP1 pid=412) ERROR 11-30 14:05:31 [gpu.py:26] RuntimeError: NCCL WARN via NET/IB/0/GDRDMA"
            " timed out")
    base = BASES[1]
    spans = row_spans(line)
    assert len(spans) >= 4  # prefix, error words, transport
    assert _ours(line, base, spans) == _rich(line, base, spans)
    assert "".join(t for t, _ in _ours(line, base, spans)) == line


def test_many_overlapping_spans_stay_cheap_and_right():
    line = "ERROR " * 5_000
    spans = [(i, i + 5, STYLES[4]) for i in range(0, len(line), 6)] + [(0, len(line), STYLES[5])]
    assert _ours(line, BASES[1], spans) == _rich(line, BASES[1], spans)


def test_no_span_no_text():
    assert paint_row("", BASES[1], []) == []
    assert _ours("plain", BASES[1], [(3, 3, STYLES[0]), (9, 12, STYLES[1])]) == [("plain", BASES[1])]
