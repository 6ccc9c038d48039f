"""OpenAI-compatible API of a simulated head station (aiohttp).

Listens only while the simulated engine is ready, as vLLM binds its port only at the end of
start-up. ``create_app(backend)`` is the one entry point; what the model says is planned in
``console/sim/replies.py``, the slots, pacing and ``/metrics`` are ``console/sim/api_scheduler.py``.

What it imitates, from shared/reference/engines.md: streamed chat completions (SSE) with reasoning
(``reasoning`` for vLLM, ``reasoning_content`` for SGLang), GLM tool calls when tools are given,
the usage chunk, the reasoning budget trap (reasoning counts against ``max_tokens``), 401 without
the ``--api-key``, 503 once the engine is dead and an error chunk when it dies mid-stream, and
``/metrics`` with the engine's own names, written by prometheus_client as the engines do. Tokens
come at ``backend.tokens_per_s`` for one user, slower per user as more run (total capped), at most
``max_num_seqs`` at once (the rest wait); MTP speculative decoding emits several tokens per step.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import generate_latest

from console.sim.api_scheduler import LiveRequest, Scheduler
from console.sim.replies import Plan, count_tokens, plan_reply

HEALTH_GENERATE_TIMEOUT_S = 20.0  # SGLang's /health_generate gives up then (SGLANG_HEALTH_CHECK_TIMEOUT)


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": status}},
                             status=status)


@dataclass
class FixedBackend:
    """A backend whose engine phase is set by hand (``state``): the simulated API on its own,
    without simulated stations, for tests and load generation."""

    model: str = "glm-5.3"
    max_model_len: int = 8192
    engine: str = "vllm"
    engine_version: str = "0.30.0"
    api_key: str | None = None
    tokens_per_s: float = 1000.0
    max_num_seqs: int = 8
    num_speculative_tokens: int = 0
    state: str = "ready"

    def phase(self) -> str:
        return self.state


def create_app(backend) -> web.Application:
    """``backend``: model, max_model_len, engine, api_key, tokens_per_s, max_num_seqs, phase()."""
    app = web.Application()
    started = int(time.time())
    state: dict[str, Scheduler] = {}

    def eng() -> Scheduler:  # created in the serving loop (asyncio.Semaphore binds to it)
        if "e" not in state:
            state["e"] = Scheduler(backend)
        return state["e"]

    def authorized(request: web.Request) -> bool:
        return not backend.api_key or request.headers.get("Authorization") == f"Bearer {backend.api_key}"

    async def phase() -> str:
        return await asyncio.to_thread(backend.phase)

    async def stalled() -> bool:
        """The collectives stopped (a hang fault): requests stay open and no token comes; /health keeps 200."""
        return bool(await asyncio.to_thread(getattr(backend, "stalled", lambda: False)))

    async def health(request: web.Request) -> web.Response:
        if await phase() == "ready":
            return web.Response(status=200)
        return web.Response(status=503)

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": getattr(backend, "engine_version", "0.0.0")})

    async def models(request: web.Request) -> web.Response:
        if not authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.json_response({"object": "list", "data": [{
            "id": backend.model, "object": "model", "created": started, "owned_by": backend.engine,
            "root": backend.model, "parent": None, "max_model_len": backend.max_model_len,
        }]})

    async def load() -> tuple[int, float, bool] | None:  # the wedge fault's users, if any
        return await asyncio.to_thread(backend.load) if hasattr(backend, "load") else None

    async def wedged() -> bool:
        return bool((bg := await load()) and bg[2])

    async def health_generate(request: web.Request) -> web.Response:
        """SGLang's ``/health_generate``: it runs a one-token generation, so a wedged engine never answers."""
        if await phase() != "ready":
            return web.Response(status=503)
        deadline = time.monotonic() + HEALTH_GENERATE_TIMEOUT_S
        while await wedged() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        return web.Response(status=503 if await wedged() else 200)

    async def metrics(request: web.Request) -> web.Response:
        e = eng()
        e.refresh(await load())
        return web.Response(body=generate_latest(e.registry),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def chat(request: web.Request) -> web.StreamResponse:
        if not authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        if await phase() != "ready":
            return _error(503, "EngineDeadError: the engine core is not running", "ServiceUnavailableError")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not JSON", "BadRequestError")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "messages: a non-empty list is required", "BadRequestError")
        if body.get("model") not in (None, backend.model):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        e = eng()
        prompt_tokens = count_tokens(body["messages"])
        room = int(backend.max_model_len) - prompt_tokens
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        if max_tokens is None:
            max_tokens = room
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, "max_tokens must be a positive integer", "BadRequestError")
        if max_tokens > room:
            return _error(400, f"This model's maximum context length is {backend.max_model_len} tokens. "
                          f"However, you requested {max_tokens} output tokens and your prompt contains "
                          f"{prompt_tokens} input tokens.", "BadRequestError")
        plan = plan_reply(body, backend.model, backend.engine)
        if body.get("stream"):
            return await _stream(request, e, body, plan, prompt_tokens, max_tokens)
        return await _whole(e, body, plan, prompt_tokens, max_tokens)

    async def _generate(e: Scheduler, body: dict[str, Any], plan: Plan, prompt_tokens: int, max_tokens: int):
        """Yield (kind, text) pieces paced like the engine; the final item is ("finish", reason)."""
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        e.waiting += 1
        e.refresh()
        try:
            await e.slots.acquire()
        finally:
            e.waiting -= 1
        live = LiveRequest(prompt_tokens)
        e.live[rid] = live
        e.refresh()
        rng = random.Random(zlib.crc32(json.dumps(body.get("messages"), sort_keys=True).encode()))
        reason = "abort"
        try:
            while await wedged():  # a wedged engine admits the request and never computes a token
                await asyncio.sleep(0.5)
            hits = e.prefix(body["messages"], prompt_tokens)
            e.c_prompt.labels(*e.lv).inc(prompt_tokens)
            if not e.sglang:
                e.c_queries.labels(*e.lv).inc(prompt_tokens)
                e.c_hits.labels(*e.lv).inc(hits)
            elif e.seen_prefixes:
                e.g_hit.labels(*e.lv).set(hits / prompt_tokens)
            rate = float(backend.tokens_per_s)
            prefill = min(0.45, 50.0 / rate) + (prompt_tokens - hits) / (rate * 200.0)
            await asyncio.sleep(prefill)
            pieces: list[tuple[str, str]] = [("reasoning", t) for t in plan.reasoning]
            pieces += [("content", t) for t in plan.content]
            if plan.tool_call:
                pieces += [("tool", "")] * plan.tool_tokens
            budget = max_tokens
            i = 0
            first = True
            last = time.monotonic()
            next_at = last
            checked = last
            frozen = await stalled()
            while i < len(pieces) and budget > 0:
                while frozen:
                    await asyncio.sleep(0.5)
                    frozen = await stalled()
                k = e.step_tokens(rng, min(budget, len(pieces) - i))
                step = pieces[i:i + k]
                i += k
                budget -= k
                live.generated += k
                e.generated(k)
                now = time.monotonic()
                if first:
                    e.h_ttft.labels(*e.lv).observe(now - t0)
                    first = False
                else:
                    e.h_itl.labels(*e.lv).observe(now - last)
                last = now
                for kind in ("reasoning", "content"):
                    text = "".join(t for kd, t in step if kd == kind)
                    if text:
                        yield kind, text
                if plan.tool_call and i == len(pieces) and step[-1][0] == "tool":
                    yield "tool", plan.tool_call
                if now - checked > 1.0:
                    checked = now
                    frozen = await stalled()
                    if await phase() == "dead":
                        reason = "error"
                        yield "error", "EngineCore encountered a fatal error."
                        return
                next_at = max(next_at + k / e.per_user_rate(), now - 0.05)
                delay = next_at - time.monotonic()
                if delay > 0 and i < len(pieces):
                    await asyncio.sleep(delay)
            if i < len(pieces) or (budget == 0 and not plan.tool_call):
                reason = "length"  # no room left for the end-of-turn token either
            elif plan.tool_call:
                reason = "tool_calls"
            else:
                reason = "stop"
                live.generated += 1  # the EOS token counts as generated, as in vLLM
                e.generated(1)
            e.h_e2e.labels(*e.lv).observe(time.monotonic() - t0)
            yield "finish", reason
            yield "usage", {"prompt_tokens": prompt_tokens, "completion_tokens": live.generated,
                            "total_tokens": prompt_tokens + live.generated,
                            "completion_tokens_details": {"reasoning_tokens": min(live.generated,
                                                                                  len(plan.reasoning))},
                            **({"prompt_tokens_details": {"cached_tokens": hits}} if hits else {})}
        finally:
            e.finished("stop" if reason == "tool_calls" else reason)
            del e.live[rid]
            e.slots.release()
            e.refresh()

    def _chunk(cid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": backend.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    async def _stream(request: web.Request, e: Scheduler, body: dict[str, Any], plan: Plan, prompt_tokens: int,
                      max_tokens: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        rfield = "reasoning_content" if e.sglang else "reasoning"
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def send(obj: Any) -> None:
            await resp.write(f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode())

        await send(_chunk(cid, {"role": "assistant", "content": ""}))
        gen = _generate(e, body, plan, prompt_tokens, max_tokens)
        try:
            async for kind, value in gen:
                if kind == "reasoning":
                    await send(_chunk(cid, {rfield: value}))
                elif kind == "content":
                    await send(_chunk(cid, {"content": value}))
                elif kind == "tool":
                    call_id = f"chatcmpl-tool-{uuid.uuid4().hex[:16]}"
                    await send(_chunk(cid, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                            "function": {"name": value["name"], "arguments": ""}}]}))
                    args = value["arguments"]
                    for j in range(0, len(args), 8):  # arguments arrive as string fragments
                        await send(_chunk(cid, {"tool_calls": [{"index": 0,
                                                                "function": {"arguments": args[j:j + 8]}}]}))
                elif kind == "error":
                    await send({"error": {"message": value, "type": "InternalServerError", "param": None,
                                          "code": 500}})
                elif kind == "finish":
                    await send(_chunk(cid, {}, finish=value))
                elif kind == "usage" and include_usage:
                    await send({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                                "model": backend.model, "choices": [], "usage": value})
            await send("[DONE]")
        except ConnectionResetError:  # the client went away: the request is aborted
            pass
        finally:
            await gen.aclose()
        return resp

    async def _whole(e: Scheduler, body: dict[str, Any], plan: Plan, prompt_tokens: int,
                     max_tokens: int) -> web.Response:
        parts: dict[str, list[str]] = {"reasoning": [], "content": []}
        calls: list[dict[str, Any]] = []
        finish, usage, error = None, None, None
        gen = _generate(e, body, plan, prompt_tokens, max_tokens)
        try:
            async for kind, value in gen:
                if kind in parts:
                    parts[kind].append(value)
                elif kind == "tool":
                    calls.append({"id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", "type": "function",
                                  "function": value})
                elif kind == "error":
                    error = value
                elif kind == "finish":
                    finish = value
                elif kind == "usage":
                    usage = value
        finally:
            await gen.aclose()
        if error:
            return _error(500, error, "InternalServerError")
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(parts["content"]) or None,
                               "tool_calls": calls}
        msg["reasoning_content" if e.sglang else "reasoning"] = "".join(parts["reasoning"]) or None
        return web.json_response({"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
                                  "created": int(time.time()), "model": backend.model,
                                  "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                  "usage": usage})

    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    if backend.engine == "sglang":
        app.router.add_get("/health_generate", health_generate)
    app.router.add_post("/v1/chat/completions", chat)
    return app
