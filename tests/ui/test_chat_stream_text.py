"""StreamText: incremental wrapping equals wrapping the whole text; rows paint what was appended."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.app import App, ComposeResult

from console.ui.widgets.stream_text import RESERVE, StreamText, WrappedRows, wrap_tail
from tests.waiting import until


def fed(chunks: list[str], width: int) -> list[str]:
    w = WrappedRows(width)
    for c in chunks:
        w.feed(c)
    return w.lines()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab  \n日x"), max_size=12), max_size=30),
       st.integers(min_value=2, max_value=12))
def test_incremental_wrap_equals_one_shot(chunks: list[str], width: int) -> None:
    assert fed(chunks, width) == fed(["".join(chunks)], width)
    for row in fed(chunks, width):
        assert cell_len(row) <= width


def test_wrap_tail_breaks_at_spaces_and_hard_breaks_long_words() -> None:
    assert wrap_tail("hello world this is a test", 10) == (["hello", "world this"], "is a test")
    assert wrap_tail("abcdefghijklmnopqrstuvwxyz", 10) == (["abcdefghij", "klmnopqrst"], "uvwxyz")
    assert wrap_tail("日本語のテキスト", 6) == (["日本語", "のテキ"], "スト")


class One(App):
    def compose(self) -> ComposeResult:
        yield StreamText(id="s")


async def test_rows_render_and_rewrap_on_resize() -> None:
    app = One()
    async with app.run_test(size=(20, 10)) as pilot:
        w = app.query_one(StreamText)
        for word in ("alpha ", "beta ", "gamma ", "delta ", "epsilon\n", "zeta"):
            w.append(word)
        await pilot.pause()
        assert w.text == "alpha beta gamma delta epsilon\nzeta"
        assert w.size.height == w.row_count == 3
        assert [w.render_line(y).text.rstrip() for y in range(3)] == ["alpha beta gamma", "delta epsilon", "zeta"]
        await pilot.resize_terminal(10, 10)
        await pilot.pause()
        assert [w.render_line(y).text.rstrip() for y in range(w.row_count)] == [
            "alpha beta", "gamma", "delta", "epsilon", "zeta"]
        w.clear()
        await pilot.pause()
        assert w.text == "" and w.row_count == 0


class Live(App):
    def compose(self) -> ComposeResult:
        yield StreamText(id="s", live=True)


async def test_live_stream_batches_appends_claims_a_row_and_seal_gives_it_back() -> None:
    """A streamed reply: hundreds of appends cost a few layouts (not one per row), the text is all
    painted, RESERVE blank rows are claimed under it while streaming, and seal() gives them back."""
    app = Live()
    async with app.run_test(size=(30, 40)) as pilot:
        w = app.query_one(StreamText)
        layouts = 0
        real_refresh = w.refresh

        def counting_refresh(*regions, **kw):
            nonlocal layouts
            layouts += bool(kw.get("layout"))
            return real_refresh(*regions, **kw)

        w.refresh = counting_refresh  # type: ignore[method-assign]
        words = [f"w{i} " for i in range(300)]  # ~ 1,200 characters: ~ 40 rows at 30 columns
        for word in words:
            w.append(word)
        assert layouts <= 1  # one burst: at most the first flush lays out
        def painted() -> list[str]:
            return " ".join(w.render_line(y).text.strip() for y in range(w.row_count)).split()

        # the deferred flushes run on timers: until every word is painted and the rows are claimed
        await until(lambda: painted() == "".join(words).split() and w.size.height == w.row_count + RESERVE,
                    what="the whole text painted", timeout=5, pilot=pilot,
                    detail=lambda: (w.size.height, w.row_count, painted()[-3:]))
        assert layouts < w.row_count / 4  # rows arrived in batches, not a layout per row
        w.seal()
        await pilot.pause()
        assert w.size.height == w.row_count
