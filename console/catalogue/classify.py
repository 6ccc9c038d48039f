"""The one log classifier: one scan of a batch for every anchor of the catalogue, and what each line
means to each consumer.

``classify(lines)`` walks the batch once (``KeyIndex``: one Aho-Corasick pass over the diagnosis
anchors and the start-up markers together) and returns a ``ClassifiedBatch``:

- ``diagnosis``: line index -> the diagnosis anchors it holds (what ``Diagnoser.feed`` matches);
- ``marks``: line index -> ``LineMarks`` for the lines holding a start-up marker (what the start-up
  tracker and the launch follower react to: reset, phase, load %, weights, NCCL transport, timeline
  event, ready/started markers, the lines a launch echoes, the fatal finding);
- ``holds_any(words, start, stop)``: whether some lines hold a word, found in the batch's text (the
  tracker's "any NCCL line" without a marker per NCCL line).

Each view is computed when first asked for, so a consumer pays only for what it reads: the ``diagnose``
command never builds start-up marks. A station's monitor classifies each batch once; the tracker reads it
there and the app's diagnoser reads it from the ``LogBatch`` that carries it. The log pane's colours are
``catalogue.highlight(line)``: a pure function of the text a widget shows (clipped and sanitized), run
only for the lines on screen.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from functools import cached_property

from console import catalogue as cat
from console.catalogue.scan import KEY_WORDS, MARKER_KEY_WORDS, KeyIndex, line_starts
from console.sanitize import strip_escapes
from console.vocabulary import EnginePhase, NcclTransport

# The diagnoser's anchors come first: its keys keep their numbers and order, so each line's diagnosis
# anchors come out as they always did.
DIAGNOSIS_ANCHORS: tuple[str, ...] = tuple(dict.fromkeys((*cat.ANCHORS, *cat.CONTEXT_ANCHORS, *cat.GENERIC_ANCHORS)))
INDEX = KeyIndex((*DIAGNOSIS_ANCHORS, *cat.STARTUP_ANCHORS), KEY_WORDS + MARKER_KEY_WORDS)

_STARTUP = frozenset(cat.STARTUP_ANCHORS)
# Key number -> the anchors each view reads (a view resolves only its own).
_ALL_GROUPS = INDEX.groups()
_DIAGNOSIS_GROUPS = INDEX.groups(frozenset(DIAGNOSIS_ANCHORS))
_STARTUP_GROUPS = INDEX.groups(_STARTUP)
_RESET = frozenset(cat.RESET_MARKERS)
_FATAL = frozenset(cat.FATAL_ANCHORS)
_TIMELINE = frozenset(a for _e, anchors, _p in cat.TIMELINE_MARKERS for a in anchors)
_TRANSPORT = frozenset(cat.TRANSPORT_ANCHORS)
_PROGRESS = frozenset(cat.PROGRESS_ANCHORS)
_UNSET = object()
_NCCL_VERSION = frozenset(cat.NCCL_VERSION_ANCHORS)


class LineMarks:
    """What one log line means to the start-up consumers. ``raw`` is the line as printed, ``text`` the
    line without escape sequences (what is matched), ``anchors`` the catalogue anchors it holds.
    ``fatal`` and ``progress`` are worked out when asked."""

    __slots__ = ("raw", "text", "anchors", "reset", "nccl", "transport", "channel", "timeline", "phase",
                 "graphs_done", "load_pct", "weights_gib", "headless", "shutdown", "_fatal",
                 "nccl_version")

    def __init__(self, raw: str, text: str, anchors: tuple[str, ...] | list[str]) -> None:
        self.raw = raw
        self.text = text
        self.anchors = found = frozenset(anchors)
        self.reset = not found.isdisjoint(_RESET)
        self.nccl = any(w in text for w in cat.NCCL_WORDS)
        self.transport: NcclTransport | None = None
        self.channel = False
        if found & _TRANSPORT:
            self.transport = cat.transport_of_text(text)
            self.channel = cat.CHANNEL_MARKER in text
        self.timeline: tuple[str, dict[str, float]] | None = None
        if found & _TIMELINE:
            self.timeline = _timeline(text, found)
        self.phase: EnginePhase | None = next((p for p, m in cat.PHASE_MARKERS if m in found), None)
        self.graphs_done = any(m in found for m in cat.GRAPHS_DONE_MARKERS)
        self.load_pct: int | None = None
        if cat.SHARDS_MARKER in found and (m := cat.LOAD_PCT.search(text)):
            self.load_pct = int(m.group(1))
        self.weights_gib: float | None = None
        if self.phase == EnginePhase.LOADED:
            m = next((m for rx in cat.WEIGHTS_GIB if (m := rx.search(text))), None)
            self.weights_gib = float(m.group(1)) if m else None
        self.headless = cat.HEADLESS_MARKER in found
        self.shutdown = cat.SHUTDOWN_MARKER in found
        self._fatal: object = _UNSET
        # the NCCL this rank loaded ((version, the words that said it)), on the lines that name it
        self.nccl_version = cat.nccl_version_of_text(text) if found & _NCCL_VERSION else None

    def holds(self, marker: str) -> bool:
        """Whether the line holds ``marker`` (as ``in`` says: the empty marker is in every line)."""
        if marker in _STARTUP:
            return marker in self.anchors
        return marker in self.text

    @property
    def fatal(self) -> tuple[str, str] | None:
        """(finding id, fix) when the line means the start-up cannot succeed (a fatal catalogue finding)."""
        if self._fatal is _UNSET:
            anchors = [a for a in self.anchors if a in _FATAL]
            self._fatal = cat.fatal_of_text(self.text, anchors) if anchors else None
        return self._fatal  # type: ignore[return-value]

    @property
    def progress(self) -> bool:
        """A start-up milestone a launch echoes as it happens."""
        return bool(self.anchors & _PROGRESS) and cat.PROGRESS_LINE.search(self.text) is not None


def _timeline(text: str, found: frozenset[str]) -> tuple[str, dict[str, float]] | None:
    for event, anchors, pat in cat.TIMELINE_MARKERS:
        if any(a in found for a in anchors) and (m := pat.search(text)):
            return event, {k: float(v.replace(",", "")) for k, v in m.groupdict().items() if v}
    return None


@dataclass(eq=False)
class ClassifiedBatch:
    """A batch of log lines and what the one scan found in it (see the module's docstring)."""

    lines: list[str]  # as printed (what is shown and kept)
    texts: list[str]  # the same lines without escape sequences (what is matched and quoted)
    blob: str  # "\n".join(texts)
    keyed: dict[int, Set[int]]  # the scan: line index -> the numbers of the index keys its template holds

    @cached_property
    def diagnosis(self) -> dict[int, list[str]]:
        """Line index -> the diagnosis anchors (signatures, context probes, generic errors) it holds."""
        return INDEX.resolve(self.keyed, self.texts, _DIAGNOSIS_GROUPS)

    @cached_property
    def marks(self) -> dict[int, LineMarks]:
        """Line index -> ``LineMarks`` for the lines holding a start-up marker, in line order."""
        found = INDEX.resolve(self.keyed, self.texts, _STARTUP_GROUPS)
        return {idx: LineMarks(self.lines[idx], self.texts[idx], found[idx]) for idx in sorted(found)}

    @cached_property
    def hits(self) -> dict[int, list[str]]:
        """Line index -> every catalogue anchor it holds."""
        return INDEX.resolve(self.keyed, self.texts, _ALL_GROUPS)

    def line(self, idx: int) -> LineMarks:
        """The marks of line ``idx`` (empty for a line holding no marker)."""
        marks = self.marks.get(idx)
        return marks if marks is not None else LineMarks(self.lines[idx], self.texts[idx], ())

    @cached_property
    def starts(self) -> list[int]:
        """Line index -> its offset in ``blob`` (and one past the end)."""
        return line_starts(self.texts)

    def holds_any(self, words: tuple[str, ...], start: int, stop: int) -> bool:
        """Whether any of ``lines[start:stop]`` holds one of ``words`` (found in the batch's text)."""
        if start >= stop:
            return False
        if start == 0 and stop >= len(self.texts):  # the whole batch (a tracker still starting): no offsets
            return any(w in self.blob for w in words)
        lo, hi = self.starts[start], self.starts[stop]
        return any(self.blob.find(w, lo, hi) >= 0 for w in words)


def classify(lines: list[str]) -> ClassifiedBatch:
    """One scan of ``lines`` for every anchor of the catalogue (a line holding an escape sequence is
    scanned without them: a colour code never hides a marker)."""
    blob = "\n".join(lines)
    texts = lines
    if "\x1b" in blob:
        texts = [strip_escapes(x) if "\x1b" in x else x for x in lines]
        blob = "\n".join(texts)
    return ClassifiedBatch(lines, texts, blob, INDEX.scan(blob))


def match_timeline(line: str) -> tuple[str, dict[str, float]] | None:
    """(event, figures) when this log line marks a start-up event."""
    return classify([line]).line(0).timeline
