"""Four stations at 80x24: the head's serving box is never cut off. The pane is too short for a framed
box, so the box keeps its first row (the API's word) unframed, inside the pane; at 120x35 and 200x50
the framed box fits whole."""

from __future__ import annotations

import time

import pytest

from console.config import parse_config
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.serving.metrics import ServingSnapshot
from console.station.messages import ConnectionState, ContainerUpdate, EngineUpdate
from console.ui.app import ConsoleApp
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from tests.waiting import until


def four_config():
    text = 'profile = "glm53-nvfp4-2x-gb300-vllm"\n\n' + "\n".join(
        f'[[stations]]\nname = "{n}"\nhost = "127.0.0.{i + 1}"\nrank = {i}\n' for i, n in enumerate("ABCD"))
    return parse_config(text, None)


@pytest.mark.parametrize(("size", "framed"), [((80, 24), False), ((120, 35), True), ((200, 50), True)])
async def test_the_heads_serving_box_fits_its_pane_with_four_stations(size, framed):
    app = ConsoleApp(four_config(), start_services=False, clock=False)
    async with app.run_test(size=size) as pilot:
        now = time.time()
        for n in "ABCD":
            app.post_message(ConnectionState(n, "live", last_sample_at=now))
            app.post_message(ContainerUpdate(n, ContainerInfo("glm53", "running"), now - 60))
            app.post_message(EngineUpdate(n, EngineProgress("ready"), now - 30))
        app.post_message(ServingUpdate(ServingSnapshot(url="http://127.0.0.1:8000", healthy=True, status="ok",
                                                       running=0, waiting=0, updated_at=now, polled_at=now),
                                       at=now))
        pane = app.panes["A"]
        panel = pane.query_one(ServingPanel)
        await until(lambda: panel.snapshot is not None, what="the API poll on the panel", pilot=pilot)
        await pilot.pause()
        inner = pane.content_region
        box = panel.region
        assert box.height >= 1 and box.y >= inner.y and box.bottom <= inner.bottom, (box, inner)
        assert (panel.styles.border_top[0] not in ("", "none")) == framed
        if framed:
            assert box.height >= 5  # frame + at least three rows of figures
