"""How a length of time reads, in one place: every screen and message that shows seconds uses one of
these styles, so "3 min" means the same thing in the station pane, the fleet table and the serving panel.

The styles differ on purpose and each says where it is used:

* :func:`age`: how old a value is, whole units, never rounded up ("12 s", "3 min", "2 h"): station
  pane, fleet table.
* :func:`span`: a length of time, rounded ("45 s", "2 min", "1.5 h"): serving panel, GPU meter.
* :func:`tick`: an axis label back from now, in the largest unit that divides it ("-30 s", "-2 min",
  "-1 h", "now"): GPU history plot.
* :func:`clock`: minutes:seconds ("4:07"): the start-up line ("start-up +4:07").
* :func:`compact`: start-up phase durations beside their past runs ("4m07s", "2.3s", "120ms").
* :func:`elapsed`: a measured time with its decimals ("12.3 s"): doctor, checks, action steps.

Pure: no I/O, no other console module.
"""

from __future__ import annotations

import time

NONE = "—"


def age(seconds: float | None) -> str:
    """``12 s`` below two minutes, ``3 min`` below two hours, else ``2 h`` (truncated); None: ``—``."""
    if seconds is None:
        return NONE
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else (f"{s // 60} min" if s < 7200 else f"{s // 3600} h")


def span(seconds: float) -> str:
    """``45 s`` below 90 s, ``2 min`` below 90 min, else ``1.5 h`` (rounded)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def tick(seconds: float) -> str:
    """``now``, ``-60 s``, ``-2 min``, ``-1 h``: ``seconds`` back from now, whole hours or minutes when
    they divide it (minutes from two on: ``-60 s``, not ``-1 min``)."""
    s = int(round(seconds))
    if s == 0:
        return "now"
    if s % 3600 == 0:
        return f"-{s // 3600} h"
    return f"-{s // 60} min" if s % 60 == 0 and s >= 120 else f"-{s} s"


def time_of_day(at: float) -> str:
    """``14:03:41``: a Unix time as the wall clock here reads it (when something ran)."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def clock(seconds: float) -> str:
    """``4:07``: whole minutes and seconds (``0:05``, ``72:00``)."""
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


def compact(seconds: float) -> str:
    """``4m07s`` from a minute on, ``2.3s`` from a second on, else ``120ms``."""
    if seconds >= 60:
        m, s = divmod(int(round(seconds)), 60)
        return f"{m}m{s:02d}s"
    if seconds >= 1:
        return f"{seconds:.1f}s"
    return f"{seconds * 1000:.0f}ms"


def elapsed(seconds: float, digits: int = 1) -> str:
    """``12.3 s``: a measured time with ``digits`` decimals."""
    return f"{seconds:.{digits}f} s"
