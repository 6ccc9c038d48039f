"""Ready means a reply: the first token of a real streamed chat completion.

``/health`` 200 says the HTTP server is up; it does not say the engine answers (a wedged
collective, a wrong model name, a refused key all pass it). So after it we ask for a few tokens
at temperature 0 and record when the first one arrives. Busy or not-yet-ready answers (408, 429,
5xx but 501/505, timeouts, refused connections, a broken stream) are retried with a short backoff until
the caller's deadline; anything else (401, 404, 400, 501) is a clear failure at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from console.serving.chat import TOKEN_KINDS, ChatRequest
from console.serving.client import ApiClient
from console.serving.errors import ApiError

PROMPT = "Reply with one word: ready."
MAX_TOKENS = 4


@dataclass(frozen=True)
class FirstToken:
    at: float  # Unix time of the first token chunk
    ttft_ms: float  # from the request
    tries: int
    model: str


class NotReady(Exception):
    def __init__(self, detail: str, retryable: bool):
        super().__init__(detail)
        self.detail, self.retryable = detail, retryable


#: Server errors that will not go away by asking again: the server does not implement the request (501),
#: or not its HTTP version (505).
FINAL_5XX = frozenset({501, 505})


def retryable(err: ApiError) -> bool:
    """Busy or not ready yet (408, 429, a 5xx but 501/505, no answer, a broken stream): ask again. Any
    other answer (4xx, 501) is the server's clear word: a failure at once."""
    status = err.status or 0
    if status in FINAL_5XX or (400 <= status < 500 and status not in (408, 429)):
        return False
    return status in (408, 429) or status >= 500 or err.kind in ("timeout", "connect", "unavailable", "stream")


async def served_model(client: ApiClient, fallback: str) -> str:
    """The id the server serves (an operator's launch script may name it differently)."""
    try:
        models = await client.models()
    except ApiError:
        return fallback
    return str(models[0]["id"]) if models else fallback


async def first_token(client: ApiClient, model: str, deadline: float,
                      on_retry: Callable[[int, ApiError, float], None] | None = None,
                      between: Callable[[], None] | None = None) -> FirstToken:
    """Stream until the first token; ``deadline`` is ``time.monotonic()`` based. ``on_retry(try,
    error, delay)`` reports a retry; ``between()`` runs before each wait (it may raise to abort)."""
    req = ChatRequest(messages=({"role": "user", "content": PROMPT},), model=model, max_tokens=MAX_TOKENS,
                      temperature=0.0)
    delay, tries = 0.5, 0
    while True:
        tries += 1
        t0 = time.time()
        err: ApiError | None = None
        stream = client.stream_chat(req)
        try:
            async for ev in stream:
                if ev.kind in TOKEN_KINDS:
                    now = time.time()
                    return FirstToken(now, (now - t0) * 1000, tries, model)
        except ApiError as exc:
            err = exc
        finally:
            await stream.aclose()
        if err is None or err.kind == "cut":  # a 200 whose stream carried no token
            raise NotReady(f"the server answered the chat request with no token at all ({model})", False)
        if not retryable(err):
            raise NotReady(f"healthy but refuses a chat request: {err}", False)
        if time.monotonic() + delay > deadline:
            raise NotReady(f"no first token within the launch timeout ({tries} tries): {err}", True)
        if on_retry is not None:
            on_retry(tries, err, delay)
        if between is not None:
            between()
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
