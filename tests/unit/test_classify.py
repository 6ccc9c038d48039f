"""The one log classifier: one scan of a batch serves the start-up tracker, the diagnosis and the launch
follower; the monitor hands its scan to the diagnosis with the batch; one escape stripper."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import catalogue as cat
from console.catalogue.classify import ClassifiedBatch, classify
from console.config import parse_config
from console.diagnosis import Diagnoser
from console.probes.engine_log import EngineLogTracker
from console.sanitize import clean, strip_escapes
from console.station.messages import EngineUpdate, LogBatch
from console.station.monitor import StationService

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB."


def log(name: str) -> list[str]:
    return [x for x in (LOGS / name).read_text().splitlines() if not x.startswith("# ")]


def state(t: EngineLogTracker) -> tuple:
    p = t.progress
    return (p.phase, p.load_pct, p.weights_gib, p.transport, p.fatal, p.headless,
            [(e.event, e.detail) for e in p.timeline])


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_a_batch_read_once_moves_the_tracker_as_its_lines_do_one_by_one(name):
    lines = log(name)
    by_line, by_batch = EngineLogTracker("vllm"), EngineLogTracker("vllm")
    for line in lines:
        by_line.feed(line, at=0.0)
    for i in range(0, len(lines), 64):
        by_batch.feed_classified(classify(lines[i:i + 64]), at=0.0)
    assert state(by_batch) == state(by_line)


def test_one_scan_gives_each_consumer_its_lines():
    lines = ["(APIServer pid=1) INFO 11-30 14:05:21 [api_server.py:1896] vLLM API server version 0.30.0",
             "(APIServer pid=1) INFO 11-30 14:05:22 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0",
             "spark-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
             OOM]
    b = classify(lines)
    assert sorted(b.marks) == [0, 2, 3]  # the throughput line means nothing to the start-up
    assert b.marks[0].reset and b.marks[0].timeline == ("engine-up", {})
    assert b.marks[2].transport == "gdrdma" and b.marks[2].channel
    assert b.marks[3].fatal is not None and b.marks[3].fatal[0] == "cuda-oom"
    assert 3 in b.diagnosis and "out of memory" in b.diagnosis[3]
    assert all(a in cat.ANCHORS or a in cat.CONTEXT_ANCHORS or a in cat.GENERIC_ANCHORS
               for anchors in b.diagnosis.values() for a in anchors)


def test_the_diagnoser_reads_the_scan_it_is_given_instead_of_scanning_again():
    lines = ["Loading safetensors checkpoint shards:  60% Completed | 30/50", OOM]
    unscanned = ClassifiedBatch(lines, lines, "\n".join(lines), {})  # a scan that found nothing
    d = Diagnoser()
    assert not d.feed("A", lines, unscanned) and d.ranked() == []
    assert d.feed("B", lines, classify(lines)) and [f.id for f in d.ranked()] == ["cuda-oom"]


def test_the_monitor_classifies_once_and_the_batch_carries_it():
    cfg = parse_config('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n', "x.toml")
    posted: list = []
    svc = StationService(cfg, cfg.stations[0], posted.append)
    for text in ("Loading safetensors checkpoint shards:  20% Completed | 10/50", "noise", OOM):
        svc.logs.ingest("2026-12-01T07:17:09.5Z " + text)
    svc.logs.flush()
    (update,) = [m for m in posted if isinstance(m, EngineUpdate)]
    (batch,) = [m for m in posted if isinstance(m, LogBatch)]
    assert update.progress.phase == "failed" and batch.classified is not None
    assert batch.classified.lines is batch.lines and 2 in batch.classified.diagnosis
    d = Diagnoser()
    d.feed("A", batch.lines, batch.classified)  # what the app does with it
    assert [f.id for f in d.ranked()] == ["cuda-oom"]


def test_the_follower_markers_read_as_in_would():
    worker = cat.STARTED_MARKERS[("vllm-ray", False)]  # a Ray worker waits for nothing: "" is in every line
    assert worker == "" and classify(["anything"]).line(0).holds(worker)
    line = classify(["(APIServer pid=1) INFO:     Application startup complete."]).line(0)
    assert line.holds(cat.READY_MARKERS["vllm"]) and not line.holds(cat.READY_MARKERS["sglang"])
    assert line.holds("startup")  # a marker the catalogue does not list is looked for in the text
    echo = classify(["spark:1:2 [0] NCCL INFO Using network IB", "Capturing CUDA graphs (decode, FULL):  40%"])
    assert echo.line(0).progress and not echo.line(1).progress


def test_a_colour_code_never_hides_a_marker():
    ready = "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup\x1b[0m complete."
    b = classify(["noise", ready])
    assert b.lines[1] == ready and b.texts[1] == "(APIServer pid=1) INFO:     Application startup complete."
    t = EngineLogTracker("vllm")
    assert t.feed_classified(b) and t.progress.phase == "ready"
    split = "torch.OutOfMemoryError: CUDA out of mem\x1b[31mory. Tried to allocate 3.50 GiB."
    assert classify([split]).line(0).fatal[0] == "cuda-oom"


def test_one_escape_stripper():
    assert strip_escapes("plain line") == "plain line"
    s = "x"
    assert strip_escapes(s) is s  # nothing to strip: the same object, no copy
    assert strip_escapes("\x1b[0;36mhi\x1b[0m \x1b]0;title\x07there") == "hi there"
    assert strip_escapes("\x9b31mred") == "red"  # the 8-bit CSI too
    hostile = "a\x1b[31mb\x1b]52;c;AAAA\x07c\x1b(d"
    assert strip_escapes(hostile) == clean(hostile)  # the sequences the screen never shows
    assert strip_escapes("tab\tand ␀ stay") == "tab\tand ␀ stay"


def test_highlight_is_a_pure_function_of_the_shown_line():
    spans = cat.highlight("(APIServer pid=1) ERROR 11-30 14:16:15 [x.py:1] " + OOM)
    kinds = {kind for _s, _e, kind in spans}
    assert kinds == {"prefix", "error"} and spans[0] == (0, 17, "prefix")
    assert cat.highlight("INFO 11-30 14:05:22 Engine 000: Avg prompt throughput: 0.0") == []


def test_holds_any_on_the_whole_batch_and_on_a_part_of_it():
    batch = classify(["a", "x NCCL INFO y", "b"])
    assert batch.holds_any(("NCCL",), 0, 3) and batch.holds_any(("NCCL",), 1, 2)
    assert not batch.holds_any(("NCCL",), 0, 1) and not batch.holds_any(("NCCL",), 2, 3)
    assert not batch.holds_any(("nothing",), 0, 3) and not batch.holds_any(("NCCL",), 1, 1)
