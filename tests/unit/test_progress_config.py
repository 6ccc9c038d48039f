"""``[ui] progress_window_s`` (the progress window W): default 30 s, 5..3600, a bad value is one line and exit 2."""

from __future__ import annotations

import pytest

from console.cli import main
from console.config import parse_config

BASE = 'profile = "glm53-nvfp4-2x-gb300-vllm"\n[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n'


def test_the_window_defaults_to_30_s_and_takes_a_number() -> None:
    assert parse_config(BASE, "c.toml").ui.progress_window_s == 30.0
    assert parse_config(BASE + "[ui]\nprogress_window_s = 12.5\n", "c.toml").ui.progress_window_s == 12.5


@pytest.mark.parametrize("value, words", [("2", "must be >= 5 (seconds)"), ("7200", "must be <= 3600 (seconds)"),
                                          ("nan", "must be a number of seconds"), ('"30"', "must be number"),
                                          ("true", "must be number")])
def test_a_bad_window_is_one_line_and_exit_2(tmp_path, capsys, value, words) -> None:
    path = tmp_path / "c.toml"
    path.write_text(BASE + f"[ui]\nprogress_window_s = {value}\n")
    assert main(["status", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"ui.progress_window_s: {words}" in err and "Traceback" not in err
