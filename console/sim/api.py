"""OpenAI-compatible API of a simulated head station (aiohttp).

Listens only while the simulated engine is ready, as vLLM binds its port only at the end of
start-up. ``create_app(backend)`` is the one entry point.

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
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Bucket bounds as vLLM 0.32 exposes them (tests/fixtures/vllm-0.32-cpu-metrics.txt).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)
HEALTH_GENERATE_TIMEOUT_S = 20.0  # SGLang's /health_generate gives up then (SGLANG_HEALTH_CHECK_TIMEOUT)
CONCURRENCY_SLOWDOWN = 0.1  # per-user rate = tokens_per_s / (1 + 0.1 * (running - 1)): 115 -> ~46 at 16
MTP_ACCEPT = (0.8, 0.55, 0.35, 0.2)  # per-position acceptance, conditional on the previous ones
EFFORT_REASONING_TOKENS = {"none": 0, "minimal": 12, "low": 40, "medium": 90, "high": 160, "xhigh": 240,
                           "max": 320}

REASONING = [
    "The user is asking something; let me work out what they need.",
    "First, restate the question in my own words.",
    "The operator is checking that the served model answers sensibly.",
    "I should keep the answer short and concrete.",
    "Consider what is known: two stations, one model, tensor parallel over RoCE.",
    "There may be a trick here, so check the assumptions again.",
    "A direct answer is best, with one line of context.",
    "Let me double-check the arithmetic before answering.",
    "Nothing in the question needs a tool.",
    "Good, the plan is clear; write the reply.",
]
CONTENT = [
    "This is the simulated {model} served by {engine}.",
    "Your message was: \u201c{prompt}\u201d.",
    "The stations are simulated, so this reply is made up, but it streams at a realistic rate,",
    "with reasoning first and the answer after it, exactly as the real server sends them.",
]
FILLER = "The quick brown fox jumps over the lazy dog while the stations keep serving tokens."


def _words(text: str) -> list[str]:
    """Word-sized tokens that concatenate back to ``text`` (a leading space belongs to a token)."""
    out: list[str] = []
    for i, w in enumerate(text.split(" ")):
        out.append(w if i == 0 else " " + w)
    return [t for t in out if t]


@dataclass
class Plan:
    reasoning: list[str]
    content: list[str]
    tool_call: dict[str, Any] | None = None  # {"name", "arguments" (JSON text)}
    tool_tokens: int = 0  # tokens the tool call costs (the GLM tool-call text)


def _last_user_text(messages: list[Any]) -> str:
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):  # content parts
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def _tool_arguments(tool: dict[str, Any], prompt: str) -> dict[str, Any]:
    params = (tool.get("function") or {}).get("parameters") or {}
    props = params.get("properties") or {}
    required = params.get("required") or list(props)[:1]
    args: dict[str, Any] = {}
    for name in required:
        kind = (props.get(name) or {}).get("type", "string")
        if kind in ("integer", "number"):
            args[name] = 1
        elif kind == "boolean":
            args[name] = True
        elif name in ("city", "location", "place"):
            args[name] = "Paris" if "paris" in prompt.lower() or not prompt else prompt.split()[-1].strip("?.!")
        else:
            args[name] = "example"
    return args


def plan_reply(body: dict[str, Any], model: str, engine: str) -> Plan:
    """What the simulated model will say: deterministic for a given request."""
    messages = body.get("messages") or []
    prompt = _last_user_text(messages)
    rng = random.Random(zlib.crc32(prompt.encode()))
    kwargs = body.get("chat_template_kwargs") or {}
    thinking = not (kwargs.get("enable_thinking") is False or kwargs.get("thinking") is False)
    effort = str(kwargs.get("reasoning_effort") or body.get("reasoning_effort") or "high")
    n_reason = EFFORT_REASONING_TOKENS.get(effort, 160) if thinking else 0
    reasoning: list[str] = []
    order = rng.sample(REASONING, len(REASONING))  # no sentence twice in a row
    k = 0
    while len(reasoning) < n_reason:
        reasoning += _words((" " if reasoning else "") + order[k % len(order)])
        k += 1
    reasoning = reasoning[:n_reason]
    tools = body.get("tools") or []
    if tools and body.get("tool_choice") != "none":
        tool = tools[0]
        name = (tool.get("function") or {}).get("name", "tool")
        args = _tool_arguments(tool, prompt)
        reasoning = reasoning[: min(len(reasoning), 30)] if thinking else []
        # GLM's text: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
        cost = 3 + 5 * len(args) + sum(len(str(v).split()) for v in args.values())
        return Plan(reasoning, [], {"name": name, "arguments": json.dumps(args)}, cost)
    short = prompt.replace("\n", " ")
    short = short[:60] + ("\u2026" if len(short) > 60 else "")
    text = " ".join(CONTENT).format(model=model, engine=engine, prompt=short)
    content = _words(text)
    if body.get("ignore_eos"):  # benchmarks force the full max_tokens
        target = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        while len(reasoning) + len(content) < target:
            content += _words(" " + FILLER)
    return Plan(reasoning, content)


def _spec_tokens(backend: Any) -> int:
    """Draft tokens per step when the backend runs MTP (profile ``speculative_config``)."""
    n = getattr(backend, "num_speculative_tokens", None)
    if n is not None:
        return int(n)
    try:
        spec = backend.world.profile.serving.get("speculative_config")
    except AttributeError:
        return 0
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            return 0
    return int((spec or {}).get("num_speculative_tokens", 0)) if isinstance(spec, dict) else 0


@dataclass
class _Live:
    prompt_tokens: int
    generated: int = 0


@dataclass
class _Engine:
    """Scheduler state and metrics shared by the requests of one simulated server."""

    backend: Any
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    live: dict[str, _Live] = field(default_factory=dict)
    waiting: int = 0
    seen_prefixes: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        b = self.backend
        self.slots = asyncio.Semaphore(max(1, int(b.max_num_seqs)))
        self.spec_k = _spec_tokens(b)
        self.kv_tokens = int(getattr(b, "kv_cache_tokens", 0) or max(4096, int(b.max_model_len) * 2))
        self.sglang = b.engine == "sglang"
        p = "sglang:" if self.sglang else "vllm:"
        lbl = ["model_name"] if self.sglang else ["engine", "model_name"]
        self.lv = [b.model] if self.sglang else ["0", b.model]
        r = self.registry
        if self.sglang:
            self.g_running = Gauge(p + "num_running_reqs", "The number of running requests.", lbl, registry=r)
            self.g_waiting = Gauge(p + "num_queue_reqs", "The number of requests in the waiting queue.", lbl,
                                   registry=r)
            self.g_kv = Gauge(p + "token_usage", "The token usage.", lbl, registry=r)
            self.g_gen = Gauge(p + "gen_throughput", "The generation throughput (token/s).", lbl, registry=r)
            self.g_hit = Gauge(p + "cache_hit_rate", "The prefix cache hit rate.", lbl, registry=r)
            self.g_acc_len = Gauge(p + "spec_accept_length", "The average acceptance length of speculative "
                                   "decoding.", lbl, registry=r)
            self.g_acc_rate = Gauge(p + "spec_accept_rate", "The average acceptance rate of speculative "
                                    "decoding.", lbl, registry=r)
            self.c_requests = Counter(p + "num_requests", "Number of requests processed.", lbl, registry=r)
        else:
            self.g_running = Gauge(p + "num_requests_running", "Number of requests in model execution batches.",
                                   lbl, registry=r)
            self.g_waiting = Gauge(p + "num_requests_waiting", "Number of requests waiting to be processed.",
                                   lbl, registry=r)
            self.g_kv = Gauge(p + "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lbl,
                              registry=r)
            self.c_queries = Counter(p + "prefix_cache_queries", "Prefix cache queries, in terms of number of "
                                     "queried tokens.", lbl, registry=r)
            self.c_hits = Counter(p + "prefix_cache_hits", "Prefix cache hits, in terms of number of cached "
                                  "tokens.", lbl, registry=r)
            self.c_preempt = Counter(p + "num_preemptions", "Cumulative number of preemption from the engine.",
                                     lbl, registry=r)
            self.c_success = Counter(p + "request_success", "Count of successfully processed requests.",
                                     lbl + ["finished_reason"], registry=r)
            if self.spec_k:
                self.c_drafts = Counter(p + "spec_decode_num_drafts", "Number of spec decoding drafts.", lbl,
                                        registry=r)
                self.c_draft_tokens = Counter(p + "spec_decode_num_draft_tokens", "Number of draft tokens.",
                                              lbl, registry=r)
                self.c_accepted = Counter(p + "spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                          lbl, registry=r)
                self.c_accepted_pos = Counter(p + "spec_decode_num_accepted_tokens_per_pos",
                                              "Accepted tokens per draft position.", lbl + ["position"],
                                              registry=r)
        self.c_prompt = Counter(p + "prompt_tokens", "Number of prefill tokens processed.", lbl, registry=r)
        self.c_gen = Counter(p + "generation_tokens", "Number of generation tokens processed.", lbl, registry=r)
        self.h_ttft = Histogram(p + "time_to_first_token_seconds", "Histogram of time to first token in "
                                "seconds.", lbl, buckets=TTFT_BUCKETS, registry=r)
        self.h_itl = Histogram(p + "inter_token_latency_seconds", "Histogram of inter-token latency in "
                               "seconds.", lbl, buckets=ITL_BUCKETS, registry=r)
        self.h_e2e = Histogram(p + "e2e_request_latency_seconds", "Histogram of e2e request latency in "
                               "seconds.", lbl, buckets=E2E_BUCKETS, registry=r)
        for m in (self.c_prompt, self.c_gen, self.h_ttft, self.h_itl, self.h_e2e):
            m.labels(*self.lv)  # exposed at zero from the start, as vLLM does
        if not self.sglang:
            for m in (self.c_queries, self.c_hits, self.c_preempt):
                m.labels(*self.lv)
            if self.spec_k:
                for m in (self.c_drafts, self.c_draft_tokens, self.c_accepted):
                    m.labels(*self.lv)
        self._spec_drafts = 0
        self._spec_accepted = 0
        self._gen_window: list[tuple[float, int]] = []
        self._bg_tokens = 0  # the background users' tokens already counted
        self.refresh()

    def refresh(self, load: tuple[int, float, bool] | None = None) -> None:
        """The gauges now; ``load``: the wedge fault's users (running, tokens so far, wedged)."""
        self.g_running.labels(*self.lv).set(len(self.live) + (load[0] if load else 0))
        if load is not None and (gained := int(load[1]) - self._bg_tokens) > 0:
            self.generated(gained)
            self._bg_tokens += gained
        self.g_waiting.labels(*self.lv).set(self.waiting)
        used = sum(x.prompt_tokens + x.generated for x in self.live.values())
        self.g_kv.labels(*self.lv).set(min(1.0, used / self.kv_tokens))
        if self.sglang:
            now = time.monotonic()
            self._gen_window = [(t, n) for t, n in self._gen_window if t > now - 5.0]
            self.g_gen.labels(*self.lv).set(sum(n for _, n in self._gen_window) / 5.0)

    def per_user_rate(self) -> float:
        n = max(1, len(self.live))
        return float(self.backend.tokens_per_s) / (1.0 + CONCURRENCY_SLOWDOWN * (n - 1))

    def prefix(self, messages: list[Any], prompt_tokens: int) -> int:
        """Tokens of this prompt already cached: whole earlier messages seen before (chat history)."""
        hits = 0
        acc = 0
        matching = True
        for m in messages:
            acc = zlib.crc32(json.dumps(m, sort_keys=True).encode(), acc)
            matching = matching and acc in self.seen_prefixes
            if matching:
                hits += _count_tokens([m])
            self.seen_prefixes.add(acc)
        return min(hits, prompt_tokens)

    def generated(self, n: int) -> None:
        self.c_gen.labels(*self.lv).inc(n)
        if self.sglang:
            self._gen_window.append((time.monotonic(), n))

    def step_tokens(self, rng: random.Random, cap: int) -> int:
        """Tokens one decode step emits (at most ``cap``): 1 + accepted MTP drafts, counted."""
        if not self.spec_k or cap <= 0:
            return min(1, cap)
        accepted = 0
        for _ in range(min(self.spec_k, cap - 1)):
            if rng.random() >= MTP_ACCEPT[min(accepted, len(MTP_ACCEPT) - 1)]:
                break
            accepted += 1
        self._spec_drafts += 1
        self._spec_accepted += accepted
        if self.sglang:
            self.g_acc_len.labels(*self.lv).set(1 + self._spec_accepted / self._spec_drafts)
            self.g_acc_rate.labels(*self.lv).set(self._spec_accepted / (self._spec_drafts * self.spec_k))
        else:
            self.c_drafts.labels(*self.lv).inc()
            self.c_draft_tokens.labels(*self.lv).inc(self.spec_k)
            self.c_accepted.labels(*self.lv).inc(accepted)
            for pos in range(accepted):
                self.c_accepted_pos.labels(*self.lv, str(pos)).inc()
        return 1 + accepted

    def finished(self, reason: str) -> None:
        if self.sglang:
            self.c_requests.labels(*self.lv).inc()
        else:
            self.c_success.labels(*self.lv, reason).inc()


def _count_tokens(messages: list[Any]) -> int:
    """About 4 characters a token, plus the template's few tokens per message."""
    n = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else ""
        n += 4 + len(json.dumps(c) if not isinstance(c, str) else c) // 4
    return max(1, n)


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
    state: dict[str, _Engine] = {}

    def eng() -> _Engine:  # created in the serving loop (asyncio.Semaphore binds to it)
        if "e" not in state:
            state["e"] = _Engine(backend)
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
        prompt_tokens = _count_tokens(body["messages"])
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

    async def _generate(e: _Engine, body: dict[str, Any], plan: Plan, prompt_tokens: int, max_tokens: int):
        """Yield (kind, text) pieces paced like the engine; the final item is ("finish", reason)."""
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        e.waiting += 1
        e.refresh()
        try:
            await e.slots.acquire()
        finally:
            e.waiting -= 1
        live = _Live(prompt_tokens)
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

    async def _stream(request: web.Request, e: _Engine, body: dict[str, Any], plan: Plan, prompt_tokens: int,
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

    async def _whole(e: _Engine, body: dict[str, Any], plan: Plan, prompt_tokens: int,
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
