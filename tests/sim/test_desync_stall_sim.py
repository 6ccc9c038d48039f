"""--fault desync stalls the simulated service as a real hang does: /health keeps answering 200, a
request is accepted and no token comes (the ranks are out of step, no collective completes)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.sim.test_hang_report_sim import started
from tests.waiting import until


async def _healthy(client: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await client.get(url + "/health")).status_code == 200
    except httpx.TransportError:
        return False  # the API binds once the engine is ready (the simulator's listener notices it)


async def _first_token(client: httpx.AsyncClient, url: str, model: str) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 8}
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
                    return line
    return f"no token: HTTP {resp.status_code}"


async def test_desync_freezes_tokens_and_health_stays_200(sim_factory):
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=30)  # serving since ~21 s, out of step since ~22.5 s
    url = h.config.api_url()
    async with httpx.AsyncClient(timeout=10) as client:
        await until(lambda: _healthy(client, url), what="the API up", timeout=30)
        with pytest.raises(TimeoutError):  # a deadline on the first token, not a sleep
            await asyncio.wait_for(_first_token(client, url, h.world.profile.served_model_name), 4.0)
        assert (await client.get(url + "/health")).status_code == 200


async def test_a_healthy_pair_streams(sim_factory):
    h = await sim_factory(time_scale=0.05)
    started(h, ago=30)
    url = h.config.api_url()
    async with httpx.AsyncClient(timeout=10) as client:
        await until(lambda: _healthy(client, url), what="the API up", timeout=30)
        got = await asyncio.wait_for(_first_token(client, url, h.world.profile.served_model_name), 20.0)
        assert got.startswith("data: {"), got
