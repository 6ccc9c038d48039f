"""The dashboard's footer, built on Textual's public API: keys from the screen's bindings, a click
runs the key, the command palette's key on the right."""

from __future__ import annotations

from pair_app import pair_app

from console.ui.widgets.fitted_footer import FittedFooter, KeyHint
from tests.waiting import until


def keys(app) -> dict[str, KeyHint]:
    return {k.description: k for k in app.dashboard.query_one(FittedFooter).query(KeyHint)}


def laid_out(app) -> bool:
    """The footer's keys are composed and placed."""
    shown = keys(app)
    return "Diagnosis" in shown and all(k.region.width for k in shown.values())


async def test_a_click_on_a_key_runs_it():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: laid_out(app), what="the footer's keys", pilot=pilot)
        assert not app.dashboard.has_class("-show-diagnosis")
        await pilot.click(keys(app)["Diagnosis"])
        await until(lambda: app.dashboard.has_class("-show-diagnosis"),
                    what="the diagnosis panel open", pilot=pilot)


async def test_the_keys_are_the_screens_shown_bindings_with_the_palette_on_the_right():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: laid_out(app), what="the footer's keys", pilot=pilot)
        shown = keys(app)
        hidden = {b.description for _, b, _, _ in app.screen.active_bindings.values() if not b.show}
        assert "Trust key" in hidden and "Trust key" not in shown  # show=False bindings stay out
        assert shown["Hang"].key_display == "h" and shown["Investigate"].key_display == "i"
        assert shown["Filter"].key_display == "/" and shown["Filter"].action == "filter"
        palette = next(k for k in shown.values() if k.has_class("-command-palette"))
        assert palette.region.right == app.size.width - 1  # docked right, one cell of margin
        assert all(k.region.right <= palette.region.x for k in shown.values() if k is not palette)
