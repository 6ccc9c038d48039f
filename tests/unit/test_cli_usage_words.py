"""Usage errors that help: a subcommand typo names the nearest one, a flag's wrong
choice too; `demo --stations 0` says what --stations is, one line, exit 2, before anything starts."""

from __future__ import annotations

import pytest

from console.cli import main


def test_a_subcommand_typo_gets_did_you_mean(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["stauts"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "did you mean 'status'?" in err and err.count("\n") == 1


def test_a_flag_choice_typo_gets_did_you_mean(capsys):
    with pytest.raises(SystemExit):
        main(["chat", "--effort", "hgh", "-m", "x"])
    assert "did you mean 'high'?" in capsys.readouterr().err


def test_nothing_near_names_nothing(capsys):
    with pytest.raises(SystemExit):
        main(["zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


def test_demo_with_no_stations_is_a_clear_usage_error(capsys):
    assert main(["demo", "--stations", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "dgx-console: --stations must be 1..64 (how many simulated stations to start), got 0\n"
