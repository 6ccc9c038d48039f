"""What the simulated model says: a reply planned from the request, deterministic for a given
prompt (reasoning as long as the effort asks, then the answer; a GLM tool call when tools are given;
filler up to ``max_tokens`` for a benchmark's ``ignore_eos``), and the prompt's token count.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from typing import Any

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


def count_tokens(messages: list[Any]) -> int:
    """About 4 characters a token, plus the template's few tokens per message."""
    n = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else ""
        n += 4 + len(json.dumps(c) if not isinstance(c, str) else c) // 4
    return max(1, n)
