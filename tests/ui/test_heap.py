"""The running app's long-lived heap is out of the collector's full passes (a frame-long pause under a
log flood otherwise), and a finished app leaves nothing frozen behind (a process that runs it again
would keep every finished one)."""

from __future__ import annotations

import gc

from tests.ui.pair_app import pair_app
from tests.waiting import until


async def test_the_app_freezes_its_heap_while_it_runs_and_releases_it_when_it_ends(tmp_path):
    gc.unfreeze()
    app = pair_app(tmp_path)
    async with app.run_test(size=(120, 35)) as pilot:
        await until(lambda: gc.get_freeze_count() > 0, what="the heap frozen after the first frame", pilot=pilot)
        assert all(o is not app for o in gc.get_objects(generation=2))  # the app is frozen: no full pass walks it
    assert gc.get_freeze_count() == 0
