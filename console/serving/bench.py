"""Concurrency sweep against the served model, measured the way AIPerf measures.

NVIDIA's headline table (concurrency 1/8/16/32 -> total tok/s, per-user tok/s, latency, TTFT, ITL)
comes from AIPerf; to sit beside it the numbers here use the same definitions
(shared/reference/engines.md): TTFT = first token chunk - request start, latency = last token chunk
- request start, OSL = ``usage.completion_tokens`` (reasoning included), ITL = (latency - TTFT) /
(OSL - 1), per-user tok/s = mean of 1/ITL, total tok/s = all output tokens / (last response - first
request). The method is NVIDIA's too: per level a warm-up of 3x concurrency requests, then 10x
concurrency measured requests, keeping ``concurrency`` requests in flight.

The tokens counted from ``usage`` are checked against the server's own generation-token counter
(``/metrics`` delta over the measured phase): a mismatch means the numbers cannot be trusted (other
traffic, a server without usage, an aborted stream). :func:`summarize` and the percentile helpers
are pure; :class:`BenchRunner` does the I/O through :class:`~console.serving.client.ApiClient`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from console.serving.bench_model import (
    PROGRESS_S,
    BenchProgress,
    BenchReport,
    BenchSettings,
    LevelResult,
    RequestRecord,
    generation_tokens,
    queue_warning,
    summarize,
)
from console.serving.bench_stats import spec_stuck_warning
from console.serving.chat import TOKEN_KINDS, ChatEvent, ChatRequest
from console.serving.client import ApiClient
from console.serving.errors import ApiError
from console.serving.metrics import parse_metrics
from console.tasks import gather_owned

#: Coding prompts in the spirit of SPEED-Bench Coding (the real set is gated; these are our own).
BUILTIN_PROMPTS: tuple[str, ...] = (
    "Write a Python function that parses an ISO 8601 duration like 'P3DT4H5M' into seconds, with tests.",
    "Implement an LRU cache in Rust with O(1) get and put, and explain the ownership choices.",
    "Given a list of intervals, merge all overlapping ones. Write it in Go and give the complexity.",
    "Write a SQL query that returns, per customer, the three most recent orders and their total value.",
    "Refactor this JavaScript callback pyramid into async/await with proper error handling: "
    "readFile(a, (e, x) => { parse(x, (e2, y) => { save(y, (e3) => done(e3)) }) })",
    "Write a thread-safe bounded queue in C++17 with blocking push and pop and a close() method.",
    "Explain and implement Dijkstra's algorithm in Python with a binary heap; handle unreachable nodes.",
    "Write a bash script that rotates log files larger than 100 MB, keeping the last five compressed.",
    "Design a REST API for a todo service with users and shared lists; give the routes and JSON shapes.",
    "Write a Python asyncio TCP server that echoes lines back and closes idle clients after 30 seconds.",
    "Implement a trie in TypeScript supporting insert, search and prefix listing, with unit tests.",
    "Find the bug: def mean(xs): return sum(xs) / len(xs) - it crashes in production. Fix it robustly.",
    "Write a Dockerfile for a Python web app with a multi-stage build and a non-root user.",
    "Implement binary search over a rotated sorted array in Java and prove it terminates.",
    "Write a regular expression that validates IPv4 addresses and explain each part; add test cases.",
    "Implement a rate limiter (token bucket) in Python usable from many threads, with tests.",
)

Messages = tuple[dict[str, Any], ...]


# ---------------------------------------------------------------- prompts


def load_prompts(path: str | Path) -> tuple[Messages, ...]:
    """Prompts from a JSONL file: one object a line with ``prompt``/``text`` (a string),
    ``texts`` (AIPerf's list, first used) or ``messages`` (OpenAI chat messages).

    Raises ValueError naming the line on anything else (the CLI makes it a usage error)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read prompts file {p}: {exc}") from None
    out: list[Messages] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise ValueError(f"{p}:{no}: not JSON") from None
        out.append(_messages_from(obj, f"{p}:{no}"))
    if not out:
        raise ValueError(f"{p}: no prompts in the file")
    return tuple(out)


def _messages_from(obj: Any, where: str) -> Messages:
    if isinstance(obj, dict):
        msgs = obj.get("messages")
        if isinstance(msgs, list) and msgs and all(isinstance(m, dict) and "role" in m for m in msgs):
            return tuple(msgs)
        for key in ("prompt", "text"):
            if isinstance(obj.get(key), str) and obj[key].strip():
                return ({"role": "user", "content": obj[key]},)
        texts = obj.get("texts")
        if isinstance(texts, list) and texts and isinstance(texts[0], str):
            return ({"role": "user", "content": texts[0]},)
    raise ValueError(f"{where}: expected an object with 'prompt', 'text', 'texts' or 'messages'")


def builtin_prompts() -> tuple[Messages, ...]:
    return tuple(({"role": "user", "content": p},) for p in BUILTIN_PROMPTS)


#: Filler for a prompt depth: common words, about one token each in the tokenizers we serve.
_FILLER = ("the system log shows that each node in the cluster reported its state at the usual time and "
           "nothing in the record suggests a change of plan for the next run of the job").split()


def at_depth(msgs: Messages, depth: int, n: int) -> Messages:
    """``msgs`` with about ``depth`` tokens of context before them (llama-bench's depth: a long
    conversation's context before the question). The context opens with the request's number, so no
    two requests share a cached prefix: every request pays for its prefill, as a new user does.
    The real count is the server's ``usage.prompt_tokens`` (the report's input tokens)."""
    if depth <= 0:
        return msgs
    words = [f"Context {n}:"] + [_FILLER[(n + i) % len(_FILLER)] for i in range(max(0, depth - 4))]
    context = " ".join(words) + "\n\nWith that context set aside, answer this:\n"
    first = msgs[0] if msgs else {}
    if isinstance(first.get("content"), str) and first.get("role") == "user":
        return ({**first, "content": context + first["content"]}, *msgs[1:])
    return ({"role": "system", "content": context}, *msgs)


# ---------------------------------------------------------------- settings


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,8,16,32"`` -> (1, 8, 16, 32); ValueError with one line on anything else."""
    levels: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"--concurrency: {part!r} is not a positive integer (e.g. 1,8,16,32)")
        if int(part) > 4096:
            raise ValueError(f"--concurrency: {part} is more than 4096 requests in flight")
        if int(part) not in levels:
            levels.append(int(part))
    return tuple(levels)


