"""What a person reads first at any size: the dashboard at 200x50, 120x35 and 80x24."""

from __future__ import annotations

import pytest
from pair_app import pair_app

from console.ui.widgets.fitted_footer import FittedFooter, KeyHint, fitting
from tests.waiting import until


def footer_labels(app) -> list[str]:
    footer = app.dashboard.query_one(FittedFooter)
    return [k.description for k in footer.query(KeyHint) if not k.has_class("-command-palette")]


@pytest.mark.parametrize("size,must", [
    ((200, 50), {"Filter", "Checks", "Doctor", "Diagnosis", "Launch", "Stop", "Restart", "Theme", "Help", "Quit",
                 "Fleet"}),
    ((120, 35), {"Filter", "Checks", "Doctor", "Diagnosis", "Launch", "Stop", "Restart", "Theme", "Help"}),
    ((80, 24), {"Help", "Checks", "Doctor", "Restart"}),  # n, the workbench, at every size
])
async def test_the_footer_keeps_the_keys_that_matter(size, must):
    app = pair_app()
    async with app.run_test(size=size) as pilot:
        await until(lambda: must <= set(footer_labels(app)),
                    what=f"the footer's keys at {size}: {must}", pilot=pilot)
        footer = app.dashboard.query_one(FittedFooter)
        right = max(k.region.right for k in footer.query(KeyHint) if not k.has_class("-command-palette"))
        palette = next(k for k in footer.query(KeyHint) if k.has_class("-command-palette"))
        assert right <= palette.region.x  # nothing cut under the palette key


def test_fitting_keeps_priority_and_order():
    keys = [KeyHint("q", "q", "Quit", "app.quit"), KeyHint("slash", "/", "Filter", "filter"),
            KeyHint("f1", "f1", "Help", "app.toggle_help")]
    assert [k.description for k in fitting(keys, 100)] == ["Quit", "Filter", "Help"]
    assert [k.description for k in fitting(keys, 18)] == ["Filter", "Help"]  # quit is the first to go
