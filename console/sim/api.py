"""OpenAI-compatible API of a simulated head station (aiohttp).

Listens only while the simulated engine is ready, as vLLM binds its port only at the end of
start-up. ``create_app(backend)`` is the one entry point.
"""

from __future__ import annotations

import time

from aiohttp import web


def create_app(backend) -> web.Application:
    """``backend``: model, max_model_len, engine, api_key, tokens_per_s, max_num_seqs, phase()."""
    app = web.Application()
    started = int(time.time())

    async def health(request: web.Request) -> web.Response:
        if backend.phase() == "ready":
            return web.Response(status=200)
        return web.Response(status=503)

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": backend.engine_version})

    async def models(request: web.Request) -> web.Response:
        if backend.api_key and request.headers.get("Authorization") != f"Bearer {backend.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.json_response({"object": "list", "data": [{
            "id": backend.model, "object": "model", "created": started, "owned_by": backend.engine,
            "root": backend.model, "parent": None, "max_model_len": backend.max_model_len,
        }]})

    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    return app
