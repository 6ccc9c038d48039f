"""``[keys]`` in the config: binding ids -> keys through Textual's keymap, checked before the TUI
starts (an unknown id, a key Textual cannot name, a clash on one screen: one line, exit 2)."""

from __future__ import annotations

import pytest

from console.cli import main
from console.config import parse_config
from console.ui.app import ConsoleApp
from console.ui.keymap import binding_table, check_keymap, key_problem, known_bindings
from console.ui.screens.bench import BenchScreen
from console.ui.screens.chat import ChatScreen
from tests.waiting import until

BASE = """\
profile = "glm53-nvfp4-2x-gb300-vllm"

[api]
url = "http://127.0.0.1:9"

[[stations]]
name = "A"
host = "127.0.0.1"
rank = 0

[keys]
"""


async def test_remapped_keys_open_the_screens_and_the_old_keys_do_not(tmp_path):
    cfg = parse_config(BASE + 'chat = "f6"\nbench = "f7,ctrl+b"\nchat-clear = "f8"\n', str(tmp_path / "c.toml"))
    assert check_keymap(cfg) == {"chat": "f6", "bench": "f7,ctrl+b", "chat-clear": "f8"}
    app = ConsoleApp(cfg, start_services=False, clock=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("c")  # no longer the chat's key
        await pilot.pause(0.2)  # a fixed interval is the point here: nothing may open during it
        assert not isinstance(app.screen, ChatScreen)
        await pilot.press("f6")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat on F6", pilot=pilot)
        footer_keys = {b.binding.id: k for k, b in app.screen.active_bindings.items() if b.binding.id}
        assert footer_keys["chat-clear"] == "f8"
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, ChatScreen), what="back", pilot=pilot)
        await pilot.press("ctrl+b")
        await until(lambda: isinstance(app.screen, BenchScreen),
                    what="the bench on its second key", pilot=pilot)


def test_every_key_of_the_app_has_an_id_to_remap():
    ids = known_bindings()
    for want in ("quit", "chat", "bench", "checks", "launch", "help", "chat-clear", "bench-run", "checks-rerun"):
        assert want in ids
    assert all(desc for _, _, _, desc in binding_table())


@pytest.mark.parametrize("keys", ["f5", "ctrl+r", "ctrl+r,f5", "?", "question_mark", "slash", "escape", "space",
                                  "shift+tab", "x", "ctrl+shift+up"])
def test_key_names_textual_accepts(keys):
    assert key_problem(keys) is None


@pytest.mark.parametrize("line, needle", [
    ('nope = "f5"', "keys.nope: unknown binding id"),
    ('chat = "f99"', "'f99' is not a key name"),
    ('chat = "ctlr+x"', "'ctlr' is not a modifier"),
    ('chat = "f5,"', "an empty key"),
    ('chat = 5', "keys.chat: must be a key name"),
    ('chat = ""', "keys.chat: must be a key name"),
    ('chat-clear = "ctrl+y"', "'ctrl+y' is also chat-copy's key on the same screen (ChatScreen)"),
    ('[keys.bench]\nrun = "f5"', "binding ids have no dots"),
])
def test_bad_keymaps_are_one_line_exit_2_with_the_line(tmp_path, capsys, line, needle):
    path = tmp_path / "c.toml"
    path.write_text(BASE + line + "\n")
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    if "unknown" in needle or "not a" in needle or "also" in needle:
        assert f"{path}:{BASE.count(chr(10)) + 1}:" in err  # the line of the offending key


def test_an_app_key_clashing_with_a_dashboard_key_is_refused(tmp_path, capsys):
    """The dashboard's keys are its screen's, the app's (quit, theme, help) work on it too: a clash
    between them is caught like one within a screen."""
    path = tmp_path / "c.toml"
    path.write_text(BASE + 'quit = "k"\n')
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "keys.quit: 'k' is also checks" in err and "Traceback" not in err, err  # checks (dashboard) or checks-previous
