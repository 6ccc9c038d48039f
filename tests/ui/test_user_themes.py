"""A user theme that cannot be read is said on screen (a notice naming the file and why), never
skipped silently; the good user themes beside it still load."""

from __future__ import annotations

from console.ui.themes import load_themes
from tests.ui.pair_app import pair_app
from tests.waiting import until

GOOD = 'name = "night-desk"\nprimary = "#3a6ea5"\ndark = true\n'


def _user_themes(tmp_path, monkeypatch) -> None:
    d = tmp_path / "xdg" / "dgx-console" / "themes"
    d.mkdir(parents=True)
    (d / "good.toml").write_text(GOOD)
    (d / "broken.toml").write_text('name = "x"\nprimary = \n')  # not TOML
    (d / "nameless.toml").write_text('primary = "#ffffff"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def test_a_broken_user_theme_is_a_problem_line_and_the_good_ones_load(tmp_path, monkeypatch):
    _user_themes(tmp_path, monkeypatch)
    problems: list[str] = []
    names = {t.name for t in load_themes(problems)}
    assert "night-desk" in names
    assert len(problems) == 2 and any("broken.toml" in p for p in problems), problems
    assert any("nameless.toml" in p and "needs 'name'" in p for p in problems), problems


async def test_the_app_says_which_user_theme_it_left_out(tmp_path, monkeypatch):
    _user_themes(tmp_path, monkeypatch)
    app = pair_app(tmp_path, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(120, 35), notifications=True) as pilot:  # (tests hide toasts by default)
        def shown() -> list[str]:  # the toasts on screen, as the operator reads them
            return [str(t.render()) for t in app.screen.query("Toast")]

        notes = await until(lambda: len(shown()) >= 2 and shown(), what="the theme notices", pilot=pilot,
                            timeout=10)
        assert any("broken.toml" in m for m in notes) and any("nameless.toml" in m for m in notes), notes
        assert "night-desk" in app.available_themes
