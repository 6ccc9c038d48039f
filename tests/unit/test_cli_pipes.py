"""Output into a pipe whose reader went away (``dgx-console status | head -1``) ends as Unix tools
end: quietly, exit 141 (128 + SIGPIPE), no traceback, for every printing
subcommand (the handling is the entry point's, not each command's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.two_stations import two_station_toml

ROOT = Path(__file__).resolve().parents[2]
# a station nothing answers for: status and check print what they found (unreachable) at once
CONFIG = two_station_toml(host_a="127.0.0.1", host_b="127.0.0.1", rail=False, each="port = 9")


def run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the console with stdout a pipe whose read end is already closed: every write is EPIPE."""
    r, w = os.pipe()
    os.close(r)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run([sys.executable, "-m", "console.cli", *args], stdout=w, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, env=env, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("args", [["status"], ["check"], ["status", "--json"], ["diagnose", "log.txt"], ["--help"]])
def test_a_closed_pipe_is_a_quiet_exit(tmp_path, args):
    (tmp_path / "dgx-console.toml").write_text(CONFIG)
    (tmp_path / "log.txt").write_text("torch.OutOfMemoryError: CUDA out of memory.\n" * 3)
    res = run_into_closed_pipe(args, tmp_path)
    assert "Traceback" not in res.stderr and "BrokenPipeError" not in res.stderr, res.stderr
    assert "Exception ignored" not in res.stderr, res.stderr
    assert res.returncode in (0, 141), (res.returncode, res.stderr)
