"""The words of the hang evidence's thread states, stragglers and requests in flight: one source for
``hang-report``'s plain output and the evidence screen's columns (``h``), so the CLI and the screen
say the same thing of the same capture.

Pure functions of the capture's JSON objects (``StationEvidence.tasks``, ``HangEvidence.stragglers``,
``incidents.capture.requests_in_flight``) and of the read's age: a source not read says "not read"
and why (never blank, never "clean"), a read older than its limit says "stale" and its age. Every
string that came from a station passes ``one_line`` (the one sanitizer)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from console.sanitize import one_line

TEXT = 300
StationRow = tuple[str, str]  # (label, words)


def not_read(note: str | None, fallback: str = "no answer") -> str:
    """``note`` as a "not read" line (the capture's notes are not always worded so)."""
    text = one_line(note or "", TEXT) or fallback
    return text if text.startswith("not read") or ": not read" in text else f"not read: {text}"


def age_words(age_s: float | None, stale_after_s: float | None) -> str:
    """"stale: 31 s old" past ``stale_after_s``; "4 s old" when there is no limit (a live poll's
    age); "" for a read within its limit (the capture's own time says when) or of no known age."""
    if age_s is None or (stale_after_s is not None and age_s <= stale_after_s):
        return ""
    old = f"{max(0.0, age_s):.0f} s old"
    return f"stale: {old}" if stale_after_s is not None else old


def _with_age(words: str, age_s: float | None, stale_after_s: float | None) -> str:
    age = age_words(age_s, stale_after_s)
    if not age:
        return words
    return f"{words} ({age})" if not age.startswith("stale") else f"{age}: {words}"


def threads_words(tasks: dict[str, Any], age_s: float | None = None, stale_after_s: float | None = None) -> str:
    """One station's engine threads in the kernel: how many, how many in D (uninterruptible) and in
    which wait channels, then the two commonest other states and channels; "not read: why" when the
    read failed. ``44 threads, 1 in D (1 nv_wait_for_event); 40 S futex_wait_queue, 3 R running``."""
    if tasks.get("status") != "ok":
        return not_read(tasks.get("note"), "no thread read")
    threads = [t for p in tasks.get("processes", []) for t in p.get("threads", [])]
    if not threads:
        return not_read(tasks.get("note"), "no thread listed")

    def chan(t: dict) -> str:
        w = t.get("wchan")
        return "wchan not read" if w in (None, "not read") else "running" if w in ("", "0") else one_line(str(w), 40)

    d = Counter(chan(t) for t in threads if t.get("state") == "D")
    words = f"{len(threads)} threads, " + (
        f"{sum(d.values())} in D ({', '.join(f'{n} {c}' for c, n in d.most_common(3))})" if d else "none in D")
    rest = Counter(f"{t.get('state') or '?'} {chan(t)}" for t in threads if t.get("state") != "D")
    if rest:
        words += "; " + ", ".join(f"{n} {k}" for k, n in rest.most_common(2))
    if any(p.get("clipped") for p in tasks.get("processes", [])):
        words += " (more threads not read)"
    if any(t.get("stack_note") == "not read: permission" for t in threads):
        words += "; stacks not read: permission"
    return _with_age(words, age_s, stale_after_s)


def straggler_words(stragglers: dict[str, Any], station: str, age_s: float | None = None,
                    stale_after_s: float | None = None) -> str:
    """Whether NCCL RAS found ``station``'s rank behind the most advanced (by how many operations),
    missing from the job, or in step; with the read it comes from (the station RAS was read on, one
    or two reads) and its age. ``age_s`` defaults to the age the capture recorded."""
    if stragglers.get("status") != "ok":
        return not_read(stragglers.get("note"), "no RAS report")
    src = f"RAS on {stragglers.get('read_on')}, {str(stragglers.get('reads', '')).replace('-', ' ')}"
    age = stragglers.get("age_s") if age_s is None else age_s
    if (a := age_words(age, stale_after_s)):
        src += f", {a}"
    behind = {x.get("station"): x.get("behind") for x in stragglers.get("ranks", [])}
    missing = {x.get("station"): x.get("dead") for x in stragglers.get("missing", [])}
    if station in behind:
        n = behind[station]
        return f"behind by {n} op{'s' if n != 1 else ''} ({src})"
    if station in missing:
        return f"missing from the job{' (dead)' if missing[station] else ''} ({src})"
    if stragglers.get("kind") in ("unavailable", "unknown"):
        return f"not judged: {one_line(str(stragglers.get('text', '')), TEXT)} ({src})"
    return f"not behind ({src})"


def stragglers_line(stragglers: dict[str, Any], stale_after_s: float | None = None) -> str:
    """The stragglers over every station in one line (the CLI's row): the ranks behind and missing,
    "none behind" when RAS saw every rank in step, "not read: why" when RAS gave nothing; the read's
    age when past ``stale_after_s`` (always with None)."""
    if stragglers.get("status") != "ok":
        return not_read(stragglers.get("note"), "no RAS report")
    parts = [f"{x.get('station') or 'rank ' + str(x.get('rank'))} behind by {x.get('behind')} op"
             + ("s" if x.get("behind") != 1 else "")
             for x in stragglers.get("ranks", [])]
    parts += [f"{x.get('station') or 'rank ' + str(x.get('rank'))} missing{' (dead)' if x.get('dead') else ''}"
              for x in stragglers.get("missing", [])]
    age = age_words(stragglers.get("age_s"), stale_after_s)
    src = f"RAS on {stragglers.get('read_on')}, {str(stragglers.get('reads', '')).replace('-', ' ')}" + (
        f", {age}" if age else "")
    return f"{', '.join(parts) if parts else 'none behind'} ({src})"


def requests_words(req: dict[str, Any] | None, age_s: float | None = None) -> str:
    """The engine's requests in flight (running, waiting) as its metrics last said them, with the
    read's age (always: a live poll, not the capture; "stale" when ``requests_in_flight`` says so);
    "not read: why" with no good read."""
    if req is None:
        return "not read: this capture has no read of the engine's metrics"
    if req.get("status") not in ("ok", "stale"):
        return not_read(req.get("note"), "no read of the engine's metrics")

    def num(v: Any) -> str:
        return "?" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

    words = f"{num(req.get('running'))} running, {num(req.get('waiting'))} waiting"
    age = req.get("age_s") if age_s is None else age_s
    if req.get("status") == "stale":
        why = one_line(str(req.get("note") or ""), 120)
        return f"stale: {age_words(age, None) or 'age not known'}: {words}" + (f" (last poll: {why})" if why else "")
    return _with_age(words, age, None)


def station_rows(tasks: dict[str, Any], stragglers: dict[str, Any], station: str, serves_api: bool = False,
                 requests: dict[str, Any] | None = None, tasks_age_s: float | None = None,
                 stragglers_age_s: float | None = None, stale_after_s: float | None = None) -> list[StationRow]:
    """A station's rows of these three sources, labelled as both the screen and the CLI show them;
    the requests row only where the station serves the API (the head), "not read" when ``requests``
    is None there."""
    rows = [("threads", threads_words(tasks, tasks_age_s, stale_after_s)),
            ("straggler", straggler_words(stragglers, station, stragglers_age_s, stale_after_s))]
    if serves_api:
        rows.append(("requests", requests_words(requests)))
    return rows
