"""The wall clock the screens read ages against ("3 s ago", "stale", "last 2 min").

One place so that a snapshot test can pin it (``monkeypatch.setattr(clock, "now", ...)``): a
picture with an age in it must not depend on how fast the test machine drew it. Samples carry
their own ``at`` (``time.time()`` when they were read); only the "now" they are compared with
comes from here."""

from __future__ import annotations

import time


def now() -> float:
    return time.time()
