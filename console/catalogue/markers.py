"""Start-up markers: the log lines that say how far an engine has come (started, loading, KV cache, CUDA
graphs, ready), when a new run begins, which transport NCCL chose, which start-up events the timeline
records, which lines a launch echoes, which lines end a start-up (fatal), and how the log pane colours
a line.

The start-up tracker, the launch follower and the log pane read these through the classifier
(``console.catalogue.classify``); nothing else matches them. Every literal a consumer reacts to is an
anchor in ``STARTUP_ANCHORS``, so one scan of a batch finds every line that matters; a regex here only
runs on a line holding one of its anchors. Every regex is linear in the line length.
"""

from __future__ import annotations

import re
from typing import Literal

import ahocorasick

from console.catalogue.first_of import FirstOf, Literals, Part, RunPart
from console.catalogue.milestones import (
    GRAPHS_END,
    GRAPHS_START,
    KV_CACHE,
    MILESTONES,
    SHARDS_MARKER,
    WEIGHTS_END,
    WEIGHTS_START,
)
from console.catalogue.signatures import EXCEPTION_GATE, EXCEPTION_TYPE, SIGNATURES, TRACEBACK, signature_hits
from console.catalogue.specs import SPECS
from console.line_templates import DIGIT_BYTES, NO_DIGITS, TemplateMemo
from console.sanitize import strip_escapes
from console.vocabulary import EnginePhase, NcclTransport

# Ready = the API serves (vLLM: uvicorn's line; SGLang says so itself).
READY_MARKERS = {
    "vllm": "Application startup complete.",
    "sglang": "The server is fired up and ready to roll!",
}
# The first line a started rank prints: proof its process came up (a worker waits for the head).
STARTED_MARKERS = {
    ("vllm", True): "vLLM API server version",
    ("vllm", False): "headless multiproc executor",
    ("sglang", True): "server_args=ServerArgs(",
    ("sglang", False): "server_args=ServerArgs(",
    ("vllm-ray", True): "Ray runtime started",
    ("vllm-ray", False): "",  # a Ray worker can only join once the head runs: nothing to wait for
}
# Lines that start a new run of the container: the phase starts over.
RESET_MARKERS = ("Launching vLLM", "vLLM API server version", "server_args=ServerArgs")
# A vLLM worker started without its own API server.
HEADLESS_MARKER = "headless multiproc executor"
# The engine shuts down (after ready: it stopped).
SHUTDOWN_MARKER = "Shutting down"
# Start-up phases in the order they happen: (phase, literal marker), from the milestones' rows (the
# weights' shards line, with its percentage in LOAD_PCT, is the loading phase's too); the first marker
# of the table a line holds names its phase.
PHASE_MARKERS: tuple[tuple[EnginePhase, str], ...] = tuple(
    (m.phase, w) for m in MILESTONES if m.phase is not None
    for w in (*m.words, *((SHARDS_MARKER,) if m.phase == EnginePhase.LOADING else ())))
