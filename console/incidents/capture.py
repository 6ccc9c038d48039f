"""An incident's bundle: the hang evidence (``console.doctor.evidence.capture``, as ``hang-report``
takes it) and the incident window, in one tar.gz under the ledger's ``incidents/`` directory.

The archive holds what a ``hang-report`` archive holds (``manifest.json``, ``verdict.txt``,
``evidence.json``, ``stations/NAME/*.txt``) plus ``incident.json`` (the ledger's row) and
``window.ndjson`` (the samples of every station from ``WINDOW_BEFORE_S`` before the incident began to
the capture; schema: ``console/incidents/window.py``). Bounded: the capture has a deadline (the
config's ``capture_deadline_s``; a station that has not answered by then is recorded as such), each
member at most ``MAX_MEMBER_BYTES`` (its head kept, a visible clip mark) and the whole at most
``MAX_BUNDLE_BYTES`` before compression. Every string passes the config's masker and the secret
redaction before it is written. The parsing and the writing run in a thread (never on the loop).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from console.config import Config, masker
from console.diagnosis import redact

WINDOW_BEFORE_S = 600.0  # the ten minutes before the freeze
MAX_MEMBER_BYTES = 8 * 1024 * 1024
MAX_BUNDLE_BYTES = 48 * 1024 * 1024
CLIP = b"\n[... clipped by dgx-console: the member was over its bound ...]\n"


@dataclass(frozen=True)
class Captured:
    path: Path
    bytes: int
    seconds: float
    verdict: str
    captured: bool  # False: no engine process to take evidence from (the bundle holds the window only)


def requests_in_flight(snapshot, now: float) -> dict:
    """The engine's requests in flight as its metrics last said them (the console's own poll of the
    head's API): running and waiting, with the read's age; "not read" (and why) when there is no
    good read, "stale" when the last poll failed or is older than 10 s."""
    if snapshot is None or snapshot.updated_at is None:
        why = (snapshot.error if snapshot is not None else None) or "no good read of the engine's metrics yet"
        return {"status": "not-read", "note": "not read: " + why[:300], "running": None, "waiting": None}
    age = snapshot.age_s(now)
    return {"status": "stale" if snapshot.is_stale(now) else "ok", "source": "the engine's /metrics (the console's "
            "last poll)", "running": snapshot.running, "waiting": snapshot.waiting,
            "gen_tokens": snapshot.gen_tokens_total, "read_at": snapshot.updated_at, "age_s": round(age or 0.0, 1),
            "note": snapshot.error or ""}


def bound(members: dict[str, bytes], per_member: int = MAX_MEMBER_BYTES, total: int = MAX_BUNDLE_BYTES
          ) -> dict[str, bytes]:
    """Each member at most ``per_member``, the whole at most ``total`` (the biggest clipped first)."""
    out = {k: (v if len(v) <= per_member else v[:per_member] + CLIP) for k, v in members.items()}
    while sum(map(len, out.values())) > total:
        name = max(out, key=lambda k: len(out[k]))
        over = sum(map(len, out.values())) - total
        keep = max(0, len(out[name]) - over - len(CLIP))
        out[name] = out[name][:keep] + CLIP
        if keep == 0:
            break
    return out


def full_masker(config: Config) -> Callable[[str], str]:
    mask = masker(config)
    return lambda text: redact(mask(text))


def build_members(evidence, incident: dict, window_lines: list[str], mask: Callable[[str], str]) -> dict[str, bytes]:
    """The archive's files (sync: run it in a thread)."""
    from console.commands.bundle import _masked
    from console.commands.hang_report import members

    out = members(evidence, mask) if evidence is not None else {}
    out["incident.json"] = json.dumps(_masked(incident, mask), indent=2).encode()
    out["window.ndjson"] = "".join(mask(line) + "\n" for line in window_lines).encode()
    return bound(out)


async def capture_bundle(config: Config, path: Path, incident: dict, window_lines: Callable[[], list[str]],
                         deadline_s: float) -> Captured:
    """Take the evidence (bounded by ``deadline_s``), then write the bundle at ``path``."""
    from console.commands.bundle import write_archive
    from console.doctor.evidence import capture

    t0 = time.monotonic()
    try:
        ev = await asyncio.wait_for(capture(config, deadline_s=deadline_s), deadline_s + 15.0)
        verdict = ev.verdict
    except TimeoutError:
        ev, verdict = None, f"the evidence did not come within {deadline_s + 15:g} s (the window alone was kept)"
    lines = window_lines()  # taken after the evidence: the window reaches the capture
    mask = full_masker(config)

    def write() -> int:
        members = build_members(ev, incident | {"evidence_verdict": verdict}, lines, mask)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_archive(path, members)
        return path.stat().st_size

    size = await asyncio.to_thread(write)
    return Captured(path, size, time.monotonic() - t0, verdict, bool(ev is not None and ev.captured))
