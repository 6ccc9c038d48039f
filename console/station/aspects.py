"""What a station message changes (``Aspect``), which of those are sources with an age of their own,
their names in the operator's words, and how late each periodic source may be before its values are
stale. The station state (console/station/state.py), the monitor and every reader name a fact by these.
"""

from __future__ import annotations

from enum import StrEnum

from console.remote.cmdlines.streams import HEALTH_EVERY_S, RAILS_EVERY_S


class Aspect(StrEnum):
    """What a message changed. The sources, each with its own time in ``StationState.at`` (except
    ``CONN``, whose time is the connection's ``last_sample_at``), and ``MEMORY``: the per-GPU
    memory view derived from the GPU, process and host-memory readings."""

    CONN = "conn"
    GPUS = "gpus"
    APPS = "apps"
    HOSTMEM = "hostmem"
    CONTAINER = "container"
    ENGINE = "engine"
    LOGS = "logs"  # a log batch: its time, its lines in the station's log buffer (the log view reads it)
    SERVING = "serving"  # the API's poll (the head station's)
    MEMORY = "memory"
    # GPU and fabric health
    HEALTH = "health"  # the per-GPU health stream
    RAILS = "rails"  # the rails loop
    KERNEL = "kernel"  # the kernel log follower (Xid lines)
    RAS = "ras"  # the job's NCCL RAS watch (one for the fleet: console/station/ras_watch.py)


EVERY_ASPECT = frozenset(Aspect)
NOTHING: frozenset[Aspect] = frozenset()

#: Each source in the operator's words ("GPU samples stale 12 s").
SOURCE_WORDS: dict[Aspect, str] = {
    Aspect.GPUS: "GPU samples", Aspect.APPS: "GPU processes", Aspect.HOSTMEM: "host memory",
    Aspect.CONTAINER: "container events", Aspect.ENGINE: "engine log", Aspect.LOGS: "log stream",
    Aspect.SERVING: "serving poll",
    Aspect.HEALTH: "GPU health", Aspect.RAILS: "rails", Aspect.KERNEL: "kernel log"}
#: The sources, as ``watch --json``/``status --json`` name their ages (``ages_s``); the kernel
#: follower is event-driven: no age of its own.
SOURCES = (Aspect.GPUS, Aspect.APPS, Aspect.HOSTMEM, Aspect.CONTAINER, Aspect.ENGINE, Aspect.LOGS, Aspect.SERVING,
           Aspect.HEALTH, Aspect.RAILS)
#: How often the monitor reads host memory (seconds); GPU samples come at the configured interval.
HOSTMEM_EVERY_S = 2.0


def stale_after_s(interval_s: float) -> float:
    """Silence after which a periodic source's values (or a silent station's) are stale: a read older
    than its interval + 2 s is never shown as current; never under 3 s (a fast loop's jitter)."""
    return max(3.0, interval_s + 2.0)


def late_limits(gpu_interval_s: float = 1.0) -> dict[Aspect, float]:
    """How late each periodic source may be before its values are stale. The event-driven ones
    (container, engine, logs) say nothing while nothing happens: only the connection ages them."""
    gpu = stale_after_s(gpu_interval_s)
    return {Aspect.GPUS: gpu, Aspect.APPS: gpu, Aspect.HOSTMEM: stale_after_s(HOSTMEM_EVERY_S)}


def health_late_limits() -> dict[Aspect, float]:
    """The health stream and the rails loop: late after their interval + 2 s (stale_after_s)."""
    return {Aspect.HEALTH: stale_after_s(HEALTH_EVERY_S), Aspect.RAILS: stale_after_s(RAILS_EVERY_S)}
