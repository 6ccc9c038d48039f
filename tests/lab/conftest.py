"""The lab tier: real sshd in network namespaces. Under DGX_CONSOLE_REQUIRE_ALL_TIERS=1 (CI) a
missing prerequisite fails the tests instead of skipping them, so the tier cannot silently vanish."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from lab import Lab, missing_prerequisites  # noqa: E402


def pytest_collection_modifyitems(items):
    """The ``lab`` marker, and one pytest-xdist group for the tier: under ``--dist loadgroup`` its tests
    run one after the other on one worker (each builds namespaces and sshds; the tier is mostly waits
    on them), beside the other tiers' tests on the other workers."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.lab)
            item.add_marker(pytest.mark.xdist_group("lab"))


@pytest.fixture(scope="session")
def lab_prerequisites() -> None:
    missing = missing_prerequisites()
    if missing:
        msg = "lab tier needs: " + ", ".join(missing)
        if os.environ.get("DGX_CONSOLE_REQUIRE_ALL_TIERS") == "1":
            pytest.fail(msg + " (DGX_CONSOLE_REQUIRE_ALL_TIERS=1: the lab tier may not be skipped)")
        pytest.skip(msg)


@pytest.fixture
def lab(lab_prerequisites):
    """A fresh two-station lab per test, torn down even when the test fails."""
    built = Lab()
    try:
        built.setup()
        yield built
    finally:
        built.teardown()