# CUDA graphs captured: the last step of a worker; the head still waits for its API server. SGLang's
# scheduler prints its limits (``max_total_num_tokens=...``) once its model runner is up, after the KV
# cache and the graphs or without graphs (--disable-cuda-graph): a worker serves from there.
GRAPHS_DONE_MARKERS = (*GRAPHS_END.words, "max_total_num_tokens=")
# The figures of a phase: the load percentage, the weights' size (vLLM, SGLang).
LOAD_PCT = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
WEIGHTS_GIB = (re.compile(r"Model loading took ([\d.]+) ?GiB"), re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB"))

# ---------------------------------------------------------------- NCCL transport
# Which transport NCCL chose (console.probes.nccl_transport reads lines with these): a channel line
# (``via NET/IB/0/GDRDMA``) is the evidence, ``Using network`` a hint.
TRANSPORT_VIA = re.compile(r"\bvia NET/(IB|Socket)(?:/\d+)?(/GDRDMA)?")
TRANSPORT_NETWORK = re.compile(r"\bUsing network (IB|Socket)\b")
TRANSPORT_ANCHORS = ("via NET/", "Using network")
CHANNEL_MARKER = " via NET/"
# Any NCCL line: the ranks are finding each other (the phase moves from starting to connecting).
NCCL_WORDS = ("NCCL", "NET/")


def transport_of_text(line: str) -> NcclTransport | None:
    """The transport one NCCL line shows (``via NET/IB/0/GDRDMA`` -> gdrdma), or None."""
    if "NET/" not in line and "Using network" not in line:
        return None
    m = TRANSPORT_VIA.search(line)
    if m:
        if m.group(1) == "Socket":
            return NcclTransport.SOCKET
        return NcclTransport.GDRDMA if m.group(2) else NcclTransport.RDMA
    m = TRANSPORT_NETWORK.search(line)
    if m:
        return NcclTransport.SOCKET if m.group(1) == "Socket" else NcclTransport.RDMA
    return None

# ---------------------------------------------------------------- start-up timeline
# (event, anchors, pattern): the first line matching an event records it (at the line's time); a later
# match of the same event adds its values (vLLM logs the KV cache in two lines). Named groups give the
# figures: gib, seconds, tokens, k, v. Each pattern matches only where one of its anchors is.
TimelineEntry = tuple[str, tuple[str, ...], re.Pattern[str]]
TIMELINE_MARKERS: tuple[TimelineEntry, ...] = tuple((e, a, re.compile(p)) for e, a, p in (
    ("engine-up", ("vLLM API server version", HEADLESS_MARKER, "server_args=ServerArgs("),
     r"vLLM API server version|headless multiproc executor|server_args=ServerArgs\("),
    ("nccl-init", ("Init COMPLETE", "Init torch distributed ends"),
     r"NCCL INFO .*Init COMPLETE|Init torch distributed ends"),
    *((m.id, (*m.words, *m.more), p) for m, p in (
        # a milestone's event: any of its lines runs these (each pattern matches only its own wording)
        (WEIGHTS_START, "|".join(map(re.escape, WEIGHTS_START.words))),
        (WEIGHTS_END, r"Model loading took (?P<gib>[\d.]+) ?GiB(?: memory)? and (?P<seconds>[\d.]+) seconds"),
        (WEIGHTS_END, r"Model loading took (?P<gib>[\d.]+) ?GiB"),
        (WEIGHTS_END, r"Load weight end\..*mem usage=(?P<gib>[\d.]+) GB"),
        (KV_CACHE, r"Available KV cache memory: (?P<gib>[\d.]+) GiB"),
        (KV_CACHE, r"(?:GPU|CPU) KV cache size: (?P<tokens>[\d,]+) tokens"),
        (KV_CACHE, r"KV Cache is allocated\. #tokens: (?P<tokens>\d+), K size: (?P<k>[\d.]+) GB, "
                   r"V size: (?P<v>[\d.]+) GB"),
        (KV_CACHE, r"KV Cache is allocated\. #tokens: (?P<tokens>\d+), KV size: (?P<gib>[\d.]+) GB"),
        (GRAPHS_END, r"Graph capturing finished in (?P<seconds>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?"),
        (GRAPHS_END, r"Capture cuda graph end\. Time elapsed: (?P<seconds>[\d.]+) s"),
    )),
))

# ---------------------------------------------------------------- lines a launch echoes
# The milestones a launch shows as they happen (progress on stderr, the actions screen).
# (of the milestones: the weights loaded, vLLM's KV cache line, the graphs captured; vLLM's graph capture
# only at its first and last percent)
_ECHOED = (*WEIGHTS_END.words, *KV_CACHE.wordings["vllm"])
PROGRESS_LINE = re.compile(
    re.escape(SHARDS_MARKER) + r":\s+\d+%|" + "|".join(map(re.escape, _ECHOED))
    + r"|Capturing CUDA graphs \(decode, FULL\):\s+(?:0|100)%|" + "|".join(map(re.escape, GRAPHS_END.words))
    + r"|Init COMPLETE|Using network|headless multiproc executor|Starting vLLM|fired up")
PROGRESS_ANCHORS = (SHARDS_MARKER, *_ECHOED, *GRAPHS_START.wordings["vllm"], *GRAPHS_END.words,
                    "Init COMPLETE", "Using network", HEADLESS_MARKER, "Starting vLLM", "fired up")

# ---------------------------------------------------------------- fatal lines
# Lines after which the engine is certainly not coming up on its own: the signatures of the ids whose
# spec is ``fatal``, at error severity (these are their anchors; the signature's pattern decides).
FATAL_ANCHORS: tuple[str, ...] = tuple(dict.fromkeys(
    a for s in SIGNATURES if s.role is None and SPECS[s.id].fatal for a in s.anchors))


def fatal_of_text(text: str, anchors: tuple[str, ...] | list[str] | None = None) -> tuple[str, str] | None:
    """(finding id, fix) when this one line means the start-up cannot succeed, else None.

    ``anchors``: the fatal anchors the line is known to hold (the classifier's scan found them), else
    they are looked for here."""
    if anchors is None:
        anchors = [a for a in FATAL_ANCHORS if a in text]
    if not anchors:
        return None
    clean = strip_escapes(text)  # an anchor a colour code split is whole again: look for them all
    for sig, hit in signature_hits(clean, tuple(anchors) if clean is text else FATAL_ANCHORS):
        spec = SPECS[sig.id]
        severity = (hit and hit.severity) or sig.severity or spec.severity
        if spec.fatal and severity == "error":
            return sig.id, (hit and hit.fix) or sig.fix or spec.fix
    return None


# ---------------------------------------------------------------- the NCCL each rank loaded
# NCCL prints its own version at init (NCCL_DEBUG=VERSION or INFO: ``host:pid:tid [0] NCCL INFO NCCL version
# 2.30.3+cuda13.0``; NVIDIA NCCL user guide, troubleshooting/logging) and in its error strings; vLLM's pynccl
# says which library it opened (``INFO 08-31 09:50:46 pynccl.py:63] vLLM is using nccl==2.20.5``, vllm
# #8058; ``pynccl.py:111 vLLM is using nccl==2.30.4``, vllm #40969). The image's env (NCCL_VERSION=...) is
# not evidence: it can be a stale base-image breadcrumb (vllm #46097).
NCCL_VERSION_ANCHORS = ("NCCL version ", "using nccl==")
NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+(?:\.\d+)?))?|"
                          r"\b(\w+) is using nccl==(\d+\.\d+\.\d+)")


