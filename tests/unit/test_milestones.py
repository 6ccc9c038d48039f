"""The start-up milestones are one table (console/catalogue/milestones.py): every wording of
every row is recognised by the one classifier as that row says (its phase, its timeline event, the
graphs done), and the words shown (the launch's timeline, the dashboard's phase) are the rows'."""

from __future__ import annotations

import pytest

from console import catalogue as cat
from console.catalogue.classify import classify
from console.catalogue.milestones import MILESTONES, SHARDS_MARKER, phase_text
from console.probes.engine_log import TIMELINE_LABELS, EngineLogTracker
from console.vocabulary import EnginePhase

# Lines as the engines print them (vLLM V1, SGLang): one a wording, each held by one row.
LINES = {
    "Starting to load model": "(Worker_TP0 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] "
                              "Starting to load model zai-org/GLM-5...",
    "Load weight begin": "[2026-11-30 14:05:21 TP0] Load weight begin. avail mem=117.30 GB",
    "Model loading took": "(Worker_TP0 pid=412) INFO 11-30 14:09:21 [gpu_model_runner.py:2677] Model loading took "
                          "218.00 GiB memory and 230.5 seconds",
    "Load weight end": "[2026-11-30 14:09:30 TP1] Load weight end. type=GlmMoeDsaForCausalLM, mem usage=90.50 GB.",
    "Available KV cache memory": "(Worker_TP0 pid=412) INFO 11-30 14:10:31 [gpu_worker.py:298] Available KV cache "
                                 "memory: 11.45 GiB",
    "KV Cache is allocated": "[2026-11-30 14:09:35 TP1] KV Cache is allocated. #tokens: 305121, KV size: 3.93 GB",
    "KV cache size: ": "(EngineCore_DP0 pid=263) INFO 12-01 11:59:40 [kv_cache_utils.py:1087] GPU KV cache size: "
                       "1,234,560 tokens",
    "Capturing CUDA graphs": "Capturing CUDA graphs (decode, FULL):  40%| 14/35",
    "Capture cuda graph begin": "[2026-11-30 14:09:36 TP0] Capture cuda graph begin. This can take up to several "
                                "minutes. avail mem=20.10 GB",
    "Graph capturing finished": "(Worker_TP0 pid=412) INFO 11-30 14:11:02 [gpu_model_runner.py:3480] Graph capturing "
                                "finished in 31 secs, took 0.52 GiB",
    "Capture cuda graph end": "[2026-11-30 14:09:48 TP0] Capture cuda graph end. Time elapsed: 12.34 s. "
                              "mem usage=0.42 GB.",
}

ROWS = [(m, engine, w) for m in MILESTONES for engine, ws in m.wordings.items() for w in ws]


def _marks(line: str):
    batch = classify([line])
    assert 0 in batch.marks, f"no start-up marker found in {line!r}"
    return batch.marks[0]


@pytest.mark.parametrize("row,engine,wording", ROWS, ids=[f"{m.id}-{e}-{w}" for m, e, w in ROWS])
def test_every_wording_of_every_row_is_classified_as_its_milestone(row, engine, wording):
    line = LINES[wording]  # a wording added to the table needs its real line here
    assert wording in line
    marks = _marks(line)
    assert marks.phase == row.phase
    if row.shown is not None:
        assert marks.timeline is not None and marks.timeline[0] == row.id
    assert marks.graphs_done == (wording in cat.GRAPHS_DONE_MARKERS) == (row.id == "cuda-graphs")


@pytest.mark.parametrize("row", [m for m in MILESTONES if m.more], ids=lambda m: m.id)
def test_a_figures_line_adds_to_its_event_without_a_phase(row):
    for wording in row.more:
        marks = _marks(LINES[wording])
        assert marks.timeline is not None and marks.timeline[0] == row.id and marks.timeline[1]
        assert marks.phase is None


def test_the_words_shown_are_the_rows():
    for m in MILESTONES:
        if m.shown:
            assert TIMELINE_LABELS[m.id] == m.shown
        if m.phase is not None and m.phase != EnginePhase.LOADING:
            assert phase_text(m.phase) == m.phase_shown
    assert phase_text(EnginePhase.LOADING, 30) == "loading weights 30%" and phase_text(EnginePhase.LOADING) == "loading"
    assert TIMELINE_LABELS["weights-end"] == "weights loaded"


def test_the_tracker_walks_the_rows_in_order_for_each_engine():
    for engine in ("vllm", "sglang"):
        t = EngineLogTracker(engine=engine)
        for m in MILESTONES:
            t.feed(LINES[m.wordings[engine][0]], at=1_000.0)
            assert t.progress.phase == (m.phase or EnginePhase.GRAPHS), (engine, m.id)
        assert {e.event for e in t.progress.timeline} >= {m.id for m in MILESTONES if m.shown}


def test_the_shards_line_is_loading_with_its_percentage():
    marks = _marks(f"{SHARDS_MARKER}:  30% Completed | 3/10 [00:10<00:23,  3.3s/it]")
    assert marks.phase == EnginePhase.LOADING and marks.load_pct == 30
