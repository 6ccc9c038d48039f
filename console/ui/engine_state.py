"""What the head station's engine phase means for the API, in the operator's words.

The head station's state holds its phase (``EngineUpdate`` messages: the container log, parsed by
``console/probes/engine_log.py``). The head's pane hands it to its serving panel; the chat and
bench screens get it when they open and, while open, from the app's ``head_engine_changed`` signal
(a Textual ``Signal`` they subscribe to: ``follow_head_engine``; the app pokes no screen); they do
no I/O of their own. While the engine loads, the API refuses connections: that is expected and calm
("still loading (capturing CUDA graphs)"), not "unreachable".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from console.probes.engine_log import EngineProgress
from console.vocabulary import LOADING_PHASES, EnginePhase

if TYPE_CHECKING:
    from textual.dom import DOMNode

ApiExpectation = Literal["loading", "failed", "stopped", "up", "unknown"]


def follow_head_engine(node: DOMNode, callback: Callable[[EngineProgress | None], object]) -> None:
    """Call ``callback`` with the head's engine phase each time it changes, while ``node`` is mounted:
    a subscription to the app's ``head_engine_changed`` signal (none where the app has no stations,
    a screen hosted alone)."""
    signal = getattr(node.app, "head_engine_changed", None)
    if signal is not None:
        signal.subscribe(node, callback)


def api_expectation(progress: EngineProgress | None) -> ApiExpectation:
    """Whether the API should be answering, from the head's engine phase."""
    if progress is None:
        return "unknown"
    if progress.phase in LOADING_PHASES:
        return "loading"
    if progress.phase == EnginePhase.FAILED:
        return "failed"
    if progress.phase == EnginePhase.STOPPED:
        return "stopped"
    return "up" if progress.phase == EnginePhase.READY else "unknown"


def still_loading(progress: EngineProgress | None) -> str | None:
    """``still loading (capturing CUDA graphs)`` while the engine starts, else None."""
    if api_expectation(progress) != "loading":
        return None
    return f"still loading ({progress.label})"  # type: ignore[union-attr]


def why_no_api(progress: EngineProgress | None) -> str | None:
    """The reason the API does not answer when the engine's log already says it (or None)."""
    match api_expectation(progress):
        case "loading":
            return still_loading(progress)
        case "failed":
            return "the engine failed at start-up (press d on the dashboard for the diagnosis)"
        case "stopped":
            return "the engine is stopped (L launches it)"
    return None
