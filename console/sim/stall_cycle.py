"""The ``stall-cycle`` fault: serving under load, and every ~45 s the tokens freeze for 8-15 s, then
move again on their own (the micro-stalls an operator never sees on a dashboard that polls). In
wall seconds from the moment the engine is ready, whatever the world's time scale: the console's
wedge window is wall time, and a stall is a freeze shorter than it."""

from __future__ import annotations

FIRST_S = 10.0  # the first freeze, after the engine is ready
PERIOD_S = 45.0
LENGTHS_S = (8.0, 12.0, 15.0, 10.0, 14.0, 9.0)  # one per cycle, in turn


def frozen(elapsed: float) -> tuple[float, bool]:
    """Seconds frozen so far ``elapsed`` s after ready, and whether a freeze holds now."""
    if elapsed <= FIRST_S:
        return 0.0, False
    k, into = divmod(elapsed - FIRST_S, PERIOD_S)
    done = sum(LENGTHS_S[i % len(LENGTHS_S)] for i in range(int(k)))
    length = LENGTHS_S[int(k) % len(LENGTHS_S)]
    return done + min(into, length), into < length