def parse_depths(text: str) -> tuple[int, ...]:
    """``"0,4096"`` -> (0, 4096): prompt depths in tokens; ValueError with one line on anything else."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--depth: {part!r} is not a number of tokens (e.g. 0,4096,16384)")
        if int(part) > 2_000_000:
            raise ValueError(f"--depth: {part} tokens is beyond any model's context")
        if int(part) not in out:
            out.append(int(part))
    return tuple(out)


# ---------------------------------------------------------------- records and definitions


# ---------------------------------------------------------------- the runner (I/O)


class BenchRunner:
    """Runs a sweep through one :class:`ApiClient`; cancel by cancelling the task running
    :meth:`run` (in-flight streams are closed, so the server aborts them; finished levels stay in
    ``report``)."""

    def __init__(self, client: ApiClient, model: str, settings: BenchSettings,
                 prompts: Sequence[Messages] | None = None,
                 on_progress: Callable[[BenchProgress], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.client = client
        self.model = model
        self.settings = settings
        self.prompts = tuple(prompts) if prompts else builtin_prompts()
        self.on_progress = on_progress
        self.clock = clock
        self.report = BenchReport(client.base_url, model, settings)
        self._next_prompt = 0
        self._chunks = 0  # token chunks received, in-flight requests included
        self._done_chunks = 0  # ... by finished requests
        self._done_tokens = 0  # usage tokens of finished requests
        self.metrics_error: str | None = None  # why /metrics could not be read, if it could not
        self._spec_seen: tuple[float | None, float | None] = (None, None)  # (drafts, accepted) last read

    def _request(self, depth: int = 0) -> ChatRequest:
        msgs = at_depth(self.prompts[self._next_prompt % len(self.prompts)], depth, self._next_prompt)
        self._next_prompt += 1
        s = self.settings
        return ChatRequest(messages=msgs, model=self.model, max_tokens=s.max_tokens, effort=s.effort,
                           extra={"ignore_eos": True} if s.ignore_eos else {})

    async def _one(self, req: ChatRequest) -> RequestRecord:
        chunks = 0

        def on_event(ev: ChatEvent) -> None:
            nonlocal chunks
            if ev.kind in TOKEN_KINDS:
                chunks += 1
                self._chunks += 1

        start = self.clock()
        res = await self.client.chat(req, on_event=on_event)
        end = self.clock()
        self._done_chunks += chunks
        self._done_tokens += res.output_tokens or 0
        error = None
        if res.error is not None:
            error = f"{res.error.kind}: {res.error}"
        elif res.output_tokens is None:
            error = "no usage in the reply (stream_options.include_usage unsupported?)"
        elif res.ttft_s is None:
            error = "the reply carried no token"
        prompt = res.usage.get("prompt_tokens") if isinstance(res.usage, dict) else None
        prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0 else None
        return RequestRecord(start, end, res.ttft_s, res.latency_s, res.output_tokens, chunks, error, prompt)

    @property
    def _levels(self) -> int:
        return len(self.settings.concurrency) * len(self.settings.depths)

    async def _phase(self, index: int, c: int, n: int, phase: str, depth: int = 0) -> list[RequestRecord]:
        """``n`` requests with ``c`` in flight (AIPerf's concurrency mode)."""
        records: list[RequestRecord] = []
        issued = 0
        t0 = self.clock()
        tokens0 = self._live_tokens()

        def post() -> None:
            if self.on_progress is None:
                return
            dt = self.clock() - t0
            rate = (self._live_tokens() - tokens0) / dt if dt > 0.2 else None
            self.on_progress(BenchProgress(index, self._levels, c, phase, len(records), n, rate, depth=depth))

        async def worker() -> None:
            nonlocal issued
            while issued < n:
                issued += 1
                records.append(await self._one(self._request(depth)))
                post()

        async def ticker() -> None:  # long replies: the live rate moves between completions too
            while True:
                await asyncio.sleep(PROGRESS_S)
                post()

        post()
        tasks = [asyncio.create_task(worker()) for _ in range(min(c, n))]
        tick = asyncio.create_task(ticker()) if self.on_progress is not None else None
        try:
            await gather_owned(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if tick is not None:
                tick.cancel()
                await asyncio.gather(tick, return_exceptions=True)
        return records

    def _live_tokens(self) -> float:
        """Tokens so far: usage of finished requests plus in-flight chunks at the tokens-per-chunk
        seen so far (MTP puts several tokens in one chunk)."""
        per_chunk = self._done_tokens / self._done_chunks if self._done_chunks else 1.0
        return self._done_tokens + (self._chunks - self._done_chunks) * per_chunk

    async def server_tokens(self) -> int | None:
        """The server's generation-token counter, or None when /metrics has none (or cannot be
        read: ``metrics_error`` says why, and the report says it once)."""
        try:
            sample = parse_metrics(await self.client.metrics_text())
            self._spec_seen = (sample.counters.get("spec_drafts"), sample.counters.get("spec_accepted"))
            return generation_tokens(sample)
        except (ApiError, ValueError) as exc:
            self.metrics_error = str(exc)
            return None

    async def _settled(self, expected: int | None = None) -> int | None:
        """The counter once it stops moving (or reaches ``expected``): engines publish their
        stats a scheduler step after the last response may have gone out."""
        deadline = self.clock() + self.settings.settle_s
        last = await self.server_tokens()
        while last is not None and self.clock() < deadline:
            if expected is not None and last == expected:
                return last
            await asyncio.sleep(0.1)
            now = await self.server_tokens()
            if now == last and expected is None:
                return now
            last = now
        return last

    async def _watch(self, peaks: dict[str, float]) -> None:
        """Peak running/waiting requests the server reports while a level is measured."""
        while True:
            try:
                gauges = parse_metrics(await self.client.metrics_text()).gauges
            except (ApiError, ValueError):
                return
            for key in ("running", "waiting"):
                if key in gauges:
                    peaks[key] = max(peaks.get(key, 0.0), gauges[key])
            await asyncio.sleep(self.settings.watch_s)

    async def run_level(self, index: int, c: int, depth: int = 0) -> LevelResult:
        s = self.settings
        if s.warmup_for(c):
            await self._phase(index, c, s.warmup_for(c), "warmup", depth)
        before = await self._settled()
        spec_before = self._spec_seen
        if before is None and self.metrics_error and not any("token counter" in w for w in self.report.warnings):
            self.report.warnings.append(f"the server's token counter could not be read ({self.metrics_error}): "
                                        "the server column is n/a, the token counts are unchecked")
        peaks: dict[str, float] = {}
        watch = asyncio.create_task(self._watch(peaks)) if before is not None else None
        try:
            records = await self._phase(index, c, s.measured_for(c), "measure", depth)
        finally:
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
        counted = sum(r.output_tokens or 0 for r in records if r.ok)
        server = spec = None
        if before is not None:
            self._post(index, c, "verify", len(records), len(records), depth=depth)
            after = await self._settled(before + counted)
            if after is not None and after >= before:
                server = after - before
            spec = _spec_delta(spec_before, self._spec_seen)
        self.report.records[(depth, c) if depth else c] = records
        result = summarize(c, records, server, peaks, depth=depth, slo=s.slo,
                           decode_floor_tokens=s.decode_floor_tokens, spec=spec)
        self.report.levels.append(result)
        for w in (queue_warning(result), spec_stuck_warning(result)):
            if w is not None:
                self.report.warnings.append(w)
        self._post(index, c, "done", len(records), len(records), result, depth=depth)
        return result

    def _post(self, index: int, c: int, phase: str, done: int, total: int, result: LevelResult | None = None,
              depth: int = 0) -> None:
        if self.on_progress is not None:
            tok_s = result.total_tok_s if result else None
            self.on_progress(BenchProgress(index, self._levels, c, phase, done, total, tok_s, result, depth))

    async def run(self) -> BenchReport:
        conc = self.settings.concurrency
        try:
            for d_i, depth in enumerate(self.settings.depths):
                for i, c in enumerate(conc):
                    await self.run_level(d_i * len(conc) + i, c, depth)
        except asyncio.CancelledError:
            self.report.cancelled = True
            raise
        return self.report


def _spec_delta(before: tuple[float | None, float | None], after: tuple[float | None, float | None]
                ) -> tuple[int, int] | None:
    """(drafts, accepted) the server counted between two reads; None without vLLM's counters."""
    if None in before or None in after:
        return None
    drafts, accepted = int(after[0] - before[0]), int(after[1] - before[1])  # type: ignore[operator]
    return (drafts, accepted) if drafts >= 0 and accepted >= 0 else None


async def resolve_model(client: ApiClient, hint: str | None) -> str:
    """The hint when the server lists it, else the server's first model; ApiError when none."""
    ids = [m["id"] for m in await client.models()]
    if hint and (hint in ids or not ids):
        return hint
    if not ids:
        raise ApiError("http", f"{client.base_url}/v1/models lists no model; pass --model")
    return ids[0]
