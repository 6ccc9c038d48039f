"""Line hygiene shared by the diagnoser and the bundle: docker timestamps, escape sequences, secrets."""

from __future__ import annotations

import re

from console.secrets import redact_text
from console.probes.docker import split_timestamp
from console.sanitize import strip_escapes

MAX_TEXT = 400


def clean(line: str) -> tuple[str, str | None]:
    """(message text without docker timestamp / colour codes / line end, the timestamp or None)."""
    ts, line = split_timestamp(line)
    if "\x1b" in line or not line.isascii():
        line = strip_escapes(line)
    return line.rstrip("\r\n"), ts


def redact(text: str) -> str:
    """Mask anything that looks like a secret (hf_..., Bearer ..., the value after a secret name such as
    ``HF_TOKEN=`` or ``'api_key': ``): the one rule, ``console.secrets``."""
    return redact_text(text)


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Prefixes before the message (matched repeatedly at the start; each alternative is bounded):
# Ray/vLLM process tags, torchrun ranks, docker compose, SGLang's time/rank, vLLM's level+time+source,
# uvicorn's level.
# Ray: ``(raylet)``, ``(raylet, ip=A)``, ``(pid=N, ip=A)`` (older Ray), ``(Actor(args) pid=N)``,
# ``(autoscaler +1m)`` / ``(scheduler +2m13s)``, glog's ``[2025-07-23 10:05:49,679 W 51000 51000] file.cc:151:``
# and Python logging's ``2022-03-30 17:22:35,502 WARNING node.py:1465 -- ``.
_PREFIX = re.compile(
    r"^\s*+(?:\((?:\w++(?:\([^()]{0,80}+\))?(?: pid=\d++)?|pid=\d++)(?:, ip=[\d.]++)?\)\s*+"
    r"|\((?:autoscaler|scheduler) \+[\w.]++\)\s*+"
    r"|\[\d{4}-\d\d-\d\d [\d:,.]++ [IWEFC] \d++ \d++\]\s*+(?:[\w.\-]++:\d++:\s*+)?"
    r"|\d{4}-\d\d-\d\d [\d:,.]++\s++(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s++[\w.\-]++:\d++ -- "
    r"|\[rank\d++\]:\s?"
    r"|[\w.\-]++\s++\|\s"
    r"|\[\d{4}-\d\d-\d\d[ T][\d:.,]++(?: [A-Z]{2,3}\d++)*+\]\s*+"
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s++\d\d-\d\d\s[\d:.]++\s(?:\[[^\]]*+\]|[\w.]++:\d++\])\s?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s++)")


def message_of(text: str) -> str:
    """The message part of a log line: known prefixes (process, rank, time, level, source) removed."""
    for _ in range(5):
        m = _PREFIX.match(text)
        if not m or not m.end():
            break
        text = text[m.end():]
    return text
