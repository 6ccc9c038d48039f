"""The incident ledger: one SQLite file under the XDG state directory (``incidents.sqlite3``).

Two console processes may watch the same pair: the file is in WAL mode with a busy timeout, every
write is one short ``BEGIN IMMEDIATE`` transaction on a connection of its own, and the claim of an
incident is made in the ledger itself: the first console to open an incident of a kind for a
service owns it (it captures); a second one that sees the same incident joins the row and says it
skipped. Every write also holds a host-wide file lock (``incidents.sqlite3.lock``, ``flock``): SQLite's
own locks do not hold on every file system (NFS homes, some container overlays), and the lock makes
a write and the bundle files it removes one step for two consoles of this machine. The schema is versioned (``PRAGMA user_version``); a file written by a newer console is
refused with one line, never rewritten.

Rows: ``incidents`` (id, service, kind, start, end, stations, verdict, next step, bundle and its
bytes, action: captured / skipped / failed / nothing, with ``restarted`` added when the engine
restarted during it and ``alerted`` when an alert went out (``stopped`` when it ended with the engine stopped; ``claim_action``: one console per incident), owner, note) and ``stalls`` (service, start, seconds, stations, running).
Retention: at most ``max_incidents`` rows and ``max_bundle_bytes`` of bundles; the oldest bundles
are deleted first (the row stays, its note says so), then the oldest rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config.paths import xdg_state_dir

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 10_000
JOIN_S = 180.0  # an open incident of the same kind and service starting this close is the same one
STALL_JOIN_S = 4.0  # two consoles' records of one stall (their polls differ by seconds)
MAX_STALLS = 20_000
LOCK_POLL_S = 0.02

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  service TEXT NOT NULL, kind TEXT NOT NULL, start REAL NOT NULL, "end" REAL,
  stations TEXT NOT NULL, verdict TEXT NOT NULL, next_step TEXT NOT NULL DEFAULT '',
  bundle TEXT, bundle_bytes INTEGER NOT NULL DEFAULT 0, action TEXT NOT NULL DEFAULT 'nothing',
  owner TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS incidents_start ON incidents(start);
CREATE TABLE IF NOT EXISTS stalls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  service TEXT NOT NULL, start REAL NOT NULL, seconds REAL NOT NULL, stations TEXT NOT NULL, running REAL);
CREATE INDEX IF NOT EXISTS stalls_start ON stalls(start);
"""


class LedgerError(Exception):
    """The ledger cannot be used (a newer schema, an unreadable file): one line, for stderr."""


@dataclass(frozen=True)
class Incident:
    id: int
    service: str
    kind: str
    start: float
    end: float | None
    stations: tuple[str, ...]
    verdict: str
    next_step: str
    bundle: str | None
    bundle_bytes: int
    action: str
    owner: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "start": self.start, "end": self.end,
                "seconds": None if self.end is None else round(self.end - self.start, 1),
                "stations": list(self.stations), "verdict": self.verdict, "next_step": self.next_step,
                "bundle": self.bundle, "bundle_bytes": self.bundle_bytes, "action": self.action,
                "service": self.service, "owner": self.owner, "note": self.note}


@dataclass(frozen=True)
class Stall:
    start: float
    seconds: float
    stations: tuple[str, ...]
    running: float | None
    service: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "seconds": round(self.seconds, 1), "stations": list(self.stations),
                "running": self.running, "service": self.service}


@dataclass(frozen=True)
class Claim:
    """``open_incident``'s answer: the row, and whether this console owns it (it captures)."""

    id: int
    owner: bool
    other: str = ""  # the owner when it is another console


def default_path() -> Path:
    return xdg_state_dir() / "incidents.sqlite3"


def bundles_dir(ledger_path: Path) -> Path:
    return ledger_path.parent / "incidents"


def owner_words() -> str:
    return f"{os.uname().nodename} pid {os.getpid()}"


def lock_path(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".lock")


