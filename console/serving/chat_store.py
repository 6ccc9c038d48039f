"""Chats that are kept: every chat session saved locally in one SQLite file under the XDG data
directory (``$XDG_DATA_HOME/dgx-console/chats.sqlite3``, created 0600: a conversation can hold
anything the operator typed).

A session is a row (id, title, API URL, model, times); a turn is a row (the user's line, whether
it was the tool test, the reply as ``chat --json`` writes it plus latency and cancelled). Nothing
here touches a widget: the chat pane hands writes to :func:`submit` (one writer thread, so turns
land in order and the event loop never waits on the disk) and reads through ``asyncio.to_thread``.
Every call opens its own connection (``sqlite3`` connections are per thread). The schema is
versioned (``PRAGMA user_version``, as the incident ledger's): a file written by a newer console, or
one that is no SQLite file, is a ``ChatStoreError`` (one line), never rewritten.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config.paths import xdg_data_dir
from console.sanitize import one_line
from console.serving.chat import ChatResult
from console.serving.errors import ApiError

DB_NAME = "chats.sqlite3"
SCHEMA_VERSION = 1
TITLE_CHARS = 80
LIST_LIMIT = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    url TEXT NOT NULL,
    model TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    user TEXT NOT NULL,
    tools INTEGER NOT NULL,
    model TEXT,
    result TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""


class ChatStoreError(OSError):
    """The chats file cannot be used (newer schema, not SQLite, locked past the timeout): a file
    problem, said in one line where the chat is kept or listed."""


def store_path() -> Path:
    return xdg_data_dir() / DB_NAME


def new_session_id() -> str:
    return uuid.uuid4().hex


# ---------------------------------------------------------------- what a turn is, on disk


def result_record(r: ChatResult) -> dict[str, Any]:
    """A reply as stored and exported: ``chat --json``'s object plus latency and cancelled."""
    d = r.to_json()
    d["latency_s"] = None if r.latency_s is None else round(r.latency_s, 4)
    d["cancelled"] = r.cancelled
    return d