def nccl_version_of_text(line: str) -> tuple[str, str] | None:
    """(version, who said it) of one log line: ``("2.30.7", "NCCL 2.30.7+cuda13.0")`` or
    ``("2.30.4", "vLLM is using nccl==2.30.4")``; None when the line names no loaded NCCL."""
    m = NCCL_VERSION.search(line)
    if m is None:
        return None
    if m.group(1):
        return m.group(1), f"NCCL {m.group(1)}" + (f"+cuda{m.group(2)}" if m.group(2) else "")
    return m.group(4), f"{m.group(3)} is using nccl=={m.group(4)}"


# Every literal the start-up consumers react to (the classifier indexes them with the diagnosis anchors).
STARTUP_ANCHORS: tuple[str, ...] = tuple(dict.fromkeys((
    *RESET_MARKERS, *NCCL_VERSION_ANCHORS, *READY_MARKERS.values(), *(m for m in STARTED_MARKERS.values() if m), HEADLESS_MARKER,
    SHUTDOWN_MARKER, *(m for _p, m in PHASE_MARKERS), *GRAPHS_DONE_MARKERS, *TRANSPORT_ANCHORS,
    *(a for _e, anchors, _p in TIMELINE_MARKERS for a in anchors), *PROGRESS_ANCHORS, *FATAL_ANCHORS)))

# ---------------------------------------------------------------- log highlighting
# (pattern, class) for the log pane. Linear-time: literal alternations, bounded classes, possessive runs.
HighlightClass = Literal["prefix", "transport", "ready", "warning", "error"]


def _literals(words) -> str:
    """A pattern matching any of ``words``, shaped as their trie (``(?:a(?:b|c)|d)``): at a position
    the text's next character picks one branch, so a position costs one walk down the trie, not a try
    of every word (the fatal anchors are ~190 of them). It finds what ``a|b|...`` longest first finds:
    the longest word at the leftmost position (a node's ending is its last alternative)."""
    trie: dict = {}
    for w in set(words):
        if w:
            node = trie
            for c in w:
                node = node.setdefault(c, {})
            node[""] = {}
    return _trie_pattern(trie)


def _trie_pattern(node: dict) -> str:
    alts = [re.escape(c) + _trie_pattern(child) for c, child in sorted(node.items()) if c]
    if "" in node:
        alts.append("")
    if not alts or alts == [""]:
        return ""
    if len(alts) == 1:
        return alts[0]
    return "(?:" + "|".join(alts) + ")"


