"""Fixtures of the hostile-input tier: the hostile OpenAI-compatible server (hostile_api.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hostile_api import HostileServer, start_hostile


@pytest.fixture
async def hostile() -> AsyncIterator[HostileServer]:
    srv, runner = await start_hostile()
    yield srv
    if srv.raw is not None:
        await srv.raw.stop()
    await runner.cleanup()
