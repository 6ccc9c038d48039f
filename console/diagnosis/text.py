"""Line hygiene shared by the diagnoser and the bundle: docker timestamps, escape sequences, secrets."""

from __future__ import annotations

import re

from console.sanitize import strip_escapes

# `docker logs --timestamps` prefix: RFC3339 with nanoseconds, then one space.
_DOCKER_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})) ")
MAX_TEXT = 400


def clean(line: str) -> tuple[str, str | None]:
    """(message text without docker timestamp / colour codes / line end, the timestamp or None)."""
    ts = None
    if line[:1].isdigit():
        m = _DOCKER_TS.match(line)
        if m:
            ts = m.group(1)
            line = line[m.end():]
    if "\x1b" in line or not line.isascii():
        line = strip_escapes(line)
    return line.rstrip("\r\n"), ts


_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), "hf_***"),
    (re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.I), r"\1***"),
    (re.compile(r"(\b[A-Z][A-Z0-9_]*_(?:TOKEN|KEY|SECRET|PASSWORD)\b\s*[=:]\s*)(['\"]?)[^\s'\",]+"), r"\1\2***"),
    (re.compile(r"((?:['\"]?)\b(?:api_key|api-key|apikey|hf_token|access_token|password|secret)\b['\"]?\s*[:=]\s*"
                r"\[?['\"]?)[^\s'\",})\]]+", re.I), r"\1***"),
    (re.compile(r"(--(?:api-key|hf-token|token)[= ]+)(['\"]?)[^\s'\"]+"), r"\1\2***"),
)


def redact(text: str) -> str:
    """Mask anything that looks like an API key or hub token (hf_..., Bearer ..., *_TOKEN=, *_KEY=)."""
    for pat, repl in _SECRET_PATTERNS:
        text = pat.sub(repl, text)
    return text


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