_READY_WORDS = (*READY_MARKERS.values(), "Init COMPLETE")
_ERROR_WORDS = FATAL_ANCHORS + ("NCCL WARN", "timed out", "failed")
HIGHLIGHTS: tuple[tuple[re.Pattern[str] | FirstOf, HighlightClass], ...] = (
    (re.compile(r"^\(\w++ pid=\d++\)|^\[\d{4}-\d\d-\d\d [\d:]++ TP\d++\]"), "prefix"),
    (FirstOf([Part(r"via NET/IB\w*+/\d++(?:/GDRDMA)?|GPU Direct RDMA (?:\(DMABUF\) )?\w++",
                   gate=("via NET/IB", "GPU Direct RDMA"))]), "transport"),
    (FirstOf([Literals(_literals(_READY_WORDS), _READY_WORDS)]), "ready"),
    # the alternations whose parts start with \b or many letters: searched part by part (first_of.py)
    (FirstOf([Part(r"\b(?:WARNING|WARN)\b", r"WARN", needs=("WARN",)),
              Part(r"via NET/Socket\S*+", needs=("via NET/Socket",)),
              Part(r"Using network Socket", needs=("Using network Socket",))]), "warning"),
    (FirstOf([Part(r"\b(?:ERROR|CRITICAL|FATAL)\b", r"(?:ERROR|CRITICAL|FATAL)\b", gate=("ERROR", "CRITICAL", "FATAL")),
              Part(re.escape(TRACEBACK), needs=(TRACEBACK,)),
              RunPart(EXCEPTION_TYPE, gate=EXCEPTION_GATE),
              Part(r"\[E\d{3,4}[ \]]", needs=("[E",)), Literals(_literals(_ERROR_WORDS), _ERROR_WORDS)]), "error"),
)


def _needs_automaton(rows) -> tuple[ahocorasick.Automaton, int, int]:
    """One walk for every class that says which literals its matches hold: each literal without its
    digits (the walk reads a line's digit-free form) -> the classes (bits) that need it; and the bits
    of the classes searched on every line (those that do not say, or need a literal of digits only)."""
    automaton, needed = ahocorasick.Automaton(), {}
    always = 0
    for i, (rx, _kind) in enumerate(rows):
        needs = getattr(rx, "needs", None)
        words = [w.translate(NO_DIGITS) for w in needs] if needs is not None else []
        if needs is None or not all(words):
            always |= 1 << i
            continue
        assert all(w.isascii() for w in words), "a highlight class needs a non-ASCII literal"
        for w in words:
            needed[w] = needed.get(w, 0) | 1 << i
    for w, bits in needed.items():
        automaton.add_word(w, bits)
    automaton.make_automaton()
    return automaton, always, (1 << len(rows)) - 1


_NEEDS, _ALWAYS, _ALL = _needs_automaton(HIGHLIGHTS)


def _walk(forms: list[str]) -> list[int]:
    """Each digit-free form's classes: ``_ALWAYS`` and those it holds a needed literal of."""
    out = []
    for form in forms:
        bits = _ALWAYS
        for _end, need in _NEEDS.iter(form):
            bits |= need
            if bits == _ALL:
                break
        out.append(bits)
    return out


_CLASSES = TemplateMemo(_walk)  # a line's digit-free ASCII form -> the classes to search it for


def _classes(line: str) -> int:
    """The classes (bits of ``HIGHLIGHTS``) a line may hold a match of: those it holds a needed literal
    of, found in its form without digits, non-ASCII characters as ``?`` (a needed literal in the line
    is one in that form, so a class is never skipped wrongly). A flood is lines of a few forms: the
    answer is kept per form (``line_templates.TemplateMemo``), one encode and one look-up a line."""
    return _CLASSES([line.encode("ascii", "replace").translate(None, DIGIT_BYTES).decode("ascii")])[0]


def highlight(line: str) -> list[tuple[int, int, HighlightClass]]:
    """The spans of a (displayed) log line to colour, as (start, end, class), in the order to apply them
    (a later span wins where two overlap). Pure: any widget calls it on the text it shows.

    A class whose matches each hold one of a few literals is searched only on a line that holds one
    (``_classes``): most log lines hold none, and searching every class's parts one by one was most of
    a row's cost on screen (~25 us of ~40 for a 180-character line)."""
    bits = _classes(line)
    return [(m.start(), m.end(), kind) for i, (rx, kind) in enumerate(HIGHLIGHTS) if bits >> i & 1
            for m in rx.finditer(line)]
