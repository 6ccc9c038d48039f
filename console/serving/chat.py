"""A chat completion as data: the request, the streamed events, the assembled reply and what it warns of.

Pure (no I/O): ``ApiClient.stream_chat`` turns an SSE stream into ``ChatEvent``s with
``events_from_chunk``; ``ChatAccumulator`` assembles them into the ``ChatResult`` (``chat --json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from console.serving.errors import ApiError

EFFORTS = ("low", "high", "max")

#: A tool definition for the smoke test: small, unambiguous, with one required argument.
SMOKE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
SMOKE_TOOL_PROMPT = "What is the weather in Paris right now? Use the get_weather tool."

BUDGET_TRAP_WARNING = (
    "the reply hit max_tokens ({max_tokens}) before any answer: reasoning counts against "
    "max_tokens and used it all; raise max_tokens to ~1000 or turn reasoning off (no-think)"
)
TOOL_PARSER_WARNING = (
    "the model wrote tool-call text but the server returned no tool_calls: the server's "
    "--tool-call-parser does not match the model (finding tool-parser-mismatch)"
)
NO_TOOL_CALL_WARNING = "a tool was offered but the server returned no tool call"
TOOL_SWALLOWED_WARNING = (
    "the server returned no tool call and no content, yet the model generated {n} tokens after its "
    "reasoning: the server's --tool-call-parser likely does not match the model (finding tool-parser-mismatch)"
)
THINK_IN_CONTENT_WARNING = (
    "reasoning markup (<think>) arrived inside content: the server runs without a matching "
    "--reasoning-parser"
)

NO_THINK_IGNORED_WARNING = (
    "reasoning came back although no-think was asked: the chat template has no thinking switch "
    "(GLM-5.3's always thinks); budget max_tokens for it"
)

# ---------------------------------------------------------------- requests and events


@dataclass(frozen=True)
class ChatRequest:
    """What the operator asks for; ``body()`` turns it into the OpenAI request JSON."""

    messages: tuple[dict[str, Any], ...]
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    effort: str | None = None  # low | high | max (chat_template_kwargs.reasoning_effort)
    no_think: bool = False
    tools: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # engine extensions, e.g. ignore_eos for benchmarks

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(self.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        kwargs: dict[str, Any] = {}
        if self.effort:
            kwargs["reasoning_effort"] = self.effort
        if self.no_think:
            kwargs["enable_thinking"] = False
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        if self.tools:
            body["tools"] = list(self.tools)
            body["tool_choice"] = "auto"
        body.update(self.extra)
        return body


EventKind = Literal["role", "reasoning", "content", "tool_call", "finish", "usage"]


@dataclass(frozen=True)
class ChatEvent:
    """One thing learned from the stream; ``t`` is ``time.perf_counter()`` at arrival."""

    kind: EventKind
    t: float
    text: str = ""
    data: Any = None


TOKEN_KINDS = ("reasoning", "content", "tool_call")


@dataclass
class ChatResult:
    """The assembled reply; ``to_json()`` is the ``chat --json`` contract."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    latency_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    error: ApiError | None = None
    cancelled: bool = False

    @property
    def output_tokens(self) -> int | None:
        """Completion tokens, reasoning included (what AIPerf calls OSL)."""
        n = self.usage.get("completion_tokens") if isinstance(self.usage, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "ttft_s": _round(self.ttft_s),
            "tokens_per_s": _round(self.tokens_per_s, 2),
            "warnings": list(self.warnings),
        } | ({"error": {"kind": self.error.kind, "message": str(self.error)}} if self.error else {})


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


