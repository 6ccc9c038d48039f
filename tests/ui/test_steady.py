"""A Steady widget draws again only when what it shows changed: the same health rows, memory bar or
"no error" handed over on every GPU sample cost no refresh; any change of text, style or span does."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from console.probes.meminfo import HostMemory
from console.ui.fit_text import Clipped, Packed
from console.ui.shown_key import shown_key
from console.ui.widgets.gpu_meter import Bar
from console.ui.widgets.station_pane import HostMemLine, OneRowEach
from console.ui.widgets.steady import Steady


class _One(App):
    def compose(self) -> ComposeResult:
        yield Steady("")


async def test_equal_content_is_not_drawn_again_and_any_change_is():
    app = _One()
    async with app.run_test() as pilot:
        w = app.query_one(Steady)
        refreshes = []
        w.refresh = lambda *a, **k: refreshes.append(k) or w  # count what reaches Textual
        assert w.show(Text("GPU0 util 5%", style="bold")) is True
        assert w.show(Text("GPU0 util 5%", style="bold")) is False  # a new object, the same text
        assert w.show(Text("GPU0 util 5%", style="dim")) is True  # the style alone changed
        red = Text("GPU0 util 5%")
        red.stylize("red", 0, 4)
        assert w.show(red) is True  # a span alone changed
        assert len(refreshes) == 3
        w.update("plain")  # drawn by a caller of update: the next show draws whatever it is
        assert w.show(red) is True
        await pilot.pause()


def test_our_renderables_have_keys_that_follow_what_they_draw():
    rows = [Text("rail enp1 up", style="green")]
    assert shown_key(OneRowEach(rows)) == shown_key(OneRowEach([Text("rail enp1 up", style="green")]))
    assert shown_key(OneRowEach(rows)) != shown_key(OneRowEach([Text("rail enp1 down", style="green")]))
    assert shown_key(Bar(0.5)) == shown_key(Bar(0.5)) != shown_key(Bar(0.5, dim=True))
    mem = HostMemory(507904, 483000)
    assert shown_key(HostMemLine(mem, False)) == shown_key(HostMemLine(HostMemory(507904, 483000), False))
    assert shown_key(HostMemLine(mem, False, 3.0)) != shown_key(HostMemLine(mem, False, 9.0))  # the age moved
    packed = Packed([Text("live")], "   ", (Clipped(Text("✖ boom"), 2),))
    assert shown_key(packed) == shown_key(Packed([Text("live")], "   ", (Clipped(Text("✖ boom"), 2),)))
    assert shown_key(Packed([Text("live")], "   ", (object(),))) is None  # an unknown renderable: always drawn