def result_from_record(d: dict[str, Any]) -> ChatResult:
    """The reply back from its record (fields of the wrong type are dropped, never raised on)."""
    def s(key: str) -> str:
        v = d.get(key)
        return v if isinstance(v, str) else ""

    def f(key: str) -> float | None:
        v = d.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    err = d.get("error")
    error = None
    if isinstance(err, dict):
        error = ApiError(str(err.get("kind") or "stream"), str(err.get("message") or ""))
    calls = d.get("tool_calls")
    warnings = d.get("warnings")
    return ChatResult(
        content=s("content"), reasoning=s("reasoning"),
        tool_calls=[c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
        finish_reason=d.get("finish_reason") if isinstance(d.get("finish_reason"), str) else None,
        usage=d.get("usage") if isinstance(d.get("usage"), dict) else None,
        ttft_s=f("ttft_s"), tokens_per_s=f("tokens_per_s"), latency_s=f("latency_s"),
        warnings=[w for w in warnings if isinstance(w, str)] if isinstance(warnings, list) else [],
        error=error, cancelled=bool(d.get("cancelled")))


@dataclass(frozen=True)
class SavedTurn:
    user: str  # the line as shown ("[tool test] ..." for the tool test)
    result: ChatResult
    tools: bool = False
    at: float = 0.0
    model: str | None = None


@dataclass(frozen=True)
class SessionSummary:
    id: str
    title: str
    url: str
    model: str | None
    created_at: float
    updated_at: float
    turns: int


@dataclass
class SavedSession:
    summary: SessionSummary
    turns: list[SavedTurn] = field(default_factory=list)

    def history(self) -> list[dict[str, str]]:
        """The messages a next turn carries: the user's words and the answers of the turns that
        were answered (not the tool test, not an error, not a cancelled reply)."""
        out: list[dict[str, str]] = []
        for t in self.turns:
            r = t.result
            if t.tools or r.error is not None or r.cancelled:
                continue
            out += [{"role": "user", "content": t.user}, {"role": "assistant", "content": r.content}]
        return out


def title_of(user_line: str) -> str:
    return one_line(user_line, TITLE_CHARS) or "(empty)"


# ---------------------------------------------------------------- the store


class ChatStore:
    """The chats file. Every method is blocking I/O: call it off the event loop."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else store_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # private from the first byte: a chat holds what was typed
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
        try:
            conn = sqlite3.connect(self.path, timeout=10.0)
        except sqlite3.Error as exc:
            raise ChatStoreError(f"chats file {self.path}: {exc}") from None
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ChatStoreError(f"chats file {self.path}: schema {version} is newer than this console's "
                                     f"({SCHEMA_VERSION}); upgrade dgx-console or move the file away")
            if version < SCHEMA_VERSION:  # a new file, or one kept before the schema had a number (the same tables)
                conn.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        except sqlite3.Error as exc:
            conn.close()
            raise ChatStoreError(f"chats file {self.path}: {exc}") from None
        except ChatStoreError:
            conn.close()
            raise
        return conn

    def add_turn(self, session_id: str, url: str, turn: SavedTurn) -> None:
        """Append a turn; the session row is created by its first turn (titled by it)."""
        now = turn.at or time.time()
        conn = self._connect()
        try:
            with conn:
                conn.execute("INSERT OR IGNORE INTO sessions (id, title, url, model, created_at, updated_at) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             (session_id, title_of(turn.user), url, turn.model, now, now))
                conn.execute("UPDATE sessions SET updated_at = ?, model = COALESCE(?, model) WHERE id = ?",
                             (now, turn.model, session_id))
                seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?",
                                   (session_id,)).fetchone()[0]
                conn.execute("INSERT INTO turns (session_id, seq, at, user, tools, model, result) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (session_id, seq, now, turn.user, int(turn.tools), turn.model,
                              json.dumps(result_record(turn.result))))
        finally:
            conn.close()

    def list_sessions(self, limit: int = LIST_LIMIT) -> list[SessionSummary]:
        """The newest sessions first."""
        if not self.path.exists():
            return []
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT s.id, s.title, s.url, s.model, s.created_at, s.updated_at, "
                "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id) "
                "FROM sessions s ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ?", (limit,)).fetchall()
        finally:
            conn.close()
        return [SessionSummary(*row) for row in rows]

    def load(self, session_id: str) -> SavedSession | None:
        if not self.path.exists():
            return None
        conn = self._connect()
        try:
            head = conn.execute(
                "SELECT s.id, s.title, s.url, s.model, s.created_at, s.updated_at, "
                "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id) FROM sessions s WHERE s.id = ?",
                (session_id,)).fetchone()
            if head is None:
                return None
            rows = conn.execute("SELECT user, tools, at, model, result FROM turns WHERE session_id = ? "
                                "ORDER BY seq", (session_id,)).fetchall()
        finally:
            conn.close()
        turns = []
        for user, tools, at, model, result in rows:
            try:
                rec = json.loads(result)
            except ValueError:
                rec = {}
            turns.append(SavedTurn(user, result_from_record(rec if isinstance(rec, dict) else {}),
                                   bool(tools), at, model))
        return SavedSession(SessionSummary(*head), turns)

    def last(self) -> SavedSession | None:
        """The session touched last (the support bundle's transcript)."""
        sessions = self.list_sessions(1)
        return self.load(sessions[0].id) if sessions else None

    def delete(self, session_id: str) -> None:
        conn = self._connect()
        try:
            with conn:
                conn.execute("DELETE FROM turns WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        finally:
            conn.close()


# ---------------------------------------------------------------- the one writer thread

_WRITER: ThreadPoolExecutor | None = None
_WRITER_LOCK = threading.Lock()


def submit(fn: Callable[[], Any], on_error: Callable[[BaseException], None] | None = None) -> Future:
    """Run ``fn`` on the one writer thread (in submission order); ``on_error`` (called on that
    thread) hears of a failure."""
    global _WRITER
    with _WRITER_LOCK:
        if _WRITER is None:
            _WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-store")
        fut = _WRITER.submit(fn)
    if on_error is not None:
        def done(f: Future) -> None:
            exc = f.exception()
            if exc is not None:
                on_error(exc)
        fut.add_done_callback(done)
    return fut


def flush(timeout: float = 10.0) -> None:
    """Wait for the writes submitted so far (tests, and a CLI before it exits)."""
    submit(lambda: None).result(timeout)
