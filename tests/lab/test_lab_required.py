"""The lab tier cannot vanish silently: with DGX_CONSOLE_REQUIRE_ALL_TIERS=1 (set by .ci/run) a
missing prerequisite fails the lab tests; without it they skip with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
TARGET = str(HERE / "test_lab_checks.py") + "::test_healthy_lab_passes_every_check"


def _pytest(require: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, DGX_LAB_SSHD="/nonexistent/sshd")
    env.pop("DGX_CONSOLE_REQUIRE_ALL_TIERS", None)
    if require:
        env["DGX_CONSOLE_REQUIRE_ALL_TIERS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", TARGET],
                          capture_output=True, text=True, env=env, cwd=HERE.parents[1], timeout=120)


def test_missing_prerequisite_fails_under_require_all_tiers():
    r = _pytest(require=True)
    assert r.returncode != 0, r.stdout[-800:]
    assert "may not be skipped" in r.stdout and "/nonexistent/sshd" in r.stdout


def test_missing_prerequisite_skips_otherwise():
    r = _pytest(require=False)
    assert r.returncode == 0, r.stdout[-800:]
    assert "1 skipped" in r.stdout and "lab tier needs" in r.stdout
