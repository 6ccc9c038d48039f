"""The TUI's config load leaves the checks that import the SSH and HTTP libraries (an identity file loaded
by asyncssh, the API URL parsed by httpx) for after its first frame: loading that way imports neither and
accepts what only they refuse; ``library_checks`` then raises the very error a full load raises, and the
TUI ends on it with the same one line and exit 2."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.config import ConfigError, library_checks, load_config
from tests.unit.test_config_hostile import good_text, write

ROOT = Path(__file__).resolve().parents[2]
NOT_A_KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n-----END OPENSSH PRIVATE KEY-----\n"


def bad_configs(tmp_path: Path) -> dict[str, Path]:
    key = write(tmp_path / "id", NOT_A_KEY)
    return {"key": write(tmp_path / "key.toml", good_text(stations__0__identity_file=str(key))),
            "url": write(tmp_path / "url.toml", good_text(api__url="http://1.2.3.999:8000"))}


@pytest.mark.parametrize("which, words", [("key", "not a private key"), ("url", "Invalid IPv4 address")])
def test_the_late_checks_raise_what_a_full_load_raises(tmp_path, which, words):
    path = bad_configs(tmp_path)[which]
    with pytest.raises(ConfigError) as full:
        load_config(str(path))
    cfg = load_config(str(path), library_checks_later=True)  # accepted: the library was not asked
    with pytest.raises(ConfigError) as late:
        library_checks(cfg)
    assert str(late.value) == str(full.value) and words in str(late.value) and late.value.line, str(late.value)
    library_checks(load_config(str(write(tmp_path / "good.toml", good_text()))))  # a good config passes both


def test_loading_for_the_tui_imports_neither_library(tmp_path):
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    cfg = write(tmp_path / "c.toml", good_text(stations__0__identity_file=str(key)))
    probe = ("import sys; from console.commands._tui import load_for_tui; from console.config import library_checks; "
             f"c = load_for_tui({str(cfg)!r}); a = sorted(m for m in ('asyncssh', 'httpx') if m in sys.modules); "
             "library_checks(c); print(a, sorted(m for m in ('asyncssh', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["[]", "['asyncssh',", "'httpx']"], out


def test_the_tui_ends_on_a_late_check_with_one_line_and_exit_2(tmp_path):
    """The real command in a terminal (a pty): the screen comes up, the key fails, the terminal is given
    back and the error is the one line a headless command prints."""
    path = bad_configs(tmp_path)["key"]
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen([sys.executable, "-m", "console", "--config", str(path)], stdin=follower,
                            stdout=follower, stderr=follower, cwd=ROOT, env=env, start_new_session=True)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]", "", seen.decode("utf-8", "replace"))
    lines = [ln.strip() for ln in text.replace("\r", "\n").split("\n") if "not a private key" in ln]
    assert rc == 2, text[-2000:]
    assert b"\x1b[?1049h" in seen and b"\x1b[?1049l" in seen  # the TUI took the screen, and gave it back
    assert len(lines) == 1 and lines[0].startswith("dgx-console: ") and "stations[0].identity_file" in lines[0], lines
