"""The one stream line reader: one logical line is one line, clipped with a visible mark, never split."""

import asyncio
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from console.remote.lines import LineClipper, clipped_lines
from console.sanitize import clip


def test_pieces_make_whole_lines_and_a_long_one_is_clipped_once():
    lines = LineClipper(max_chars=5)
    assert lines.feed("ab") == []
    assert lines.feed("c\r\nde") == ["abc"]
    assert lines.feed("fghij") == []
    assert lines.feed("klm\r\n\n") == ["defgh… [+5 chars]", ""]  # the CR of CRLF is not counted as cut
    assert lines.feed("tail") == [] and lines.end() == ["tail"] and lines.end() == []


@given(st.lists(st.sampled_from(["a", "b", "\n", "\r\n"]), max_size=60),
       st.lists(st.integers(0, 60), max_size=8), st.integers(1, 8))
def test_any_chunking_gives_the_lines_of_the_whole_text(tokens, cuts, limit):
    text = "".join(tokens)
    bounds = [0, *sorted(c for c in cuts if c <= len(text)), len(text)]
    lines = LineClipper(max_chars=limit)
    got = [line for a, b in pairwise(bounds) for line in lines.feed(text[a:b])] + lines.end()
    want = text.split("\n")
    if want[-1] == "":
        want.pop()
    assert got == [clip(w.rstrip("\r"), limit) for w in want]


async def test_clipped_lines_reads_until_the_end():
    data = iter(["one\ntw", "o\n" + "z" * 100, "\nend", ""])

    async def read(n: int) -> str:
        await asyncio.sleep(0)
        return next(data)

    got = [line async for line in clipped_lines(read, max_chars=10)]
    assert got == ["one", "two", "z" * 10 + "… [+90 chars]", "end"]


def test_a_clipped_line_clipped_again_counts_from_the_original():
    once = "y" * 100 + "… [+900 chars]"  # what a stream hands on for a 1000-character line
    assert clip(once, 10) == "y" * 10 + "… [+990 chars]"
    assert clip("a" * 20, 10) == "a" * 10 + "… [+10 chars]"
