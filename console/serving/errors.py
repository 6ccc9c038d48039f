"""The one error every API call ends in: a kind a screen can show as a state, and one clean line."""

from __future__ import annotations

from typing import Literal

from console.sanitize import one_line

ErrorKind = Literal["unauthorized", "unavailable", "timeout", "connect", "http", "stream", "cancelled",
                    "too-large", "cut"]  # cut: the stream ended before [DONE] and before any finish reason


class ApiError(Exception):
    """A one-line, operator-facing API failure; ``kind`` is what a screen shows as state. The
    message may quote the server: it is sanitized here, once (no control or escape sequence)."""

    def __init__(self, kind: ErrorKind, message: str, status: int | None = None):
        self.kind = kind
        self.status = status
        super().__init__(one_line(message, 600))
