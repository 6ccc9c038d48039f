"""The engines' start-up milestones, one row each: the milestone's id, the words each engine's log says
it with, and the words the console shows for it. The classifier's phase markers, timeline anchors and
launch echo (markers.py), the diagnosis' "weights are loading" probes (signatures.py), the launch's
timeline labels and the dashboard's phase words (probes/engine_log.py) are made of these rows, so a
new engine wording or a reworded label is one edit here. Pure data; imports only the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.vocabulary import EnginePhase

Engine = str  # "vllm" | "sglang": the engines whose logs are read

# The weights' load as it goes (vLLM's safetensors shards with a percentage): the loading phase's progress
# line, no milestone of its own.
SHARDS_MARKER = "Loading safetensors checkpoint shards"


@dataclass(frozen=True)
class Milestone:
    """One start-up milestone.

    ``wordings``: engine -> the literal(s) of the log line that marks it (the classifier's anchors);
    ``more``: lines that add figures to its timeline event without marking it (vLLM logs the KV cache
    in two lines); ``shown``: the milestone as the launch's timeline names it (None: no timeline event);
    ``phase``: the start-up phase its line begins (None: it begins none), ``phase_shown`` that phase in
    the dashboard's words while the engine is in it."""

    id: str
    wordings: dict[Engine, tuple[str, ...]]
    shown: str | None
    phase: EnginePhase | None = None
    phase_shown: str = ""
    more: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """Every engine's wordings, in the table's order (vLLM's first), each once."""
        return tuple(dict.fromkeys(w for ws in self.wordings.values() for w in ws))


MILESTONES: tuple[Milestone, ...] = (
    Milestone("weights-start", {"vllm": ("Starting to load model",), "sglang": ("Load weight begin",)},
              "weights loading", EnginePhase.LOADING, "loading weights"),
    Milestone("weights-end", {"vllm": ("Model loading took",), "sglang": ("Load weight end",)},
              "weights loaded", EnginePhase.LOADED, "weights loaded"),
    Milestone("kv-cache", {"vllm": ("Available KV cache memory",), "sglang": ("KV Cache is allocated",)},
              "KV cache allocated", EnginePhase.KV_CACHE, "allocating KV cache", more=("KV cache size: ",)),
    Milestone("graphs-start", {"vllm": ("Capturing CUDA graphs",), "sglang": ("Capture cuda graph begin",)},
              None, EnginePhase.GRAPHS, "capturing CUDA graphs"),
    Milestone("cuda-graphs", {"vllm": ("Graph capturing finished",), "sglang": ("Capture cuda graph end",)},
              "CUDA graphs captured"),
)
BY_ID: dict[str, Milestone] = {m.id: m for m in MILESTONES}
WEIGHTS_START, WEIGHTS_END, KV_CACHE, GRAPHS_START, GRAPHS_END = MILESTONES

#: The milestones' names in the launch's timeline (event id -> words).
SHOWN: dict[str, str] = {m.id: m.shown for m in MILESTONES if m.shown}
#: The start-up phases a milestone begins, in the dashboard's words.
PHASE_SHOWN: dict[EnginePhase, str] = {m.phase: m.phase_shown for m in MILESTONES if m.phase and m.phase_shown}


def phase_text(phase: EnginePhase | str, load_pct: int | None = None) -> str:
    """The phase in the operator's words: "loading weights 30%", "allocating KV cache", "ready"."""
    words = PHASE_SHOWN.get(phase)  # type: ignore[call-overload]
    if phase == EnginePhase.LOADING:
        return f"{words} {load_pct}%" if load_pct is not None else str(phase)
    return words or str(phase)
