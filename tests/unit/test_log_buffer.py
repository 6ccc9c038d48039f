"""The log buffer a station's log view reads: bounded, numbered over everything added, lines made fit
for a terminal on the way in, the console's own marker lines known by type (not by their words)."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.station.log_buffer import DISPLAY_MAX_CHARS, LogBuffer, LogMarker, display_line


def test_lines_are_numbered_over_everything_added_and_pruned_to_max_lines():
    buf = LogBuffer(max_lines=3)
    assert (len(buf), buf.total, buf.first) == (0, 0, 1)
    assert buf.extend(f"line {i}" for i in range(1, 6)) == 5  # any iterable
    assert (len(buf), buf.total, buf.first) == (3, 5, 3)
    assert list(buf) == ["line 3", "line 4", "line 5"]
    assert buf[0] == "line 3" and buf[-1] == "line 5" and buf.line(4) == "line 4"
    assert buf.has(3) and not buf.has(2) and not buf.has(6)
    for gone in (2, 6):
        with pytest.raises(IndexError):
            buf.line(gone)
    with pytest.raises(IndexError):
        buf[3]


def test_since_gives_the_kept_lines_after_a_number_even_when_some_were_pruned_unseen():
    buf = LogBuffer(max_lines=4)
    buf.extend(["a", "b"])
    assert buf.since(0) == (1, ["a", "b"])
    buf.extend(["c", "d", "e", "f", "g"])  # a reader that last saw line 2 missed c (pruned)
    assert buf.since(2) == (4, ["d", "e", "f", "g"])
    assert buf.since(7) == (8, [])


def test_lines_are_sanitized_and_clipped_on_the_way_in():
    buf = LogBuffer()
    buf.extend(["\x1b]52;c;aGVsbG8=\x07clipboard write", "before\x00after", "[bold red]not markup[/]",
                "tab\tstays", "two\nrows", "para\u2028graph", "x" * (DISPLAY_MAX_CHARS + 10)])
    assert buf[0] == "clipboard write"
    assert buf[1] == "before␀after"
    assert buf[2] == "[bold red]not markup[/]"  # text, never markup (the view renders it as Text)
    assert buf[3] == "tab\tstays"
    assert buf[4] == "two␊rows" and buf[5] == "para␊graph"  # one line stays one row
    assert buf[6] == "x" * DISPLAY_MAX_CHARS + "… [+10 chars]"
    assert display_line("plain ascii") == "plain ascii"


def test_marker_lines_are_known_by_type_and_leave_with_their_lines():
    buf = LogBuffer(max_lines=3)
    lookalike = "— A: stream interrupted 07:17:09–07:17:41 —"  # what a container could print
    buf.extend(["x", LogMarker(lookalike), lookalike])
    assert buf.is_marker(2) and not buf.is_marker(3) and not buf.is_marker(1)
    assert buf.line(2) == buf.line(3) == lookalike
    buf.extend(["y", "z"])
    assert not buf.is_marker(2)  # pruned with its line
    buf.extend([LogMarker("— A: stream interrupted 1–2 —")])
    assert buf.is_marker(6)


@given(st.integers(1, 40), st.lists(st.lists(st.sampled_from(["a", "bb", "\tc", "模型", "e\x1b[1mf"]),
                                             max_size=60), max_size=30))
def test_the_buffer_is_the_last_max_lines_of_what_was_added(max_lines, batches):
    buf, model, total = LogBuffer(max_lines), deque(maxlen=max_lines), 0
    for batch in batches:
        buf.extend(batch)
        model.extend(display_line(x) for x in batch)
        total += len(batch)
        assert list(buf) == list(model) and len(buf) == len(model)
        assert buf.total == total and buf.first == total - len(model) + 1
        if model:
            assert buf.line(buf.first) == model[0] and buf.line(total) == model[-1]


def test_max_lines_must_be_positive():
    with pytest.raises(ValueError):
        LogBuffer(0)


def test_a_batch_is_kept_as_it_is_only_where_every_line_would_be():
    # the batch's quick test (no control character in ASCII) decides as display_line does, character
    # by character: a control character anywhere sends the batch through display_line
    for c in [*map(chr, range(128)), "é", "\u2028", "\x9b"]:
        batch = ["fine line", f"x{c}y", "another"]
        buf = LogBuffer(10)
        buf.extend(batch)
        assert list(buf) == [display_line(s) for s in batch], repr(c)
