"""The app's long-lived heap kept out of the garbage collector's full passes.

A full pass walks every tracked object. On the 2-core test machine it costs ~0.9 µs an object: ~110-150 ms
over a running console's ~110k (modules, classes, functions, widgets), and under a log flood one
comes every few seconds, so the screen froze for a frame of that length (the log-ingest benchmark's
worst loop step at 50k lines/s). ``gc.freeze`` moves what exists now into a generation no pass walks.
Called once the first frame is up and again once the services have loaded what connecting needs.
What is frozen is never collected: only the young generations are collected first (~1 ms), not the
whole heap, since a full pass is the very stall this avoids (~100 ms right after the first frame, and
~150-300 ms in a test process's bigger heap, twice an app). The garbage that leaves in the old
generation is small (the demo: ~2,900 objects at the first frame, ~300 KB) and lasts until the app
ends. Then (``release_heap``) everything frozen goes back to the collector, so a process that runs
the app again (the tests) does not keep every finished app."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect the young garbage, then freeze the rest (the app's modules, classes, widgets)."""
    gc.collect(1)
    gc.freeze()


def release_heap() -> None:
    """The frozen objects back to the collector: the app that froze them has ended."""
    gc.unfreeze()