@contextlib.contextmanager
def host_lock(ledger_path: Path, timeout_s: float = BUSY_TIMEOUT_MS / 1000) -> Iterator[None]:
    """The ledger's write lock for every console of this host (``flock`` on the lock file beside it),
    waited for at most ``timeout_s`` (then ``LedgerError``: one line, never a hang)."""
    try:
        fd = os.open(lock_path(ledger_path), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise LedgerError(f"incident ledger {ledger_path}: its lock file: {exc.strerror or exc}") from None
    try:
        end = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= end:
                    raise LedgerError(f"incident ledger {ledger_path}: another console held its lock for over "
                                      f"{timeout_s:g} s") from None
                time.sleep(LOCK_POLL_S)
            except OSError as exc:
                raise LedgerError(f"incident ledger {ledger_path}: its lock: {exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class Ledger:
    """The ledger at ``path`` (default: under ``$XDG_STATE_HOME/dgx-console``), created on first use."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._ready = False

    @property
    def bundles(self) -> Path:
        return bundles_dir(self.path)

    @contextlib.contextmanager
    def _db(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self._setup()
        with host_lock(self.path) if write else contextlib.nullcontext():
            yield from self._connected(write)

    def _connected(self, write: bool) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if write:
                con.execute("BEGIN IMMEDIATE")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            else:
                yield con
        except sqlite3.Error as exc:
            raise LedgerError(f"incident ledger {self.path}: {exc}") from None
        finally:
            con.close()

    def _setup(self) -> None:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"incident ledger {self.path}: {exc.strerror or exc}") from None
        with host_lock(self.path):
            self._make()

    def _make(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"incident ledger {self.path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("BEGIN IMMEDIATE")
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                con.execute("ROLLBACK")
                raise LedgerError(f"incident ledger {self.path}: schema {version} is newer than this console's "
                                  f"({SCHEMA_VERSION}); upgrade dgx-console or move the file away")
            if version < SCHEMA_VERSION:  # (one transaction: a second console waits, then sees it made)
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    con.execute(stmt)
                con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LedgerError(f"incident ledger {self.path}: {exc}") from None
        finally:
            con.close()
        self._ready = True

    # ------------------------------------------------------------------ incidents

    def open_incident(self, service: str, kind: str, start: float, stations: list[str] | tuple[str, ...],
                      verdict: str, next_step: str) -> Claim:
        """The incident's row: a new one this console owns, or the open one another console made
        for the same service and kind (joined: not owned)."""
        with self._db(write=True) as con:
            row = con.execute('SELECT id, owner, bundle FROM incidents WHERE service=? AND kind=? AND "end" IS NULL '
                              "AND ABS(start - ?) <= ? ORDER BY id LIMIT 1", (service, kind, start, JOIN_S)).fetchone()
            if row is not None:
                iid, owner, bundle = int(row[0]), row[1], row[2]
                if owner == owner_words():
                    return Claim(iid, True)
                if bundle:
                    return Claim(iid, False, f"{owner}; captured already: {bundle}")
                if _gone(owner):  # its console ended before it captured: this one takes it over
                    con.execute("UPDATE incidents SET owner=? WHERE id=?", (owner_words(), iid))
                    return Claim(iid, True)
                return Claim(iid, False, owner)
            cur = con.execute("INSERT INTO incidents (service, kind, start, stations, verdict, next_step, owner, "
                              "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                              (service, kind, start, json.dumps(list(stations)), verdict, next_step, owner_words(),
                               time.time()))
            return Claim(int(cur.lastrowid or 0), True)

    def update(self, incident_id: int, **values: Any) -> None:
        """Set some of: end, verdict, next_step, bundle, bundle_bytes, action, note."""
        allowed = {"end", "verdict", "next_step", "bundle", "bundle_bytes", "action", "note"}
        if not values or set(values) - allowed:
            raise ValueError(f"cannot set {sorted(set(values) - allowed)}")
        cols = ", ".join(f'"{k}"=?' for k in values)
        with self._db(write=True) as con:
            con.execute(f"UPDATE incidents SET {cols} WHERE id=?", (*values.values(), incident_id))

    def add_stations(self, incident_id: int, stations: list[str] | tuple[str, ...]) -> None:
        """Add stations to an incident (those that turned alarmed after it opened), kept in order."""
        with self._db(write=True) as con:
            row = con.execute("SELECT stations FROM incidents WHERE id=?", (incident_id,)).fetchone()
            if row is None:
                return
            have = list(json.loads(row[0]))
            more = [n for n in stations if n not in have]
            if more:
                con.execute("UPDATE incidents SET stations=? WHERE id=?", (json.dumps(have + more), incident_id))

    def add_action(self, incident_id: int, word: str) -> None:
        """Add a word to what was done ("restarted" after "captured"): ``captured, restarted``."""
        with self._db(write=True) as con:
            row = con.execute("SELECT action FROM incidents WHERE id=?", (incident_id,)).fetchone()
            if row is None:
                return
            words = [w for w in row[0].split(", ") if w and w != "nothing"]
            if word not in words:
                con.execute("UPDATE incidents SET action=? WHERE id=?", (", ".join([*words, word]), incident_id))

    def claim_action(self, incident_id: int, word: str) -> bool:
        """Add ``word`` to what was done unless it is there already: True for the one console that
        added it (two consoles on one pair: the first to claim "alerted" sends the alert)."""
        with self._db(write=True) as con:
            row = con.execute("SELECT action FROM incidents WHERE id=?", (incident_id,)).fetchone()
            if row is None:
                return False
            words = [w for w in row[0].split(", ") if w and w != "nothing"]
            if word in words:
                return False
            con.execute("UPDATE incidents SET action=? WHERE id=?", (", ".join([*words, word]), incident_id))
            return True

    def close_incident(self, incident_id: int, end: float) -> None:
        with self._db(write=True) as con:
            con.execute('UPDATE incidents SET "end"=? WHERE id=? AND "end" IS NULL', (end, incident_id))

    def get(self, incident_id: int) -> Incident | None:
        with self._db() as con:
            row = con.execute(f"SELECT {_COLS} FROM incidents WHERE id=?", (incident_id,)).fetchone()
        return None if row is None else _incident(row)

    def incidents(self, since: float | None = None, limit: int = 1000) -> list[Incident]:
        """Newest first."""
        with self._db() as con:
            rows = con.execute(f"SELECT {_COLS} FROM incidents WHERE start >= ? ORDER BY start DESC, id DESC LIMIT ?",
                               (since if since is not None else -1.0, limit)).fetchall()
        return [_incident(r) for r in rows]

    # ------------------------------------------------------------------ stalls

    def add_stall(self, service: str, start: float, seconds: float, stations: list[str] | tuple[str, ...],
                  running: float | None) -> bool:
        """Record a stall; False when another console recorded the same one already."""
        with self._db(write=True) as con:
            if con.execute("SELECT 1 FROM stalls WHERE service=? AND ABS(start - ?) <= ?",
                           (service, start, STALL_JOIN_S)).fetchone():
                return False
            con.execute("INSERT INTO stalls (service, start, seconds, stations, running) VALUES (?, ?, ?, ?, ?)",
                        (service, start, seconds, json.dumps(list(stations)), running))
            con.execute("DELETE FROM stalls WHERE id <= (SELECT MAX(id) FROM stalls) - ?", (MAX_STALLS,))
            return True

    def stalls(self, since: float | None = None, service: str | None = None, limit: int = 5000) -> list[Stall]:
        """Newest first."""
        q = "SELECT start, seconds, stations, running, service FROM stalls WHERE start >= ?"
        args: list[Any] = [since if since is not None else -1.0]
        if service is not None:
            q += " AND service=?"
            args.append(service)
        with self._db() as con:
            rows = con.execute(q + " ORDER BY start DESC LIMIT ?", (*args, limit)).fetchall()
        return [Stall(r[0], r[1], tuple(json.loads(r[2])), r[3], r[4]) for r in rows]

    # ------------------------------------------------------------------ retention

    def prune(self, max_incidents: int, max_bundle_bytes: int) -> list[str]:
        """Keep at most ``max_incidents`` rows and ``max_bundle_bytes`` of bundles (oldest go first);
        one line per thing removed, to be said."""
        said: list[str] = []
        doomed: list[str] = []
        with self._db(write=True) as con:
            rows = con.execute('SELECT id, bundle, bundle_bytes FROM incidents ORDER BY start DESC, id DESC').fetchall()
            for iid, bundle, _ in rows[max_incidents:]:
                con.execute("DELETE FROM incidents WHERE id=?", (iid,))
                if bundle:
                    doomed.append(bundle)
                said.append(f"incident {iid} removed from the ledger (over {max_incidents} incidents)")
            total = sum(int(b or 0) for _, bundle, b in rows[:max_incidents] if bundle)
            for iid, bundle, size in reversed(rows[:max_incidents]):  # oldest first
                if total <= max_bundle_bytes:
                    break
                if not bundle:
                    continue
                con.execute("UPDATE incidents SET bundle=NULL, bundle_bytes=0, note=? WHERE id=?",
                            (f"bundle pruned ({_mib(size)}: the bundles were over {_mib(max_bundle_bytes)})", iid))
                doomed.append(bundle)
                total -= int(size or 0)
                said.append(f"incident {iid}'s bundle pruned ({_mib(size)}; bundles over {_mib(max_bundle_bytes)})")
        for path in doomed:
            self._remove_bundle(path)
        return said

    def _remove_bundle(self, path: str) -> None:
        """Only a regular file inside the bundles directory is deleted (never through a link)."""
        p = Path(path)
        with contextlib.suppress(OSError):
            if p.parent.resolve() == self.bundles.resolve() and p.is_file() and not p.is_symlink():
                p.unlink()


_COLS = 'id, service, kind, start, "end", stations, verdict, next_step, bundle, bundle_bytes, action, owner, note'


def _incident(r: tuple) -> Incident:
    return Incident(int(r[0]), r[1], r[2], float(r[3]), r[4], tuple(json.loads(r[5])), r[6], r[7], r[8],
                    int(r[9] or 0), r[10], r[11], r[12])


def _gone(owner: str) -> bool:
    """The owner ("host pid N") is a console of this host that no longer runs."""
    host, _, pid = owner.partition(" pid ")
    if host != os.uname().nodename or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _mib(n: int | None) -> str:
    n = int(n or 0)
    return f"{n / 1048576:.1f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.1f} GiB"
