"""One look at the API for ``dgx-console status``: healthy or not, and the model it serves.

Through the one bounded client (console/serving/client.py), like the dashboard's serving panel, so
the two agree (a 302 on ``/health`` is not healthy in either) and everything hostile a server can
send is a state in words: an HTML login page, ``[]``, ``{"data": [1]}``, bytes that are not UTF-8,
a gzip bomb, an answer dripped a byte at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from console.serving.client import ApiClient
from console.serving.errors import ApiError
from console.serving.metrics import ServingMonitor, ServingSnapshot


async def api_status(url: str, api_key: str | None, timeout: float) -> dict[str, Any]:
    """``{"url", "healthy", "model", "error"}`` (the ``status --json`` contract); never raises for
    what the server does. ``timeout`` bounds each request whole (connect, headers and body)."""
    res: dict[str, Any] = {"url": url, "healthy": False, "model": None, "error": None}
    try:
        client = ApiClient(url, api_key=api_key, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a URL httpx will not even hold: a state, not a traceback
        res["error"] = f"cannot use {url}: {type(exc).__name__}"
        return res
    async with client:
        health = await client.health()
        res["healthy"] = health.ok
        if not health.ok:
            res["error"] = health.error or "/health did not answer"
            if health.status is None:  # no HTTP answer at all: the model list would not answer either
                return res
        try:
            models = await client.models()
        except ApiError as exc:
            if exc.kind == "unauthorized":
                res["error"] = "/v1/models returned 401: API key missing or wrong (api.api_key_env)"
            elif res["error"] is None:
                res["error"] = str(exc)
            return res
        if models:
            res["model"] = models[0]["id"]
        elif res["error"] is None:
            res["error"] = "GET /v1/models lists no model (no entry with a string id)"
    return res


# Progress truth (``status``'s one look at the generation-token counter)
LOOK_GAP_S = 1.5  # between the two reads of /metrics when requests run


async def counter_look(url: str, api_key: str | None, timeout: float, gap_s: float = LOOK_GAP_S
                       ) -> list[ServingSnapshot]:
    """The API's figures, read once, and a second time ``gap_s`` later when requests run (did a
    token move between them?), through the same monitor as the dashboard's; [] when it cannot be
    asked at all. Never raises for what the server does."""
    try:
        client = ApiClient(url, api_key=api_key, timeout=timeout)
    except Exception:  # noqa: BLE001 - a URL httpx will not even hold: api_status says why
        return []
    looks: list[ServingSnapshot] = []
    async with client:
        monitor = ServingMonitor(client, looks.append, interval_s=gap_s)
        looks.append(await monitor.poll_once())
        if looks[0].running:
            await asyncio.sleep(gap_s)
            looks.append(await monitor.poll_once())
    return looks