class ChatAccumulator:
    """Folds stream events into a :class:`ChatResult` (pure: no I/O, no clock)."""

    def __init__(self, request: ChatRequest, started: float):
        self.request = request
        self.started = started
        self.result = ChatResult()
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._first: float | None = None
        self._last: float | None = None

    def feed(self, ev: ChatEvent) -> None:
        if ev.kind in TOKEN_KINDS:
            if self._first is None:
                self._first = ev.t
            self._last = ev.t
        if ev.kind == "content":
            self._content.append(ev.text)
        elif ev.kind == "reasoning":
            self._reasoning.append(ev.text)
        elif ev.kind == "tool_call":
            self._merge_call(ev.data)
        elif ev.kind == "finish":
            self.result.finish_reason = ev.text
        elif ev.kind == "usage" and isinstance(ev.data, dict):
            self.result.usage = ev.data

    def _merge_call(self, d: Any) -> None:
        if not isinstance(d, dict):
            return
        idx = d.get("index")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < 128:
            idx = 0
        call = self._calls.setdefault(idx, {"id": None, "type": "function",
                                            "function": {"name": "", "arguments": ""}})
        if isinstance(d.get("id"), str) and d["id"]:
            call["id"] = d["id"]
        if isinstance(d.get("type"), str) and d["type"]:
            call["type"] = d["type"]
        fn = d.get("function")
        if not isinstance(fn, dict):
            fn = {}
        if isinstance(fn.get("name"), str) and fn["name"] and not call["function"]["name"]:
            call["function"]["name"] = fn["name"]  # sent once, with the first fragment
        if isinstance(fn.get("arguments"), str):
            call["function"]["arguments"] += fn["arguments"]
        elif isinstance(fn.get("arguments"), dict):  # some servers send an object, not a string
            call["function"]["arguments"] += json.dumps(fn["arguments"])

    def finish(self, error: ApiError | None = None, cancelled: bool = False) -> ChatResult:
        r = self.result
        r.content = "".join(self._content)
        r.reasoning = "".join(self._reasoning)
        r.tool_calls = [self._calls[i] for i in sorted(self._calls)]
        r.error, r.cancelled = error, cancelled
        if self._first is not None:
            r.ttft_s = self._first - self.started
            r.latency_s = (self._last or self._first) - self.started
            n = r.output_tokens
            decode = (self._last or self._first) - self._first
            if n and n > 1 and decode > 0:
                r.tokens_per_s = (n - 1) / decode  # AIPerf per-user rate: 1 / ITL
            elif n and r.latency_s > 0:
                r.tokens_per_s = n / r.latency_s
        r.warnings = reply_warnings(r, self.request)
        return r


def reply_warnings(r: ChatResult, req: ChatRequest) -> list[str]:
    """Operator hints for replies that are technically fine but not what was wanted."""
    out: list[str] = []
    if r.finish_reason == "length" and not r.content.strip() and not r.tool_calls:
        budget = req.max_tokens if req.max_tokens is not None else "the server default"
        out.append(BUDGET_TRAP_WARNING.format(max_tokens=budget))
    if req.tools and not r.tool_calls and r.error is None and not r.cancelled and r.finish_reason != "length":
        text = r.content + r.reasoning
        hidden = _hidden_tokens(r)
        if "<tool_call>" in text or "<arg_key>" in text:
            out.append(TOOL_PARSER_WARNING)
        elif not r.content.strip() and hidden is not None and hidden > 2:
            # generated tokens that surfaced nowhere: a parser swallowed them (engines.md: a wrong
            # tool parser fails silently, content empty and tool_calls null)
            out.append(TOOL_SWALLOWED_WARNING.format(n=hidden))
        else:
            out.append(NO_TOOL_CALL_WARNING)
    if req.no_think and r.reasoning:
        out.append(NO_THINK_IGNORED_WARNING)
    if "<think>" in r.content or "</think>" in r.content:
        out.append(THINK_IN_CONTENT_WARNING)
    if r.finish_reason in ("error", "abort"):
        out.append(f"the server ended the reply with finish_reason {r.finish_reason!r}")
    return out


def _hidden_tokens(r: ChatResult) -> int | None:
    """Completion tokens that were neither reasoning nor content (None when usage says too little)."""
    u = r.usage if isinstance(r.usage, dict) else {}
    details = u.get("completion_tokens_details")
    if not isinstance(details, dict):
        return None
    if not isinstance(u.get("completion_tokens"), int) or not isinstance(details.get("reasoning_tokens"), int):
        return None
    return u["completion_tokens"] - details["reasoning_tokens"]


def _text(value: Any) -> str:
    """A delta field that should be a string; anything else (a number, a list) is not text."""
    return value if isinstance(value, str) else ""


def events_from_chunk(chunk: dict[str, Any], t: float) -> list[ChatEvent]:
    """Events carried by one ``chat.completion.chunk`` (pure; raises ApiError on an error chunk).
    Fields of the wrong type are ignored: a server's JSON never raises anything but ApiError."""
    if "error" in chunk or chunk.get("object") == "error":
        err = chunk.get("error", chunk)
        msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
        code = err.get("code") if isinstance(err, dict) else None
        raise ApiError("stream", f"the server reported an error mid-stream: {str(msg)[:300]}"
                       + (f" (code {str(code)[:20]})" if code is not None else ""),
                       status=code if isinstance(code, int) and not isinstance(code, bool) else None)
    out: list[ChatEvent] = []
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        if _text(delta.get("role")):
            out.append(ChatEvent("role", t, delta["role"]))
        reasoning = delta.get("reasoning")
        if reasoning is None:
            reasoning = delta.get("reasoning_content")
        if _text(reasoning):
            out.append(ChatEvent("reasoning", t, reasoning))
        if _text(delta.get("content")):
            out.append(ChatEvent("content", t, delta["content"]))
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                out.append(ChatEvent("tool_call", t, data=call))
        if _text(choice.get("finish_reason")):
            out.append(ChatEvent("finish", t, choice["finish_reason"]))
    if isinstance(chunk.get("usage"), dict) and chunk["usage"]:
        out.append(ChatEvent("usage", t, data=chunk["usage"]))
    return out
